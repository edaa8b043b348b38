package execute

import (
	"time"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// tracedLimits are the limits of a test's traced runs (the first and, with reexecute, the second):
// lim with its wall-clock and CPU-time limits scaled from the untraced run's wall-clock time
// (schemas.TracedTimeLimit), when that run finished; lim as it is when it did not (a timeout
// untraced would time out traced too). The untraced time is the sandbox's measure of the item's
// process from outside it (sandbox.Result.Wall), which the test can lengthen (by sleeping) but
// never past the cap: at most schemas.TracedTimeCap x lim.WallTime.
func tracedLimits(lim sandbox.Limits, plain *sandbox.TestResult) sandbox.Limits {
	if plain == nil || plain.Outcome == "" || plain.Result == nil {
		return lim
	}
	out := lim
	out.WallTime = schemas.TracedTimeLimit(lim.WallTime, plain.Result.Wall)
	if lim.CPUTime > 0 {
		out.CPUTime = max(lim.CPUTime, out.WallTime)
	}
	return out
}

// countTiming counts how a test's traced run fit its time: timed out within its budget while the
// untraced run finished (the test is quarantined: its outcome changed), or finished past the
// spec's limit thanks to the longer budget.
func countTiming(counts schemas.Counts, lim sandbox.Limits, plain, tr *sandbox.TestResult) {
	switch {
	case plain.Outcome != "" && tr.Result.Status == schemas.StatusTimeout:
		counts[schemas.CountTestsTracedTimeout]++
	case tr.Outcome != "" && lim.WallTime > 0 && tr.Result.Wall > lim.WallTime:
		counts[schemas.CountTestsTracedPastLimit]++
	}
}

// tracedTime hands out the traced budgets of one repository's tests (tracedLimits) out of an
// allowance: all its tests' traced runs together may take at most one limits.timeout per test run
// past limits.timeout, so that a repository of many tests that are slow only when traced (or that
// sleep when traced, to buy time) takes at most about twice what its untraced runs may. What a run
// takes past the limit is measured (the run's wall-clock time from outside it); once the allowance
// is spent, tests are traced within limits.timeout again (counted as tests:traced_budget_spent
// when the scaled budget was cut).
type tracedTime struct {
	lim  sandbox.Limits
	left time.Duration // what traced runs may still take past lim.WallTime
}

// newTracedTime is the allowance of a repository of tests tests run under lim.
func newTracedTime(lim sandbox.Limits, tests int) *tracedTime {
	return &tracedTime{lim: lim, left: time.Duration(tests) * lim.WallTime}
}

// limits are the limits of the traced runs of a test whose untraced run was plain, and whether
// the allowance cut them short of tracedLimits'.
func (b *tracedTime) limits(plain *sandbox.TestResult) (sandbox.Limits, bool) {
	l := tracedLimits(b.lim, plain)
	extra := l.WallTime - b.lim.WallTime
	if extra <= 0 || extra <= b.left {
		return l, false
	}
	l.WallTime = b.lim.WallTime + max(b.left, 0)
	if b.lim.CPUTime > 0 {
		l.CPUTime = max(b.lim.CPUTime, l.WallTime)
	}
	return l, true
}

// spend takes what a traced run of wall took past the limit out of the allowance.
func (b *tracedTime) spend(wall time.Duration) {
	if wall > b.lim.WallTime {
		b.left -= wall - b.lim.WallTime
	}
}
