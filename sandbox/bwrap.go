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
	ro, err := readOnlyPaths(l.Python, l.ReadOnly)
	if err != nil {
		return nil, err
	}
	args := []string{"--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL",
		"--hostname", "sandbox", "--clearenv"}
	for _, p := range ro {
		args = append(args, "--ro-bind", p, p)
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
	args = append(args, "--size", strconv.FormatInt(l.TmpBytes, 10), "--tmpfs", "/tmp",
		"--dev", "/dev", "--proc", "/proc", "--remount-ro", "/", "--chdir", "/tmp")
	for _, kv := range l.Env {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	args = append(args, "--", l.Python)
	args = append(args, l.Args...)
	args = append(args, "--own-pidns")
	cmd := exec.Command(path, args...)
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{l.Ctrl}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true}
	if os.Geteuid() == 0 {
		uid, _ := hostUIDs()
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: uid, NoSetGroups: false}
	}
	return cmd, nil
}
