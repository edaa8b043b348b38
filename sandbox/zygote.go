package sandbox

import (
	"bytes"
	"context"
	"embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ndtrace/ndtrace/sandbox/cgroup"
	"github.com/ndtrace/ndtrace/sandbox/seccomp"
)

// tracerFiles are the tracer's Python files (sandbox/tracer/: the zygote, the item's processes,
// the C tracer's driver, the test runners, the replay driver), in the one order the zygote's -c
// program joins them before it compiles them, as one module (docs/sandbox.md, "The tracer's
// files"). Every file of sandbox/tracer/ is listed exactly once, or the package does not load.
var tracerFiles = [...]string{"common.py", "ctracer.py", "item.py", "replay.py", "testrun.py", "runners.py", "generate.py", "zygote.py"}

//go:embed tracer/*.py
var tracerFS embed.FS

// tracerParts holds the source of each of tracerFiles, in that order; the support directory of
// every zygote gets them as they are here.
var tracerParts = loadTracerParts(tracerFS)

// TracerVersion identifies the tracer's behaviour; it changes whenever its output could.
const TracerVersion = "9"

// tracerBootstrap is the interpreter's -c program: it joins the tracer's files in the support
// directory, in tracerFiles' order, and compiles them as one module under the name -c gives
// ("<string>", which the tracer's checks of frames rely on). The source itself is not an
// argument: the kernel bounds one argument at 128 KiB (MAX_ARG_STRLEN), and a tracer that
// outgrew it would stop every sandbox from starting.
var tracerBootstrap = bootstrapFor(supportMount)

// loadTracerParts reads tracerFiles from fsys's tracer/ folder and checks them: no file of the
// folder left out of tracerFiles or listed twice, and each part a whole number of lines, so that
// no statement runs across the border of two parts once they are joined.
func loadTracerParts(fsys fs.FS) []string {
	entries, err := fs.ReadDir(fsys, "tracer")
	if err != nil {
		panic(fmt.Sprintf("sandbox: tracer files: %v", err))
	}
	listed := map[string]bool{}
	for _, name := range tracerFiles {
		if listed[name] || strings.ContainsAny(name, `'\/`) || !strings.HasSuffix(name, ".py") {
			panic(fmt.Sprintf("sandbox: tracer file %q listed twice or not a plain .py name", name))
		}
		listed[name] = true
	}
	for _, e := range entries {
		if !listed[e.Name()] {
			panic(fmt.Sprintf("sandbox: sandbox/tracer/%s is not in tracerFiles", e.Name()))
		}
	}
	parts := make([]string, len(tracerFiles))
	for i, name := range tracerFiles {
		b, err := fs.ReadFile(fsys, "tracer/"+name)
		if err != nil || len(b) == 0 || b[len(b)-1] != '\n' {
			panic(fmt.Sprintf("sandbox: tracer file %s: missing, empty or not ending with a newline (%v)", name, err))
		}
		parts[i] = string(b)
	}
	return parts
}

// bootstrapFor is the -c program that runs the tracer from the files of tracerFiles in dir.
// It holds no code object but its own (a list, not a generator expression: the tracer trusts
// whatever code the bootstrap's holds).
func bootstrapFor(dir string) string {
	if strings.ContainsAny(dir, "'\\\n") {
		panic(fmt.Sprintf("sandbox: tracer directory %q", dir))
	}
	var b strings.Builder
	b.WriteString("exec(compile(b''.join([")
	for i, name := range tracerFiles {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("open('" + dir + "/" + name + "', 'rb').read()")
	}
	b.WriteString("]), '<string>', 'exec'))")
	return b.String()
}

// tracerSource is the tracer's files joined as the bootstrap joins them (tests).
func tracerSource() string {
	return strings.Join(tracerParts, "")
}

// sandboxEnv is the whole environment of the sandboxed interpreter.
var sandboxEnv = []string{
	"PYTHONHASHSEED=0", "PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp", "TMPDIR=/tmp",
	"PYTHONDONTWRITEBYTECODE=1", "PYTHONIOENCODING=utf-8", "OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1",
}

// maxFrame bounds one control message.
const maxFrame = 64 << 20

