package cgroup

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The integration tests re-execute the test binary as a zygote: the role and the uid its items run
// as come in these environment variables.
const (
	envRole    = "NDTRACE_CGROUP_TEST_ROLE"
	envItemUID = "NDTRACE_CGROUP_TEST_ITEM_UID"
)

func TestMain(m *testing.M) {
	if os.Getenv(envRole) == "zygote" {
		os.Exit(runZygote())
	}
	os.Exit(m.Run())
}

// itemScript is what the zygote's per-item child runs, as /bin/sh -c: like the real zygote's
// child, it first moves itself into the item group through the inherited fd 3 (ItemProcs), then
// reports its cgroup and execs the item.
const itemScript = `echo 0 >&3 || exit 97
exec 3>&-
while read -r l; do case $l in 0::*) echo "item $l";; esac; done </proc/self/cgroup
exec "$@"`

// runZygote is the test zygote. It runs in the sandbox's supervisor group, in its own user and
// cgroup namespaces, with ItemProcs as fd 3. It prints "zygote <its 0:: line>", then for each JSON
// argv read from stdin starts an item child in new user, PID and cgroup namespaces (mapped to the
// uid of envItemUID, not the worker's when the worker is root), waits for it and prints
// "exit <status>". It returns at EOF.
func runZygote() int {
	itemProcs := os.NewFile(3, "item-procs")
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		fmt.Println("zygote error", err)
		return 1
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "0::") {
			fmt.Println("zygote", l)
		}
	}
	itemUID, err := strconv.Atoi(os.Getenv(envItemUID))
	if err != nil {
		fmt.Println("zygote error", err)
		return 1
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var argv []string
		if err := json.Unmarshal(sc.Bytes(), &argv); err != nil {
			fmt.Println("exit bad request:", err)
			continue
		}
		cmd := exec.Command("/bin/sh", append([]string{"-c", itemScript, "item"}, argv...)...)
		cmd.ExtraFiles = []*os.File{itemProcs}
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWCGROUP,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: itemUID, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: itemUID, Size: 1}},
			Pdeathsig:   syscall.SIGKILL,
		}
		status := "0"
		if err := cmd.Run(); err != nil {
			status = err.Error()
		}
		fmt.Println("exit", status)
	}
	return 0
}

// zygote is a test zygote started in a sandbox's supervisor group.
type zygote struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	line  string // its "zygote 0::..." line
}

// startZygote starts the test binary as a zygote in s's supervisor leaf (clone3 CLONE_INTO_CGROUP)
// with s's ItemProcs as fd 3, in new user and cgroup namespaces.
func startZygote(t *testing.T, s *Sandbox) *zygote {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sup, err := s.SupervisorDir()
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	procs, err := s.ItemProcs()
	if err != nil {
		t.Fatal(err)
	}
	defer procs.Close()
	cmd := exec.Command(exe)
	cmd.ExtraFiles = []*os.File{procs}
	cmd.Stderr = os.Stderr
	attr := &syscall.SysProcAttr{
		UseCgroupFD: true,
		CgroupFD:    int(sup.Fd()),
		// No new PID namespace for the zygote: it writes its items' uid_map through /proc, which
		// is the test's.
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWCGROUP,
		Pdeathsig:  syscall.SIGKILL,
	}
	if uid := os.Geteuid(); uid == 0 {
		// The zygote is root of its user namespace, mapped to host root so that it may run the test
		// binary; its items are mapped to host 65534: they write to ItemProcs under another uid.
		ids := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: 65534, HostID: 65534, Size: 1}}
		attr.UidMappings, attr.GidMappings = ids, ids
		cmd.Env = append(os.Environ(), envRole+"=zygote", envItemUID+"=65534")
	} else {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		cmd.Env = append(os.Environ(), envRole+"=zygote", envItemUID+"=0")
	}
	cmd.SysProcAttr = attr
	z := &zygote{cmd: cmd, lines: make(chan string, 100)}
	if z.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start zygote in %s: %v", path.Join(s.Dir(), SupervisorLeaf), err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			z.lines <- sc.Text()
		}
		close(z.lines)
	}()
	z.line = z.next(t)
	if !strings.HasPrefix(z.line, "zygote 0::") {
		t.Fatalf("zygote said %q", z.line)
	}
	return z
}

// next returns the zygote's next stdout line.
func (z *zygote) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-z.lines:
		if !ok {
			t.Fatal("zygote stdout closed")
		}
		return l
	case <-time.After(60 * time.Second):
		t.Fatal("no output from the zygote in 60s")
	}
	return ""
}

// send has the zygote start argv as an item.
func (z *zygote) send(t *testing.T, argv ...string) {
	t.Helper()
	req, _ := json.Marshal(argv)
	if _, err := z.stdin.Write(append(req, '\n')); err != nil {
		t.Fatal(err)
	}
}

// wait returns the "0::" line and exit status of the item last sent.
func (z *zygote) wait(t *testing.T) (cgroupLine, status string) {
	t.Helper()
	for {
		l := z.next(t)
		switch {
		case strings.HasPrefix(l, "item "):
			cgroupLine = strings.TrimPrefix(l, "item ")
		case strings.HasPrefix(l, "exit "):
			return cgroupLine, strings.TrimPrefix(l, "exit ")
		default:
			t.Logf("item output: %s", l)
		}
	}
}

