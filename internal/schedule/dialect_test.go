package schedule_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/schedule"
)

// TestWeekdayRangesWrap: a day-of-week range wraps past Saturday; 0 and 7
// are both Sunday. 2027-01-01 is a Friday.
func TestWeekdayRangesWrap(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{"0 0 * * Fri-Mon", []string{"2027-01-02T00:00:00Z", "2027-01-03T00:00:00Z", "2027-01-04T00:00:00Z", "2027-01-08T00:00:00Z"}},
		{"0 0 * * 6-1", []string{"2027-01-02T00:00:00Z", "2027-01-03T00:00:00Z", "2027-01-04T00:00:00Z", "2027-01-09T00:00:00Z"}},
		{"0 0 * * 5-0", []string{"2027-01-02T00:00:00Z", "2027-01-03T00:00:00Z", "2027-01-08T00:00:00Z"}},
		{"0 0 * * fri-0", []string{"2027-01-02T00:00:00Z", "2027-01-03T00:00:00Z", "2027-01-08T00:00:00Z"}},
		{"0 0 * * sat-sun", []string{"2027-01-02T00:00:00Z", "2027-01-03T00:00:00Z", "2027-01-09T00:00:00Z"}},
		{"0 0 * * Mon-Sun", []string{"2027-01-02T00:00:00Z", "2027-01-03T00:00:00Z", "2027-01-04T00:00:00Z", "2027-01-05T00:00:00Z"}},
		{"0 0 * * 6-1,3", []string{"2027-01-02T00:00:00Z", "2027-01-03T00:00:00Z", "2027-01-04T00:00:00Z", "2027-01-06T00:00:00Z", "2027-01-09T00:00:00Z"}},
		// a step counts along the wrapped days: Fri, (Sat), Sun, (Mon)
		{"0 0 * * Fri-Mon/2", []string{"2027-01-03T00:00:00Z", "2027-01-08T00:00:00Z", "2027-01-10T00:00:00Z"}},
		{"0 0 * * 5-0/2", []string{"2027-01-03T00:00:00Z", "2027-01-08T00:00:00Z", "2027-01-10T00:00:00Z"}},
		{"0 0 * * Mon-Sun/3", []string{"2027-01-03T00:00:00Z", "2027-01-04T00:00:00Z", "2027-01-07T00:00:00Z", "2027-01-10T00:00:00Z"}},
		// both day fields restricted: the 13th, or Friday to Monday
		{"0 0 13 * Fri-Mon", []string{"2027-01-02T00:00:00Z", "2027-01-03T00:00:00Z", "2027-01-04T00:00:00Z", "2027-01-08T00:00:00Z", "2027-01-09T00:00:00Z", "2027-01-10T00:00:00Z", "2027-01-11T00:00:00Z", "2027-01-13T00:00:00Z"}},
		// 7 first is Sunday: 7-1 does not wrap
		{"0 0 * * 7-1", []string{"2027-01-03T00:00:00Z", "2027-01-04T00:00:00Z", "2027-01-10T00:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			checkSlots(t, "UTC", tt.expr, "2027-01-01T00:00:00Z", tt.want)
		})
	}
}

// TestWeekdayWrapEqualsList: a wrapped range has the slots of the list of
// days it names, and "x-0" those of cronie's "x-7", over a year in a zone
// with daylight saving.
func TestWeekdayWrapEqualsList(t *testing.T) {
	loc := mustLoc(t, "Europe/Athens")
	from := mustTime(t, "2027-01-01T00:00:00Z")
	to := from.AddDate(1, 0, 0)
	for _, tt := range []struct{ wrapped, list string }{
		{"30 3 * * Fri-Mon", "30 3 * * 5,6,0,1"},
		{"30 3 * * 5-0", "30 3 * * 5-7"},
		{"30 3 * * Mon-Sun", "30 3 * * *"},
		{"*/30 * * * sat-tue/3", "*/30 * * * 6,2"},
		{"0 0 13 * Fri-Sun", "0 0 13 * 5-7"},
	} {
		var slots [2][]time.Time
		for i, expr := range []string{tt.wrapped, tt.list} {
			s, err := schedule.Parse(expr, loc)
			if err != nil {
				t.Fatalf("Parse(%q): %v", expr, err)
			}
			slots[i] = schedule.Between(s, from, to, 0)
		}
		if len(slots[0]) == 0 || !slices.EqualFunc(slots[0], slots[1], time.Time.Equal) {
			t.Errorf("%q has %d slots, %q %d; want the same", tt.wrapped, len(slots[0]), tt.list, len(slots[1]))
		}
	}
}

