package debugger

import (
	"math/rand/v2"
	"strconv"

	"github.com/ndtrace/ndtrace/schemas"
)

// MainFunc is the name of the wrapper function that holds a function-level entry's call.
const MainFunc = "main"

// WrapMain returns the forward tree of `def main(): return CALL` around a function-level trace:
// main's call, its line `    return CALL` holding every top-level state of fwd as children, and,
// if the run ended, main's exception (for an uncaught one) and return. The wrapper lets a forward
// trajectory start before the call, with the inputs in the CODE context, as in the paper.
func WrapMain(fwd *Tree, call string) *Tree { return wrapMain(fwd, call, nil, "") }

// WrapMainValue is WrapMain with main returning value, the call's value as the run rendered it
// (sandbox.Result.Value), when the run ended normally and value is not empty: the entry's own
// return is not always the call's value (C(2) calls C.__init__, which returns None).
func WrapMainValue(fwd *Tree, call, value string) *Tree { return wrapMain(fwd, call, nil, value) }

// WrapConsumed returns the forward tree of the wrapper ConsumeWrapper(call, c.Limit) around the
// trace of a call whose iterator the tracer consumed (c): main's line `    return
// list(islice(CALL, N))` holds every top-level state (the call's own, then each resumption of the
// generator or each __next__, one call…return sequence apiece), and main returns the list of the
// values taken (c.Value).
func WrapConsumed(fwd *Tree, call string, c *schemas.Consume) *Tree {
	return wrapMain(fwd, ConsumeCall(call, c.Limit), c, "")
}

// wrapMain is WrapMain, with main returning the consumed values when c is set, or else value when
// it is not empty.
func wrapMain(fwd *Tree, call string, c *schemas.Consume, value string) *Tree {
	src := "    return " + call
	first := 1 // the def line's number in the wrapper
	if c != nil {
		first = 3 // after the import and a blank line
	}
	mk := func(kind Kind, src string, value *string) *Node {
		return &Node{Kind: kind, syn: &schemas.Event{Event: string(kind), Func: MainFunc, File: "<main>",
			Src: src, Locals: schemas.Locals{}, Value: value, Frame: 0, Lineno: first + 1}}
	}
	callN := mk(KindCall, "def main():", nil)
	callN.syn.Lineno = first
	line := mk(KindLine, src, nil)
	line.Children = fwd.Top
	top := []*Node{callN, line}
	var lastTop *Node
	if len(fwd.Top) > 0 {
		lastTop = fwd.Top[len(fwd.Top)-1]
	}
	switch fwd.Exit {
	case ExitNormal:
		v := "None"
		if c != nil && c.Value != "" {
			v = c.Value // the list of the values taken, not the last resumption's yield
		} else if c == nil && value != "" {
			v = value // the call's value, as the run rendered it
		} else if lastTop != nil {
			if lv := lastTop.Value(); lv != nil {
				v = *lv
			}
		}
		ret := mk(KindReturn, src, &v)
		top = append(top, ret)
	case ExitError:
		// The exception passes through main too, as it would in Python.
		var exc *Node
		for _, n := range fwd.Order {
			if n.Kind == KindException && n.Depth == 0 {
				exc = n
			}
		}
		if exc != nil {
			e := mk(KindException, src, exc.Value())
			e.syn.ExcType = exc.ExcType()
			none := "None"
			ret := mk(KindReturn, src, &none)
			ret.syn.Unwind = true
			top = append(top, e, ret)
		}
	}
	for _, n := range fwd.Order {
		n.Depth++
	}
	t := &Tree{Direction: Forward, Exit: fwd.Exit, Top: top}
	t.index()
	return t
}

// MainWrapper returns the source of the wrapper WrapMain models.
func MainWrapper(call string) string {
	return "def " + MainFunc + "():\n    return " + call + "\n"
}

