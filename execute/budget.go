package execute

import (
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
