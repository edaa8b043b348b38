package seccomp

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"
)

// childEnv selects what the re-executed test binary does under the filter.
const childEnv = "NDTRACE_SECCOMP_CHILD"

const python = "/usr/bin/python3"

func TestMain(m *testing.M) {
	switch mode := os.Getenv(childEnv); mode {
	case "":
		os.Exit(m.Run())
	default:
		if err := child(mode); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
}

// child installs the filter, then runs the probes and prints their results
// as JSON ("probes"), or runs Python ("python").
func child(mode string) error {
	if err := install(true); err != nil {
		return err
	}
	switch mode {
	case "probes":
		results := make(map[string]string)
		for _, p := range probes() {
			results[p.name] = errString(p.run())
		}
		return json.NewEncoder(os.Stdout).Encode(results)
	case "python":
		args := append([]string{python, "-c", pythonScript}, strings.Fields(os.Getenv("NDTRACE_SECCOMP_ARGS"))...)
		return fmt.Errorf("exec %s: %w", python, unix.Exec(python, args, os.Environ()))
	}
	return fmt.Errorf("unknown child mode %q", mode)
}

// install sets no_new_privs and installs Program on the calling thread and,
// with tsync, on every other thread of the process too
// (SECCOMP_FILTER_FLAG_TSYNC). The caller's goroutine stays locked to its
// thread.
func install(tsync bool) error {
	prog, err := Program()
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(prog)/8)
	for i := range filter {
		b := prog[8*i:]
		filter[i] = unix.SockFilter{Code: binary.NativeEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.NativeEndian.Uint32(b[4:])}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	// no_new_privs and the filter apply to the calling thread; TSYNC
	// extends both to the process's other threads.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	var flags uintptr
	if tsync {
		flags = unix.SECCOMP_FILTER_FLAG_TSYNC
	}
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): %w", errno)
	}
	if tid != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): thread %d could not be synchronized", tid)
	}
	return nil
}

