package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

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

// RunnerOptions says how a pytest run applies the repository's own command-line options (the
// addopts of its pytest.ini, tox.ini [pytest], setup.cfg [tool:pytest] or pyproject.toml
// [tool.pytest.ini_options]) and its required_plugins (docs/sandbox.md, "Runner options").
type RunnerOptions string

// Runner options of a CollectRequest or TestRequest.
const (
	// OptionsNeutralised (the default) drops from addopts what the sandbox cannot or must not
	// run: options of plugins that are not importable (unknown to pytest's parser once the
	// repository's plugins and conftest.py files are loaded), -p of a plugin that is not
	// importable, coverage and xdist options, options that write report files or change how the
	// run is made (-c, --rootdir, --basetemp, --collect-only ...), and required_plugins. The rest
	// (markers, -W, --strict-markers, -m, -k ...) applies.
	OptionsNeutralised RunnerOptions = ""
	// OptionsOriginal applies addopts as they are (but for test paths, in a test run, which
	// names its one test itself): to check that neutralising did not change a test's outcome.
	OptionsOriginal RunnerOptions = "original"
	// OptionsNone drops addopts entirely: the fallback when pytest still fails with a usage
	// error on what OptionsNeutralised kept.
	OptionsNone RunnerOptions = "none"
)

// Bounds of a run's list of neutralised options: more, or a longer entry, is tampering.
const (
	maxNeutralised     = 50
	maxNeutralisedName = 100
)

// CollectRequest asks for the tests of a repository checkout.
type CollectRequest struct {
	// Dir is the checkout: an absolute host path inside one of the sandbox's Config.ReadOnly
	// paths. Collection runs with Dir as the working directory and first on sys.path.
	Dir string
	// Runner is RunnerPytest, RunnerUnittest, or "" for pytest when it is importable and unittest
	// discovery otherwise. A runner that finds no test is followed by the other (NoFallback).
	Runner string
	// Paths are directories inside Dir put on sys.path right after Dir, as an editable install
	// would put a project's import roots (a src/ layout's src): unlike Config.PythonPath, their code
	// is the repository's own, traced like the rest of Dir, and never a source of bytecode.
	Paths []string
	// Limits overrides the sandbox's limits field by field.
	Limits Limits
	// Options is how pytest applies the repository's addopts. With OptionsNeutralised, a
	// collection that still ends in a pytest usage error while addopts were applied is made
	// again with OptionsNone (Collection.Options says which one was used).
	Options RunnerOptions
	// NoFallback keeps the collection to its runner: by default a runner that finds no test
	// (nothing collected, or only errors) is followed by the other one (Collection.RunnerFallback).
	NoFallback bool
	// Ignore are files or folders of Dir (relative, slash-separated) the collection leaves out:
	// pytest does not collect them (--ignore), unittest discovery does not import them. The
	// execution of a repository leaves out the files its collections ended tampered in
	// (Collection.TamperedFiles).
	Ignore []string
}

// Collection is the test suite of a checkout.
type Collection struct {
	// Runner is the runner that collected (the resolved one when the request left it empty, the
	// other one after a fallback: RunnerFallback).
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
	// Options is the RunnerOptions the collection was made with: run the tests with the same.
	Options RunnerOptions
	// Neutralised names what of the repository's pytest configuration was not applied: options
	// ("--cov", "-n"), plugins ("-p name"), "required_plugins", or "addopts" when they were
	// dropped entirely; at most 50 entries, the last one "..." when there were more.
	Neutralised []string
	// OriginalRunnable reports, when Neutralised is not empty, whether the original
	// configuration would run in the sandbox: only coverage, xdist and report-file options were
	// dropped, and the plugins they belong to (and the required plugins) are importable. The
	// tests can then be run once more with OptionsOriginal to see whether neutralising changed
	// their outcome.
	OriginalRunnable bool
	// RunnerFallback, when not "", is the runner that was tried first and found no test: Runner
	// is the other one, whose collection found some (runnerFallback). Run the tests with Runner.
	RunnerFallback string
	// Refused lists the repository's test selections that were not applied because they name a
	// path outside the checkout (absolute, "..", a link out), one entry per path refused, by kind:
	// RefusedArgs, RefusedTestpaths, or the option (--ignore, --ignore-glob, --deselect).
	Refused []string
	// TamperedFiles are, when Status is tampered, the checkout's files (relative to Dir,
	// slash-separated) that were running when the tampering was seen, outermost first: the test
	// module whose import led to it, then what that module was importing or calling. At most
	// maxTamperedFiles.
	TamperedFiles []string
	// Result is the raw run (output, resources).
	Result *Result
}

