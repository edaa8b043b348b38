package testcalls

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/schemas"
)

// writeTree writes files (slash-separated paths to contents) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for f, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDepsWalk walks the imports of module m.py (or the module named by entry) in small
// checkouts: the files it runs, or a reason they cannot be known (want "!" and part of the reason).
func TestDepsWalk(t *testing.T) {
	big := strings.Repeat("x = 1\n", maxDepFileBytes/6+1)
	many := map[string]string{"m.py": "import p0\n"}
	for i := 0; i < maxDepFiles; i++ {
		many["p"+itoa(i)+".py"] = "import p" + itoa(i+1) + "\n"
	}
	wide := map[string]string{"m.py": "import w.x\n", "w/x.py": ""}
	wideTop := map[string]string{"m.py": ""}
	names := func(n int) string {
		var b strings.Builder
		b.WriteString("from nowhere import n0")
		for i := 1; i < n; i++ {
			b.WriteString(", n" + itoa(i))
		}
		return b.String() + "\n"
	}
	// Each file keeps 4001 names: the eighteenth is past the walker's 65536.
	budget := map[string]string{"m.py": "import f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17\n"}
	for i := 0; i < 18; i++ {
		budget["f"+itoa(i)+".py"] = names(4000)
	}
	for i := 0; i < maxDirEntries; i++ {
		wide["w/f"+itoa(i)+".txt"] = ""
		wideTop["f"+itoa(i)+".txt"] = ""
	}
	tests := []struct {
		name  string
		files map[string]string
		roots []string
		entry string
		want  string
	}{
		{"nothing", map[string]string{"m.py": "x = 1\n", "other.py": ""}, nil, "", "m.py"},
		{"absolute", map[string]string{"m.py": "import helper\nfrom util import f\n", "helper.py": "", "util.py": "", "unused.py": ""},
			nil, "", "helper.py m.py util.py"},
		{"transitive", map[string]string{"m.py": "import a\n", "a.py": "def f():\n    import b\n", "b.py": "from c import *\n", "c.py": ""},
			nil, "", "a.py b.py c.py m.py"},
		{"package init", map[string]string{"m.py": "import pkg.sub.mod\n", "pkg/__init__.py": "", "pkg/sub/__init__.py": "",
			"pkg/sub/mod.py": "", "pkg/other.py": ""}, nil, "", "m.py pkg/__init__.py pkg/sub/__init__.py pkg/sub/mod.py"},
		{"from package import submodule", map[string]string{"m.py": "from pkg import sub, name\n", "pkg/__init__.py": "name = 1\n",
			"pkg/sub.py": "", "pkg/third.py": ""}, nil, "", "m.py pkg/__init__.py pkg/sub.py"},
		{"namespace package", map[string]string{"m.py": "import ns.mod\n", "ns/mod.py": ""}, nil, "", "m.py ns/mod.py"},
		{"star of a package", map[string]string{"m.py": "from pkg import *\n", "pkg/__init__.py": "", "pkg/a.py": "",
			"pkg/b/__init__.py": "", "pkg/notes.txt": ""}, nil, "", "m.py pkg/__init__.py pkg/a.py pkg/b/__init__.py"},
		{"relative", map[string]string{"pkg/__init__.py": "", "pkg/m.py": "from . import helper\nfrom .sub import x\nfrom ..top import y\n",
			"pkg/helper.py": "", "pkg/sub/__init__.py": "", "pkg/sub/x.py": "", "top.py": "", "other.py": ""}, nil, "pkg/m.py",
			// ..top climbs to the checkout's top: counted though Python may refuse it there (no
			// file that may run is left out).
			"pkg/__init__.py pkg/helper.py pkg/m.py pkg/sub/__init__.py pkg/sub/x.py top.py"},
		{"relative out of the checkout", map[string]string{"m.py": "from .. import up\nfrom ... import upper\n"}, nil, "", "m.py"},
		{"outside the checkout", map[string]string{"m.py": "import os, json\nfrom collections import OrderedDict\n"}, nil, "", "m.py"},
		{"a module shadowing the standard library", map[string]string{"m.py": "import json\n", "json.py": ""}, nil, "", "json.py m.py"},
		{"cycle", map[string]string{"m.py": "import a\n", "a.py": "import b\n", "b.py": "import a\nimport m\n"}, nil, "", "a.py b.py m.py"},
		{"import root", map[string]string{"m.py": "import lib\n", "src/lib/__init__.py": "from .core import f\n", "src/lib/core.py": "",
			"lib.py": ""}, []string{"src"}, "", "lib.py m.py src/lib/__init__.py src/lib/core.py"},
		{"root not declared", map[string]string{"m.py": "import lib\n", "src/lib/__init__.py": ""}, nil, "", "m.py"},
		{"root escaping", map[string]string{"m.py": "import lib\n"}, []string{"../x", "/etc"}, "", "m.py"},
		{"dynamic import", map[string]string{"m.py": "import helper\n", "helper.py": "import importlib\nimportlib.import_module('x')\n"},
			nil, "", "!helper.py imports or reads files dynamically"},
		{"own path", map[string]string{"m.py": "DATA = open(__file__).read()\n"}, nil, "", "!m.py imports or reads"},
		{"sys.path", map[string]string{"m.py": "import sys\nsys.path.insert(0, 'x')\nimport y\n"}, nil, "", "!m.py imports or reads"},
		{"compiled", map[string]string{"m.py": "import fast\n", "fast.cpython-312-x86_64-linux-gnu.so": "\x7fELF"}, nil, "",
			"!fast.cpython-312-x86_64-linux-gnu.so is compiled code"},
		{"pth file", map[string]string{"m.py": "", "zz.pth": "import os\n"}, nil, "", "!zz.pth runs at start-up"},
		{"sitecustomize", map[string]string{"m.py": "", "src/sitecustomize.py": ""}, []string{"src"}, "", "!src/sitecustomize.py runs"},
		{"file cap", map[string]string{"m.py": "import big\n", "big.py": big}, nil, "", "!big.py is over"},
		{"files cap", many, nil, "", "!more than 512 files"},
		{"bytes cap", map[string]string{"m.py": "import a, b, c, d, e, f, g, h, i, j, k, l, m2, n, o, p, q\n",
			"a.py": big[:maxDepFileBytes-7], "b.py": big[:maxDepFileBytes-6], "c.py": big[:maxDepFileBytes-5], "d.py": big[:maxDepFileBytes-4],
			"e.py": big[:maxDepFileBytes-3], "f.py": big[:maxDepFileBytes-2], "g.py": big[:maxDepFileBytes-1], "h.py": big[:maxDepFileBytes],
			"i.py": big[:maxDepFileBytes-8], "j.py": big[:maxDepFileBytes-9], "k.py": big[:maxDepFileBytes-10], "l.py": big[:maxDepFileBytes-11],
			"m2.py": big[:maxDepFileBytes-12], "n.py": big[:maxDepFileBytes-13], "o.py": big[:maxDepFileBytes-14], "p.py": big[:maxDepFileBytes-15],
			"q.py": big[:maxDepFileBytes-16]}, nil, "", "!more than 16777216 bytes"},
		{"folder cap", wide, nil, "", "!w has more than 4096 entries"},
		{"folder cap at the top", wideTop, nil, "", "!. has more than 4096 entries"},
		{"imports cap", map[string]string{"m.py": names(4096)}, nil, "", "!m.py imports more than 4096 names"},
		{"names under the cap", map[string]string{"m.py": names(4095)}, nil, "", "m.py"},
		{"the walker's bounds", budget, nil, "", "!past the walks' bounds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			entry := tc.entry
			if entry == "" {
				entry = "m.py"
			}
			files, why := newDepWalker(dir, tc.roots, "c0ffee").walk(entry)
			if reason, ok := strings.CutPrefix(tc.want, "!"); ok {
				if !strings.Contains(why, reason) {
					t.Errorf("walk = %v, %q; want the reason %q", files, why, reason)
				}
				return
			}
			if got := strings.Join(files, " "); got != tc.want || why != "" {
				t.Errorf("walk = %q, %q; want %q", got, why, tc.want)
			}
		})
	}
}

