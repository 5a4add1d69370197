package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/adhocore/gronx"
)

// field describes one position of gronx's six segments
// (second minute hour day-of-month month day-of-week).
type field struct {
	name   string
	pos    int // gronx segment position
	lo, hi int // inclusive bounds of a plain number
	span   int // largest step that still makes sense
}

var fields = [6]field{
	{"second", 0, 0, 59, 60},
	{"minute", 1, 0, 59, 60},
	{"hour", 2, 0, 23, 24},
	{"day-of-month", 3, 1, 31, 31},
	{"month", 4, 1, 12, 12},
	{"day-of-week", 5, 0, 7, 7},
}

const (
	posSecond = 0
	posMinute = 1
	posHour   = 2
	posDom    = 3
	posMonth  = 4
	posDow    = 5
)

// macros gronx does not know but classic cron does.
var extraMacros = map[string]string{
	"@midnight": "@daily",
}

// Parse parses a schedule expression whose wall-clock times are read in loc
// (nil means UTC). It accepts:
//
//   - 5 fields, "minute hour day-of-month month day-of-week", with minute
//     precision;
//   - 6 fields with seconds first, "second minute hour day-of-month month
//     day-of-week" ("*/10 * * * * *" fires at :00, :10, ...). gronx reads a
//     6-field expression whose sixth field has four digits as "5 fields and a
//     year"; here 6 fields are always seconds first, so such a sixth field
//     is an out-of-range day of week and Parse rejects it. Years (7 fields)
//     are not supported;
//   - the macros gronx knows (@yearly, @annually, @monthly, @weekly, @daily,
//     @hourly, @always, @5minutes, @10minutes, @15minutes, @30minutes,
//     @everysecond) and @midnight (= @daily);
//   - "@every <duration>" (a Go duration, at least 1s, whole milliseconds):
//     the multiples of the duration since the Unix epoch, whatever loc is.
//
// Field syntax and matching are gronx's: lists, ranges, steps, month and
// weekday names, L, W and #, and its day-of-month/day-of-week rule (both
// restricted: either may match; either starting with '*': both must match).
// A day-of-week range wraps past Saturday ("FRI-MON", "5-0", see
// unwrapWeekdays); a backwards range in any other field is an error.
// Parse is stricter than gronx.IsValid: every list item must be valid on its
// own (gronx stops at the first item that matches the current time, so it
// accepts "5,99 * * * *" during minute 5), and a step may not exceed its
// field's range ("*/61" in the minute field).
func Parse(expr string, loc *time.Location) (Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	s, err := parse(expr, loc)
	if err != nil {
		return nil, fmt.Errorf("bad schedule %q: %w", expr, err)
	}
	return s, nil
}

