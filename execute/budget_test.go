package execute_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestTracedTimeBudget (issue 29): a test that finishes untraced gets a traced budget scaled from
// its untraced time (schemas.TracedTimeLimit), so a test that takes longer than limits.timeout
// only traced is traced and kept; one that takes longer than the budget's cap is quarantined and
// counted (tests:traced_timeout), never lost silently. The tests wait on time.sleep only when
// traced (sys.gettrace() is set), so what they take traced is the sleep, whatever the machine's
// speed: 1.5 s, past the 1 s limit and within the budget (at least 2.4 s: 40 x pytest's start-up,
// 0.06 s or more, capped at 4 s); an hour, past any budget. A test whose run fails only because
// the sandbox refused it a .pyc (bytecode compiled by py_compile and imported from where it was
// written, as tools that build zip applications do; it passes outside the sandbox) is counted
// as tests:sandbox_refused.
func TestTracedTimeBudget(t *testing.T) {
	ctx := context.Background()
	f, it, pool := repoFixture(t, "budget", map[string]string{
		"slow.py": "import sys\nimport time\n\n\ndef wait_if_traced(seconds):\n    if sys.gettrace() is not None:\n" +
			"        time.sleep(seconds)\n    return seconds\n",
		"tests/test_slow.py": `import importlib.util
import os
import py_compile
import sys
import tempfile

from slow import wait_if_traced


def test_quick():
    assert wait_if_traced(0) == 0


def test_slower_traced():
    assert wait_if_traced(1.5) == 1.5


def test_hangs_traced():
    assert wait_if_traced(3600) == 3600


def test_compiled_import():
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "answer.py")
        with open(src, "w") as fh:
            fh.write("ANSWER = 42\n")
        pyc = py_compile.compile(src, cfile=os.path.join(d, "answer.pyc"), doraise=True)
        os.remove(src)
        spec = importlib.util.spec_from_file_location("answer", pyc)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        assert mod.ANSWER == 42
`,
	})
	timeout, err := schemas.ParseDuration("1s")
	if err != nil {
		t.Fatal(err)
	}
	spec := schemas.Spec{Limits: schemas.LimitsSpec{Timeout: timeout}}.WithDefaults()
	trc := &execute.Tracer{Sandboxes: pool, Fetcher: f, Scratch: sandboxtest.HostDir(t)}
	tr, err := trc.Trace(ctx, it, spec, func() {})
	if err != nil || tr.Repo == nil {
		t.Fatalf("trace: %v, %s %s", err, tr.Status, tr.Detail)
	}
	c := tr.Repo.Counts
	t.Logf("counts %v, quarantined %v", c, tr.Repo.Quarantined)
	kept := map[string]bool{}
	for _, tt := range tr.Repo.Traces {
		kept[tt.Test] = true
	}
	for _, test := range []string{"tests/test_slow.py::test_quick", "tests/test_slow.py::test_slower_traced"} {
		if !kept[test] {
			t.Errorf("%s: not kept", test)
		}
	}
	if kept["tests/test_slow.py::test_hangs_traced"] {
		t.Errorf("test_hangs_traced kept, yet its traced run cannot finish")
	}
	want := map[schemas.CountKey]int64{
		schemas.CountTestOutcome("passed"):    3,
		schemas.CountTracedOutcome("passed"):  2,
		schemas.CountTracedOutcome("timeout"): 1,
		schemas.CountTestsTracedTimeout:       1,
		schemas.CountTestsTracedPastLimit:     1,
		schemas.CountTestsSandboxRefused:      1,
	}
	for k, n := range want {
		if c[k] != n {
			t.Errorf("%s = %d, want %d", k, c[k], n)
		}
	}
}

// BenchmarkTracingSlowdown measures what tracing costs a repository's test (schemas.TracedTimeFactor):
// the wall-clock time of a traced run over an untraced one, of a line-dense loop in the
// repository's own code (every iteration traced, its locals rendered; 3,000,000 iterations, trace
// limits raised to let it run) and of calls into the standard library (not traced, but every call
// reaches the tracer). Reported as x_loop and x_stdlib.
//
//	go test -run XXX -bench TracingSlowdown -benchtime 2x ./execute
func BenchmarkTracingSlowdown(b *testing.B) {
	ctx := context.Background()
	dir := filepath.Join(sandboxtest.HostDir(b), "slowdown")
	sandboxtest.WriteTree(b, dir, map[string]string{
		"work.py": "def churn(n):\n    total = 0\n    for i in range(n):\n        total = (total + i * i) % 1000003\n    return total\n",
		"tests/test_work.py": "import collections\nimport itertools\nimport posixpath\n\nfrom work import churn\n\n\n" +
			"def test_loop():\n    assert churn(3000000) >= 0\n\n\n" +
			"def test_stdlib():\n    collections.deque(map(posixpath.isabs, itertools.repeat('a', 2000000)), 0)\n",
	})
	sb, err := sandbox.New(ctx, sandbox.Config{ReadOnly: []string{dir}})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	lim := sandbox.Limits{WallTime: 10 * time.Minute, CPUTime: 10 * time.Minute, TraceEvents: 1 << 30, TraceBytes: 1 << 40}
	for _, test := range []string{"test_loop", "test_stdlib"} {
		var plain, traced time.Duration
		for i := 0; i < b.N; i++ {
			req := sandbox.TestRequest{Dir: dir, Runner: sandbox.RunnerPytest, Test: "tests/test_work.py::" + test, Limits: lim}
			p, err := sb.RunTest(ctx, req)
			if err != nil || p.Outcome != sandbox.OutcomePassed {
				b.Fatalf("%s untraced: %v %+v", test, err, p)
			}
			req.Traced, req.Events = true, func(*schemas.Event) {}
			tr, err := sb.RunTest(ctx, req)
			if err != nil || tr.Outcome != sandbox.OutcomePassed {
				b.Fatalf("%s traced: %v %+v", test, err, tr)
			}
			plain += p.Result.Wall
			traced += tr.Result.Wall
		}
		b.ReportMetric(float64(traced)/float64(plain), "x_"+strings.TrimPrefix(test, "test_"))
	}
}
