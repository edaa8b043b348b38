package pyenv

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "gocloud.dev/blob/memblob"

	"github.com/ndtrace/ndtrace/crawl/pyreq"
	"github.com/ndtrace/ndtrace/internal/costbound"
	"github.com/ndtrace/ndtrace/internal/testwheels"
	"github.com/ndtrace/ndtrace/store"
)

// needPip skips (or, under CI, fails) when the interpreter has no pip or venv.
func needPip(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	if err := exec.Command(DefaultPython, "-c", "import pip, venv, ensurepip").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s has no pip or venv: %v", DefaultPython, err)
		}
		t.Skipf("%s has no pip or venv: %v", DefaultPython, err)
	}
}

func reqs(t *testing.T, texts ...string) []pyreq.Requirement {
	t.Helper()
	rs, err := pyreq.ParseAll("test", texts)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// importAnswer imports fixture_a from site-packages with the interpreter, as another uid would
// see the files, and returns what answer() gives.
func importAnswer(t *testing.T, sp string) string {
	t.Helper()
	cmd := exec.Command(DefaultPython, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import fixture_a; print(fixture_a.answer())", sp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("import: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestEnsureIndex(t *testing.T) {
	needPip(t)
	ctx := context.Background()
	ix := testwheels.Serve(t, testwheels.Fixtures())
	st, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var pips atomic.Int64
	onPip := func([]string) { pips.Add(1) }
	cfg := Config{IndexURL: ix.SimpleURL(), Timeout: 2 * time.Minute}
	c := &Cache{Dir: t.TempDir(), Store: st, OnPip: onPip}
	env, err := c.Ensure(ctx, cfg, reqs(t, "ndtrace-fixture-a"))
	if err != nil {
		t.Fatal(err)
	}
	if pips.Load() != 3 {
		t.Errorf("%d pip runs, want 3 (resolve, download, install)", pips.Load())
	}
	if len(env.Packages) != 2 || env.Packages[1].Name != "ndtrace-fixture-b" || env.Packages[1].Version != "1.2" || len(env.Packages[0].SHA256) != 64 {
		t.Errorf("packages %+v: want fixture-a 1.0 and fixture-b 1.2 with hashes", env.Packages)
	}
	// No bytecode is kept (the wheel shipped some).
	filepath.WalkDir(env.Dir, func(p string, d fs.DirEntry, err error) error {
		if strings.HasSuffix(p, ".pyc") || d.Name() == "__pycache__" {
			t.Errorf("bytecode in the environment: %s", p)
		}
		return nil
	})
	if got := importAnswer(t, env.SitePackages); got != "42" {
		t.Errorf("answer() = %s, want 42", got)
	}
	if !strings.HasSuffix(env.SitePackages, filepath.Join(env.Hash, "lib", "python3.11", "site-packages")) {
		t.Errorf("site-packages %s", env.SitePackages)
	}
	// Everything is readable by every uid.
	filepath.WalkDir(env.Dir, func(p string, d fs.DirEntry, err error) error {
		info, _ := os.Lstat(p)
		if info.Mode()&fs.ModeSymlink == 0 && info.Mode().Perm()&0o004 == 0 {
			t.Errorf("%s is not world-readable: %v", p, info.Mode())
		}
		return nil
	})
	for _, k := range []string{"envs/" + env.Hash + ".tar", "envs/" + env.Hash + ".json"} {
		if ok, _ := st.Exists(ctx, k); !ok {
			t.Errorf("%s not stored", k)
		}
	}

	// The same worker again: the local cache, no pip.
	pips.Store(0)
	again, err := c.Ensure(ctx, cfg, reqs(t, "ndtrace-fixture-a"))
	if err != nil || again.Hash != env.Hash || again.SitePackages != env.SitePackages || pips.Load() != 0 {
		t.Errorf("second Ensure: %+v, %v, %d pip runs; want %s from the cache and no pip run", again, err, pips.Load(), env.Hash)
	}
	// Another worker (an empty local cache, the same store): extracted from the store, no pip.
	served := ix.Requests.Load()
	other := &Cache{Dir: t.TempDir(), Store: st, OnPip: onPip}
	got, err := other.Ensure(ctx, cfg, reqs(t, "ndtrace-fixture-a"))
	if err != nil || got.Hash != env.Hash || pips.Load() != 0 || ix.Requests.Load() != served {
		t.Fatalf("other worker: %+v, %v, %d pip runs, %d index requests", got, err, pips.Load(), ix.Requests.Load()-served)
	}
	if got := importAnswer(t, got.SitePackages); got != "42" {
		t.Errorf("answer() from the stored environment = %s, want 42", got)
	}
	// Another request that resolves to the same set shares the environment.
	pips.Store(0)
	same, err := (&Cache{Dir: t.TempDir(), Store: st, OnPip: onPip}).Ensure(ctx, cfg, reqs(t, "ndtrace-fixture-a", "ndtrace-fixture-b>=1.1"))
	if err != nil || same.Hash != env.Hash || pips.Load() != 1 {
		t.Errorf("same set: %+v, %v, %d pip runs; want %s after resolution only", same, err, pips.Load(), env.Hash)
	}
	// A marker that excludes everything: nothing to install, nothing to mount.
	none, err := c.Ensure(ctx, cfg, reqs(t, "ndtrace-fixture-a; python_version < '3'"))
	if err != nil || none.SitePackages != "" {
		t.Errorf("nothing to install: %+v, %v", none, err)
	}
}

func TestEnsureFindLinks(t *testing.T) {
	needPip(t)
	ctx := context.Background()
	wheels := testwheels.Folder(t, "", testwheels.Fixtures())
	c := &Cache{Dir: t.TempDir()}
	env, err := c.Ensure(ctx, Config{FindLinks: []string{wheels}}, reqs(t, "ndtrace-fixture-a==1.0"))
	if err != nil {
		t.Fatal(err)
	}
	if got := importAnswer(t, env.SitePackages); got != "42" {
		t.Errorf("answer() = %s, want 42", got)
	}
}

func TestEnsureFailures(t *testing.T) {
	needPip(t)
	ctx := context.Background()
	ix := testwheels.Serve(t, testwheels.Fixtures())
	var pips atomic.Int64
	c := &Cache{Dir: t.TempDir(), OnPip: func([]string) { pips.Add(1) }}
	cfg := Config{IndexURL: ix.SimpleURL()}
	for _, tc := range []struct {
		reqs []string
		want string
	}{
		{[]string{"no-such-package==9"}, "ERROR: No matching distribution found for no-such-package==9"},
		{[]string{"ndtrace-fixture-a", "ndtrace-fixture-b<1"}, "ERROR: ResolutionImpossible"},
	} {
		_, err := c.Ensure(ctx, cfg, reqs(t, tc.reqs...))
		var pe *Error
		if !errors.As(err, &pe) || !strings.HasPrefix(pe.Reason, "pip: ERROR: ") || !strings.Contains(pe.Reason, tc.want) {
			t.Errorf("Ensure(%v): %v; want an *Error with %q", tc.reqs, err, tc.want)
		}
	}
	// A timeout is a reason too.
	_, err := c.Ensure(ctx, Config{IndexURL: ix.SimpleURL(), Timeout: time.Millisecond}, reqs(t, "ndtrace-fixture-b"))
	var pe *Error
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "not built within") {
		t.Errorf("timeout: %v", err)
	}
}

func TestParseReport(t *testing.T) {
	good := `{"version":"1","install":[{"download_info":{"url":"https://x.example/files/a-1.0-py3-none-any.whl","archive_info":{"hash":"sha256=` + strings.Repeat("ab", 32) + `"}},"metadata":{"name":"A_b","version":"1.0"}},
	{"download_info":{"url":"https://x.example/b-2.tar.gz","archive_info":{"hashes":{"sha256":"` + strings.Repeat("cd", 32) + `"}}},"metadata":{"name":"b","version":"2"}}]}`
	pkgs, err := parseReport([]byte(good))
	if err != nil || len(pkgs) != 2 || pkgs[0].Name != "a-b" || pkgs[0].SHA256 != strings.Repeat("ab", 32) || pkgs[0].File != "a-1.0-py3-none-any.whl" || pkgs[1].SHA256 != strings.Repeat("cd", 32) {
		t.Errorf("parseReport: %+v, %v", pkgs, err)
	}
	for _, bad := range []string{`{"install":[{"metadata":{"name":"a","version":"1 --index-url x"}}]}`,
		`{"install":[{"metadata":{"name":"-e","version":"1"}}]}`, `not json`} {
		if _, err := parseReport([]byte(bad)); err == nil {
			t.Errorf("parseReport(%s) accepted", bad)
		}
	}
}

// parseReportCost bounds what parseReport allocates per byte of a report: the decoder's buffer,
// the skipped values, and the entries (at most MaxResolved, which Fixed pays for) and their
// packages.
var parseReportCost = costbound.Bound{PerByte: 16, Fixed: 4 << 20}

// TestReportCaps feeds parseReport and readReport hostile reports: each is refused by its cap,
// naming it, with allocations within parseReportCost (a report of millions of empty entries,
// decoded whole, allocated 112 bytes per byte: 1.8 GiB for 16 MiB); a larger file is refused
// before it is read.
func TestReportCaps(t *testing.T) {
	entries := func(n int) []byte { return []byte(`{"install":[` + strings.Repeat(`{},`, n) + `{}]}`) }
	tests := []struct {
		name   string
		data   []byte
		reason string // a part of the *Error's reason, "" when accepted
	}{
		{"MaxResolved entries", []byte(`{"install":[` + strings.Repeat(`{"metadata":{"name":"a","version":"1"}},`, MaxResolved-1) + `{"metadata":{"name":"a","version":"1"}}]}`), ""},
		{"one entry too many", entries(MaxResolved), "more than 5000 packages"},
		{"millions of empty entries", entries((MaxReportBytes - 20) / 3), "more than 5000 packages"},
		{"a large skipped value", []byte(`{"x":"` + strings.Repeat("a", MaxReportBytes-30) + `","install":[]}`), ""},
		{"over the cap", append(entries((MaxReportBytes)/3), ' '), "larger than 16777216 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			n := costbound.Check(t, "parseReport", len(tc.data), parseReportCost, func() { _, err = parseReport(tc.data) })
			t.Logf("%d bytes allocated, %.1f per byte", n, float64(n)/float64(len(tc.data)))
			var pe *Error
			switch {
			case tc.reason == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.reason != "" && (!errors.As(err, &pe) || !strings.Contains(pe.Reason, tc.reason)):
				t.Errorf("got %v, want an *Error with %q", err, tc.reason)
			}
		})
	}
	p := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 1<<30); err != nil { // sparse: 1 GiB of zeros
		t.Fatal(err)
	}
	var err error
	if n := costbound.Allocated(func() { _, err = readReport(p) }); n > 1<<20 {
		t.Errorf("readReport of a 1 GiB file allocated %d bytes", n)
	}
	var pe *Error
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "larger than 16777216 bytes") {
		t.Errorf("readReport of a 1 GiB file: %v", err)
	}
}

