package status

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/anarchon/anarchon/internal/claim"
)

// TestAnnotate: the runs a trigger asked for show their kind, who asked,
// and for a retry the slot retried and the attempt counted on from it; a
// slot of the schedule shows scheduled, and the older fields are as they
// were.
func TestAnnotate(t *testing.T) {
	const of, manual, retry = 1800000000000, 1800000005000, 1800000009000
	ctl := claim.Control{Job: "sync", Version: 2, Triggers: []claim.Trigger{
		{ID: "m", Kind: claim.TriggerManual, Slot: manual, Attempt: 1, Due: manual, By: "ops@laptop"},
		{ID: "r", Kind: claim.TriggerRetry, Slot: retry, Of: of, Attempt: 3, Due: retry, By: "web-1"},
	}}
	runs := Annotate([]claim.Run{
		{Job: "sync", Slot: retry, Status: claim.StatusFailed, Attempt: 1},
		{Job: "sync", Slot: manual, Status: claim.StatusSucceeded, Attempt: 1},
		{Job: "sync", Slot: of, Status: claim.StatusFailed, Attempt: 1},
		{Job: "other", Slot: manual, Status: claim.StatusSucceeded, Attempt: 1},
	}, []claim.Control{ctl})
	var buf bytes.Buffer
	if err := WriteJSON(&buf, runs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`"attempt":3,.*"kind":"retry","requested_by":"web-1","retry_of_slot_ms":1800000000000}$`,
		`"attempt":1,.*"kind":"manual","requested_by":"ops@laptop","retry_of_slot_ms":null}$`,
		`"attempt":1,.*"held_by_slot_ms":null,"kind":"scheduled","requested_by":null,"retry_of_slot_ms":null}$`,
		`"job":"other".*"kind":"scheduled","requested_by":null`,
	}
	for i, w := range want {
		if !matches(w, lines[i]) {
			t.Errorf("line %d: %s\nwant it to match %s", i, lines[i], w)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	buf.Reset()
	if err := WriteTable(&buf, runs); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"retry of 2027-01-15T08:00:00Z", "manual by ops@laptop", "scheduled"} {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, buf.String())
		}
	}
}

func matches(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
