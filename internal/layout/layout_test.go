package layout

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/ndtrace/ndtrace"

// drivers are gocloud's storage drivers: only store/drivers links them in.
var drivers = []string{"gocloud.dev/blob/s3blob", "gocloud.dev/blob/gcsblob", "gocloud.dev/blob/azureblob"}

// rules says, per package of this module, what it must not depend on at all (deps: directly or
// through others; a prefix ending in "/" covers a tree) and which packages of the house it must
// not import itself (imports), as DEVELOPERS.md's Layout draws it.
var rules = []struct {
	pkg     string
	deps    []string
	imports []string
}{
	{"execute", append([]string{"go.temporal.io/", module + "/rows", module + "/pipeline", module + "/verify"}, drivers...), nil},
	{"rows", append([]string{"go.temporal.io/", module + "/pipeline", module + "/verify"}, drivers...), []string{module + "/store", module + "/dataset"}},
	{"replay", append([]string{"go.temporal.io/", module + "/execute", module + "/rows", module + "/pipeline", module + "/verify"}, drivers...), []string{module + "/store"}},
	{"verify", append([]string{"go.temporal.io/", module + "/pipeline", module + "/workflows", module + "/activities"}, drivers...), nil},
	{"pipeline", append([]string{"go.temporal.io/", module + "/verify", module + "/workflows", module + "/activities"}, drivers...), nil},
	{"crawl/testcalls", []string{module + "/execute", module + "/sandbox"}, []string{module + "/store"}},
	{"debugger", []string{"go.temporal.io/", module + "/sandbox", module + "/store", module + "/execute", module + "/pipeline"}, nil},
	{"dataset", append([]string{"go.temporal.io/", module + "/pipeline", module + "/execute", module + "/rows"}, drivers...), nil},
}

// list returns what go list prints of pkg with format.
func list(t *testing.T, format string, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-f", format}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// matches reports whether package p is named by pattern (a prefix ending in "/" covers a tree).
func matches(p, pattern string) bool {
	if strings.HasSuffix(pattern, "/") {
		return strings.HasPrefix(p, pattern)
	}
	return p == pattern || strings.HasPrefix(p, pattern+"/")
}

// TestImportRules checks every rule against the packages' dependencies as the go tool lists them.
func TestImportRules(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool on PATH")
	}
	for _, r := range rules {
		pkg := module + "/" + r.pkg
		deps := list(t, "{{.ImportPath}}", "-deps", pkg)
		if len(deps) < 2 {
			t.Fatalf("go list -deps %s: %q", r.pkg, deps)
		}
		for _, d := range deps {
			for _, f := range r.deps {
				if matches(d, f) {
					t.Errorf("%s depends on %s", r.pkg, d)
				}
			}
		}
		for _, d := range list(t, `{{join .Imports " "}}`, pkg) {
			for _, f := range r.imports {
				if d == f {
					t.Errorf("%s imports %s", r.pkg, d)
				}
			}
		}
	}
}
