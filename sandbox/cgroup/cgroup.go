package cgroup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrUnavailable is wrapped by every error of Detect: the cgroup v2 path cannot be used by this
// process, and the caller falls back to per-process rlimits.
var ErrUnavailable = errors.New("cgroup v2 unavailable")

// ErrNotSupported is wrapped by the errors of Sandbox methods whose interface file the kernel does
// not have (or whose controller the sandbox was made without), for instance ResetPeakMemory before
// Linux 6.12.
var ErrNotSupported = errors.New("not supported by this kernel or sandbox")

const (
	// controllerMemory and controllerPids are the controllers a Sandbox limits its item with.
	controllerMemory = "memory"
	controllerPids   = "pids"

	// WorkerLeaf is the leaf group Detect moves the processes of the delegated group into (the
	// worker's own process among them), so that the group may enable controllers for its children.
	WorkerLeaf = "ndtrace-worker"
	// SandboxPrefix starts the name of every group NewSandbox creates in the delegated group.
	SandboxPrefix = "ndtrace-sb-"
	// SupervisorLeaf is the leaf of a sandbox group for the zygote and its bookkeeping processes.
	SupervisorLeaf = "supervisor"
	// ItemLeaf is the leaf of a sandbox group for the processes of the item being run.
	ItemLeaf = "item"

	// cgroup2SuperMagic is CGROUP2_SUPER_MAGIC, statfs(2)'s f_type of a cgroup2 filesystem.
	cgroup2SuperMagic = 0x63677270
	// access(2) modes, AT_EACCESS and AT_FDCWD, which package syscall does not export.
	accessX   = 0x1
	accessW   = 0x2
	atEAccess = 0x200
	atFDCWD   = -0x64

	// killWait bounds how long Close waits for the sandbox's processes to die and its groups to go.
	killWait = 10 * time.Second
	// maxNameTry bounds NewSandbox's attempts at a fresh group name.
	maxNameTry = 8
)

// Manager is a delegated cgroup v2 subtree the worker may create child groups in: the cgroup v2
// group of the worker process (or, after Detect moved the worker into WorkerLeaf, its parent), with
// the memory and pids controllers enabled for its children. Every file Manager and its Sandboxes
// write is opened through an os.Root on that group's directory, so nothing outside the subtree is
// ever written. Its methods are safe for concurrent use.
type Manager struct {
	dir         string   // absolute path of the delegated group's directory
	mountPoint  string   // the cgroup2 mount it was found through
	cgroupPath  string   // the group's path in the calling process's cgroup namespace
	root        *os.Root // open on dir
	controllers []string // the controllers enabled for children (memory and pids for Detect)
	hierRoot    bool     // dir is the root of the cgroup2 hierarchy (no cgroup.type file)
	moved       bool     // processes of dir live in dir/WorkerLeaf
}

// config is what detect reads and requires; tests ask for other controllers.
type config struct {
	procCgroup string   // /proc/self/cgroup
	mountinfo  string   // /proc/self/mountinfo
	required   []string // controllers that must be available; they are enabled for children
	optional   []string // controllers enabled for children when available
}

// detectMu serializes Detect: preparing the group (moving processes, enabling controllers) is not
// safe against itself.
var detectMu sync.Mutex

