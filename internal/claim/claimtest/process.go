package claimtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/claim"
)

// The race across OS processes. The test binary re-executes itself as N
// children that run only the backend's helper test:
//
//	func TestProcessRace(t *testing.T) {
//		path := filepath.Join(t.TempDir(), "race.db")
//		claimtest.ProcessRace(t, claimtest.ProcessOptions{Env: []string{"MYBACKEND_DB=" + path}})
//	}
//
//	func TestHelperProcess(t *testing.T) {
//		claimtest.HelperProcess(t, claimtest.HelperOptions{
//			Open: func(ctx context.Context) (claim.Backend, error) {
//				return mybackend.New(ctx, mybackend.Options{Path: os.Getenv("MYBACKEND_DB")})
//			},
//		})
//	}
//
// Outside a race HelperProcess returns at once, so the helper test passes
// as a no-op in a normal run.

// processEnv is the environment variable that carries a child's orders; its
// presence makes HelperProcess act.
const processEnv = "ANARCHON_CLAIMTEST_PROCESS"

// Line prefixes of the child's protocol on stdout.
const (
	readyLine  = "claimtest-ready"
	resultLine = "claimtest-result "
)

// ProcessOptions configures ProcessRace.
type ProcessOptions struct {
	Processes  int // child processes (default 3)
	Goroutines int // claimers per child, each with its own token (default 4)
	Slots      int // slots of one job that every claimer claims, in the same order (default 100)
	// Env is added to every child's environment: how the child's
	// HelperProcess finds the shared store (a file path, a DSN, a prefix).
	Env []string
	// Open, if set, opens a backend on the same store in the parent. After
	// the race, on a lease backend, ProcessRace checks that the store's
	// record of each slot names the one winner.
	Open func(t *testing.T) claim.Backend
	// HelperTest is the test function that calls HelperProcess (default
	// "TestHelperProcess").
	HelperTest string
	// Timeout bounds the race (default 2m).
	Timeout time.Duration
}

// processOrders is what the parent tells each child (JSON in processEnv).
type processOrders struct {
	ID         int    `json:"id"`
	Job        string `json:"job"`
	Base       int64  `json:"base"` // first slot, ms
	Step       int64  `json:"step"` // ms between slots
	Slots      int    `json:"slots"`
	Goroutines int    `json:"goroutines"`
}

