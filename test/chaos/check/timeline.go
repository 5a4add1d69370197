package check

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// open is the To of a span that nothing closed before the end of the run.
const open = math.MaxInt64

// span is the interval [From, To) of wall-clock ms during which something
// held (an instance ran, was paused, was cut off; the store was down).
type span struct {
	From, To int64
	Kind     FaultKind // the fault that opened it (empty for an initial start)
	Line     int       // its line in faults.jsonl (0: the run's start)
}

// dur is the span's length, an open span ending at end.
func (s span) dur(end int64) int64 { return min(s.To, end) - s.From }

// meets reports whether s holds at some instant of the closed range [a, b].
func (s span) meets(a, b int64) bool { return s.From <= b && s.To > a }

// slowSpan is a span during which the proxy delayed every chunk of an
// instance's store traffic, each direction, by LatencyMs.
type slowSpan struct {
	span
	LatencyMs int64
}

// skewChange is one skew fault: the instance's clock offset moved by Delta.
type skewChange struct {
	At, Delta int64
	Line      int
}

// timeline is the state of every instance, its proxy and the store over the
// run, rebuilt from faults.jsonl.
type timeline struct {
	n         int
	start     int64
	end       int64        // the last instant any file speaks of
	alive     [][]span     // per instance: running (started, not killed)
	paused    [][]span     // per instance: SIGSTOP .. SIGCONT (or kill)
	cut       [][]span     // per instance: cut/blackhole .. heal
	slow      [][]slowSpan // per instance: latency .. heal
	storeDown []span
	skews     [][]skewChange
	deaths    [][]FaultLine // per instance: kill and stop-instance faults
	starts    [][]int64     // per instance: the instants of its start faults
	faults    []FaultLine   // sorted by time
	// sharedFile: the backend is sqlite, whose instances share one database
	// file: a paused instance may hold its write lock and freeze every
	// instance's writes, so any instance's pause is a store outage too.
	sharedFile bool
}

// outage is a span during which the store could not be written by anyone,
// with why.
type outage struct {
	span
	why string
}

// endOfRun is the latest instant any of the run's files mentions, and at
// least RunInfo.EndMs.
func endOfRun(r *Run) int64 {
	end := r.Info.EndMs
	for _, f := range r.Faults {
		end = max(end, f.AtMs)
	}
	for _, e := range r.Entries {
		end = max(end, e.StartMs, e.EndMs)
	}
	return end
}

// buildTimeline replays the faults. An instance whose first lifecycle
// fault is "start" is taken as not running before it; any other instance
// runs from RunInfo.StartMs. Quiesce heals everything and counts as every
// instance running.
func buildTimeline(r *Run) *timeline {
	b := newTimelineBuilder(r)
	for _, f := range b.tl.faults {
		b.apply(f)
	}
	b.closeAll()
	return b.tl
}

// timelineBuilder is the timeline being replayed with the spans still open
// (nil: none) and each instance's current clock offset.
type timelineBuilder struct {
	tl        *timeline
	aliveOpen []*span
	pauseOpen []*span
	cutOpen   []*span
	slowOpen  []*slowSpan
	downOpen  *span
	skew      []int64
}

// newTimelineBuilder starts the replay: the faults sorted by time, and an
// alive span from the run's start for every instance whose first lifecycle
// fault is not "start".
func newTimelineBuilder(r *Run) *timelineBuilder {
	n := r.Info.Instances
	tl := &timeline{
		n: n, start: r.Info.StartMs, end: endOfRun(r),
		alive: make([][]span, n), paused: make([][]span, n), cut: make([][]span, n), slow: make([][]slowSpan, n),
		skews: make([][]skewChange, n), deaths: make([][]FaultLine, n), starts: make([][]int64, n),
		sharedFile: r.Info.Backend == "sqlite",
	}
	tl.faults = slices.Clone(r.Faults)
	slices.SortStableFunc(tl.faults, func(a, b FaultLine) int { return cmp.Compare(a.AtMs, b.AtMs) })
	b := &timelineBuilder{
		tl:        tl,
		aliveOpen: make([]*span, n),
		pauseOpen: make([]*span, n),
		cutOpen:   make([]*span, n),
		slowOpen:  make([]*slowSpan, n),
		skew:      make([]int64, n),
	}
	for i := range n {
		if first := firstLifecycle(tl.faults, i); first != FaultStart {
			b.aliveOpen[i] = &span{From: r.Info.StartMs, To: open}
		}
	}
	return b
}

