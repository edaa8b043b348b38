package crawl

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/internal/costbound"
)

// TestImportRoots lays out projects the ways real ones declare where their packages are, and
// checks the folders an editable install would add to sys.path.
func TestImportRoots(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"flat module", map[string]string{"mod.py": "", "tests/test_mod.py": ""}, nil},
		{"top-level package", map[string]string{"pkg/__init__.py": "", "src.txt": ""}, nil},
		{"src layout, undeclared", map[string]string{"src/pkg/__init__.py": "", "tests/test_pkg.py": ""}, []string{"src"}},
		{"src namespace package", map[string]string{"src/ns/mod.py": ""}, []string{"src"}},
		{"src module", map[string]string{"src/mod.py": ""}, []string{"src"}},
		{"src without python", map[string]string{"src/data.txt": ""}, nil},
		{"setuptools package-dir", map[string]string{"pyproject.toml": "[tool.setuptools]\npackage-dir = {\"\" = \"lib\"}\n", "lib/pkg/__init__.py": ""}, []string{"lib"}},
		{"setuptools find where", map[string]string{"pyproject.toml": "[tool.setuptools.packages.find]\nwhere = [\"code\"]\n", "code/pkg/__init__.py": ""}, []string{"code"}},
		{"poetry from", map[string]string{"pyproject.toml": "[tool.poetry]\nname = \"x\"\npackages = [{include = \"pkg\", from = \"source\"}]\n", "source/pkg/__init__.py": ""}, []string{"source"}},
		{"hatch packages", map[string]string{"pyproject.toml": "[tool.hatch.build.targets.wheel]\npackages = [\"python/pkg\"]\n", "python/pkg/__init__.py": ""}, []string{"python"}},
		{"pdm package-dir", map[string]string{"pyproject.toml": "[tool.pdm.build]\npackage-dir = \"srcdir\"\n", "srcdir/pkg/__init__.py": ""}, []string{"srcdir"}},
		{"setup.cfg package_dir", map[string]string{"setup.cfg": "[metadata]\nname = x\n\n[options]\npackage_dir =\n    =lib\npackages = find:\n", "lib/pkg/__init__.py": ""}, []string{"lib"}},
		{"setup.cfg package_dir inline", map[string]string{"setup.cfg": "[options]\npackage_dir = =src2\n", "src2/m.py": ""}, []string{"src2"}},
		{"setup.cfg find where", map[string]string{"setup.cfg": "[options.packages.find]\nwhere = lib2\n", "lib2/pkg/__init__.py": ""}, []string{"lib2"}},
		{"declared folder missing", map[string]string{"pyproject.toml": "[tool.setuptools]\npackage-dir = {\"\" = \"nowhere\"}\n", "src/pkg/__init__.py": ""}, []string{"src"}},
		{"declared folder escapes", map[string]string{"pyproject.toml": "[tool.setuptools]\npackage-dir = {\"\" = \"../..\"}\n"}, nil},
		{"section header with a comment", map[string]string{"setup.cfg": "[upload_sphinx] # Sphinx-PyPI-upload\nupload-dir = docs/_build/html\n\n[options]\npackage_dir = =lib3\n", "lib3/m.py": ""}, []string{"lib3"}},
		{"per-package mapping is no root", map[string]string{"setup.cfg": "[options]\npackage_dir =\n    pkg = lib/pkg\n", "lib/pkg/__init__.py": ""}, nil},
		{"other pyproject tables", map[string]string{"pyproject.toml": "[project]\nname = \"x\"\n[tool.pytest.ini_options]\naddopts = \"-q\"\n"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				p := filepath.Join(dir, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ImportRoots(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ImportRoots = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestImportRootsMalformed(t *testing.T) {
	for name, content := range map[string]string{"pyproject.toml": "[tool.setuptools\n", "setup.cfg": "[options]\nthis is not a key value\n"} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ImportRoots(context.Background(), dir); err == nil {
			t.Errorf("%s %q: no error", name, content)
		}
	}
}

// setupCfgCost bounds what parseSetupCfg allocates per byte of a setup.cfg: the scanner's
// buffer, the lines' strings and slices, the joined values (each at most once the file).
var setupCfgCost = costbound.Bound{PerByte: 64, Fixed: 1 << 20}

// FuzzSetupCfgRoots feeds arbitrary setup.cfg files to the parser: it never panics, every root it
// returns is one of the file's values, and it allocates within setupCfgCost.
func FuzzSetupCfgRoots(f *testing.F) {
	f.Add("[options]\npackage_dir =\n    =src\n")
	f.Add("[options.packages.find]\nwhere = a, b\n")
	f.Add("[a]\n  x\n=\n")
	f.Add("[a] # c]\nk = v\n[]]\n")
	f.Add("[options]\nx =\n" + strings.Repeat(" a\n", 2000))
	f.Fuzz(func(t *testing.T, content string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "setup.cfg"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		var roots []string
		costbound.Check(t, "setupCfgRoots", len(content), setupCfgCost, func() {
			roots, err = setupCfgRoots(context.Background(), root)
		})
		// The values are those of the reference parser (the quadratic one this replaced).
		got, gotErr := parseSetupCfg(context.Background(), []byte(content))
		want, wantErr := referenceSetupCfg([]byte(content))
		if (gotErr == nil) != (wantErr == nil) || !maps.Equal(got, want) {
			t.Fatalf("parseSetupCfg = %q, %v; the reference parser gives %q, %v", got, gotErr, want, wantErr)
		}
		for _, r := range roots {
			if !strings.Contains(content, r) {
				t.Fatalf("root %q is not in the file", r)
			}
		}
	})
}

// FuzzImportRoots feeds arbitrary pyproject.toml and setup.cfg files to ImportRoots: it never
// panics, every root it returns is a folder of the checkout, and it allocates within
// declaredCost (the same TOML and setup.cfg readers as DeclaredRequirements).
func FuzzImportRoots(f *testing.F) {
	f.Add("[tool.setuptools]\npackage-dir = {\"\" = \"lib\"}\n", "[options]\npackage_dir =\n    =src\n")
	f.Add("[tool.x]\na = ["+strings.Repeat("1,", 2000)+"1]\n", "")
	f.Add("[tool.hatch.build.targets.wheel]\npackages = [\"python/pkg\", \"../x/y\"]\n", "[options.packages.find]\nwhere = lib2\n")
	f.Fuzz(func(t *testing.T, pyproject, setupCfg string) {
		dir := t.TempDir()
		for _, d := range []string{"lib", "src", "python", "lib2"} {
			if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(dir, "pyproject.toml"), []byte(pyproject), 0o644)
		os.WriteFile(filepath.Join(dir, "setup.cfg"), []byte(setupCfg), 0o644)
		var roots []string
		var err error
		costbound.Check(t, "ImportRoots", len(pyproject)+len(setupCfg), declaredCost, func() { roots, err = ImportRoots(context.Background(), dir) })
		if err != nil {
			return
		}
		for _, r := range roots {
			if fi, err := os.Stat(filepath.Join(dir, r)); err != nil || !fi.IsDir() || strings.HasPrefix(r, "..") {
				t.Fatalf("root %q is not a folder of the checkout", r)
			}
		}
	})
}

// referenceSetupCfg is the setup.cfg parser parseSetupCfg replaced (quadratic in a key's
// continuation lines), kept as the reference of what the values are.
func referenceSetupCfg(data []byte) (map[string]string, error) {
	values := map[string]string{}
	section, last := "", ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, ";"):
		case strings.HasPrefix(trimmed, "[") && strings.LastIndex(trimmed, "]") > 1:
			section, last = strings.TrimSpace(trimmed[1:strings.LastIndex(trimmed, "]")]), ""
		case (line[0] == ' ' || line[0] == '\t') && last != "":
			values[last] += "\n" + trimmed
		default:
			k, v, ok := strings.Cut(trimmed, "=")
			if !ok {
				k, v, ok = strings.Cut(trimmed, ":")
			}
			if !ok {
				return nil, errors.New("not key = value")
			}
			last = section + "." + strings.TrimSpace(k)
			values[last] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return values, nil
}

// continuationCfg is a setup.cfg of one key with n continuation lines: the quadratic-parse
// attack (1M lines kept the worker in parseSetupCfg for more than 150 s).
func continuationCfg(n int) []byte {
	return []byte("[options]\ninstall_requires =\n" + strings.Repeat(" a\n", n))
}

// TestSetupCfgAttack parses hostile setup.cfg contents: each is parsed or refused with
// allocations linear in its size (setupCfgCost), and the 1M-line one is refused by
// MaxConfigBytes in well under a second, naming the file and the cap.
func TestSetupCfgAttack(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		refused string // a part of the error, "" when it parses
	}{
		{"200k continuation lines, under the cap", continuationCfg(200_000), ""},
		{"continuation lines up to the cap", continuationCfg((MaxConfigBytes - 40) / 3), ""},
		{"1M continuation lines", continuationCfg(1_000_000), "larger than 1048576 bytes"},
		{"one key set again and again", []byte("[s]\n" + strings.Repeat("k = v\n  w\n", MaxConfigBytes/12)), ""},
		{"many sections", []byte(strings.Repeat("[s]\n", MaxConfigBytes/4)), ""},
		{"many keys", []byte("[s]\n" + strings.Repeat("k=\n", MaxConfigBytes/4)), ""},
		{"one long line", []byte("[s]\nk = " + strings.Repeat("x", MaxConfigBytes-10)), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var values map[string]string
			var err error
			start := time.Now()
			n := costbound.Check(t, "parseSetupCfg", len(tc.data), setupCfgCost, func() {
				values, err = parseSetupCfg(context.Background(), tc.data)
			})
			t.Logf("%d bytes: %v, %d bytes allocated (%.1f per byte)", len(tc.data), time.Since(start), n, float64(n)/float64(len(tc.data)))
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "setup.cfg")):
				t.Errorf("got %v, want an error naming setup.cfg with %q", err, tc.refused)
			case tc.refused != "" && time.Since(start) > time.Second:
				t.Errorf("refused after %v", time.Since(start))
			}
			if strings.HasPrefix(tc.name, "200k") && len(values["options.install_requires"]) != 2*200_000 {
				t.Errorf("install_requires holds %d bytes, want %d", len(values["options.install_requires"]), 2*200_000)
			}
		})
	}
}

