package cgroup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrV1Unavailable is wrapped by every error of DetectV1: no cgroup v1 memory hierarchy this
// process may create groups in.
var ErrV1Unavailable = errors.New("cgroup v1 memory controller unavailable")

// cgroupSuperMagic is CGROUP_SUPER_MAGIC, statfs(2)'s f_type of a cgroup v1 hierarchy.
const cgroupSuperMagic = 0x27e0eb

// V1Manager is the worker's own groups in the cgroup v1 hierarchies of the memory controller and,
// when it is writable too, the pids controller: where memory is bound to cgroup v1 (a v1 or
// hybrid host) and the worker may create groups there (a root worker, usually), each sandbox gets
// a group of its own below them. Every file it and its sandboxes write is opened through an
// os.Root on those directories, so nothing outside them is ever written. Its methods are safe for
// concurrent use.
type V1Manager struct {
	memory *v1Hierarchy
	pids   *v1Hierarchy // nil: pids not bound to v1, or not writable
	pidNS  string       // inode of our PID namespace, in sandbox group names ("" if unknown)
}

// v1Hierarchy is the worker's group in one cgroup v1 hierarchy.
type v1Hierarchy struct {
	controller string
	dir        string   // absolute path of the worker's group in the hierarchy
	mountPoint string   // the hierarchy's mount it was found through
	root       *os.Root // open on dir
}

// DetectV1 finds the worker's groups in the cgroup v1 memory hierarchy (required) and pids
// hierarchy (optional) and checks that it may create groups there:
//
//  1. /proc/self/cgroup gives the worker's path in each v1 hierarchy ("4:memory:/path").
//  2. /proc/self/mountinfo gives the mounts of type cgroup whose super options name the
//     controller; the last one whose root contains the path gives the group's directory, checked
//     with statfs(2) to be a cgroup v1 filesystem.
//  3. The directory must be writable and searchable by the caller's effective credentials
//     (access(2), which also catches read-only mounts) and hold memory.limit_in_bytes and
//     memory.oom_control. The pids hierarchy is optional: where it fails these checks, only
//     memory is bounded by cgroup v1 (processes stay bounded by RLIMIT_NPROC).
//
// Unlike cgroup v2, v1 allows groups with processes to have children, so the worker stays where
// it is. Every error wraps ErrV1Unavailable and says why.
func DetectV1() (*V1Manager, error) {
	return detectV1("/proc/self/cgroup", "/proc/self/mountinfo")
}

// v1Unavailable returns an error wrapping ErrV1Unavailable.
func v1Unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrV1Unavailable}, args...)...)
}

// detectV1 is DetectV1 with the given /proc files.
func detectV1(procCgroupFile, mountinfoFile string) (*V1Manager, error) {
	data, err := os.ReadFile(procCgroupFile)
	if err != nil {
		return nil, v1Unavailable("%v", err)
	}
	pc, err := parseProcCgroup(data)
	if err != nil {
		return nil, v1Unavailable("%s: %v", procCgroupFile, err)
	}
	data, err = os.ReadFile(mountinfoFile)
	if err != nil {
		return nil, v1Unavailable("%v", err)
	}
	mounts, err := parseMountinfo(data)
	if err != nil {
		return nil, v1Unavailable("%s: %v", mountinfoFile, err)
	}
	mem, err := openV1(controllerMemory, pc, mounts, "memory.limit_in_bytes", "memory.oom_control")
	if err != nil {
		return nil, err
	}
	m := &V1Manager{memory: mem, pidNS: pidNamespace()}
	// The root group of a hierarchy has no pids.max; the groups made below it do.
	if pids, err := openV1(controllerPids, pc, mounts, "cgroup.procs"); err == nil {
		m.pids = pids
	}
	m.removeStale()
	return m, nil
}

// pidNamespace returns the inode number of the calling process's PID namespace ("" if unknown).
func pidNamespace() string {
	l, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	ino := strings.TrimSuffix(strings.TrimPrefix(l, "pid:["), "]")
	if _, err := strconv.ParseUint(ino, 10, 64); err != nil {
		return ""
	}
	return ino
}

// v1Name is the name of a sandbox's v1 group: ndtrace-sb-<pid>-<n>-<random>-p<PID namespace>.
// The PID namespace lets removeStale tell a dead worker's groups from those of a live worker in
// another PID namespace that shares the hierarchy's group (the pids root, say).
func (m *V1Manager) v1Name(rnd string) string {
	return fmt.Sprintf("%s%d-%d-%s-p%s", SandboxPrefix, os.Getpid(), nameSeq.Add(1), rnd, m.pidNS)
}

