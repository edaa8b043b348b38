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

// TestBindShowsNoHostPath (issue 29) runs a checkout bound at /checkout (Config.Binds) with each
// backend: the test's own location, the folders above it, os.getcwd(), sys.path and the import
// roots all read /checkout (nothing of the host folder is visible, nor in the environment or
// /proc's mount tables), the test may write next to
// its code (the private writable view is made at the bound path), its traced run verifies
// against the host files (not tampered), and the events' file names are the inside ones. The
// host folder itself is not there.
func TestBindShowsNoHostPath(t *testing.T) {
	if testing.Short() {
		t.Skip("starts sandboxes; run without -short")
	}
	host := filepath.Join(sandboxtest.HostDir(t), "worker-scratch", "repo-0123")
	sandboxtest.WriteTree(t, host, map[string]string{
		"src/calc/__init__.py": "import os\n\nHERE = os.path.dirname(os.path.abspath(__file__))\n\n\ndef up(p):\n    return os.path.dirname(p)\n",
		"tests/test_calc.py": "import os\nimport pathlib\nimport sys\n\nimport calc\n\n\ndef test_where():\n" +
			"    seen = [calc.HERE, os.getcwd(), calc.up(calc.up(os.getcwd()))] + [str(p) for p in pathlib.Path(__file__).parents]\n" +
			"    seen += [p for p in sys.path if 'python3' not in p] + list(os.environ.values())\n" +
			"    for f in ('/proc/self/mountinfo', '/proc/self/mounts', '/proc/1/mountinfo'):\n" +
			"        try:\n            seen.append(open(f).read())\n        except OSError:\n            pass\n" +
			"    open(os.path.join(os.path.dirname(__file__), 'out.txt'), 'w').write('x')\n" +
			"    bad = [s for s in seen if 'worker-scratch' in s or 'repo-0123' in s or 'ndtrace-test' in s]\n" +
			"    assert not bad, bad\n" +
			"    assert calc.HERE == '/checkout/src/calc', calc.HERE\n" +
			"    assert os.getcwd() == '/checkout', os.getcwd()\n" +
			"    assert not os.path.exists(" + pyQuote(host) + ")\n",
	})
	for _, backend := range sandbox.Backends() {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			sb, err := sandbox.New(ctx, sandbox.Config{Backend: backend, ReadOnly: []string{host},
				Binds: []sandbox.Bind{{Host: host, At: "/checkout"}}})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			col, err := sb.CollectTests(ctx, sandbox.CollectRequest{Dir: host, Paths: []string{filepath.Join(host, "src")}})
			if err != nil || len(col.Tests) != 1 {
				t.Fatalf("collect: %v %+v", err, col)
			}
			for _, traced := range []bool{false, true} {
				var files []string
				tr, err := sb.RunTest(ctx, sandbox.TestRequest{Dir: host, Test: col.Tests[0], Traced: traced,
					Paths:  []string{filepath.Join(host, "src")},
					Events: func(ev *schemas.Event) { files = append(files, ev.File) }})
				if err != nil {
					t.Fatal(err)
				}
				if tr.Outcome != sandbox.OutcomePassed || tr.Result.Status != schemas.StatusOK || tr.Writable == sandbox.WritableReadOnly {
					t.Fatalf("traced %v: %s %s %s (writable %q)\n%s", traced, tr.Outcome, tr.Result.Status, tr.Result.Detail, tr.Writable, tr.Result.Stderr)
				}
				t.Logf("traced %v: the writable view is a%s %s", traced, map[bool]string{true: "n"}[tr.Writable == sandbox.WritableOverlay], tr.Writable)
				for _, f := range files {
					if !strings.HasPrefix(f, "/checkout/") {
						t.Fatalf("an event's file is %s", f)
					}
				}
				if traced && len(files) == 0 {
					t.Fatal("the traced run has no events")
				}
			}
		})
	}
}

// pyQuote is s as a Python string literal (s holds no quote or backslash).
func pyQuote(s string) string { return "'" + s + "'" }