// Detect finds the cgroup v2 group of the calling process and prepares it for NewSandbox:
//
//  1. /proc/self/cgroup gives the group's path ("0::/path"), relative to our cgroup namespace; a
//     path outside the namespace ("/../x") is refused.
//  2. /proc/self/mountinfo gives the cgroup2 mounts (anywhere, not necessarily /sys/fs/cgroup); the
//     last one whose root contains the path gives the group's directory, checked with statfs(2)
//     to be cgroup2. If that directory is WorkerLeaf, the process was moved there by an earlier
//     Detect and its parent is the delegated group.
//  3. The group must be a domain group (cgroup.type); list memory and pids in cgroup.controllers;
//     have its directory, cgroup.procs and cgroup.subtree_control writable by the caller's
//     effective credentials (access(2), which also catches read-only mounts); and, if it is a
//     systemd unit's group (*.service, *.scope, *.slice), be marked delegated by systemd
//     (Delegate=yes sets the xattr trusted.delegate or user.delegate): root may write anywhere, but
//     only a delegated subtree is ours to change.
//  4. Unless the group is the root of the hierarchy (exempt from v2's no-internal-process rule), it
//     must hold no processes for controllers to be enabled for its children: Detect creates the
//     leaf WorkerLeaf and moves the caller's own process into it (all of its threads, by writing
//     "0" to WorkerLeaf/cgroup.procs), then every other process of the group it can see (a
//     container's init or shell wrapper, say). Then it writes "+memory +pids" to
//     cgroup.subtree_control, unless they are enabled already.
//
// Every error wraps ErrUnavailable and says precisely why the v2 path cannot be used (no cgroup2
// mount, controllers bound to cgroup v1 or not delegated, group not writable, processes that cannot
// be moved, ...); callers then fall back to rlimits.
func Detect() (*Manager, error) {
	return detect(config{
		procCgroup: "/proc/self/cgroup",
		mountinfo:  "/proc/self/mountinfo",
		required:   []string{controllerMemory, controllerPids},
	})
}

// unavailable returns an error wrapping ErrUnavailable.
func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnavailable}, args...)...)
}

// detect is Detect with the files and controllers of cfg.
func detect(cfg config) (*Manager, error) {
	detectMu.Lock()
	defer detectMu.Unlock()

	data, err := os.ReadFile(cfg.procCgroup)
	if err != nil {
		return nil, unavailable("%v", err)
	}
	pc, err := parseProcCgroup(data)
	if err != nil {
		return nil, unavailable("%s: %v", cfg.procCgroup, err)
	}
	if !pc.HasV2 {
		return nil, unavailable("%s has no cgroup v2 entry (kernel without cgroup v2)", cfg.procCgroup)
	}
	data, err = os.ReadFile(cfg.mountinfo)
	if err != nil {
		return nil, unavailable("%v", err)
	}
	mounts, err := parseMountinfo(data)
	if err != nil {
		return nil, unavailable("%s: %v", cfg.mountinfo, err)
	}
	v1 := v1Mounts(mounts)
	locs, err := locate(pc.V2Path, mounts)
	if err != nil {
		if h := v1Hint(cfg.required, v1); h != "" {
			return nil, unavailable("%v (%s)", err, h)
		}
		return nil, unavailable("%v", err)
	}
	var loc location
	var statErrs []string
	for _, l := range locs {
		var st syscall.Statfs_t
		if err := syscall.Statfs(l.Dir, &st); err != nil {
			statErrs = append(statErrs, fmt.Sprintf("%s: %v", l.Dir, err))
			continue
		}
		if st.Type != cgroup2SuperMagic {
			statErrs = append(statErrs, fmt.Sprintf("%s: not a cgroup2 filesystem (f_type %#x)", l.Dir, st.Type))
			continue
		}
		loc = l
		break
	}
	if loc.Dir == "" {
		return nil, unavailable("our cgroup %s is not reachable: %s", pc.V2Path, strings.Join(statErrs, "; "))
	}
	m := &Manager{dir: loc.Dir, mountPoint: loc.Mount.MountPoint, cgroupPath: pc.V2Path}
	if loc.Rel != "" && path.Base(loc.Rel) == WorkerLeaf {
		// An earlier Detect moved this process into the leaf; path.Dir stays within the mount
		// because Rel is a clean path below the mount root.
		m.dir, m.cgroupPath, m.moved = path.Dir(loc.Dir), path.Dir(pc.V2Path), true
	}
	m.root, err = os.OpenRoot(m.dir)
	if err != nil {
		return nil, unavailable("%v", err)
	}
	if err := m.check(cfg, v1); err != nil {
		m.root.Close()
		return nil, err
	}
	if err := m.prepare(); err != nil {
		m.root.Close()
		return nil, err
	}
	return m, nil
}

// v1Hint says which of the controllers are bound to cgroup v1 hierarchies, for errors.
func v1Hint(controllers []string, v1 map[string]string) string {
	var hints []string
	for _, c := range controllers {
		if mp, ok := v1[c]; ok {
			hints = append(hints, fmt.Sprintf("%s is bound to cgroup v1 at %s", c, mp))
		}
	}
	return strings.Join(hints, ", ")
}