// processResult is one claim's answer, as a child reports it.
type processResult struct {
	Process int    `json:"process"`
	Slot    int64  `json:"slot"`
	Token   string `json:"token"`
	Outcome string `json:"outcome,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	Error   string `json:"error,omitempty"`
	Retries int    `json:"retries,omitempty"`
}

// ProcessRace starts o.Processes copies of the test binary, each running
// o.HelperTest with o.Goroutines claimers that all claim the same o.Slots
// slots of one job on the shared store, released together once every child
// has opened its backend. It fails t unless every slot was won exactly once
// across all processes, every other answer was running or lost, no claim
// ended in an error, and every child exited cleanly.
func ProcessRace(t *testing.T, o ProcessOptions) {
	t.Helper()
	orDefault(&o.Processes, 3)
	orDefault(&o.Goroutines, 4)
	orDefault(&o.Slots, 100)
	if o.HelperTest == "" {
		o.HelperTest = "TestHelperProcess"
	}
	orDefault(&o.Timeout, 2*time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), o.Timeout)
	defer cancel()

	r := &race{t: t, ctx: ctx, o: o, orders: processOrders{
		Job:        newJob("procrace"),
		Base:       time.Now().Truncate(time.Second).Add(-time.Duration(o.Slots) * time.Second).UnixMilli(),
		Step:       1000,
		Slots:      o.Slots,
		Goroutines: o.Goroutines,
	}}
	r.start()
	defer r.stop()
	r.release()
	checkProcessRace(ctx, t, o, r.orders, r.collect())
}

// race is the parent's side of ProcessRace: the orders it hands out and
// the children it started, shared by the steps that start, release and
// collect them.
type race struct {
	t        *testing.T
	ctx      context.Context
	o        ProcessOptions
	orders   processOrders
	children []*child
}

// start starts one child per process, each with its own ID in the orders.
func (r *race) start() {
	r.t.Helper()
	r.children = make([]*child, r.o.Processes)
	orders := r.orders
	for i := range r.children {
		orders.ID = i
		c, err := startChild(r.ctx, r.o, orders)
		if err != nil {
			r.t.Fatalf("start race process %d: %v", i, err)
		}
		r.children[i] = c
	}
}

// stop kills whatever children are still running, after a failure.
func (r *race) stop() {
	for _, c := range r.children {
		c.stop()
	}
}

// release releases the claimers together once every child has its
// backend open: it waits for every child's ready line, then sends each
// its go.
func (r *race) release() {
	r.t.Helper()
	for i, c := range r.children {
		select {
		case <-c.ready:
		case <-c.exited:
			r.t.Fatalf("race process %d exited before it was ready (is %s calling claimtest.HelperProcess?): %v\n%s",
				i, r.o.HelperTest, c.waitErr(), c.output())
		case <-r.ctx.Done():
			r.t.Fatalf("race process %d not ready within %v:\n%s", i, r.o.Timeout, c.output())
		}
	}
	for i, c := range r.children {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			r.t.Fatalf("release race process %d: %v", i, err)
		}
		c.stdin.Close()
	}
}

// collect waits for every child to exit cleanly and returns the answers
// they reported, in child order.
func (r *race) collect() []processResult {
	r.t.Helper()
	var results []processResult
	for i, c := range r.children {
		select {
		case <-c.exited:
		case <-r.ctx.Done():
			r.t.Fatalf("race process %d did not finish within %v:\n%s", i, r.o.Timeout, c.output())
		}
		if err := c.waitErr(); err != nil {
			r.t.Fatalf("race process %d failed: %v\n%s", i, err, c.output())
		}
		results = append(results, c.results...)
	}
	return results
}

// checkProcessRace asserts one winner per slot across the children.
func checkProcessRace(ctx context.Context, t *testing.T, o ProcessOptions, orders processOrders, results []processResult) {
	t.Helper()
	if want := o.Processes * o.Goroutines * o.Slots; len(results) != want {
		t.Fatalf("the children reported %d answers, want %d (%d processes × %d goroutines × %d slots)",
			len(results), want, o.Processes, o.Goroutines, o.Slots)
	}
	tally := raceTally{winners: map[int64][]processResult{}, perProcess: make([]int, o.Processes)}
	for _, r := range results {
		tally.add(r)
	}
	tally.checkSlots(o, orders)
	t.Logf("%d processes × %d goroutines × %d slots: wins per process %v, %d transient errors re-sent",
		o.Processes, o.Goroutines, o.Slots, tally.perProcess, tally.retries)
	if problems := tally.problems; len(problems) > 0 {
		if len(problems) > 20 {
			problems = append(problems[:20], fmt.Sprintf("... and %d more", len(problems)-20))
		}
		t.Fatalf("claimers in separate processes must get exactly one won per slot and no errors:\n  %s",
			strings.Join(problems, "\n  "))
	}
	checkRaceRecords(ctx, t, o, orders, tally.winners)
}

// raceTally sums up the children's answers: the winners of each slot, the
// wins of each process, the transient errors re-sent, and every answer
// that breaks the rules, as a line for the failure message.
type raceTally struct {
	winners    map[int64][]processResult
	perProcess []int
	problems   []string
	retries    int
}

// add counts one answer: an error or a won other than won(1) is a
// problem, and so is any outcome but won, running or lost.
func (y *raceTally) add(r processResult) {
	y.retries += r.Retries
	switch {
	case r.Error != "":
		y.problems = append(y.problems, fmt.Sprintf("process %d slot %d: error %s", r.Process, r.Slot, r.Error))
	case r.Outcome == string(claim.Won):
		y.winners[r.Slot] = append(y.winners[r.Slot], r)
		y.perProcess[r.Process]++
		if r.Attempt != 1 {
			y.problems = append(y.problems, fmt.Sprintf("process %d slot %d: won(%d), want won(1)", r.Process, r.Slot, r.Attempt))
		}
	case r.Outcome != string(claim.Running) && r.Outcome != string(claim.Lost):
		y.problems = append(y.problems, fmt.Sprintf("process %d slot %d: %s, want won, running or lost", r.Process, r.Slot, r.Outcome))
	}
}

// checkSlots adds a problem for every slot of the race that was not won
// exactly once, naming who won it.
func (y *raceTally) checkSlots(o ProcessOptions, orders processOrders) {
	for i := range o.Slots {
		slot := orders.Base + int64(i)*orders.Step
		if w := y.winners[slot]; len(w) != 1 {
			var who []string
			for _, r := range w {
				who = append(who, fmt.Sprintf("process %d token %s", r.Process, claim.Token(r.Token).Short()))
			}
			y.problems = append(y.problems, fmt.Sprintf("slot %d: %d winners %v, want exactly 1", slot, len(w), who))
		}
	}
}

// checkRaceRecords checks, when o.Open is set and opens a lease backend,
// that the store's record of each slot names its one winner at attempt 1.
func checkRaceRecords(ctx context.Context, t *testing.T, o ProcessOptions, orders processOrders, winners map[int64][]processResult) {
	t.Helper()
	if o.Open == nil {
		return
	}
	l, ok := o.Open(t).(claim.Leaser)
	if !ok {
		return
	}
	for slot, w := range winners {
		run, _, err := l.Read(ctx, orders.Job, slot)
		if err != nil {
			t.Fatalf("read slot %d after the race: %v", slot, err)
		}
		if string(run.Token) != w[0].Token || run.Attempt != 1 {
			t.Fatalf("the store's record of slot %d (token %s attempt %d) must name the winner (process %d token %s)",
				slot, run.Token.Short(), run.Attempt, w[0].Process, claim.Token(w[0].Token).Short())
		}
	}
}

// child is one running race process.
type child struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	ready   chan struct{} // closed when the child said it is ready
	exited  chan struct{} // closed when the child exited and its output was read
	mu      sync.Mutex
	out     bytes.Buffer // stdout lines that are not results, and stderr
	results []processResult
	err     error
}

func startChild(ctx context.Context, o ProcessOptions, orders processOrders) (*child, error) {
	spec, err := json.Marshal(orders)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+o.HelperTest+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), o.Env...), processEnv+"="+string(spec))
	c := &child{cmd: cmd, ready: make(chan struct{}), exited: make(chan struct{})}
	cmd.Stderr = &lockedWriter{mu: &c.mu, w: &c.out}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		c.read(stdout)
		err := cmd.Wait()
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.exited)
	}()
	return c, nil
}

// read parses the child's stdout until EOF.
func (c *child) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	readyOnce := sync.OnceFunc(func() { close(c.ready) })
	for sc.Scan() {
		line := sc.Text()
		c.mu.Lock()
		switch {
		case line == readyLine:
			readyOnce()
		case strings.HasPrefix(line, resultLine):
			var pr processResult
			if err := json.Unmarshal([]byte(line[len(resultLine):]), &pr); err != nil {
				fmt.Fprintf(&c.out, "unparsable result line %q: %v\n", line, err)
			} else {
				c.results = append(c.results, pr)
			}
		default:
			c.out.WriteString(line + "\n")
		}
		c.mu.Unlock()
	}
}

func (c *child) waitErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// stop kills a child that is still running (after a failure) and waits.
func (c *child) stop() {
	select {
	case <-c.exited:
		return
	default:
	}
	c.stdin.Close()
	if c.cmd.Process != nil {
		c.cmd.Process.Kill()
	}
	<-c.exited
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// HelperOptions tells HelperProcess how to reach the shared store.
type HelperOptions struct {
	// Open opens a backend on the store named by ProcessOptions.Env.
	Open func(ctx context.Context) (claim.Backend, error)
	// Transient reports the errors to re-send with the same token, as in
	// Harness.Transient.
	Transient func(err error) bool
}

// HelperProcess is the body of the helper test that ProcessRace runs in
// each child. Outside a race (its environment variable unset) it returns
// at once. In a race it opens the backend, says it is ready, waits for the
// parent's go, claims the slots it was given with its goroutines (each its
// own token) and reports every answer on stdout.
func HelperProcess(t *testing.T, o HelperOptions) {
	spec := os.Getenv(processEnv)
	if spec == "" {
		return
	}
	var orders processOrders
	if err := json.Unmarshal([]byte(spec), &orders); err != nil {
		t.Fatalf("bad %s: %v", processEnv, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b, err := o.Open(ctx)
	if err != nil {
		t.Fatalf("race process %d: open backend: %v", orders.ID, err)
	}
	defer b.Close()
	fmt.Println(readyLine)
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "go" {
		t.Fatalf("race process %d: waiting for the parent's go: read %q, %v", orders.ID, line, err)
	}
	h := &helper{ctx: ctx, o: o, orders: orders, b: b}
	h.report(t, h.claimAll())
}

// helper is a child's side of ProcessRace: its orders and the backend its
// claimers share.
type helper struct {
	ctx    context.Context
	o      HelperOptions
	orders processOrders
	b      claim.Backend
}

// claimAll runs the child's claimers, released together, each with its
// own token claiming every slot in order, and returns each one's answers.
func (h *helper) claimAll() [][]processResult {
	results := make([][]processResult, h.orders.Goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range h.orders.Goroutines {
		wg.Go(func() {
			tok := claim.NewToken()
			<-start
			for i := range h.orders.Slots {
				results[g] = append(results[g], h.claim(g, tok, i))
			}
		})
	}
	close(start)
	wg.Wait()
	return results
}

// claim makes claimer g's claim of slot i with its token, re-sending it
// with the same token on a transient error while the race has time left.
func (h *helper) claim(g int, tok claim.Token, i int) processResult {
	now := time.Now()
	r := claim.Request{
		Job: h.orders.Job, Slot: h.orders.Base + int64(i)*h.orders.Step, Token: tok,
		Instance: fmt.Sprintf("proc%d-g%d", h.orders.ID, g), MaxLate: time.Hour, Lease: time.Minute,
		MaxAttempts: 3, Overlap: claim.OverlapAllow, Now: now,
	}
	pr := processResult{Process: h.orders.ID, Slot: r.Slot, Token: string(tok)}
	for {
		res, err := h.b.Claim(h.ctx, r)
		if err != nil && h.o.Transient != nil && h.o.Transient(err) && h.ctx.Err() == nil {
			pr.Retries++
			continue
		}
		if err != nil {
			pr.Error = err.Error()
		} else {
			pr.Outcome, pr.Attempt = string(res.Outcome), res.Attempt
		}
		return pr
	}
}

// report writes every answer to stdout as a result line.
func (h *helper) report(t *testing.T, results [][]processResult) {
	// One writer, whole lines: the parent parses them.
	w := bufio.NewWriter(os.Stdout)
	for _, rs := range results {
		for _, pr := range rs {
			js, _ := json.Marshal(pr)
			fmt.Fprintf(w, "%s%s\n", resultLine, js)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatalf("race process %d: write results: %v", h.orders.ID, err)
	}
}
