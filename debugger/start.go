package debugger

import (
	"strings"

	"github.com/ndtrace/ndtrace/schemas"
)

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

// StartAtCall is StartAtFunction for the call expression call: for a method item's call,
// Cls(init args).meth(args) (crawl/testcalls), the function under study is the method, whose call
// follows the constructor's that builds its instance: the trajectory starts at the first call of
// Cls.meth inside main's line (the constructor's states stay in the tree, before the start). Any
// other call, or a tree without that call, starts as StartAtFunction says.
func StartAtCall(t *Tree, call string) *Tree {
	StartAtFunction(t)
	class, meth, ok := MethodCall(call)
	if !ok || t.start == nil || t.start.Parent == nil {
		return t
	}
	for _, n := range t.start.Parent.Children {
		if n.Kind == KindCall && n.Func() == class+"."+meth {
			t.start = n
			break
		}
	}
	return t
}

// MethodCall splits a method item's call expression, Cls(init args).meth(args), into its class
// and method names; ok is false for any other expression. Parentheses inside string literals
// (single- or double-quoted, with backslash escapes, as reprs render them) are skipped.
func MethodCall(call string) (class, meth string, ok bool) {
	i := strings.IndexByte(call, '(')
	if i <= 0 || !isIdent(call[:i]) {
		return "", "", false
	}
	end := closing(call, i)
	if end < 0 || end+1 >= len(call) || call[end+1] != '.' {
		return "", "", false
	}
	rest := call[end+2:]
	j := strings.IndexByte(rest, '(')
	if j <= 0 || !isIdent(rest[:j]) || closing(rest, j) != len(rest)-1 {
		return "", "", false
	}
	return call[:i], rest[:j], true
}

// closing is the index of the ')' that closes the '(' at s[open], -1 if none does.
func closing(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch c := s[i]; c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth--; depth == 0 {
				if c != ')' {
					return -1
				}
				return i
			}
		case '\'', '"':
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			if i >= len(s) {
				return -1
			}
		}
	}
	return -1
}

// isIdent reports whether s is an ASCII identifier (a method item's names are: testcalls).
func isIdent(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// started is t started where it.Start says.
func (it Item) started(t *Tree) *Tree {
	if it.Start == schemas.ForwardStartFunction {
		return StartAtCall(t, it.Call)
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