// check verifies the group's type, available controllers, writability and delegation (Detect's
// step 3) and sets m.controllers and m.hierRoot.
func (m *Manager) check(cfg config, v1 map[string]string) error {
	typ, err := m.root.ReadFile("cgroup.type")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		m.hierRoot = true // only the hierarchy's root cgroup lacks cgroup.type
	case err != nil:
		return unavailable("%v", err)
	case strings.TrimSpace(string(typ)) != "domain":
		return unavailable("%s is a %q cgroup, not a domain cgroup", m.dir, strings.TrimSpace(string(typ)))
	}
	data, err := m.root.ReadFile("cgroup.controllers")
	if err != nil {
		return unavailable("%v", err)
	}
	avail := parseControllers(data)
	var missing []string
	for _, c := range cfg.required {
		if !slices.Contains(avail, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		why := "the parent group does not enable them for this group (not delegated)"
		if h := v1Hint(missing, v1); h != "" {
			why = h
		}
		return unavailable("controllers %s not available in %s (cgroup.controllers: %q): %s",
			strings.Join(missing, ", "), m.dir, strings.TrimSpace(string(data)), why)
	}
	m.controllers = slices.Clone(cfg.required)
	for _, c := range cfg.optional {
		if slices.Contains(avail, c) && !slices.Contains(m.controllers, c) {
			m.controllers = append(m.controllers, c)
		}
	}
	for _, c := range []struct {
		name string
		mode uint32
	}{{".", accessW | accessX}, {"cgroup.procs", accessW}, {"cgroup.subtree_control", accessW}} {
		p := path.Join(m.dir, c.name)
		if err := syscall.Faccessat(atFDCWD, p, c.mode, atEAccess); err != nil {
			return unavailable("%s is not writable by uid %d (%v): the group is not delegated to this process",
				p, os.Geteuid(), err)
		}
	}
	if name := path.Base(m.cgroupPath); isSystemdUnit(name) && !delegatedBySystemd(m.dir) {
		return unavailable("%s is the group of systemd unit %s, which is not delegated (Delegate=yes, systemd 251+, sets the xattr trusted.delegate)",
			m.dir, name)
	}
	return nil
}

// isSystemdUnit reports whether a cgroup name is that of a systemd unit, whose group systemd owns.
func isSystemdUnit(name string) bool {
	for _, suffix := range []string{".service", ".scope", ".slice"} {
		if strings.HasSuffix(name, suffix) && len(name) > len(suffix) {
			return true
		}
	}
	return false
}

// delegatedBySystemd reports whether systemd marked the group at dir delegated: since v251 it sets
// trusted.delegate=1 (readable by root) and, since v252, user.delegate=1 on a Delegate=yes unit's
// group.
func delegatedBySystemd(dir string) bool {
	buf := make([]byte, 16)
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		if n, err := syscall.Getxattr(dir, attr, buf); err == nil && string(buf[:n]) == "1" {
			return true
		}
	}
	return false
}

// prepare empties the group of processes, moving them into WorkerLeaf, and enables the controllers
// for its children (Detect's step 4).
func (m *Manager) prepare() error {
	if !m.hierRoot {
		if err := m.evacuate(); err != nil {
			return err
		}
	}
	enabled, err := m.root.ReadFile("cgroup.subtree_control")
	if err != nil {
		return unavailable("%v", err)
	}
	if containsAll(parseControllers(enabled), m.controllers) {
		return nil
	}
	enable := make([]string, len(m.controllers))
	for i, c := range m.controllers {
		enable[i] = "+" + c
	}
	if err := writeFile(m.root, "cgroup.subtree_control", strings.Join(enable, " ")); err != nil {
		if errors.Is(err, syscall.EBUSY) {
			return unavailable("%v: %s still holds processes this process cannot move (outside its PID namespace?)", err, m.dir)
		}
		return unavailable("enable controllers for children of %s: %v", m.dir, err)
	}
	return nil
}

