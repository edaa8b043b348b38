// Package progress models a dataset run's progress as a person or a log collector watches it: a
// Snapshot of the run's counts, a Meter that turns snapshots taken over time into a rate (items
// per second over a recent window) and an ETA, and a Throttle that decides when an output that is
// not a terminal gets a line. Rendering is the CLI's business; this package only computes.
package progress

import (
	"math"
	"time"
)

// Snapshot is a dataset run's counts at one moment.
type Snapshot struct {
	// Phase is the run's stage: planning, tracing, functions, finalizing or done.
	Phase string
	// Items is the number of items planned so far (final once planning ends); ItemsDone how many
	// of them ended as rows or rejects.
	Items, ItemsDone int
	// Trajectories is the number of rows (debugger trajectories) written.
	Trajectories int
	// Tokens is the number of tokens in those rows.
	Tokens int64
	// Rejects counts the items rejected, with their reasons in the dataset's rejects.
	Rejects int
	// GenUnits counts the functions given generated inputs so far, GenWall the time generating
	// them took (summed over the workers).
	GenUnits int64
	GenWall  time.Duration
	// Batches, BatchesDone, BatchesFailed and InFlight count the run's batches.
	Batches, BatchesDone, BatchesFailed, InFlight int
	// Started is when the run started (zero: unknown).
	Started time.Time
}

// Status is a Snapshot with what follows from it and from the snapshots before it.
type Status struct {
	Snapshot
	// Elapsed is the time since Started (zero when Started is unknown).
	Elapsed time.Duration
	// Rate is items done per second over the Meter's window; zero when not yet known.
	Rate float64
	// ETA is the time left for the items not done at Rate, in whole seconds rounded up (an item
	// left is never "0s" away); meaningful only when ETAKnown (the plan is complete, items are
	// left and Rate is known).
	ETA      time.Duration
	ETAKnown bool
}

// Clock tells the time; System is the real one. Tests pass their own.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// System is the wall clock.
var System Clock = systemClock{}

// DefaultWindow is the span of recent snapshots a Meter's rate is taken over.
const DefaultWindow = 30 * time.Second

// minSpan is the shortest span of snapshots a windowed rate is taken over; a shorter history
// falls back to the average since the run started.
const minSpan = 2 * time.Second

type sample struct {
	at   time.Time
	done int
}

// Meter computes rates and ETAs from the snapshots it is given, one after another. It is not safe
// for concurrent use.
type Meter struct {
	clock   Clock
	window  time.Duration
	samples []sample
}

// NewMeter returns a Meter that reads the time from clock (nil: System) and takes rates over the
// last window (zero: DefaultWindow).
func NewMeter(clock Clock, window time.Duration) *Meter {
	if clock == nil {
		clock = System
	}
	if window <= 0 {
		window = DefaultWindow
	}
	return &Meter{clock: clock, window: window}
}

// Update records s as of now and returns its Status. The rate is the items done over the last
// window of snapshots; until the snapshots span minSpan, it is the average since s.Started.
func (m *Meter) Update(s Snapshot) Status {
	now := m.clock.Now()
	st := Status{Snapshot: s}
	if !s.Started.IsZero() && now.After(s.Started) {
		st.Elapsed = now.Sub(s.Started)
	}
	if n := len(m.samples); n > 0 && (s.ItemsDone < m.samples[n-1].done || !now.After(m.samples[n-1].at)) {
		m.samples = m.samples[:0] // counts went back (another run) or the clock did: start over
	}
	m.samples = append(m.samples, sample{now, s.ItemsDone})
	// Keep the newest sample at or before the window's start as the base of the rate.
	cut := now.Add(-m.window)
	drop := 0
	for drop+1 < len(m.samples) && !m.samples[drop+1].at.After(cut) {
		drop++
	}
	m.samples = m.samples[drop:]
	base := m.samples[0]
	if span := now.Sub(base.at); span >= minSpan {
		st.Rate = float64(s.ItemsDone-base.done) / span.Seconds()
	} else if st.Elapsed > 0 {
		st.Rate = float64(s.ItemsDone) / st.Elapsed.Seconds()
	}
	if left := s.Items - s.ItemsDone; left > 0 && st.Rate > 0 && s.Phase != "planning" {
		st.ETA = time.Duration(math.Ceil(float64(left)/st.Rate)) * time.Second
		st.ETAKnown = true
	}
	return st
}

// DefaultEvery is how often a Throttle lets a line through while the counts change, and
// DefaultIdle how often while they do not.
const (
	DefaultEvery = 5 * time.Second
	DefaultIdle  = time.Minute
)

// Throttle decides when an output that is not a terminal (a CI log, a Kubernetes pod's log) gets a
// progress line: the first snapshot, then at most one every Every while the counts change, and
// one every Idle while they do not (a sign of life). The run's final line is the caller's to
// print, always. It is not safe for concurrent use.
type Throttle struct {
	clock       Clock
	every, idle time.Duration
	last        time.Time
	lastCounts  Snapshot
	any         bool
}

// NewThrottle returns a Throttle reading the time from clock (nil: System); zero durations take
// DefaultEvery and DefaultIdle.
func NewThrottle(clock Clock, every, idle time.Duration) *Throttle {
	if clock == nil {
		clock = System
	}
	if every <= 0 {
		every = DefaultEvery
	}
	if idle <= 0 {
		idle = DefaultIdle
	}
	return &Throttle{clock: clock, every: every, idle: max(idle, every)}
}

// Allow reports whether s gets a line now; if it does, the Throttle counts it as printed.
func (t *Throttle) Allow(s Snapshot) bool {
	now := t.clock.Now()
	counts := s
	counts.Started = time.Time{}
	switch {
	case !t.any:
	case counts != t.lastCounts && now.Sub(t.last) >= t.every:
	case now.Sub(t.last) >= t.idle:
	default:
		return false
	}
	t.any, t.last, t.lastCounts = true, now, counts
	return true
}