// zygote is one running sandbox: the isolated interpreter that forks a child per run.
type zygote struct {
	cmd    *exec.Cmd
	ctrl   *net.UnixConn
	msgs   chan ctrlMsg  // messages from the zygote; closed when the connection ends
	exited chan struct{} // closed when the process has been waited for
	stderr *capBuffer
	python string
	// landlock is the Landlock ABI the items are confined with (0: none, and no /proc).
	landlock int
	// cg is the sandbox's cgroup, v2 or v1 (nil: the rlimit fallback); cgLimits its item limits now.
	cg       itemGroup
	cgLimits cgroup.Limits
	cleanup  []func()
	runs     int
}

// ctrlMsg is any message from the zygote; fields are filled by op.
type ctrlMsg struct {
	Op       string `json:"op"`
	ID       int64  `json:"id"`
	Python   string `json:"python"`
	Landlock int    `json:"landlock"`
	Message  string `json:"message"`
	Reason   string `json:"reason"`
	ExitCode *int   `json:"exit_code"`
	Signal   *int   `json:"signal"`
	WallMS   int64  `json:"wall_ms"`
	CPUMS    int64  `json:"cpu_ms"`
	MaxRSSKB int64  `json:"max_rss_kb"`
	Clean    *bool  `json:"clean"`
}

// startZygote starts the interpreter under backend b and waits for its ready message.
func startZygote(ctx context.Context, b Backend, cfg Config) (*zygote, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "ctrl")
	theirs := os.NewFile(uintptr(fds[1]), "ctrl-zygote")
	defer theirs.Close()
	conn, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ro, err := readOnlyPaths(cfg.Python, cfg.sameMounts())
	if err != nil {
		conn.Close()
		return nil, err
	}
	// The interpreter sees the binds at their own paths (Config.Binds), and every path below
	// one there.
	in := cfg.insideConfig()
	support, err := newSupportDir()
	if err != nil {
		conn.Close()
		return nil, err
	}
	args := []string{"-s", "-B", "-P", "-c", tracerBootstrap, "--ctrl-fd", "3", "--support", supportMount,
		"--tmp-bytes", strconv.FormatInt(cfg.TmpBytes, 10), "--shm-bytes", strconv.FormatInt(cfg.ShmBytes, 10)}
	for _, p := range ro {
		args = append(args, "--ro", p)
	}
	for _, b := range cfg.Binds {
		args = append(args, "--ro", b.At)
	}
	// Bytecode (.pyc) loads only from the interpreter's own directories and Config.PythonPath:
	// never from Config.ReadOnly (a repository's checkout is the attacker's to write, and
	// CPython does not verify bytecode), not even from a PythonPath directory inside one.
	pycRoots, _ := readOnlyPaths(cfg.Python, nil)
	for _, p := range append(pycRoots, in.pycPythonPath()...) {
		args = append(args, "--pyc-root", filepath.Clean(p))
	}
	// Extension modules (native code) load only from the standard library's own directory (the
	// zygote adds it) and the configured mounts: never from the interpreter's third-party
	// directories, whose modules may hand Python raw memory (docs/sandbox.md).
	for _, p := range in.mounts() {
		args = append(args, "--ext-root", filepath.Clean(p))
	}
	for _, what := range simulate {
		args = append(args, "--simulate", what)
	}
	cg, cgDir, itemProcs, err := newCgroup(cfg)
	if err != nil {
		conn.Close()
		os.RemoveAll(support)
		return nil, err
	}
	for i := range itemProcs {
		args = append(args, "--cgroup-fd", strconv.Itoa(4+i))
	}
	l := &Launch{
		Python:    cfg.Python,
		CgroupDir: cgDir,
		ItemProcs: itemProcs,
		Args:      args,
		Env:       sandboxEnv,
		ReadOnly:  ro,
		Binds:     cfg.Binds,
		Support:   support,
		TmpBytes:  cfg.TmpBytes,
		Ctrl:      theirs,
		Cleanup: []func(){func() {
			os.RemoveAll(support)
			if cg != nil {
				cg.Close()
			}
		}},
	}
	// The sandbox holds its own copies: the group's handles are needed only to start it.
	defer func() {
		if cgDir != nil {
			cgDir.Close()
		}
		for _, f := range itemProcs {
			f.Close()
		}
	}()
	cmd, err := b.Command(l)
	if err != nil {
		conn.Close()
		runAll(l.Cleanup)
		return nil, fmt.Errorf("%s backend: %w", b.Name(), err)
	}
	z := &zygote{cmd: cmd, ctrl: conn.(*net.UnixConn), msgs: make(chan ctrlMsg, 4),
		exited: make(chan struct{}), stderr: &capBuffer{max: 64 << 10}, cleanup: l.Cleanup,
		cg: cg, cgLimits: cgroupLimits(cfg.Limits)}
	cmd.Stdout = io.Discard
	cmd.Stderr = z.stderr
	// A process the sandbox leaks (it cannot, with a PID namespace) must not hold Wait forever.
	cmd.WaitDelay = 2 * time.Second
	start := cmd.Start
	if cfg.FixedAddresses {
		start = func() error { return startFixedAddresses(cmd) }
	}
	if err := start(); err != nil {
		z.close()
		if b.Name() == "namespaces" && refusedNamespaces(err) {
			return nil, &NamespaceError{Backend: b.Name(), Err: err}
		}
		return nil, fmt.Errorf("start %s sandbox: %w", b.Name(), err)
	}
	go func() {
		_ = cmd.Wait()
		close(z.exited)
	}()
	go z.readLoop()

	timer := time.NewTimer(cfg.StartTimeout)
	defer timer.Stop()
	select {
	case m, ok := <-z.msgs:
		if !ok || m.Op != "ready" {
			z.kill()
			<-z.exited
			return nil, fmt.Errorf("%s sandbox did not start: %s", b.Name(), z.why())
		}
		z.python = m.Python
		z.landlock = m.Landlock
		return z, nil
	case <-z.exited:
		// It died before saying ready (a mount that failed, a missing interpreter): say why now
		// rather than at the start timeout.
		z.kill()
		return nil, fmt.Errorf("%s sandbox did not start: %s", b.Name(), z.why())
	case <-timer.C:
		z.kill()
		return nil, fmt.Errorf("%s sandbox did not start within %v: %s", b.Name(), cfg.StartTimeout, z.why())
	case <-ctx.Done():
		z.kill()
		return nil, ctx.Err()
	}
}

