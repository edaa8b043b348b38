package execute

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/crawl/testcalls"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/internal/userdirs"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// Limits of tracing a repository that are not in the spec.
const (
	// collectTimeout bounds the collection of a repository's tests.
	collectTimeout = 2 * time.Minute
	// layoutTimeout bounds reading a repository's package declarations (its import roots).
	layoutTimeout = time.Minute
	// beatEvery is how often a repository's tracing heartbeats while its step is on time.
	beatEvery = 10 * time.Second
	// maxFunctionBreaks is how many of a repository's functions in a row may break their sandbox
	// before the rest of its functions are given up (counted as functions_skipped:sandbox_error).
	maxFunctionBreaks = 3
)

// RepoTrace is what tracing one repository gives: its tests' traces and the function-level items
// found in them, already TracedItem.
type RepoTrace struct {
	// Runner is the test runner used; Tests the number collected, Run the number run (MaxTests).
	Runner string `json:"runner"`
	Tests  int    `json:"tests"`
	Run    int    `json:"run"`
	// Quarantined lists the tests whose outcome changed under tracing, or under the runner
	// options the sandbox neutralised (counted as tests:changed_by_runner_options): they give no
	// rows.
	Quarantined []string `json:"quarantined,omitempty"`
	// Neutralised names what of the repository's pytest configuration the sandbox did not apply
	// (sandbox.Collection.Neutralised): each is also counted once by class, as
	// "neutralised:CLASS" (neutralisedClass).
	Neutralised []string `json:"neutralised,omitempty"`
	// Excluded lists the files the test collection left out, each with the reason ("path:
	// tampering: why"): a file whose import ended a collection tampered is left out and the rest
	// collected (collectExcluding); each is counted as "collection_excluded:tampered".
	Excluded []string `json:"excluded,omitempty"`
	// MissingModule names the module some of the repository's test files could not import (the
	// others ran); it is counted as "missing_module", without its name, which the repository
	// writes: counters keyed by it would grow with every name repositories invent.
	MissingModule string `json:"missing_module,omitempty"`
	// Traces are the TracedItem tests that kept their outcome.
	Traces []schemas.TestTrace `json:"traces,omitempty"`
	// Functions are function-level items found in the traces, TracedItem on their own.
	Functions []TracedItem `json:"functions,omitempty"`
	// Gen is what generating inputs gave (RepoTarget.FunctionsAll); its items are in Functions.
	Gen *schemas.GenYield `json:"gen,omitempty"`
	// GenWall is the wall time generating inputs took (the finds and the units' runs; not the
	// items' traced runs): the progress display's cost per function, never part of a row.
	GenWall time.Duration `json:"gen_wall,omitempty"`
	// NoTests is why a repository with FunctionsAll (or a group of files: RepoTarget.NoTests)
	// ran no test, as "STAGE: reason" (the stage it would have been rejected at, as a
	// TracedItem's Stage and Detail): it gives the items of its functions' generated inputs only.
	// Empty when its tests were run.
	NoTests string `json:"no_tests,omitempty"`
	// Counts are per-repository counters (tests by outcome and status).
	Counts schemas.Counts `json:"counts,omitempty"`
}

