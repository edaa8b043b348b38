package progress

import (
	"testing"
	"time"
)

// mockClock is a Clock the test moves by hand.
type mockClock struct{ now time.Time }

func (c *mockClock) Now() time.Time                { return c.now }
func (c *mockClock) advance(d time.Duration)       { c.now = c.now.Add(d) }
func newMockClock() *mockClock                     { return &mockClock{now: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)} }
func (c *mockClock) ago(d time.Duration) time.Time { return c.now.Add(-d) }

// TestMeterRateAndETA feeds a Meter snapshots at known times and checks the rate (windowed, or
// the average since the start while the history is short) and the ETA.
func TestMeterRateAndETA(t *testing.T) {
	type step struct {
		after     time.Duration // clock advance before this snapshot
		phase     string
		done, all int
		rate      float64
		eta       time.Duration // -1: unknown
	}
	tests := []struct {
		name    string
		started time.Duration // how long before the first snapshot the run started (0: unknown)
		window  time.Duration
		steps   []step
	}{
		{"average since start until the history spans minSpan", 10 * time.Second, 0, []step{
			{0, "tracing", 50, 100, 5, 10 * time.Second},
			{time.Second, "tracing", 61, 100, 61.0 / 11, 8 * time.Second}, // 7.03 s, rounded up
			// 2 s of history: 21 items in 2 s, 10.5/s; 29 left.
			{time.Second, "tracing", 71, 100, 10.5, 3 * time.Second},
		}},
		{"no start, no history: unknown", 0, 0, []step{
			{0, "tracing", 10, 100, 0, -1},
			{time.Second, "tracing", 20, 100, 0, -1},
			{2 * time.Second, "tracing", 40, 100, 10, 6 * time.Second},
		}},
		{"the window forgets an early burst", time.Second, 10 * time.Second, []step{
			{0, "tracing", 0, 1000, 0, -1},
			{5 * time.Second, "tracing", 500, 1000, 100, 5 * time.Second}, // reused batches
			{5 * time.Second, "tracing", 510, 1000, 51, 10 * time.Second},
			{5 * time.Second, "tracing", 520, 1000, 2, 240 * time.Second}, // base: the 500 at 5 s
			{5 * time.Second, "tracing", 530, 1000, 2, 235 * time.Second},
		}},
		{"planning: no ETA, the plan is not complete", 5 * time.Second, 0, []step{
			{0, "planning", 0, 500, 0, -1},
			{5 * time.Second, "planning", 0, 900, 0, -1},
		}},
		{"stalled: rate 0, no ETA", time.Second, 4 * time.Second, []step{
			{0, "tracing", 10, 20, 10, time.Second},
			{5 * time.Second, "tracing", 10, 20, 0, -1},
		}},
		{"done: nothing left, no ETA", time.Second, 0, []step{
			{3 * time.Second, "finalizing", 20, 20, 5, -1},
		}},
		{"counts go back (another run): start over", 0, 0, []step{
			{0, "tracing", 100, 200, 0, -1},
			{3 * time.Second, "tracing", 130, 200, 10, 7 * time.Second},
			{time.Second, "tracing", 5, 200, 0, -1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newMockClock()
			var started time.Time
			if tt.started > 0 {
				started = clock.ago(tt.started)
			}
			m := NewMeter(clock, tt.window)
			for i, s := range tt.steps {
				clock.advance(s.after)
				st := m.Update(Snapshot{Phase: s.phase, Items: s.all, ItemsDone: s.done, Started: started})
				if d := st.Rate - s.rate; d > 1e-9 || d < -1e-9 {
					t.Errorf("step %d: rate %.4f, want %.4f", i, st.Rate, s.rate)
				}
				switch {
				case s.eta < 0 && st.ETAKnown:
					t.Errorf("step %d: ETA %v, want unknown", i, st.ETA)
				case s.eta >= 0 && (!st.ETAKnown || st.ETA != s.eta):
					t.Errorf("step %d: ETA %v (known %v), want %v", i, st.ETA, st.ETAKnown, s.eta)
				}
				if !started.IsZero() && st.Elapsed != clock.now.Sub(started) {
					t.Errorf("step %d: elapsed %v", i, st.Elapsed)
				}
			}
		})
	}
}

// TestThrottle checks, on a mock clock, that a Throttle lets through the first snapshot, then at
// most one a period while the counts change, and a sign of life a minute apart while they do not.
func TestThrottle(t *testing.T) {
	clock := newMockClock()
	th := NewThrottle(clock, 5*time.Second, time.Minute)
	s := Snapshot{Phase: "tracing", Items: 1000, Started: clock.now}
	if !th.Allow(s) {
		t.Fatal("the first snapshot was held back")
	}
	// One update a second for a minute, every one changing the counts: one line in five.
	lines := 0
	for i := 1; i <= 60; i++ {
		clock.advance(time.Second)
		s.ItemsDone += 10
		if th.Allow(s) {
			lines++
			if i%5 != 0 {
				t.Errorf("a line after %d s", i)
			}
		}
	}
	if lines != 12 {
		t.Errorf("%d lines in 60 s of updates a second apart, want 12", lines)
	}
	// A burst of updates within a second: none of them.
	for range 100 {
		s.Rejects++
		if th.Allow(s) {
			t.Fatal("a line within a second of the last one")
		}
	}
	// Stalled counts: nothing until a minute has passed since the last line.
	clock.advance(5 * time.Second)
	if !th.Allow(s) {
		t.Fatal("changed counts 5 s later were held back")
	}
	for i := 1; i < 60; i++ {
		clock.advance(time.Second)
		if th.Allow(s) {
			t.Fatalf("a line for unchanged counts %d s later", i)
		}
	}
	clock.advance(time.Second)
	if !th.Allow(s) {
		t.Fatal("no sign of life after a minute of unchanged counts")
	}
	// The start time alone is no change.
	clock.advance(5 * time.Second)
	s.Started = s.Started.Add(time.Second)
	if th.Allow(s) {
		t.Error("a new start time counted as a change")
	}
}

// TestThrottleDefaults checks the documented defaults.
func TestThrottleDefaults(t *testing.T) {
	th := NewThrottle(nil, 0, 0)
	if th.every != DefaultEvery || th.idle != DefaultIdle || th.clock != System {
		t.Errorf("defaults: every %v, idle %v", th.every, th.idle)
	}
	if th := NewThrottle(nil, 2*time.Minute, 0); th.idle != 2*time.Minute {
		t.Errorf("idle %v shorter than every", th.idle)
	}
}
