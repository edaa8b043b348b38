package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ndtrace/ndtrace/schemas"
)

// Test runners a CollectRequest or TestRequest may name.
const (
	// RunnerPytest runs tests with pytest, in process (pytest.main).
	RunnerPytest = "pytest"
	// RunnerUnittest runs tests with the standard library's unittest.
	RunnerUnittest = "unittest"
)

// Outcomes of one test (TestResult.Outcome).
const (
	// OutcomePassed: the test ran and passed.
	OutcomePassed = "passed"
	// OutcomeFailed: the test itself failed (an assertion or any exception in its body; for
	// unittest also in setUp/tearDown; an unexpected success).
	OutcomeFailed = "failed"
	// OutcomeError: the test could not run properly: a fixture (pytest setup/teardown, unittest
	// setUpClass/setUpModule) failed, its file did not import, or no test matched the id.
	OutcomeError = "error"
	// OutcomeSkipped: the test was skipped, or failed as expected (xfail, expectedFailure).
	OutcomeSkipped = "skipped"
)

// CollectRequest asks for the tests of a repository checkout.
type CollectRequest struct {
	// Dir is the checkout: an absolute host path inside one of the sandbox's Config.ReadOnly
	// paths. Collection runs with Dir as the working directory and first on sys.path.
	Dir string
	// Runner is RunnerPytest, RunnerUnittest, or "" for pytest when it is importable and unittest
	// discovery otherwise.
	Runner string
	// Limits overrides the sandbox's limits field by field.
	Limits Limits
}

// Collection is the test suite of a checkout.
type Collection struct {
	// Runner is the runner that collected (the resolved one when the request left it empty).
	Runner string
	// Tests are the test ids in the runner's (deterministic) order: pytest node ids relative to
	// Dir (tests/test_a.py::TestX::test_y[1]) or unittest ids (tests.test_a.TestX.test_y).
	Tests []string
	// Status is ok when collection finished, even if some files had errors (see Errors);
	// exception when the runner failed as a whole (a conftest.py that does not import, a usage
	// error); any other status when the run itself ended early (timeout, memory ...).
	Status schemas.Status
	// Detail explains a status other than ok in one line.
	Detail string
	// MissingModule is the top-level name of a module that collection needed and could not import
	// (ModuleNotFoundError) and that the repository does not contain: a missing dependency, such
	// as "hypothesis". The first one met, if any.
	MissingModule string
	// Errors has one line per file that failed to collect: "path: last line of the error".
	Errors []string
	// Writable says how the checkout was writable during the run: WritableOverlay, WritableCopy,
	// WritableReadOnly (the view could not be made: the item's stderr says why), or "" when
	// Config.ReadOnlyCheckouts turned views off.
	Writable string
	// Result is the raw run (output, resources).
	Result *Result
}

// How a test run saw its checkout (Collection.Writable, TestResult.Writable).
const (
	WritableOverlay  = "overlay"
	WritableCopy     = "copy"
	WritableReadOnly = "read-only"
)

// TestRequest asks for one test to be run, traced or not.
type TestRequest struct {
	// Dir is the checkout, as in CollectRequest.
	Dir string
	// Runner is as in CollectRequest; use the Collection's Runner.
	Runner string
	// Test is one id from Collection.Tests.
	Test string
	// Traced records the test's execution. An untraced run never calls sys.settrace.
	Traced bool
	// Targets selects the traced code, as in Request: an entry ending in "/" is a path prefix.
	// Default: Dir + "/" (the repository's own files, never the standard library or
	// site-packages). Code under Config.PythonPath is never traced, even inside Dir.
	Targets []string
	// Seed seeds Python's random module.
	Seed int64
	// Limits overrides the sandbox's limits field by field: WallTime bounds the whole test,
	// TraceEvents and TraceBytes its trace.
	Limits Limits
}

// TestResult is the outcome of one test run.
type TestResult struct {
	// Runner is the runner that ran the test.
	Runner string
	// Outcome is OutcomePassed, OutcomeFailed, OutcomeError or OutcomeSkipped when the runner
	// finished (Result.Status ok), and "" when the run did not (timeout, event_limit, memory,
	// killed, a runner crash).
	Outcome string
	// MissingModule names a dependency the test could not import (see Collection), when the
	// outcome is failed or error because of it.
	MissingModule string
	// Writable is as in Collection.
	Writable string
	// Result is the run: Status ok whenever Outcome is set, whatever the verdict; ExcType and
	// ExcMessage describe the first exception of a failed or error outcome and Detail says where;
	// Events is the trace (traced runs: only frames of Targets, File the absolute file name, Depth
	// counting traced frames, so the test function and each fixture are at depth 0); Functions the
	// source of every function with a traced call.
	Result *Result
}