// maxTamperedFiles bounds Collection.TamperedFiles (the tracer reports at most 16).
const maxTamperedFiles = 16

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
	// Clock, when not 0, freezes the test's clock: time.time and time.time_ns return this
	// instant (seconds since the epoch) throughout the run. Clocks of durations (time.monotonic,
	// time.perf_counter) are left running: code that waits on them would never end.
	Clock int64
	// Paths are as in CollectRequest.
	Paths []string
	// Limits overrides the sandbox's limits field by field: WallTime bounds the whole test,
	// TraceEvents and TraceBytes its trace.
	Limits Limits
	// Options is how pytest applies the repository's addopts: Collection.Options, or
	// OptionsOriginal for an untraced run with the configuration as it is.
	Options RunnerOptions
	// Events, when set, gets the trace's events one at a time as they are decoded, as in Request,
	// and Result.Events stays empty: a test's whole decoded trace never exists at once.
	Events func(ev *schemas.Event)
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
	// Neutralised names what of the repository's pytest configuration this run did not apply
	// (as in Collection).
	Neutralised []string
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
	if err := checkOptions(req.Options); err != nil {
		return nil, err
	}
	c, err := s.collectOptions(ctx, req, dir)
	if err != nil || req.NoFallback || !findsNothing(c) {
		return c, err
	}
	return s.runnerFallback(ctx, req, dir, c)
}

// collectOptions makes one collection with req.Runner, again without the repository's addopts
// when pytest refused what was kept of them.
func (s *Sandbox) collectOptions(ctx context.Context, req CollectRequest, dir string) (*Collection, error) {
	c, fallback, err := s.collect(ctx, req, dir)
	if fallback && req.Options == OptionsNeutralised && err == nil {
		// pytest refused what was kept of the repository's addopts: do without them.
		req.Options = OptionsNone
		c, _, err = s.collect(ctx, req, dir)
	}
	return c, err
}