// traceRepo checks out the repository of a repository-level item and runs each of its tests
// (up to MaxTests) untraced and traced in a sandbox where each test sees a private writable view
// of the checkout; alive is called after every test, and every 10 s while the current step keeps
// within its deadline (watchdog). A repository that cannot be used (checkout refused, missing
// dependency, no tests) gives a TracedItem with status invalid, the stage it stopped at and the
// reason as its detail. An error is ErrInfra for the worker's own failures; any other (a stalled
// step, a collection that broke its sandbox, a checkout that failed) counts against the item.
//
// within, when not nil, is called once the repository is traced, with its trace and a
// RepoSession that replays its rows on bdb while the checkout, its environment and the tests'
// sandbox are still in place (verify); its error is returned as is.
func (trc *Tracer) traceRepo(parent context.Context, it crawl.Item, lim sandbox.Limits, co crawl.CheckoutLimits, alive func(),
	within func(TracedItem, *RepoSession) error) (_ TracedItem, err error) {
	t := TracedItem{Item: it}
	// Checkout and collection can take minutes: the activity's heartbeat goes on meanwhile while
	// each step keeps within its own deadline, and a step that outlives it ends the repository.
	ctx, wd := newWatchdog(parent, alive, beatEvery)
	defer wd.release()
	defer func() { err = stalled(parent, ctx, err) }()
	wd.begin("checkout", co.Timeout)
	checkout := ""         // the checkout's folder, once made: reasons name files relative to it
	var hidden workerPaths // the worker's folders, once known: reasons name them as traces do
	bad := func(stage schemas.YieldStage, format string, args ...any) (TracedItem, error) {
		t.Status, t.Stage, t.Detail = schemas.StatusInvalid, stage, fmt.Sprintf(format, args...)
		if checkout != "" {
			t.Detail = hidden.hide(strings.ReplaceAll(strings.ReplaceAll(t.Detail, checkout+"/", ""), CheckoutPath+"/", ""))
		}
		return t, nil
	}
	fetcher := trc.Fetcher
	if fetcher == nil {
		fetcher = &crawl.Fetcher{}
	}
	scratch := trc.Scratch
	if scratch == "" {
		var err error
		if scratch, err = userdirs.ScratchDir(); err != nil {
			return t, InfraError(err)
		}
	}
	w, err := fetcher.Checkout(ctx, it.Repo.Resolved, scratch, co)
	var re *crawl.RepoError
	switch {
	case errors.As(err, &re) && !re.Transient:
		return bad(schemas.YieldCheckout, "checkout: %s", re.Reason)
	case err != nil:
		return t, fmt.Errorf("check out %s: %w", it.Key, err)
	}
	defer w.Remove()
	checkout = w.Dir
	hidden = pathsOf(w.Dir, "")
	wd.begin("reading the import layout", layoutTimeout)
	paths := append([]string(nil), it.Repo.PythonPath...)
	// Where the project's packages are when not at the top (src/ layout, package-dir...), as an
	// editable install would put them on sys.path: read from its declarations, never by running
	// its setup code.
	roots, err := crawl.ImportRoots(ctx, w.Dir)
	if err != nil {
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
		return bad(schemas.YieldLayout, "import layout: %v", err)
	}
	// They are the repository's own code: on sys.path after the checkout, traced like it (never
	// PythonPath, which is never traced).
	var imports []string
	for _, r := range roots {
		imports = append(imports, filepath.Join(w.Dir, filepath.FromSlash(r)))
	}
	if it.Repo.Venv != "" {
		sp, err := sandbox.VenvSitePackages(it.Repo.Venv)
		if err != nil {
			return bad(schemas.YieldMounts, "venv: %v", err)
		}
		paths = append(paths, sp)
	}
	// The dependencies the source declares (env:), installed into an environment of their own.
	wd.begin("the environment", trc.envTimeout())
	envSitePackages := ""
	if sp, reason, err := trc.environment(ctx, it, w.Dir); err != nil || reason != "" {
		if err != nil {
			return t, InfraError(err)
		}
		return bad(schemas.YieldEnvironment, "%s", reason)
	} else if sp != "" {
		paths = append(paths, sp)
		envSitePackages = sp
	}
	// The worker's folders the traces' values may show, and what they read as (relativize).
	hidden = pathsOf(w.Dir, envSitePackages)
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return bad(schemas.YieldMounts, "python_path: %v", err)
		}
	}
	// A slot of the pool bounds this worker's sandboxes; the repository gets sandboxes of its own.
	_, release, err := trc.Sandboxes.Get(ctx)
	if err != nil {
		return t, InfraError(err)
	}
	defer release()
	cfg := trc.Sandboxes.Config()
	cfg.ReadOnly = append(append([]string(nil), cfg.ReadOnly...), w.Dir)
	// The sandbox shows the checkout at CheckoutPath, the same on every worker: what the tests
	// compute from their own location (__file__, os.getcwd(), the folders above, a hash of a
	// path, the addresses a longer path shifts) never depends on where the worker keeps it.
	cfg.Binds = append(append([]sandbox.Bind(nil), cfg.Binds...), sandbox.Bind{Host: w.Dir, At: CheckoutPath})
	if envSitePackages != "" {
		// Its environment (ENVS/HASH/lib/pythonX.Y/site-packages) at /envs/HASH likewise: a
		// dependency's __file__ and the folders above it.
		env := filepath.Dir(filepath.Dir(filepath.Dir(envSitePackages)))
		cfg.Binds = append(cfg.Binds, sandbox.Bind{Host: env, At: EnvsPath + "/" + filepath.Base(env)})
	}
	// Reexecution compares two runs made in two sandboxes; with fixed addresses, what an
	// interpreter allocates where depends only on what it ran, the same in every run of the spec
	// (docs/spec.md, "Reproducible repository data").
	cfg.FixedAddresses = it.Repo.Reexecutes()
	cfg.PythonPath = append(append([]string(nil), cfg.PythonPath...), paths...)
	sb, err := sandbox.New(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
		// This repository's mounts (python_path, venv, the checkout) are at fault only if a
		// sandbox without them starts here now: else the worker is (out of processes or memory,
		// its own folders gone), and dropping the repository for good would lose it.
		plain, perr := sandbox.New(ctx, trc.Sandboxes.Config())
		if perr != nil {
			if ctx.Err() != nil {
				return t, ctx.Err()
			}
			return t, InfraError(fmt.Errorf("sandbox for %s: %w (and without its mounts: %v)", it.Key, err, perr))
		}
		plain.Close()
		// Once more with them, as what failed may have passed (the first start's trouble).
		if sb, err = sandbox.New(ctx, cfg); err != nil {
			if ctx.Err() != nil {
				return t, ctx.Err()
			}
			return bad(schemas.YieldMounts, "sandbox with this repository's mounts: %v", err)
		}
	}
	defer sb.Close()
	// The second traced run of each test (reexecute) is another interpreter's, as another run of
	// the spec would be: items of one sandbox are forks of one interpreter and share its address
	// layout, so object ids (id(), hex(id(x)), default hashes) would repeat there and go unseen.
	var second *sandbox.Sandbox
	if it.Repo.Reexecutes() && !it.Repo.NoTests {
		if second, err = sandbox.New(ctx, cfg); err != nil {
			if ctx.Err() != nil {
				return t, ctx.Err()
			}
			return t, InfraError(fmt.Errorf("second sandbox for %s: %w", it.Key, err))
		}
		defer second.Close()
	}

	// A group of files (NoTests) has no tests to collect: its functions' generated inputs are all
	// it gives (generateInputs).
	col, excluded, noTests := &sandbox.Collection{Status: schemas.StatusOK}, []string(nil), ""
	if it.Repo.NoTests {
		noTests = string(schemas.YieldNoTests) + ": a group of files, which has no tests"
	} else {
		col, excluded, err = collectExcluding(ctx, sb, wd, sandbox.CollectRequest{Dir: w.Dir, Runner: it.Repo.Runner, Paths: imports,
			Limits: sandbox.Limits{WallTime: collectTimeout, CPUTime: collectTimeout}})
		if err != nil {
			return t, fmt.Errorf("collect tests of %s: %w", it.Key, err)
		}
		if len(excluded) > 0 {
			slog.Info("files left out of a repository's collection: they ended it tampered", "repo", it.Key,
				"excluded", excluded)
		}
		var stage schemas.YieldStage
		var reason string
		switch {
		case col.MissingModule != "" && len(col.Tests) == 0:
			stage, reason = schemas.YieldMissing, fmt.Sprintf("missing module %s", col.MissingModule)
		case col.Status != schemas.StatusOK:
			stage, reason = schemas.YieldCollection, fmt.Sprintf("test collection failed: %s: %s", col.Status, col.Detail)
		case len(col.Tests) == 0 && len(col.Errors) > 0:
			stage, reason = schemas.YieldCollection, fmt.Sprintf("no tests collected: %s", col.Errors[0])
		case len(col.Tests) == 0:
			stage, reason = schemas.YieldNoTests, "no tests found"
		}
		if stage != "" {
			if !it.Repo.FunctionsAll {
				return bad(stage, "%s", reason)
			}
			// functions: all: the repository gives the items of its functions' generated
			// inputs, and no test.
			noTests = string(stage) + ": " + hidden.hide(strings.ReplaceAll(strings.ReplaceAll(reason, w.Dir+"/", ""), CheckoutPath+"/", ""))
			col = &sandbox.Collection{Status: schemas.StatusOK, Runner: col.Runner, Neutralised: col.Neutralised}
		}
	}
	rt := &RepoTrace{Runner: col.Runner, Tests: len(col.Tests), Counts: schemas.Counts{}, Neutralised: col.Neutralised,
		Excluded: excluded, NoTests: noTests}
	if len(excluded) > 0 {
		rt.Counts[schemas.CountCollectionExcluded("tampered")] = int64(len(excluded))
	}
	for _, n := range col.Neutralised {
		rt.Counts[schemas.CountNeutralised(neutralisedClass(n))] = 1
	}
	if col.RunnerFallback != "" {
		rt.Counts[schemas.CountRunnerFallback(col.Runner)] = 1
	}
	for _, k := range col.Refused {
		rt.Counts[schemas.CountSelectionRefused(k)]++
	}
	// With options neutralised, each test is run once more untraced with the original ones when
	// they can run here, else counted as run under neutralised options.
	compare := len(col.Neutralised) > 0 && col.OriginalRunnable
	if col.MissingModule != "" {
		// Some test files need a dependency that is not provided; the others still run.
		rt.MissingModule = col.MissingModule
		rt.Counts[schemas.CountMissingModule]++
	}
	tests := col.Tests
	if n := it.Repo.MaxTests; n > 0 && len(tests) > n {
		tests = tests[:n]
	}
	rt.Run = len(tests)
	var found *testcalls.Finder  // the functions the tests call, found one test's trace at a time
	mods := newModuleDefs(w.Dir) // the module-level definitions of the visited files, read once a file
	if it.Repo.Functions {
		found = testcalls.NewFinder(ctx, w.Dir, roots, it, rt.Counts)
	}
	allowance := newTracedTime(lim, len(tests)) // the time traced runs may take past lim, all together
	for _, test := range tests {
		req := sandbox.TestRequest{Dir: w.Dir, Runner: col.Runner, Test: test, Limits: lim, Options: col.Options, Paths: imports}
		if it.Repo.FrozenClock {
			req.Clock = FrozenInstant
		}
		wd.begin("test "+test, 2*lim.WallTime) // untraced, with the original options
		plain, err := sb.RunTest(ctx, req)
		var tr, orig *sandbox.TestResult
		if err == nil && compare {
			oreq := req
			oreq.Options = sandbox.OptionsOriginal
			orig, err = sb.RunTest(ctx, oreq)
		}
		alive()
		if err == nil {
			// Traced (and traced again), the test gets a budget scaled from its untraced time.
			var cut bool
			if req.Limits, cut = allowance.limits(plain); cut {
				rt.Counts[schemas.CountTestsTracedBudgetSpent]++
			}
		}
		wd.begin("test "+test+" (traced)", req.Limits.WallTime)
		// The traced run's events go into their compact form as they are decoded, their file
		// names and values made the checkout's (relative): one test's whole decoded trace never
		// exists at once.
		var tb *debugger.TraceBuilder
		events := 0
		pathCalls := map[int]bool{} // the call events whose arguments named a worker's folder
		if err == nil {
			req.Traced = true
			tb = debugger.NewTraceBuilder()
			hider := newPathHider(hidden, CheckoutPath)
			req.Events = func(ev *schemas.Event) {
				e, changed := hider.event(ev)
				if changed && ev.Event == schemas.EventCall {
					pathCalls[events] = true
				}
				tb.Add(e)
				events++
			}
			// Timed from here, not by its result: a run the sandbox failed on spends the
			// allowance too.
			began := time.Now()
			tr, err = sb.RunTest(ctx, req)
			allowance.spend(time.Since(began))
		}
		alive()
		if err != nil {
			if ctx.Err() != nil {
				return t, ctx.Err()
			}
			// The sandbox failed on this test (it restarts for the next one): count it and go
			// on, so that one test cannot fail its whole repository on every retry.
			slog.Warn("sandbox failed on a test", "repo", it.Key, "test", test, "err", err)
			rt.Counts[schemas.CountTestsSandboxError]++
			continue
		}
		rt.Counts[schemas.CountTestOutcome(outcomeKey(plain))]++
		rt.Counts[schemas.CountTracedOutcome(outcomeKey(tr))]++
		countTiming(rt.Counts, lim, plain, tr)
		if plain.SandboxRefused() || tr.SandboxRefused() {
			// A failure that is the sandbox's (a refused .pyc, a module it does not provide).
			rt.Counts[schemas.CountTestsSandboxRefused]++
		}
		if plain.Writable == sandbox.WritableReadOnly {
			// The writable view could not be made: the test saw the checkout read-only.
			rt.Counts[schemas.CountTestsReadOnly]++
		}
		if len(col.Neutralised) > 0 && !compare {
			rt.Counts[schemas.CountTestsNeutralised]++
		}
		if orig != nil && outcomeKey(orig) != outcomeKey(plain) {
			// The repository's own options give another outcome: the run does not show the test.
			rt.Counts[schemas.CountTestsChangedByOption]++
			rt.Quarantined = append(rt.Quarantined, test)
			continue
		}
		if outcomeKey(plain) != outcomeKey(tr) && tr.Result.Status != schemas.StatusEventLimit ||
			tr.Result.Status == schemas.StatusTampered {
			// The outcome changed under tracing (repr side effects, reference counts, timing):
			// the trace does not show what the test does. A traced run that tampered is never
			// data, whatever its untraced run did: the test alone is lost (issue 29).
			rt.Quarantined = append(rt.Quarantined, test)
			continue
		}
		var trace *debugger.Trace
		if events > 0 {
			trace = tb.Trace()
		}
		if it.Repo.Reexecutes() {
			// Traced once more and compared (reexecute): what differs is not the code's to
			// compute, and the same spec must give the same rows.
			wd.begin("test "+test+" (second traced run)", req.Limits.WallTime)
			began := time.Now()
			kept, replaced, why, err := reexecuteTest(ctx, second, req, trace, tr, newPathHider(hidden, CheckoutPath))
			allowance.spend(time.Since(began))
			alive()
			if err != nil {
				if ctx.Err() != nil {
					return t, ctx.Err()
				}
				slog.Warn("sandbox failed on a test's second traced run", "repo", it.Key, "test", test, "err", err)
				rt.Counts[schemas.CountTestsSandboxError]++
				continue
			}
			if why != "" {
				slog.Debug("test quarantined: its two traced runs differ", "repo", it.Key, "test", test, "why", why)
				rt.Counts[schemas.CountTestsNondeterministic]++
				rt.Quarantined = append(rt.Quarantined, test)
				continue
			}
			trace = kept
			if replaced > 0 {
				rt.Counts[schemas.CountValuesNondeterministic] += int64(replaced)
			}
		}
		tt := schemas.TestTrace{Test: test, Outcome: tr.Outcome, Status: tr.Result.Status,
			Detail: tr.Result.Detail, Functions: tr.Result.Functions}
		// File names relative to the repository root: the scratch folder differs from run to run.
		relativize(&tt, CheckoutPath, hidden)
		tt.Modules = mods.defs(tt.Functions)
		if found != nil {
			found.AddTrace(tt.Test, tt.Functions, trace, func(i int) bool { return pathCalls[i] })
		}
		if tt, err = trc.keepTest(ctx, tt, trace); err != nil {
			return t, err
		}
		rt.Traces = append(rt.Traces, tt)
	}
	// A function's module imports its package as the tests do: the import roots too.
	fcfg := cfg
	fcfg.PythonPath = append(append([]string(nil), cfg.PythonPath...), imports...)
	if found != nil {
		if rt.Functions, err = trc.traceFunctions(ctx, fcfg, w, imports, it, found.Items(), rt.Counts, lim, hidden, func() {
			alive()
			wd.begin("a function of its tests", lim.WallTime)
		}); err != nil {
			return t, err
		}
	}
	if it.Repo.FunctionsAll {
		if err := trc.generateInputs(ctx, wd, fcfg, w, roots, imports, it, rt, found, lim, hidden, alive); err != nil {
			return t, err
		}
	}
	t.Status, t.Repo = schemas.StatusOK, rt
	wd.stopBeating()
	if within != nil {
		ses := &RepoSession{traced: t, dir: w.Dir, hidden: hidden, tests: sb, funcConfig: functionConfig(fcfg, w.Dir),
			imports: imports, runner: col.Runner, options: col.Options}
		defer ses.close()
		return t, within(t, ses)
	}
	return t, nil
}