// closeSpan ends the open span *s (if any) at at and adds it to list.
func closeSpan(list *[]span, s **span, at int64) {
	if *s != nil {
		(*s).To = at
		*list = append(*list, **s)
		*s = nil
	}
}

// closeSlow ends instance i's open latency span (if any) at at.
func (b *timelineBuilder) closeSlow(i int, at int64) {
	if b.slowOpen[i] != nil {
		b.slowOpen[i].To = at
		b.tl.slow[i] = append(b.tl.slow[i], *b.slowOpen[i])
		b.slowOpen[i] = nil
	}
}

// apply replays one fault. A fault naming an instance the run does not
// have changes nothing (the store's faults and the quiesce name none).
func (b *timelineBuilder) apply(f FaultLine) {
	tl := b.tl
	i := f.Instance
	valid := i >= 0 && i < tl.n
	switch f.Kind {
	case FaultKill, FaultStopInstance, FaultStart, FaultStop, FaultCont:
		if valid {
			b.applyLifecycle(i, f)
		}
	case FaultCut, FaultBlackhole, FaultLatency, FaultHeal:
		if valid {
			b.applyProxy(i, f)
		}
	case FaultStoreDown:
		if b.downOpen == nil {
			b.downOpen = &span{From: f.AtMs, To: open, Kind: f.Kind, Line: f.Line}
		}
	case FaultStoreUp:
		closeSpan(&tl.storeDown, &b.downOpen, f.AtMs)
	case FaultSkew:
		if valid {
			tl.skews[i] = append(tl.skews[i], skewChange{At: f.AtMs, Delta: f.SkewMs - b.skew[i], Line: f.Line})
			b.skew[i] = f.SkewMs
		}
	case FaultQuiesce:
		b.quiesce(f)
	}
}

// applyLifecycle replays a kill, stop-instance, start, SIGSTOP or SIGCONT
// of instance i (known).
func (b *timelineBuilder) applyLifecycle(i int, f FaultLine) {
	tl := b.tl
	switch f.Kind {
	case FaultKill, FaultStopInstance:
		closeSpan(&tl.alive[i], &b.aliveOpen[i], f.AtMs)
		closeSpan(&tl.paused[i], &b.pauseOpen[i], f.AtMs)
		tl.deaths[i] = append(tl.deaths[i], f)
	case FaultStart:
		tl.starts[i] = append(tl.starts[i], f.AtMs)
		if b.aliveOpen[i] == nil {
			b.aliveOpen[i] = &span{From: f.AtMs, To: open, Kind: f.Kind, Line: f.Line}
		}
	case FaultStop:
		if b.pauseOpen[i] == nil {
			b.pauseOpen[i] = &span{From: f.AtMs, To: open, Kind: f.Kind, Line: f.Line}
		}
	case FaultCont:
		closeSpan(&tl.paused[i], &b.pauseOpen[i], f.AtMs)
	}
}

// applyProxy replays a cut, blackhole, latency or heal of instance i's
// proxy (i known).
func (b *timelineBuilder) applyProxy(i int, f FaultLine) {
	switch f.Kind {
	case FaultCut, FaultBlackhole:
		if b.cutOpen[i] == nil {
			b.cutOpen[i] = &span{From: f.AtMs, To: open, Kind: f.Kind, Line: f.Line}
		}
	case FaultLatency:
		var ms int64
		if _, err := fmt.Sscanf(f.Detail, "latency %dms", &ms); err == nil && b.slowOpen[i] == nil {
			b.slowOpen[i] = &slowSpan{span{From: f.AtMs, To: open, Kind: f.Kind, Line: f.Line}, ms}
		}
	case FaultHeal:
		closeSpan(&b.tl.cut[i], &b.cutOpen[i], f.AtMs)
		b.closeSlow(i, f.AtMs)
	}
}

// quiesce replays the quiesce: every pause, cut, latency and store outage
// ends, and every instance not running is taken as running from then.
func (b *timelineBuilder) quiesce(f FaultLine) {
	tl := b.tl
	for j := range tl.n {
		closeSpan(&tl.paused[j], &b.pauseOpen[j], f.AtMs)
		closeSpan(&tl.cut[j], &b.cutOpen[j], f.AtMs)
		b.closeSlow(j, f.AtMs)
		if b.aliveOpen[j] == nil {
			b.aliveOpen[j] = &span{From: f.AtMs, To: open, Kind: f.Kind, Line: f.Line}
		}
	}
	closeSpan(&tl.storeDown, &b.downOpen, f.AtMs)
}