// TestOtherRangesDoNotWrap: a backwards range in any field but the day of
// week is refused, and the error writes the list that means the wrap.
func TestOtherRangesDoNotWrap(t *testing.T) {
	for _, tt := range []struct{ expr, want string }{
		{"0 0 1 Nov-Feb *", `month field "Nov-Feb": range 11-2 is backwards (only day-of-week ranges wrap: write 11-12,1-2)`},
		{"0 0 1 12-1 *", `month field "12-1": range 12-1 is backwards (only day-of-week ranges wrap: write 12,1)`},
		{"0 22-2 * * *", `hour field "22-2": range 22-2 is backwards (only day-of-week ranges wrap: write 22-23,0-2)`},
		{"50-10 * * * *", `minute field "50-10": range 50-10 is backwards (only day-of-week ranges wrap: write 50-59,0-10)`},
		{"0 0 25-5 * *", `day-of-month field "25-5": range 25-5 is backwards (only day-of-week ranges wrap: write 25-31,1-5)`},
		{"0 0 1 Nov-Feb/2 *", `range 11-2 is backwards`},
		{"* * * * fri-8", `day-of-week field "fri-8": 8 out of range 0-7`},
	} {
		s, err := schedule.Parse(tt.expr, nil)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want an error", tt.expr, s)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q): %q, want %q", tt.expr, err, tt.want)
		}
	}
	// the lists the errors suggest mean the wrap
	checkSlots(t, "UTC", "0 0 1 11-12,1-2 *", "2027-06-01T00:00:00Z",
		[]string{"2027-11-01T00:00:00Z", "2027-12-01T00:00:00Z", "2028-01-01T00:00:00Z", "2028-02-01T00:00:00Z", "2028-11-01T00:00:00Z"})
}

// TestDaySpecials checks the examples of L, W and # in
// docs/configuration.md#schedules.
func TestDaySpecials(t *testing.T) {
	tests := []struct {
		expr, from string
		want       []string
	}{
		// the last day of the month
		{"0 0 L * *", "2027-01-31T00:00:00Z", []string{"2027-02-28T00:00:00Z", "2027-03-31T00:00:00Z", "2027-04-30T00:00:00Z"}},
		{"0 0 L 2 *", "2027-03-01T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z"}},
		// the weekday nearest the 15th: Saturday 15 May -> Friday 14,
		// Sunday 15 August -> Monday 16
		{"0 9 15W * *", "2027-05-01T00:00:00Z", []string{"2027-05-14T09:00:00Z", "2027-06-15T09:00:00Z", "2027-07-15T09:00:00Z", "2027-08-16T09:00:00Z"}},
		// W stays in the month: Saturday 1 May -> Monday 3 May, Sunday
		// 31 October -> Friday 29 October; a month without a 31st has none
		{"0 9 1W * *", "2027-04-02T00:00:00Z", []string{"2027-05-03T09:00:00Z", "2027-06-01T09:00:00Z"}},
		{"0 9 31W * *", "2027-09-01T00:00:00Z", []string{"2027-10-29T09:00:00Z", "2027-12-31T09:00:00Z"}},
		// the third Friday
		{"0 9 * * 5#3", "2027-01-01T00:00:00Z", []string{"2027-01-15T09:00:00Z", "2027-02-19T09:00:00Z", "2027-03-19T09:00:00Z"}},
		{"0 9 * * fri#3", "2027-01-01T00:00:00Z", []string{"2027-01-15T09:00:00Z", "2027-02-19T09:00:00Z"}},
		// a fifth Monday: only the months that have one
		{"0 9 * * 1#5", "2027-01-01T00:00:00Z", []string{"2027-03-29T09:00:00Z", "2027-05-31T09:00:00Z", "2027-08-30T09:00:00Z"}},
		// the last Friday, the last Sunday (0 or 7)
		{"0 9 * * 5L", "2027-01-01T00:00:00Z", []string{"2027-01-29T09:00:00Z", "2027-02-26T09:00:00Z", "2027-03-26T09:00:00Z"}},
		{"0 9 * * 7L", "2027-01-01T00:00:00Z", []string{"2027-01-31T09:00:00Z", "2027-02-28T09:00:00Z", "2027-03-28T09:00:00Z"}},
		{"0 9 * * 0L", "2027-01-01T00:00:00Z", []string{"2027-01-31T09:00:00Z", "2027-02-28T09:00:00Z"}},
		// with both day fields restricted either may match: the last day,
		// or any Friday
		{"0 9 L * 5", "2027-01-25T00:00:00Z", []string{"2027-01-29T09:00:00Z", "2027-01-31T09:00:00Z", "2027-02-05T09:00:00Z"}},
		// ? is *
		{"0 9 ? * 5#3", "2027-01-01T00:00:00Z", []string{"2027-01-15T09:00:00Z", "2027-02-19T09:00:00Z"}},
		// in lists
		{"0 9 1,L * *", "2027-01-02T00:00:00Z", []string{"2027-01-31T09:00:00Z", "2027-02-01T09:00:00Z", "2027-02-28T09:00:00Z"}},
		{"0 9 * * 1#1,5L", "2027-01-01T00:00:00Z", []string{"2027-01-04T09:00:00Z", "2027-01-29T09:00:00Z", "2027-02-01T09:00:00Z", "2027-02-26T09:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			checkSlots(t, "UTC", tt.expr, tt.from, tt.want)
		})
	}
	// not supported: LW, L-n, a bare L or W in the wrong field
	for _, expr := range []string{"0 9 LW * *", "0 9 L-2 * *", "0 9 * * L", "0 9 * * 5W", "0 9 * L *"} {
		if s, err := schedule.Parse(expr, nil); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", expr, s)
		}
	}
}