// functionConfig is the sandbox configuration the functions found in a repository's tests are
// traced (and replayed) with: the tests' own, with the checkout importable.
func functionConfig(cfg sandbox.Config, dir string) sandbox.Config {
	cfg.PythonPath = append(append([]string(nil), cfg.PythonPath...), dir)
	return cfg
}

// CheckoutPath and EnvsPath are where the sandbox shows the checkout's folder and the folder of
// environments (sandbox.Config.Binds: a test's os.path.dirname(__file__), a dependency's
// __file__), and what they read as in a value that still holds the worker's: see
// crawl.CheckoutAlias.
const (
	CheckoutPath = crawl.CheckoutAlias
	EnvsPath     = crawl.EnvsAlias
)

// workerPaths are the worker's folders a repository's traces may show, each with what it reads as.
type workerPaths [][2]string

// pathsOf is the checkout dir and, when the repository has an environment (its site-packages
// folder sitePackages, ENVS/HASH/lib/pythonX.Y/site-packages), the folder of environments.
func pathsOf(dir, sitePackages string) workerPaths {
	p := workerPaths{{dir, CheckoutPath}}
	if sitePackages != "" {
		// With its slash: the folder's own name may be short, and only paths below it are meant.
		envs := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(sitePackages))))
		p = append(p, [2]string{strings.TrimSuffix(envs, "/") + "/", EnvsPath + "/"})
	}
	return p
}

