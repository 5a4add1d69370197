package check

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/anarchon/anarchon/internal/status"
)

// Run is what Load read from one run's directory: everything the checks
// look at, each piece with the file and line it came from.
type Run struct {
	Dir  string
	Info RunInfo
	// Faults are faults.jsonl's lines in file order.
	Faults []FaultLine
	// Entries are the journal records of every instance, journal by
	// journal, in file order.
	Entries []Entry
	// Events are the daemon-log lines the checks use (see keepEvent).
	Events []Event
	// Status holds status.jsonl's rows; HasStatus is false when the file
	// is missing.
	Status    []StatusRow
	HasStatus bool
	// Problems are journal lines that could not be read: violations of
	// kind "journal".
	Problems []Violation
	// Notes are remarks on what was missing or skipped while reading.
	Notes []string
}

// FaultLine is one line of faults.jsonl.
type FaultLine struct {
	Fault
	Line int
}

// Entry is one journal record with its origin. Inst is the instance whose
// journal holds it (journal-<Inst>.log).
type Entry struct {
	Record
	Inst int
	File string
	Line int
	Raw  string
}

// IsStart reports whether e is a start record.
func (e Entry) IsStart() bool { return e.Fence == "-" }

// Where is the entry's file:line and its text.
func (e Entry) Where() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Raw) }

// Event is one daemon-log line that a check uses. Fields the line lacks
// are zero; HasSlot tells whether SlotMs was read.
type Event struct {
	Inst    int
	File    string
	Line    int
	TsMs    int64
	Msg     string
	Job     string
	SlotMs  int64
	HasSlot bool
	Outcome string
	Attempt int
	Token   string // the token's prefix, as the daemon logs it
	FirstMs int64  // "missed:" lines
	LastMs  int64
	// LeaseUntilMs is the lease's end in store time (unix ms) that the
	// runner's "job started" line names; HasLease tells whether it did.
	LeaseUntilMs int64
	HasLease     bool
	Raw          string
}

// Where is the event's file:line and its text.
func (e Event) Where() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Raw) }

// StatusRow is one line of status.jsonl.
type StatusRow struct {
	status.Record
	Line int
}

// Where is the row's file:line and a short form of it.
func (s StatusRow) Where() string {
	exit := "null"
	if s.ExitCode != nil {
		exit = strconv.Itoa(*s.ExitCode)
	}
	return fmt.Sprintf("status.jsonl:%d: job=%s slot=%d status=%s attempt=%d instance=%s token=%s exit_code=%s",
		s.Line, s.Job, s.SlotMs, s.Status, s.Attempt, s.Instance, s.Token, exit)
}

// maxLine bounds one line of any file (a daemon log line with a long error).
const maxLine = 4 << 20

// Load reads the run in dir: run.json (required), faults.jsonl,
// journal-<i>.log and daemon-<i>.log for every instance, and status.jsonl.
// A missing journal, daemon log or faults file reads as empty; a missing
// status file sets HasStatus false. Unreadable journal lines become
// Problems, not errors; any other unreadable line is an error naming the
// file and line.
func Load(dir string) (*Run, error) {
	r := &Run{Dir: dir}
	if err := readRunInfo(filepath.Join(dir, "run.json"), &r.Info); err != nil {
		return nil, err
	}
	if r.Info.Instances <= 0 {
		return nil, fmt.Errorf("read %s: instances %d: want at least 1", filepath.Join(dir, "run.json"), r.Info.Instances)
	}
	if err := r.readFaults(filepath.Join(dir, "faults.jsonl")); err != nil {
		return nil, err
	}
	for i := range r.Info.Instances {
		if err := r.readJournal(dir, i); err != nil {
			return nil, err
		}
		if err := r.readDaemonLog(dir, i); err != nil {
			return nil, err
		}
	}
	if err := r.readStatus(filepath.Join(dir, "status.jsonl")); err != nil {
		return nil, err
	}
	return r, nil
}

func readRunInfo(path string, info *RunInfo) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read run info: %w", err)
	}
	if err := json.Unmarshal(b, info); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// eachLine calls fn with every line of path (without its newline) and its
