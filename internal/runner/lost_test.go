package runner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/anarchon/anarchon/internal/claim"
)

// A fenced answer says who has the run: another attempt, or nobody (the
// store lost the claim, as in a failover to a replica that lacked it).
func TestFencedMessage(t *testing.T) {
	taken := fencedMsg(fmt.Errorf("finish j@1#1: %w", claim.ErrFenced), "result not recorded: ", "a backup took it over")
	if taken != "result not recorded: a backup took it over" {
		t.Errorf("taken over: %q", taken)
	}
	lost := fencedMsg(fmt.Errorf("finish j@1#1: %w", claim.ErrRunLost), "result not recorded: ", "a backup took it over")
	if !strings.HasPrefix(lost, "result not recorded: the store has lost this attempt's claim") || strings.Contains(lost, "backup") {
		t.Errorf("lost: %q", lost)
	}
}