// relativize makes the file names of a test trace relative to the checkout dir, and its values
// (locals, return values, exceptions) name the worker's folders by their aliases.
func relativize(tt *schemas.TestTrace, dir string, p workerPaths) {
	for i := range tt.Events {
		tt.Events[i] = *p.hiddenEvent(dir, &tt.Events[i])
	}
	for i := range tt.Functions {
		tt.Functions[i].File = relFile(dir, tt.Functions[i].File)
	}
	tt.Detail = p.hide(strings.ReplaceAll(tt.Detail, dir+"/", ""))
}

// relFile is file relative to dir when it is below it, else file.
func relFile(dir, file string) string {
	if dir == "" {
		return file
	}
	if r, ok := strings.CutPrefix(file, dir+"/"); ok {
		return r
	}
	return file
}

// hiddenEvent is ev with its file name relative to dir (relFile; "" keeps it) and its values
// (locals, return value, exception) naming the worker's folders by their aliases: ev itself when
// nothing changes, else a copy. ev is never modified (a sandbox's event sink may share its
// Locals with later events).
func (p workerPaths) hiddenEvent(dir string, ev *schemas.Event) *schemas.Event {
	e, _ := (&pathHider{p: p, dir: dir}).event(ev)
	return e
}

// pathHider is hiddenEvent over a run's events as they stream, remembering each value it changed
// by the string itself: the decoder hands on the same string for a local that did not change,
// so a long value holding a folder is rewritten once, not at every event of its frame.
type pathHider struct {
	p    workerPaths
	dir  string
	done map[*byte]hiddenValue // nil: nothing remembered
}