// 1-based number. A missing file reports missing=true and no error.
func eachLine(path string, fn func(line []byte, n int) error) (missing bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	n := 0
	for sc.Scan() {
		n++
		if err := fn(sc.Bytes(), n); err != nil {
			return false, err
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("read %s after line %d: %w", path, n, err)
	}
	return false, nil
}

func (r *Run) readFaults(path string) error {
	missing, err := eachLine(path, func(line []byte, n int) error {
		if len(bytes.TrimSpace(line)) == 0 {
			return nil
		}
		var f Fault
		if err := json.Unmarshal(line, &f); err != nil {
			return fmt.Errorf("read %s:%d: %w", path, n, err)
		}
		r.Faults = append(r.Faults, FaultLine{Fault: f, Line: n})
		return nil
	})
	if missing {
		r.Notes = append(r.Notes, "faults.jsonl missing: read as no faults")
	}
	return err
}

func (r *Run) readJournal(dir string, i int) error {
	name := fmt.Sprintf("journal-%d.log", i)
	_, err := eachLine(filepath.Join(dir, name), func(line []byte, n int) error {
		raw := string(line)
		if strings.TrimSpace(raw) == "" {
			return nil
		}
		rec, err := ParseRecord(raw)
		if err != nil {
			r.Problems = append(r.Problems, Violation{
				Kind:     KindJournal,
				Evidence: fmt.Sprintf("%s:%d: unreadable record (%v): %q", name, n, err, raw),
			})
			return nil
		}
		r.Entries = append(r.Entries, Entry{Record: rec, Inst: i, File: name, Line: n, Raw: raw})
		return nil
	})
	return err
}

// ParseRecord parses one journal line:
//
//	job slot_ms attempt token instance start_ms end_ms exit fence
//
// In a start record end_ms, exit and fence are "-" (end_ms "0" and exit
// "-1" are accepted too); EndMs is then 0 and Exit -1.
func ParseRecord(line string) (Record, error) {
	f := strings.Fields(line)
	if len(f) != 9 {
		return Record{}, fmt.Errorf("%d fields, want 9", len(f))
	}
	var rec Record
	var err error
	rec.Job, rec.Token, rec.Instance, rec.Fence = f[0], f[3], f[4], f[8]
	if rec.SlotMs, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return Record{}, fmt.Errorf("slot_ms: %w", err)
	}
	if rec.Attempt, err = strconv.Atoi(f[2]); err != nil || rec.Attempt < 1 {
		return Record{}, fmt.Errorf("attempt %q: want a positive integer", f[2])
	}
	if rec.StartMs, err = strconv.ParseInt(f[5], 10, 64); err != nil {
		return Record{}, fmt.Errorf("start_ms: %w", err)
	}
	switch rec.Fence {
	case "-":
		rec.EndMs, rec.Exit = 0, -1
		if (f[6] != "-" && f[6] != "0") || (f[7] != "-" && f[7] != "-1") {
			return Record{}, fmt.Errorf("start record with end_ms %q exit %q", f[6], f[7])
		}
	case "ok", "rejected":
		if rec.EndMs, err = strconv.ParseInt(f[6], 10, 64); err != nil {
			return Record{}, fmt.Errorf("end_ms: %w", err)
		}
		if rec.Exit, err = strconv.Atoi(f[7]); err != nil {
			return Record{}, fmt.Errorf("exit: %w", err)
		}
		if rec.EndMs < rec.StartMs {
			return Record{}, fmt.Errorf("end_ms %d before start_ms %d", rec.EndMs, rec.StartMs)
		}
	default:
		return Record{}, fmt.Errorf("fence %q: want -, ok or rejected", rec.Fence)
	}
	return rec, nil
}

// The daemon-log messages the checks use (docs/spec.md and internal/scheduler,
// internal/runner): exact messages and prefixes.
const (
	msgClaim        = "claim"   // fields job, slot, outcome, attempt (won), token
	msgMissedPrefix = "missed:" // fields job, first, last
	// msgGivenUpPrefix: a start gave up the catch-up of the job's slots
	// within maxLate before its start (field start, the daemon's clock).
	msgGivenUpPrefix  = "catch-up given up"
	msgAbandonPrefix  = "claim abandoned" // fields job, slot, token
	msgNotStarted     = "job not started" // prefix; fields job, slot, attempt, token
	msgCouldNotStart  = "job could not be started"
	msgNotRecordedPfx = "result not recorded"                     // prefix; fields job, slot, attempt, token
	msgRecordRetryPfx = "recording the result failed"             // prefix: the first write failed, retried
	msgRenewFailedPfx = "store unreachable: lease renewal failed" // prefix; fields job, slot, attempt, token
	msgSelfFencedPfx  = "fenced by my own clock"                  // prefix; fields job, slot, attempt, token
	// The runner logs these once the job's process has exited.
	msgStoppedPrefix  = "job stopped after fencing" // prefix
	msgReleasedPrefix = "lease released"            // prefix
	msgNotReleasedPfx = "lease not released"        // prefix
	msgFinished       = "job finished"
	// msgStarted is logged once the job's process is started; on a lease
	// backend with lease_until, the lease's end in store time.
	msgStarted = "job started"
)

