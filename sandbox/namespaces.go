package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

func init() {
	// The namespaces backend re-executes the current binary under this argv[0] inside fresh
	// namespaces; any binary that links this package (ndtrace, test binaries) can play that part.
	if len(os.Args) > 1 && os.Args[0] == nsinitArg0 {
		if err := nsinit(os.Args[1], os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "ndtrace sandbox init: %v\n", err)
			os.Exit(70)
		}
		os.Exit(71) // unreachable: nsinit execs the interpreter
	}
	Register(namespaces{})
}

const nsinitArg0 = "ndtrace-nsinit"

// namespaces is the default backend: it clones this binary into new user, mount, PID, network, IPC,
// UTS and cgroup namespaces, builds a minimal root there (nsinit), and execs the interpreter.
type namespaces struct{}

func (namespaces) Name() string { return "namespaces" }

// nsinitConfig is what the parent hands to nsinit, as argv[1]; the interpreter's arguments follow
// as argv[2:], each its own string (JSON-escaped within argv[1], a repository's many read-only
// paths could come near the kernel's bound on one argument, MAX_ARG_STRLEN, 128 KiB).
type nsinitConfig struct {
	Root     string            `json:"root"`
	ReadOnly []string          `json:"ro"`
	Support  string            `json:"support"`
	Binds    []Bind            `json:"binds"`
	Links    map[string]string `json:"links"`
	TmpBytes int64             `json:"tmp_bytes"`
	Python   string            `json:"python"`
	Args     []string          `json:"-"`
	Env      []string          `json:"env"`
}

func (namespaces) Command(l *Launch) (*exec.Cmd, error) {
	ro := l.ReadOnly
	// The new root is a tmpfs mounted (inside the new mount namespace only) on an empty directory
	// the parent creates: the sandbox's uid may not create directories on the host.
	root, err := os.MkdirTemp("", "ndtrace-root-")
	if err != nil {
		return nil, fmt.Errorf("sandbox root: %w", err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		return nil, err
	}
	l.Cleanup = append(l.Cleanup, func() { os.Remove(root) })
	links, _ := rootLayout()
	args := append([]string{}, l.Args...)
	attr := &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
			syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP,
		// nsinit must be root of the new user namespace to mount; that root is an unprivileged
		// host uid, never host root.
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
		Pdeathsig:  syscall.SIGKILL,
	}
	if os.Geteuid() == 0 {
		zuid, cuid := hostUIDs()
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(zuid), Size: 1},
			{ContainerID: sandboxCodeUID, HostID: int(cuid), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(zuid), Size: 1},
			{ContainerID: sandboxCodeUID, HostID: int(cuid), Size: 1}}
		attr.GidMappingsEnableSetgroups = true
		args = append(args, "--drop-uid", strconv.Itoa(sandboxCodeUID), "--drop-gid", strconv.Itoa(sandboxCodeUID))
	} else {
		// Unprivileged parents may map only their own uid: the code runs as that uid.
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	args = append(args, "--own-pidns")
	cfg, err := json.Marshal(nsinitConfig{Root: root, ReadOnly: ro, Binds: l.Binds, Support: l.Support, Links: links,
		TmpBytes: l.TmpBytes, Python: l.Python, Args: args, Env: l.Env})
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        append([]string{nsinitArg0, string(cfg)}, args...),
		Env:         []string{},
		ExtraFiles:  l.extraFiles(),
		SysProcAttr: attr,
	}
	l.intoCgroup(attr)
	return cmd, nil
}

// sandboxCodeUID is the uid (and gid) traced code runs as inside the sandbox's user namespace.
const sandboxCodeUID = 1000

// Mount flags from <linux/mount.h> and statfs flags that syscall does not name.
const (
	stRdonly     = 0x1
	stNosuid     = 0x2
	stNodev      = 0x4
	stNoexec     = 0x8
	stNoatime    = 0x400
	stNodiratime = 0x800
	stRelatime   = 0x1000
	prSetNoNewPr = 38
)