// hiddenValue is a value pathHider changed and what it reads as.
type hiddenValue struct{ raw, hidden string }

// maxHiddenValues bounds what a pathHider remembers (it starts again when full).
const maxHiddenValues = 4096

// newPathHider returns a pathHider of p's folders, the file names made relative to dir.
func newPathHider(p workerPaths, dir string) *pathHider {
	return &pathHider{p: p, dir: dir, done: map[*byte]hiddenValue{}}
}

// value is s with the worker's folders named by their aliases, and whether it changed.
func (h *pathHider) value(s string) (string, bool) {
	if s == "" {
		return s, false
	}
	k := unsafe.StringData(s)
	if v, ok := h.done[k]; ok && len(v.raw) == len(s) {
		// The same bytes (the entry keeps raw alive, so its address is not reused).
		return v.hidden, true
	}
	v := h.p.hide(s)
	if v == s {
		return s, false
	}
	if h.done != nil {
		if len(h.done) >= maxHiddenValues {
			clear(h.done)
		}
		h.done[k] = hiddenValue{s, v}
	}
	return v, true
}

// event is hiddenEvent's event, and whether a value (a local, the return value or exception)
// named a worker's folder.
func (h *pathHider) event(ev *schemas.Event) (*schemas.Event, bool) {
	file := relFile(h.dir, ev.File)
	var locals schemas.Locals
	for j, l := range ev.Locals {
		if v, ok := h.value(l.Value); ok {
			if locals == nil {
				locals = slices.Clone(ev.Locals)
			}
			locals[j].Value = v
		}
	}
	var value *string
	if ev.Value != nil {
		if v, ok := h.value(*ev.Value); ok {
			value = &v
		}
	}
	if file == ev.File && locals == nil && value == nil {
		return ev, false
	}
	e := *ev
	e.File = file
	if locals != nil {
		e.Locals = locals
	}
	if value != nil {
		e.Value = value
	}
	return &e, locals != nil || value != nil
}