// removeStale removes the empty sandbox groups that workers of this PID namespace which are no
// longer running left behind (a worker killed before it closed its sandboxes). A group with a
// process in it, or of another PID namespace, or whose worker runs, stays. Best effort.
func (m *V1Manager) removeStale() {
	if m.pidNS == "" {
		return
	}
	suffix := "-p" + m.pidNS
	for _, h := range []*v1Hierarchy{m.memory, m.pids} {
		if h == nil {
			continue
		}
		entries, err := os.ReadDir(h.dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if !e.IsDir() || !strings.HasPrefix(name, SandboxPrefix) || !strings.HasSuffix(name, suffix) {
				continue
			}
			pidText, _, _ := strings.Cut(strings.TrimPrefix(name, SandboxPrefix), "-")
			pid, err := strconv.Atoi(pidText)
			if err != nil || pid <= 0 || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
				continue
			}
			// rmdir fails (EBUSY) on a group with processes; the item leaf goes first.
			if err := h.root.Remove(path.Join(name, ItemLeaf)); err == nil || errors.Is(err, fs.ErrNotExist) {
				_ = h.root.Remove(name)
			}
		}
	}
}

// openV1 finds and checks the worker's group in the v1 hierarchy of controller (DetectV1's steps).
func openV1(controller string, pc procCgroup, mounts []mountInfo, files ...string) (*v1Hierarchy, error) {
	p, ok := pc.V1[controller]
	if !ok {
		return nil, v1Unavailable("the %s controller is not bound to a cgroup v1 hierarchy", controller)
	}
	locs, err := locateV1(controller, p, mounts)
	if err != nil {
		return nil, v1Unavailable("%v", err)
	}
	var why []string
	for _, l := range locs {
		var st syscall.Statfs_t
		if err := syscall.Statfs(l.Dir, &st); err != nil {
			why = append(why, fmt.Sprintf("%s: %v", l.Dir, err))
			continue
		}
		if st.Type != cgroupSuperMagic {
			why = append(why, fmt.Sprintf("%s: not a cgroup v1 filesystem (f_type %#x)", l.Dir, st.Type))
			continue
		}
		if err := syscall.Faccessat(atFDCWD, l.Dir, accessW|accessX, atEAccess); err != nil {
			why = append(why, fmt.Sprintf("%s is not writable by uid %d (%v)", l.Dir, os.Geteuid(), err))
			continue
		}
		root, err := os.OpenRoot(l.Dir)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		missing := false
		for _, f := range files {
			if _, err := root.Stat(f); err != nil {
				why = append(why, fmt.Sprintf("%s: %v", path.Join(l.Dir, f), err))
				missing = true
				break
			}
		}
		if missing {
			root.Close()
			continue
		}
		return &v1Hierarchy{controller: controller, dir: l.Dir, mountPoint: l.Mount.MountPoint, root: root}, nil
	}
	return nil, v1Unavailable("%s: %s", controller, strings.Join(why, "; "))
}

// locateV1 finds the cgroup v1 mounts of controller that expose the group at path p, last mounted
// first.
func locateV1(controller, p string, mounts []mountInfo) ([]location, error) {
	if err := checkCgroupPath(p); err != nil {
		return nil, fmt.Errorf("cgroup v1 %s path %q: %w", controller, p, err)
	}
	locs, rejected := mountsOf(p, mounts, func(m mountInfo) bool {
		return m.FSType == "cgroup" && slices.Contains(strings.Split(m.SuperOpts, ","), controller)
	})
	if len(locs) == 0 {
		if len(rejected) == 0 {
			return nil, fmt.Errorf("no cgroup v1 hierarchy of %s is mounted in this mount namespace", controller)
		}
		return nil, fmt.Errorf("no cgroup v1 mount of %s exposes our group %s: %s", controller, p, strings.Join(rejected, "; "))
	}
	return locs, nil
}

// String describes the manager for logs: the worker's groups it creates sandbox groups in.
func (m *V1Manager) String() string {
	s := fmt.Sprintf("cgroup v1 memory group %s", m.memory.dir)
	if m.pids != nil {
		s += fmt.Sprintf(", pids group %s", m.pids.dir)
	} else {
		s += " (pids not used: not bound to v1 or not writable)"
	}
	return s
}

// Close releases the Manager's directory handles. Sandboxes made by it stay usable.
func (m *V1Manager) Close() error {
	err := m.memory.root.Close()
	if m.pids != nil {
		err = errors.Join(err, m.pids.root.Close())
	}
	return err
}