// evacuate moves every process of the group into WorkerLeaf: this process first ("0" moves the
// writer's whole thread group), then the others it can see.
func (m *Manager) evacuate() error {
	pids, err := readPids(m.root, "cgroup.procs")
	if err != nil {
		return unavailable("%v", err)
	}
	if len(pids) == 0 {
		return nil
	}
	if err := m.root.Mkdir(WorkerLeaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return unavailable("create worker leaf: %v", err)
	}
	procs := path.Join(WorkerLeaf, "cgroup.procs")
	if !m.moved {
		if err := writeFile(m.root, procs, "0"); err != nil {
			return unavailable("move this process into %s: %v", path.Join(m.dir, WorkerLeaf), err)
		}
		m.moved = true
	}
	// Processes may fork while they are moved; a few rounds settle it, and enabling the controllers
	// reports whatever is left.
	for round := 0; round < 5; round++ {
		pids, err := readPids(m.root, "cgroup.procs")
		if err != nil {
			return unavailable("%v", err)
		}
		moved := 0
		for _, pid := range pids {
			if pid == 0 {
				continue // outside our PID namespace: cannot be named
			}
			err := writeFile(m.root, procs, strconv.Itoa(pid))
			if err != nil && !errors.Is(err, syscall.ESRCH) {
				return unavailable("move process %d into %s: %v", pid, path.Join(m.dir, WorkerLeaf), err)
			}
			moved++
		}
		if moved == 0 {
			break
		}
	}
	return nil
}

// containsAll reports whether have lists every controller of want.
func containsAll(have, want []string) bool {
	for _, c := range want {
		if !slices.Contains(have, c) {
			return false
		}
	}
	return true
}

// Dir returns the directory of the delegated group sandboxes are created in.
func (m *Manager) Dir() string { return m.dir }

// String describes the manager for logs: the delegated group's directory, its cgroup path, the
// controllers it enables for sandboxes and where the worker process lives.
func (m *Manager) String() string {
	where := "the worker stays in it (hierarchy root)"
	if m.moved {
		where = "worker processes moved to " + WorkerLeaf
	} else if !m.hierRoot {
		where = "it holds no processes"
	}
	return fmt.Sprintf("cgroup v2 group %s (cgroup %s on the cgroup2 mount %s; controllers %s for sandboxes; %s)",
		m.dir, m.cgroupPath, m.mountPoint, strings.Join(m.controllers, "+"), where)
}

// Close releases the Manager's directory handle. Sandboxes made by it stay usable.
func (m *Manager) Close() error { return m.root.Close() }

// Limits bounds one item, all of its processes together.
type Limits struct {
	// MemoryBytes is memory.max of the item group (anonymous memory, page cache, kernel memory of
	// all its processes); 0 means no limit. Swap is disabled for the item (memory.swap.max 0) and
	// an OOM kill takes the whole item (memory.oom.group 1).
	MemoryBytes int64
	// Pids is pids.max of the item group: the number of tasks, threads included, the item may have
	// at once; 0 means no limit. A fork beyond it fails with EAGAIN.
	Pids int
}

// Sandbox is the group of one sandbox: <delegated group>/ndtrace-sb-<unique>/ with the leaves
// SupervisorLeaf (the zygote) and ItemLeaf (the item being run, limited by Limits). Its methods are
// safe for concurrent use.
type Sandbox struct {
	dir         string
	name        string
	parent      *os.Root // the delegated group, to remove the sandbox group
	root        *os.Root // the sandbox group
	controllers []string

	mu             sync.Mutex
	closed         bool
	peak           *os.File // ItemLeaf/memory.peak, kept open: a reset is per open file
	peakResettable bool
}

// nameSeq makes sandbox names unique within the process; the random part across processes.
var nameSeq atomic.Uint64