// collect makes one collection; fallback reports a pytest usage error while addopts applied.
func (s *Sandbox) collect(ctx context.Context, req CollectRequest, dir string) (*Collection, bool, error) {
	paths, err := checkPaths(dir, s.cfg.insideAll(req.Paths))
	if err != nil {
		return nil, false, err
	}
	ignore, err := checkIgnore(dir, req.Ignore)
	if err != nil {
		return nil, false, err
	}
	msg := runMsg{Kind: "collect", Runner: req.Runner, runBody: runBody{Dir: dir, Targets: []string{dir + "/"},
		Exclude: s.excluded(), PythonPath: s.in.PythonPath, Options: string(req.Options), Paths: paths, Ignore: ignore}}
	msg.Writable, msg.WritableBytes = s.writable(dir)
	res, dec, err := s.exec(ctx, msg, mergeLimits(s.cfg.Limits, req.Limits))
	if res == nil {
		return nil, false, err
	}
	c := &Collection{Runner: req.Runner, Status: res.Status, Detail: res.Detail, Result: res, Options: req.Options,
		Neutralised: []string{}}
	fallback := false
	if w := dec.collect; w != nil {
		c.Runner, c.Tests, c.Errors, c.MissingModule, c.Writable = w.Runner, w.Tests, w.Errors, w.MissingModule, w.Writable
		if w.Neutralised != nil {
			c.Neutralised = w.Neutralised
		}
		c.OriginalRunnable, fallback = w.OriginalRunnable, w.Fallback && res.Status == schemas.StatusException
		if why := checkNeutralised(w.Neutralised); why != "" && c.Status == schemas.StatusOK {
			c.Status, c.Detail = schemas.StatusTampered, "tampering: "+why
		}
		c.Refused = w.Refused
		if why := checkRefused(w.Refused); why != "" && c.Status == schemas.StatusOK {
			c.Status, c.Detail, c.Refused = schemas.StatusTampered, "tampering: "+why, nil
		}
	}
	if c.Tests == nil {
		c.Tests = []string{}
	}
	if c.Status == schemas.StatusOK && dec.collect == nil {
		// The tracer writes the record with its end record; only the run's own code (rebinding
		// what the tracer module computes it from) can leave it out: that is the item's doing, not a
		// failure of the sandbox to retry.
		c.Status, c.Detail = schemas.StatusTampered, "tampering: the collection record is missing"
	}
	if c.Status == schemas.StatusException && len(res.Stderr) > 0 {
		c.Detail += " (stderr: " + lastLine(res.Stderr) + ")"
	}
	if c.Status == schemas.StatusTampered && dec.end != nil {
		c.TamperedFiles = relativeFiles(dir, dec.end.files, maxTamperedFiles)
	}
	boundCollection(c)
	return c, fallback, err
}

// checkIgnore checks a collection's Ignore (relative paths inside dir, without . or ..) and returns
// them as absolute paths.
func checkIgnore(dir string, ignore []string) ([]string, error) {
	out := make([]string, 0, len(ignore))
	for _, p := range ignore {
		if p == "" || strings.ContainsRune(p, 0) || path.IsAbs(p) || path.Clean(p) != p || p == "." || p == ".." ||
			strings.HasPrefix(p, "../") {
			return nil, fmt.Errorf("sandbox: ignored path %q is not a clean relative path inside %s", p, dir)
		}
		out = append(out, filepath.Join(dir, filepath.FromSlash(p)))
	}
	return out, nil
}

// relativeFiles is files (absolute) that lie inside dir, relative to it and slash-separated, in
// their order, at most max of them.
func relativeFiles(dir string, files []string, max int) []string {
	var out []string
	for _, f := range files {
		if len(out) == max {
			break
		}
		r, ok := strings.CutPrefix(f, dir+"/")
		if !ok || r == "" || len(r) > 4096 || strings.ContainsRune(r, 0) || path.Clean(filepath.ToSlash(r)) != filepath.ToSlash(r) ||
			strings.HasPrefix(r, "../") {
			continue
		}
		out = append(out, filepath.ToSlash(r))
	}
	return out
}

// checkOptions checks a request's RunnerOptions.
func checkOptions(o RunnerOptions) error {
	switch o {
	case OptionsNeutralised, OptionsOriginal, OptionsNone:
		return nil
	}
	return fmt.Errorf("sandbox: unknown runner options %q", o)
}

// checkNeutralised says what is wrong with a run's list of neutralised options ("" if nothing):
// the tracer lists at most maxNeutralised non-empty entries of at most maxNeutralisedName
// characters, without repeats.
func checkNeutralised(names []string) string {
	if len(names) > maxNeutralised {
		return fmt.Sprintf("%d neutralised options listed, more than %d", len(names), maxNeutralised)
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if n == "" || utf8.RuneCountInString(n) > maxNeutralisedName || seen[n] {
			return fmt.Sprintf("bad neutralised option %q", n)
		}
		seen[n] = true
	}
	return ""
}