// run has the zygote run argv as an item and returns the item's "0::" line and exit status.
func (z *zygote) run(t *testing.T, argv ...string) (cgroupLine, status string) {
	t.Helper()
	z.send(t, argv...)
	return z.wait(t)
}

// cgroupOf returns the 0:: path of /proc/<pid>/cgroup as seen from the test's namespaces.
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := parseProcCgroup(data)
	if err != nil {
		t.Fatal(err)
	}
	return pc.V2Path
}

// readItem reads an interface file of the item leaf.
func readItem(t *testing.T, s *Sandbox, file string) string {
	t.Helper()
	data, err := s.root.ReadFile(path.Join(ItemLeaf, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// TestCgroupV2 runs the whole cgroup v2 path where this process has a delegated cgroup v2 group
// with the memory and pids controllers, and skips elsewhere (the sandbox then uses rlimits).
func TestCgroupV2(t *testing.T) {
	m, err := Detect()
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			t.Skipf("cgroup v2 with memory and pids controllers is not delegated to this process: %v; the rlimit fallback applies", err)
		}
		t.Fatal(err)
	}
	defer m.Close()
	t.Logf("manager: %v", m)
	exercise(t, m)
}

// TestCgroupV2Available runs the same path with whichever of the memory and pids controllers the
// process's group has on cgroup v2, possibly none, plus hugetlb when available (it stands in for
// them: enabling any controller for children makes the kernel apply the no-internal-process rule
// Detect must satisfy). It is for machines whose memory controller is bound to cgroup v1, like
// hybrid VMs: it still covers detection, moving the worker into its leaf, clone3 into the
// supervisor leaf, the move through ItemProcs from other namespaces and uids, pids.max when pids is
// on v2, and Close.
func TestCgroupV2Available(t *testing.T) {
	m, err := detect(config{procCgroup: "/proc/self/cgroup", mountinfo: "/proc/self/mountinfo",
		optional: []string{controllerMemory, controllerPids, "hugetlb"}})
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			t.Skipf("no delegated cgroup v2 group: %v", err)
		}
		t.Fatal(err)
	}
	defer m.Close()
	t.Logf("manager: %v", m)
	exercise(t, m)
}