// NewSandbox creates <root>/ndtrace-sb-<unique>/ with its controllers enabled for its children and
// the leaves SupervisorLeaf and ItemLeaf, and applies limits to ItemLeaf: memory.max,
// memory.swap.max 0 (if the kernel has swap accounting), memory.oom.group 1 (if present) and
// pids.max. On error nothing is left behind.
func (m *Manager) NewSandbox(limits Limits) (*Sandbox, error) {
	if limits.MemoryBytes < 0 || limits.Pids < 0 {
		return nil, fmt.Errorf("cgroup sandbox: negative limits %+v", limits)
	}
	hasMem := slices.Contains(m.controllers, controllerMemory)
	hasPids := slices.Contains(m.controllers, controllerPids)
	if limits.MemoryBytes > 0 && !hasMem || limits.Pids > 0 && !hasPids {
		return nil, fmt.Errorf("cgroup sandbox: limits %+v need controllers this manager lacks (%s): %w",
			limits, strings.Join(m.controllers, " "), ErrNotSupported)
	}
	parent, err := m.root.OpenRoot(".")
	if err != nil {
		return nil, fmt.Errorf("cgroup sandbox: %w", err)
	}
	var name string
	for try := 0; ; try++ {
		var rnd [4]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			parent.Close()
			return nil, fmt.Errorf("cgroup sandbox name: %w", err)
		}
		name = fmt.Sprintf("%s%d-%d-%s", SandboxPrefix, os.Getpid(), nameSeq.Add(1), hex.EncodeToString(rnd[:]))
		err = parent.Mkdir(name, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || try >= maxNameTry {
			parent.Close()
			return nil, fmt.Errorf("cgroup sandbox: %w", err)
		}
	}
	s := &Sandbox{dir: path.Join(m.dir, name), name: name, parent: parent, controllers: slices.Clone(m.controllers)}
	if err := s.setup(limits, hasMem, hasPids); err != nil {
		if s.root == nil {
			parent.Remove(name)
			parent.Close()
		} else {
			s.Close()
		}
		return nil, fmt.Errorf("cgroup sandbox %s: %w", s.dir, err)
	}
	return s, nil
}