// closeAll adds every span still open after the last fault with To open:
// nothing closed it before the end of the run.
func (b *timelineBuilder) closeAll() {
	tl := b.tl
	for i := range tl.n {
		closeSpan(&tl.alive[i], &b.aliveOpen[i], open)
		closeSpan(&tl.paused[i], &b.pauseOpen[i], open)
		closeSpan(&tl.cut[i], &b.cutOpen[i], open)
		b.closeSlow(i, open)
	}
	closeSpan(&tl.storeDown, &b.downOpen, open)
}

// firstLifecycle returns the kind of the first start, kill or stop-instance
// fault of instance i, or "" if there is none.
func firstLifecycle(faults []FaultLine, i int) FaultKind {
	for _, f := range faults {
		if f.Instance == i && (f.Kind == FaultStart || f.Kind == FaultKill || f.Kind == FaultStopInstance) {
			return f.Kind
		}
	}
	return ""
}

// unhealthy returns why instance i was not running with a working proxy
// throughout [a, b], or "" when it was. Latency does not count.
func (tl *timeline) unhealthy(i int, a, b int64) string {
	if i < 0 || i >= tl.n {
		return fmt.Sprintf("instance %d unknown", i)
	}
	running := false
	for _, s := range tl.alive[i] {
		if s.From <= a && s.To > b {
			running = true
			break
		}
	}
	if !running {
		return fmt.Sprintf("%s not running throughout %s", instName(i), rangeText(a, b))
	}
	return tl.pausedOrCut(i, a, b)
}

// pausedOrCut returns why instance i (known) was paused, or cut off from
// the store (a cut or blackhole), at some instant of [a, b], or "" when
// it was neither.
func (tl *timeline) pausedOrCut(i int, a, b int64) string {
	for _, s := range tl.paused[i] {
		if s.meets(a, b) {
			return fmt.Sprintf("%s paused %s", instName(i), tl.spanText(s))
		}
	}
	for _, s := range tl.cut[i] {
		if s.meets(a, b) {
			return fmt.Sprintf("%s %s %s", instName(i), s.Kind, tl.spanText(s))
		}
	}
	return ""
}

// outages returns every span during which no instance could write to the
// store: the store down, and on sqlite any instance's pause (SIGSTOP ..
// SIGCONT), since the paused process may hold the shared file's write lock.
func (tl *timeline) outages() []outage {
	var out []outage
	for _, s := range tl.storeDown {
		out = append(out, outage{s, "store down " + tl.spanText(s)})
	}
	if tl.sharedFile {
		for i, list := range tl.paused {
			for _, s := range list {
				out = append(out, outage{s, fmt.Sprintf("sqlite: instance %s paused holding the shared file's write lock possibly (%s)",
					instName(i), tl.spanText(s))})
			}
		}
	}
	return out
}

// storeDownIn returns the store outage (see outages) that meets [a, b], or
// "".
func (tl *timeline) storeDownIn(a, b int64) string {
	for _, o := range tl.outages() {
		if o.meets(a, b) {
			return o.why
		}
	}
	return ""
}

// runnerKill returns the SIGKILL of instance i that ended a job whose start
// record is at start: the first kill at or after start - KillGraceMs (a job
// may write its start record just after its daemon died), unless the
// instance was started again between that kill and start.
func (tl *timeline) runnerKill(i int, start int64) (FaultLine, bool) {
	if i < 0 || i >= tl.n {
		return FaultLine{}, false
	}
	for _, f := range tl.deaths[i] {
		if f.Kind != FaultKill || f.AtMs < start-KillGraceMs {
			continue
		}
		if f.AtMs < start && tl.startedIn(i, f.AtMs, start) {
			continue
		}
		return f, true
	}
	return FaultLine{}, false
}

// startedIn reports whether instance i was started in (a, b].
func (tl *timeline) startedIn(i int, a, b int64) bool {
	_, ok := tl.restartIn(i, a, b)
	return ok
}

// restartIn returns the first start of instance i in (a, b].
func (tl *timeline) restartIn(i int, a, b int64) (int64, bool) {
	for _, at := range tl.starts[i] {
		if at > a && at <= b {
			return at, true
		}
	}
	return 0, false
}

