package schedule

import (
	"testing"
	"time"
)

func TestJitterDeterministicAndBounded(t *testing.T) {
	const limit = 50 * time.Second
	for slot := int64(1_700_000_000_000); slot < 1_700_000_000_000+1000*60_000; slot += 60_000 {
		j := Jitter("backup", slot, limit)
		if j < 0 || j > limit {
			t.Fatalf("Jitter(backup, %d) = %v, want within [0, %v]", slot, j, limit)
		}
		if j%time.Millisecond != 0 {
			t.Fatalf("Jitter(backup, %d) = %v, want whole milliseconds", slot, j)
		}
		if again := Jitter("backup", slot, limit); again != j {
			t.Fatalf("Jitter(backup, %d) = %v then %v, want the same", slot, j, again)
		}
	}
	if j := Jitter("backup", 1, 0); j != 0 {
		t.Fatalf("Jitter with limit 0 = %v, want 0", j)
	}
	if j := Jitter("backup", 1, -time.Second); j != 0 {
		t.Fatalf("Jitter with a negative limit = %v, want 0", j)
	}
	if j := Jitter("backup", 1, time.Millisecond); j != 0 && j != time.Millisecond {
		t.Fatalf("Jitter with limit 1ms = %v, want 0 or 1ms", j)
	}
}

// TestJitterSpread: the starts of a job's slots fill the window evenly, and
// two jobs at one slot start at different moments.
func TestJitterSpread(t *testing.T) {
	const (
		limit   = 10 * time.Second
		slots   = 10000
		buckets = 10
	)
	var count [buckets]int
	for i := range int64(slots) {
		j := Jitter("report", 1_700_000_000_000+i*1000, limit)
		count[min(int(j*buckets/(limit+time.Millisecond)), buckets-1)]++
	}
	for b, n := range count {
		if n < slots/buckets*7/10 || n > slots/buckets*13/10 {
			t.Errorf("bucket %d of the window holds %d of %d starts, want about %d: %v", b, n, slots, slots/buckets, count)
		}
	}
	same := 0
	for i := range int64(1000) {
		if Jitter("a", i*1000, limit) == Jitter("b", i*1000, limit) {
			same++
		}
	}
	if same > 5 {
		t.Errorf("jobs a and b start at the same jitter at %d of 1000 slots, want them apart", same)
	}
}

func TestStart(t *testing.T) {
	slot := time.UnixMilli(1_700_000_000_000).UTC()
	got := Start("backup", slot, 30*time.Second)
	if want := slot.Add(Jitter("backup", slot.UnixMilli(), 30*time.Second)); !got.Equal(want) {
		t.Fatalf("Start = %v, want %v", got, want)
	}
	if got := Start("backup", slot, 0); !got.Equal(slot) {
		t.Fatalf("Start without jitter = %v, want the slot %v", got, slot)
	}
}

func TestPeriod(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		expr string
		want time.Duration
	}{
		{"* * * * *", time.Minute},
		{"*/7 * * * *", 4 * time.Minute}, // :56 to :00
		{"*/5 * * * * *", 5 * time.Second},
		{"0,1 * * * * *", time.Second},
		{"0 0 1,2 * *", 24 * time.Hour},
		{"@hourly", time.Hour},
	}
	for _, c := range cases {
		s, err := Parse(c.expr, time.UTC)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if got := Period(s, from); got != c.want {
			t.Errorf("Period(%q) = %v, want %v", c.expr, got, c.want)
		}
	}
}
