package execute_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// TestExitingPthIsTheRepositorysOwn (issue 26, endless retries): a repository holding a .pth file
// that exits the interpreter (`import os; os._exit(97)`) breaks the sandbox of the functions
// found in its tests, which sees the checkout on its path. That was an error of its whole
// repository, of no class a retry could not fix, so the repository was traced again on every
// attempt until the activity's deadline. It now gives its trace, with its functions given up and
// counted, and no error.
func TestExitingPthIsTheRepositorysOwn(t *testing.T) {
	ctx := context.Background()
	f, it, pool := repoFixture(t, "pthexit", map[string]string{
		"calc.py":            "def double(x):\n    return 2 * x\n",
		"zz.pth":             "import os; os._exit(97)\n",
		"tests/test_calc.py": "from calc import double\n\n\ndef test_double():\n    assert double(21) == 42\n",
	})
	trc := &execute.Tracer{Sandboxes: pool, Fetcher: f, Scratch: sandboxtest.HostDir(t)}
	tr, err := trc.Trace(ctx, it, schemas.Spec{}.WithDefaults(), func() {})
	if err != nil {
		t.Fatalf("an error (retried): %v", err)
	}
	if tr.Repo == nil {
		t.Fatalf("no trace of the repository: %s %s", tr.Status, tr.Detail)
	}
	lost := tr.Repo.Counts[schemas.CountFunctionSkipped("sandbox_error")]
	for _, fi := range tr.Repo.Functions {
		if fi.Status == schemas.StatusSandboxError {
			lost++
		}
	}
	if lost == 0 {
		t.Errorf("functions %+v, counts %v: none given up, yet the .pth exits every interpreter that sees the checkout",
			tr.Repo.Functions, tr.Repo.Counts)
	}
}

// TestInfraErrorKeepsItsMessage: marking an error as the worker's changes neither its text nor
// what it wraps.
func TestInfraErrorKeepsItsMessage(t *testing.T) {
	base := errors.New("no sandbox to be had")
	err := execute.InfraError(base)
	if err.Error() != base.Error() || !errors.Is(err, execute.ErrInfra) || !errors.Is(err, base) || errors.Is(err, execute.ErrItem) {
		t.Errorf("%v", err)
	}
	if execute.InfraError(nil) != nil {
		t.Error("InfraError(nil) is not nil")
	}
}

// TestWorkerSandboxFailureIsNotTheRepositorys (attacker's review, issue 26): a repository gets a
// sandbox of its own, with its mounts; when that sandbox would not start, the repository was
// rejected for good ("sandbox with this repository's mounts"), even when what failed was the
// worker (here, a folder of its own configuration gone since its pool started; out of processes
// or memory under load): a dataset lost the repository to the worker's trouble. It is now the
// worker's error (retried elsewhere) unless a sandbox without the repository's mounts starts.
func TestWorkerSandboxFailureIsNotTheRepositorys(t *testing.T) {
	ctx := context.Background()
	f, it, _ := repoFixture(t, "worker", map[string]string{
		"tests/test_a.py": "def test_a():\n    assert True\n",
	})
	site := filepath.Join(sandboxtest.HostDir(t), "site-packages")
	if err := os.MkdirAll(site, 0o755); err != nil {
		t.Fatal(err)
	}
	pool := execute.NewSandboxPool(sandbox.Config{PythonPath: []string{site}}, 1)
	defer pool.Close()
	_, release, err := pool.Get(ctx) // the pool's sandbox starts while the folder is there
	if err != nil {
		t.Fatal(err)
	}
	release()
	if err := os.RemoveAll(site); err != nil {
		t.Fatal(err)
	}
	trc := &execute.Tracer{Sandboxes: pool, Fetcher: f, Scratch: sandboxtest.HostDir(t)}
	tr, err := trc.Trace(ctx, it, schemas.Spec{}.WithDefaults(), func() {})
	if !errors.Is(err, execute.ErrInfra) {
		t.Fatalf("trace: %v, %s %s %s; want the worker's error", err, tr.Status, tr.Stage, tr.Detail)
	}
}