// why describes why the zygote failed, from what it wrote to stderr.
func (z *zygote) why() string {
	<-waitOr(z.exited, time.Second)
	s := bytes.TrimSpace(z.stderr.Bytes())
	if len(s) == 0 {
		if z.cmd.ProcessState != nil {
			return z.cmd.ProcessState.String()
		}
		return "no message"
	}
	if i := bytes.LastIndexByte(s, '\n'); i >= 0 && len(s)-i < 400 {
		// The last line is the one that says what went wrong (a traceback ends with it).
		return string(s[i+1:])
	}
	return string(s)
}

func waitOr(ch <-chan struct{}, d time.Duration) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		select {
		case <-ch:
		case <-time.After(d):
		}
		close(out)
	}()
	return out
}

func (z *zygote) readLoop() {
	defer close(z.msgs)
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(z.ctrl, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > maxFrame {
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(z.ctrl, body); err != nil {
			return
		}
		var m ctrlMsg
		if err := json.Unmarshal(body, &m); err != nil {
			return
		}
		z.msgs <- m
	}
}

// send writes one control message, passing files along with its first byte.
func (z *zygote) send(v any, files ...*os.File) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	hdr := make([]byte, 4)
	binary.BigEndian.PutUint32(hdr, uint32(len(body)))
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = syscall.UnixRights(fds...)
	}
	_ = z.ctrl.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := z.ctrl.WriteMsgUnix(hdr[:1], oob, nil); err != nil {
		return err
	}
	if _, err := z.ctrl.Write(append(hdr[1:], body...)); err != nil {
		return err
	}
	return nil
}

// kill ends the sandbox at once: killing the PID namespace's first process kills all of it.
func (z *zygote) kill() {
	if z.cmd.Process != nil {
		_ = z.cmd.Process.Kill()
	}
}

// close stops the zygote (politely first) and releases everything it holds.
func (z *zygote) close() {
	if z.cmd.Process != nil {
		_ = z.send(map[string]string{"op": "exit"})
		select {
		case <-z.exited:
		case <-time.After(time.Second):
			z.kill()
			<-z.exited
		}
	}
	z.ctrl.Close()
	runAll(z.cleanup)
}

func runAll(fns []func()) {
	for _, f := range fns {
		f()
	}
}

// capBuffer keeps the first max bytes written to it and counts them all.
type capBuffer struct {
	mu    sync.Mutex
	max   int
	buf   bytes.Buffer
	total int64
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}

// Bytes returns a copy of what was kept.
func (c *capBuffer) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes())
}

