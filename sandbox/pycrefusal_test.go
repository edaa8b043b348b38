package sandbox_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestCraftedPycStillRefused (issue 29): a .pyc is loaded only from the read-only roots. Writing
// one directly is refused at its open; these are the routes around that write: the bytes written
// under another name and renamed (as py_compile and pytest write theirs), or compiled by
// py_compile itself (which writes through a temporary name). Either way the import that would
// load it is refused with the sandbox's own message, and no crafted bytecode runs.
func TestCraftedPycStillRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the sandbox; run without -short")
	}
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for _, tc := range []struct{ name, code string }{
		{"renamed", `import importlib.util, marshal, os, sys
def f():
    os.makedirs("/tmp/crafted", exist_ok=True)
    code = compile("X = 42\n", "/tmp/crafted/evil.py", "exec")
    with open("/tmp/crafted/evil.bin", "wb") as fh:
        fh.write(importlib.util.MAGIC_NUMBER + b"\0" * 12 + marshal.dumps(code))
    os.replace("/tmp/crafted/evil.bin", "/tmp/crafted/evil.pyc")
    sys.path.insert(0, "/tmp/crafted")
    import evil
    return evil.X
`},
		{"py_compile", `import os, py_compile, sys
def f():
    os.makedirs("/tmp/pc", exist_ok=True)
    with open("/tmp/pc/src.py", "w") as fh:
        fh.write("X = 42\n")
    py_compile.compile("/tmp/pc/src.py", cfile="/tmp/pc/evil2.pyc", doraise=True)
    sys.path.insert(0, "/tmp/pc")
    import evil2
    return evil2.X
`},
		{"sourceless_loader", `import importlib.machinery, importlib.util, marshal, os
def f():
    os.makedirs("/tmp/sl", exist_ok=True)
    with open("/tmp/sl/data", "wb") as fh:
        fh.write(importlib.util.MAGIC_NUMBER + b"\0" * 12 + marshal.dumps(compile("X = 42\n", "x", "exec")))
    os.replace("/tmp/sl/data", "/tmp/sl/m.pyc")
    loader = importlib.machinery.SourcelessFileLoader("m", "/tmp/sl/m.pyc")
    spec = importlib.util.spec_from_loader("m", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod.X
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := sb.Run(ctx, sandbox.Request{Code: tc.code, Call: "f()"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status == schemas.StatusOK {
				t.Fatalf("crafted bytecode ran: %s", res.Value)
			}
			if res.Status == schemas.StatusException && (res.ExcType != "PermissionError" || !strings.HasPrefix(res.ExcMessage, sandbox.RefusalPrefix)) {
				t.Fatalf("%s: %s %s, want the sandbox's PermissionError", res.Status, res.ExcType, res.ExcMessage)
			}
			t.Logf("%s %s %s", res.Status, res.ExcType, res.ExcMessage)
		})
	}
}
