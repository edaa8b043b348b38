package execute

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrStalled is the cause of a repository's tracing ended by its watchdog: its current step (a
// checkout, reading its layout, its environment, its collection, one test, one function) made no
// progress within the step's own deadline. It is of no known class: it counts against the item.
var ErrStalled = errors.New("no progress")

// stepGrace is what a step may take beyond its own limit (the sandbox's start and teardown, the
// runner's own work) before its watchdog ends it.
const stepGrace = 2 * time.Minute

// watchdog heartbeats a repository's tracing while it makes progress and ends it (cancels its
// context with ErrStalled) when a step outlives its deadline: a stuck parse or a stuck child is an
// error in minutes, not at the attempt's overall timeout hours later, and the activity's heartbeat
// stops meaning "alive" once nothing advances.
type watchdog struct {
	mu     sync.Mutex
	step   string
	limit  time.Duration
	until  time.Time
	cancel context.CancelCauseFunc
	stop   chan struct{}
	once   sync.Once
	now    func() time.Time
}

// newWatchdog watches ctx's work, beating alive every interval while the current step is within
// its deadline. Call begin at each step, stopBeating when the watched work is done, and release
// (which also stops it) when the returned context is no longer used.
func newWatchdog(ctx context.Context, alive func(), every time.Duration) (context.Context, *watchdog) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{cancel: cancel, stop: make(chan struct{}), now: time.Now, step: "start", until: time.Now().Add(stepGrace)}
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if err := w.check(); err != nil {
					cancel(err)
					return
				}
				alive()
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return ctx, w
}

// begin starts step, which may take limit (and stepGrace): progress.
func (w *watchdog) begin(step string, limit time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.step, w.limit, w.until = step, limit, w.now().Add(limit+stepGrace)
}

// check returns the stall error once the current step is past its deadline.
func (w *watchdog) check() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.now().After(w.until) {
		return fmt.Errorf("%w: %s made none in %s", ErrStalled, w.step, w.limit+stepGrace)
	}
	return nil
}

// stopBeating stops the watchdog: no more heartbeats, no more deadlines; its context lives on.
func (w *watchdog) stopBeating() { w.once.Do(func() { close(w.stop) }) }

// release stops the watchdog and cancels its context.
func (w *watchdog) release() {
	w.stopBeating()
	w.cancel(nil)
}

// stalled returns the watchdog's error for err when the watchdog ended the work (ctx is the
// watched context, parent its parent): the step that stalled, in place of a bare cancellation.
func stalled(parent, ctx context.Context, err error) error {
	if err != nil && parent.Err() == nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrStalled) {
			return cause
		}
	}
	return err
}
