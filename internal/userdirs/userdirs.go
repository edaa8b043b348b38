// Package userdirs decides where ndtrace keeps its files on this machine when the user names no
// folder: repository checkouts (ScratchDir), the environments built for repositories (EnvsDir)
// and long-lived state such as a server's database (StateDir). Every default is per user, so two
// users of one machine never share, or fight over, a folder:
//
//   - the user's cache directory, $XDG_CACHE_HOME or $HOME/.cache (os.UserCacheDir), under
//     "ndtrace", when it is usable: HOME set, the folder writable by us (created if missing), and,
//     for the folders a sandbox mounts when we are root, searchable by every uid;
//   - otherwise /var/tmp/ndtrace-<uid>, created 0700 (0755 for root, whose sandboxes run as other
//     uids) and checked to be a real directory owned by us: containers often run under a uid with
//     no passwd entry and HOME unset or /nonexistent.
//
// The fallback is under /var/tmp, not os.TempDir(): the sandbox mounts checkouts and environments
// at their host paths and gives every item a private /tmp, which would hide them.
//
// An environment variable names each folder outright (NDTRACE_SCRATCH, NDTRACE_ENVS,
// NDTRACE_STATE); callers give a flag precedence over all of these.
package userdirs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Environment variables that name the folders.
const (
	ScratchEnv = "NDTRACE_SCRATCH"
	EnvsEnv    = "NDTRACE_ENVS"
	StateEnv   = "NDTRACE_STATE"
)

// ScratchDir is the folder for repository checkouts: $NDTRACE_SCRATCH, else "scratch" in Base(true).
func ScratchDir() (string, error) { return dir(ScratchEnv, "scratch", true) }

// EnvsDir is the local cache of environments built for repositories: $NDTRACE_ENVS, else "envs" in
// Base(true).
func EnvsDir() (string, error) { return dir(EnvsEnv, "envs", true) }

// StateDir is the folder for long-lived state (a server's database): $NDTRACE_STATE, else "state"
// in Base(false).
func StateDir() (string, error) { return dir(StateEnv, "state", false) }

func dir(env, name string, sandboxed bool) (string, error) {
	if d := os.Getenv(env); d != "" {
		return d, nil
	}
	b, err := Base(sandboxed)
	if err != nil {
		return "", err
	}
	return filepath.Join(b, name), nil
}

// Base is the per-user folder the defaults live in (see the package comment); it exists when Base
// returns. sandboxed says a sandbox mounts what is inside, so when we are root (the sandbox's uids
// are others) every folder above it must be searchable by all.
func Base(sandboxed bool) (string, error) {
	uid := os.Getuid()
	if d, err := os.UserCacheDir(); err == nil && filepath.IsAbs(d) {
		d = filepath.Join(d, "ndtrace")
		if usable(d, sandboxed, uid == 0) {
			return d, nil
		}
	}
	d := fallback(uid)
	if err := ownDir(d, uid); err != nil {
		return "", err
	}
	return d, nil
}

// fallbackRoot holds the per-uid folders (tests change it).
var fallbackRoot = "/var/tmp"

// fallback is the per-uid folder used when the user's cache directory is not usable.
func fallback(uid int) string { return filepath.Join(fallbackRoot, fmt.Sprintf("ndtrace-%d", uid)) }

// usable makes d if missing and reports whether we can write in it; a folder a sandbox mounts
// must not be under /tmp and, when we are root, must be reachable by every uid.
func usable(d string, sandboxed, root bool) bool {
	if sandboxed && strings.HasPrefix(filepath.Clean(d)+"/", "/tmp/") {
		return false
	}
	open := sandboxed && root
	if os.MkdirAll(d, 0o755) != nil {
		return false
	}
	if err := CheckWritable(d); err != nil {
		return false
	}
	if !open {
		return true
	}
	for p := d; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if p == filepath.Dir(p) {
			return true
		}
	}
}

// ownDir makes the per-uid folder d, or checks the one there: a directory (not a link) owned by
// uid, private unless uid is root.
func ownDir(d string, uid int) error {
	mode := os.FileMode(0o700)
	if uid == 0 {
		mode = 0o755
	}
	if err := os.Mkdir(d, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return &DirError{Path: d, Op: "create", Err: err}
	}
	fi, err := os.Lstat(d)
	if err != nil {
		return &DirError{Path: d, Op: "create", Err: err}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != uid {
		return &DirError{Path: d, Op: "use", Err: fmt.Errorf("it is not a directory owned by uid %d (someone else made it)", uid)}
	}
	if fi.Mode().Perm() != mode {
		if err := os.Chmod(d, mode); err != nil {
			return &DirError{Path: d, Op: "use", Err: err}
		}
	}
	return nil
}

// CheckWritable reports, as a *DirError, whether this process can create files in the folder d,
// creating d (and its parents) if missing.
func CheckWritable(d string) error {
	if err := os.MkdirAll(d, 0o755); err != nil {
		return &DirError{Path: d, Op: "create", Err: unwrapPath(err)}
	}
	f, err := os.CreateTemp(d, ".ndtrace-probe-*")
	if err != nil {
		return &DirError{Path: d, Op: "write in", Err: unwrapPath(err)}
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// unwrapPath drops a *PathError's operation and path (the DirError says them) but keeps its cause.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// DirError is a folder this process cannot use.
type DirError struct {
	// Path is the folder; Op what was tried ("create", "write in", "use"); Err why.
	Path string
	Op   string
	Err  error
}

func (e *DirError) Error() string {
	return fmt.Sprintf("cannot %s folder %s as uid %d: %v", e.Op, e.Path, os.Getuid(), e.Err)
}

func (e *DirError) Unwrap() error { return e.Err }

// Describe is e's cause in a few words: "permission denied", "read-only file system".
func (e *DirError) Describe() string {
	var errno syscall.Errno
	if errors.As(e.Err, &errno) {
		return errno.Error()
	}
	return strings.TrimSpace(e.Err.Error())
}
