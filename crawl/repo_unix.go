//go:build unix

package crawl

import (
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