// V1Sandbox is the cgroup v1 group of one sandbox: ndtrace-sb-<unique>/ItemLeaf below the worker's
// group in the memory hierarchy (and in the pids one when the manager has it). Only the item's
// processes ever enter it (the zygote stays in the worker's groups), one item at a time; it is
// checked empty after each item and removed by Close. Its methods are safe for concurrent use.
type V1Sandbox struct {
	name   string
	groups []*v1Group // memory first

	mu     sync.Mutex
	closed bool
}

// v1Group is a sandbox's group in one hierarchy.
type v1Group struct {
	controller string
	dir        string   // the sandbox group's directory
	parent     *os.Root // the worker's group, to remove the sandbox group
	root       *os.Root // the sandbox group
}

// NewSandbox creates ndtrace-sb-<pid>-<n>-<random>-p<PID namespace>/ItemLeaf in the worker's
// memory group (and pids group) and applies limits to it: memory.limit_in_bytes and, where the
// kernel accounts swap, memory.memsw.limit_in_bytes at the same value (no swap),
// memory.swappiness 0, and pids.max. On error nothing is left behind.
func (m *V1Manager) NewSandbox(limits Limits) (*V1Sandbox, error) {
	if limits.MemoryBytes < 0 || limits.Pids < 0 {
		return nil, fmt.Errorf("cgroup v1 sandbox: negative limits %+v", limits)
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("cgroup v1 sandbox name: %w", err)
	}
	s := &V1Sandbox{name: m.v1Name(hex.EncodeToString(rnd[:]))}
	for _, h := range []*v1Hierarchy{m.memory, m.pids} {
		if h == nil {
			continue
		}
		g, err := h.newGroup(s.name)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("cgroup v1 sandbox: %w", err)
		}
		s.groups = append(s.groups, g)
	}
	if err := s.setLimits(limits, true); err != nil {
		s.Close()
		return nil, err
	}
	if err := writeFile(s.groups[0].root, path.Join(ItemLeaf, "memory.swappiness"), "0"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.Close()
		return nil, fmt.Errorf("cgroup v1 sandbox %s: %w", s.groups[0].dir, err)
	}
	return s, nil
}

// newGroup creates name/ItemLeaf in h.
func (h *v1Hierarchy) newGroup(name string) (*v1Group, error) {
	parent, err := h.root.OpenRoot(".")
	if err != nil {
		return nil, err
	}
	if err := parent.Mkdir(name, 0o755); err != nil {
		parent.Close()
		return nil, err
	}
	g := &v1Group{controller: h.controller, dir: path.Join(h.dir, name), parent: parent}
	if g.root, err = parent.OpenRoot(name); err != nil {
		parent.Remove(name)
		parent.Close()
		return nil, err
	}
	if err := g.root.Mkdir(ItemLeaf, 0o755); err != nil {
		g.root.Close()
		parent.Remove(name)
		parent.Close()
		return nil, err
	}
	return g, nil
}

// SetLimits changes the limits of the item group (between items). A limit of 0 means none.
func (s *V1Sandbox) SetLimits(limits Limits) error {
	if limits.MemoryBytes < 0 || limits.Pids < 0 {
		return fmt.Errorf("cgroup v1 sandbox: negative limits %+v", limits)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("cgroup v1 sandbox %s: closed", s.name)
	}
	return s.setLimits(limits, false)
}

// v1Unlimited is what a cgroup v1 limit file takes for "no limit" (the kernel rounds it).
const v1Unlimited = "-1"

func (s *V1Sandbox) setLimits(limits Limits, fresh bool) error {
	for _, g := range s.groups {
		switch g.controller {
		case controllerMemory:
			mem := v1Unlimited
			if limits.MemoryBytes > 0 {
				mem = strconv.FormatInt(limits.MemoryBytes, 10)
			}
			// memory.memsw.limit_in_bytes (memory plus swap) may never be below
			// memory.limit_in_bytes: lower memory first, raise memsw first.
			files := []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"}
			if !fresh {
				if cur, err := g.read("memory.limit_in_bytes"); err == nil && (limits.MemoryBytes <= 0 || cur < limits.MemoryBytes) {
					files[0], files[1] = files[1], files[0]
				}
			}
			for _, f := range files {
				err := writeFile(g.root, path.Join(ItemLeaf, f), mem)
				if err != nil && !(f == "memory.memsw.limit_in_bytes" && errors.Is(err, fs.ErrNotExist)) {
					return fmt.Errorf("cgroup v1 sandbox %s: %w", g.dir, err)
				}
			}
		case controllerPids:
			max := "max"
			if limits.Pids > 0 {
				max = strconv.Itoa(limits.Pids)
			}
			if err := writeFile(g.root, path.Join(ItemLeaf, "pids.max"), max); err != nil {
				return fmt.Errorf("cgroup v1 sandbox %s: %w", g.dir, err)
			}
		}
	}
	return nil
}

