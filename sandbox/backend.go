package sandbox

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// A Backend starts the sandbox's interpreter in isolation. Every backend gives the same guarantees
// (no network, a read-only view of only what it is given, a private /tmp, an empty environment, an
// unprivileged host uid, its own PID namespace) and passes the same conformance suite
// (sandbox/sandboxtest); they differ in how they get there.
type Backend interface {
	// Name is the name Config.Backend selects the backend by.
	Name() string
	// Command returns the command that runs the zygote described by l. It does not start it.
	Command(l *Launch) (*exec.Cmd, error)
}

// Launch describes the zygote process a Backend must start.
type Launch struct {
	// Python is the interpreter path (the same inside and outside the sandbox).
	Python string
	// Args are the interpreter's arguments; the backend appends its isolation flags for the
	// tracer (--own-pidns, --drop-uid, --drop-gid).
	Args []string
	// Env is the complete environment of the interpreter.
	Env []string
	// ReadOnly are the host paths visible read-only at the same path: /usr, the top-level
	// library directories, the interpreter's prefix and the configured mounts (readOnlyPaths).
	ReadOnly []string
	// Binds are host folders visible read-only at other paths (Config.Binds).
	Binds []Bind
	// Support is a host directory the sandbox sees read-only at /.ndtrace (supportMount).
	Support string
	// CgroupDir, when set, is the cgroup v2 directory the sandbox must start in (clone3
	// CLONE_INTO_CGROUP: SysProcAttr.UseCgroupFD).
	CgroupDir *os.File
	// ItemProcs, when set, must become fds 4, 5, ... of the interpreter: the item group's
	// cgroup.procs (one for cgroup v2; one per hierarchy, memory first, for cgroup v1).
	ItemProcs []*os.File
	// TmpBytes is the size of the private /tmp.
	TmpBytes int64
	// Ctrl is the zygote's end of the control socket; it must become fd 3.
	Ctrl *os.File
	// Cleanup collects functions to call once the process is gone.
	Cleanup []func()
}

var (
	backendsMu sync.Mutex
	backends   = map[string]Backend{}
)

// Register makes a backend available by its name. It panics if the name is taken.
func Register(b Backend) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	if _, dup := backends[b.Name()]; dup {
		panic("sandbox: backend registered twice: " + b.Name())
	}
	backends[b.Name()] = b
}

// Backends lists the registered backend names, sorted.
func Backends() []string {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	var names []string
	for n := range backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func lookupBackend(name string) (Backend, error) {
	backendsMu.Lock()
	b, ok := backends[name]
	backendsMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("unknown sandbox backend %q (have %s)", name, strings.Join(Backends(), ", "))
	}
	return b, nil
}

// hostUIDs picks a fresh pair of unprivileged host uids for one sandbox: the first runs the zygote
// (root of the sandbox's user namespace), the second the traced code. A pair per sandbox keeps
// RLIMIT_NPROC, which counts processes per host uid, from being shared between sandboxes.
func hostUIDs() (zygote, code uint32) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	slot := binary.LittleEndian.Uint32(b[:]) % (1 << 20)
	base := uint32(200000) + 2*slot
	return base, base + 1
}

// rootSymlinks returns the top-level host paths that are symlinks (/bin -> usr/bin on merged-/usr
// systems), so a sandbox can recreate them, and the ones that are directories that must be bound.
func rootLayout() (links map[string]string, dirs []string) {
	links = map[string]string{}
	for _, p := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if t, err := os.Readlink(p); err == nil {
				links[p] = t
			}
		} else if fi.IsDir() {
			dirs = append(dirs, p)
		}
	}
	return links, dirs
}

// readOnlyPaths is what every sandbox sees: /usr, the top-level library directories that are not
// symlinks into /usr, the interpreter's installation, and the configured extras.
func readOnlyPaths(python string, extra []string) ([]string, error) {
	_, dirs := rootLayout()
	paths := append([]string{"/usr"}, dirs...)
	real, err := filepath.EvalSymlinks(python)
	if err != nil {
		return nil, fmt.Errorf("python interpreter %s: %w", python, err)
	}
	// An interpreter outside /usr (such as /opt/python3.12/bin/python3) brings its prefix.
	if !strings.HasPrefix(real, "/usr/") {
		paths = append(paths, filepath.Dir(filepath.Dir(real)))
	}
	for _, p := range extra {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("read-only path %q is not absolute", p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("read-only path: %w", err)
		}
		paths = append(paths, filepath.Clean(p))
	}
	return paths, nil
}

// extraFiles are the descriptors the interpreter inherits: the control socket as fd 3 and, with
// a cgroup, the item group's cgroup.procs files as fds 4, 5, ...
func (l *Launch) extraFiles() []*os.File {
	return append([]*os.File{l.Ctrl}, l.ItemProcs...)
}

// intoCgroup makes the process start in l.CgroupDir, if any.
func (l *Launch) intoCgroup(attr *syscall.SysProcAttr) {
	if l.CgroupDir != nil {
		attr.UseCgroupFD = true
		attr.CgroupFD = int(l.CgroupDir.Fd())
	}
}
