package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

func init() { Register(bwrap{}) }

// bwrap is the bubblewrap backend (Debian package bubblewrap). bwrap is started as an unprivileged
// host uid, never as root: bwrap run by root maps the sandbox to host uid 0, where RLIMIT_NPROC is
// not enforced. Inside, the zygote and the traced code share that uid, so unlike the namespaces
// backend the code could signal the zygote; the supervisor then sees it die and reports the run as
// killed.
type bwrap struct{}

func (bwrap) Name() string { return "bwrap" }

func (bwrap) Command(l *Launch) (*exec.Cmd, error) {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, fmt.Errorf("bubblewrap not found (apt-get install bubblewrap): %w", err)
	}
	ro := l.ReadOnly
	args := []string{"--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL",
		"--hostname", "sandbox", "--clearenv"}
	for _, p := range ro {
		args = append(args, "--ro-bind", p, p)
	}
	for _, b := range l.Binds {
		args = append(args, "--ro-bind", b.Host, b.At)
	}
	links, _ := rootLayout()
	var names []string
	for p := range links {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		args = append(args, "--symlink", links[p], p)
	}
	if l.Support != "" {
		args = append(args, "--ro-bind", l.Support, supportMount)
	}
	// A minimal /dev: the harmless character devices, the usual links, and the directory each
	// item mounts its own /dev/shm on; read-only with the rest of the root.
	args = append(args, "--dir", "/dev", "--dir", "/dev/shm")
	for _, d := range []string{"null", "zero", "full", "random", "urandom"} {
		args = append(args, "--dev-bind", "/dev/"+d, "/dev/"+d)
	}
	for _, n := range []string{"fd", "stdin", "stdout", "stderr"} {
		t := "/proc/self/fd"
		if n != "fd" {
			t += "/" + map[string]string{"stdin": "0", "stdout": "1", "stderr": "2"}[n]
		}
		args = append(args, "--symlink", t, "/dev/"+n)
	}
	args = append(args, "--size", strconv.FormatInt(l.TmpBytes, 10), "--tmpfs", "/tmp",
		"--proc", "/proc", "--remount-ro", "/", "--chdir", "/tmp")
	for _, kv := range l.Env {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	args = append(args, "--", l.Python)
	args = append(args, l.Args...)
	args = append(args, "--own-pidns")
	cmd := exec.Command(path, args...)
	cmd.Env = []string{}
	cmd.ExtraFiles = l.extraFiles()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true}
	l.intoCgroup(cmd.SysProcAttr)
	if os.Geteuid() == 0 {
		uid, _ := hostUIDs()
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: uid, NoSetGroups: false}
	}
	return cmd, nil
}
