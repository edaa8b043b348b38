package rows

import (
	"errors"
	"fmt"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/schemas"
)

// repoRows builds the repository-level rows of a TracedItem repository: for every TracedItem test, every
// direction and draw, an entry call sampled from the test's trace and a trajectory in its scope.
// It returns the reason when the repository gives no row. A test kept apart (TestTrace.Ref) is
// read with o.LoadTest when its turn comes, so that one test's trace is held at a time; an error
// is one of reading it.
func repoRows(t execute.TracedItem, spec schemas.Spec, p debugger.Policy, o Options, counts schemas.Counts) ([]schemas.Row, string, error) {
	rt := t.Repo
	if rt == nil {
		return nil, "repository: no trace", nil
	}
	counts.Add(rt.Counts)
	counts[schemas.CountTests] += int64(rt.Tests)
	counts[schemas.CountTestsRun] += int64(rt.Run)
	counts[schemas.CountQuarantined] += int64(len(rt.Quarantined))
	var rows []schemas.Row
	last := "no test gave a trajectory"
	for _, tt := range rt.Traces {
		var tr *debugger.Trace // tt's events in compact form
		if _, err := debugger.ExitFor(tt.Status); err != nil {
			counts[schemas.CountSkippedTest(tt.Status)]++
			continue
		}
		if tt.Ref != "" {
			if o.LoadTest == nil {
				return nil, "", fmt.Errorf("test %s of %s is stored apart and there is no way to read it", tt.Test, t.Item.Key)
			}
			stored, trace, err := o.LoadTest(tt.Ref)
			if err != nil {
				return nil, "", err
			}
			if stored.Test != tt.Test {
				return nil, "", fmt.Errorf("test %s of %s: the stored trace %s is of test %s", tt.Test, t.Item.Key, tt.Ref, stored.Test)
			}
			tt, tr = stored, trace
		} else if len(tt.Events) > 0 {
			tr = debugger.NewTrace(tt.Events) // once for all the test's draws
		}
		for _, dir := range spec.Directions {
			for k := 0; k < spec.TrajectoriesPerTrace; k++ {
				seed := Seed(spec.Seed, t.Item.Key+"#"+tt.Test, dir, k)
				row, err := RepoRow(t.Item, tt, tr, debugger.Direction(dir), seed, p, o)
				var tree *TreeError
				var dec *DecontaminatedError
				switch {
				case errors.As(err, &dec):
					counts[schemas.CountDecontaminated(dec.Set)]++
					last = dec.Error()
					continue
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
	if len(rows) == 0 && noTestsToRun(t) && rt.Gen != nil {
		// A repository of functions only (a files source's group, or one without tests whose
		// functions got generated inputs): its rows are its function-level items', each of
		// which ends as rows or a reject of its own (every files group was a no_trajectory
		// reject: 6 million of them for 10^8 files). It is a reject itself only when none of
		// its functions kept an input (its yield report's losses say why).
		if rt.Gen.Inputs > 0 {
			return nil, "", nil
		}
		return nil, "no function of its modules kept an input", nil
	}
	if len(rows) == 0 {
		return nil, last, nil
	}
	return rows, "", nil
}

// TreeError is an error of building a test's state tree (its entry call, its direction), as
// opposed to one of building the row.
type TreeError struct{ Err error }

func (e *TreeError) Error() string { return e.Err.Error() }
func (e *TreeError) Unwrap() error { return e.Err }

// RepoRow builds the repository-level row of test tt of repository it in direction dir with seed,
// which also picks the entry call. tr, when not nil, is tt's events in compact form (tt.Events is
// then not read). An error of the tree is a *TreeError.
func RepoRow(it crawl.Item, tt schemas.TestTrace, tr *debugger.Trace, dir debugger.Direction, seed uint64, p debugger.Policy, o Options) (schemas.Row, error) {
	item := debugger.RepoItem{Events: tt.Events, Trace: tr, Status: tt.Status, Functions: tt.Functions, Modules: tt.Modules}
	tree, code, entry, err := item.Tree(dir, seed)
	if err != nil {
		return schemas.Row{}, &TreeError{err}
	}
	src := Source{Level: "repository", RepoURL: it.Path, Commit: it.Repo.Resolved.Pin(), Path: entry.File,
		QualName: entry.QualName, SourceID: tt.Test, FunctionID: entryFunctionID(tt.Functions, entry)}
	if err := splitMixed(o.Split, tt.Functions, tree, src.FunctionID); err != nil {
		return schemas.Row{}, err
	}
	return build(src, tree, code, treeCounts(tree), p, seed, o)
}

// ErrSplitMixed is returned (wrapped) for a repository row whose CODE context shows a function of
// another split than its entry function's: kept, the function would be in two splits (its code
// and its run in a train row, its rows in validation).
var ErrSplitMixed = errors.New("the row shows functions of two splits")

// splitMixed returns an error wrapping ErrSplitMixed when a function shown in t's CODE context
// (debugger.ShownFunctions) falls in another split than the entry's (function id entryID); nil
// when split has one split only.
func splitMixed(split schemas.SplitSpec, funcs []schemas.FuncSource, t *debugger.Tree, entryID string) error {
	if len(split) == 0 {
		return nil
	}
	want := split.Assign(entryID)
	for i, shown := range debugger.ShownFunctions(funcs, t) {
		if !shown {
			continue
		}
		if got := split.Assign(crawl.FunctionID(funcs[i].Source)); got != want {
			return fmt.Errorf("%w: %s (%s) in a %s row", ErrSplitMixed, funcs[i].QualName, got, want)
		}
	}
	return nil
}

// treeCounts counts the events of a tree's states by type.
func treeCounts(t *debugger.Tree) func(*schemas.Row) {
	return func(r *schemas.Row) {
		for _, n := range t.Order {
			countEvent(r, n.EventKind())
		}
	}
}

// entryFunctionID is the function id of a repository-level row: that of its entry function's
// source (a lambda's or comprehension's enclosing function), "" when the test's functions do not
// hold it.
func entryFunctionID(funcs []schemas.FuncSource, e debugger.Entry) string {
	if f, ok := debugger.EntrySource(funcs, e); ok {
		return crawl.FunctionID(f.Source)
	}
	return ""
}
