package sandbox_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
)

// pthSpy is a module a .pth file of the PythonPath imports: it looks for the item's key in the
// frames below it (tracer.py's _prepare held it in a local) and replaces sys._getframe, which
// tracer.py's _tracer_codes walks to find the code it trusts, with a wrapper that records its
// callers. Both would be the environment's, before the tracer's audit hook and trusted code exist.
const pthSpy = `import builtins, sys
seen = []
f = sys._getframe()
while f is not None:
    for k, v in list(f.f_locals.items()):
        if type(v) is bytes and len(v) >= 16 and k in ("key", "body"):
            seen.append("%s.%s" % (f.f_code.co_name, k))
    f = f.f_back
calls = []
real = sys._getframe
def spy(depth=0):
    calls.append(real(1).f_code.co_name)
    return real(depth + 1)
sys._getframe = spy
builtins._ndtrace_attack = (seen, calls)
`

// TestPthBeforeTracerSetup (an attacker's review): a function item's PythonPath is processed
// (site.addsitedir runs its .pth files) after the tracer has its key and before its audit hook
// and trusted code: a .pth file that ran there could read the key from tracer.py's frames (and
// seal a trace of its own) or decide which code the tracer trusts. The PythonPath is now added
// after the tracer is set up, sealed and has dropped the key: the .pth file finds no key, and
// _tracer_codes never calls its sys._getframe.
func TestPthBeforeTracerSetup(t *testing.T) {
	site := filepath.Join(sandboxtest.HostDir(t), "site")
	sandboxtest.WriteTree(t, site, map[string]string{"zz_spy.pth": "import ndtrace_pth_spy\n", "ndtrace_pth_spy.py": pthSpy})
	for _, backend := range sandbox.Backends() {
		t.Run(backend, func(t *testing.T) {
			sb, err := sandbox.New(context.Background(), sandbox.Config{Backend: backend, PythonPath: []string{site}})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			res, err := sb.Run(context.Background(), sandbox.Request{
				Code: "import builtins\n\ndef f():\n    seen, calls = builtins._ndtrace_attack\n    return (seen, '_tracer_codes' in calls)\n",
				Call: "f()"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != schemas.StatusOK || res.Value != "([], False)" {
				t.Fatalf("the .pth file ran before the tracer's set-up: %s %q (%s)", res.Status, res.Value, res.Detail)
			}
			// The same module imported by the traced code itself finds nothing either.
			res, err = sb.Run(context.Background(), sandbox.Request{
				Code: "import builtins, importlib\n\ndef f():\n    del builtins._ndtrace_attack\n" +
					"    importlib.reload(importlib.import_module('ndtrace_pth_spy'))\n    return builtins._ndtrace_attack[0]\n",
				Call: "f()"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != schemas.StatusOK || strings.Contains(res.Value, "key") {
				t.Fatalf("traced code found the key: %s %q (%s)", res.Status, res.Value, res.Detail)
			}
		})
	}
}
