package sandboxtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/sandbox/cgroup"
	"github.com/ndtrace/ndtrace/schemas"
)

// The attack cases below are the attack classes, each written as the program an attacker
// who knows ndtrace's source would run. Programs that need raw system calls run a fresh
// interpreter inside the item (what any item can do: exec /usr/bin/python3, which has ctypes
// and no tracer): only the operating system's isolation stands between it and the supervisor.

// ForkedMemoryCode forks n children that each commit (touch) up to size bytes in 8 MiB pieces,
// until done or refused, report what they hold and keep it until the parent kills them. f
// returns, as JSON, how many children it got and what they (alive when all had reported) and
// the parent held: for each, what it touched or its peak RSS (shared pages included), whichever
// is more.
const ForkedMemoryCode = `import json, os, resource, signal
def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
def child(w, size):
    held, got = [], 0
    try:
        while got < size:
            b = bytearray(8 << 20)
            b[::4096] = b"\x01" * len(range(0, len(b), 4096))
            held.append(b)
            got += len(b)
    except MemoryError:
        pass
    os.write(w, b"%d\n" % max(got, rss()))
    signal.pause()
def f(n, size):
    kids = []
    for i in range(n):
        r, w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            break
        if pid == 0:
            try:
                os.close(r)
                child(w, size)
            finally:
                os._exit(0)
        os.close(w)
        kids.append((pid, r))
    reported = {}
    for pid, r in kids:
        line = os.read(r, 64)
        if line.strip():
            reported[pid] = int(line)
    held, alive = 0, []
    for pid, r in kids:
        if os.waitpid(pid, os.WNOHANG)[0] == 0:
            alive.append(pid)
            held += reported.get(pid, 0)
    parent = rss()
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    for pid, r in kids:
        os.close(r)
    return json.dumps({"kids": len(kids), "held": held, "parent": parent})
`

// kernelProbe runs in a fresh interpreter inside an item and tries the kernel surface directly.
// It prints one JSON object: name -> the system call's result (>= 0) or -errno. x86_64 only.
const kernelProbe = `
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return r if r >= 0 else -ctypes.get_errno()
out = {}
buf = ctypes.create_string_buffer(64)
iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 64)
out["ptrace_attach_init"] = sc(101, 16, 1, 0, 0)
out["ptrace_traceme"] = sc(101, 0, 0, 0, 0)
out["process_vm_readv"] = sc(310, 1, ctypes.addressof(iov), 1, ctypes.addressof(iov), 1, 0)
out["process_vm_writev"] = sc(311, 1, ctypes.addressof(iov), 1, ctypes.addressof(iov), 1, 0)
out["pidfd_getfd"] = sc(438, 0, 0, 0)
out["kcmp"] = sc(312, 1, os.getpid(), 0, 0, 0)
out["keyctl_session"] = sc(250, 0, -3, 0)
out["add_key"] = sc(248, ctypes.addressof(ctypes.create_string_buffer(b"user")), ctypes.addressof(ctypes.create_string_buffer(b"k")), ctypes.addressof(buf), 1, -3)
out["request_key"] = sc(249, ctypes.addressof(ctypes.create_string_buffer(b"user")), ctypes.addressof(ctypes.create_string_buffer(b"k")), 0, 0)
out["unshare_user"] = sc(272, 0x10000000)
out["unshare_mount"] = sc(272, 0x20000)
out["setns"] = sc(308, 0, 0)
r = sc(56, 0x10000000 | 17, 0, 0, 0, 0)
if r == 0:
    os._exit(0)
out["clone_newuser"] = r
out["mount_tmpfs"] = libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, b"size=12g") and -ctypes.get_errno()
out["umount_proc"] = libc.umount2(b"/proc", 2) and -ctypes.get_errno()
out["bpf"] = sc(321, 0, 0, 0)
out["perf_event_open"] = sc(298, ctypes.addressof(buf), 0, -1, -1, 0)
out["io_uring_setup"] = sc(425, 1, ctypes.addressof(buf))
out["userfaultfd"] = sc(323, 0)
out["kexec_load"] = sc(246, 0, 0, 0, 0)
out["init_module"] = sc(175, 0, 0, 0)
out["finit_module"] = sc(313, 0, 0, 0)
out["memfd_create"] = sc(319, ctypes.addressof(ctypes.create_string_buffer(b"x")), 0)
out["socket_netlink"] = sc(41, 16, 3, 0)
out["socket_packet"] = sc(41, 17, 3, 0)
out["x32_getpid"] = sc(39 | 0x40000000)
hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)
data = (ctypes.c_uint32 * 6)()
sc(125, ctypes.addressof(hdr), ctypes.addressof(data))
out["caps"] = sum(data)
out["bounding"] = sum(1 for c in range(64) if libc.prctl(23, c, 0, 0, 0) == 1)
out["no_new_privs"] = libc.prctl(39, 0, 0, 0, 0)
out["seccomp_mode"] = libc.prctl(21, 0, 0, 0, 0)
try:
    open("/proc/self/mem", "rb").read(1)
    out["proc_self_mem"] = 0
except OSError as e:
    out["proc_self_mem"] = -e.errno
json.dump(out, sys.stdout)
`

