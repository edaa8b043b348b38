package cgroup

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// readFixture returns testdata/proc/<name>/{cgroup,mountinfo}.
func readFixture(t testing.TB, name string) (cgroupData, mountinfoData []byte) {
	t.Helper()
	dir := filepath.Join("testdata", "proc", name)
	var err error
	if cgroupData, err = os.ReadFile(filepath.Join(dir, "cgroup")); err != nil {
		t.Fatal(err)
	}
	if mountinfoData, err = os.ReadFile(filepath.Join(dir, "mountinfo")); err != nil {
		t.Fatal(err)
	}
	return cgroupData, mountinfoData
}

// fixtureNames lists the directories of testdata/proc.
func fixtureNames(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join("testdata", "proc"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestParseAndLocateFixtures(t *testing.T) {
	tests := []struct {
		fixture  string
		hasV2    bool
		v2Path   string
		parseErr error    // from parseProcCgroup
		dirs     []string // locate's directories, in order
		rel      string   // Rel of the first location
		locErr   string   // substring of locate's error
		v1       map[string]string
	}{
		{fixture: "v1-only-old-kernel", hasV2: false,
			v1: map[string]string{"memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids", "cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct"}},
		{fixture: "v1-only", hasV2: true, v2Path: "/", locErr: "no cgroup2 filesystem is mounted",
			v1: map[string]string{"memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids"}},
		{fixture: "hybrid", hasV2: true, v2Path: "/", dirs: []string{"/sys/fs/cgroup/unified"},
			v1: map[string]string{"memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids", "cpu": "/sys/fs/cgroup/cpu",
				"cpuacct": "/sys/fs/cgroup/cpuacct", "cpuset": "/sys/fs/cgroup/cpuset", "devices": "/sys/fs/cgroup/devices",
				"freezer": "/sys/fs/cgroup/freezer", "blkio": "/sys/fs/cgroup/blkio"}},
		{fixture: "v2-systemd-host", hasV2: true, v2Path: "/user.slice/user-1000.slice/user@1000.service/app.slice/ndtrace.service",
			dirs: []string{"/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/ndtrace.service"},
			rel:  "/user.slice/user-1000.slice/user@1000.service/app.slice/ndtrace.service"},
		{fixture: "v2-cgroupns-k8s", hasV2: true, v2Path: "/", dirs: []string{"/sys/fs/cgroup"}},
		{fixture: "v2-docker-cgroupns-host", hasV2: true, v2Path: "/system.slice/docker-0123abcd.scope", dirs: []string{"/sys/fs/cgroup"}},
		{fixture: "v2-outside-ns", parseErr: errOutsideNamespace},
		{fixture: "v2-mount-outside-ns", hasV2: true, v2Path: "/", locErr: `root "/..": cgroup is outside`},
		{fixture: "v2-mount-elsewhere", hasV2: true, v2Path: "/kubepods/burstable/pod1/ctr",
			locErr: "root /kubepods/besteffort does not contain /kubepods/burstable/pod1/ctr"},
		{fixture: "v2-escaped-mountpoint", hasV2: true, v2Path: "/jobs/a b", dirs: []string{`/mnt/cgroup two\x/jobs/a b`}, rel: "/jobs/a b"},
		{fixture: "v2-overmount", hasV2: true, v2Path: "/worker", dirs: []string{"/sys/fs/cgroup", "/sys/fs/cgroup/worker"}},
		{fixture: "v2-worker-leaf", hasV2: true, v2Path: "/kubepods/pod1/ctr/ndtrace-worker",
			dirs: []string{"/sys/fs/cgroup/kubepods/pod1/ctr/ndtrace-worker"}, rel: "/kubepods/pod1/ctr/ndtrace-worker"},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			seen[tc.fixture] = true
			cg, mi := readFixture(t, tc.fixture)
			pc, err := parseProcCgroup(cg)
			if tc.parseErr != nil {
				if !errors.Is(err, tc.parseErr) {
					t.Fatalf("parseProcCgroup: err %v, want %v", err, tc.parseErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseProcCgroup: %v", err)
			}
			if pc.HasV2 != tc.hasV2 || pc.V2Path != tc.v2Path {
				t.Fatalf("parseProcCgroup: HasV2 %v path %q, want %v %q", pc.HasV2, pc.V2Path, tc.hasV2, tc.v2Path)
			}
			mounts, err := parseMountinfo(mi)
			if err != nil {
				t.Fatalf("parseMountinfo: %v", err)
			}
			if tc.v1 != nil {
				if got := v1Mounts(mounts); !reflect.DeepEqual(got, tc.v1) {
					t.Errorf("v1Mounts = %v, want %v", got, tc.v1)
				}
			}
			if !pc.HasV2 {
				return
			}
			locs, err := locate(pc.V2Path, mounts)
			if tc.locErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.locErr) {
					t.Fatalf("locate: err %v, want one containing %q", err, tc.locErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("locate: %v", err)
			}
			var dirs []string
			for _, l := range locs {
				dirs = append(dirs, l.Dir)
			}
			if !reflect.DeepEqual(dirs, tc.dirs) {
				t.Errorf("locate dirs = %q, want %q", dirs, tc.dirs)
			}
			if locs[0].Rel != tc.rel {
				t.Errorf("locate rel = %q, want %q", locs[0].Rel, tc.rel)
			}
		})
	}
	for _, name := range fixtureNames(t) {
		if !seen[name] {
			t.Errorf("fixture %s has no test case", name)
		}
	}
}

func TestParseProcCgroupErrors(t *testing.T) {
	for _, in := range []string{
		"0::relative\n",
		"0::/a/../b\n",
		"0::/a//b\n",
		"0::/a/\n",
		"0::/..\n",
		"0::/\n0::/\n",
		"x::/\n",
		"-1::/\n",
		"0:/\n",
		"3::/user.slice\n", // v1 line without controllers
		"0::/a\x01b\n",
	} {
		if pc, err := parseProcCgroup([]byte(in)); err == nil {
			t.Errorf("parseProcCgroup(%q) = %+v, want an error", in, pc)
		}
	}
	pc, err := parseProcCgroup([]byte("12:rdma:/\n1:name=systemd:/x:y\n0::/a:b/c d\n"))
	if err != nil {
		t.Fatal(err)
	}
	if pc.V2Path != "/a:b/c d" || pc.V1["name=systemd"] != "/x:y" || pc.V1["rdma"] != "/" {
		t.Errorf("parseProcCgroup = %+v", pc)
	}
}

func TestParseMountinfoErrors(t *testing.T) {
	for _, in := range []string{
		"41 31 0:38 / /sys/fs/cgroup rw,relatime cgroup2 cgroup2 rw\n", // no separator
		"41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2\n",           // too short
		"x 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
		"41 y 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
		`41 31 0:38 / /sys/fs/cg\04 rw - cgroup2 cgroup2 rw` + "\n",
		`41 31 0:38 / /sys/fs/cg\999 rw - cgroup2 cgroup2 rw` + "\n",
		`41 31 0:38 / /sys/fs/cg\400 rw - cgroup2 cgroup2 rw` + "\n",
	} {
		if m, err := parseMountinfo([]byte(in)); err == nil {
			t.Errorf("parseMountinfo(%q) = %+v, want an error", in, m)
		}
	}
	// Optional fields before the separator.
	m, err := parseMountinfo([]byte("26 23 0:25 / /sys/fs/cgroup rw,nosuid shared:4 master:1 - cgroup2 cgroup2 rw,nsdelegate\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []mountInfo{{ID: 26, ParentID: 23, Root: "/", MountPoint: "/sys/fs/cgroup", Options: "rw,nosuid",
		FSType: "cgroup2", Source: "cgroup2", SuperOpts: "rw,nsdelegate"}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("parseMountinfo = %+v, want %+v", m, want)
	}
}

func TestParseInterfaceFiles(t *testing.T) {
	kv, err := parseFlatKeyed([]byte("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 1\n"))
	if err != nil || kv["oom_kill"] != 1 || kv["max"] != 12 || len(kv) != 6 {
		t.Errorf("parseFlatKeyed = %v, %v", kv, err)
	}
	for _, bad := range []string{"populated\n", "populated x\n", " 1\n"} {
		if _, err := parseFlatKeyed([]byte(bad)); err == nil {
			t.Errorf("parseFlatKeyed(%q): want an error", bad)
		}
	}
	if pids, err := parsePids([]byte("1\n0\n4242\n")); err != nil || !reflect.DeepEqual(pids, []int{1, 0, 4242}) {
		t.Errorf("parsePids = %v, %v", pids, err)
	}
	if _, err := parsePids([]byte("1\n-3\n")); err == nil {
		t.Error("parsePids(-3): want an error")
	}
	if v, err := parseSingleInt([]byte("max\n")); err != nil || v != -1 {
		t.Errorf("parseSingleInt(max) = %v, %v", v, err)
	}
	if v, err := parseSingleInt([]byte("104857600\n")); err != nil || v != 104857600 {
		t.Errorf("parseSingleInt = %v, %v", v, err)
	}
	if got := parseControllers([]byte("cpuset cpu io memory hugetlb pids rdma misc\n")); len(got) != 8 || got[3] != "memory" {
		t.Errorf("parseControllers = %q", got)
	}
}

func TestDetectUnavailableFixtures(t *testing.T) {
	for _, tc := range []struct{ fixture, want string }{
		{"v1-only-old-kernel", "no cgroup v2 entry"},
		{"v1-only", "no cgroup2 filesystem is mounted in this mount namespace (memory is bound to cgroup v1 at /sys/fs/cgroup/memory, pids is bound to cgroup v1 at /sys/fs/cgroup/pids)"},
		{"v2-outside-ns", "outside this process's cgroup namespace"},
		{"v2-mount-outside-ns", "no cgroup2 mount exposes our cgroup /"},
		{"v2-mount-elsewhere", "does not contain"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			dir := filepath.Join("testdata", "proc", tc.fixture)
			m, err := detect(config{procCgroup: filepath.Join(dir, "cgroup"), mountinfo: filepath.Join(dir, "mountinfo"),
				required: []string{controllerMemory, controllerPids}})
			if err == nil {
				m.Close()
				t.Fatalf("detect succeeded: %v", m)
			}
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("detect: %v; want ErrUnavailable containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckCgroupPath(t *testing.T) {
	for p, ok := range map[string]bool{"/": true, "/a/b": true, "/a b/c:d": true, "": false, "a": false, "/a/": false,
		"/a/./b": false, "/../a": false, "/..": false, "/a/..": false, "/..a": true, "/a\nb": false} {
		if err := checkCgroupPath(p); (err == nil) != ok {
			t.Errorf("checkCgroupPath(%q) = %v, want ok=%v", p, err, ok)
		}
	}
}

// FuzzParseProcCgroup checks that parseProcCgroup never panics and only accepts safe v2 paths.
func FuzzParseProcCgroup(f *testing.F) {
	for _, name := range fixtureNames(f) {
		cg, _ := readFixture(f, name)
		f.Add(cg)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pc, err := parseProcCgroup(data)
		if err != nil || !pc.HasV2 {
			return
		}
		if err := checkCgroupPath(pc.V2Path); err != nil || path.Clean(pc.V2Path) != pc.V2Path {
			t.Fatalf("accepted unsafe v2 path %q", pc.V2Path)
		}
	})
}

// FuzzParseMountinfo checks that parseMountinfo never panics and that locate only ever yields a
// clean directory at or below the mount point it was found through.
func FuzzParseMountinfo(f *testing.F) {
	for _, name := range fixtureNames(f) {
		cg, mi := readFixture(f, name)
		pc, _ := parseProcCgroup(cg)
		f.Add(mi, pc.V2Path)
	}
	f.Fuzz(func(t *testing.T, data []byte, cg string) {
		mounts, err := parseMountinfo(data)
		if err != nil {
			return
		}
		locs, err := locate(cg, mounts)
		if err != nil {
			return
		}
		for _, l := range locs {
			mp := l.Mount.MountPoint
			if path.Clean(l.Dir) != l.Dir || !(l.Dir == mp || strings.HasPrefix(l.Dir, strings.TrimSuffix(mp, "/")+"/")) {
				t.Fatalf("location %q escapes mount point %q (cgroup %q, root %q)", l.Dir, mp, cg, l.Mount.Root)
			}
			for _, elem := range strings.Split(l.Dir, "/") {
				if elem == ".." {
					t.Fatalf("location %q has ..", l.Dir)
				}
			}
		}
	})
}

// FuzzParseFlatKeyed checks the interface-file parsers never panic.
func FuzzParseFlatKeyed(f *testing.F) {
	f.Add([]byte("populated 1\nfrozen 0\n"))
	f.Add([]byte("1\n2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		parseFlatKeyed(data)
		parsePids(data)
		parseSingleInt(data)
		parseControllers(data)
	})
}
