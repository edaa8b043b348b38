package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// procCgroup is the parsed content of /proc/<pid>/cgroup.
type procCgroup struct {
	// HasV2 reports whether the file has the cgroup v2 entry ("0::<path>"). Kernels since 4.5 always
	// print it, whether or not a cgroup2 filesystem is mounted anywhere.
	HasV2 bool
	// V2Path is the process's cgroup v2 path relative to its cgroup namespace root, validated: it is
	// absolute, clean and has no ".." element. Empty when HasV2 is false.
	V2Path string
	// V1 maps each cgroup v1 controller (or "name=..." named hierarchy) to the process's path in it.
	V1 map[string]string
}

// errOutsideNamespace reports a cgroup path the kernel printed relative to a cgroup namespace root
// that is not its ancestor ("/../sibling"): the group cannot be reached from this namespace.
var errOutsideNamespace = errors.New("cgroup is outside this process's cgroup namespace")

// parseProcCgroup parses /proc/<pid>/cgroup: one "hierarchy-ID:controller-list:cgroup-path" line per
// hierarchy, the cgroup v2 one being "0::<path>". It fails on malformed lines, on more than one v2
// line and on a v2 path that is not absolute and clean (a path outside the reader's cgroup namespace
// prints as "/../..." and fails with errOutsideNamespace).
func parseProcCgroup(data []byte) (procCgroup, error) {
	var pc procCgroup
	for n, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			return procCgroup{}, fmt.Errorf("line %d %q: want ID:controllers:path", n+1, line)
		}
		controllers, p, ok := strings.Cut(rest, ":")
		if !ok {
			return procCgroup{}, fmt.Errorf("line %d %q: want ID:controllers:path", n+1, line)
		}
		if _, err := strconv.ParseUint(id, 10, 31); err != nil {
			return procCgroup{}, fmt.Errorf("line %d %q: hierarchy ID: %w", n+1, line, err)
		}
		if id == "0" && controllers == "" {
			if pc.HasV2 {
				return procCgroup{}, fmt.Errorf("line %d: second cgroup v2 entry", n+1)
			}
			if err := checkCgroupPath(p); err != nil {
				return procCgroup{}, fmt.Errorf("cgroup v2 path %q: %w", p, err)
			}
			pc.HasV2, pc.V2Path = true, p
			continue
		}
		if controllers == "" {
			return procCgroup{}, fmt.Errorf("line %d %q: cgroup v1 entry without controllers", n+1, line)
		}
		if pc.V1 == nil {
			pc.V1 = map[string]string{}
		}
		for _, c := range strings.Split(controllers, ",") {
			pc.V1[c] = p
		}
	}
	return pc, nil
}

// checkCgroupPath validates a cgroup path from /proc (the v2 path of /proc/self/cgroup or the root
// of a cgroup2 mount in mountinfo): absolute, clean, no "..", no control characters.
func checkCgroupPath(p string) error {
	if strings.HasPrefix(p, "/..") && (len(p) == 3 || p[3] == '/') {
		return errOutsideNamespace
	}
	if !strings.HasPrefix(p, "/") {
		return errors.New("not absolute")
	}
	if path.Clean(p) != p {
		return errors.New("not a clean path")
	}
	for _, elem := range strings.Split(p[1:], "/") {
		if elem == ".." {
			return errOutsideNamespace
		}
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f {
			return errors.New("control character in path")
		}
	}
	return nil
}

// mountInfo is one line of /proc/<pid>/mountinfo (proc(5)), with octal escapes decoded.
type mountInfo struct {
	ID, ParentID int
	// Root is the path of the mount's root within its filesystem; for cgroup2 it is relative to the
	// reader's cgroup namespace root.
	Root       string
	MountPoint string
	Options    string // per-mount options ("rw,relatime")
	FSType     string // "cgroup2", "cgroup", ...
	Source     string
	SuperOpts  string // per-superblock options; for cgroup v1 they name the controllers
}