// TestDepsSymlinkOut: a module that is a symlink out of the checkout is not known.
func TestDepsSymlinkOut(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	writeTree(t, dir, map[string]string{"m.py": "import helper\n"})
	writeTree(t, out, map[string]string{"helper.py": ""})
	if err := os.Symlink(filepath.Join(out, "helper.py"), filepath.Join(dir, "helper.py")); err != nil {
		t.Fatal(err)
	}
	if files, why := newDepWalker(dir, nil, "c0ffee").walk("m.py"); !strings.Contains(why, "symlink out of the checkout") {
		t.Errorf("walk = %v, %q; want a symlink out of the checkout", files, why)
	}
}

// TestDepsKey checks Deps: it changes with the content of an imported module, not with a file
// nothing imports; where the files cannot be known it is the pin's; it never equals a walk's.
func TestDepsKey(t *testing.T) {
	deps := func(files map[string]string, pin string) string {
		dir := t.TempDir()
		writeTree(t, dir, files)
		return newDepWalker(dir, nil, pin).Deps("m.py")
	}
	base := map[string]string{"m.py": "from helper import scale\n", "helper.py": "def scale(x, k):\n    return x * k\n"}
	with := func(f, text string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		m[f] = text
		return m
	}
	a := deps(base, "p1")
	if b := deps(base, "p2"); a != b {
		t.Errorf("the same files at other pins: %s, %s", a, b)
	}
	if b := deps(with("README.md", "hi"), "p1"); a != b {
		t.Errorf("a file nothing imports changed Deps")
	}
	if b := deps(with("helper.py", "def scale(x, k):\n    return x + k\n"), "p1"); a == b {
		t.Errorf("another helper.py gives the same Deps")
	}
	// The requirements of the repository's environment are part of it.
	envDeps := func(env []string) string {
		dir := t.TempDir()
		writeTree(t, dir, base)
		w := newDepWalker(dir, nil, "p1")
		w.env = env
		return w.Deps("m.py")
	}
	if e1, e2, e0 := envDeps([]string{"numpy==1.26"}), envDeps([]string{"numpy==1.20"}), envDeps([]string{}); e1 == e2 || e0 == a || e0 == e1 {
		t.Errorf("environments do not change Deps: %s, %s, %s (none: %s)", e1, e2, e0, a)
	}
	dyn := with("helper.py", "scale = __import__('math').pow\n")
	if d1, d2 := deps(dyn, "p1"), deps(dyn, "p2"); d1 == d2 || d1 == a {
		t.Errorf("Deps of an unknown walk: %s at p1, %s at p2 (want them to differ)", d1, d2)
	}
}

