package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// asUser prepares bin to run as uid (and gid uid, no supplementary groups) through setpriv, with
// only the environment given (no HOME unless env has one), in a folder the uid owns. It returns
// the command and that folder.
func asUser(t *testing.T, bin string, uid int, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("changing uid needs root (CI runs the tests as root)")
	}
	setpriv := requireSetpriv(t)
	dir, err := os.MkdirTemp("/var/tmp", "ndtrace-users-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	full := append([]string{fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", uid), "--clear-groups", bin}, args...)
	cmd := exec.Command(setpriv, full...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}, env...)
	return cmd, dir
}

func requireSetpriv(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv not found: install util-linux (apt-get install util-linux)")
	}
	return p
}

// sharedBinary builds ndtrace where every uid can run it.
func sharedBinary(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "ndtrace-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "ndtrace")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// removeNew removes path at the end of the test if it does not exist now.
func removeNew(t *testing.T, path string) {
	if _, err := os.Lstat(path); os.IsNotExist(err) {
		t.Cleanup(func() { os.RemoveAll(path) })
	}
}

// TestRunAsOtherUsers runs the built-in examples end to end (embedded Temporal, sandbox,
// repository items checked out into the default scratch folder) as unprivileged uids: one with
// HOME unset and one with HOME=/nonexistent, neither with a passwd entry here. Both must succeed
// with the per-uid default folders.
func TestRunAsOtherUsers(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	bin := sharedBinary(t)
	for _, tc := range []struct {
		uid int
		env []string
	}{
		{1001, nil},
		{12345, []string{"HOME=/nonexistent"}},
	} {
		t.Run(fmt.Sprint(tc.uid), func(t *testing.T) {
			removeNew(t, fmt.Sprintf("/var/tmp/ndtrace-%d", tc.uid))
			cmd, dir := asUser(t, bin, tc.uid, tc.env, "run", "--out", "data")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("ndtrace run as uid %d: %v\n%s", tc.uid, err, out)
			}
			if !strings.Contains(string(out), "0 of 22 items rejected") {
				t.Errorf("run as uid %d: want every example traced:\n%s", tc.uid, out)
			}
			if _, err := os.Stat(filepath.Join(dir, "data")); err != nil {
				t.Errorf("no dataset: %v", err)
			}
		})
	}
}

// TestScratchOfAnotherUser: a scratch folder the user cannot write in fails at once, in one line
// that names the folder, the uid and what to set, with exit status 1; with debug logging the
// whole error chain is logged once.
func TestScratchOfAnotherUser(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	bin := sharedBinary(t)
	scratch, err := os.MkdirTemp("/var/tmp", "ndtrace-rootscratch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(scratch) })
	if err := os.Chmod(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("ndtrace run: scratch folder %s is not writable by uid 1001 (permission denied); set NDTRACE_SCRATCH or --scratch to a folder you own\n", scratch)
	chain := fmt.Sprintf("cannot write in folder %s as uid 1001: permission denied", scratch)
	for _, tc := range []struct {
		name  string
		env   []string
		args  []string
		debug bool
	}{
		{"variable", []string{"NDTRACE_SCRATCH=" + scratch}, nil, false},
		{"flag", nil, []string{"--scratch", scratch}, false},
		{"debug", []string{"NDTRACE_SCRATCH=" + scratch, "NDTRACE_LOG=debug"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, _ := asUser(t, bin, 1001, tc.env, append([]string{"run", "--out", "data"}, tc.args...)...)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 {
				t.Fatalf("exit status %d (%v), want 1\nstderr:\n%s", code, err, stderr.String())
			}
			got := stderr.String()
			if !tc.debug && got != want {
				t.Errorf("stderr:\n%q\nwant:\n%q", got, want)
			}
			if tc.debug {
				if !strings.HasSuffix(got, want) {
					t.Errorf("stderr does not end with the one-line error:\n%s", got)
				}
				if n := strings.Count(got, chain); n != 1 {
					t.Errorf("the chain %q appears %d times, want once:\n%s", chain, n, got)
				}
				if n := strings.Count(got, "permission denied"); n != 2 {
					t.Errorf("the cause appears %d times, want twice (chain and message):\n%s", n, got)
				}
			}
		})
	}
}
