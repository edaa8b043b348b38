package schemas

// RepoYield is what one repository gave, test by test: the yield report of a repository source.
// The pipeline writes one per repository it traced (and one per repository rejected before
// tracing), with the version's rejects; statistics sum them per source and for the dataset.
type RepoYield struct {
	// Source is the repository as rows (repo_url) and rejects (source) name it; Key the item's key.
	Source string `json:"source"`
	Key    string `json:"key"`
	// Runner is the test runner used ("" when the repository got no further than its checkout).
	Runner string `json:"runner,omitempty"`
	// Collected counts the tests collected; Run those run (at most the source's max_tests).
	Collected int64 `json:"collected"`
	Run       int64 `json:"run"`
	// PassedPlain counts the tests that passed untraced ("native": the run that only differs from
	// plain pytest by the sandbox), PassedTraced those that passed traced.
	PassedPlain  int64 `json:"passed_plain"`
	PassedTraced int64 `json:"passed_traced"`
	// Quarantined counts the tests whose outcome changed under tracing (no rows).
	Quarantined int64 `json:"quarantined"`
	// Neutralised counts the tests run with runner options the sandbox does not have neutralised
	// (addopts of missing plugins, coverage, xdist); ChangedByOptions those whose outcome that
	// changed (no rows).
	Neutralised      int64 `json:"runner_neutralised,omitempty"`
	ChangedByOptions int64 `json:"changed_by_runner_options,omitempty"`
	// ReadOnly counts the tests that saw the checkout read-only (no writable view could be made);
	// SandboxErrors the tests the sandbox failed on.
	ReadOnly      int64 `json:"checkout_read_only,omitempty"`
	SandboxErrors int64 `json:"sandbox_errors,omitempty"`
	// Nondeterministic counts the quarantined tests whose two traced runs differed in their
	// events (reexecute; also in Quarantined), NondeterministicValues the values of kept tests
	// that differed between the runs and read "<nondeterministic>".
	Nondeterministic       int64 `json:"nondeterministic,omitempty"`
	NondeterministicValues int64 `json:"nondeterministic_values,omitempty"`
	// TracedTimeout counts the tests quarantined because their traced run timed out within its
	// budget (schemas.TracedTimeLimit) while the untraced run finished (also in Quarantined);
	// TracedPastLimit the tests whose traced run finished past limits.timeout, within it.
	TracedTimeout   int64 `json:"traced_timeout,omitempty"`
	TracedPastLimit int64 `json:"traced_past_limit,omitempty"`
	// SandboxRefused counts the tests whose untraced or traced run failed on a refusal of the
	// sandbox (an exception "ndtrace: ...", such as a .pyc opened outside the read-only roots):
	// failures that are the sandbox's, not the code's.
	SandboxRefused int64 `json:"sandbox_refused,omitempty"`
	// ExcludedFiles counts the test files left out of collection because importing them ended it
	// tampered (collection_excluded:*): their tests are not traced, the rest are. RunnerFallbacks is
	// 1 when the tests were collected by the other runner after the first found none
	// (runner_fallback:*).
	ExcludedFiles   int64 `json:"excluded_files,omitempty"`
	RunnerFallbacks int64 `json:"runner_fallbacks,omitempty"`
	// Rows counts the repository-level rows the repository gave.
	Rows int64 `json:"rows"`
	// Generation is what generating inputs for its functions gave (functions: all, or a files
	// source's group of files); nil when none were generated.
	Generation *GenYield `json:"generation,omitempty"`
	// Rejected is why the repository gave no repository-level row, as the stage it stopped at, and
	// Reason says it for a person; both empty when it gave rows.
	Rejected YieldStage `json:"rejected,omitempty"`
	Reason   string     `json:"reason,omitempty"`
}

// YieldStage is the stage a repository that gave no repository-level row stopped at
// (RepoYield.Rejected): set where the repository is dropped, never read back from a reason.
type YieldStage string

// Yield stages.
const (
	YieldUnresolved   YieldStage = "unresolved"    // it did not resolve (planning)
	YieldCheckout     YieldStage = "checkout"      // its checkout was refused
	YieldLayout       YieldStage = "import_layout" // its package declarations could not be read
	YieldEnvironment  YieldStage = "environment"   // its environment could not be built
	YieldMounts       YieldStage = "mounts"        // a venv or python_path the source names is unusable
	YieldMissing      YieldStage = "missing_module"
	YieldCollection   YieldStage = "collection" // its tests did not collect
	YieldNoTests      YieldStage = "no_tests"
	YieldNoTrajectory YieldStage = "no_trajectory" // tests ran, none gave a trajectory
	YieldPoison       YieldStage = "poison"
	YieldBatchFailed  YieldStage = "batch_failed"
	YieldOther        YieldStage = "other"
)