// parse does Parse's work, whose error Parse wraps with the expression:
// "@every", or a macro or 5 or 6 fields, checked field by field before
// gronx's answers are cached on a cron.
func parse(expr string, loc *time.Location) (Schedule, error) {
	trimmed := strings.TrimSpace(expr)
	words := strings.Fields(trimmed)
	if len(words) == 0 {
		return nil, errors.New("empty expression")
	}
	if strings.EqualFold(words[0], "@every") {
		d, err := parseEvery(words[1:])
		if err != nil {
			return nil, err
		}
		return &every{expr: expr, d: d}, nil
	}
	segs, err := segmentsOf(trimmed, words)
	if err != nil {
		return nil, err
	}
	if err := checkFields(segs, words); err != nil {
		return nil, err
	}
	segs[posDow] = unwrapWeekdays(segs[posDow])
	c, err := newCron(expr, loc, segs)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// segmentsOf has gronx split a macro or a 5- or 6-field expression (trimmed,
// whose words are words) into its six normalized segments, second first.
// It rejects what gronx would read as a year, which is not supported.
func segmentsOf(trimmed string, words []string) ([]string, error) {
	if strings.HasPrefix(words[0], "@") {
		if len(words) != 1 {
			return nil, fmt.Errorf("macro %s takes no fields", words[0])
		}
		if alias, ok := extraMacros[strings.ToLower(trimmed)]; ok {
			trimmed = alias
		}
	} else if len(words) != 5 && len(words) != 6 {
		return nil, fmt.Errorf("want 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), got %d", len(words))
	}

	segs, err := gronx.Segments(trimmed)
	if err != nil || len(segs) < 6 {
		if strings.HasPrefix(words[0], "@") {
			return nil, fmt.Errorf("unknown macro %s", words[0])
		}
		return nil, fmt.Errorf("gronx cannot split it: %w", err)
	}
	if len(segs) == 7 {
		if len(words) == 6 {
			return nil, fmt.Errorf("6 fields are read as second first, so the sixth field %q must be a day of week 0-7 (gronx would read it as a year; years are not supported)", words[5])
		}
		return nil, errors.New("years (7 fields) are not supported")
	}
	return segs, nil
}

// checkFields checks every segment of segs (checkSegment), and names the
// first bad one as the user wrote it in words, so that the error points at
// their text rather than gronx's normalized form.
func checkFields(segs, words []string) error {
	for i, f := range fields {
		if err := checkSegment(f, segs[i]); err != nil {
			written := segs[i] // as gronx normalized it (macros, names)
			if len(words) == 6 {
				written = words[i]
			} else if len(words) == 5 && i > 0 {
				written = words[i-1]
			}
			return fmt.Errorf("%s field %q: %w", f.name, written, err)
		}
	}
	return nil
}

// newCron builds the cron of expr from its checked segments (the weekdays
// unwrapped): it caches the values each time field matches and has gronx
// judge the day fields once, so that a bad segment fails here rather than
// in Next.
func newCron(expr string, loc *time.Location, segs []string) (*cron, error) {
	c := &cron{
		expr:  expr,
		loc:   loc,
		fixed: !wild(segs[posMinute]) && !wild(segs[posHour]),
		dom:   segs[posDom],
		dow:   segs[posDow],
	}
	c.anyDay = isStar(c.dom) && isStar(c.dow)
	if err := c.setTimeFields(segs); err != nil {
		return nil, err
	}
	if err := c.checkDays(); err != nil {
		return nil, err
	}
	return c, nil
}

// setTimeFields sets the value sets of the second, minute, hour and month
// fields from segs, as gronx matches them (valueSet).
func (c *cron) setTimeFields(segs []string) error {
	timeFields := []struct {
		set *uint64
		pos int
		at  func(v int) time.Time // a reference time whose field is v
	}{
		{&c.second, posSecond, func(v int) time.Time { return time.Date(2000, 1, 1, 0, 0, v, 0, time.UTC) }},
		{&c.minute, posMinute, func(v int) time.Time { return time.Date(2000, 1, 1, 0, v, 0, 0, time.UTC) }},
		{&c.hour, posHour, func(v int) time.Time { return time.Date(2000, 1, 1, v, 0, 0, 0, time.UTC) }},
		{&c.month, posMonth, func(v int) time.Time { return time.Date(2000, time.Month(v), 1, 0, 0, 0, 0, time.UTC) }},
	}
	for _, tf := range timeFields {
		var err error
		if *tf.set, err = valueSet(segs[tf.pos], fields[tf.pos], tf.at); err != nil {
			return err
		}
	}
	return nil
}

// checkDays lets gronx judge the day fields too, over every day of a leap
// year (that covers every day of month, weekday, last day and nth weekday).
func (c *cron) checkDays() error {
	var chk gronx.SegmentChecker
	for d := time.Date(2028, 1, 1, 12, 0, 0, 0, time.UTC); d.Year() == 2028; d = d.AddDate(0, 0, 1) {
		if _, err := c.dayDue(&chk, d); err != nil {
			return fmt.Errorf("day fields %q %q: %w", c.dom, c.dow, err)
		}
	}
	return nil
}

// parseEvery parses the words after "@every".
func parseEvery(args []string) (time.Duration, error) {
	if len(args) != 1 {
		return 0, errors.New(`@every takes one Go duration, like "@every 90m"`)
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		return 0, fmt.Errorf("@every: %q is not a Go duration (like 90s, 15m or 1h30m)", args[0])
	}
	switch {
	case d <= 0:
		return 0, fmt.Errorf("@every: duration %s must be positive", args[0])
	case d < time.Second:
		return 0, fmt.Errorf("@every: duration %s is below the minimum of 1s", args[0])
	case d%time.Millisecond != 0:
		return 0, fmt.Errorf("@every: duration %s must be a whole number of milliseconds", args[0])
	}
	return d, nil
}

// wild reports whether a segment begins with a wildcard, which is what makes
// a job follow elapsed time rather than a fixed wall time (ISC cron's rule).
// gronx treats "?" as "*", so it is a wildcard too.
func wild(seg string) bool { return strings.HasPrefix(seg, "*") || strings.HasPrefix(seg, "?") }

func isStar(seg string) bool { return seg == "*" || seg == "?" }

// checkSegment checks the syntax and bounds of each list item of one
// normalized segment, so that errors are clear and do not depend on the
// current time.
func checkSegment(f field, seg string) error {
	for _, item := range strings.Split(seg, ",") {
		if err := checkItem(f, item); err != nil {
			if item != seg {
				return fmt.Errorf("item %q: %w", item, err)
			}
			return err
		}
	}
	return nil
}

func checkItem(f field, item string) error {
	switch {
	case item == "":
		return errors.New("empty list item")
	case isStar(item):
		return nil
	case f.pos == posDom && item == "L":
		return nil
	case f.pos == posDom && strings.HasSuffix(item, "W"):
		_, err := number(f, item[:len(item)-1])
		return err
	case f.pos == posDow && strings.Contains(item, "#"):
		day, nth, _ := strings.Cut(item, "#")
		if _, err := number(f, day); err != nil {
			return err
		}
		n, err := strconv.Atoi(nth)
		if err != nil || !digits(nth) || n < 1 || n > 5 {
			return fmt.Errorf("%q after # must be 1-5 (the nth weekday of the month)", nth)
		}
		return nil
	case f.pos == posDow && len(item) > 1 && strings.HasSuffix(item, "L"):
		_, err := number(f, item[:len(item)-1])
		return err
	}
	base, step, hasStep := strings.Cut(item, "/")
	if hasStep {
		n, err := strconv.Atoi(step)
		if err != nil || !digits(step) {
			return fmt.Errorf("step %q is not a number", step)
		}
		if n < 1 || n > f.span {
			return fmt.Errorf("step %d out of range 1-%d", n, f.span)
		}
		if base == "*" {
			return nil
		}
	}
	from, to, isRange := strings.Cut(base, "-")
	a, err := number(f, from)
	if err != nil {
		return err
	}
	if !isRange {
		return nil
	}
	b, err := number(f, to)
	if err != nil {
		return err
	}
	if f.pos == posDow && a == 7 && b != 7 {
		a = 0 // gronx reads "7-y" as Sunday through y
	}
	if a > b && f.pos != posDow {
		return fmt.Errorf("range %s is backwards (only day-of-week ranges wrap: write %s,%s)", base, span(a, f.hi), span(f.lo, b))
	}
	return nil
}

// span writes the range a-b, or a alone when b is a.
func span(a, b int) string {
	if a == b {
		return strconv.Itoa(a)
	}
	return fmt.Sprintf("%d-%d", a, b)
}

// number parses a plain value of field f.
func number(f field, s string) (int, error) {
	if !digits(s) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < f.lo || n > f.hi {
		return 0, fmt.Errorf("%s out of range %d-%d", s, f.lo, f.hi)
	}
	return n, nil
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// valueSet asks gronx which values of a time field (second, minute, hour,
// month) seg matches; bit v of the result is value v. at builds a reference
// time whose field f has value v.
func valueSet(seg string, f field, at func(v int) time.Time) (uint64, error) {
	var set uint64
	var chk gronx.SegmentChecker
	for v := f.lo; v <= f.hi && v < 60; v++ {
		chk.SetRef(at(v))
		due, err := chk.CheckDue(seg, f.pos)
		if err != nil {
			return 0, fmt.Errorf("%s field %q: %w", f.name, seg, err)
		}
		if due {
			set |= 1 << v
		}
	}
	if set == 0 {
		return 0, fmt.Errorf("%s field %q matches no value", f.name, seg)
	}
	return set, nil
}
