package cgroup

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLocateV1Fixtures finds the worker's v1 memory and pids groups in the /proc files of real
// machines, and says why where there are none.
func TestLocateV1Fixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture, controller, want, err string
	}{
		{"hybrid", controllerMemory, "/sys/fs/cgroup/memory/process_api/d5acdabd5c70406053ba2dc3a679b979", ""},
		{"hybrid", controllerPids, "/sys/fs/cgroup/pids", ""},
		{"v1-only", controllerMemory, "/sys/fs/cgroup/memory", ""},
		{"v1-only", controllerPids, "/sys/fs/cgroup/pids", ""},
		{"v2-systemd-host", controllerMemory, "", "not bound to a cgroup v1 hierarchy"},
	} {
		t.Run(tc.fixture+"/"+tc.controller, func(t *testing.T) {
			dir := filepath.Join("testdata", "proc", tc.fixture)
			data, err := os.ReadFile(filepath.Join(dir, "cgroup"))
			if err != nil {
				t.Fatal(err)
			}
			pc, err := parseProcCgroup(data)
			if err != nil {
				t.Fatal(err)
			}
			data, err = os.ReadFile(filepath.Join(dir, "mountinfo"))
			if err != nil {
				t.Fatal(err)
			}
			mounts, err := parseMountinfo(data)
			if err != nil {
				t.Fatal(err)
			}
			p, ok := pc.V1[tc.controller]
			if !ok {
				if tc.err == "" {
					t.Fatalf("no v1 %s path in %s/cgroup", tc.controller, dir)
				}
				// openV1 says so before it looks at any mount.
				if _, err := openV1(tc.controller, pc, mounts); err == nil || !errors.Is(err, ErrV1Unavailable) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("openV1: %v, want ErrV1Unavailable containing %q", err, tc.err)
				}
				return
			}
			locs, err := locateV1(tc.controller, p, mounts)
			if err != nil {
				t.Fatal(err)
			}
			if locs[0].Dir != tc.want {
				t.Fatalf("locateV1(%s, %s) = %s, want %s", tc.controller, p, locs[0].Dir, tc.want)
			}
		})
	}
}

// TestLocateV1 covers co-mounted controllers, mounts that do not show the group, and bad paths.
func TestLocateV1(t *testing.T) {
	mounts, err := parseMountinfo([]byte(`30 25 0:26 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
32 30 0:28 /a /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
33 30 0:28 /b /mnt/memory-b rw - cgroup cgroup rw,memory
34 30 0:29 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
`))
	if err != nil {
		t.Fatal(err)
	}
	if locs, err := locateV1("cpuacct", "/x/y", mounts); err != nil || locs[0].Dir != "/sys/fs/cgroup/cpu,cpuacct/x/y" {
		t.Errorf("cpuacct: %v, %v", locs, err)
	}
	if locs, err := locateV1(controllerMemory, "/a/w", mounts); err != nil || len(locs) != 1 || locs[0].Dir != "/sys/fs/cgroup/memory/w" {
		t.Errorf("memory /a/w: %v, %v", locs, err)
	}
	if _, err := locateV1(controllerMemory, "/c", mounts); err == nil || !strings.Contains(err.Error(), "does not contain") {
		t.Errorf("memory /c: %v, want a mount that does not contain it", err)
	}
	if _, err := locateV1(controllerPids, "/", mounts); err == nil || !strings.Contains(err.Error(), "no cgroup v1 hierarchy of pids") {
		t.Errorf("pids: %v", err)
	}
	if _, err := locateV1(controllerMemory, "/../a", mounts); !errors.Is(err, errOutsideNamespace) {
		t.Errorf("memory /../a: %v, want errOutsideNamespace", err)
	}
}

