package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// slotcount min max file from to: file (lines "slot_ms ...") has between
// min and max lines whose slot is within [from, to] (ms since the epoch).
func cmdSlotCount(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 5 {
		ts.Fatalf("usage: slotcount min max file from to")
	}
	var n [4]int64
	for i, a := range []string{args[0], args[1], args[3], args[4]} {
		v, err := strconv.ParseInt(a, 10, 64)
		ts.Check(err)
		n[i] = v
	}
	lo, hi, from, to := n[0], n[1], n[2], n[3]
	var got int64
	for slot, lines := range slotLines(ts, args[2]) {
		if from <= slot && slot <= to {
			got += int64(len(lines))
		}
	}
	if got < lo || got > hi {
		ts.Fatalf("%s: %d runs of slots in [%d, %d], want %d to %d:\n%s", args[2], got, from, to, lo, hi, ts.ReadFile(args[2]))
	}
	ts.Logf("%s: %d runs of slots in [%d, %d]", args[2], got, from, to)
}

// startMissed is the start's one log line per job about the slots it did
// not run.
type startMissed struct {
	Msg     string    `json:"msg"`
	Job     string    `json:"job"`
	Slots   int       `json:"slots"`
	CatchUp int       `json:"catch_up"`
	AllDown int       `json:"all_down"`
	Reason  string    `json:"reason"`
	First   time.Time `json:"first"`
	Last    time.Time `json:"last"`
	Newest  time.Time `json:"newest_recorded"`
	Start   time.Time `json:"start"`
}

const startMissedMsg = "missed: slots due while no instance ran were not run at start"

// catchupcheck log status.json job: the start logged in log found where the
// cluster left job (every second), the newest run status.json (status
// --json --limit 1, read while every instance was down) shows, and counted
// every slot after it up to the start but the newest as missed (catch_up,
// catchUp latest), in one line. It sets $START (ms) and $CATCHUP.
func cmdCatchUpCheck(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: catchupcheck log status.json job")
	}
	var newest struct {
		SlotMs int64 `json:"slot_ms"`
	}
	ts.Check(json.Unmarshal([]byte(strings.SplitN(ts.ReadFile(args[1]), "\n", 2)[0]), &newest))
	var m startMissed
	for line := range strings.Lines(ts.ReadFile(args[0])) {
		var l startMissed
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == startMissedMsg && l.Job == args[2] {
			if m.Msg != "" {
				ts.Fatalf("two missed lines for %s at one start", args[2])
			}
			m = l
		}
	}
	if m.Msg == "" {
		ts.Fatalf("%s: no missed line for %s", args[0], args[2])
	}
	if m.Newest.UnixMilli() != newest.SlotMs {
		ts.Fatalf("the start found the newest slot %v, the store shows %d", m.Newest, newest.SlotMs)
	}
	// Every second after the newest, up to the start: all but the newest
	// (the catch-up run) are missed.
	due := m.Start.UnixMilli()/1000 - newest.SlotMs/1000
	if want := int(due - 1); m.CatchUp != want || m.Slots != want || m.AllDown != 0 || m.Reason != "catch_up" ||
		m.First.UnixMilli() != newest.SlotMs+1000 || m.Last.UnixMilli() != (m.Start.UnixMilli()/1000-1)*1000 {
		ts.Fatalf("missed line %+v; want %d slots (catch_up) from %d", m, want, newest.SlotMs+1000)
	}
	ts.Setenv("START", strconv.FormatInt(m.Start.UnixMilli(), 10))
	ts.Setenv("CATCHUP", strconv.Itoa(m.CatchUp))
	ts.Logf("newest recorded %d, start %v: %d slots missed (catch_up)", newest.SlotMs, m.Start, m.CatchUp)
}

// statusRecord is one line of status --json.
type statusRecord struct {
	Job    string `json:"job"`
	SlotMs int64  `json:"slot_ms"`
	Status string `json:"status"`
	Reason string `json:"reason"`
	HeldBy *int64 `json:"held_by_slot_ms"`
}

// statusRecords reads the output of status --json.
func statusRecords(ts *testscript.TestScript, file string) []statusRecord {
	var out []statusRecord
	for line := range strings.Lines(ts.ReadFile(file)) {
		var r statusRecord
		ts.Check(json.Unmarshal([]byte(line), &r))
		out = append(out, r)
	}
	return out
}

// accounted file job from to: status --all --json in file holds exactly one
// record of job for every slot of an every-second schedule in [from, to]
// (ms): a run's own, or a note of a slot no attempt ran.
func cmdAccounted(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: accounted file job from to")
	}
	from, err := strconv.ParseInt(args[2], 10, 64)
	ts.Check(err)
	to, err := strconv.ParseInt(args[3], 10, 64)
	ts.Check(err)
	seen := map[int64][]string{}
	for _, r := range statusRecords(ts, args[0]) {
		if r.Job == args[1] {
			seen[r.SlotMs] = append(seen[r.SlotMs], r.Status+"/"+r.Reason)
		}
	}
	byStatus := map[string]int{}
	for slot := (from + 999) / 1000 * 1000; slot <= to; slot += 1000 {
		got := seen[slot]
		if len(got) != 1 {
			ts.Fatalf("%s: slot %d of %s has %d records %v, want one outcome", args[0], slot, args[1], len(got), got)
		}
		byStatus[got[0]]++
	}
	ts.Logf("%s: every slot of %s in [%d, %d] has one outcome: %v", args[0], args[1], from, to, byStatus)
}

// outcomes file job status reason min: status --json in file holds at least
// min records of job with that status and reason; for a skip (overlap),
// each names the earlier slot that held the job.
func cmdOutcomes(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 5 {
		ts.Fatalf("usage: outcomes file job status reason min")
	}
	want, err := strconv.Atoi(args[4])
	ts.Check(err)
	n := 0
	for _, r := range statusRecords(ts, args[0]) {
		if r.Job != args[1] || r.Status != args[2] || r.Reason != args[3] {
			continue
		}
		if r.Reason == "overlap" && (r.HeldBy == nil || *r.HeldBy >= r.SlotMs) {
			ts.Fatalf("%s: slot %d skipped for overlap without the earlier slot that held it: %v", args[0], r.SlotMs, r.HeldBy)
		}
		n++
	}
	if n < want {
		ts.Fatalf("%s: %d records of %s %s (%s), want at least %d:\n%s", args[0], n, args[1], args[2], args[3], want, ts.ReadFile(args[0]))
	}
	ts.Logf("%s: %d records of %s %s (%s)", args[0], n, args[1], args[2], args[3])
}