// probeCall is an item function that runs src in a fresh interpreter and returns its output.
const probeCall = `import subprocess, sys
def f(src):
    p = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=20)
    return p.stdout if p.returncode == 0 else "rc=%d %s" % (p.returncode, p.stderr[-2000:])
`

// probe runs src in a fresh interpreter inside an item and decodes its JSON output.
func (e *Env) probe(src string) map[string]int64 {
	e.T.Helper()
	if runtime.GOARCH != "amd64" {
		e.T.Skip("the kernel probe uses x86_64 system call numbers")
	}
	res := e.Trace(probeCall, fmt.Sprintf("f(%s)", strconv.Quote(src)), sandbox.Limits{WallTime: 30 * time.Second})
	e.want(res, schemas.StatusOK)
	out, err := strconv.Unquote(res.Value)
	if err != nil {
		out = strings.Trim(res.Value, "'")
	}
	var m map[string]int64
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		e.T.Fatalf("probe output %q: %v", res.Value, err)
	}
	return m
}

// checkKernel fails unless the kernel probe's results m show every system call refused, no
// capability, no_new_privs and a seccomp filter.
func (e *Env) checkKernel(m map[string]int64) {
	e.T.Helper()
	for _, name := range []string{"ptrace_attach_init", "ptrace_traceme", "process_vm_readv",
		"process_vm_writev", "pidfd_getfd", "kcmp", "keyctl_session", "add_key", "request_key",
		"unshare_user", "unshare_mount", "setns", "clone_newuser", "mount_tmpfs", "umount_proc",
		"bpf", "perf_event_open", "io_uring_setup", "userfaultfd", "kexec_load", "init_module",
		"finit_module", "memfd_create", "socket_netlink", "socket_packet", "x32_getpid", "proc_self_mem"} {
		v, ok := m[name]
		if !ok {
			e.T.Errorf("%s: not probed", name)
		} else if v >= 0 {
			e.T.Errorf("%s succeeded (%d) inside the sandbox", name, v)
		}
	}
	if m["caps"] != 0 || m["bounding"] != 0 {
		e.T.Errorf("traced code holds capabilities: effective/permitted/inheritable sum %d, %d in the bounding set", m["caps"], m["bounding"])
	}
	if m["no_new_privs"] != 1 || m["seccomp_mode"] != 2 {
		e.T.Errorf("no_new_privs %d, seccomp mode %d; want 1 and 2 (filter)", m["no_new_privs"], m["seccomp_mode"])
	}
}

