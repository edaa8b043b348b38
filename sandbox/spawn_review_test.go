package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestItemMapFailureReported (an attacker's review of the keeper and init in C, spawn.c): when the
// item's init cannot map the item's user namespace, it kills the item, and that must be a sandbox
// error with its reason, never an outcome of the item's. Both the C init and item.py's _item_init
// closed the item's pipes before the handshake, so the reason was written to a closed descriptor,
// and reported the SIGKILL they had sent as the item's own wait status: the run was "killed"
// (exit 137), data, with an empty stderr. (And every set-up failure of the keeper and init, a
// failing mount too, was written to the item's stdout pipe, fds[2], not its stderr, fds[3], where
// Go takes a sandbox error's detail from.) The map fails for
// real where the init gets no /proc of its own (a container runtime that masks /proc, which
// docs/sandbox.md says the item survives): it then writes /proc/2/uid_map of the sandbox's
// /proc, another process (simulate "no-proc"). Both paths: a function item (the C init) and a
// test run with a writable checkout (item.py's).
func TestItemMapFailureReported(t *testing.T) {
	simulate = []string{"no-proc"}
	defer func() { simulate = nil }()
	ctx := context.Background()
	dir := testrepos.MountableDir(t)
	if err := os.WriteFile(filepath.Join(dir, "test_a.py"), []byte("def test_a():\n    pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb, err := New(ctx, Config{ReadOnly: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	check := func(what string, res *Result) {
		t.Helper()
		if res.Status != schemas.StatusSandboxError || !strings.Contains(res.Detail, "item user namespace failed") {
			t.Errorf("%s: %s (%s), stderr %q; want sandbox_error with the init's reason", what, res.Status, res.Detail, res.Stderr)
		} else {
			t.Logf("%s: %s", what, res.Detail)
		}
	}
	// (Run's error is set with a sandbox_error: the result is what is checked.)
	res, _ := sb.Run(ctx, Request{Code: "def f():\n    return 1\n", Call: "f()"})
	if res == nil {
		t.Fatal("no result")
	}
	check("function item (C init)", res)
	tr, _ := sb.RunTest(ctx, TestRequest{Dir: dir, Runner: "pytest", Test: "test_a.py::test_a"})
	if tr == nil || tr.Result == nil {
		t.Fatal("no test result")
	}
	check("test run with a writable checkout (item.py's init)", tr.Result)
}