// CollectTests lists the tests of the checkout req.Dir, in a fresh item child like any run.
// The error is non-nil only when the sandbox failed or the request is unusable (Dir not mounted).
func (s *Sandbox) CollectTests(ctx context.Context, req CollectRequest) (*Collection, error) {
	dir, err := s.checkTestDir(req.Dir, req.Runner)
	if err != nil {
		return nil, err
	}
	msg := runMsg{Kind: "collect", Runner: req.Runner, runBody: runBody{Dir: dir, Targets: []string{dir + "/"},
		Exclude: s.excluded(), PythonPath: s.cfg.PythonPath}}
	msg.Writable, msg.WritableBytes = s.writable(dir)
	res, dec, err := s.exec(ctx, msg, mergeLimits(s.cfg.Limits, req.Limits))
	if res == nil {
		return nil, err
	}
	c := &Collection{Runner: req.Runner, Status: res.Status, Detail: res.Detail, Result: res}
	if w := dec.collect; w != nil {
		c.Runner, c.Tests, c.Errors, c.MissingModule, c.Writable = w.Runner, w.Tests, w.Errors, w.MissingModule, w.Writable
	}
	if c.Tests == nil {
		c.Tests = []string{}
	}
	if c.Status == schemas.StatusOK && dec.collect == nil {
		// The tracer writes the record with its end record; only the run's own code (rebinding
		// what tracer.py computes it from) can leave it out: that is the item's doing, not a
		// failure of the sandbox to retry.
		c.Status, c.Detail = schemas.StatusTampered, "tampering: the collection record is missing"
	}
	if c.Status == schemas.StatusException && len(res.Stderr) > 0 {
		c.Detail += " (stderr: " + lastLine(res.Stderr) + ")"
	}
	return c, err
}

// RunTest runs one test of the checkout req.Dir in a fresh item child, traced or not. Whatever the
// test does, the result says how it ended (a hanging test ends with status timeout at
// Limits.WallTime); the error is non-nil only when the sandbox failed or the request is unusable.
func (s *Sandbox) RunTest(ctx context.Context, req TestRequest) (*TestResult, error) {
	dir, err := s.checkTestDir(req.Dir, req.Runner)
	if err != nil {
		return nil, err
	}
	if req.Test == "" || strings.HasPrefix(req.Test, "-") || strings.ContainsRune(req.Test, 0) {
		return nil, fmt.Errorf("sandbox: bad test id %q", req.Test)
	}
	targets := req.Targets
	if len(targets) == 0 {
		targets = []string{dir + "/"}
	}
	for _, t := range targets {
		if t == "" {
			return nil, errors.New("sandbox: empty target")
		}
	}
	msg := runMsg{Kind: "test", Runner: req.Runner, runBody: runBody{Dir: dir, Test: req.Test, Traced: req.Traced,
		Targets: targets, Exclude: s.excluded(), Seed: req.Seed, PythonPath: s.cfg.PythonPath}}
	msg.Writable, msg.WritableBytes = s.writable(dir)
	res, dec, err := s.exec(ctx, msg, mergeLimits(s.cfg.Limits, req.Limits))
	if res == nil {
		return nil, err
	}
	tr := &TestResult{Runner: req.Runner, Result: res}
	w := dec.test
	if w != nil {
		tr.Runner, tr.Writable = w.Runner, w.Writable
	}
	switch {
	case res.Status != schemas.StatusOK:
	case w == nil:
		// (as for a collection: only the run's own code can leave the record out)
		res.Status, res.Detail = schemas.StatusTampered, "tampering: the test record is missing"
	case !validOutcome(w.Outcome):
		res.Status, res.Detail = schemas.StatusTampered, fmt.Sprintf("tampering: unknown test outcome %q", w.Outcome)
	default:
		tr.Outcome, tr.MissingModule = w.Outcome, w.MissingModule
		if w.Outcome == OutcomeFailed || w.Outcome == OutcomeError {
			res.ExcType, res.ExcMessage = w.ExcType, w.ExcMessage
			res.Detail = strings.TrimSpace(fmt.Sprintf("%s in %s: %s: %s", w.Outcome, w.When, w.ExcType, w.ExcMessage))
		}
	}
	return tr, err
}

func validOutcome(o string) bool {
	switch o {
	case OutcomePassed, OutcomeFailed, OutcomeError, OutcomeSkipped:
		return true
	}
	return false
}

// checkTestDir checks a test request's Dir and Runner and returns Dir cleaned.
func (s *Sandbox) checkTestDir(dir, runner string) (string, error) {
	switch runner {
	case "", RunnerPytest, RunnerUnittest:
	default:
		return "", fmt.Errorf("sandbox: unknown test runner %q", runner)
	}
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("sandbox: test directory %q is not absolute", dir)
	}
	dir = filepath.Clean(dir)
	for _, p := range s.cfg.ReadOnly {
		if within(dir, filepath.Clean(p)) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("sandbox: test directory %s is not mounted in the sandbox: add it (or a parent) to Config.ReadOnly", dir)
}

// writable is the folder a test run of dir sees writable, and how much it may write: dir itself,
// unless Config.ReadOnlyCheckouts.
func (s *Sandbox) writable(dir string) (string, int64) {
	if s.cfg.ReadOnlyCheckouts {
		return "", 0
	}
	return dir, s.cfg.WritableBytes
}

// excluded is what test runs never trace: the PythonPath directories.
func (s *Sandbox) excluded() []string {
	var out []string
	for _, p := range s.cfg.PythonPath {
		out = append(out, strings.TrimSuffix(filepath.Clean(p), "/")+"/")
	}
	return out
}
