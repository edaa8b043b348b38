package sandbox_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ndtrace/ndtrace/sandbox"
)

// TestNamespacesRefused starts the namespaces backend where the kernel refuses new user
// namespaces (a user namespace of this test whose user.max_user_namespaces is 0, as a host with
// the sysctl at 0 has, and as a chroot or Docker's default profile refuse them with EPERM): New
// fails with a NamespaceError, which the CLI turns into a line that says what to do.
func TestNamespacesRefused(t *testing.T) {
	if os.Getenv("NDTRACE_TEST_REFUSED") == "1" {
		if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0); err != nil {
			t.Fatalf("set user.max_user_namespaces: %v", err)
		}
		sb, err := sandbox.New(context.Background(), sandbox.Config{Backend: "namespaces"})
		if err == nil {
			sb.Close()
			t.Fatal("New started a sandbox with no user namespaces allowed")
		}
		t.Logf("New: %v", err)
		var ne *sandbox.NamespaceError
		if !errors.As(err, &ne) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("New: %v (%T), want a NamespaceError of ENOSPC", err, err)
		}
		return
	}
	// The helper is built out here: in the child, this test's uid is root of a namespace of its
	// own, and the user's cache folder need not be usable as that.
	helper := filepath.Join(t.TempDir(), "native.so")
	if err := sandbox.BuildNative(context.Background(), helper); err != nil {
		t.Skipf("no native helper: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestNamespacesRefused$", "-test.v")
	cmd.Env = append(os.Environ(), "NDTRACE_TEST_REFUSED=1", sandbox.NativeEnv+"="+helper)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