func errString(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

// probe is one attempt the child makes under the filter; want is "ok" or the
// name of the errno it must fail with.
type probe struct {
	name string
	want string
	run  func() error
}

// sys makes a raw syscall by name (unix.ENOSYS for a name the architecture
// does not have).
func sys(name string, args ...uintptr) func() error {
	return func() error {
		info, err := arch.GetInfo("")
		if err != nil {
			return err
		}
		n, ok := info.SyscallNames[name]
		if !ok {
			return unix.ENOSYS
		}
		var a [6]uintptr
		copy(a[:], args)
		if _, _, errno := unix.Syscall6(uintptr(n), a[0], a[1], a[2], a[3], a[4], a[5]); errno != 0 {
			return errno
		}
		return nil
	}
}

const bad = ^uintptr(0) // an invalid file descriptor or pointer

// deniedArgs are arguments that make the kernel refuse a denied syscall, or
// do no harm, should it get through the filter; the others get zeros.
var deniedArgs = map[string][]uintptr{
	"unshare":           {unix.CLONE_NEWUSER},
	"kexec_load":        {0, 1 << 20, 0, 0x8000},  // too many segments, unknown flag
	"kexec_file_load":   {bad, bad, 0, 0, 0x8000}, // unknown flag
	"finit_module":      {bad},                    // EBADF
	"acct":              {1},                      // EFAULT; NULL would switch accounting off
	"setns":             {bad},
	"pidfd_getfd":       {bad},
	"io_uring_enter":    {bad},
	"io_uring_register": {bad},
}

func probes() []probe {
	var ps []probe
	for _, name := range Denied() {
		ps = append(ps, probe{name, "EPERM", sys(name, deniedArgs[name]...)})
	}
	// clone with CLONE_SIGHAND but not CLONE_VM: EINVAL if the filter lets it
	// through, so nothing is ever cloned.
	ps = append(ps, probe{"clone(CLONE_SIGHAND)", "EINVAL", sys("clone", unix.CLONE_SIGHAND)})
	for _, f := range []struct {
		name string
		flag uintptr
	}{
		{"CLONE_NEWNS", unix.CLONE_NEWNS}, {"CLONE_NEWUTS", unix.CLONE_NEWUTS}, {"CLONE_NEWIPC", unix.CLONE_NEWIPC},
		{"CLONE_NEWUSER", unix.CLONE_NEWUSER}, {"CLONE_NEWPID", unix.CLONE_NEWPID}, {"CLONE_NEWNET", unix.CLONE_NEWNET},
		{"CLONE_NEWCGROUP", unix.CLONE_NEWCGROUP}, {"CLONE_NEWTIME", unix.CLONE_NEWTIME},
	} {
		ps = append(ps, probe{"clone(" + f.name + ")", "EPERM", sys("clone", f.flag|unix.CLONE_SIGHAND)})
	}
	socket := func(family, typ uintptr) func() error {
		return func() error {
			fd, _, errno := unix.Syscall(unix.SYS_SOCKET, family, typ, 0)
			if errno != 0 {
				return errno
			}
			return unix.Close(int(fd))
		}
	}
	ps = append(ps,
		probe{"clone3", "ENOSYS", sys("clone3")},
		probe{"socket(AF_NETLINK)", "EPERM", socket(unix.AF_NETLINK, unix.SOCK_RAW)},
		probe{"socket(AF_PACKET)", "EPERM", socket(unix.AF_PACKET, unix.SOCK_RAW)},
		probe{"socket(AF_ALG)", "EPERM", socket(unix.AF_ALG, unix.SOCK_SEQPACKET)},
		probe{"socket(AF_VSOCK)", "EPERM", socket(unix.AF_VSOCK, unix.SOCK_STREAM)},
		probe{"socket(AF_UNIX)", "ok", socket(unix.AF_UNIX, unix.SOCK_STREAM)},
		probe{"socket(AF_INET)", "ok", socket(unix.AF_INET, unix.SOCK_STREAM)},
		probe{"personality(query)", "ok", sys("personality", 0xffffffff)},
		probe{"personality(ADDR_NO_RANDOMIZE)", "EPERM", sys("personality", 0x0040000)},
		probe{"getpid", "ok", func() error { _ = unix.Getpid(); return nil }},
		probe{"read /proc/self/status", "ok", func() error {
			b, err := os.ReadFile("/proc/self/status")
			if err == nil && !bytes.Contains(b, []byte("\nSeccomp:\t2\n")) {
				return errors.New("not in seccomp filter mode")
			}
			return err
		}},
		probe{"pipe", "ok", func() error {
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
				return err
			}
			defer unix.Close(p[0])
			defer unix.Close(p[1])
			if _, err := unix.Write(p[1], []byte("x")); err != nil {
				return err
			}
			_, err := unix.Read(p[0], make([]byte, 1))
			return err
		}},
		probe{"mmap", "ok", func() error {
			b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				return err
			}
			b[0] = 1
			if err := unix.Mprotect(b, unix.PROT_READ); err != nil {
				return err
			}
			return unix.Munmap(b)
		}},
		probe{"fork+exec /bin/true", "ok", func() error {
			pid, err := syscall.ForkExec("/bin/true", []string{"true"}, nil)
			if err != nil {
				return err
			}
			var ws unix.WaitStatus
			if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
				return err
			}
			if ws.ExitStatus() != 0 {
				return fmt.Errorf("exit status %d", ws.ExitStatus())
			}
			return nil
		}},
		probe{"threads", "ok", func() error {
			// Goroutines locked to their threads at once need new
			// threads; leaving locked ends them.
			const n = 16
			var wg sync.WaitGroup
			tids := make(chan int, n)
			release := make(chan struct{})
			for range n {
				wg.Go(func() {
					runtime.LockOSThread()
					tids <- unix.Gettid()
					<-release
				})
			}
			seen := make(map[int]bool)
			for range n {
				seen[<-tids] = true
			}
			close(release)
			wg.Wait()
			if len(seen) != n {
				return fmt.Errorf("%d threads, want %d", len(seen), n)
			}
			return nil
		}},
		probe{"getrandom", "ok", func() error { _, err := unix.Getrandom(make([]byte, 16), 0); return err }},
		probe{"prlimit", "ok", func() error {
			return unix.Prlimit(0, unix.RLIMIT_CORE, &unix.Rlimit{}, nil)
		}},
		probe{"prctl", "ok", func() error {
			nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
			if err == nil && nnp != 1 {
				return errors.New("no_new_privs not set")
			}
			return err
		}},
		probe{"seccomp (a stricter filter)", "ok", func() error {
			errc := make(chan error)
			// The thread ends with its goroutine, locked.
			go func() { errc <- install(false) }()
			return <-errc
		}},
	)
	if unsafe.Sizeof(uintptr(0)) == 8 {
		// The kernel reads the family as an int: this is AF_ALG too.
		hi := uint64(1) << 32
		ps = append(ps, probe{"socket(AF_ALG|1<<32)", "EPERM", socket(uintptr(unix.AF_ALG|hi), unix.SOCK_SEQPACKET)})
	}
	if runtime.GOARCH == "amd64" {
		// x32 ABI: the kernel here may lack it (ENOSYS either way); the
		// filter's own answer is checked in TestDecisions.
		ps = append(ps, probe{"getpid (x32)", "ENOSYS", func() error {
			_, _, errno := unix.RawSyscall(unix.SYS_GETPID|0x40000000, 0, 0, 0)
			if errno != 0 {
				return errno
			}
			return nil
		}})
	}
	return ps
}