// hideResult makes the values of a run's events, and its detail, name the worker's folders by
// their aliases (res may be nil).
func (p workerPaths) hideResult(res *sandbox.Result) {
	if res == nil || len(p) == 0 {
		return
	}
	for i := range res.Events {
		res.Events[i] = *p.hiddenEvent("", &res.Events[i])
	}
	res.Detail = p.hide(res.Detail)
	res.Consume = p.hideConsume(res.Consume)
}

// hideConsume is c with its value (the list of the values a consumed iterator gave, a row's
// return value) naming the worker's folders by their aliases: c itself when nothing changes, else
// a copy.
func (p workerPaths) hideConsume(c *schemas.Consume) *schemas.Consume {
	if c == nil {
		return nil
	}
	if v := p.hide(c.Value); v != c.Value {
		cc := *c
		cc.Value = v
		return &cc
	}
	return c
}

// hide replaces the worker's folders in s with their aliases.
func (p workerPaths) hide(s string) string {
	for _, a := range p {
		if a[0] != "" && strings.Contains(s, a[0]) {
			s = strings.ReplaceAll(s, a[0], a[1])
		}
	}
	return s
}

// outcomeKey is a test run's outcome, or its status when it did not finish.
func outcomeKey(r *sandbox.TestResult) string {
	if r.Outcome != "" {
		return r.Outcome
	}
	return string(r.Result.Status)
}