// life numbers instance i's process lifetimes: the count of its start
// faults at or before at.
func (tl *timeline) life(i int, at int64) int {
	n := 0
	if i >= 0 && i < tl.n {
		for _, s := range tl.starts[i] {
			if s <= at {
				n++
			}
		}
	}
	return n
}

// hindranceIn returns the earliest instant of [a, b] at which instance i
// was killed, paused or cut off, or the store was out (see outages), with
// what it was.
func (tl *timeline) hindranceIn(i int, a, b int64) (int64, string, bool) {
	best, why := int64(open), ""
	if i < 0 || i >= tl.n {
		return 0, "", false
	}
	if f, ok := tl.deathIn(i, a, b); ok {
		best, why = f.AtMs, faultText(f)
	}
	consider := func(s span, what string) {
		if s.meets(a, b) && max(s.From, a) < best {
			best, why = max(s.From, a), what
		}
	}
	for _, s := range tl.paused[i] {
		consider(s, fmt.Sprintf("%s paused %s", instName(i), tl.spanText(s)))
	}
	for _, s := range tl.cut[i] {
		consider(s, fmt.Sprintf("%s %s %s", instName(i), s.Kind, tl.spanText(s)))
	}
	for _, o := range tl.outages() {
		consider(o.span, o.why)
	}
	return best, why, why != ""
}

// deathIn returns the first kill or stop-instance of instance i in [a, b].
func (tl *timeline) deathIn(i int, a, b int64) (FaultLine, bool) {
	if i < 0 || i >= tl.n {
		return FaultLine{}, false
	}
	for _, f := range tl.deaths[i] {
		if f.AtMs >= a && f.AtMs <= b {
			return f, true
		}
	}
	return FaultLine{}, false
}

// disturbedIn returns what kept instance i from the store at some instant
// of [a, b]: a kill or stop-instance, a pause, a cut or blackhole, or a
// store outage (see outages); "" if nothing did.
func (tl *timeline) disturbedIn(i int, a, b int64) string {
	if f, ok := tl.deathIn(i, a, b); ok {
		return faultText(f)
	}
	if i >= 0 && i < tl.n {
		if why := tl.pausedOrCut(i, a, b); why != "" {
			return why
		}
	}
	return tl.storeDownIn(a, b)
}

// slowIn returns the largest latency the proxy added to instance i's store
// traffic at some instant of [a, b], and the fault that set it.
func (tl *timeline) slowIn(i int, a, b int64) (int64, slowSpan) {
	var worst slowSpan
	if i >= 0 && i < tl.n {
		for _, s := range tl.slow[i] {
			if s.meets(a, b) && s.LatencyMs > worst.LatencyMs {
				worst = s
			}
		}
	}
	return worst.LatencyMs, worst
}

// lostContact returns the pause or cut of instance i, or the store outage
// (see outages), longer than minMs that can explain a newer attempt
// starting at newStart beside an older attempt of i: it began before
// newStart and ended no earlier than newStart - slackMs (the resumed runner
// needs a heartbeat to fence itself and stop its job). "" if there is none.
func (tl *timeline) lostContact(i int, newStart, minMs, slackMs int64) string {
	if i < 0 || i >= tl.n {
		return ""
	}
	for _, list := range [][]span{tl.paused[i], tl.cut[i]} {
		for _, s := range list {
			if s.dur(tl.end) > minMs && s.From < newStart && newStart <= s.To+slackMs {
				what := "paused"
				if s.Kind != FaultStop {
					what = string(s.Kind)
				}
				return fmt.Sprintf("%s %s %s, longer than the lease less a heartbeat (%d ms)", instName(i), what, tl.spanText(s), minMs)
			}
		}
	}
	for _, o := range tl.outages() {
		if o.dur(tl.end) > minMs && o.From < newStart && newStart <= o.To+slackMs {
			return fmt.Sprintf("%s, longer than the lease less a heartbeat (%d ms): %s could not renew", o.why, minMs, instName(i))
		}
	}
	return ""
}

// longPause returns the pause of instance i that begins at at and lasts
// longer than leaseMs.
func (tl *timeline) longPause(i int, at, leaseMs int64) (span, bool) {
	for _, s := range tl.paused[i] {
		if s.From == at && s.dur(tl.end) > leaseMs {
			return s, true
		}
	}
	return span{}, false
}

