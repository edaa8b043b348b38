package debugger_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

func TestIsTestFile(t *testing.T) {
	for file, want := range map[string]bool{
		"/r/tests/test_x.py": true, "/r/test_x.py": true, "/r/x_test.py": true, "/r/conftest.py": true,
		"/r/test/helpers.py": true, "/r/mathutil.py": false, "/r/pkg/testing.py": false, "/r/contest.py": false,
	} {
		if got := debugger.IsTestFile(file); got != want {
			t.Errorf("IsTestFile(%q) = %v, want %v", file, got, want)
		}
	}
}

// TestRepoItem traces real tests of a fixture repository and samples repository-level trajectories:
// entries come from the code under test, the CODE context is the source of the functions in the
// entry's scope, and the same seed gives the same trajectory.
func TestRepoItem(t *testing.T) {
	dir := testrepos.Dir(t, "passing")
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.Config{ReadOnly: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for _, test := range []string{"tests/test_mathutil.py::test_mean", "tests/test_mathutil.py::test_counter", "tests/test_mathutil.py::test_mean_empty"} {
		res, err := sb.RunTest(ctx, sandbox.TestRequest{Dir: dir, Test: test, Traced: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != sandbox.OutcomePassed {
			t.Fatalf("%s: outcome %q (%s)", test, res.Outcome, res.Result.Detail)
		}
		item := debugger.RepoItem{Events: res.Result.Events, Status: res.Result.Status, Functions: res.Result.Functions}
		entries := map[string]bool{}
		for seed := uint64(0); seed < 20; seed++ {
			for _, dir := range []debugger.Direction{debugger.Forward, debugger.Inverse} {
				traj, entry, err := item.Sample(dir, debugger.PaperPolicy(), seed, nil)
				if err != nil {
					t.Fatalf("%s seed %d %s: %v", test, seed, dir, err)
				}
				if debugger.IsTestFile(entry.File) || !strings.HasSuffix(entry.File, "/mathutil.py") {
					t.Errorf("%s: entry %+v is not in the code under test", test, entry)
				}
				entries[entry.QualName] = true
				if seed == 0 && dir == debugger.Forward {
					t.Logf("%s: entry %s, CODE:\n%s", test, entry.QualName, traj.Code)
				}
				head := "def " + entry.QualName[strings.LastIndex(entry.QualName, ".")+1:] + "("
				if !strings.Contains(traj.Code, head) {
					t.Errorf("%s: CODE context lacks the entry %s:\n%s", test, entry.QualName, traj.Code)
				}
				if strings.Contains(traj.Code, "def test_") || strings.Contains(traj.Code, "import") {
					t.Errorf("%s: CODE context holds more than the visited functions:\n%s", test, traj.Code)
				}
				again, _, _ := item.Sample(dir, debugger.PaperPolicy(), seed, nil)
				if !reflect.DeepEqual(again, traj) {
					t.Errorf("%s seed %d: not deterministic", test, seed)
				}
			}
		}
		switch test {
		case "tests/test_mathutil.py::test_mean":
			// mean calls total: both are entries sometimes.
			if !entries["mean"] || !entries["total"] {
				t.Errorf("test_mean entries = %v, want mean and total", entries)
			}
		case "tests/test_mathutil.py::test_counter":
			if !entries["Counter.add"] || !entries["Counter.__init__"] {
				t.Errorf("test_counter entries = %v", entries)
			}
		}
	}
}

func TestRepoItemErrors(t *testing.T) {
	if _, _, err := (debugger.RepoItem{Status: schemas.StatusOK}).Sample(debugger.Forward, debugger.PaperPolicy(), 1, nil); err == nil {
		t.Error("empty trace: no error")
	}
	if _, _, err := (debugger.RepoItem{Status: schemas.StatusSandboxError}).Sample(debugger.Forward, debugger.PaperPolicy(), 1, nil); err == nil {
		t.Error("sandbox error: no error")
	}
}
