package execute

import (
	"testing"

	"github.com/ndtrace/ndtrace/schemas"
	_ "github.com/ndtrace/ndtrace/store/drivers"
)

func TestRelativize(t *testing.T) {
	tt := schemas.TestTrace{Detail: "failed in /s/r/a.py line 3", Events: []schemas.Event{{File: "/s/r/a.py"}, {File: "/usr/lib/x.py"}},
		Functions: []schemas.FuncSource{{File: "/s/r/pkg/b.py"}}}
	relativize(&tt, "/s/r", pathsOf("/s/r", ""))
	if tt.Events[0].File != "a.py" || tt.Events[1].File != "/usr/lib/x.py" || tt.Functions[0].File != "pkg/b.py" || tt.Detail != "failed in a.py line 3" {
		t.Errorf("%+v", tt)
	}
	// Values name the checkout as CheckoutPath, never as the worker's folder.
	v := "PosixPath('/s/r/data')"
	tt = schemas.TestTrace{Detail: "no /s/r", Events: []schemas.Event{{Locals: schemas.Locals{{Name: "d", Value: "'/s/r'"}, {Name: "n", Value: "3"},
		{Name: "m", Value: "'/u/envs/abc/lib/python3.11/site-packages/m.py'"}}, Value: &v}}}
	relativize(&tt, "/s/r", pathsOf("/s/r", "/u/envs/abc/lib/python3.11/site-packages"))
	if l := tt.Events[0].Locals; l[0].Value != "'/checkout'" || l[1].Value != "3" || *tt.Events[0].Value != "PosixPath('/checkout/data')" ||
		l[2].Value != "'/envs/abc/lib/python3.11/site-packages/m.py'" || tt.Detail != "no /checkout" || v != "PosixPath('/s/r/data')" {
		t.Errorf("%+v, %s", tt, *tt.Events[0].Value)
	}
}

// TestNeutralisedClass: counters of neutralised runner options are by class, whatever names a
// repository's configuration invents.
func TestNeutralisedClass(t *testing.T) {
	for name, want := range map[string]string{
		"--cov": "coverage", "--cov-report": "coverage", "--no-cov": "coverage", "-n": "xdist", "--dist": "xdist",
		"--junitxml": "report", "--basetemp": "runner", "-c": "runner", "-p no_such_plugin": "plugin",
		"-pno_such": "plugin", "required_plugins": "required_plugins", "addopts": "addopts",
		"--runslow-invented-by-a-repo": "other", "-p": "other", "": "other",
	} {
		if got := neutralisedClass(name); got != want {
			t.Errorf("neutralisedClass(%q) = %q, want %q", name, got, want)
		}
	}
}