// parseMountinfo parses /proc/<pid>/mountinfo: "ID parentID major:minor root mountpoint options
// [optional fields...] - fstype source superoptions" per line.
func parseMountinfo(data []byte) ([]mountInfo, error) {
	var out []mountInfo
	for n, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, " ")
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(f) < sep+4 {
			return nil, fmt.Errorf("mountinfo line %d %q: malformed", n+1, line)
		}
		id, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: mount ID: %w", n+1, err)
		}
		parent, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: parent ID: %w", n+1, err)
		}
		m := mountInfo{ID: id, ParentID: parent, Options: f[5], FSType: f[sep+1], SuperOpts: f[sep+3]}
		for _, x := range []struct {
			dst *string
			src string
		}{{&m.Root, f[3]}, {&m.MountPoint, f[4]}, {&m.Source, f[sep+2]}} {
			if *x.dst, err = unescapeMountinfo(x.src); err != nil {
				return nil, fmt.Errorf("mountinfo line %d: %w", n+1, err)
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// unescapeMountinfo decodes the octal escapes ("\040" for a space, "\134" for a backslash) the
// kernel uses for white space and backslashes in mountinfo paths.
func unescapeMountinfo(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("truncated escape in %q", s)
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("bad escape in %q", s)
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

// location is a directory through which this process's cgroup v2 group can be reached.
type location struct {
	Mount mountInfo
	// Dir is the group's directory: Mount.MountPoint joined with the group's path below Mount.Root.
	Dir string
	// Rel is the group's path below the mount root: "" when the group is the mount's root.
	Rel string
}

// locate finds the cgroup2 mounts that expose cgroup v2 path cg (from parseProcCgroup), last mounted
// first (a later mount on the same point hides an earlier one). With none it returns an error
// saying why: no cgroup2 mount at all, or mounts whose roots do not contain cg.
func locate(cg string, mounts []mountInfo) ([]location, error) {
	if err := checkCgroupPath(cg); err != nil {
		return nil, fmt.Errorf("cgroup v2 path %q: %w", cg, err)
	}
	locs, rejected := mountsOf(cg, mounts, func(m mountInfo) bool { return m.FSType == "cgroup2" })
	if len(locs) == 0 {
		if len(rejected) == 0 {
			return nil, errors.New("no cgroup2 filesystem is mounted in this mount namespace")
		}
		return nil, fmt.Errorf("no cgroup2 mount exposes our cgroup %s: %s", cg, strings.Join(rejected, "; "))
	}
	return locs, nil
}

// mountsOf finds the mounts that match and expose the group at path p, last mounted first (a later
// mount on the same point hides an earlier one), and says why each matching mount that does not
// was rejected.
func mountsOf(p string, mounts []mountInfo, match func(mountInfo) bool) (locs []location, rejected []string) {
	for i := len(mounts) - 1; i >= 0; i-- {
		m := mounts[i]
		if !match(m) {
			continue
		}
		if err := checkCgroupPath(m.Root); err != nil {
			rejected = append(rejected, fmt.Sprintf("%s (root %q: %v)", m.MountPoint, m.Root, err))
			continue
		}
		if !strings.HasPrefix(m.MountPoint, "/") || path.Clean(m.MountPoint) != m.MountPoint {
			rejected = append(rejected, fmt.Sprintf("%q (mount point not a clean absolute path)", m.MountPoint))
			continue
		}
		var rel string
		switch {
		case p == m.Root:
		case m.Root == "/":
			rel = p
		case strings.HasPrefix(p, m.Root+"/"):
			rel = p[len(m.Root):]
		default:
			rejected = append(rejected, fmt.Sprintf("%s (root %s does not contain %s)", m.MountPoint, m.Root, p))
			continue
		}
		locs = append(locs, location{Mount: m, Dir: path.Join(m.MountPoint, rel), Rel: rel})
	}
	return locs, rejected
}

// v1Mounts maps the controllers bound to cgroup v1 hierarchies to one mount point of theirs, from
// mountinfo. It serves error messages: a controller bound to v1 cannot be used through v2.
func v1Mounts(mounts []mountInfo) map[string]string {
	out := map[string]string{}
	for _, m := range mounts {
		if m.FSType != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(m.SuperOpts, ",") {
			switch opt {
			case "rw", "ro", "noprefix", "clone_children", "xattr", "cpuset_v2_mode", "favordynmods":
				continue
			}
			if strings.Contains(opt, "=") {
				continue // name=systemd, release_agent=...
			}
			if _, ok := out[opt]; !ok {
				out[opt] = m.MountPoint
			}
		}
	}
	return out
}

// parseFlatKeyed parses a cgroup "flat keyed" file (memory.events, pids.events, cgroup.events): one
// "key value" pair per line with an integer value.
func parseFlatKeyed(data []byte) (map[string]int64, error) {
	out := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, " ")
		if !ok || k == "" {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", line, err)
		}
		out[k] = n
	}
	return out, nil
}

// parseControllers parses cgroup.controllers or cgroup.subtree_control: space-separated names.
func parseControllers(data []byte) []string {
	return strings.Fields(string(data))
}

// parsePids parses cgroup.procs: one PID per line. PIDs of processes outside the reader's PID
// namespace print as 0 and are kept as 0.
func parsePids(data []byte) ([]int, error) {
	var out []int
	for _, line := range strings.Fields(string(data)) {
		n, err := strconv.Atoi(line)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad pid %q", line)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseSingleInt parses a one-value file such as memory.peak or memory.current; "max" is -1.
func parseSingleInt(data []byte) (int64, error) {
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad value %q", s)
	}
	return n, nil
}