// setup fills a freshly created sandbox group.
func (s *Sandbox) setup(limits Limits, hasMem, hasPids bool) error {
	var err error
	if s.root, err = s.parent.OpenRoot(s.name); err != nil {
		return err
	}
	if len(s.controllers) > 0 {
		enable := make([]string, len(s.controllers))
		for i, c := range s.controllers {
			enable[i] = "+" + c
		}
		if err := writeFile(s.root, "cgroup.subtree_control", strings.Join(enable, " ")); err != nil {
			return err
		}
	}
	for _, leaf := range []string{SupervisorLeaf, ItemLeaf} {
		if err := s.root.Mkdir(leaf, 0o755); err != nil {
			return err
		}
	}
	if hasMem {
		for _, opt := range []struct{ file, value string }{{"memory.swap.max", "0"}, {"memory.oom.group", "1"}} {
			err := writeFile(s.root, path.Join(ItemLeaf, opt.file), opt.value)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		s.peak, err = s.root.OpenFile(path.Join(ItemLeaf, "memory.peak"), os.O_RDWR, 0)
		s.peakResettable = err == nil
		if err != nil {
			// Before Linux 6.12 memory.peak is read-only; before 5.19 it does not exist.
			s.peak, err = s.root.OpenFile(path.Join(ItemLeaf, "memory.peak"), os.O_RDONLY, 0)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return s.setLimits(limits)
}

// SetLimits changes the limits of the item group (between items: an item may ask for other
// limits than the sandbox's defaults). A limit of 0 means none.
func (s *Sandbox) SetLimits(limits Limits) error {
	if limits.MemoryBytes < 0 || limits.Pids < 0 {
		return fmt.Errorf("cgroup sandbox: negative limits %+v", limits)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("cgroup sandbox %s: closed", s.dir)
	}
	return s.setLimits(limits)
}

func (s *Sandbox) setLimits(limits Limits) error {
	for _, l := range []struct {
		controller, file string
		value            int64
	}{{controllerMemory, "memory.max", limits.MemoryBytes}, {controllerPids, "pids.max", int64(limits.Pids)}} {
		if !slices.Contains(s.controllers, l.controller) {
			continue
		}
		max := "max"
		if l.value > 0 {
			max = strconv.FormatInt(l.value, 10)
		}
		if err := writeFile(s.root, path.Join(ItemLeaf, l.file), max); err != nil {
			return fmt.Errorf("cgroup sandbox %s: %w", s.dir, err)
		}
	}
	return nil
}

// Dir returns the sandbox group's directory, for logs.
func (s *Sandbox) Dir() string { return s.dir }

// SupervisorDir opens the SupervisorLeaf directory (O_RDONLY|O_DIRECTORY|O_CLOEXEC) for
// syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}: Go then starts the zygote with
// clone3(CLONE_INTO_CGROUP), so it is in the group from its first instruction. The kernel checks
// that the caller may write the leaf's cgroup.procs and that of the common ancestor of its current
// group and the leaf, which a delegated subtree grants. The caller closes f once the process is
// started.
func (s *Sandbox) SupervisorDir() (*os.File, error) {
	f, err := s.root.OpenFile(SupervisorLeaf, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("cgroup sandbox supervisor: %w", err)
	}
	return f, nil
}

// ItemProcs opens ItemLeaf/cgroup.procs for writing, for the zygote (pass it with ExtraFiles): its
// per-item child writes "0" to it to move itself, before anything else, from SupervisorLeaf into
// ItemLeaf; the processes it then forks are born there. Since Linux 5.16 (the CVE-2021-4197 fix)
// the kernel checks such a write against the credentials and cgroup namespace of the file's opener,
// the worker, not of the writer, so it works from inside other user, PID and cgroup namespaces and
// under another uid, and no chown of the groups is needed (older kernels check the writer, which
// then needs write access to the sandbox group's cgroup.procs).
func (s *Sandbox) ItemProcs() (*os.File, error) {
	f, err := s.root.OpenFile(path.Join(ItemLeaf, "cgroup.procs"), os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("cgroup sandbox item: %w", err)
	}
	return f, nil
}

// OOMKills returns the item group's "oom_kill" count of memory.events: the number of its processes
// killed by the OOM killer since the sandbox was made. The caller compares it before and after an
// item to tell whether the item was killed for memory.
func (s *Sandbox) OOMKills() (int64, error) {
	return s.event("memory.events", "oom_kill")
}

// PidsLimitHits returns the item group's "max" count of pids.events: how many forks failed because
// of pids.max since the sandbox was made.
func (s *Sandbox) PidsLimitHits() (int64, error) {
	return s.event("pids.events", "max")
}

// event reads one counter of a flat keyed file of the item group.
func (s *Sandbox) event(file, key string) (int64, error) {
	data, err := s.root.ReadFile(path.Join(ItemLeaf, file))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("cgroup sandbox: %w: %w", err, ErrNotSupported)
	}
	if err != nil {
		return 0, fmt.Errorf("cgroup sandbox: %w", err)
	}
	kv, err := parseFlatKeyed(data)
	if err != nil {
		return 0, fmt.Errorf("cgroup sandbox %s/%s: %w", s.dir, path.Join(ItemLeaf, file), err)
	}
	return kv[key], nil // absent counters have not happened yet
}

// PeakMemory returns memory.peak of the item group: the highest memory use since the last
// ResetPeakMemory, or since the sandbox was made when the kernel cannot reset it (before 6.12). It
// fails with ErrNotSupported before Linux 5.19 (no memory.peak).
func (s *Sandbox) PeakMemory() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.peak == nil {
		return 0, fmt.Errorf("cgroup sandbox: no memory.peak: %w", ErrNotSupported)
	}
	buf := make([]byte, 64)
	n, err := s.peak.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("cgroup sandbox: %w", err)
	}
	v, err := parseSingleInt(buf[:n])
	if err != nil {
		return 0, fmt.Errorf("cgroup sandbox %s: %w", s.peak.Name(), err)
	}
	return v, nil
}

// ResetPeakMemory resets the peak PeakMemory reports to the item group's current use (Linux 6.12+:
// the reset holds for the file the Sandbox keeps open, other readers of memory.peak still see the
// group's lifetime peak). Call it before each item. Older kernels fail with ErrNotSupported.
func (s *Sandbox) ResetPeakMemory() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.peak == nil || !s.peakResettable {
		return fmt.Errorf("cgroup sandbox: memory.peak cannot be reset: %w", ErrNotSupported)
	}
	if _, err := s.peak.WriteAt([]byte("reset\n"), 0); err != nil {
		return fmt.Errorf("cgroup sandbox: reset peak: %w", err)
	}
	return nil
}