// read reads a single-value file of the item group.
func (g *v1Group) read(file string) (int64, error) {
	data, err := g.root.ReadFile(path.Join(ItemLeaf, file))
	if err != nil {
		return 0, err
	}
	return parseSingleInt(data)
}

// Dir returns the item group's directory in the memory hierarchy, for logs.
func (s *V1Sandbox) Dir() string { return path.Join(s.groups[0].dir, ItemLeaf) }

// ItemProcs opens the cgroup.procs of the item group in every hierarchy (memory first) for writing,
// for the zygote: its per-item child writes "0" to each, before anything else, to move itself into
// the item group; the processes it then forks are born there. In cgroup v1 the kernel (5.16+)
// checks such a write against the credentials of the file's opener, the worker (root, or the
// owner of the processes moved), so it works from inside the sandbox's namespaces and under its
// uids. Whoever holds the files may move the processes it can name into the item group: the item
// closes them before it runs anything of its own.
func (s *V1Sandbox) ItemProcs() ([]*os.File, error) {
	var files []*os.File
	for _, g := range s.groups {
		f, err := g.root.OpenFile(path.Join(ItemLeaf, "cgroup.procs"), os.O_WRONLY, 0)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("cgroup v1 sandbox item: %w", err)
		}
		files = append(files, f)
	}
	return files, nil
}

// OOMKills returns the "oom_kill" count of the item group's memory.oom_control (Linux 4.13+): the
// number of its processes killed by the OOM killer since the sandbox was made.
func (s *V1Sandbox) OOMKills() (int64, error) {
	g := s.groups[0]
	data, err := g.root.ReadFile(path.Join(ItemLeaf, "memory.oom_control"))
	if err != nil {
		return 0, fmt.Errorf("cgroup v1 sandbox: %w", err)
	}
	kv, err := parseFlatKeyed(data)
	if err != nil {
		return 0, fmt.Errorf("cgroup v1 sandbox %s/memory.oom_control: %w", g.dir, err)
	}
	n, ok := kv["oom_kill"]
	if !ok {
		return 0, fmt.Errorf("cgroup v1 sandbox: memory.oom_control has no oom_kill count (Linux before 4.13): %w", ErrNotSupported)
	}
	return n, nil
}

// PeakMemory returns memory.max_usage_in_bytes of the item group: the highest use since the last
// ResetPeakMemory.
func (s *V1Sandbox) PeakMemory() (int64, error) {
	v, err := s.groups[0].read("memory.max_usage_in_bytes")
	if err != nil {
		return 0, fmt.Errorf("cgroup v1 sandbox: %w", err)
	}
	return v, nil
}

// ResetPeakMemory resets the peak PeakMemory reports to the item group's current use.
func (s *V1Sandbox) ResetPeakMemory() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("cgroup v1 sandbox %s: closed", s.name)
	}
	if err := writeFile(s.groups[0].root, path.Join(ItemLeaf, "memory.max_usage_in_bytes"), "0"); err != nil {
		return fmt.Errorf("cgroup v1 sandbox: reset peak: %w", err)
	}
	return nil
}

// KillItem kills every process left in the item group (SIGKILL to each, cgroup v1 has no
// cgroup.kill) and waits until it is empty, so the next item starts with nothing of the last one.
// After a normal item it finds the group empty at its first look.
func (s *V1Sandbox) KillItem(ctx context.Context) error {
	for _, g := range s.groups {
		if err := killV1(ctx, g.root, ItemLeaf); err != nil {
			return fmt.Errorf("cgroup v1 sandbox %s: %w", g.dir, err)
		}
	}
	return nil
}

// Close kills whatever is left in the item group, waits until it is empty and removes the
// sandbox's groups. Closing twice is a no-op.
func (s *V1Sandbox) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), killWait)
	defer cancel()
	var errs []error
	for _, g := range s.groups {
		if err := killV1(ctx, g.root, ItemLeaf); err != nil {
			errs = append(errs, err)
		}
		if err := removeGroup(ctx, g.root, ItemLeaf); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, g.root.Close())
		if err := removeGroup(ctx, g.parent, s.name); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, g.parent.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cgroup v1 sandbox %s close: %w", s.name, err)
	}
	return nil
}

// killV1 sends SIGKILL to every process in group dir (relative to r) until its cgroup.procs is
// empty or ctx ends.
func killV1(ctx context.Context, r *os.Root, dir string) error {
	delay := time.Millisecond
	for {
		pids, err := readPids(r, path.Join(dir, "cgroup.procs"))
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if err := killPids(pids); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("group %s still populated: %w", path.Join(r.Name(), dir), ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}
