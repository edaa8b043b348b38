package debugger

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestRepoContextsStandAlone traces every test of fixture repositories in the live sandbox and
// measures, over 10 seeds and both directions per test, the share of repository-level CODE
// contexts that use a module-level name (an import, a constant, a class: the class of a traced
// method too) whose definition they do not show: before (no module-level definitions, as traces
// stored before schemas.TestTrace.Modules give) and now (the definitions collected as execute
// collects them, Module.Defs). Now must be at most 10%, and CODE lines stay the file's lines.
func TestRepoContextsStandAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	names := []string{"linked_list", "passing", "unittest_only", "generators"}
	dirs := make([]string, len(names))
	for i, n := range names {
		dirs[i] = testrepos.Dir(t, n)
	}
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.Config{ReadOnly: dirs})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var all, allBefore, allAfter, allStrict, allOmitted int
	for i, name := range names {
		c, err := sb.CollectTests(ctx, sandbox.CollectRequest{Dir: dirs[i]})
		if err != nil {
			t.Fatal(err)
		}
		var rows, before, after, strict, omitted int
		for _, test := range c.Tests {
			r, err := sb.RunTest(ctx, sandbox.TestRequest{Dir: dirs[i], Runner: c.Runner, Test: test, Traced: true,
				Limits: sandbox.Limits{WallTime: 5 * time.Second}})
			if err != nil {
				t.Fatalf("%s %s: %v", name, test, err)
			}
			funcs := r.Result.Functions
			srcs := map[string]string{}
			byFile := map[string][]schemas.FuncSource{}
			var order []string
			for _, f := range funcs {
				if _, ok := srcs[f.File]; !ok {
					data, err := os.ReadFile(f.File)
					if err != nil {
						t.Fatalf("%s: %v", f.File, err)
					}
					srcs[f.File] = string(data)
					order = append(order, f.File)
				}
				if f.QualName != "<module>" {
					byFile[f.File] = append(byFile[f.File], f)
				}
			}
			var mods []schemas.ModuleDef
			for _, file := range order {
				mods = append(mods, ParseModule(srcs[file]).Defs(file, byFile[file])...)
			}
			old := RepoItem{Events: r.Result.Events, Status: r.Result.Status, Functions: funcs}
			now := old
			now.Modules = mods
			for seed := uint64(0); seed < 10; seed++ {
				for _, dir := range []Direction{Forward, Inverse} {
					_, code0, _, err := old.Tree(dir, seed)
					if err != nil {
						continue // a test without a call outside its test file, or no inverse
					}
					tree, code1, entry, err := now.Tree(dir, seed)
					if err != nil {
						t.Fatalf("%s %s: %v", name, test, err)
					}
					rows++
					omitted += tree.CodeOmitted
					if len(undefinedNames(code0, srcs, funcs, false)) > 0 {
						before++
					}
					if u := undefinedNames(code1, srcs, funcs, false); len(u) > 0 {
						after++
						t.Logf("%s %s seed %d %s (entry %s): undefined %v in\n%s", name, test, seed, dir, entry.QualName, u, code1)
					}
					if len(undefinedNames(code1, srcs, funcs, true)) > 0 {
						strict++
					}
					// Every line of the context is a line of one of the files.
					for _, l := range strings.Split(strings.TrimRight(code1, "\n"), "\n") {
						found := l == ""
						for _, src := range srcs {
							found = found || strings.Contains("\n"+src+"\n", "\n"+l+"\n")
						}
						if !found {
							t.Errorf("%s %s: context line %q is not a file's line", name, test, l)
						}
					}
					if name == "linked_list" && seed == 0 && dir == Forward {
						t.Logf("%s (entry %s): CODE:\n%s", test, entry.QualName, code1)
					}
				}
			}
		}
		t.Logf("%s: %d contexts; with undefined module-level names: before %d (%.0f%%), after %d (%.0f%%); after, counting unvisited functions too: %d; omitted %d",
			name, rows, before, pct(before, rows), after, pct(after, rows), strict, omitted)
		all, allBefore, allAfter, allStrict, allOmitted = all+rows, allBefore+before, allAfter+after, allStrict+strict, allOmitted+omitted
	}
	t.Logf("all: %d contexts; with undefined module-level names: before %d (%.0f%%), after %d (%.0f%%); counting unvisited functions too: %d (%.0f%%); omitted %d",
		all, allBefore, pct(allBefore, all), allAfter, pct(allAfter, all), allStrict, pct(allStrict, all), allOmitted)
	if all == 0 || pct(allAfter, all) > 10 {
		t.Errorf("%d of %d contexts use undefined module-level names, want <= 10%%", allAfter, all)
	}
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}