func FuzzParseReport(f *testing.F) {
	f.Add([]byte(`{"install":[{"download_info":{"url":"u","archive_info":{"hash":"sha256=00"}},"metadata":{"name":"a","version":"1"}}]}`))
	f.Add([]byte(`{"install":[` + strings.Repeat(`{},`, 100) + `{}], "x": [1, 2, {"a": "b"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var pkgs []Package
		var err error
		costbound.Check(t, "parseReport", len(data), parseReportCost, func() { pkgs, err = parseReport(data) })
		if err != nil {
			return
		}
		for _, p := range pkgs {
			if !pyreq.ValidName(p.Name) || !pyreq.ValidVersion(p.Version) || (p.SHA256 != "" && !hexSHA256.MatchString(p.SHA256)) {
				t.Fatalf("parseReport accepted %+v", p)
			}
		}
	})
}

// tarOf builds a tar of the given headers (regular files get their Linkname as content).
func tarOf(hdrs ...tar.Header) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		if h.Typeflag == tar.TypeReg {
			content := h.Linkname
			h.Linkname, h.Size = "", int64(len(content))
			tw.WriteHeader(&h)
			tw.Write([]byte(content))
			continue
		}
		tw.WriteHeader(&h)
	}
	tw.Close()
	return buf.Bytes()
}

func TestArchiveExtract(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "pkg", "sub"), 0o700)
	os.WriteFile(filepath.Join(src, "pkg", "__init__.py"), []byte("x = 1\n"), 0o600)
	os.WriteFile(filepath.Join(src, "pkg", "sub", "tool"), []byte("#!/bin/sh\n"), 0o700)
	os.Symlink("sub/tool", filepath.Join(src, "pkg", "link"))
	data, size, files, err := Archive(src, "lib/python3.11/site-packages", 1<<20, map[string][]byte{"top.json": []byte("{}")})
	if err != nil || size != 16 || files != 6 {
		t.Fatalf("Archive: %d bytes, %d entries, %v", size, files, err)
	}
	dst := filepath.Join(t.TempDir(), "env")
	if err := Extract(bytes.NewReader(data), dst, 1<<20); err != nil {
		t.Fatal(err)
	}
	sp := filepath.Join(dst, "lib/python3.11/site-packages")
	if data, err := os.ReadFile(filepath.Join(dst, "top.json")); err != nil || string(data) != "{}" {
		t.Errorf("top.json: %q, %v", data, err)
	}
	for p, mode := range map[string]fs.FileMode{"pkg": 0o755 | fs.ModeDir, "pkg/__init__.py": 0o644, "pkg/sub/tool": 0o755} {
		if info, err := os.Stat(filepath.Join(sp, p)); err != nil || info.Mode() != mode {
			t.Errorf("%s: %v, %v; want %v", p, info.Mode(), err, mode)
		}
	}
	if l, err := os.Readlink(filepath.Join(sp, "pkg", "link")); err != nil || l != "sub/tool" {
		t.Errorf("link: %q, %v", l, err)
	}
	if _, _, _, err := Archive(src, "x", 10, nil); !errors.As(err, new(*TooLargeError)) {
		t.Errorf("Archive over the limit: %v", err)
	}
	os.Symlink("/etc/passwd", filepath.Join(src, "pkg", "escape"))
	if _, _, _, err := Archive(src, "x", 1<<20, nil); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("Archive with a link outside: %v", err)
	}
}

func TestExtractRefuses(t *testing.T) {
	dir := func(n string) tar.Header { return tar.Header{Name: n, Typeflag: tar.TypeDir, Mode: 0o755} }
	file := func(n, c string) tar.Header {
		return tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Linkname: c}
	}
	link := func(n, to string) tar.Header { return tar.Header{Name: n, Typeflag: tar.TypeSymlink, Linkname: to} }
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"absolute", tarOf(file("/etc/evil", "x")), "not a clean"},
		{"dotdot", tarOf(file("../evil", "x")), "not a clean"},
		{"inner dotdot", tarOf(dir("a/"), file("a/../../evil", "x")), "not a clean"},
		{"device", tarOf(tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}), "refused"},
		{"fifo", tarOf(tar.Header{Name: "fifo", Typeflag: tar.TypeFifo}), "refused"},
		{"hard link", tarOf(tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}), "refused"},
		{"link outside", tarOf(link("l", "../../etc")), "outside"},
		{"absolute link", tarOf(link("l", "/etc")), "outside"},
		{"deep link outside", tarOf(dir("a/"), link("a/l", "../..")), "outside"},
		{"too large", tarOf(file("big", strings.Repeat("x", 100))), "bytes"},
		{"twice", tarOf(file("f", "a"), file("f", "b")), "exists"},
	}
	for _, tc := range tests {
		root := filepath.Join(t.TempDir(), "env")
		err := Extract(bytes.NewReader(tc.data), root, 50)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	// Writing through a link that stays inside lands inside; nothing lands outside.
	outside := t.TempDir()
	root := filepath.Join(t.TempDir(), "env")
	err := Extract(bytes.NewReader(tarOf(dir("d/"), link("l", "d"), file("l/f", "x"))), root, 50)
	if err != nil {
		t.Errorf("a file through an inner link: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "d", "f")); err != nil {
		t.Errorf("d/f: %v", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("files outside: %v", entries)
	}
}

// FuzzExtract checks that no archive writes outside its root.
func FuzzExtract(f *testing.F) {
	f.Add(tarOf(tar.Header{Name: "a/", Typeflag: tar.TypeDir}, tar.Header{Name: "a/b", Typeflag: tar.TypeReg, Linkname: "x"}))
	f.Add(tarOf(tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "."}, tar.Header{Name: "l/f", Typeflag: tar.TypeReg}))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		root := filepath.Join(parent, "env")
		_ = Extract(bytes.NewReader(data), root, 1<<16)
		entries, _ := os.ReadDir(parent)
		if len(entries) != 1 || entries[0].Name() != "env" {
			t.Fatalf("extraction wrote beside its root: %v", entries)
		}
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type()&fs.ModeSymlink != 0 {
				target, _ := os.Readlink(p)
				rel, _ := filepath.Rel(root, p)
				if !linkInside(filepath.ToSlash(rel), target, "") {
					t.Fatalf("link %s -> %s leaves the root", rel, target)
				}
			}
			return nil
		})
	})
}

// TestEnsureConcurrent builds the same environment on two "workers" at once (their own local
// folders, one store): both get it, and one archive is stored, which both use.
func TestEnsureConcurrent(t *testing.T) {
	needPip(t)
	ctx := context.Background()
	ix := testwheels.Serve(t, testwheels.Fixtures())
	st, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := Config{IndexURL: ix.SimpleURL()}
	envs := make([]Env, 2)
	errs := make([]error, 2)
	done := make(chan int)
	for i := range envs {
		go func() {
			envs[i], errs[i] = (&Cache{Dir: t.TempDir(), Store: st}).Ensure(ctx, cfg, reqs(t, "ndtrace-fixture-a"))
			done <- i
		}()
	}
	<-done
	<-done
	for i := range envs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got := importAnswer(t, envs[i].SitePackages); got != "42" {
			t.Errorf("worker %d: answer() = %s", i, got)
		}
	}
	if envs[0].Hash != envs[1].Hash {
		t.Errorf("hashes %s and %s differ", envs[0].Hash, envs[1].Hash)
	}
	var keys []string
	st.List(ctx, "envs/", func(k string, _ int64) error { keys = append(keys, k); return nil })
	if len(keys) != 3 { // the archive, its descriptor, the request
		t.Errorf("stored %v", keys)
	}
}