// TestConfigAttacks lays hostile configuration files in a checkout: ImportRoots and
// DeclaredRequirements must refuse each with an error naming the file (and the cap, for the
// sizes), without reading more than the cap: the 48 MiB pyproject.toml made the TOML library
// peak at 3.3 GiB.
func TestConfigAttacks(t *testing.T) {
	oneArray := func(size int) []byte {
		b := make([]byte, 0, size+16)
		b = append(b, "[tool.x]\na = ["...)
		for len(b) < size {
			b = append(b, "1,"...)
		}
		return append(b, "1]\n"...)
	}
	tests := []struct {
		name  string
		file  string
		data  []byte // written to file, unless link is set
		link  string // a symlink target for file
		error string // a part of the error
	}{
		{"48 MiB pyproject.toml", "pyproject.toml", oneArray(48 << 20), "", "pyproject.toml: larger than 1048576 bytes"},
		{"pyproject.toml one byte over", "pyproject.toml", oneArray(MaxConfigBytes), "", "pyproject.toml: larger than 1048576 bytes"},
		{"1M-line setup.cfg", "setup.cfg", continuationCfg(1_000_000), "", "setup.cfg: larger than 1048576 bytes"},
		{"pyproject.toml links to an endless device", "pyproject.toml", nil, "../../../../../../../../../../dev/zero", "pyproject.toml"},
		{"setup.cfg links out", "setup.cfg", nil, "/etc/passwd", "setup.cfg"},
		{"setup.cfg is a FIFO", "setup.cfg", nil, "", "setup.cfg: not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, tc.file)
			var err error
			switch {
			case tc.link != "":
				err = os.Symlink(tc.link, p)
			case tc.data == nil:
				err = syscall.Mkfifo(p, 0o644)
			default:
				err = os.WriteFile(p, tc.data, 0o644)
			}
			if err != nil {
				t.Skip(err)
			}
			for _, read := range []struct {
				name string
				fn   func(context.Context, string) error
			}{
				{"ImportRoots", func(ctx context.Context, dir string) error { _, err := ImportRoots(ctx, dir); return err }},
				{"DeclaredRequirements", func(ctx context.Context, dir string) error {
					_, err := DeclaredRequirements(ctx, dir)
					return err
				}},
			} {
				var err error
				start := time.Now()
				n := costbound.Allocated(func() { err = read.fn(context.Background(), dir) })
				if err == nil || !strings.Contains(err.Error(), tc.error) {
					t.Errorf("%s: %v, want an error with %q", read.name, err, tc.error)
				}
				if n > 2*MaxConfigBytes+1<<20 || time.Since(start) > time.Second {
					t.Errorf("%s: refused after %v and %d bytes allocated", read.name, time.Since(start), n)
				}
				t.Logf("%s: refused in %v, %d bytes allocated: %v", read.name, time.Since(start), n, err)
			}
		})
	}
}