// traceFunctions traces the function-level items found in the tests' traces (cands, from a
// testcalls.Finder: calls of the module-level functions of non-test files with the arguments
// observed, those that could only give an empty trace left out and counted), each on its own: the
// module imported from the checkout as part of its package where it has a dotted name (funcPlace:
// relative imports work), else its source run as a standalone file with the checkout importable;
// the call as the expression. A
// function whose run breaks its sandbox is its own reject (status sandbox_error), never the
// repository's error: the only error returned is the context's. The traces' values name the
// worker's folders by their aliases (hidden), as the tests' do.
func (trc *Tracer) traceFunctions(ctx context.Context, cfg sandbox.Config, w *crawl.Workdir, imports []string, it crawl.Item, cands []crawl.Item, counts schemas.Counts, lim sandbox.Limits, hidden workerPaths, alive func()) ([]TracedItem, error) {
	at := placeOf(w.Dir, imports)
	var out []TracedItem
	var sb *sandbox.Sandbox
	var second *sandbox.Sandbox // the second traced runs' (reexecute), another interpreter's
	defer func() {
		if sb != nil {
			sb.Close()
		}
		if second != nil {
			second.Close()
		}
	}()
	broke := 0 // functions in a row whose run broke its sandbox
	for i, c := range cands {
		if sb == nil {
			var err error
			if sb, err = sandbox.New(ctx, functionConfig(cfg, w.Dir)); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				// The repository's own files (a .pth that exits, say) keep the functions' sandbox
				// from starting: the functions are lost, counted, and the repository's rows stay.
				slog.Warn("no sandbox for a repository's functions", "repo", it.Key, "err", err)
				counts[schemas.CountFunctionSkipped("sandbox_error")] += int64(len(cands) - i)
				return out, nil
			}
		}
		tb, events, hider := debugger.NewTraceBuilder(), 0, newPathHider(hidden, "")
		req := at.request(c, lim, func(ev *schemas.Event) { e, _ := hider.event(ev); tb.Add(e); events++ })
		res, err := sb.Run(ctx, req)
		at.result(c, req, res)
		t := TracedItem{Item: c, Status: schemas.StatusInvalid}
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil && (res == nil || res.Status == schemas.StatusSandboxError):
			// The function's run broke its sandbox: that is the function item's reject (status
			// sandbox_error), and the sandbox starts again for the next one. Functions that break
			// it maxFunctionBreaks times in a row end the repository's functions.
			t.Status, t.Detail = schemas.StatusSandboxError, hidden.hide(err.Error())
			sb.Close()
			sb = nil
			if broke++; broke >= maxFunctionBreaks {
				out = append(out, t)
				counts[schemas.CountFunctionSkipped("sandbox_error")] += int64(len(cands) - i - 1)
				return out, nil
			}
		case err != nil:
			t.Detail = hidden.hide(err.Error())
			broke = 0
		default:
			t.Status, t.Detail, t.Blocks, t.Consume = res.Status, hidden.hide(res.Detail), res.Blocks, hidden.hideConsume(res.Consume)
			t.Value = hidden.hide(okValue(res))
			if events > 0 {
				t.Trace = tb.Trace()
			}
			broke = 0
			if it.Repo != nil && it.Repo.Reexecutes() {
				// Traced once more and compared, as the tests are (reexecute), in a sandbox of
				// its own (see traceRepo).
				var err error
				if second == nil {
					second, err = sandbox.New(ctx, functionConfig(cfg, w.Dir))
				}
				var kept *debugger.Trace
				var replaced int
				var why string
				if err == nil {
					kept, replaced, why, err = reexecuteFunction(ctx, second, at, c, lim, t.Trace, res, hidden)
				}
				switch {
				case err != nil && ctx.Err() != nil:
					return nil, ctx.Err()
				case err != nil:
					// Its second run broke the sandbox (or it did not start): the function is
					// given up, counted.
					if second != nil {
						second.Close()
						second = nil
					}
					counts[schemas.CountFunctionSkipped("sandbox_error")]++
					alive()
					continue
				case why != "":
					counts[schemas.CountFunctionsNondeterministic]++
					alive()
					continue
				}
				t.Trace = kept
				if replaced > 0 {
					counts[schemas.CountFunctionValuesNondeterministic] += int64(replaced)
				}
			}
		}
		out = append(out, t)
		alive()
	}
	return out, nil
}

// neutralisedClasses are the classes of runner options the sandbox neutralises, by option name
// (what sandbox.Collection.Neutralised names). The repository writes those names: counting them
// as they are would let one dataset's counters grow with every name its repositories invent.
var neutralisedClasses = func() map[string]string {
	m := map[string]string{"required_plugins": "required_plugins", "addopts": "addopts"}
	for class, names := range map[string][]string{
		"xdist": {"-n", "--numprocesses", "--maxprocesses", "--dist", "--tx", "--rsyncdir", "--rsyncignore",
			"--max-worker-restart", "-d", "-f", "--looponfail", "--boxed", "--distload", "--forked"},
		"report": {"--junitxml", "--junit-xml", "--log-file", "--pastebin", "--report-log", "--html", "--css",
			"--self-contained-html", "--json-report-file", "--json-report", "--alluredir", "--resultlog", "--result-log"},
		"runner": {"-c", "--config-file", "--rootdir", "--confcutdir", "--basetemp", "--debug", "--cache-show",
			"--collect-only", "--co", "-h", "--help", "-V", "--version", "--pdb", "--trace", "--lf", "--ff",
			"--last-failed", "--failed-first", "--cache-clear", "--sw", "--stepwise", "-o", "--override-ini", "--"},
	} {
		for _, n := range names {
			m[n] = class
		}
	}
	return m
}()

// neutralisedClass is the class of a neutralised runner option: coverage, xdist, report, runner
// (options that change how ndtrace runs pytest), plugin (-p of a plugin that is not there),
// required_plugins, addopts (dropped whole), or other (options of plugins that are not installed).
func neutralisedClass(name string) string {
	switch {
	case strings.HasPrefix(name, "--cov") || strings.HasPrefix(name, "--no-cov"):
		return "coverage"
	case strings.HasPrefix(name, "-p ") || strings.HasPrefix(name, "-p=") || len(name) > 2 && strings.HasPrefix(name, "-p") && name[2] != '-':
		return "plugin"
	}
	if c, ok := neutralisedClasses[name]; ok {
		return c
	}
	return "other"
}