// nsinit runs as root of the new user namespace and PID 1 of the new PID namespace. It builds the
// sandbox's root filesystem and execs the interpreter; it never returns on success.
func nsinit(arg string, args []string) error {
	var c nsinitConfig
	if err := json.Unmarshal([]byte(arg), &c); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	c.Args = args
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	r := c.Root
	if err := syscall.Mount("tmpfs", r, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=16m,mode=0755"); err != nil {
		return fmt.Errorf("mount root tmpfs: %w", err)
	}
	for _, p := range c.ReadOnly {
		if err := bindReadOnly(p, filepath.Join(r, p)); err != nil {
			return err
		}
	}
	for _, b := range c.Binds {
		if err := bindReadOnly(b.Host, filepath.Join(r, b.At)); err != nil {
			return err
		}
	}
	if c.Support != "" {
		if err := bindReadOnly(c.Support, filepath.Join(r, supportMount)); err != nil {
			return err
		}
	}
	for p, target := range c.Links {
		if err := os.Symlink(target, filepath.Join(r, p)); err != nil && !os.IsExist(err) {
			return fmt.Errorf("symlink %s: %w", p, err)
		}
	}
	tmp := filepath.Join(r, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", tmp, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV,
		fmt.Sprintf("size=%d,mode=1777", c.TmpBytes)); err != nil {
		return fmt.Errorf("mount /tmp: %w", err)
	}
	proc := filepath.Join(r, "proc")
	if err := os.MkdirAll(proc, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("proc", proc, "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		// Some container runtimes mask parts of /proc, which forbids a fresh proc mount in a user
		// namespace. The interpreter does not need /proc; the sandbox simply has none.
		fmt.Fprintf(os.Stderr, "ndtrace sandbox init: no /proc in the sandbox: %v\n", err)
	}
	if err := makeDev(filepath.Join(r, "dev")); err != nil {
		return err
	}
	old := filepath.Join(r, ".oldroot")
	if err := os.Mkdir(old, 0o700); err != nil {
		return err
	}
	if err := syscall.PivotRoot(r, old); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := syscall.Chdir("/"); err != nil {
		return err
	}
	if err := syscall.Unmount("/.oldroot", syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := os.Remove("/.oldroot"); err != nil {
		return err
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, ""); err != nil {
		return fmt.Errorf("remount / read-only: %w", err)
	}
	if err := syscall.Sethostname([]byte("sandbox")); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetNoNewPr, 1, 0); e != 0 {
		return fmt.Errorf("no_new_privs: %w", e)
	}
	argv := append([]string{c.Python}, c.Args...)
	return fmt.Errorf("exec %s: %w", c.Python, syscall.Exec(c.Python, argv, c.Env))
}

// bindReadOnly bind-mounts host path src at dst and makes it read-only, nosuid and nodev. A
// remount in a user namespace must keep the flags the kernel locked on the original mount, so the
// current ones are read with statfs and kept.
func bindReadOnly(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("read-only bind: %w", err)
	}
	if fi.IsDir() {
		err = os.MkdirAll(dst, 0o755)
	} else {
		if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		}
	}
	if err != nil {
		return fmt.Errorf("mount point for %s: %w", src, err)
	}
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dst, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", src, err)
	}
	flags := uintptr(syscall.MS_REMOUNT | syscall.MS_BIND | syscall.MS_RDONLY | syscall.MS_NOSUID | syscall.MS_NODEV)
	for _, m := range []struct{ st, ms int64 }{
		{stNoexec, syscall.MS_NOEXEC}, {stNoatime, syscall.MS_NOATIME},
		{stNodiratime, syscall.MS_NODIRATIME}, {stRelatime, syscall.MS_RELATIME},
	} {
		if st.Flags&m.st != 0 {
			flags |= uintptr(m.ms)
		}
	}
	if err := syscall.Mount("", dst, "", flags, ""); err != nil {
		return fmt.Errorf("remount %s read-only: %w", src, err)
	}
	return nil
}

// makeDev gives the sandbox a /dev with only the harmless character devices and the usual links.
func makeDev(dev string) error {
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	for _, n := range []string{"null", "zero", "full", "random", "urandom"} {
		dst := filepath.Join(dev, n)
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o666)
		if err != nil {
			return err
		}
		f.Close()
		if err := syscall.Mount("/dev/"+n, dst, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", n, err)
		}
	}
	// Each item mounts its own size-limited tmpfs here.
	if err := os.Mkdir(filepath.Join(dev, "shm"), 0o755); err != nil {
		return err
	}
	for n, t := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(t, filepath.Join(dev, n)); err != nil {
			return err
		}
	}
	return nil
}
