package rows

import (
	"errors"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/schemas"
)

// repoRows builds the repository-level rows of a TracedItem repository: for every TracedItem test, every
// direction and draw, an entry call sampled from the test's trace and a trajectory in its scope.
// It returns the reason when the repository gives no row.
func repoRows(t execute.TracedItem, spec schemas.Spec, p debugger.Policy, o Options, counts schemas.Counts) ([]schemas.Row, string) {
	rt := t.Repo
	if rt == nil {
		return nil, "repository: no trace"
	}
	counts.Add(rt.Counts)
	counts[schemas.CountTests] += int64(rt.Tests)
	counts[schemas.CountTestsRun] += int64(rt.Run)
	counts[schemas.CountQuarantined] += int64(len(rt.Quarantined))
	var rows []schemas.Row
	last := "no test gave a trajectory"
	for _, tt := range rt.Traces {
		if _, err := debugger.ExitFor(tt.Status); err != nil {
			counts[schemas.CountSkippedTest(tt.Status)]++
			continue
		}
		for _, dir := range spec.Directions {
			for k := 0; k < spec.TrajectoriesPerTrace; k++ {
				seed := Seed(spec.Seed, t.Item.Key+"#"+tt.Test, dir, k)
				row, err := RepoRow(t.Item, tt, debugger.Direction(dir), seed, p, o)
				var tree *TreeError
				switch {
				case errors.As(err, &tree):
					counts[schemas.CountSkipped(dir, reasonKey(tree.Err))]++
					last = tree.Err.Error()
					continue
				case err != nil:
					counts[schemas.CountDropped(reasonKey(err))]++
					last = err.Error()
					continue
				}
				rows = append(rows, row)
			}
		}
	}
	if len(rows) == 0 {
		return nil, last
	}
	return rows, ""
}

// TreeError is an error of building a test's state tree (its entry call, its direction), as
// opposed to one of building the row.
type TreeError struct{ Err error }

func (e *TreeError) Error() string { return e.Err.Error() }
func (e *TreeError) Unwrap() error { return e.Err }

// RepoRow builds the repository-level row of test tt of repository it in direction dir with seed,
// which also picks the entry call. An error of the tree is a *TreeError.
func RepoRow(it crawl.Item, tt schemas.TestTrace, dir debugger.Direction, seed uint64, p debugger.Policy, o Options) (schemas.Row, error) {
	item := debugger.RepoItem{Events: tt.Events, Status: tt.Status, Functions: tt.Functions}
	tree, code, entry, err := item.Tree(dir, seed)
	if err != nil {
		return schemas.Row{}, &TreeError{err}
	}
	src := Source{Level: "repository", RepoURL: it.Path, Commit: it.Repo.Resolved.Pin(), Path: entry.File,
		QualName: entry.QualName, SourceID: tt.Test}
	return build(src, tree, code, treeCounts(tree), p, seed, o)
}

// treeCounts counts the events of a tree's states by type.
func treeCounts(t *debugger.Tree) func(*schemas.Row) {
	return func(r *schemas.Row) {
		for _, n := range t.Order {
			countEvent(r, n.EventKind())
		}
	}
}