// KillItem kills every process of the item group and waits until it is empty, so the next item
// starts with nothing of the last one (its PID namespace dies with its first process anyway, but
// asynchronously).
func (s *Sandbox) KillItem(ctx context.Context) error {
	if err := killGroup(ctx, s.root, ItemLeaf, []string{ItemLeaf}); err != nil {
		return fmt.Errorf("cgroup sandbox %s: %w", s.dir, err)
	}
	return nil
}

// Close kills whatever is left in the sandbox group (cgroup.kill, or SIGKILL to each process
// before Linux 5.14), waits until the group is empty and removes the group and its leaves. The
// caller still reaps the zygote it started (exec.Cmd.Wait). Closing twice is a no-op.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if s.peak != nil {
		errs = append(errs, s.peak.Close())
	}
	ctx, cancel := context.WithTimeout(context.Background(), killWait)
	defer cancel()
	if err := killGroup(ctx, s.root, ".", []string{SupervisorLeaf, ItemLeaf}); err != nil {
		errs = append(errs, err)
	}
	for _, leaf := range []string{ItemLeaf, SupervisorLeaf} {
		if err := removeGroup(ctx, s.root, leaf); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.root.Close())
	if err := removeGroup(ctx, s.parent, s.name); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, s.parent.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cgroup sandbox %s close: %w", s.dir, err)
	}
	return nil
}

// killGroup kills every process of group dir (relative to r) with cgroup.kill, or, where the kernel
// has none, with SIGKILL to each process listed in the cgroup.procs of leaves; then it waits until
// cgroup.events says the group is no longer populated.
func killGroup(ctx context.Context, r *os.Root, dir string, leaves []string) error {
	err := writeFile(r, path.Join(dir, "cgroup.kill"), "1")
	switch {
	case err == nil:
		return waitEmpty(ctx, r, dir, nil)
	case errors.Is(err, fs.ErrNotExist):
		// Before Linux 5.14: kill what we see until the group is empty.
		return waitEmpty(ctx, r, dir, func() error { return signalLeaves(r, leaves) })
	default:
		return err
	}
}

// signalLeaves sends SIGKILL to every process listed in the leaves' cgroup.procs.
func signalLeaves(r *os.Root, leaves []string) error {
	for _, leaf := range leaves {
		pids, err := readPids(r, path.Join(leaf, "cgroup.procs"))
		if err != nil {
			return err
		}
		if err := killPids(pids); err != nil {
			return err
		}
	}
	return nil
}

// killPids sends SIGKILL to each process of pids (one already gone is no error).
func killPids(pids []int) error {
	for _, pid := range pids {
		if pid > 0 {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
				return fmt.Errorf("kill %d: %w", pid, err)
			}
		}
	}
	return nil
}

// waitEmpty polls dir/cgroup.events until "populated 0", calling again (if not nil) each round.
func waitEmpty(ctx context.Context, r *os.Root, dir string, again func() error) error {
	delay := time.Millisecond
	for {
		if again != nil {
			if err := again(); err != nil {
				return err
			}
		}
		data, err := r.ReadFile(path.Join(dir, "cgroup.events"))
		if err != nil {
			return err
		}
		kv, err := parseFlatKeyed(data)
		if err != nil {
			return fmt.Errorf("%s/cgroup.events: %w", dir, err)
		}
		if kv["populated"] == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("group %s still populated: %w", path.Join(r.Name(), dir), ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// removeGroup removes the empty group dir (relative to r), retrying while the kernel reports it
// busy (exiting processes) until ctx ends. A group already gone is not an error.
func removeGroup(ctx context.Context, r *os.Root, dir string) error {
	delay := time.Millisecond
	for {
		err := r.Remove(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// writeFile writes value to the cgroup interface file name (relative to r) in a single write, as
// cgroup files want; the error names the file and the value.
func writeFile(r *os.Root, name, value string) error {
	f, err := r.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(value))
	cerr := f.Close()
	if err != nil {
		return fmt.Errorf("write %q: %w", value, err)
	}
	return cerr
}

// readPids reads a cgroup.procs file relative to r.
func readPids(r *os.Root, name string) ([]int, error) {
	data, err := r.ReadFile(name)
	if err != nil {
		return nil, err
	}
	pids, err := parsePids(data)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", r.Name(), name, err)
	}
	return pids, nil
}
