package schedule_test

import "testing"

// TestClockJumps: ISC cron's rule for forward jumps. A fixed-time job whose
// wall time a jump of less than 3 hours skips runs once at the end of the
// jump (daylight saving); a jump of 3 hours or more is a time change and
// the skipped wall times have no slot. Jobs that follow elapsed time have
// no slot in any jump.
func TestClockJumps(t *testing.T) {
	tests := []struct {
		name, zone, expr, from string
		want                   []string
	}{
		// Pacific/Apia skipped 30 December 2011: 2011-12-29 23:59:59 -10:00
		// was followed by 2011-12-31 00:00:00 +14:00 (10:00Z).
		{"apia noon", "Pacific/Apia", "0 12 * * *", "2011-12-29T00:00:00-10:00",
			[]string{"2011-12-29T12:00:00-10:00", "2011-12-31T12:00:00+14:00", "2012-01-01T12:00:00+14:00"}},
		{"apia noon, from just before the jump", "Pacific/Apia", "0 12 * * *", "2011-12-29T23:59:59-10:00",
			[]string{"2011-12-31T12:00:00+14:00"}},
		{"apia midnight", "Pacific/Apia", "0 0 * * *", "2011-12-28T12:00:00-10:00",
			[]string{"2011-12-29T00:00:00-10:00", "2011-12-31T00:00:00+14:00", "2012-01-01T00:00:00+14:00"}},
		{"apia midnight, from the jump", "Pacific/Apia", "0 0 * * *", "2011-12-31T00:00:00+14:00",
			[]string{"2012-01-01T00:00:00+14:00"}},
		{"apia @daily", "Pacific/Apia", "@daily", "2011-12-29T00:00:00-10:00",
			[]string{"2011-12-31T00:00:00+14:00", "2012-01-01T00:00:00+14:00"}},
		{"apia 23:30", "Pacific/Apia", "30 23 * * *", "2011-12-29T00:00:00-10:00",
			[]string{"2011-12-29T23:30:00-10:00", "2011-12-31T23:30:00+14:00"}},
		{"apia every second of noon", "Pacific/Apia", "* 0 12 * * *", "2011-12-29T12:00:58-10:00",
			[]string{"2011-12-29T12:00:59-10:00", "2011-12-31T12:00:00+14:00", "2011-12-31T12:00:01+14:00"}},
		{"apia friday 30 december", "Pacific/Apia", "0 9 30 12 *", "2011-01-01T00:00:00-11:00",
			[]string{"2012-12-30T09:00:00+14:00"}},
		{"apia */30", "Pacific/Apia", "*/30 * * * *", "2011-12-29T23:00:00-10:00",
			[]string{"2011-12-29T23:30:00-10:00", "2011-12-31T00:00:00+14:00", "2011-12-31T00:30:00+14:00"}},
		{"apia @hourly", "Pacific/Apia", "@hourly", "2011-12-29T22:30:00-10:00",
			[]string{"2011-12-29T23:00:00-10:00", "2011-12-31T00:00:00+14:00", "2011-12-31T01:00:00+14:00"}},
		// Apia's daylight saving in 2011 is an ordinary one-hour jump:
		// 2011-09-24 03:00 -11:00 -> 04:00 -10:00.
		{"apia spring fixed in gap", "Pacific/Apia", "30 3 * * *", "2011-09-23T12:00:00-11:00",
			[]string{"2011-09-24T04:00:00-10:00", "2011-09-25T03:30:00-10:00"}},

		// Antarctica/Troll, 2027-03-28: 01:00 +00 -> 03:00 +02, a 2-hour
		// jump: caught up, once.
		{"troll fixed in gap", "Antarctica/Troll", "30 1 * * *", "2027-03-27T12:00:00Z",
			[]string{"2027-03-28T03:00:00+02:00", "2027-03-29T01:30:00+02:00"}},
		{"troll two hours of the gap collapse", "Antarctica/Troll", "0,30 1,2 * * *", "2027-03-27T23:00:00Z",
			[]string{"2027-03-28T03:00:00+02:00", "2027-03-29T01:00:00+02:00", "2027-03-29T01:30:00+02:00"}},
		{"troll */30", "Antarctica/Troll", "*/30 * * * *", "2027-03-28T00:00:00Z",
			[]string{"2027-03-28T00:30:00Z", "2027-03-28T03:00:00+02:00"}},

		// Antarctica/Casey, 2022-10-02: 00:01 +08 -> 03:01 +11, exactly
		// 3 hours: a time change, nothing caught up.
		{"casey fixed in gap", "Antarctica/Casey", "30 1 * * *", "2022-10-01T12:00:00+08:00",
			[]string{"2022-10-03T01:30:00+11:00"}},
		{"casey fixed at gap end", "Antarctica/Casey", "0,1 3 * * *", "2022-10-01T12:00:00+08:00",
			[]string{"2022-10-02T03:01:00+11:00", "2022-10-03T03:00:00+11:00"}},
		{"casey fixed before gap", "Antarctica/Casey", "0 0 * * *", "2022-10-01T12:00:00+08:00",
			[]string{"2022-10-02T00:00:00+08:00", "2022-10-03T00:00:00+11:00"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkSlots(t, tt.zone, tt.expr, tt.from, tt.want)
		})
	}
}