// TestConfigCancel checks that a cancelled context stops ImportRoots and DeclaredRequirements.
func TestConfigCancel(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "setup.cfg"), continuationCfg(100_000), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ImportRoots(ctx, dir); !errors.Is(err, context.Canceled) {
		t.Errorf("ImportRoots: %v, want context.Canceled", err)
	}
	if _, err := DeclaredRequirements(ctx, dir); !errors.Is(err, context.Canceled) {
		t.Errorf("DeclaredRequirements: %v, want context.Canceled", err)
	}
	if _, err := parseSetupCfg(ctx, continuationCfg(100_000)); !errors.Is(err, context.Canceled) {
		t.Errorf("parseSetupCfg: %v, want context.Canceled", err)
	}
}

// TestTarballConfigAttacks runs the two attacks as they came, as small tarballs checked out the
// worker's way: a 3 KB one whose setup.cfg holds one key with 1M continuation lines, a 49 KB one
// with a 48 MiB pyproject.toml of one array. Both check out (they are within the checkout's
// limits), and reading their declarations is then refused by MaxConfigBytes, naming the file.
func TestTarballConfigAttacks(t *testing.T) {
	array := "[tool.x]\na = [" + strings.Repeat("1,", 24<<20) + "1]\n"
	tests := []struct {
		name, file, content string
	}{
		{"1M-line setup.cfg", "setup.cfg", string(continuationCfg(1_000_000))},
		{"48 MiB pyproject.toml", "pyproject.toml", array},
	}
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tgz := makeTar(t, true, tarEntry{name: "proj/" + tc.file, body: tc.content}, tarEntry{name: "proj/mod.py", body: "x = 1\n"})
			p := filepath.Join(t.TempDir(), "attack.tgz")
			if err := os.WriteFile(p, tgz, 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := ResolveRepo(ctx, Repo{URL: p})
			if err != nil {
				t.Fatal(err)
			}
			w, err := Checkout(ctx, res, t.TempDir(), CheckoutLimits{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Remove()
			start := time.Now()
			var rootsErr, reqsErr error
			n := costbound.Allocated(func() {
				_, rootsErr = ImportRoots(ctx, w.Dir)
				_, reqsErr = DeclaredRequirements(ctx, w.Dir)
			})
			want := tc.file + ": larger than 1048576 bytes"
			for _, err := range []error{rootsErr, reqsErr} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%v, want an error with %q", err, want)
				}
			}
			t.Logf("a %d-byte tarball: refused in %v, %d bytes allocated", len(tgz), time.Since(start), n)
			if n > 1<<20 {
				t.Errorf("refusing allocated %d bytes", n)
			}
		})
	}
}

// BenchmarkParseSetupCfg parses a setup.cfg of one key continued up to MaxConfigBytes (349k
// lines): the worst shape of the quadratic parse, which took 29 s at 200k lines.
func BenchmarkParseSetupCfg(b *testing.B) {
	data := continuationCfg((MaxConfigBytes - 40) / 3)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseSetupCfg(context.Background(), data); err != nil {
			b.Fatal(err)
		}
	}
}