// keepEvent reports whether a daemon-log message matters to a check.
func keepEvent(msg string) bool {
	return msg == msgClaim || msg == msgCouldNotStart || msg == msgFinished || msg == msgStarted ||
		strings.HasPrefix(msg, msgMissedPrefix) ||
		strings.HasPrefix(msg, msgGivenUpPrefix) ||
		strings.HasPrefix(msg, msgStoppedPrefix) ||
		strings.HasPrefix(msg, msgReleasedPrefix) ||
		strings.HasPrefix(msg, msgNotReleasedPfx) ||
		strings.HasPrefix(msg, msgAbandonPrefix) ||
		strings.HasPrefix(msg, msgNotStarted) ||
		strings.HasPrefix(msg, msgNotRecordedPfx) ||
		strings.HasPrefix(msg, msgRecordRetryPfx) ||
		strings.HasPrefix(msg, msgRenewFailedPfx) ||
		strings.HasPrefix(msg, msgSelfFencedPfx)
}

// logLine is the subset of a zap JSON line the checks read. Times are
// kept raw: zap writes them as strings with the project's encoder, but a
// number (epoch seconds) is accepted too.
type logLine struct {
	Ts      json.RawMessage `json:"ts"`
	Msg     string          `json:"msg"`
	Job     string          `json:"job"`
	Slot    json.RawMessage `json:"slot"`
	Outcome string          `json:"outcome"`
	Attempt int             `json:"attempt"`
	Token   string          `json:"token"`
	First   json.RawMessage `json:"first"`
	Last    json.RawMessage `json:"last"`
	Start   json.RawMessage `json:"start"`
	// LeaseUntil: zap.Time, the lease's end in store time.
	LeaseUntil json.RawMessage `json:"lease_until"`
}

func (r *Run) readDaemonLog(dir string, i int) error {
	name := fmt.Sprintf("daemon-%d.log", i)
	missing, err := eachLine(filepath.Join(dir, name), func(line []byte, n int) error {
		ev, ok := ParseEvent(line)
		if !ok {
			return nil
		}
		ev.Inst, ev.File, ev.Line = i, name, n
		r.Events = append(r.Events, ev)
		return nil
	})
	if missing {
		r.Notes = append(r.Notes, name+" missing")
	}
	return err
}

// ParseEvent reads one daemon-log line. It returns ok=false for a line that
// is not JSON, has no msg, or carries a message no check uses.
func ParseEvent(line []byte) (Event, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return Event{}, false
	}
	var l logLine
	if err := json.Unmarshal(line, &l); err != nil || !keepEvent(l.Msg) {
		return Event{}, false
	}
	ev := Event{Msg: l.Msg, Job: l.Job, Outcome: l.Outcome, Attempt: l.Attempt, Token: l.Token, Raw: string(line)}
	ev.TsMs, _ = parseLogTime(l.Ts)
	ev.SlotMs, ev.HasSlot = parseLogTime(l.Slot)
	ev.FirstMs, _ = parseLogTime(l.First)
	ev.LastMs, _ = parseLogTime(l.Last)
	if strings.HasPrefix(l.Msg, msgGivenUpPrefix) {
		// The slots given up end at the start; check.go sets the first
		// from the job's maxLate.
		ev.LastMs, _ = parseLogTime(l.Start)
	}
	ev.LeaseUntilMs, ev.HasLease = parseLogTime(l.LeaseUntil)
	return ev, true
}

// parseLogTime reads a time as the daemon logs it: zap.Time with the
// project's encoder (internal/logging: RFC 3339 with nanoseconds, e.g.
// "2026-05-01T10:00:05Z") or the runner's slot string (RFC 3339, UTC,
// milliseconds only when non-zero). A JSON number is taken as epoch
// seconds (zap's default encoder). It returns unix milliseconds.
func parseLogTime(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, false
		}
		return t.UnixMilli(), true
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err == nil {
		return int64(f*1000 + 0.5), true
	}
	return 0, false
}

func (r *Run) readStatus(path string) error {
	missing, err := eachLine(path, func(line []byte, n int) error {
		if len(bytes.TrimSpace(line)) == 0 {
			return nil
		}
		var rec status.Record
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("read %s:%d: %w", path, n, err)
		}
		r.Status = append(r.Status, StatusRow{Record: rec, Line: n})
		return nil
	})
	r.HasStatus = !missing
	if missing {
		r.Notes = append(r.Notes, "status.jsonl missing: the result checks are skipped")
	}
	return err
}