// skewIn returns the skew changes of instance i at instants in [a, b].
func (tl *timeline) skewIn(i int, a, b int64) []skewChange {
	var out []skewChange
	for _, s := range tl.skews[i] {
		if s.At >= a-abs(s.Delta) && s.At <= b {
			out = append(out, s)
		}
	}
	return out
}

func (tl *timeline) spanText(s span) string {
	from := "at the start"
	if s.Line > 0 {
		from = fmt.Sprintf("from faults.jsonl:%d", s.Line)
	}
	if s.To == open {
		return fmt.Sprintf("%s %s to the end of the run (%d ms)", from, msText(s.From), tl.end-s.From)
	}
	return fmt.Sprintf("%s %s to %s (%d ms)", from, msText(s.From), msText(s.To), s.To-s.From)
}

// faultText names a fault with its line.
func faultText(f FaultLine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "faults.jsonl:%d %s", f.Line, f.Kind)
	if f.Instance >= 0 {
		fmt.Fprintf(&b, " %s", instName(f.Instance))
	}
	fmt.Fprintf(&b, " at %s", msText(f.AtMs))
	if f.Detail != "" {
		fmt.Fprintf(&b, " (%s)", f.Detail)
	}
	return b.String()
}

// instName is the harness's name of instance i.
func instName(i int) string { return fmt.Sprintf("chaos-%d", i) }

// msText shows a wall-clock instant as UTC with milliseconds.
func msText(ms int64) string {
	if ms == open {
		return "the end"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// slotText shows a slot as its ms and its instant.
func slotText(ms int64) string { return fmt.Sprintf("%d (%s)", ms, msText(ms)) }

func rangeText(a, b int64) string { return fmt.Sprintf("[%s, %s]", msText(a), msText(b)) }

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// deathAt reports whether instance i was killed or stopped at at.
func (tl *timeline) deathAt(i int, at int64) bool {
	f, ok := tl.deathIn(i, at, at)
	return ok && f.AtMs == at
}

// leaseLostIn returns the pause or cut of instance i, or the store outage,
// longer than leaseMs that meets [a, b]: the runner of an attempt running
// then could not renew its lease, so the store may have given the run to a
// backup or interrupted it, and then refuses the attempt's result. ""
// if there is none.
func (tl *timeline) leaseLostIn(i int, a, b, leaseMs int64) string {
	if i >= 0 && i < tl.n {
		for _, list := range [][]span{tl.paused[i], tl.cut[i]} {
			for _, s := range list {
				if s.dur(tl.end) > leaseMs && s.meets(a, b) {
					return fmt.Sprintf("%s %s %s", instName(i), s.Kind, tl.spanText(s))
				}
			}
		}
	}
	for _, o := range tl.outages() {
		if o.dur(tl.end) > leaseMs && o.meets(a, b) {
			return o.why
		}
	}
	return ""
}

// reconnectMs is how long a store client may take to reconnect after a
// cut or blackhole healed (RabbitMQ's bounded calls give up after 2 s,
// then it dials again).
const reconnectMs = 5000

// obstructedUntilDeath returns why instance i could not record a result
// between at and its death: it was killed within windowMs after at, and
// cut off, blackholed or paused (or the store was down) in between, or
// shortly before (reconnectMs). "" otherwise.
func (tl *timeline) obstructedUntilDeath(i int, at, windowMs int64) string {
	f, ok := tl.deathIn(i, at, at+windowMs)
	if !ok || i < 0 || i >= tl.n {
		return ""
	}
	for _, list := range [][]span{tl.paused[i], tl.cut[i]} {
		for _, s := range list {
			if s.meets(at-reconnectMs, f.AtMs) {
				return fmt.Sprintf("%s %s %s, then %s", instName(i), s.Kind, tl.spanText(s), faultText(f))
			}
		}
	}
	if why := tl.storeDownIn(at, f.AtMs); why != "" {
		return why + ", then " + faultText(f)
	}
	return ""
}

// maxSkew is the largest clock offset (ahead or behind, in ms) instance i
// ever had in the run.
func (tl *timeline) maxSkew(i int) int64 {
	var m int64
	for _, f := range tl.faults {
		if f.Kind == FaultSkew && f.Instance == i {
			m = max(m, abs(f.SkewMs))
		}
	}
	return m
}