// TestKeepTest: a test trace kept apart reads back whole, its reference is its content's, and a
// reference that is not one of a kept trace is refused.
func TestKeepTest(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tt := schemas.TestTrace{Test: "tests/test_a.py::test_x", Outcome: "passed", Status: schemas.StatusOK,
		Events:    []schemas.Event{{Event: schemas.EventCall, Func: "f", File: "a.py", Lineno: 1, Frame: 1, Locals: schemas.Locals{{Name: "x", Value: "1"}}}},
		Functions: []schemas.FuncSource{{File: "a.py", QualName: "f", FirstLine: 1, LastLine: 2, Source: "def f(x):\n    return x"}},
		Modules: []schemas.ModuleDef{{File: "a.py", Kind: "assign", Names: []string{"N"}, Chars: 5,
			Parts: []schemas.DefPart{{FirstLine: 3, LastLine: 3, Source: "N = 1"}}}}}
	kept, err := execute.KeepTest(ctx, s, tt)
	if err != nil {
		t.Fatal(err)
	}
	if kept.Ref == "" || kept.Events != nil || kept.Functions != nil || kept.Modules != nil || kept.Test != tt.Test || kept.Status != tt.Status {
		t.Fatalf("kept %+v", kept)
	}
	again, err := execute.KeepTest(ctx, s, tt)
	if err != nil || again.Ref != kept.Ref {
		t.Fatalf("kept again: %+v %v", again, err)
	}
	back, tr, err := execute.LoadTest(ctx, s, kept.Ref)
	if err != nil || tr == nil {
		t.Fatalf("read back %+v %v %v", back, tr, err)
	}
	back.Events = tr.Events()
	if !reflect.DeepEqual(back, tt) {
		t.Fatalf("read back %+v, want %+v", back, tt)
	}
	// An object under a key of the form, not written by a worker: its bytes do not hash to it.
	forged := execute.TestTracePrefix + strings.Repeat("0", 64) + ".json"
	if _, err := s.PutFirst(ctx, forged, []byte(`{"test":"tests/test_a.py::test_x","outcome":"passed","status":"ok"}`), ""); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"batches/x.json", execute.TestTracePrefix + "../batches/x.json", forged} {
		if _, _, err := execute.LoadTest(ctx, s, ref); err == nil {
			t.Errorf("LoadTest(%q) read it", ref)
		}
	}
}

// TestRepositoryTracesHoldNoWorkerPath (attacker's review, issue 26): a repository is checked out
// in a fresh folder of the worker's scratch folder (a random name), mounted at the same path in the
// sandbox, so a test's values that hold its own path (os.path.dirname(__file__), a data file next
// to it) put that folder into the repository's rows: the same repository, spec and seed gave other
// rows on every run and on every worker (the house's determinism rule), and its rows told the
// worker's folders. Values now name the checkout as execute.CheckoutPath, in the tests' traces
// and in those of the function items found in them.
func TestRepositoryTracesHoldNoWorkerPath(t *testing.T) {
	ctx := context.Background()
	f, it, pool := repoFixture(t, "paths", map[string]string{
		"paths.py": "import os\n\nROOT = os.path.dirname(os.path.abspath(__file__))\n",
		"calc.py": "import os\n\nfrom paths import ROOT\n\n\ndef here(name):\n    base = ROOT\n    return os.path.join(base, name)\n\n\n" +
			"def files(name):\n    yield os.path.join(ROOT, name)\n",
		"tests/test_calc.py": "from calc import files, here\n\n\ndef test_here():\n    assert here('data.txt').endswith('data.txt')\n" +
			"    assert list(files('more.txt'))[0].endswith('more.txt')\n",
	})
	var runs [2][]byte
	for i := range runs {
		scratch := sandboxtest.HostDir(t) // another worker's scratch folder
		trc := &execute.Tracer{Sandboxes: pool, Fetcher: f, Scratch: scratch}
		tr, err := trc.Trace(ctx, it, schemas.Spec{}.WithDefaults(), func() {})
		if err != nil || tr.Repo == nil || len(tr.Repo.Traces) != 1 {
			t.Fatalf("trace: %v, %s %s", err, tr.Status, tr.Detail)
		}
		// The function items found in the test (here('data.txt'), files('more.txt')) run with
		// the checkout importable: their values hold the checkout's folder too, and so does
		// the list of what the generator gave (its row's return value).
		if len(tr.Repo.Functions) != 2 || tr.Repo.Functions[0].Trace == nil || tr.Repo.Functions[1].Consume == nil {
			t.Fatalf("functions: %+v", tr.Repo.Functions)
		}
		f0, f1 := tr.Repo.Functions[0], tr.Repo.Functions[1]
		runs[i], err = json.Marshal([]any{tr.Repo.Traces, f0.Trace, f0.Detail, f1.Trace, f1.Consume})
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(runs[i], []byte(scratch)) {
			t.Errorf("run %d: the trace names the worker's scratch folder %s", i, scratch)
		}
	}
	if n := bytes.Count(runs[0], []byte(execute.CheckoutPath+"/data.txt")); n < 2 {
		t.Errorf("%d values name %s/data.txt, want the test's and the function item's: %s", n, execute.CheckoutPath, runs[0])
	}
	if !bytes.Contains(runs[0], []byte(`"value":"['`+execute.CheckoutPath+`/more.txt']"`)) {
		t.Errorf("the generator's values do not name %s/more.txt: %s", execute.CheckoutPath, runs[0])
	}
	if !bytes.Equal(runs[0], runs[1]) {
		t.Errorf("two runs of one repository give different traces:\n%s\n%s", runs[0], runs[1])
	}
}

