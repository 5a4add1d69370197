package schedule_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anarchon/anarchon/internal/schedule"
)

// TestNextUTC covers field forms, macros and day rules in UTC.
func TestNextUTC(t *testing.T) {
	tests := []struct {
		expr, from string
		want       []string
	}{
		// 5 fields
		{"* * * * *", "2027-01-01T00:00:30Z", []string{"2027-01-01T00:01:00Z", "2027-01-01T00:02:00Z"}},
		{"* * * * *", "2027-01-01T00:01:00Z", []string{"2027-01-01T00:02:00Z"}}, // strictly after
		{"*/15 * * * *", "2027-01-01T00:00:00Z", []string{"2027-01-01T00:15:00Z", "2027-01-01T00:30:00Z", "2027-01-01T00:45:00Z", "2027-01-01T01:00:00Z"}},
		{"5-10/2 * * * *", "2027-01-01T00:00:00Z", []string{"2027-01-01T00:05:00Z", "2027-01-01T00:07:00Z", "2027-01-01T00:09:00Z", "2027-01-01T01:05:00Z"}},
		{"10/20 * * * *", "2027-01-01T00:00:00Z", []string{"2027-01-01T00:10:00Z", "2027-01-01T00:30:00Z", "2027-01-01T00:50:00Z", "2027-01-01T01:10:00Z"}},
		{"0 9-17/4 * * *", "2027-01-01T00:00:00Z", []string{"2027-01-01T09:00:00Z", "2027-01-01T13:00:00Z", "2027-01-01T17:00:00Z", "2027-01-02T09:00:00Z"}},
		{"0 0 1,15 * *", "2027-01-01T00:00:00Z", []string{"2027-01-15T00:00:00Z", "2027-02-01T00:00:00Z", "2027-02-15T00:00:00Z"}},
		{"30 4 1 1 *", "2027-01-01T04:30:00Z", []string{"2028-01-01T04:30:00Z", "2029-01-01T04:30:00Z"}},
		{"0 0 1 JAN,jul *", "2027-01-01T00:00:00Z", []string{"2027-07-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		// 2027-01-01 is a Friday.
		{"0 9-17 * * 1-5", "2027-01-01T16:30:00Z", []string{"2027-01-01T17:00:00Z", "2027-01-04T09:00:00Z", "2027-01-04T10:00:00Z"}},
		{"0 0 * * 0", "2027-01-01T00:00:00Z", []string{"2027-01-03T00:00:00Z", "2027-01-10T00:00:00Z"}},
		{"0 0 * * 7", "2027-01-01T00:00:00Z", []string{"2027-01-03T00:00:00Z", "2027-01-10T00:00:00Z"}},
		{"0 0 * * MON", "2027-01-01T00:00:00Z", []string{"2027-01-04T00:00:00Z", "2027-01-11T00:00:00Z"}},
		{"0 0 * * sat,sun", "2027-01-01T00:00:00Z", []string{"2027-01-02T00:00:00Z", "2027-01-03T00:00:00Z", "2027-01-09T00:00:00Z"}},
		// both day fields restricted: either matches (the 13th, or a Friday)
		{"0 0 13 * 5", "2027-01-01T00:00:00Z", []string{"2027-01-08T00:00:00Z", "2027-01-13T00:00:00Z", "2027-01-15T00:00:00Z"}},
		// a day field starting with '*': both must match (odd days that are Fridays)
		{"0 0 */2 * 5", "2027-01-01T00:00:00Z", []string{"2027-01-15T00:00:00Z", "2027-01-29T00:00:00Z", "2027-02-05T00:00:00Z"}},
		// the 13th when it is a Sunday or a Friday (*/5 is 0 and 5)
		{"0 0 13 * */5", "2027-01-01T00:00:00Z", []string{"2027-06-13T00:00:00Z", "2027-08-13T00:00:00Z"}},
		// L, W, #
		{"0 0 L * *", "2028-01-31T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2028-03-31T00:00:00Z", "2028-04-30T00:00:00Z"}},
		{"0 0 15W * *", "2027-05-01T00:00:00Z", []string{"2027-05-14T00:00:00Z", "2027-06-15T00:00:00Z"}}, // 2027-05-15 is a Saturday
		{"0 0 * * 5L", "2027-01-01T00:00:00Z", []string{"2027-01-29T00:00:00Z", "2027-02-26T00:00:00Z"}},
		{"0 0 * * 1#2", "2027-01-01T00:00:00Z", []string{"2027-01-11T00:00:00Z", "2027-02-08T00:00:00Z"}},
		{"0 0 29 2 *", "2027-01-01T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"0 0 29 2 *", "2097-03-01T00:00:00Z", []string{"2104-02-29T00:00:00Z"}}, // 2100 is no leap year
		// 6 fields, seconds first
		{"*/10 * * * * *", "2027-01-01T00:00:00Z", []string{"2027-01-01T00:00:10Z", "2027-01-01T00:00:20Z", "2027-01-01T00:00:30Z"}},
		{"*/10 * * * * *", "2027-01-01T00:00:55.5Z", []string{"2027-01-01T00:01:00Z", "2027-01-01T00:01:10Z"}},
		{"15 30 12 * * *", "2027-01-01T00:00:00Z", []string{"2027-01-01T12:30:15Z", "2027-01-02T12:30:15Z"}},
		{"0 0 0 * * *", "2027-01-01T00:00:00Z", []string{"2027-01-02T00:00:00Z"}},
		{"0,30 * * * * *", "2027-01-01T00:00:00.999Z", []string{"2027-01-01T00:00:30Z", "2027-01-01T00:01:00Z"}},
		{"* * * * * *", "2027-12-31T23:59:58.25Z", []string{"2027-12-31T23:59:59Z", "2028-01-01T00:00:00Z"}},
		// macros
		{"@yearly", "2027-06-01T00:00:00Z", []string{"2028-01-01T00:00:00Z", "2029-01-01T00:00:00Z"}},
		{"@annually", "2027-06-01T00:00:00Z", []string{"2028-01-01T00:00:00Z"}},
		{"@monthly", "2027-06-01T00:00:00Z", []string{"2027-07-01T00:00:00Z", "2027-08-01T00:00:00Z"}},
		{"@weekly", "2027-01-01T00:00:00Z", []string{"2027-01-03T00:00:00Z", "2027-01-10T00:00:00Z"}},
		{"@daily", "2027-01-01T00:00:00Z", []string{"2027-01-02T00:00:00Z", "2027-01-03T00:00:00Z"}},
		{"@midnight", "2027-01-01T00:00:00Z", []string{"2027-01-02T00:00:00Z"}},
		{"@DAILY", "2027-01-01T00:00:00Z", []string{"2027-01-02T00:00:00Z"}},
		{"@hourly", "2027-01-01T00:10:00Z", []string{"2027-01-01T01:00:00Z", "2027-01-01T02:00:00Z"}},
		{"@5minutes", "2027-01-01T00:01:00Z", []string{"2027-01-01T00:05:00Z", "2027-01-01T00:10:00Z"}},
		{"@30minutes", "2027-01-01T00:01:00Z", []string{"2027-01-01T00:30:00Z", "2027-01-01T01:00:00Z"}},
		{"@always", "2027-01-01T00:01:00Z", []string{"2027-01-01T00:02:00Z"}},
		{"@everysecond", "2027-01-01T00:01:00Z", []string{"2027-01-01T00:01:01Z"}},
		// @every
		{"@every 90m", "2027-01-01T00:00:00Z", []string{"2027-01-01T01:30:00Z", "2027-01-01T03:00:00Z"}},
		{"@every 1h", "2027-01-01T00:00:00Z", []string{"2027-01-01T01:00:00Z"}},
		{"@every 7s", "1970-01-01T00:00:00Z", []string{"1970-01-01T00:00:07Z", "1970-01-01T00:00:14Z"}},
		{"@every 7s", "1969-12-31T23:59:50Z", []string{"1969-12-31T23:59:53Z", "1970-01-01T00:00:00Z"}},
		{"@every 1.5s", "2027-01-01T00:00:00Z", []string{"2027-01-01T00:00:01.5Z", "2027-01-01T00:00:03Z"}},
		{"@EVERY 1m", "2027-01-01T00:00:59.999Z", []string{"2027-01-01T00:01:00Z"}},
		{"  @every   2m  ", "2027-01-01T00:00:00Z", []string{"2027-01-01T00:02:00Z"}},
		// before 1970
		{"0 0 1 1 *", "1969-06-01T00:00:00Z", []string{"1970-01-01T00:00:00Z", "1971-01-01T00:00:00Z"}},
		// spacing
		{"  0\t12  * *   * ", "2027-01-01T00:00:00Z", []string{"2027-01-01T12:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			checkSlots(t, "UTC", tt.expr, tt.from, tt.want)
		})
	}
}

// TestZeroTime: Next of the zero Time works like any other instant.
func TestZeroTime(t *testing.T) {
	for _, tt := range []struct{ expr, want string }{
		{"@daily", "0001-01-02T00:00:00Z"},
		{"*/10 * * * * *", "0001-01-01T00:00:10Z"},
		{"@every 1h", "0001-01-01T01:00:00Z"},
	} {
		if got := mustParse(t, tt.expr).Next(time.Time{}); !got.Equal(mustTime(t, tt.want)) {
			t.Errorf("%q: Next(zero) = %s, want %s", tt.expr, got, tt.want)
		}
	}
}

// TestImpossible: expressions that never match return the zero Time, fast.
func TestImpossible(t *testing.T) {
	for _, expr := range []string{"0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 *", "0 0 30W 2 *"} {
		for _, zone := range []string{"UTC", "Europe/Athens", "Australia/Lord_Howe"} {
			s, err := schedule.Parse(expr, mustLoc(t, zone))
			if err != nil {
				t.Fatalf("Parse(%q): %v", expr, err)
			}
			start := time.Now()
			if got := s.Next(mustTime(t, "2027-01-01T00:00:00Z")); !got.IsZero() {
				t.Errorf("%q in %s: Next = %s, want zero", expr, zone, got)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("%q in %s: Next took %v", expr, zone, d)
			}
		}
	}
}

// TestNilLocIsUTC: a nil zone means UTC.
func TestNilLocIsUTC(t *testing.T) {
	from := mustTime(t, "2027-03-28T00:00:00+03:00")
	for _, expr := range []string{"30 3 * * *", "*/30 * * * *", "@daily", "*/20 * * * * *"} {
		a, err := schedule.Parse(expr, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := schedule.Parse(expr, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		ga, gb := firstN(a, from, 20), firstN(b, from, 20)
		if len(ga) != 20 || !slices.EqualFunc(ga, gb, time.Time.Equal) {
			t.Errorf("%q: nil zone gives%s\nUTC gives%s", expr, show(ga, time.UTC), show(gb, time.UTC))
		}
	}
}

// TestString returns the expression exactly as written.
func TestString(t *testing.T) {
	for _, expr := range []string{"*/5 * * * *", "  0 12 * * MON ", "@daily", "@every 90m", "0 0 * * * *"} {
		s, err := schedule.Parse(expr, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.String() != expr {
			t.Errorf("String() = %q, want %q", s.String(), expr)
		}
	}
}

func TestBetween(t *testing.T) {
	s, err := schedule.Parse("*/15 * * * *", nil)
	if err != nil {
		t.Fatal(err)
	}
	from := mustTime(t, "2027-01-01T00:00:00Z")
	tests := []struct {
		name string
		to   string
		max  int
		want []string
	}{
		{"from excluded, to included", "2027-01-01T01:00:00Z", 0,
			[]string{"2027-01-01T00:15:00Z", "2027-01-01T00:30:00Z", "2027-01-01T00:45:00Z", "2027-01-01T01:00:00Z"}},
		{"max", "2027-01-01T01:00:00Z", 2, []string{"2027-01-01T00:15:00Z", "2027-01-01T00:30:00Z"}},
		{"negative max is no limit", "2027-01-01T00:30:00Z", -1, []string{"2027-01-01T00:15:00Z", "2027-01-01T00:30:00Z"}},
		{"empty", "2027-01-01T00:14:59Z", 0, nil},
		{"to before from", "2026-12-31T00:00:00Z", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := schedule.Between(s, from, mustTime(t, tt.to), tt.max)
			var want []time.Time
			for _, w := range tt.want {
				want = append(want, mustTime(t, w))
			}
			if !slices.EqualFunc(got, want, time.Time.Equal) {
				t.Errorf("got%s\nwant%s", show(got, time.UTC), show(want, time.UTC))
			}
		})
	}
	if got := schedule.Between(mustParse(t, "0 0 30 2 *"), from, from.AddDate(20, 0, 0), 0); len(got) != 0 {
		t.Errorf("impossible schedule: %v", got)
	}
}

func mustParse(t *testing.T, expr string) schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse(expr, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestParseErrors: every error names the expression and says what is wrong.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		expr, want string // want: a part of the message
	}{
		{"", "empty expression"},
		{"   ", "empty expression"},
		{"* * *", "want 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), got 3"},
		{"* * * *", "got 4"},
		{"* * * * * * *", "got 7"},
		{"0 0 12 * * * 2027", "got 7"},
		{"0 0 * * * 2027", `the sixth field "2027" must be a day of week 0-7`},
		{"0 0 12 1 * 2027-2030", `sixth field "2027-2030" must be a day of week`},
		{"60 * * * *", `minute field "60": 60 out of range 0-59`},
		{"*/61 * * * *", `minute field "*/61": step 61 out of range 1-60`},
		{"*/0 * * * *", `minute field "*/0": step 0 out of range 1-60`},
		{"*/x * * * *", `minute field "*/x": step "X" is not a number`}, // as gronx normalized it
		{"*/5/2 * * * *", `minute field "*/5/2": step "5/2" is not a number`},
		{"5,99 * * * *", `minute field "5,99": item "99": 99 out of range 0-59`},
		{"1,,2 * * * *", `minute field "1,,2": item "": empty list item`},
		{"5-1 * * * *", `minute field "5-1": range 5-1 is backwards`},
		{"1-2-3 * * * *", `minute field "1-2-3": "2-3" is not a number`},
		{"-1 * * * *", `minute field "-1": "" is not a number`},
		{"a * * * *", `minute field "a": "A" is not a number`},
		{"* 24 * * *", `hour field "24": 24 out of range 0-23`},
		{"* */25 * * *", `hour field "*/25": step 25 out of range 1-24`},
		{"* * 0 * *", `day-of-month field "0": 0 out of range 1-31`},
		{"* * 32 * *", `day-of-month field "32": 32 out of range 1-31`},
		{"* * 40W * *", `day-of-month field "40W": 40 out of range 1-31`},
		{"* * LW * *", `day-of-month field "LW": "L" is not a number`},
		{"* * * 13 *", `month field "13": 13 out of range 1-12`},
		{"* * * 0 *", `month field "0": 0 out of range 1-12`},
		{"* * * * 8", `day-of-week field "8": 8 out of range 0-7`},
		{"* * * * 1#6", `day-of-week field "1#6": "6" after # must be 1-5`},
		{"* * * * L", `day-of-week field "L": "L" is not a number`},
		{"* * * * 9L", `day-of-week field "9L": 9 out of range 0-7`},
		{"60 * * * * *", `second field "60": 60 out of range 0-59`},
		{"*/70 * * * * *", `second field "*/70": step 70 out of range 1-60`},
		{"@reboot", "unknown macro @reboot"},
		{"@fortnightly", "unknown macro @fortnightly"},
		{"@daily 5", "macro @daily takes no fields"},
		{"@every 0s", "@every: duration 0s must be positive"},
		{"@every -1m", "@every: duration -1m must be positive"},
		{"@every abc", `@every: "abc" is not a Go duration`},
		{"@every 10", `@every: "10" is not a Go duration`},
		{"@every", "@every takes one Go duration"},
		{"@every 1s 2s", "@every takes one Go duration"},
		{"@every 500ms", "@every: duration 500ms is below the minimum of 1s"},
		{"@every 1s500us", "must be a whole number of milliseconds"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			s, err := schedule.Parse(tt.expr, nil)
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want an error", tt.expr, s)
			}
			msg := err.Error()
			prefix := `bad schedule "` + strings.ReplaceAll(tt.expr, `"`, `\"`) + `": `
			if !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, tt.want) {
				t.Errorf("error %q\nwant prefix %q and %q", msg, prefix, tt.want)
			}
			if msg != strings.ToLower(msg[:1])+msg[1:] {
				t.Errorf("error %q does not start lowercase", msg)
			}
		})
	}
}

// TestDayRulesAgainstGronx checks day-of-month/day-of-week matching against
// gronx's IsDue over two years.
func TestDayRulesAgainstGronx(t *testing.T) {
	from := mustTime(t, "2027-01-01T00:00:00Z")
	to := from.AddDate(2, 0, 0)
	for _, expr := range []string{
		"0 0 L * *", "0 0 15W * *", "0 0 1W * *", "0 0 31W * *", "0 0 * * 5L", "0 0 * * 0L", "0 0 * * 1#2", "0 0 * * 7#1",
		"0 0 13 * 5", "0 0 */2 * 5", "0 0 13 * */5", "0 12 1-7 * 1", "0 0 1,15 * 1,3", "0 6 * 2 0-2", "0 0 ? * 3", "0 0 10-20 * 7-2",
	} {
		s := mustParse(t, expr)
		got := schedule.Between(s, from, to, 0)
		want := oracle(t, expr, time.UTC, from, to, time.Hour)
		if len(want) == 0 || !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Errorf("%q: got %d slots, oracle %d:%s\nwant%s", expr, len(got), len(want), show(got[:min(len(got), 10)], time.UTC), show(want[:min(len(want), 10)], time.UTC))
		}
	}
}
