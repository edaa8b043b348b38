package execute

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestWatchdog: the watchdog beats while its step is within its deadline, and a step that
// outlives it (a stuck parse, a stuck child) ends the work with ErrStalled naming the step; the
// parent's own cancellation stays a cancellation.
func TestWatchdog(t *testing.T) {
	parent := context.Background()
	var beats atomic.Int64
	ctx, wd := newWatchdog(parent, func() { beats.Add(1) }, time.Millisecond)
	defer wd.release()
	clock := &fakeClock{t: time.Unix(0, 0)}
	wd.mu.Lock()
	wd.now = clock.now
	wd.mu.Unlock()
	wd.begin("collecting tests", time.Minute)
	clock.add(time.Minute) // within the limit and its grace
	for deadline := time.Now().Add(10 * time.Second); beats.Load() < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("%d beats in 10 s while on time", beats.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatalf("ended while on time: %v", context.Cause(ctx))
	}
	clock.add(stepGrace + time.Second) // past the step's deadline
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled step was not ended")
	}
	err := stalled(parent, ctx, ctx.Err())
	if !errors.Is(err, ErrStalled) || err.Error() != "no progress: collecting tests made none in 3m0s" {
		t.Errorf("error %v", err)
	}
	n := beats.Load()
	time.Sleep(20 * time.Millisecond)
	if beats.Load() != n {
		t.Error("beats after the stall: the heartbeat says alive while nothing advances")
	}

	// A cancelled parent is not a stall.
	p2, cancel := context.WithCancel(context.Background())
	ctx2, wd2 := newWatchdog(p2, func() {}, time.Millisecond)
	defer wd2.release()
	cancel()
	<-ctx2.Done()
	if err := stalled(p2, ctx2, ctx2.Err()); !errors.Is(err, context.Canceled) || errors.Is(err, ErrStalled) {
		t.Errorf("parent cancelled: %v", err)
	}
}
