package execute_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestFunctionsRunWhereTheyLive (issue 29): a function found in a repository whose module imports
// its own package relatively (from .helpers import x, from . import sub) failed with ImportError
// when its module ran as a standalone file. It is now imported as part of its package: it
// traces, its module's __spec__ is set, and its events still name its file as the item does, on
// the lines of the module's text the item carries. A method the tests call is an item too, its
// instance built by the constructor call they made.
func TestFunctionsRunWhereTheyLive(t *testing.T) {
	ctx := context.Background()
	f, it, pool := repoFixture(t, "relimports", map[string]string{
		"shapes/__init__.py": "from .core import area\n",
		"shapes/helpers.py":  "def square(x):\n    return x * x\n",
		"shapes/sub.py":      "SCALE = 2\n",
		"shapes/core.py": "from .helpers import square\nfrom . import sub\n\n\n" +
			"def area(side):\n    s = square(side)\n    return s * sub.SCALE\n\n\n" +
			"def spec_parent(x):\n    return (__spec__.parent, x)\n\n\n" +
			"def named(p):\n    return len(p)\n\n\n" +
			"class Box:\n    def __init__(self, w):\n        self.w = w\n\n" +
			"    def grow(self, n):\n        return self.w + n\n\n" +
			"    @staticmethod\n    def unit(x):\n        return square(x)\n",
		"tests/test_shapes.py": "import pathlib\n\nfrom shapes import area\nfrom shapes.core import Box, named, spec_parent\n\n\n" +
			"def test_box():\n    b = Box(2)\n    assert b.grow(3) == 5\n    assert Box.unit(2) == 4\n\n\n" +
			"def test_area():\n    assert area(3) == 18\n\n\n" +
			"def test_spec():\n    assert spec_parent(1) == ('shapes', 1)\n\n\n" +
			"def test_named():\n    assert named(pathlib.PurePosixPath('a/b')) == 3 or True\n",
	})
	trc := &execute.Tracer{Sandboxes: pool, Fetcher: f, Scratch: sandboxtest.HostDir(t)}
	tr, err := trc.Trace(ctx, it, schemas.Spec{}.WithDefaults(), func() {})
	if err != nil || tr.Repo == nil {
		t.Fatalf("trace: %v, %s %s", err, tr.Status, tr.Detail)
	}
	got := map[string]execute.TracedItem{}
	for _, fi := range tr.Repo.Functions {
		got[fi.Item.Call] = fi
	}
	// Box(2).grow(3): a method, its instance rebuilt from the constructor call the test made;
	// Box.unit(2): a static method.
	for _, call := range []string{"area(3)", "spec_parent(1)", "square(3)", "Box(2).grow(3)", "Box.unit(2)"} {
		fi, ok := got[call]
		if !ok {
			t.Errorf("no item %s: %+v (counts %v)", call, tr.Repo.Functions, tr.Repo.Counts)
			continue
		}
		if fi.Status != schemas.StatusOK || fi.Trace == nil {
			t.Errorf("%s: %s %s, trace %v", call, fi.Status, fi.Detail, fi.Trace != nil)
			continue
		}
		if fi.Item.Module == "" || fi.Item.Path == "" {
			t.Errorf("%s: module %q, path %q", call, fi.Item.Module, fi.Item.Path)
		}
		lines := strings.Split(fi.Item.Code, "\n")
		for _, ev := range fi.Trace.Events() {
			if ev.File != fi.Item.Filename {
				t.Errorf("%s: an event of %s, want %s", call, ev.File, fi.Item.Filename)
				break
			}
			if ev.Lineno > 0 && ev.Lineno <= len(lines) && ev.Src != strings.TrimRight(lines[ev.Lineno-1], "\r") {
				t.Errorf("%s: line %d reads %q, the module's text %q", call, ev.Lineno, ev.Src, lines[ev.Lineno-1])
			}
		}
		for _, b := range fi.Blocks {
			if b.File != fi.Item.Filename {
				t.Errorf("%s: a block of %s", call, b.File)
			}
		}
	}
	if fi, ok := got["Box(2).grow(3)"]; ok && fi.Value != "5" {
		t.Errorf("Box(2).grow(3) = %q, want 5", fi.Value)
	}
	if fi, ok := got["spec_parent(1)"]; ok && fi.Value != "('shapes', 1)" {
		t.Errorf("spec_parent(1) = %q, want ('shapes', 1)", fi.Value)
	}
	if fi, ok := got["area(3)"]; ok && (fi.Item.Module != "shapes.core" || fi.Item.Path != "shapes/core.py" || fi.Value != "18") {
		t.Errorf("area(3): module %q, path %q, value %q", fi.Item.Module, fi.Item.Path, fi.Value)
	}
	// named(PurePosixPath('a/b')): not a literal, no item.
	for call := range got {
		if strings.HasPrefix(call, "named(") {
			t.Errorf("an item of a call with a non-literal argument: %s", call)
		}
	}
	if tr.Repo.Counts[schemas.CountFunctionSkipped("arguments")] == 0 {
		t.Errorf("counts %v: the non-literal argument is not counted", tr.Repo.Counts)
	}
}
