package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ndtrace/ndtrace/internal/userdirs"
)

// nativeSource is the sandbox's native helper (sandbox/native), a CPython extension the zygote
// loads: it creates the item's namespaces, drops capabilities, applies Landlock and seccomp,
// installs the audit hook, and is the tracer itself (docs/sandbox.md). It is our own code,
// compiled once per machine with the system C compiler, or prebuilt (NDTRACE_NATIVE).
//
//go:embed native/*.c native/*.h
var nativeSource embed.FS

// nativeFiles are nativeSource's files (name and content), sorted by name.
var nativeFiles = func() [][2]string {
	entries, err := fs.ReadDir(nativeSource, "native")
	if err != nil {
		panic(err)
	}
	var files [][2]string
	for _, e := range entries {
		b, err := fs.ReadFile(nativeSource, "native/"+e.Name())
		if err != nil {
			panic(err)
		}
		files = append(files, [2]string{e.Name(), string(b)})
	}
	return files
}()

// nativeVersion identifies nativeSource; a prebuilt helper must carry it (see BuildNative).
var nativeVersion = func() string {
	h := sha256.New()
	for _, f := range nativeFiles {
		fmt.Fprintf(h, "%s\x00%d\x00%s", f[0], len(f[1]), f[1])
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}()

// nativeMarker is the string a helper built from nativeSource contains.
func nativeMarker() string { return "ndtrace-native-source:" + nativeVersion }

// NativeEnv names the environment variable that points at a prebuilt native helper (the
// worker image sets it; see deploy/Dockerfile). When it is unset the helper is compiled on
// first use into the user's cache directory.
const NativeEnv = "NDTRACE_NATIVE"

var (
	nativeOnce sync.Once
	nativePath string
	nativeErr  error
)

// nativeHelper returns the path of a native helper built from this binary's source.
func nativeHelper() (string, error) {
	nativeOnce.Do(func() { nativePath, nativeErr = findNative(context.Background()) })
	return nativePath, nativeErr
}

func findNative(ctx context.Context) (string, error) {
	if p := os.Getenv(NativeEnv); p != "" {
		if err := checkNative(p); err != nil {
			return "", fmt.Errorf("sandbox: %s=%s: %w", NativeEnv, p, err)
		}
		return p, nil
	}
	dirs, err := nativeCacheDirs()
	var tried []string
	if err != nil {
		tried = append(tried, err.Error())
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, "_ndtrace_native-"+nativeVersion+".so")
		if checkNative(p) == nil {
			return p, nil
		}
		err := BuildNative(ctx, p)
		if err == nil {
			return p, nil
		}
		tried = append(tried, err.Error())
		if errors.Is(err, errNoCompiler) {
			break
		}
	}
	return "", fmt.Errorf("sandbox: no native helper: %s (install a C compiler, e.g. apt-get install gcc libc6-dev, or set %s to a helper built with `ndtrace native-helper`)",
		strings.Join(tried, "; "), NativeEnv)
}

// nativeCacheDirs are where a compiled helper is kept: $NDTRACE_CACHE_DIR, else the user's
// ndtrace folder (internal/userdirs: the user's cache directory, or /var/tmp/ndtrace-UID checked to
// be ours; a per-uid folder in /tmp that anyone could have made first would load their helper).
func nativeCacheDirs() ([]string, error) {
	var dirs []string
	if d := os.Getenv("NDTRACE_CACHE_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	d, err := userdirs.Base(false)
	if err == nil {
		dirs = append(dirs, d)
	}
	return dirs, err
}

// checkNative reports whether p is a helper built from this binary's source.
func checkNative(p string) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte(nativeMarker())) {
		return fmt.Errorf("%s was not built from this version of ndtrace (rebuild it)", p)
	}
	return nil
}

var errNoCompiler = errors.New("no C compiler (cc or gcc)")

// BuildNative compiles the sandbox's native helper to out (the worker image runs it at build
// time through `ndtrace native-helper`; otherwise sandboxes call it on first use). It needs a C
// compiler and the kernel headers (Debian: gcc libc6-dev), not Python's headers.
func BuildNative(ctx context.Context, out string) error {
	cc := os.Getenv("CC")
	if cc == "" {
		for _, c := range []string{"cc", "gcc"} {
			if p, err := exec.LookPath(c); err == nil {
				cc = p
				break
			}
		}
	}
	if cc == "" {
		return errNoCompiler
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("native helper: %w", err)
	}
	dir, err := os.MkdirTemp(filepath.Dir(out), "ndtrace_native-*")
	if err != nil {
		return fmt.Errorf("native helper: %w", err)
	}
	defer os.RemoveAll(dir)
	marker := fmt.Sprintf("__attribute__((used, visibility(\"default\"))) const char ndtrace_native_version[] = %q;\n", nativeMarker())
	args := []string{"-O2", "-shared", "-fPIC", "-Wall", "-o", "", "-I", dir}
	for _, f := range append(nativeFiles, [2]string{"version.c", marker}) {
		p := filepath.Join(dir, f[0])
		if err := os.WriteFile(p, []byte(f[1]), 0o644); err != nil {
			return fmt.Errorf("native helper: %w", err)
		}
		if strings.HasSuffix(p, ".c") {
			args = append(args, p)
		}
	}
	tmp := out + fmt.Sprintf(".tmp-%d", os.Getpid())
	defer os.Remove(tmp)
	args[5] = tmp
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cc, args...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("compile native helper with %s: %v: %s", cc, err, bytes.TrimSpace(msg))
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return fmt.Errorf("native helper: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("native helper: %w", err)
	}
	return nil
}