// exercise runs a sandbox of m through items that hit its limits, then closes sandboxes with and
// without live processes.
func exercise(t *testing.T, m *Manager) {
	withMemory := slices.Contains(m.controllers, controllerMemory)
	withPids := slices.Contains(m.controllers, controllerPids)
	var limits Limits
	if withPids {
		limits.Pids = 10
	}
	if withMemory {
		limits.MemoryBytes = 100 << 20
	}
	s, err := m.NewSandbox(limits)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Logf("sandbox %s", s.Dir())
	if !strings.HasPrefix(s.Dir(), m.Dir()+"/"+SandboxPrefix) {
		t.Fatalf("sandbox %s is not a child of %s", s.Dir(), m.Dir())
	}
	if withPids {
		if got := readItem(t, s, "pids.max"); got != "10" {
			t.Errorf("pids.max = %q", got)
		}
	}
	if withMemory {
		if got := readItem(t, s, "memory.max"); got != strconv.Itoa(100<<20) {
			t.Errorf("memory.max = %q", got)
		}
		if got := readItem(t, s, "memory.oom.group"); got != "1" {
			t.Errorf("memory.oom.group = %q", got)
		}
		if _, err := s.root.Stat(path.Join(ItemLeaf, "memory.swap.max")); err == nil {
			if got := readItem(t, s, "memory.swap.max"); got != "0" {
				t.Errorf("memory.swap.max = %q", got)
			}
		}
	}

	z := startZygote(t, s)
	want := path.Join(m.cgroupPath, path.Base(s.Dir()), SupervisorLeaf)
	if got := cgroupOf(t, z.cmd.Process.Pid); got != want {
		t.Fatalf("zygote is in %s, want %s", got, want)
	}
	t.Logf("zygote sees itself as %q", z.line)

	// A plain item: it moves itself into the item group through fd 3, under another uid (when the
	// test runs as root) and from inside its own user, PID and cgroup namespaces.
	line, status := z.run(t, "true")
	if status != "0" || !strings.HasSuffix(line, "/"+ItemLeaf) {
		t.Fatalf("item: cgroup %q, exit %q; want .../%s, 0", line, status, ItemLeaf)
	}
	t.Logf("item sees itself as %q", line)

	if withPids {
		// pids.max stops a fork loop.
		hits0, err := s.PidsLimitHits()
		if err != nil {
			t.Fatal(err)
		}
		_, status = z.run(t, "/bin/sh", "-c", "for i in $(seq 100); do sleep 5 & done; wait")
		hits, err := s.PidsLimitHits()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("fork loop under pids.max 10: exit %q, pids.events max %d -> %d", status, hits0, hits)
		if hits <= hits0 {
			t.Errorf("pids.max was never hit (pids.events max %d -> %d)", hits0, hits)
		}
	} else {
		if _, err := s.PidsLimitHits(); !errors.Is(err, ErrNotSupported) {
			t.Errorf("PidsLimitHits without the pids controller: %v, want ErrNotSupported", err)
		}
		t.Log("pids controller not in use: pids.max part not exercised")
		// Leave something running in the item group for KillItem.
		z.send(t, "/bin/sh", "-c", "sleep 60 & sleep 60")
		waitProcs(t, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.KillItem(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readItem(t, s, "cgroup.procs"); got != "" {
		t.Errorf("item group not empty after KillItem: %q", got)
	}
	if !withPids {
		if _, status := z.wait(t); status != "signal: killed" {
			t.Errorf("item after KillItem: exit %q, want signal: killed", status)
		}
	}

	if withMemory {
		python := "/usr/bin/python3"
		if _, err := os.Stat(python); err != nil {
			t.Errorf("no %s for the memory item: %v", python, err)
		} else {
			resetErr := s.ResetPeakMemory()
			if resetErr != nil && !errors.Is(resetErr, ErrNotSupported) {
				t.Fatal(resetErr)
			}
			kills0, err := s.OOMKills()
			if err != nil {
				t.Fatal(err)
			}
			_, status = z.run(t, python, "-c", "b = b'x' * (400 << 20)")
			kills, err := s.OOMKills()
			if err != nil {
				t.Fatal(err)
			}
			peak, err := s.PeakMemory()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("400 MB under memory.max 100M: exit %q, oom_kill %d -> %d, peak %d (reset: %v)", status, kills0, kills, peak, resetErr)
			if status != "signal: killed" || kills <= kills0 {
				t.Errorf("allocator not OOM-killed: exit %q, oom_kill %d -> %d", status, kills0, kills)
			}
			if peak < 50<<20 || peak > 110<<20 {
				t.Errorf("memory.peak %d, want about 100 MB", peak)
			}
			if resetErr == nil {
				if err := s.ResetPeakMemory(); err != nil {
					t.Fatal(err)
				}
				if peak2, err := s.PeakMemory(); err != nil || peak2 >= peak {
					t.Errorf("PeakMemory after reset = %d, %v; want below %d", peak2, err, peak)
				}
			}
		}
	} else {
		if _, err := s.OOMKills(); !errors.Is(err, ErrNotSupported) {
			t.Errorf("OOMKills without the memory controller: %v, want ErrNotSupported", err)
		}
		t.Log("memory controller not in use: memory.max / OOM part not exercised")
	}

	// The item group is still usable, and the zygote survived its items.
	if line, status := z.run(t, "true"); status != "0" || !strings.HasSuffix(line, "/"+ItemLeaf) {
		t.Fatalf("last item: cgroup %q, exit %q", line, status)
	}
	z.stdin.Close()
	if err := z.cmd.Wait(); err != nil {
		t.Fatalf("zygote: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("sandbox group %s still there after Close: %v", s.Dir(), err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	t.Run("CloseKillsLiveProcesses", func(t *testing.T) {
		s, err := m.NewSandbox(limits)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		z := startZygote(t, s)
		z.send(t, "sleep", "60")
		waitProcs(t, s)
		start := time.Now()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("Close with a live zygote and item took %v", time.Since(start))
		if err := z.cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("zygote after Close: %v, want killed", err)
		}
		if _, err := os.Stat(s.Dir()); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("sandbox group %s still there after Close: %v", s.Dir(), err)
		}
	})

	t.Run("DetectAgain", func(t *testing.T) {
		// A second Detect in the same process finds the same delegated group, even after the first
		// moved this process into WorkerLeaf.
		m2, err := detect(config{procCgroup: "/proc/self/cgroup", mountinfo: "/proc/self/mountinfo", required: m.controllers})
		if err != nil {
			t.Fatal(err)
		}
		defer m2.Close()
		if m2.Dir() != m.Dir() {
			t.Errorf("second Detect: %s, first: %s", m2.Dir(), m.Dir())
		}
		entries, err := os.ReadDir(m.Dir())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), SandboxPrefix+strconv.Itoa(os.Getpid())+"-") {
				t.Errorf("left behind: %s", e.Name())
			}
		}
	})
}

// waitProcs waits until the item group of s has processes.
func waitProcs(t *testing.T, s *Sandbox) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for readItem(t, s, "cgroup.procs") == "" {
		if time.Now().After(deadline) {
			t.Fatal("item never showed up in the item group")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestManagerString(t *testing.T) {
	m := &Manager{dir: "/sys/fs/cgroup", mountPoint: "/sys/fs/cgroup", cgroupPath: "/", controllers: []string{"memory", "pids"}, moved: true}
	want := "cgroup v2 group /sys/fs/cgroup (cgroup / on the cgroup2 mount /sys/fs/cgroup; controllers memory+pids for sandboxes; worker processes moved to ndtrace-worker)"
	if got := m.String(); got != want {
		t.Errorf("String() = %q\nwant %q", got, want)
	}
}
