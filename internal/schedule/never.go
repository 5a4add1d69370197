package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/adhocore/gronx"
)

// cycleYears is the Gregorian calendar's cycle of weekdays and leap years
// (between 1901 and 2099): in 28 years every month starts on every weekday,
// in both a leap year and a common one.
const cycleYears = 28

// NoDay names the fields of s that make it match no day at all, such as
// "day-of-month 31 never falls in month 2" for "0 0 31 2 *", with what to
// change; it returns "" when some day of the 28-year calendar cycle
// matches, and for "@every". A schedule with a matching day always has a
// slot: its time-of-day fields match some time on every day.
func NoDay(s Schedule) string {
	c, ok := s.(*cron)
	if !ok || c.anyDay {
		return ""
	}
	var chk gronx.SegmentChecker
	for y := 2000; y < 2000+cycleYears; y++ {
		for mo := time.January; mo <= time.December; mo++ {
			if c.month&(1<<mo) == 0 {
				continue
			}
			for d := time.Date(y, mo, 1, 0, 0, 0, 0, time.UTC); d.Month() == mo; d = d.AddDate(0, 0, 1) {
				if ok, _ := c.dayDue(&chk, d); ok {
					return ""
				}
			}
		}
	}
	months := monthList(c.month)
	switch {
	case isStar(c.dow):
		return fmt.Sprintf("day-of-month %s never falls in %s; pick a day the month has (L is its last day)", c.dom, months)
	case isStar(c.dom):
		return fmt.Sprintf("day-of-week %s never falls in %s; change the day-of-week or month field", c.dow, months)
	}
	return fmt.Sprintf("day-of-month %s and day-of-week %s never fall in %s; change the day or month fields", c.dom, c.dow, months)
}

// monthList is "month 2" or "months 4, 6, 9, 11" for a set of month bits.
func monthList(set uint64) string {
	var ms []string
	for m := 1; m <= 12; m++ {
		if set&(1<<m) != 0 {
			ms = append(ms, strconv.Itoa(m))
		}
	}
	if len(ms) == 1 {
		return "month " + ms[0]
	}
	return "months " + strings.Join(ms, ", ")
}
