// Package sandboxtest is the conformance suite every sandbox backend must pass: one escape attempt
// per isolation property, each of which must be contained, reported with the right status, and leave
// no process behind. A backend is done when Run passes for it.
package sandboxtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// Run runs the conformance suite against a sandbox built from cfg (its Backend names the backend
// under test).
func Run(t *testing.T, cfg sandbox.Config) {
	ctx := context.Background()
	// Tight limits keep the hostile cases quick; the properties do not depend on their size.
	cfg.Limits = sandbox.Limits{WallTime: 5 * time.Second, CPUTime: 5 * time.Second, AddressSpace: 1 << 30,
		Processes: 32, OutputBytes: 256 << 10, FileSize: 16 << 20}
	// A host directory mounted read-only, for the mount escape case.
	ro := HostDir(t)
	WriteTree(t, ro, map[string]string{"README": "read-only for the sandbox\n", "evil_pyc_src.py": "X = 42\n"})
	// A module shipped as bytecode only, for pyc_from_checkout (compiled by the interpreter the
	// sandbox runs, so its magic number matches).
	python := cfg.Python
	if python == "" {
		python = "/usr/bin/python3"
	}
	if out, err := exec.Command(python, "-c", "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)",
		filepath.Join(ro, "evil_pyc_src.py"), filepath.Join(ro, "evil_pyc.pyc")).CombinedOutput(); err != nil {
		t.Fatalf("compiling a .pyc: %v: %s", err, out)
	}
	os.Chmod(filepath.Join(ro, "evil_pyc.pyc"), 0o644)
	cfg.ReadOnly = append(append([]string{}, cfg.ReadOnly...), ro)
	sb, err := sandbox.New(ctx, cfg)
	if err != nil {
		t.Fatalf("sandbox.New(%s): %v", cfg.Backend, err)
	}
	t.Cleanup(func() { sb.Close() })

	for _, group := range [][]testCase{cases, attackCases, tamperCases, verdictCases, generateCases} {
		for _, tc := range group {
			t.Run(tc.name, func(t *testing.T) {
				env := &Env{T: t, Ctx: ctx, SB: sb, RO: ro}
				tc.run(env)
				env.assertNoStrays()
			})
		}
	}
	// Repository test suites need their checkouts mounted: a sandbox of their own.
	t.Run("test_runs", func(t *testing.T) { testRunCases(t, cfg) })
	t.Run("verdict_test_runs", func(t *testing.T) { verdictTestRuns(t, cfg) })
}

// Env is what one conformance case gets.
type Env struct {
	T   *testing.T
	Ctx context.Context
	SB  *sandbox.Sandbox
	// RO is a host directory the sandbox mounts read-only ("" when it has none).
	RO string
}

// Trace runs f(args) defined by code and fails the test if the sandbox itself failed.
func (e *Env) Trace(code, call string, lim sandbox.Limits) *sandbox.Result {
	e.T.Helper()
	res, err := e.SB.Run(e.Ctx, sandbox.Request{Code: code, Call: call, Limits: lim})
	if err != nil {
		e.T.Fatalf("Run: %v", err)
	}
	return res
}

// want fails unless res has one of the statuses.
func (e *Env) want(res *sandbox.Result, statuses ...schemas.Status) {
	e.T.Helper()
	for _, s := range statuses {
		if res.Status == s {
			return
		}
	}
	e.T.Fatalf("status %s (%s), want %v; stderr: %.500s", res.Status, res.Detail, statuses, res.Stderr)
}

// assertNoStrays checks, from the host, that no process outlived the previous run: between items
// a zygote has no process below it (every item runs in a PID namespace of its own, which dies with
// it, so an item could not see another's leftovers anyway).
// hostListener listens on a loopback port of the host for the rest of the case; reached waits a
// moment and reports whether anything connected to it.
func (e *Env) hostListener() (port int, reached func() bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() { ln.Close() })
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, func() bool {
		select {
		case <-accepted:
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		}
	}
}

func (e *Env) assertNoStrays() {
	e.T.Helper()
	var left map[int][]int
	// The item's processes are gone when Run returns; allow the kernel a moment to reap them (up
	// to 30 s on a loaded machine: a clean run waits no longer than it takes).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if left = strays(); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		e.T.Fatalf("processes left behind below the sandbox's zygote: %v", left)
	}
}

type testCase struct {
	name string
	run  func(e *Env)
}

