package schedule

import (
	"strconv"
	"strings"
)

// unwrapWeekdays rewrites the day-of-week ranges of a checked, normalized
// segment that wrap past Saturday as the list of days they name, which gronx
// can match. The week is a cycle: "5-1" (FRI-MON) is Friday, Saturday,
// Sunday and Monday; "5-0" and "1-0" (MON-SUN) end on Sunday, as cronie's
// current source reads them (cronie matches no day for "5-1"). A step counts
// along the wrapped days: "5-1/2" is Friday and Sunday.
// Other items are left as they are.
func unwrapWeekdays(seg string) string {
	items := strings.Split(seg, ",")
	for i, item := range items {
		items[i] = unwrapWeekday(item)
	}
	return strings.Join(items, ",")
}

func unwrapWeekday(item string) string {
	base, stepText, hasStep := strings.Cut(item, "/")
	from, to, isRange := strings.Cut(base, "-")
	if !isRange {
		return item
	}
	a, errA := strconv.Atoi(from)
	b, errB := strconv.Atoi(to)
	if errA != nil || errB != nil {
		return item
	}
	if a == 7 {
		a = 0 // "7-y" is Sunday through y
	}
	if a <= b {
		return item
	}
	step := 1
	if hasStep {
		if n, err := strconv.Atoi(stepText); err == nil && n > 0 {
			step = n
		}
	}
	n := b - a + 7 + 1 // days from a round to b; a is 1-6, b is 0-5
	var days []string
	for k := 0; k < n; k += step {
		days = append(days, strconv.Itoa((a+k)%7))
	}
	return strings.Join(days, ",")
}