var attackCases = []testCase{
	{"kernel_surface", func(e *Env) { e.checkKernel(e.probe(kernelProbe)) }},
	{"supervisor_unreachable", func(e *Env) {
		// What of the supervisor an item can name: its PID namespace holds only its own init and
		// itself; no descriptor but its own four; no /proc file of any process.
		res := e.Trace(`import os, signal
def f():
    out = {"pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
           "me": os.getpid(), "parent": os.getppid(),
           "fds": sorted(int(x) for x in os.listdir("/proc/self/fd"))}
    for path in ("/proc/1/mem", "/proc/self/mem", "/proc/1/environ", "/proc/self/status", "/proc/1/fd/3"):
        try:
            open(path, "rb").read(1)
            out[path] = "read"
        except OSError as e:
            out[path] = type(e).__name__
    alive = []
    for pid in range(3, 4096):
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            alive.append(pid)
        except OSError:
            pass
    out["others"] = alive
    return out
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		if strings.Contains(res.Value, "'read'") {
			e.T.Errorf("an item read a /proc file of a process: %s", res.Value)
		}
		for _, want := range []string{"'pids': [1, 2]", "'me': 2", "'parent': 1", "'others': []", "'fds': [0, 1, 2, 3"} {
			if !strings.Contains(res.Value, want) {
				e.T.Errorf("item's view of its processes and descriptors: %s, want %s", res.Value, want)
			}
		}
	}},
	{"no_residue", func(e *Env) {
		// An item's code and inputs never reach the zygote, so no later item (a fork of it)
		// inherits them: the zygote's whole memory must not contain them.
		secret := fmt.Sprintf("ndtrace-residue-%d-%d", os.Getpid(), time.Now().UnixNano())
		res := e.Trace(fmt.Sprintf("SECRET = %q\ndef f(x):\n    return len(SECRET + x)\n", secret),
			fmt.Sprintf("f(%q)", secret+"-input"), sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		zs := zygotes()
		if len(zs) == 0 {
			e.T.Fatal("no zygote found among this process's descendants")
		}
		checked := 0
		for _, z := range zs {
			found, ok, err := memoryContains(z, []byte(secret))
			if err != nil {
				e.T.Fatalf("reading the memory of zygote %d: %v", z, err)
			}
			if !ok {
				continue
			}
			checked++
			if found {
				e.T.Fatalf("zygote %d holds an earlier item's code or input in its memory", z)
			}
		}
		if checked == 0 {
			e.T.Skipf("reading a zygote's memory needs ptrace rights over it (uid %d lacks them); the item-side checks still ran", os.Getuid())
		}
	}},
	{"mount_locked", func(e *Env) {
		// A read-only mount stays read-only: the item's user namespace owns no mount, it has no
		// capability, and mount/umount are filtered.
		if e.RO == "" {
			e.T.Skip("no read-only mount in this sandbox")
		}
		probe := fmt.Sprintf(`
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
out = {}
ctypes.set_errno(0)
out["remount_rw"] = libc.mount(None, %q.encode(), None, 32 | 4096, None) and -ctypes.get_errno()
ctypes.set_errno(0)
out["umount"] = libc.umount2(%q.encode(), 2) and -ctypes.get_errno()
try:
    open(os.path.join(%q, "written-by-item"), "w").write("x")
    out["write"] = 0
except OSError as e:
    out["write"] = -e.errno
json.dump(out, sys.stdout)
`, e.RO, e.RO, e.RO)
		m := e.probe(probe)
		for k, v := range m {
			if v >= 0 {
				e.T.Errorf("%s on the read-only mount %s succeeded", k, e.RO)
			}
		}
		if _, err := os.Stat(filepath.Join(e.RO, "written-by-item")); err == nil {
			e.T.Fatalf("the item wrote into the host's read-only directory %s", e.RO)
		}
	}},
	{"ipc_bounded", func(e *Env) {
		// System V IPC lives in the item's own IPC namespace, capped, and dies with it.
		m := e.probe(`
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
out = {}
ctypes.set_errno(0)
out["shm_3g"] = libc.shmget(0, 3 << 30, 0o1600) if True else 0
if out["shm_3g"] < 0: out["shm_3g"] = -ctypes.get_errno()
ids = []
for i in range(100):
    r = libc.shmget(0, 8 << 20, 0o1600)
    if r < 0:
        break
    ids.append(r)
out["shm_8m_segments"] = len(ids)
# A segment that is detached is gone (shm_rmid_forced): attach, detach, attach again fails.
if ids:
    p = libc.shmat(ids[0], None, 0)
    libc.shmdt(ctypes.c_void_p(p))
    ctypes.set_errno(0)
    p2 = libc.shmat(ids[0], None, 0)
    out["reattach"] = -ctypes.get_errno() if p2 in (None, 2**64 - 1) else 0
queues = 0
for i in range(64):
    if libc.msgget(0, 0o1600) < 0:
        break
    queues += 1
out["msg_queues"] = queues
json.dump(out, sys.stdout)
`)
		if m["shm_3g"] >= 0 {
			e.T.Errorf("a 3 GB System V segment was created")
		}
		if m["shm_8m_segments"] > 2 {
			e.T.Errorf("%d segments of 8 MB: more shared memory than ShmBytes", m["shm_8m_segments"])
		}
		if m["reattach"] >= 0 {
			e.T.Errorf("a detached segment outlived its last attachment (reattach %d)", m["reattach"])
		}
		if m["msg_queues"] > 16 {
			e.T.Errorf("%d message queues, want at most 16", m["msg_queues"])
		}
	}},
	{"shm_per_item", func(e *Env) {
		res := e.Trace(`import os
def f():
    n = 0
    try:
        with open("/dev/shm/fill", "wb") as fh:
            for _ in range(256):
                fh.write(b"\0" * (1 << 20))
                fh.flush()
                n += 1
    except OSError as e:
        return n, type(e).__name__
    return n, "no limit"
`, "f()", sandbox.Limits{})
		e.want(res, schemas.StatusOK)
		if strings.Contains(res.Value, "no limit") {
			e.T.Fatalf("/dev/shm took %s MB", res.Value)
		}
		next := e.Trace("import os\ndef f():\n    return os.listdir('/dev/shm'), os.listdir('/tmp')\n", "f()", sandbox.Limits{})
		if next.Value != "([], [])" {
			e.T.Fatalf("/dev/shm or /tmp kept an earlier item's files: %s", next.Value)
		}
	}},
	{"processes_bounded", func(e *Env) {
		// Several children each under RLIMIT_AS: the item as a whole holds at most
		// Processes x AddressSpace (or its cgroup's memory.max): forks past Processes fail.
		res := e.Trace(`import os, time
def f():
    kids = []
    for i in range(12):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            try:
                b = bytearray(150 << 20)
                for j in range(0, len(b), 4096):
                    b[j] = 1
                time.sleep(3)
            finally:
                os._exit(0)
        kids.append(pid)
    n = len(kids)
    for pid in kids:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    return n
`, "f()", sandbox.Limits{Processes: 4, AddressSpace: 512 << 20, WallTime: 20 * time.Second})
		e.want(res, schemas.StatusOK)
		if n, _ := strconv.Atoi(res.Value); n > 3 {
			e.T.Fatalf("%d children of 150 MB each alongside the item, want at most Processes-1 = 3", n)
		}
	}},
	{"cgroup_item", func(e *Env) {
		// With a delegated cgroup v2 (or a writable cgroup v1 memory controller) the item as a
		// whole is bounded: several children that each stay under RLIMIT_AS still cannot hold
		// more than Limits.Memory together.
		if e.SB.Info().Cgroup == "" {
			_, err := cgroup.Detect()
			_, err1 := cgroup.DetectV1()
			e.T.Skipf("cgroup v2 with the memory and pids controllers is not delegated to this worker (%v), nor is a cgroup v1 memory controller writable (%v): items are bounded by rlimits (processes_bounded, forked_memory)", err, err1)
		}
		res := e.Trace(`import os, time
def f():
    kids = []
    for i in range(6):
        pid = os.fork()
        if pid == 0:
            b = bytearray(100 << 20)
            for j in range(0, len(b), 4096):
                b[j] = 1
            time.sleep(5)
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
    return len(kids)
`, "f()", sandbox.Limits{Memory: 256 << 20, Processes: 16, AddressSpace: 1 << 30, WallTime: 20 * time.Second})
		e.want(res, schemas.StatusMemory)
	}},
	{"forked_memory", func(e *Env) {
		// Issue 26: five forked children of one item each commit (touch) memory. The item as a
		// whole stays within Limits.Memory however its memory is bounded: with a cgroup (v2, or
		// v1 where memory is bound to it) the OOM killer ends it as memory; with rlimits alone
		// RLIMIT_NPROC x RLIMIT_AS is lowered to the limit, so forks or allocations are refused
		// and what the item's live processes hold together stays within it.
		// 5 x 300 MiB is more than the 1 GiB limit; without a cgroup the item gets 4 processes of
		// 256 MiB (rlimitProduct): one fork and every child's allocations past its share refused.
		const memory, child = 1 << 30, 300 << 20
		res := e.Trace(ForkedMemoryCode, fmt.Sprintf("f(5, %d)", child),
			sandbox.Limits{Memory: memory, Processes: 8, AddressSpace: 1 << 30, WallTime: 60 * time.Second, CPUTime: 60 * time.Second})
		mode := e.SB.Info().Memory
		e.T.Logf("memory bounded by %s: status %s (%s), value %s", mode, res.Status, res.Detail, res.Value)
		switch mode {
		case sandbox.MemoryCgroup2, sandbox.MemoryCgroup1:
			// 5 x 300 MiB cannot fit in 1 GiB and nothing else stops the children: an OOM kill.
			e.want(res, schemas.StatusMemory)
			if !strings.Contains(res.Detail, "memory limit") {
				e.T.Errorf("detail %q does not name the item's memory limit", res.Detail)
			}
		case sandbox.MemoryRlimits:
			// No OOM killer acts here (the children are refused, never killed): every child that
			// reported is alive and holds what it reported.
			e.want(res, schemas.StatusOK)
			var held struct{ Kids, Held, Parent int64 }
			if err := json.Unmarshal([]byte(strings.Trim(res.Value, "'")), &held); err != nil {
				e.T.Fatalf("value %s: %v", res.Value, err)
			}
			if total := held.Held + held.Parent; total > memory {
				e.T.Fatalf("the item's processes held %d MiB together (%d children), over its %d MiB memory limit",
					total>>20, held.Kids, memory>>20)
			}
		default:
			e.T.Fatalf("Info().Memory = %q, want one of %s, %s, %s", mode, sandbox.MemoryCgroup2, sandbox.MemoryCgroup1, sandbox.MemoryRlimits)
		}
		next := e.Trace("def f():\n    return 42\n", "f()", sandbox.Limits{})
		e.want(next, schemas.StatusOK)
	}},
	{"keyring", func(e *Env) {
		// The worker's session keyring is out of reach: keyctl is filtered, and every sandbox
		// joins a fresh session keyring anyway.
		if _, err := unix.AddKey("user", "ndtrace-test-secret", []byte("k3y"), unix.KEY_SPEC_SESSION_KEYRING); err != nil {
			e.T.Logf("no session key added (%v); the probe still runs", err)
		}
		m := e.probe(`
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(*a):
    ctypes.set_errno(0)
    r = libc.syscall(*[ctypes.c_long(x) for x in a])
    return r if r >= 0 else -ctypes.get_errno()
out = {"session": sc(250, 0, -3, 0), "user": sc(250, 0, -4, 0),
       "search": sc(250, 10, -3, ctypes.addressof(ctypes.create_string_buffer(b"user")), ctypes.addressof(ctypes.create_string_buffer(b"ndtrace-test-secret")), 0)}
json.dump(out, sys.stdout)
`)
		for k, v := range m {
			if v >= 0 {
				e.T.Errorf("keyctl %s succeeded (%d)", k, v)
			}
		}
	}},
}