// TestItemsDuplicateAcrossRepositories is the attack of issue 26 (part 6) on the items' keys: a
// hostile checkout has a mod.py byte-identical to the honest one's and another helper.py: the
// items found in them (the same function, the same call) have different dedup keys. A
// byte-identical copy of the honest checkout gives items of the honest ones' keys.
func TestItemsDuplicateAcrossRepositories(t *testing.T) {
	mod := "from helper import scale\n\n\ndef double(x):\n    return scale(x, 2)\n"
	items := func(helper, pin string) []crawl.Item {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"mod.py": mod, "helper.py": helper})
		file := filepath.Join(dir, "mod.py")
		traces := []schemas.TestTrace{{Test: "tests/test_mod.py::test_double",
			Events: []schemas.Event{{Event: schemas.EventCall, Func: "double", File: file, Frame: 1,
				Locals: schemas.Locals{{Name: "x", Value: "3"}}}},
			Functions: []schemas.FuncSource{{File: file, QualName: "double", FirstLine: 4, LastLine: 5,
				Source: "def double(x):\n    return scale(x, 2)"}}}}
		it := crawl.Item{Key: "dir:" + pin, Path: pin, Repo: &crawl.RepoTarget{Resolved: crawl.Resolved{ContentHash: pin}}}
		return Items(context.Background(), dir, nil, it, traces, schemas.Counts{})
	}
	hostile := items("def scale(x, k):\n    return x + k\n", "h")
	honest := items("def scale(x, k):\n    return x * k\n", "o")
	copied := items("def scale(x, k):\n    return x * k\n", "o")
	if len(hostile) != 1 || len(honest) != 1 || len(copied) != 1 {
		t.Fatalf("items %d, %d, %d; want one each", len(hostile), len(honest), len(copied))
	}
	if hostile[0].Deps == "" || honest[0].Deps == "" {
		t.Fatalf("items without Deps: %+v, %+v", hostile[0], honest[0])
	}
	if hostile[0].DedupKey() == honest[0].DedupKey() {
		t.Errorf("the honest item has the hostile one's dedup key %s", honest[0].DedupKey())
	}
	if honest[0].DedupKey() != copied[0].DedupKey() {
		t.Errorf("a byte-identical copy gives another dedup key: %s, %s", honest[0].DedupKey(), copied[0].DedupKey())
	}
	// The key without Deps, as before, is the function and the call alone: the same for both.
	plain := honest[0]
	plain.Deps = ""
	if plain.DedupKey() != crawl.DedupKey(plain.Func, plain.Call) {
		t.Errorf("an item without Deps changed its key")
	}
}

// itoa is strconv.Itoa for the tables.
func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
