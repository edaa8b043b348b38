package debugger

import "github.com/ndtrace/ndtrace/schemas"

// StartAtFunction makes trajectories over t, a forward tree WrapMain or WrapConsumed made, start
// at the call of the function under study instead of main's call: the first state inside main's
// line `return CALL`, the first top-level call of the traced run (for f(...) with arguments that
// call no traced code, f's call; for a consumed iterator, the first call the consumption or the
// call itself ran). The tree is unchanged otherwise: main's states stay in it, so stepping out of
// the function returns to main's return and the exit follows it, as for main's trajectories (the
// paper's Fig. C.1a: step_into from the function's return gives main's return), and the main()
// wrapper stays in the CODE context, which shows the inputs. t is returned; a tree without a
// state inside main's line is left as it is.
func StartAtFunction(t *Tree) *Tree {
	if len(t.Top) > 1 && t.Top[0].Kind == KindCall && t.Top[0].Func() == MainFunc && len(t.Top[1].Children) > 0 {
		t.start = t.Top[1].Children[0]
	}
	return t
}

// started is t started where it.Start says.
func (it Item) started(t *Tree) *Tree {
	if it.Start == schemas.ForwardStartFunction {
		return StartAtFunction(t)
	}
	return t
}

// EntrySource returns the source of a repository-level trajectory's entry function among the
// functions its test visited, found as RepoCodeContext finds a frame's: by file and qualified name,
// or, for a frame without a source of its own (a lambda, a comprehension), the innermost function
// whose lines hold the entry's line. ok is false when none does.
func EntrySource(funcs []schemas.FuncSource, e Entry) (src schemas.FuncSource, ok bool) {
	for _, f := range funcs {
		if f.File == e.File && f.QualName == e.QualName {
			return f, true
		}
	}
	best := -1
	for i, f := range funcs {
		if f.File == e.File && f.FirstLine <= e.Line && e.Line <= f.LastLine &&
			(best < 0 || f.LastLine-f.FirstLine < funcs[best].LastLine-funcs[best].FirstLine) {
			best = i
		}
	}
	if best < 0 {
		return schemas.FuncSource{}, false
	}
	return funcs[best], true
}