// TestCgroupV1 runs the whole cgroup v1 path where this process may create groups in its v1
// memory hierarchy (root on a v1 or hybrid host), and skips elsewhere: limits, an item that
// moves itself in through ItemProcs from its own user, PID and cgroup namespaces under another
// uid, an OOM kill, the peak, KillItem and Close.
func TestCgroupV1(t *testing.T) {
	m, err := DetectV1()
	if err != nil {
		if errors.Is(err, ErrV1Unavailable) {
			t.Skipf("no writable cgroup v1 memory hierarchy: %v", err)
		}
		t.Fatal(err)
	}
	defer m.Close()
	t.Logf("manager: %v", m)
	testRemoveStale(t, m)
	s, err := m.NewSandbox(Limits{MemoryBytes: 100 << 20, Pids: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mem := s.groups[0]
	if !strings.HasPrefix(s.Dir(), m.memory.dir+"/"+SandboxPrefix) || path.Base(s.Dir()) != ItemLeaf {
		t.Fatalf("item group %s is not %s/%s.../%s", s.Dir(), m.memory.dir, SandboxPrefix, ItemLeaf)
	}
	check := func(file string, want int64) {
		t.Helper()
		for _, g := range s.groups {
			if _, err := g.root.Stat(path.Join(ItemLeaf, file)); err != nil {
				continue // memsw without swap accounting, pids.max without the pids group
			}
			if got, err := g.read(file); err != nil || got != want {
				t.Errorf("%s = %d, %v; want %d", file, got, err, want)
			}
		}
	}
	check("memory.limit_in_bytes", 100<<20)
	check("memory.memsw.limit_in_bytes", 100<<20)
	check("pids.max", 10)
	// Raising and lowering keeps memsw >= limit at every step (the kernel refuses otherwise).
	for _, mb := range []int64{300, 50, 100} {
		if err := s.SetLimits(Limits{MemoryBytes: mb << 20, Pids: 10}); err != nil {
			t.Fatalf("SetLimits %d MiB: %v", mb, err)
		}
		check("memory.limit_in_bytes", mb<<20)
		check("memory.memsw.limit_in_bytes", mb<<20)
	}

	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s for the items: %v", python, err)
	}
	// An item: a child in its own user, PID and cgroup namespaces, as another uid when this test
	// runs as root, moves itself into the item group through the inherited cgroup.procs files
	// (fds 3, 4, ...), then runs prog.
	item := func(prog string) *exec.Cmd {
		procs, err := s.ItemProcs()
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			for _, f := range procs {
				f.Close()
			}
		}()
		uid := os.Geteuid()
		if uid == 0 {
			uid = 65534
		}
		var fds []string
		for i := range procs {
			fds = append(fds, strconv.Itoa(3+i))
		}
		cmd := exec.Command(python, "-c", `import os, sys
for fd in sys.argv[1].split(","):
    os.write(int(fd), b"0")
    os.close(int(fd))
exec(sys.argv[2])`, strings.Join(fds, ","), prog)
		cmd.ExtraFiles = procs
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWCGROUP,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
			Pdeathsig:   syscall.SIGKILL,
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	if err := s.ResetPeakMemory(); err != nil {
		t.Fatal(err)
	}
	kills0, err := s.OOMKills()
	if err != nil {
		t.Fatal(err)
	}
	err = item("b = bytearray(400 << 20)").Wait()
	kills, kerr := s.OOMKills()
	if kerr != nil {
		t.Fatal(kerr)
	}
	peak, perr := s.PeakMemory()
	if perr != nil {
		t.Fatal(perr)
	}
	t.Logf("400 MB under memory.limit_in_bytes 100M: %v, oom_kill %d -> %d, peak %d", err, kills0, kills, peak)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL || kills <= kills0 {
		t.Errorf("allocator not OOM-killed: %v, oom_kill %d -> %d", err, kills0, kills)
	}
	if peak < 50<<20 || peak > 110<<20 {
		t.Errorf("memory.max_usage_in_bytes %d, want about 100 MB", peak)
	}

	// Something left running in the item group: KillItem empties it.
	left := item("import time; time.sleep(60)")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		data, err := mem.root.ReadFile(path.Join(ItemLeaf, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		if len(strings.TrimSpace(string(data))) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the item never entered its group")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := s.KillItem(ctx); err != nil {
		t.Fatal(err)
	}
	if err := left.Wait(); err == nil {
		t.Error("the sleeping item was not killed")
	}

	dirs := []string{}
	for _, g := range s.groups {
		dirs = append(dirs, g.dir)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after Close: %v", d, err)
		}
	}
}

// testRemoveStale checks that removeStale removes the empty groups of a dead worker of our PID
// namespace, and keeps those of a live worker and of another PID namespace.
func testRemoveStale(t *testing.T, m *V1Manager) {
	if m.pidNS == "" {
		t.Log("PID namespace unknown: removeStale not exercised")
		return
	}
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{ // name -> removed
		SandboxPrefix + strconv.Itoa(dead.Process.Pid) + "-1-00000000-p" + m.pidNS:  true,
		SandboxPrefix + strconv.Itoa(os.Getppid()) + "-1-00000000-p" + m.pidNS:      false,
		SandboxPrefix + strconv.Itoa(dead.Process.Pid) + "-1-00000000-p1" + m.pidNS: false,
	}
	for name := range names {
		if err := os.MkdirAll(filepath.Join(m.memory.dir, name, ItemLeaf), 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(filepath.Join(m.memory.dir, name))
		defer os.Remove(filepath.Join(m.memory.dir, name, ItemLeaf))
	}
	m.removeStale()
	for name, removed := range names {
		_, err := os.Stat(filepath.Join(m.memory.dir, name))
		if gone := errors.Is(err, os.ErrNotExist); gone != removed {
			t.Errorf("%s: removed %v, want %v (%v)", name, gone, removed, err)
		}
	}
}
