package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/internal/userdirs"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// Repository tracing: limits that are not in the spec.
const (
	// collectTimeout bounds the collection of a repository's tests.
	collectTimeout = 2 * time.Minute
	// maxInputsPerFunction caps the distinct inputs kept per function found in a repository, and
	// maxFunctionItems the function-level items one repository gives.
	maxInputsPerFunction = 4
	maxFunctionItems     = 200
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
	// MissingModule names the module some of the repository's test files could not import (the
	// others ran); it is counted as "missing_module", without its name, which the repository
	// writes: counters keyed by it would grow with every name repositories invent.
	MissingModule string `json:"missing_module,omitempty"`
	// Traces are the TracedItem tests that kept their outcome.
	Traces []TestTrace `json:"traces,omitempty"`
	// Functions are function-level items found in the traces, TracedItem on their own.
	Functions []TracedItem `json:"functions,omitempty"`
	// Counts are per-repository counters (tests by outcome and status).
	Counts map[string]int64 `json:"counts,omitempty"`
}

// TestTrace is one TracedItem test.
type TestTrace struct {
	Test      string               `json:"test"`
	Outcome   string               `json:"outcome"`
	Status    schemas.Status       `json:"status"`
	Detail    string               `json:"detail,omitempty"`
	Events    []schemas.Event      `json:"events,omitempty"`
	Functions []schemas.FuncSource `json:"functions,omitempty"`
}