func runChild(t *testing.T, mode string, env ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, childEnv+"="+mode)...)
	// Its own session: vhangup has no terminal to hang up should it get through.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child %s: %v\n%s", mode, err, stderr.Bytes())
	}
	return out
}

// TestKernel installs the filter in a child process and checks what the
// kernel lets it do.
func TestKernel(t *testing.T) {
	var results map[string]string
	if err := json.Unmarshal(runChild(t, "probes"), &results); err != nil {
		t.Fatal(err)
	}
	for _, p := range probes() {
		t.Run(p.name, func(t *testing.T) {
			if got := results[p.name]; got != p.want {
				t.Errorf("got %s, want %s", got, p.want)
			}
		})
	}
}

// pythonScript is what CPython runs under the filter; its output is a JSON
// object. With the argument "int80" it also calls getpid through the i386
// ABI (int 0x80) from executable memory.
const pythonScript = `
import ctypes, errno, json, mmap, os, socket, subprocess, sys, threading

def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]

out = {"returncode": subprocess.run(["/bin/true"]).returncode}
tids = []
t = threading.Thread(target=lambda: tids.append(threading.get_native_id()))
t.start()
t.join()
out["thread"] = len(tids) == 1 and tids[0] != threading.get_native_id()
pid = os.fork()
if pid == 0:
    os._exit(7)
out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
out["unix"] = attempt(lambda: socket.socket(socket.AF_UNIX).close())
out["inet"] = attempt(lambda: socket.socket(socket.AF_INET).close())
out["netlink"] = attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close())
out["memfd"] = attempt(lambda: os.close(os.memfd_create("x")))
if "int80" in sys.argv:
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3]))  # mov eax, 20 (getpid); int 0x80; ret
    r = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))()
    out["int80"] = "pid" if r == os.getpid() else errno.errorcode.get(-r, str(r))
print(json.dumps(out))
`

// TestPython runs CPython under the filter.
func TestPython(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip(err)
	}
	want := map[string]any{
		"returncode": 0.0, "thread": true, "fork": 7.0,
		"unix": "ok", "inet": "ok", "netlink": "EPERM", "memfd": "EPERM",
	}
	// Without the filter, does int 0x80 reach the kernel's i386 ABI here?
	var args string
	if runtime.GOARCH == "amd64" {
		out, err := exec.Command(python, "-c", pythonScript, "int80").Output()
		var control map[string]any
		if err == nil && json.Unmarshal(out, &control) == nil && control["int80"] == "pid" {
			args = "int80"
			want["int80"] = "EPERM"
		} else {
			t.Logf("no i386 syscalls here (%v): not checked", err)
		}
	}
	var got map[string]any
	out := runChild(t, "python", "NDTRACE_SECCOMP_ARGS="+args)
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
}
