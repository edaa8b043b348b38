package sandboxtest

import (
	"strings"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// verdictCases are honest programs the tracer once judged as tampering, each beside the attacks
// its relaxed verdict must still catch (issue 29).
var verdictCases = []testCase{
	{"settrace_restore", func(e *Env) {
		// Restoring the trace function sys.gettrace() returned is no change: the run is traced
		// on after it (g's call is in the trace).
		res := e.Trace(`import sys
def g():
    return 2
def f():
    saved = sys.gettrace()
    sys.settrace(saved)
    sys.settrace(sys.gettrace())
    return g()
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		if !hasCall(res, "g") {
			e.T.Fatalf("g's call is not in the trace after the restore: %d events", len(res.Events))
		}
	}},
	{"settrace_doctest", func(e *Env) {
		// doctest saves and restores the trace function around every run of examples.
		res := e.Trace(`import doctest
def double(x):
    """
    >>> double(21)
    42
    """
    return 2 * x
def f():
    doctest.run_docstring_examples(double, {"double": double})
    r = doctest.DocTestRunner(verbose=False)
    for t in doctest.DocTestFinder().find(double, "double", globs={"double": double}):
        r.run(t)
    return r.summarize(verbose=False).failed + double(1)
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		if res.Value != "2" || !hasCall(res, "double") {
			e.T.Fatalf("value %s, double traced %v", res.Value, hasCall(res, "double"))
		}
	}},
	{"settrace_attacks", func(e *Env) {
		// Anything but the current trace function still ends the run: another function, the
		// getter itself, a lookalike that claims equality with everything, the current function
		// shown by a sys.gettrace of the code's own, a debugger, a profile function (even the
		// current one), a thread's trace function, and CPython's own settrace however it is
		// reached (it is audited).
		for _, stmt := range []string{
			"sys.settrace(lambda *a: None)",
			"sys.settrace(sys.gettrace)",
			"sys.settrace(Lookalike())",
			"hook = lambda *a: None; sys.gettrace = lambda: hook; sys.settrace(hook)",
			"import bdb; sys.settrace(bdb.Bdb().trace_dispatch)",
			"sys.setprofile(sys.getprofile())",
			"sys.setprofile(lambda *a: None)",
			"threading.settrace(lambda *a: None); t = threading.Thread(target=g); t.start(); t.join()",
			"t = threading.Thread(target=lambda: sys.settrace(lambda *a: None)); t.start(); t.join()",
			"import importlib; importlib.reload(sys); sys.settrace(None)",
			"sys.settrace(None)",
		} {
			res := e.Trace(`import sys, threading
class Lookalike:
    def __eq__(self, other):
        return True
    def __hash__(self):
        return 0
    def __call__(self, *a):
        return None
def g():
    return "nobody saw this"
def f():
    `+stmt+`
    return g()
`, "f()", sandbox.Limits{})
			if res.Status != schemas.StatusTampered {
				e.T.Errorf("%s: %s (%s) value %s, want tampered", stmt, res.Status, res.Detail, res.Value)
			}
		}
	}},
}

// hasCall reports whether the run's trace has a call event of function name.
func hasCall(res *sandbox.Result, name string) bool {
	for _, ev := range res.Events {
		if ev.Event == schemas.EventCall && (ev.Func == name || strings.HasSuffix(ev.Func, "."+name)) {
			return true
		}
	}
	return false
}