// traceRepo checks out the repository of a repository-level item and runs each of its tests
// (up to MaxTests) untraced and traced in a sandbox where each test sees a private writable view
// of the checkout; alive is
// called after every test. A repository that cannot be used (checkout refused, missing dependency,
// no tests) gives a TracedItem item with status invalid and the reason as its detail; an error is
// returned only for what a retry may fix.
//
// within, when not nil, is called once the repository is traced, with its trace and a
// RepoSession that replays its rows on bdb while the checkout, its environment and the tests'
// sandbox are still in place (verify); its error is returned as is.
func (trc *Tracer) traceRepo(ctx context.Context, it crawl.Item, lim sandbox.Limits, co crawl.CheckoutLimits, alive func(),
	within func(TracedItem, *RepoSession) error) (TracedItem, error) {
	t := TracedItem{Item: it}
	// Checkout and collection can take minutes: keep the activity's heartbeat going meanwhile.
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-tick.C:
				alive()
			case <-done:
				return
			}
		}
	}()
	checkout := "" // the checkout's folder, once made: reasons name files relative to it
	bad := func(format string, args ...any) (TracedItem, error) {
		t.Status, t.Detail = schemas.StatusInvalid, fmt.Sprintf(format, args...)
		if checkout != "" {
			t.Detail = strings.ReplaceAll(t.Detail, checkout+"/", "")
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
			return t, err
		}
	}
	w, err := fetcher.Checkout(ctx, it.Repo.Resolved, scratch, co)
	var re *crawl.RepoError
	switch {
	case errors.As(err, &re) && !re.Transient:
		return bad("checkout: %s", re.Reason)
	case err != nil:
		return t, fmt.Errorf("check out %s: %w", it.Key, err)
	}
	defer w.Remove()
	checkout = w.Dir
	paths := append([]string(nil), it.Repo.PythonPath...)
	// Where the project's packages are when not at the top (src/ layout, package-dir...), as an
	// editable install would put them on sys.path: read from its declarations, never by running
	// its setup code.
	roots, err := crawl.ImportRoots(w.Dir)
	if err != nil {
		return bad("import layout: %v", err)
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
			return bad("venv: %v", err)
		}
		paths = append(paths, sp)
	}
	// The dependencies the source declares (env:), installed into an environment of their own.
	if sp, reason, err := trc.environment(ctx, it, w.Dir); err != nil || reason != "" {
		if err != nil {
			return t, err
		}
		return bad("%s", reason)
	} else if sp != "" {
		paths = append(paths, sp)
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return bad("python_path: %v", err)
		}
	}
	// A slot of the pool bounds this worker's sandboxes; the repository gets sandboxes of its own.
	_, release, err := trc.Sandboxes.Get(ctx)
	if err != nil {
		return t, err
	}
	defer release()
	cfg := trc.Sandboxes.Config()
	cfg.ReadOnly = append(append([]string(nil), cfg.ReadOnly...), w.Dir)
	cfg.PythonPath = append(append([]string(nil), cfg.PythonPath...), paths...)
	sb, err := sandbox.New(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
		// The pool's sandboxes start on this worker, so what fails is this repository's mounts
		// (python_path, venv, the checkout).
		return bad("sandbox with this repository's mounts: %v", err)
	}
	defer sb.Close()

	col, err := sb.CollectTests(ctx, sandbox.CollectRequest{Dir: w.Dir, Runner: it.Repo.Runner, Paths: imports,
		Limits: sandbox.Limits{WallTime: collectTimeout, CPUTime: collectTimeout}})
	if err != nil {
		return t, fmt.Errorf("collect tests of %s: %w", it.Key, err)
	}
	switch {
	case col.MissingModule != "" && len(col.Tests) == 0:
		return bad("missing module %s", col.MissingModule)
	case col.Status != schemas.StatusOK:
		return bad("test collection failed: %s: %s", col.Status, col.Detail)
	case len(col.Tests) == 0 && len(col.Errors) > 0:
		return bad("no tests collected: %s", col.Errors[0])
	case len(col.Tests) == 0:
		return bad("no tests found")
	}
	rt := &RepoTrace{Runner: col.Runner, Tests: len(col.Tests), Counts: map[string]int64{}, Neutralised: col.Neutralised}
	for _, n := range col.Neutralised {
		rt.Counts["neutralised:"+neutralisedClass(n)] = 1
	}
	// With options neutralised, each test is run once more untraced with the original ones when
	// they can run here, else counted as run under neutralised options.
	compare := len(col.Neutralised) > 0 && col.OriginalRunnable
	if col.MissingModule != "" {
		// Some test files need a dependency that is not provided; the others still run.
		rt.MissingModule = col.MissingModule
		rt.Counts["missing_module"]++
	}
	tests := col.Tests
	if n := it.Repo.MaxTests; n > 0 && len(tests) > n {
		tests = tests[:n]
	}
	rt.Run = len(tests)
	for _, test := range tests {
		req := sandbox.TestRequest{Dir: w.Dir, Runner: col.Runner, Test: test, Limits: lim, Options: col.Options, Paths: imports}
		plain, err := sb.RunTest(ctx, req)
		var tr, orig *sandbox.TestResult
		if err == nil && compare {
			oreq := req
			oreq.Options = sandbox.OptionsOriginal
			orig, err = sb.RunTest(ctx, oreq)
		}
		if err == nil {
			req.Traced = true
			tr, err = sb.RunTest(ctx, req)
		}
		alive()
		if err != nil {
			if ctx.Err() != nil {
				return t, ctx.Err()
			}
			// The sandbox failed on this test (it restarts for the next one): count it and go
			// on, so that one test cannot fail its whole repository on every retry.
			slog.Warn("sandbox failed on a test", "repo", it.Key, "test", test, "err", err)
			rt.Counts["tests:sandbox_error"]++
			continue
		}
		rt.Counts["tests:"+outcomeKey(plain)]++
		rt.Counts["traced:"+outcomeKey(tr)]++
		if plain.Writable == sandbox.WritableReadOnly {
			// The writable view could not be made: the test saw the checkout read-only.
			rt.Counts["tests:checkout_read_only"]++
		}
		if len(col.Neutralised) > 0 && !compare {
			rt.Counts["tests:runner_options_neutralised"]++
		}
		if orig != nil && outcomeKey(orig) != outcomeKey(plain) {
			// The repository's own options give another outcome: the run does not show the test.
			rt.Counts["tests:changed_by_runner_options"]++
			rt.Quarantined = append(rt.Quarantined, test)
			continue
		}
		if outcomeKey(plain) != outcomeKey(tr) && tr.Result.Status != schemas.StatusEventLimit {
			// The outcome changed under tracing (repr side effects, reference counts, timing):
			// the trace does not show what the test does.
			rt.Quarantined = append(rt.Quarantined, test)
			continue
		}
		rt.Traces = append(rt.Traces, TestTrace{Test: test, Outcome: tr.Outcome, Status: tr.Result.Status,
			Detail: tr.Result.Detail, Events: tr.Result.Events, Functions: tr.Result.Functions})
	}
	// A function's module imports its package as the tests do: the import roots too.
	fcfg := cfg
	fcfg.PythonPath = append(append([]string(nil), cfg.PythonPath...), imports...)
	if it.Repo.Functions {
		if rt.Functions, err = trc.traceFunctions(ctx, fcfg, w, it, rt.Traces, rt.Counts, lim, alive); err != nil {
			return t, err
		}
	}
	// File names relative to the repository root: the scratch folder differs from run to run.
	for i := range rt.Traces {
		relativize(&rt.Traces[i], w.Dir)
	}
	t.Status, t.Repo = schemas.StatusOK, rt
	if within != nil {
		ses := &RepoSession{traced: t, dir: w.Dir, tests: sb, funcConfig: functionConfig(fcfg, w.Dir),
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

// relativize makes the file names of a test trace relative to the checkout dir.
func relativize(tt *TestTrace, dir string) {
	rel := func(f string) string {
		if r, ok := strings.CutPrefix(f, dir+"/"); ok {
			return r
		}
		return f
	}
	for i := range tt.Events {
		tt.Events[i].File = rel(tt.Events[i].File)
	}
	for i := range tt.Functions {
		tt.Functions[i].File = rel(tt.Functions[i].File)
	}
	tt.Detail = strings.ReplaceAll(tt.Detail, dir+"/", "")
}

// repoRows builds the repository-level rows of a TracedItem repository: for every TracedItem test, every
// direction and draw, an entry call sampled from the test's trace and a trajectory in its scope.
// It returns the reason when the repository gives no row.
func repoRows(t TracedItem, spec schemas.Spec, p debugger.Policy, o RowOptions, counts map[string]int64) ([]schemas.Row, string) {
	rt := t.Repo
	if rt == nil {
		return nil, "repository: no trace"
	}
	for k, v := range rt.Counts {
		counts[k] += v
	}
	counts["tests"] += int64(rt.Tests)
	counts["tests_run"] += int64(rt.Run)
	counts["quarantined"] += int64(len(rt.Quarantined))
	var rows []schemas.Row
	last := "no test gave a trajectory"
	for _, tt := range rt.Traces {
		if _, err := debugger.ExitFor(tt.Status); err != nil {
			counts["skipped:test_"+string(tt.Status)]++
			continue
		}
		for _, dir := range spec.Directions {
			for k := 0; k < spec.TrajectoriesPerTrace; k++ {
				seed := trajectorySeed(spec.Seed, t.Item.Key+"#"+tt.Test, dir, k)
				row, err := repoRow(t.Item, tt, debugger.Direction(dir), seed, p, o)
				var tree *treeError
				switch {
				case errors.As(err, &tree):
					counts["skipped:"+dir+":"+reasonKey(tree.err)]++
					last = tree.err.Error()
					continue
				case err != nil:
					counts["dropped:"+reasonKey(err)]++
					last = err.Error()
					continue
				}
				rows = append(rows, row)
			}
		}
	}
	if len(rows) == 0 {
		return nil, last
	}
	return rows, ""
}

// treeError is an error of building a test's state tree (its entry call, its direction), as
// opposed to one of building the row.
type treeError struct{ err error }

func (e *treeError) Error() string { return e.err.Error() }
func (e *treeError) Unwrap() error { return e.err }

// repoRow builds the repository-level row of test tt of repository it in direction dir with seed,
// which also picks the entry call. An error of the tree is a *treeError.
func repoRow(it crawl.Item, tt TestTrace, dir debugger.Direction, seed uint64, p debugger.Policy, o RowOptions) (schemas.Row, error) {
	item := debugger.RepoItem{Events: tt.Events, Status: tt.Status, Functions: tt.Functions}
	tree, code, entry, err := item.Tree(dir, seed)
	if err != nil {
		return schemas.Row{}, &treeError{err}
	}
	src := Source{Level: "repository", RepoURL: it.Path, Commit: pin(it.Repo.Resolved), Path: entry.File,
		QualName: entry.QualName, SourceID: tt.Test}
	return buildRow(src, tree, code, treeCounts(tree), p, seed, o)
}

// treeCounts counts the events of a tree's states by type.
func treeCounts(t *debugger.Tree) func(*schemas.Row) {
	return func(r *schemas.Row) {
		for _, n := range t.Order {
			countEvent(r, n.EventKind())
		}
	}
}

// pin is a repository's commit, or its content hash if it is not a git repository.
func pin(r crawl.Resolved) string {
	if r.Commit != "" {
		return r.Commit
	}
	return r.ContentHash
}

// outcomeKey is a test run's outcome, or its status when it did not finish.
func outcomeKey(r *sandbox.TestResult) string {
	if r.Outcome != "" {
		return r.Outcome
	}
	return string(r.Result.Status)
}

// traceFunctions makes function-level items of the module-level functions the tests called (in
// non-test files), with the arguments observed at their calls as inputs, and traces each on its
// own: the module's source as the code, the call as the expression, with the checkout importable
// (so that the module's imports of its own package work). Arguments whose rendering is not a
// Python literal (objects, cut values) and functions with * or ** parameters are skipped, and so
// are the items that could only give an empty trace (functionItems; counted in counts).
func (trc *Tracer) traceFunctions(ctx context.Context, cfg sandbox.Config, w *crawl.Workdir, it crawl.Item, traces []TestTrace, counts map[string]int64, lim sandbox.Limits, alive func()) ([]TracedItem, error) {
	cands := functionItems(w.Dir, it, traces, counts)
	if len(cands) == 0 {
		return nil, nil
	}
	sb, err := sandbox.New(ctx, functionConfig(cfg, w.Dir))
	if err != nil {
		return nil, fmt.Errorf("sandbox for the functions of %s: %w", it.Key, err)
	}
	defer sb.Close()
	var out []TracedItem
	for _, c := range cands {
		res, err := sb.Run(ctx, sandbox.Request{Code: c.Code, Filename: c.Filename, Call: c.Call, Limits: lim})
		if err != nil && (res == nil || res.Status == schemas.StatusSandboxError) {
			return nil, fmt.Errorf("trace %s: %w", c.Key, err)
		}
		t := TracedItem{Item: c, Status: schemas.StatusInvalid}
		if err != nil {
			t.Detail = err.Error()
		} else {
			t.Status, t.Detail, t.Trace, t.Blocks, t.Consume = res.Status, res.Detail, compactTrace(res.Events), res.Blocks, res.Consume
		}
		out = append(out, t)
		alive()
	}
	return out, nil
}

// functionItems lists the function-level items found in a repository's test traces, in order of
// first call, without repeating a function and input. An item is a call of a module-level function
// of a non-test file with the arguments its first call event shows: the values of the def's
// parameters, in order (a call event shows the frame's locals, which at a frame's first call are
// its parameters). Left out, with the reason counted in counts ("functions_skipped:REASON"):
//   - resume: a generator's later call events, one per resumption, which show every current local
//     (the frame was already called; its first call event gave the item);
//   - async: async def functions, whose call returns a coroutine or an asynchronous generator that
//     the tracer does not drive (the trace could only be empty);
//   - context_manager: functions decorated with contextmanager (or asynccontextmanager), whose
//     call returns a context manager that runs none of the body (only `with` would);
//   - params: parameters that cannot be passed back positionally (*args, **kwargs, keyword-only)
//     or that the call event does not show;
//   - arguments: an argument whose rendering is not a plain literal.
//
// Generator functions are kept: the tracer consumes the generator their call returns.
func functionItems(dir string, it crawl.Item, traces []TestTrace, counts map[string]int64) []crawl.Item {
	skip := func(reason string) {
		if counts != nil {
			counts["functions_skipped:"+reason]++
		}
	}
	sources := map[[2]string]schemas.FuncSource{}
	for _, tt := range traces {
		for _, f := range tt.Functions {
			sources[[2]string{f.File, f.QualName}] = f
		}
	}
	modules := map[string]string{}
	perFunc := map[[2]string]int{}
	seen := map[string]bool{}
	var items []crawl.Item
	for _, tt := range traces {
		called := map[int]bool{} // the frames of this trace whose first call event was seen
		for _, ev := range tt.Events {
			if ev.Event != schemas.EventCall {
				continue
			}
			if called[ev.Frame] {
				if !strings.ContainsAny(ev.Func, ".<>") && !debugger.IsTestFile(ev.File) {
					skip("resume")
				}
				continue
			}
			called[ev.Frame] = true
			if strings.ContainsAny(ev.Func, ".<>") || debugger.IsTestFile(ev.File) {
				continue
			}
			k := [2]string{ev.File, ev.Func}
			src, ok := sources[k]
			if !ok || perFunc[k] >= maxInputsPerFunction || len(items) >= maxFunctionItems {
				continue
			}
			d, ok := parseDef(src.Source, ev.Func)
			switch {
			case !ok:
				skip("params")
				continue
			case d.async:
				skip("async")
				continue
			case d.contextManager:
				skip("context_manager")
				continue
			}
			args, ok := paramArgs(d.params, ev.Locals)
			if !ok {
				skip("arguments")
				continue
			}
			call := ev.Func + "(" + args + ")"
			rel, err := filepath.Rel(dir, ev.File)
			if err != nil || strings.HasPrefix(rel, "..") {
				continue
			}
			if seen[rel+"\x00"+call] {
				continue
			}
			code, ok := modules[ev.File]
			if !ok {
				data, err := os.ReadFile(ev.File)
				if err != nil {
					continue
				}
				code = string(data)
				modules[ev.File] = code
			}
			seen[rel+"\x00"+call] = true
			perFunc[k]++
			sum := sha256.Sum256([]byte(call))
			items = append(items, crawl.Item{
				Key:      fmt.Sprintf("%s#%s:%s:%s", it.Key, rel, ev.Func, hex.EncodeToString(sum[:6])),
				Path:     rel,
				SourceID: tt.Test,
				Code:     code,
				Filename: filepath.Base(rel),
				Call:     call,
				QualName: ev.Func,
				Func:     src.Source,
				RepoURL:  it.Path,
				Commit:   pin(it.Repo.Resolved),
			})
		}
	}
	return items
}

// funcDef is what functionItems reads of a function's def.
type funcDef struct {
	params         []string // the parameter names, in order
	async          bool     // async def
	contextManager bool     // decorated with contextmanager or asynccontextmanager
}

// parseDef reads the def of name in src (the function's source, decorators included): its
// parameter names, and whether it is async or a context manager. It reports false when there is no
// such def or a parameter cannot be passed back positionally (*args, **kwargs, keyword-only ones).
func parseDef(src, name string) (funcDef, bool) {
	var d funcDef
	head := "def " + name + "("
	i := strings.Index(src, head)
	if i < 0 {
		return d, false
	}
	before := src[:i]
	d.async = strings.HasSuffix(strings.TrimRight(before, " \t"), "async")
	for _, l := range strings.Split(before, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "@") && strings.Contains(l, "contextmanager") {
			d.contextManager = true
		}
	}
	rest := src[i+len(head):]
	depth := 1
	var cur strings.Builder
	var parts []string
	for j := 0; j < len(rest) && depth > 0; j++ {
		c := rest[j]
		switch {
		case c == '#':
			for j < len(rest) && rest[j] != '\n' {
				j++
			}
			continue
		case c == '\'' || c == '"':
			// a string in a default value: copied whole, escapes included
			k := j + 1
			for k < len(rest) && rest[k] != c {
				if rest[k] == '\\' {
					k++
				}
				k++
			}
			if k >= len(rest) {
				return d, false
			}
			cur.WriteString(rest[j : k+1])
			j = k
			continue
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case c == ',' && depth == 1:
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		if depth > 0 {
			cur.WriteByte(c)
		}
	}
	if depth != 0 {
		return d, false
	}
	parts = append(parts, cur.String())
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" || p == "/" {
			continue
		}
		if strings.HasPrefix(p, "*") {
			return d, false
		}
		if k := strings.IndexAny(p, ":="); k >= 0 {
			p = strings.TrimSpace(p[:k])
		}
		if !isIdentifier(p) {
			return d, false
		}
		d.params = append(d.params, p)
	}
	return d, true
}

// isIdentifier reports whether s is an ASCII Python identifier (a non-ASCII one is refused: the
// call is rebuilt from it).
func isIdentifier(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// paramArgs renders the values of params in a call event's locals as a positional argument list,
// or reports false if a parameter is missing or a value is not a plain literal rendering.
func paramArgs(params []string, locals schemas.Locals) (string, bool) {
	vals := make(schemas.Locals, 0, len(params))
	for _, p := range params {
		v, ok := locals.Get(p)
		if !ok {
			return "", false
		}
		vals = append(vals, schemas.Var{Name: p, Value: v})
	}
	return literalArgs(vals)
}

// literalArgs renders the locals of a call event (the arguments, in order) as a positional
// argument list, or reports false if a value is not a plain literal rendering.
func literalArgs(locals schemas.Locals) (string, bool) {
	parts := make([]string, 0, len(locals))
	for _, v := range locals {
		s := v.Value
		if s == "" || strings.HasPrefix(s, "<") || strings.HasSuffix(s, "...") || strings.Contains(s, " object at 0x") ||
			strings.Contains(s, "<") && strings.Contains(s, ">") {
			return "", false
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", "), true
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
