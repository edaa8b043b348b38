package debugger

import (
	"strings"

	"github.com/ndtrace/ndtrace/schemas"
)

// entryIndex returns the index in fwd.Top of the entry call of a function-level trace: the last
// top-level call that starts a frame of its own and is not a finaliser (a __del__), before the
// consumption's first state when the tracer consumed the call's iterator (c). The calls before it
// on the top level are those of the call expression's arguments; the top-level calls after its
// return are cleanup: a generator closed when the entry's frame is freed is resumed (a call of a
// frame already seen) to raise GeneratorExit, an object's __del__ runs. A finaliser is not always
// named __del__ (__del__ = close, a lambda): when the call expression names its function (call,
// "f(...)" or "obj.m(...)"), the entry is the last such call of a function of that name, and only
// when none is, the last such call. -1 when there is no call.
func entryIndex(fwd *Tree, c *schemas.Consume, call string) int {
	end := len(fwd.Top)
	if c != nil && c.Start >= 0 && c.Start < len(fwd.Order) && fwd.Order[c.Start].Parent == nil {
		end = fwd.Order[c.Start].index
	}
	callee := lastName(calleeOf(call))
	seen := map[int]bool{}
	entry, named := -1, -1
	for _, n := range fwd.Order {
		if n.Parent == nil && n.index >= end {
			break
		}
		frame := n.Frame()
		if n.Kind == KindCall && n.Parent == nil && !seen[frame] && !strings.HasSuffix(n.Func(), "__del__") {
			entry = n.index
			if callee != "" && lastName(n.Func()) == callee {
				named = n.index
			}
		}
		seen[frame] = true
	}
	if named >= 0 {
		return named
	}
	return entry
}

// calleeOf returns the function a call expression calls when it is a dotted name ("f", "obj.m"),
// else "".
func calleeOf(call string) string {
	i := strings.IndexByte(call, '(')
	if i <= 0 {
		return ""
	}
	name := strings.TrimSpace(call[:i])
	for j := 0; j < len(name); j++ {
		if c := name[j]; !(c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80) {
			return ""
		}
	}
	return name
}

// lastName returns a dotted name's last part (m of C.m).
func lastName(s string) string { return s[strings.LastIndexByte(s, '.')+1:] }

// dropCleanup returns the forward tree of a function-level trace without the top-level states that
// follow the entry call's return (see entryIndex; call is the item's call expression), for a call
// whose iterator was not consumed: the cleanup Python runs once the entry returned, as it frees
// the entry's frame (a generator's GeneratorExit and finally blocks, a __del__). They are no part of the call under study, when they
// run is up to reference counting and the garbage collector rather than the code's control flow,
// and they must not stand for the entry's return (main returns the entry's value) nor for its
// exception. A run cut off by a limit during the cleanup is thereby not cut: the entry returned, so
// the exit is exit_normal, or exit_error if its return unwinds an exception. fwd is returned
// unchanged when there is nothing to drop.
func dropCleanup(fwd *Tree, c *schemas.Consume, call string) *Tree {
	if c != nil {
		return fwd
	}
	e := entryIndex(fwd, c, call)
	if e < 0 {
		return fwd
	}
	ret := fwd.firstOnLevel(fwd.Top[e], KindReturn)
	if ret == nil || ret.index == len(fwd.Top)-1 {
		return fwd
	}
	exit := fwd.Exit
	if exit == ExitNever {
		exit = ExitNormal
		if ret.Unwind() {
			exit = ExitError
		}
	}
	t := &Tree{Direction: Forward, Exit: exit, Top: fwd.Top[: ret.index+1 : ret.index+1]}
	t.index()
	return t
}
