//go:build unix

package crawl

import (
	"errors"
	"os/exec"
	"syscall"
)

// killProcessGroup makes cmd the leader of a new process group and makes cancelling its context
// kill the whole group: git's helpers (remote-https, ssh, upload-pack) die with it.
func killProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// oNoFollow makes opening a symlink fail.
const oNoFollow = syscall.O_NOFOLLOW

// nameTooLong reports whether err is the file system refusing a name or a path as too long.
func nameTooLong(err error) bool { return errors.Is(err, syscall.ENAMETOOLONG) }
