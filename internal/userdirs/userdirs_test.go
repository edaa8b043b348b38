package userdirs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaults(t *testing.T) {
	uid := os.Getuid()
	root := t.TempDir()
	fallbackRoot = root
	t.Cleanup(func() { fallbackRoot = "/var/tmp" })
	cache := filepath.Join(t.TempDir(), "cache")
	readOnly := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(readOnly, 0o555); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(root, fmt.Sprintf("ndtrace-%d", uid))
	tests := []struct {
		name    string
		env     map[string]string
		fn      func() (string, error)
		want    string
		sandbox bool
	}{
		{"variable wins", map[string]string{ScratchEnv: "/srv/x", "XDG_CACHE_HOME": cache}, ScratchDir, "/srv/x", true},
		{"state variable", map[string]string{StateEnv: "/srv/s"}, StateDir, "/srv/s", false},
		{"state in the cache directory", map[string]string{"XDG_CACHE_HOME": cache}, StateDir, filepath.Join(cache, "ndtrace", "state"), false},
		{"no HOME", map[string]string{"HOME": ""}, EnvsDir, filepath.Join(own, "envs"), true},
		{"HOME not writable", map[string]string{"HOME": readOnly}, StateDir, filepath.Join(own, "state"), false},
		{"cache under /tmp is hidden from the sandbox", map[string]string{"XDG_CACHE_HOME": "/tmp/x"}, ScratchDir, filepath.Join(own, "scratch"), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{ScratchEnv, EnvsEnv, StateEnv, "XDG_CACHE_HOME"} {
				t.Setenv(k, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if uid == 0 && tc.env["HOME"] == readOnly {
				return // root writes anywhere
			}
			got, err := tc.fn()
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	// The per-uid folder is private (root's is open: its sandboxes run as other uids).
	fi, err := os.Stat(own)
	if err != nil {
		t.Fatal(err)
	}
	if want := os.FileMode(0o700); uid != 0 && fi.Mode().Perm() != want {
		t.Errorf("%s has mode %v, want %v", own, fi.Mode().Perm(), want)
	}
}

// TestFallbackOwnedByAnother: a per-uid folder someone else made is refused.
func TestFallbackOwnedByAnother(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("making a folder owned by another uid needs root (CI runs the tests as root)")
	}
	root := t.TempDir()
	fallbackRoot = root
	t.Cleanup(func() { fallbackRoot = "/var/tmp" })
	d := filepath.Join(root, "ndtrace-0")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv(ScratchEnv, "")
	_, err := ScratchDir()
	var de *DirError
	if !errors.As(err, &de) || de.Path != d || !strings.Contains(err.Error(), "not a directory owned by uid 0") {
		t.Fatalf("got %v, want a DirError for %s", err, d)
	}
}

func TestCheckWritable(t *testing.T) {
	d := filepath.Join(t.TempDir(), "a", "b")
	if err := CheckWritable(d); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(d); len(entries) != 0 {
		t.Errorf("the probe stayed: %v", entries)
	}
	if os.Getuid() == 0 {
		return // root writes anywhere
	}
	ro := t.TempDir()
	os.Chmod(ro, 0o555)
	var de *DirError
	if err := CheckWritable(ro); !errors.As(err, &de) || de.Describe() != "permission denied" {
		t.Errorf("got %v, want permission denied", err)
	}
}
