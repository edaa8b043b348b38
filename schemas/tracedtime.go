package schemas

import "time"

// The traced run of a repository's test gets a time budget scaled from its untraced run's
// (docs/spec.md, "Repository sources"): tracing renders every traced line's locals, so a test that
// fits limits.timeout untraced may not fit it traced.
const (
	// TracedTimeFactor scales a test's untraced wall-clock time into its traced run's budget.
	// Measured on a test of pure Python loops (one repository function, 3,000,000 iterations of one
	// statement, 6,000,008 trace events, trace limits raised to let it run): untraced 0.17-0.19 s
	// wall (0.16 s CPU), traced 6.05-6.18 s wall (2.1 s CPU of the traced process; the rest is
	// decoding the events in Go): 25-35x the whole run's wall time (over runs on a loaded 2-core
	// machine), 13x its CPU time (the pytest start-up, about 0.06 s, untraced in both). A
	// line-dense loop is the worst case: 2,000,000 calls of a standard-library function (not
	// traced, but each call reaches the tracer) run 2.9-3.3x slower, and code that spends its time
	// in C (regular expressions, hashing) less still. With the default trace limits (100,000
	// events, 64 MiB) a line-dense test stops at its event limit long before its time runs out, so
	// the tests that time out only traced are those of the second kind. Measured with
	// BenchmarkTracingSlowdown (execute/budget_test.go; x_loop 24.6, x_stdlib 2.9 in one run).
	TracedTimeFactor = 40
	// TracedTimeCap bounds the traced budget at this many times limits.timeout, whatever the
	// untraced run took: a test can buy itself at most this much of a worker's time.
	TracedTimeCap = 4
)

// TracedTimeLimit is the wall-clock (and CPU-time) limit of the traced runs of a test whose
// untraced run finished (with any outcome) in untraced: TracedTimeFactor x untraced, at least
// limit (limits.timeout) and at most TracedTimeCap x limit. A test whose untraced run did not finish
// (untraced <= 0: pass 0) keeps limit.
func TracedTimeLimit(limit, untraced time.Duration) time.Duration {
	if limit <= 0 || untraced <= 0 {
		return limit
	}
	budget := limit
	if untraced < TracedTimeCap*limit/TracedTimeFactor+1 { // no overflow below the cap
		budget = max(budget, TracedTimeFactor*untraced)
	} else {
		budget = TracedTimeCap * limit
	}
	return min(budget, TracedTimeCap*limit)
}

// TracedTimeCapOf is the longest traced run a test may get under limit (limits.timeout):
// what a step that waits on one traced run must allow.
func TracedTimeCapOf(limit time.Duration) time.Duration { return TracedTimeCap * limit }
