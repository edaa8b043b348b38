package schemas

import (
	"testing"
	"time"
)

func TestTracedTimeLimit(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name            string
		limit, untraced time.Duration
		want            time.Duration
	}{
		{"did not finish", 10 * s, 0, 10 * s},
		{"no limit", 0, s, 0},
		{"quick: the limit", 10 * s, 100 * time.Millisecond, 10 * s},
		{"scaled", 10 * s, 500 * time.Millisecond, 20 * s},
		{"at the cap", 10 * s, s, 40 * s},
		{"past the cap", 10 * s, 9 * s, 40 * s},
		{"huge untraced", 10 * s, time.Duration(1 << 62), 40 * s},
		{"negative untraced", 10 * s, -s, 10 * s},
	} {
		if got := TracedTimeLimit(tc.limit, tc.untraced); got != tc.want {
			t.Errorf("%s: TracedTimeLimit(%v, %v) = %v, want %v", tc.name, tc.limit, tc.untraced, got, tc.want)
		}
	}
	if got := TracedTimeCapOf(10 * s); got != 40*s {
		t.Errorf("TracedTimeCapOf(10s) = %v", got)
	}
}

// FuzzTracedTimeLimit: the budget is never below the limit nor above the cap, whatever the
// untraced time (which the test's own run decides).
func FuzzTracedTimeLimit(f *testing.F) {
	f.Add(int64(time.Second), int64(time.Millisecond))
	f.Add(int64(time.Second), int64(1<<62))
	f.Fuzz(func(t *testing.T, limit, untraced int64) {
		l := time.Duration(limit % int64(24*time.Hour))
		if l <= 0 {
			return
		}
		got := TracedTimeLimit(l, time.Duration(untraced))
		if got < l || got > TracedTimeCap*l {
			t.Fatalf("TracedTimeLimit(%v, %v) = %v", l, time.Duration(untraced), got)
		}
	})
}
