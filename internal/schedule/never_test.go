package schedule_test

import (
	"testing"

	"github.com/anarchon/anarchon/internal/schedule"
)

// TestNoDay: a schedule whose day fields match no day of its months names
// them; any other schedule, however rare, gets "".
func TestNoDay(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{"0 0 31 2 *", "day-of-month 31 never falls in month 2; pick a day the month has (L is its last day)"},
		{"0 0 30,31 2 *", "day-of-month 30,31 never falls in month 2; pick a day the month has (L is its last day)"},
		{"0 0 31 4,6,9,11 *", "day-of-month 31 never falls in months 4, 6, 9, 11; pick a day the month has (L is its last day)"},
		{"0 0 0 30 feb *", "day-of-month 30 never falls in month 2; pick a day the month has (L is its last day)"},
		{"0 0 29 2 *", ""},
		{"0 0 * 2 1#5", ""}, // the fifth Monday of February: 2016, 2044
		{"0 0 31 2 1", ""},  // either day field may match
		{"* * * * *", ""},
		{"@every 1h", ""},
	} {
		if got := schedule.NoDay(mustParse(t, tc.expr)); got != tc.want {
			t.Errorf("NoDay(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}
