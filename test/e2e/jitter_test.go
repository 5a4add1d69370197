package e2e

import (
	"bufio"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// jitterstarts runs.log next.json jitterMs slackMs: every run of runs.log
// (lines "slot_ms instance attempt began_ms") is a slot that next.json
// (the output of next --json) lists, with a start within [slot, slot +
// jitterMs]; the job began at that start or after it, never before, and
// within slackMs of it (the fork on a loaded machine). At least one start
// must differ from its slot: the jitter moved the runs.
func cmdJitterStarts(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: jitterstarts runs.log next.json jitterMs slackMs")
	}
	jitter, err := strconv.ParseInt(args[2], 10, 64)
	ts.Check(err)
	slack, err := strconv.ParseInt(args[3], 10, 64)
	ts.Check(err)
	starts := map[int64]int64{}
	sc := bufio.NewScanner(strings.NewReader(ts.ReadFile(args[1])))
	for sc.Scan() {
		var s struct {
			SlotMs  int64 `json:"slot_ms"`
			StartMs int64 `json:"start_ms"`
		}
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			ts.Fatalf("%s: line %q: %v", args[1], sc.Text(), err)
		}
		starts[s.SlotMs] = s.StartMs
	}
	moved, runs := 0, 0
	for ms, lines := range slotLines(ts, args[0]) {
		for _, line := range lines {
			f := strings.Fields(line)
			if len(f) != 4 {
				ts.Fatalf("%s: line %q: want slot_ms instance attempt began_ms", args[0], line)
			}
			began, err := strconv.ParseInt(f[3], 10, 64)
			ts.Check(err)
			start, ok := starts[ms]
			switch {
			case !ok:
				ts.Fatalf("slot %d ran (%q) but next --json did not list it", ms, line)
			case start < ms || start > ms+jitter:
				ts.Fatalf("slot %d: next says it starts at %d, %d ms after it; want within [0, %d]", ms, start, start-ms, jitter)
			case began < start:
				ts.Fatalf("slot %d: the job began at %d, %d ms before its jittered start %d", ms, began, start-began, start)
			case began > start+slack:
				ts.Fatalf("slot %d: the job began at %d, %d ms after its jittered start %d (slack %d)", ms, began, began-start, start, slack)
			}
			runs++
			if start != ms {
				moved++
			}
		}
	}
	if moved == 0 {
		ts.Fatalf("none of %d runs was moved by the jitter", runs)
	}
	ts.Logf("%d runs, each began at its jittered start (%d of them after their slot)", runs, moved)
}