// TestRepositoryRejectHoldsNoWorkerPath (attacker's review, issue 26): a repository that cannot be
// used is a reject whose reason is what its collection printed; only the checkout's folder
// followed by a slash was taken out of it, so a collection error naming the folder itself
// (os.getcwd(), the checkout) put the worker's scratch folder and a random name into the
// dataset's rejects: another reason on every run and worker. It now reads as
// execute.CheckoutPath, as in the traces.
func TestRepositoryRejectHoldsNoWorkerPath(t *testing.T) {
	ctx := context.Background()
	f, it, pool := repoFixture(t, "cwd", map[string]string{
		"conftest.py":        "import os\n\nraise RuntimeError('here: ' + os.getcwd())\n",
		"tests/test_calc.py": "def test_x():\n    assert True\n",
	})
	var details [2]string
	for i := range details {
		scratch := sandboxtest.HostDir(t)
		trc := &execute.Tracer{Sandboxes: pool, Fetcher: f, Scratch: scratch}
		tr, err := trc.Trace(ctx, it, schemas.Spec{}.WithDefaults(), func() {})
		if err != nil || tr.Repo != nil {
			t.Fatalf("trace: %v, %s %s", err, tr.Status, tr.Detail)
		}
		details[i] = tr.Detail
		if strings.Contains(tr.Detail, scratch) {
			t.Errorf("run %d: the reason names the worker's scratch folder: %s", i, tr.Detail)
		}
	}
	if !strings.Contains(details[0], "here: "+execute.CheckoutPath) || details[0] != details[1] {
		t.Errorf("reasons %q and %q: want the same, naming %s", details[0], details[1], execute.CheckoutPath)
	}
}

// repoFixture writes a repository of files into a folder named name, skipping the test under
// -short, and returns a fetcher for it, its repository-level item and a sandbox pool, closed when
// the test ends.
func repoFixture(t *testing.T, name string, files map[string]string) (*crawl.Fetcher, crawl.Item, *execute.SandboxPool) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a repository's tests in the sandbox; run without -short")
	}
	ctx := context.Background()
	dir := filepath.Join(sandboxtest.HostDir(t), name)
	sandboxtest.WriteTree(t, dir, files)
	f, done, err := crawl.NewFetcher(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = done() })
	items, _, err := f.Items(ctx, schemas.SourceSpec{Kind: "repository", URL: dir})
	if err != nil || len(items) != 1 {
		t.Fatalf("items: %v %+v", err, items)
	}
	pool := execute.NewSandboxPool(sandbox.Config{}, 1)
	t.Cleanup(pool.Close)
	return f, items[0], pool
}
