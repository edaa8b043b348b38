package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/schemas"
)

// TestTracerSelfcheck runs the tracer's own check on every interpreter at hand: the code that runs
// after traced code has started makes no global or builtin look-up (traced code can rebind those,
// so the tracer must take everything from its closure; docs/sandbox.md).
func TestTracerSelfcheck(t *testing.T) {
	pythons := []string{"/usr/bin/python3"}
	more, _ := filepath.Glob("/root/.pyenv/versions/3.1[1-9]*/bin/python3")
	pythons = append(pythons, more...)
	ran := 0
	for _, py := range pythons {
		if _, err := os.Stat(py); err != nil {
			continue
		}
		ran++
		out, err := exec.Command(py, "-c", tracerSource, "--selfcheck").CombinedOutput()
		if err != nil {
			t.Errorf("%s: the tracer's run-time code looks up globals or builtins (%v):\n%s", py, err, strings.TrimSpace(string(out)))
		}
	}
	if ran == 0 {
		t.Skip("no python3 interpreter")
	}
}

// TestDegraded checks items on machines that lack a part of the isolation: without Landlock they
// get no /proc at all (nothing else would keep them from their own memory); where the IPC
// sysctls cannot be set they may not create System V IPC objects. Either way they trace as usual.
func TestDegraded(t *testing.T) {
	code := `import os, sys, subprocess
def f():
    probe = "import ctypes; l = ctypes.CDLL(None, use_errno=True); r = l.shmget(0, 4096, 0o1600); print(r < 0 and -ctypes.get_errno() or 0)"
    shm = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip()
    return os.listdir("/proc") == [], shm
`
	for _, tc := range []struct{ simulate, want string }{
		{"no-landlock", "(True, '0')"}, // no /proc; SysV allowed (bounded)
		{"ro-sysctl", "(False, '-1')"}, // a /proc of its own; SysV refused (EPERM)
	} {
		t.Run(tc.simulate, func(t *testing.T) {
			simulate = []string{tc.simulate}
			defer func() { simulate = nil }()
			ctx := context.Background()
			sb, err := New(ctx, Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			res, err := sb.Run(ctx, Request{Code: code, Call: "f()"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != schemas.StatusOK || res.Value != tc.want || len(res.Events) == 0 {
				t.Fatalf("%s %s %s (%d events); want ok %s", res.Status, res.Value, res.Detail, len(res.Events), tc.want)
			}
		})
	}
}

// TestRecursionLimit checks runs that reach the recursion limit, traced or not: the program's
// own RecursionError is reported as such, and a limit reached in untraced code (where even calling
// the trace function fails, and CPython would switch tracing off) ends as an incomplete trace,
// never as a sandbox error or as tampering.
func TestRecursionLimit(t *testing.T) {
	code := `import copy
def f(n):
    if n == 0:
        return [0]
    return sorted(f(n - 1), key=lambda x: -x)

def g(n):
    if n == 0:
        return 0
    return max([g(n - 1)], key=lambda x: x)

def h():
    try:
        return f(100000)
    except RecursionError:
        return "caught"

def k():
    x = []
    for _ in range(800):
        x = [x]
    try:
        copy.deepcopy(x)
    except RecursionError:
        return "caught deepcopy"
    return "no"
`
	ctx := context.Background()
	sb, err := New(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for _, tc := range []struct {
		call string
		want schemas.Status
	}{{"f(100000)", schemas.StatusException}, {"g(100000)", schemas.StatusException},
		{"h()", schemas.StatusException}, {"k()", schemas.StatusEventLimit}} {
		res, err := sb.Run(ctx, Request{Code: code, Call: tc.call})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.call, res.Status, res.Detail, tc.want)
		}
	}
}
