package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Bind mounts the host folder Host read-only at the fixed path At inside the sandbox (Config.Binds).
//
// A worker keeps its checkouts and environments in folders of its own (a random name in its
// scratch folder): mounted at the same path, they show in everything the traced code computes
// from its own location (__file__, os.getcwd(), a parent folder walked up to, sys.path, a
// hash of a path, the addresses a longer path shifts), so the same repository gave other values
// on every worker. Mounted at a fixed path, nothing of the worker's folders is visible inside.
type Bind struct {
	Host string
	At   string
}

// reservedMounts are the sandbox's own paths, which no Bind may cover or fall inside.
var reservedMounts = []string{"/usr", "/tmp", "/proc", "/dev", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
	"/libx32", "/etc", supportMount}

// checkBinds checks Config.Binds: absolute, clean, existing host folders, each at its own path
// that is not /, not one of the sandbox's own (reservedMounts) nor inside or around another
// bind's, nor around a same-path mount (ReadOnly, PythonPath outside every bind).
func (c Config) checkBinds() error {
	for i, b := range c.Binds {
		if err := checkHostPath("bind's host folder", b.Host); err != nil {
			return err
		}
		if fi, err := os.Stat(b.Host); err != nil {
			return fmt.Errorf("sandbox: bind: %w", err)
		} else if !fi.IsDir() {
			return fmt.Errorf("sandbox: bind: %s is not a directory", b.Host)
		}
		if !filepath.IsAbs(b.At) || filepath.Clean(b.At) != b.At || b.At == "/" {
			return fmt.Errorf("sandbox: bind of %s at %q: want a clean absolute path other than /", b.Host, b.At)
		}
		for _, r := range reservedMounts {
			if within(b.At, r) || within(r, b.At) {
				return fmt.Errorf("sandbox: bind of %s at %s: the sandbox's own %s", b.Host, b.At, r)
			}
		}
		for j, o := range c.Binds {
			if j != i && (within(b.At, o.At) || within(o.At, b.At)) {
				return fmt.Errorf("sandbox: binds at %s and %s overlap", b.At, o.At)
			}
		}
	}
	for _, p := range append(append([]string{}, c.ReadOnly...), c.PythonPath...) {
		if q := c.inside(p); q == filepath.Clean(p) {
			for _, b := range c.Binds {
				if within(b.At, q) || within(q, b.At) {
					return fmt.Errorf("sandbox: read-only path %s and the bind at %s overlap", p, b.At)
				}
			}
		}
	}
	return nil
}

// inside is host path p as the sandbox sees it: below a bind's host folder, at the bind's path;
// else p itself (cleaned).
func (c Config) inside(p string) string {
	p = filepath.Clean(p)
	for _, b := range c.Binds {
		h := filepath.Clean(b.Host)
		if within(p, h) {
			return b.At + strings.TrimPrefix(p, h)
		}
	}
	return p
}

// insideAll is inside of each path.
func (c Config) insideAll(ps []string) []string {
	if len(ps) == 0 || len(c.Binds) == 0 {
		return ps
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = c.inside(p)
	}
	return out
}

// insideConfig is c as the sandbox's interpreter sees it: ReadOnly and PythonPath inside (their
// paths below a bind's host folder at the bind's path).
func (c Config) insideConfig() Config {
	if len(c.Binds) == 0 {
		return c
	}
	in := c
	in.ReadOnly = c.insideAll(c.ReadOnly)
	in.PythonPath = c.insideAll(c.PythonPath)
	return in
}

// sameMounts is the configured paths the backend mounts at the same path (mounts, less those a
// bind covers).
func (c Config) sameMounts() []string {
	var out []string
	for _, p := range c.mounts() {
		if c.inside(p) == p {
			out = append(out, p)
		}
	}
	return out
}

// host is path p, as the sandbox's interpreter sees it, on the host: below a bind's path, below
// the bind's host folder; else p itself (cleaned).
func (c Config) host(p string) string {
	p = filepath.Clean(p)
	for _, b := range c.Binds {
		if within(p, b.At) {
			return filepath.Clean(b.Host) + strings.TrimPrefix(p, b.At)
		}
	}
	return p
}

// boundSource is dirSource of the folder dir as the sandbox's interpreter sees it, its files read
// from where host puts them (nil: dir itself). A name outside dir is no file of it, whatever the
// host folder holds.
func boundSource(dir string, host func(string) string) traceSource {
	dir = filepath.Clean(dir)
	h := dir
	if host != nil {
		h = host(dir)
	}
	src := dirSource(h, verifyFileBytes, verifyFiles)
	if h == dir {
		return src
	}
	return func(name string) (*traceText, bool) {
		if !filepath.IsAbs(name) || strings.IndexByte(name, 0) >= 0 {
			return nil, false
		}
		c := filepath.Clean(name)
		if !pathWithin(dir, c) {
			return nil, false
		}
		return src(h + strings.TrimPrefix(c, dir))
	}
}

// insideTargets is a request's trace targets as the interpreter sees them: an absolute one inside
// (a folder's keeps its trailing slash); the others as they are.
func (c Config) insideTargets(ts []string) []string {
	if len(ts) == 0 || len(c.Binds) == 0 {
		return ts
	}
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t
		if filepath.IsAbs(t) {
			out[i] = c.inside(t)
			if strings.HasSuffix(t, "/") && out[i] != "/" {
				out[i] += "/"
			}
		}
	}
	return out
}