// ConsumeCall returns the expression a consumed call stands for: list(islice(CALL, limit)), what
// the tracer does with an iterator the call returns (docs/tracer-protocol.md).
func ConsumeCall(call string, limit int) string {
	return "list(islice(" + call + ", " + strconv.Itoa(limit) + "))"
}

// ConsumeWrapper returns the source of the wrapper WrapConsumed models: the import of islice, a
// blank line and main returning ConsumeCall(call, limit).
func ConsumeWrapper(call string, limit int) string {
	return "from itertools import islice\n\n" + MainWrapper(ConsumeCall(call, limit))
}

// CodeContext returns the CODE context of a trace of the file code: the top-level blocks that contain
// a line some state of t visited, and the module-level definitions (imports, constants, class
// headers) they name, within DefsBudget (moduleContext), in source order, separated by blank lines,
// ending in a newline; t.CodeOmitted counts the definitions left out.
// With wrapperCall set (forward function-level trajectories) the main() wrapper follows. Without
// blocks (an older tracer) the whole file is the context.
func CodeContext(code string, blocks []schemas.Block, t *Tree, wrapperCall string) string {
	wrapper := ""
	if wrapperCall != "" {
		wrapper = MainWrapper(wrapperCall)
	}
	return codeContext(code, blocks, t, wrapper)
}

// codeContext is CodeContext with the wrapper's source given whole ("" for none). It records in
// t.CodeOmitted how many module-level definitions the visited blocks name were left out.
func codeContext(code string, blocks []schemas.Block, t *Tree, wrapper string) string {
	visited := map[int]bool{}
	var file string
	for _, n := range t.Order {
		if n.Func() == MainFunc && n.File() == "<main>" {
			continue
		}
		visited[n.Lineno()] = true
		file = n.File()
	}
	ctx, omitted := moduleContext(code, blocks, visited, file, wrapper, DefsBudget)
	t.CodeOmitted = omitted
	return ctx
}

// SampleEntry picks one function call of a long trace as a trajectory's entry point, uniformly among
// the calls that start a frame (not a generator's later resumptions), and returns the forward tree
// truncated to that call's scope, rebased to depth 0 (paper §4.3). Its exit is normal if the call
// returned, error if an exception left it, and never if the trace ends inside it.
func SampleEntry(fwd *Tree, rng *rand.Rand) (*Tree, error) {
	seen := map[int]bool{}
	var calls []*Node
	for _, n := range fwd.Order {
		if n.Kind == KindCall && !seen[n.Frame()] {
			seen[n.Frame()] = true
			calls = append(calls, n)
		}
	}
	if len(calls) == 0 {
		return nil, ErrEmptyTrace
	}
	return Scope(fwd, calls[rng.IntN(len(calls))])
}

// Scope returns the forward tree of the call that starts at call node c, truncated to its scope.
func Scope(fwd *Tree, c *Node) (*Tree, error) {
	ret := fwd.firstOnLevel(c, KindReturn)
	end := len(fwd.Order) // the scope runs to the end of the trace if the call never returned
	exit := ExitNever
	if ret != nil {
		end = ret.seq + 1
		exit = ExitNormal
		if ret.Unwind() {
			exit = ExitError
		}
	} else if fwd.Exit != ExitNever {
		exit = fwd.Exit
	}
	// The scope's states are events of one trace in a row (a forward tree's order is the recorded
	// order): a tree over that range, no copy.
	scope := fwd.Order[c.seq:end]
	contiguous := c.tr != nil
	for i, n := range scope {
		if n.tr != c.tr || int(n.ev) != int(c.ev)+i {
			contiguous = false
			break
		}
	}
	depth := c.Event().Depth
	if contiguous {
		return buildForward(c.tr, int(c.ev), int(c.ev)+len(scope), int32(depth)+c.dbase, exit)
	}
	events := make([]schemas.Event, 0, len(scope))
	for _, n := range scope {
		ev := n.Event()
		ev.Depth -= depth
		events = append(events, ev)
	}
	return BuildForward(events, exit)
}