var cases = []testCase{
	{"network", func(e *Env) {
		port, reached := e.hostListener()
		res := e.Trace(`import socket
def f(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    return "connected"
`, fmt.Sprintf("f(%d)", port), sandbox.Limits{})
		e.want(res, schemas.StatusException)
		if !strings.Contains(res.ExcType, "Error") {
			e.T.Errorf("exception %q, want an OSError", res.ExcType)
		}
		if reached() {
			e.T.Fatal("the sandbox reached a loopback listener on the host")
		}
	}},
	{"filesystem", func(e *Env) {
		wd, _ := os.Getwd()
		hostTmp := e.T.TempDir()
		secret := filepath.Join(hostTmp, "secret.txt")
		if err := os.WriteFile(secret, []byte("host file"), 0o644); err != nil {
			e.T.Fatal(err)
		}
		targets := []string{"/etc/ndtrace-escape", "/usr/ndtrace-escape", "/root/ndtrace-escape",
			filepath.Join(wd, "ndtrace-escape"), filepath.Join(hostTmp, "ndtrace-escape"), "/ndtrace-escape"}
		code := `import os
def f(write, look):
    out = {}
    for p in write:
        try:
            with open(p, "w") as fh:
                fh.write("x")
            out[p] = "written"
        except OSError as e:
            out[p] = type(e).__name__
    for p in look:
        out[p] = os.path.exists(p)
    with open("/tmp/inside", "w") as fh:
        fh.write("tmp is writable")
    out["/tmp"] = open("/tmp/inside").read()
    return out
`
		look := []string{"/root", "/home", "/etc/passwd", wd, secret, "/work", "/var/lib", "/var/log"}
		res := e.Trace(code, fmt.Sprintf("f(%s, %s)", pyList(targets), pyList(look)), sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		if strings.Contains(res.Value, "written") || strings.Contains(res.Value, "True") {
			e.T.Fatalf("the sandbox wrote or saw host files: %s", res.Value)
		}
		if !strings.Contains(res.Value, "tmp is writable") {
			e.T.Fatalf("/tmp is not writable in the sandbox: %s", res.Value)
		}
		for _, p := range targets {
			if _, err := os.Stat(p); err == nil {
				os.Remove(p)
				e.T.Fatalf("the sandbox created %s on the host", p)
			}
		}
	}},
	{"environment", func(e *Env) {
		const secret = "ndtrace-s3cr3t-do-not-leak"
		e.T.Setenv("NDTRACE_TEST_SECRET", secret)
		e.T.Setenv("AWS_SECRET_ACCESS_KEY", secret)
		res := e.Trace(`import os
def f():
    env = dict(os.environ)
    try:
        init = open("/proc/1/environ", "rb").read().decode("latin-1")
    except OSError as e:
        init = type(e).__name__
    try:
        parent = open("/proc/%d/environ" % os.getppid(), "rb").read().decode("latin-1")
    except OSError as e:
        parent = type(e).__name__
    return env, init, parent
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		all := res.Value + string(res.Stdout) + string(res.Stderr)
		for _, ev := range res.Events {
			for _, v := range ev.Locals {
				all += v.Value
			}
		}
		if strings.Contains(all, secret) || strings.Contains(all, "AWS_SECRET") {
			e.T.Fatalf("a secret of the worker's environment reached the sandbox: %s", res.Value)
		}
	}},
	{"unprivileged", func(e *Env) {
		// Seen from the host, every process of the traced code runs as a uid other than root. (Inside,
		// /proc/self/uid_map is relative to the parent user namespace, which need not be the host's.)
		// The child lives until the host has seen it (the host says so with a file in its
		// read-only directory, which the item sees), not for a fixed time, however slow the
		// machine is to start it.
		marker := fmt.Sprintf("%d.25", 100000+time.Now().UnixNano()%800000)
		seen := filepath.Join(e.RO, "seen-"+marker)
		defer os.Remove(seen)
		done := make(chan *sandbox.Result, 1)
		go func() {
			done <- e.Trace(`import os, time
def f(marker, seen):
    pid = os.fork()
    if pid == 0:
        os.execv("/usr/bin/sleep", ["sleep", marker])
    for _ in range(1200):
        if os.path.exists(seen):
            break
        time.sleep(0.05)
    os.kill(pid, 9)
    return os.getuid()
`, fmt.Sprintf("f(%q, %q)", marker, seen), sandbox.Limits{WallTime: 120 * time.Second})
		}()
		var uids []string
		var res *sandbox.Result
	poll:
		for {
			select {
			case res = <-done:
				break poll
			case <-time.After(20 * time.Millisecond):
			}
			if len(uids) > 0 {
				continue
			}
			for _, pid := range hostProcessesWith(marker) {
				status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
				if err != nil {
					continue
				}
				for _, line := range strings.Split(string(status), "\n") {
					if strings.HasPrefix(line, "Uid:") {
						uids = append(uids, strings.Fields(line)[1:]...)
					}
				}
			}
			if len(uids) > 0 {
				if err := os.WriteFile(seen, nil, 0o644); err != nil {
					e.T.Fatal(err)
				}
			}
		}
		e.want(res, schemas.StatusOK)
		if len(uids) == 0 {
			e.T.Fatal("the traced code's process was not seen from the host")
		}
		for _, u := range uids {
			if u == "0" {
				e.T.Fatalf("traced code runs as host root (uids %v)", uids)
			}
		}
	}},
	{"fork_bomb", func(e *Env) {
		res := e.Trace(`import os
def f():
    n = 0
    while True:
        os.fork()
        n += 1
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusException, schemas.StatusTimeout)
	}},
	{"memory", func(e *Env) {
		res := e.Trace(`def f():
    b = bytearray(10 * 1024 ** 3)
    return len(b)
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusMemory)
		// (Zeroing the gigabyte takes about 0.5 s of CPU time: the time limits leave a margin for
		// any machine, the address-space limit ends the run.)
		res = e.Trace(`def f():
    chunks = []
    while True:
        chunks.append(bytearray(64 * 1024 ** 2))
`, "f()", sandbox.Limits{WallTime: 60 * time.Second, CPUTime: 60 * time.Second})
		e.want(res, schemas.StatusMemory)
	}},
	{"infinite_loop", func(e *Env) {
		start := time.Now()
		res := e.Trace("def f():\n    while True:\n        pass\n", "f()",
			sandbox.Limits{WallTime: 1500 * time.Millisecond, TraceEvents: 1 << 30, TraceBytes: 1 << 40})
		e.want(res, schemas.StatusTimeout)
		// The wall-clock limit ended it (a CPU-bound loop reaches it before the CPU-time limit at
		// any speed), and the run ends soon after (the generous bound only catches a hang).
		if !strings.Contains(res.Detail, "wall-clock") {
			e.T.Fatalf("timeout for %q, want the wall-clock limit", res.Detail)
		}
		if d := time.Since(start); d > time.Minute {
			e.T.Fatalf("timeout took %v", d)
		}
	}},
	{"infinite_output", func(e *Env) {
		res := e.Trace("import sys\ndef f():\n    while True:\n        sys.stdout.write('x' * 1000 + '\\n')\n", "f()",
			sandbox.Limits{TraceEvents: 1 << 30, TraceBytes: 1 << 40})
		e.want(res, schemas.StatusOutputLimit)
		if len(res.Stdout) > sandbox.KeptOutput {
			e.T.Fatalf("kept %d bytes of stdout", len(res.Stdout))
		}
	}},
	{"huge_file", func(e *Env) {
		res := e.Trace(`def f():
    chunk = b"\0" * (1 << 20)
    with open("/tmp/big", "wb") as fh:
        for _ in range(4096):
            fh.write(chunk)
    return "wrote 4 GB"
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusException)
		if res.ExcType != "OSError" {
			e.T.Fatalf("exception %s: %s, want OSError (file too large or no space)", res.ExcType, res.ExcMessage)
		}
		// The next run starts with an empty /tmp.
		res = e.Trace("import os\ndef f():\n    return os.listdir('/tmp')\n", "f()", sandbox.Limits{})
		if res.Value != "[]" {
			e.T.Fatalf("/tmp not emptied between runs: %s", res.Value)
		}
	}},
	{"daemon", func(e *Env) {
		res := e.Trace(`import os, time
def f():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv("/usr/bin/sleep", ["sleep", "987654.321"])
        os._exit(0)
    time.sleep(0.2)
    return "spawned"
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		if pids := hostProcessesWith("987654.321"); len(pids) > 0 {
			e.T.Fatalf("the daemon outlived the run: host pids %v", pids)
		}
	}},
	{"kill_parent", func(e *Env) {
		res := e.Trace(`import os, signal, time
def f():
    out = []
    for pid in (os.getppid(), 1, -1):
        try:
            os.kill(pid, signal.SIGKILL)
            out.append("sent")
        except OSError as e:
            out.append(type(e).__name__)
    time.sleep(0.3)
    return out
`, "f()", sandbox.Limits{})
		// Either the supervisor is out of the code's reach (ok) or the run dies with it (killed);
		// both are contained, and the sandbox keeps working.
		e.want(res, schemas.StatusOK, schemas.StatusKilled)
		next := e.Trace("def f():\n    return 42\n", "f()", sandbox.Limits{})
		e.want(next, schemas.StatusOK)
	}},
	{"many_children", func(e *Env) {
		// Many short-lived children in one run: all reaped, none left. Its 20 zombies need the
		// suite's 32 processes: a memory limit of the suite's Processes x AddressSpace keeps
		// them where rlimits alone bound the item (which would otherwise lower the processes to
		// fit the default 2 GiB: docs/sandbox.md, "Resources").
		res := e.Trace(`import os
def f():
    for i in range(20):
        if os.fork() == 0:
            os._exit(0)
    return "done"
`, "f()", sandbox.Limits{Memory: 32 << 30})
		e.want(res, schemas.StatusOK)
	}},
}

// hostProcessesWith returns the host pids whose command line contains marker.
func hostProcessesWith(marker string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		var pid int
		if _, err := fmt.Sscanf(ent.Name(), "%d", &pid); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(b), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func pyList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// wantLocal fails unless some event of res shows the local name with value v.
func (e *Env) wantLocal(res *sandbox.Result, name, v string) {
	e.T.Helper()
	for _, ev := range res.Events {
		if got, ok := ev.Locals.Get(name); ok && got == v {
			return
		}
	}
	e.T.Fatalf("no event shows %s = %s", name, v)
}