// Total is how many bytes were written.
func (c *capBuffer) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// supportMount is where every sandbox sees its support directory (read-only): the tracer, the
// native helper and the seccomp program of its items.
const supportMount = "/.ndtrace"

// newSupportDir writes a sandbox's support directory: world-readable, because the sandbox's
// unprivileged uid mounts it. The caller removes it when the sandbox is gone.
func newSupportDir() (string, error) {
	helper, err := nativeHelper()
	if err != nil {
		return "", err
	}
	prog, err := seccomp.Program()
	if err != nil {
		return "", fmt.Errorf("sandbox: seccomp filter: %w", err)
	}
	progNoSysV, err := seccomp.ProgramWithoutSysV()
	if err != nil {
		return "", fmt.Errorf("sandbox: seccomp filter: %w", err)
	}
	lib, err := os.ReadFile(helper)
	if err != nil {
		return "", fmt.Errorf("sandbox: native helper: %w", err)
	}
	dir, err := os.MkdirTemp("", "ndtrace-support-")
	if err != nil {
		return "", fmt.Errorf("sandbox: support directory: %w", err)
	}
	files := map[string][]byte{"_ndtrace_native.so": lib, "seccomp.bpf": prog, "seccomp-nosysv.bpf": progNoSysV}
	for i, name := range tracerFiles {
		files[name] = []byte(tracerParts[i])
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("sandbox: support directory: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("sandbox: support directory: %w", err)
	}
	return dir, nil
}

// simulate makes sandboxes behave as on other machines (tests): "no-landlock" (a kernel without
// Landlock), "ro-sysctl" (sysctls the item's init cannot write).
var simulate []string

// itemPids is what an item needs beyond Limits.Processes in its cgroup: its keeper and its init.
const itemPids = 2

// cgroupLimits are the cgroup limits (v2 or v1) of an item with limits lim.
func cgroupLimits(lim Limits) cgroup.Limits {
	return cgroup.Limits{MemoryBytes: lim.Memory, Pids: lim.Processes + itemPids}
}

// The least an item gets, per process and in processes, when its rlimits are lowered so that
// its processes x address space fit its Memory (rlimitProduct): an interpreter with pytest and
// a few libraries loaded reserves far more address space than it touches (thread stacks,
// malloc arenas, mapped libraries), and RLIMIT_NPROC counts threads too.
const (
	minProductAS    = 256 << 20
	minProductProcs = 8
)

// rlimitProduct returns the RLIMIT_AS and RLIMIT_NPROC of an item whose memory is bounded by
// rlimits alone. RLIMIT_NPROC counts, besides the item's own processes (the only ones under
// RLIMIT_AS, which the item process sets on itself), the item's keeper and init (itemPids: they
// share the user namespace the count is kept in, and run no code of the item's). lim's own limits
// stand when the item's processes x AddressSpace is within Memory. Otherwise the processes are
// lowered first, down to minProductProcs (never more than lim allows), and the address space
// per process is Memory divided by them, but at least minProductAS (never more than
// lim.AddressSpace or Memory itself), with the processes lowered further to keep the product
// within Memory. The result always has as x (nproc - itemPids) <= Memory, nproc - itemPids >= 1.
func rlimitProduct(lim Limits) (as int64, nproc int) {
	as, procs := lim.AddressSpace, int64(max(lim.Processes-itemPids, 1))
	if lim.Memory <= 0 || as <= 0 || lim.Processes <= 0 || as <= lim.Memory/procs {
		return as, lim.Processes
	}
	procs = min(procs, max(minProductProcs, lim.Memory/as))
	as = min(lim.AddressSpace, lim.Memory/procs)
	if as < minProductAS {
		as = min(minProductAS, lim.AddressSpace, lim.Memory)
		procs = max(1, min(procs, lim.Memory/as))
	}
	return as, min(int(procs)+itemPids, lim.Processes)
}

// itemGroup is the cgroup a sandbox's items run in, all of their processes together: a cgroup v2
// sandbox group (*cgroup.Sandbox) or a cgroup v1 one (*cgroup.V1Sandbox).
type itemGroup interface {
	// Dir names the group, for logs.
	Dir() string
	// SetLimits changes the item's limits between items.
	SetLimits(cgroup.Limits) error
	// ResetPeakMemory starts a new peak of the item's memory use.
	ResetPeakMemory() error
	// OOMKills counts the item's processes killed for memory since the group was made.
	OOMKills() (int64, error)
	// Close kills what is left in the group and removes it.
	Close() error
}

// Ways an item's memory is bounded as a whole (Info.Memory; docs/sandbox.md, "Resources").
const (
	// MemoryCgroup2 is cgroup v2 memory.max on the item's group.
	MemoryCgroup2 = "cgroup2"
	// MemoryCgroup1 is cgroup v1 memory.limit_in_bytes (and memsw) on the item's group.
	MemoryCgroup1 = "cgroup1"
	// MemoryRlimits is RLIMIT_NPROC x RLIMIT_AS, lowered to within the item's memory limit.
	MemoryRlimits = "rlimits"
)

var (
	cgroupOnce  sync.Once
	cgroupMgr   *cgroup.Manager
	cgroupV1Mgr *cgroup.V1Manager
)

// cgroupManagers returns the worker's delegated cgroup v2 subtree or, where there is none, its
// writable cgroup v1 memory (and pids) groups; both nil when neither can be used. Which one is in
// force is reported once in the log; without either, items are bounded by rlimits whose product
// is lowered to the item's memory limit (docs/sandbox.md).
func cgroupManagers() (*cgroup.Manager, *cgroup.V1Manager) {
	cgroupOnce.Do(func() {
		m, err := cgroup.Detect()
		if err == nil {
			slog.Info("sandbox: items are bounded by cgroup v2", "group", m.String())
			cgroupMgr = m
			return
		}
		v1, err1 := cgroup.DetectV1()
		if err1 == nil {
			slog.Info("sandbox: no delegated cgroup v2; items are bounded by cgroup v1 (memory.limit_in_bytes per item)",
				"group", v1.String(), "reason", err)
			cgroupV1Mgr = v1
			return
		}
		slog.Info("sandbox: no delegated cgroup v2 nor writable cgroup v1 memory controller; items are bounded by rlimits, processes x address space lowered to the item's memory limit",
			"reason", err, "v1_reason", err1)
	})
	return cgroupMgr, cgroupV1Mgr
}

// newCgroup makes a sandbox's cgroup when cfg asks for one and the worker has a delegated cgroup
// v2 subtree or writable cgroup v1 groups: the directory the zygote starts in (v2 only) and the
// item group's cgroup.procs files.
func newCgroup(cfg Config) (itemGroup, *os.File, []*os.File, error) {
	if cfg.Cgroup == CgroupOff {
		return nil, nil, nil, nil
	}
	m, v1 := cgroupManagers()
	switch {
	case m != nil:
		cg, err := m.NewSandbox(cgroupLimits(cfg.Limits))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("sandbox: %w", err)
		}
		dir, err := cg.SupervisorDir()
		if err != nil {
			cg.Close()
			return nil, nil, nil, fmt.Errorf("sandbox: %w", err)
		}
		procs, err := cg.ItemProcs()
		if err != nil {
			dir.Close()
			cg.Close()
			return nil, nil, nil, fmt.Errorf("sandbox: %w", err)
		}
		return cg, dir, []*os.File{procs}, nil
	case v1 != nil:
		cg, err := v1.NewSandbox(cgroupLimits(cfg.Limits))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("sandbox: %w", err)
		}
		procs, err := cg.ItemProcs()
		if err != nil {
			cg.Close()
			return nil, nil, nil, fmt.Errorf("sandbox: %w", err)
		}
		return cg, nil, procs, nil
	}
	return nil, nil, nil, nil
}

// NamespaceError is a sandbox the kernel would not create the namespaces of: user namespaces are
// not allowed to this process (a chroot; a container whose seccomp or AppArmor profile refuses
// them; user.max_user_namespaces 0; kernel.unprivileged_userns_clone 0 for a non-root worker).
// Nothing can be traced here: there is no unsandboxed fallback.
type NamespaceError struct {
	Backend string
	Err     error
}

func (e *NamespaceError) Error() string {
	return fmt.Sprintf("start %s sandbox: the kernel refused its namespaces: %v", e.Backend, e.Err)
}

func (e *NamespaceError) Unwrap() error { return e.Err }

// refusedNamespaces reports whether starting a process in new namespaces failed because they are
// not allowed (EPERM), or the user namespace limit is reached (ENOSPC, user.max_user_namespaces).
func refusedNamespaces(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOSPC)
}
