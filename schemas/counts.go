package schemas

import "strings"

// Counts are counters by key: what a batch, a page or a version counted (items, rejects by
// class, tests by outcome, trajectories skipped by reason...). They are stored as one JSON object
// (key: count), summed across batches and versions, and shown by statistics; a key is only ever
// made by the constants and functions below, never built or parsed in place.
type Counts map[CountKey]int64

// CountKey names one counter.
type CountKey string

// Add adds every counter of o to c.
func (c Counts) Add(o Counts) {
	for k, v := range o {
		c[k] += v
	}
}

// Counters of a version and its batches.
const (
	CountItems         CountKey = "items"          // input items planned
	CountRejects       CountKey = "rejects"        // items rejected (every class)
	CountDuplicates    CountKey = "duplicates"     // items rejected as duplicates
	CountBatchesFailed CountKey = "batches_failed" // batches that failed on every attempt
	CountPackTooLong   CountKey = "packing_too_long"
)

// Counters of repositories (RepoTrace.Counts, summed into their batch's).
const (
	CountTests    CountKey = "tests"     // tests collected
	CountTestsRun CountKey = "tests_run" // tests run (at most max_tests)
	// CountQuarantined: tests that give no rows because their outcome changed under tracing, or
	// (also counted as CountTestsNondeterministic) their two traced runs differed in structure.
	CountQuarantined CountKey = "quarantined"
	// CountTestsNondeterministic: tests quarantined because their two traced runs (reexecute)
	// differed in their events (kinds, files, lines, functions, depths), not only in values.
	CountTestsNondeterministic CountKey = "tests_nondeterministic"
	// CountValuesNondeterministic: values (locals, return values, exceptions) of kept test traces
	// that differed between the two traced runs and read "<nondeterministic>" (a value that stays
	// over consecutive events of its frame counted once).
	CountValuesNondeterministic CountKey = "values_nondeterministic"
	// CountFunctionsNondeterministic and CountFunctionValuesNondeterministic are the same for
	// the function-level items found in a repository's tests, each traced twice likewise.
	CountFunctionsNondeterministic      CountKey = "functions_nondeterministic"
	CountFunctionValuesNondeterministic CountKey = "function_values_nondeterministic"
	// CountMissingModule: a repository some of whose test files could not import a module (the
	// module's name is the repository's to choose, so it is not in the key).
	CountMissingModule CountKey = "missing_module"
	// Tests run in the sandbox: it failed on them, they saw the checkout read-only, they ran under
	// neutralised runner options, or their outcome changed under the repository's own options.
	CountTestsSandboxError    CountKey = "tests:sandbox_error"
	CountTestsReadOnly        CountKey = "tests:checkout_read_only"
	CountTestsNeutralised     CountKey = "tests:runner_options_neutralised"
	CountTestsChangedByOption CountKey = "tests:changed_by_runner_options"
	// CountTestsTracedTimeout: tests whose untraced run finished and whose traced run timed out
	// within its budget (schemas.TracedTimeLimit): quarantined, no rows (also counted as
	// traced:timeout). CountTestsTracedPastLimit: tests whose traced run took longer than
	// limits.timeout and finished within the longer budget (kept, unless quarantined for another
	// reason).
	CountTestsTracedTimeout   CountKey = "tests:traced_timeout"
	CountTestsTracedPastLimit CountKey = "tests:traced_past_limit"
	// CountTestsTracedBudgetSpent: tests whose traced budget was cut short because the
	// repository's tests had spent what their traced runs may take past limits.timeout together
	// (one limits.timeout per test run).
	CountTestsTracedBudgetSpent CountKey = "tests:traced_budget_spent"
	// CountTestsSandboxRefused: tests whose untraced or traced run failed on something the sandbox
	// refuses (an exception whose message starts "ndtrace:": a .pyc opened outside the read-only
	// roots, a module the sandbox does not provide, an audit hook, a SQLite extension). The test
	// may pass natively: the count says how many failures are the sandbox's, not the code's.
	CountTestsSandboxRefused CountKey = "tests:sandbox_refused"
)

// CountTestOutcome counts the tests whose untraced run ended with outcome (passed, failed... or
// the run's status when it did not finish).
func CountTestOutcome(outcome string) CountKey { return CountKey("tests:" + outcome) }

// CountTracedOutcome counts the tests whose traced run ended with outcome.
func CountTracedOutcome(outcome string) CountKey { return CountKey("traced:" + outcome) }

// CountRejectClass counts the rejects of class.
func CountRejectClass(class RejectClass) CountKey { return CountKey("rejects:" + string(class)) }

// CountDecontaminated counts what was removed as holding a function of the evaluation set named
// set: function-level items (rejects) and repository rows whose CODE context held one.
func CountDecontaminated(set string) CountKey { return CountKey("decontaminated:" + set) }

// CountSkipped counts the trees (an item's, in direction dir) that could not be built, by reason.
func CountSkipped(dir, reason string) CountKey { return CountKey("skipped:" + dir + ":" + reason) }

// CountSkippedTest counts the repository tests that gave no trajectory, by their run's status.
func CountSkippedTest(status Status) CountKey { return CountKey("skipped:test_" + string(status)) }

// CountDropped counts the trajectories that were drawn and dropped, by reason.
func CountDropped(reason string) CountKey { return CountKey("dropped:" + reason) }

// CountFunctionSkipped counts the functions called by a repository's tests that gave no
// function-level item, by reason.
func CountFunctionSkipped(reason string) CountKey { return CountKey("functions_skipped:" + reason) }

// CountCollectionExcluded counts the files of repositories that their test collection left out,
// by reason: "tampered" for a file whose import (or what it ran) ended a collection as tampered
// (gc introspection at import time, say); the collection is then made again without it, and the
// rest of the repository is traced.
func CountCollectionExcluded(reason string) CountKey {
	return CountKey("collection_excluded:" + reason)
}

// CountNeutralised counts the repositories whose runner options of class were neutralised.
func CountNeutralised(class string) CountKey { return CountKey("neutralised:" + class) }

// CountRunnerFallback counts the repositories whose tests were collected by runner (pytest or
// unittest) after the other runner found none (sandbox.Collection.RunnerFallback).
func CountRunnerFallback(runner string) CountKey { return CountKey("runner_fallback:" + runner) }

// CountSelectionRefused counts the paths of a repository's own test selection that were not
// applied because they leave its checkout, by kind: args (test paths of addopts), testpaths,
// --ignore, --ignore-glob or --deselect (sandbox.Collection.Refused).
func CountSelectionRefused(kind string) CountKey { return CountKey("selection_refused:" + kind) }

// RejectClass returns the class k counts, for a key of CountRejectClass.
func (k CountKey) RejectClass() (RejectClass, bool) {
	c, ok := strings.CutPrefix(string(k), "rejects:")
	return RejectClass(c), ok && c != ""
}

// EvalSet returns the evaluation set k counts, for a key of CountDecontaminated.
func (k CountKey) EvalSet() (string, bool) {
	s, ok := strings.CutPrefix(string(k), "decontaminated:")
	return s, ok && s != ""
}
