package sandbox_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
)

// moduleFiles is a package whose module imports its package relatively, with functions that
// forge code under the module's file name (an attack) and that reach for the file the import
// did not take.
var moduleFiles = map[string]string{
	"src/pkg/__init__.py": "from .core import area\n",
	"src/pkg/helpers.py":  "def square(x):\n    return x * x\n",
	"src/pkg/core.py": "from .helpers import square\nfrom . import helpers\n\n\n" +
		"def area(side):\n    s = square(side)\n    return (s, __spec__.name, helpers.__name__)\n\n\n" +
		"def forge():\n    exec(compile('x = 1\\ny = 2\\n', __file__, 'exec'))\n    return 1\n",
	"json/__init__.py": "def dumps(x):\n    return 'mine'\n",
}

// TestModuleCall (issue 29): a function run where it lives (Request.Module) imports its module as
// part of its package from the checkout and its roots, and traces the module's file; code
// compiled at run time under that file's name is still tampering; a module name the import
// resolves elsewhere (the standard library's json, already imported) is an ImportError, never a
// trace of another file; requests that do not name a file in the checkout are refused.
func TestModuleCall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the sandbox; run without -short")
	}
	ctx := context.Background()
	dir := sandboxtest.HostDir(t)
	sandboxtest.WriteTree(t, dir, moduleFiles)
	sb, err := sandbox.New(ctx, sandbox.Config{ReadOnly: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	src := filepath.Join(dir, "src")
	file := filepath.Join(src, "pkg", "core.py")
	code := moduleFiles["src/pkg/core.py"]
	run := func(module, file, call string) *sandbox.Result {
		t.Helper()
		res, err := sb.Run(ctx, sandbox.Request{Code: code, Filename: file, Call: call, Module: module, Dir: dir, Paths: []string{src}})
		if err != nil {
			t.Fatalf("%s: %v", call, err)
		}
		return res
	}
	res := run("pkg.core", file, "area(3)")
	if res.Status != schemas.StatusOK || res.Value != "(9, 'pkg.core', 'pkg.helpers')" || len(res.Events) == 0 {
		t.Fatalf("area(3): %s %s %q, %d events", res.Status, res.Detail, res.Value, len(res.Events))
	}
	for _, ev := range res.Events {
		if ev.File != file {
			t.Errorf("an event of %s, want %s", ev.File, file)
		}
	}
	if len(res.Blocks) == 0 || res.Blocks[0].File != file {
		t.Errorf("blocks %+v", res.Blocks)
	}
	if res := run("pkg.core", file, "forge()"); res.Status != schemas.StatusTampered {
		t.Errorf("forge(): %s %s, want tampered", res.Status, res.Detail)
	}
	jsonFile := filepath.Join(dir, "json", "__init__.py")
	res, err = sb.Run(ctx, sandbox.Request{Code: moduleFiles["json/__init__.py"], Filename: jsonFile, Call: "dumps(1)",
		Module: "json", Dir: dir})
	if err != nil || res.Status != schemas.StatusException || res.ExcType != "ImportError" || len(res.Events) != 0 {
		t.Errorf("json shadowed: %v %s %s %s, %d events", err, res.Status, res.ExcType, res.Detail, len(res.Events))
	}
	for _, req := range []sandbox.Request{
		{Code: code, Filename: file, Call: "area(3)", Module: "pkg..core", Dir: dir},
		{Code: code, Filename: file, Call: "area(3)", Module: "pkg.core", Dir: "relative"},
		{Code: code, Filename: "/etc/passwd", Call: "area(3)", Module: "pkg.core", Dir: dir},
		{Code: code, Filename: dir + "/src/../../x.py", Call: "area(3)", Module: "pkg.core", Dir: dir},
	} {
		if _, err := sb.Run(ctx, req); err == nil || !strings.Contains(err.Error(), "module") {
			t.Errorf("%+v: %v, want refused", req, err)
		}
	}
}