// RunTest runs one test of the checkout req.Dir in a fresh item child, traced or not. Whatever the
// test does, the result says how it ended (a hanging test ends with status timeout at
// Limits.WallTime); the error is non-nil only when the sandbox failed or the request is unusable.
func (s *Sandbox) RunTest(ctx context.Context, req TestRequest) (*TestResult, error) {
	dir, paths, err := s.checkTest("sandbox", req.Dir, req.Runner, req.Test, req.Options, req.Paths)
	if err != nil {
		return nil, err
	}
	targets := s.cfg.insideTargets(req.Targets)
	if len(targets) == 0 {
		targets = []string{dir + "/"}
	}
	for _, t := range targets {
		if t == "" {
			return nil, errors.New("sandbox: empty target")
		}
	}
	msg := runMsg{Kind: "test", Runner: req.Runner, runBody: runBody{Dir: dir, Test: req.Test, Traced: req.Traced,
		Targets: targets, Exclude: s.excluded(), Seed: req.Seed, Clock: req.Clock, PythonPath: s.in.PythonPath, Options: string(req.Options), Paths: paths}}
	msg.Writable, msg.WritableBytes = s.writable(dir)
	msg.sink = req.Events
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
	case checkNeutralised(w.Neutralised) != "":
		res.Status, res.Detail = schemas.StatusTampered, "tampering: "+checkNeutralised(w.Neutralised)
	default:
		tr.Outcome, tr.MissingModule, tr.Neutralised = w.Outcome, w.MissingModule, w.Neutralised
		if tr.Neutralised == nil {
			tr.Neutralised = []string{}
		}
		if w.Outcome == OutcomeFailed || w.Outcome == OutcomeError {
			res.ExcType, res.ExcMessage = w.ExcType, w.ExcMessage
			res.Detail = strings.TrimSpace(fmt.Sprintf("%s in %s: %s: %s", cut(w.Outcome, MaxDetail), cut(w.When, MaxDetail),
				cut(w.ExcType, MaxDetail), cut(w.ExcMessage, MaxDetail)))
		}
	}
	tr.MissingModule = cut(tr.MissingModule, MaxModuleName)
	res.Detail = cut(res.Detail, MaxDetail)
	return tr, err
}

func validOutcome(o string) bool {
	switch o {
	case OutcomePassed, OutcomeFailed, OutcomeError, OutcomeSkipped:
		return true
	}
	return false
}

// checkTest checks what names one test of a checkout (RunTest's and ReplayTest's requests): the
// checkout and its runner, the test id, the runner options and the import roots. It returns the
// checkout's directory and the import roots as checkPaths gives them; what names the caller in a
// bad test id's error.
func (s *Sandbox) checkTest(what, dir, runner, test string, opts RunnerOptions, paths []string) (string, []string, error) {
	dir, err := s.checkTestDir(dir, runner)
	if err != nil {
		return "", nil, err
	}
	if test == "" || strings.HasPrefix(test, "-") || strings.ContainsRune(test, 0) {
		return "", nil, fmt.Errorf("%s: bad test id %q", what, test)
	}
	if err := checkOptions(opts); err != nil {
		return "", nil, err
	}
	if paths, err = checkPaths(dir, s.cfg.insideAll(paths)); err != nil {
		return "", nil, err
	}
	return dir, paths, nil
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
	dir = s.cfg.inside(dir)
	for _, p := range s.in.ReadOnly {
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

// checkPaths checks the import roots of a test request: absolute directories inside dir.
func checkPaths(dir string, paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		c := filepath.Clean(p)
		if !filepath.IsAbs(p) || !within(c, dir) {
			return nil, fmt.Errorf("sandbox: import path %q is not a directory inside %s", p, dir)
		}
		out = append(out, c)
	}
	return out, nil
}

// excluded is what test runs never trace: the PythonPath directories.
func (s *Sandbox) excluded() []string {
	var out []string
	for _, p := range s.in.PythonPath {
		out = append(out, strings.TrimSuffix(filepath.Clean(p), "/")+"/")
	}
	return out
}