// keepTest keeps tt, with its events in compact form tr (nil for none), in the tracer's
// TestStore, when it has one (keepTrace); without one, tt stays whole in the repository's trace.
func (trc *Tracer) keepTest(ctx context.Context, tt schemas.TestTrace, tr *debugger.Trace) (schemas.TestTrace, error) {
	if trc.TestStore == nil {
		if tr != nil {
			tt.Events = tr.Events()
		}
		return tt, nil
	}
	return keepTrace(ctx, trc.TestStore, tt, tr)
}

// KeepTest stores tt, one test's trace, in s and returns what a repository's trace holds of it:
// its outcome and the reference of the stored trace (content-addressed under TestTracePrefix: the
// same trace is stored once, and a retry writes nothing new). The events are stored in their
// compact form (debugger.Trace: each frame's locals as changes, every string once), not as full
// events, whose locals repeat at every event.
func KeepTest(ctx context.Context, s *store.Store, tt schemas.TestTrace) (schemas.TestTrace, error) {
	var tr *debugger.Trace
	if len(tt.Events) > 0 {
		tr = debugger.NewTrace(tt.Events)
	}
	return keepTrace(ctx, s, tt, tr)
}

// keepTrace is KeepTest for a trace whose events are already in compact form tr (tt.Events is
// not read).
func keepTrace(ctx context.Context, s *store.Store, tt schemas.TestTrace, tr *debugger.Trace) (schemas.TestTrace, error) {
	k := keptTest{Test: tt.Test, Outcome: tt.Outcome, Status: tt.Status, Detail: tt.Detail, Functions: tt.Functions, Modules: tt.Modules}
	// Written twice, a piece at a time (to hash it, then to store it): a test's trace may be tens
	// of MB in compact form, and its JSON form is never whole in memory.
	write := func(w io.Writer) error { return writeWithTrace(w, k, tr) }
	h := sha256.New()
	if err := write(h); err != nil {
		return tt, fmt.Errorf("encode the trace of test %s: %w", tt.Test, err)
	}
	digest := hex.EncodeToString(h.Sum(nil))
	key := TestTracePrefix + digest + ".json"
	if _, err := s.PutFirstFrom(ctx, key, digest, "application/json", write); err != nil {
		return tt, InfraError(fmt.Errorf("store the trace of test %s: %w", tt.Test, err))
	}
	return schemas.TestTrace{Test: tt.Test, Outcome: tt.Outcome, Status: tt.Status, Detail: tt.Detail, Ref: key}, nil
}

// keptTest is the stored form of a test's trace (KeepTest).
type keptTest struct {
	Test      string               `json:"test"`
	Outcome   string               `json:"outcome"`
	Status    schemas.Status       `json:"status"`
	Detail    string               `json:"detail,omitempty"`
	Functions []schemas.FuncSource `json:"functions,omitempty"`
	Modules   []schemas.ModuleDef  `json:"modules,omitempty"`
	// (the trace follows as the member "trace": keepTrace, decodeWithTrace)
}

// TestTracePrefix is where TestStore keeps the traces of repositories' tests.
const TestTracePrefix = "work/tests/"

// MaxTestTraceBytes bounds what reading a stored test trace may take (LoadTest).
const MaxTestTraceBytes = 1 << 30

// LoadTest reads the test trace stored under ref (a schemas.TestTrace.Ref) from s: the test's
// record, without its events, and its events in compact form (nil for none).
func LoadTest(ctx context.Context, s *store.Store, ref string) (schemas.TestTrace, *debugger.Trace, error) {
	if !strings.HasPrefix(ref, TestTracePrefix) || strings.Contains(ref, "..") {
		return schemas.TestTrace{}, nil, fmt.Errorf("test trace %q: not a reference of a stored trace", ref)
	}
	data, err := s.ReadLimit(ctx, ref, MaxTestTraceBytes)
	if err != nil {
		return schemas.TestTrace{}, nil, fmt.Errorf("read test trace %s: %w", ref, err)
	}
	// The key is the content's hash (keepTrace): an object that does not match it was not
	// written by a worker, and is not trusted.
	sum := sha256.Sum256(data)
	if want := strings.TrimSuffix(strings.TrimPrefix(ref, TestTracePrefix), ".json"); hex.EncodeToString(sum[:]) != want {
		return schemas.TestTrace{}, nil, fmt.Errorf("read test trace %s: its content does not hash to its key", ref)
	}
	var k keptTest
	tr, err := decodeWithTrace(data, &k)
	if err != nil {
		return schemas.TestTrace{}, nil, fmt.Errorf("read test trace %s: %w", ref, err)
	}
	return schemas.TestTrace{Test: k.Test, Outcome: k.Outcome, Status: k.Status, Detail: k.Detail, Functions: k.Functions, Modules: k.Modules}, tr, nil
}
