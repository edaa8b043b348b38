package debugger

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ndtrace/ndtrace/schemas"
)

// Node is one state of a state tree.
type Node struct {
	// Kind is the state's event type.
	Kind Kind
	// Children are the states of the calls made from this node (a call-site line), in order. In an
	// inverse tree only inv_line_call nodes have children: the callees' states, reversed.
	Children []*Node
	// Parent is the node whose Children hold this one, nil on the top level.
	Parent *Node
	// Depth is the call-stack depth: 0 for the entry function's states.
	Depth int

	index int // position in its level
	seq   int // position in the tree's order

	// The traced event the state comes from: event ev of tr, or syn for a state of no trace (the
	// main() wrapper). dbase is subtracted from the event's depth (a Scope's entry depth).
	tr    *Trace
	ev    int32
	dbase int32
	syn   *schemas.Event
}

// Event returns the traced event the state comes from, with the frame's full locals materialised.
func (n *Node) Event() schemas.Event {
	if n.syn != nil {
		return *n.syn
	}
	ev := n.tr.Event(int(n.ev))
	ev.Depth -= int(n.dbase)
	return ev
}

// Locals materialises the frame's full locals at the state.
func (n *Node) Locals() schemas.Locals {
	if n.syn != nil {
		return n.syn.Locals
	}
	return n.tr.Locals(int(n.ev))
}

// EventKind is the event's type (schemas.EventCall, ...).
func (n *Node) EventKind() string {
	if n.syn != nil {
		return n.syn.Event
	}
	return n.tr.Kind(int(n.ev))
}

// Src is the event's source line.
func (n *Node) Src() string {
	if n.syn != nil {
		return n.syn.Src
	}
	return n.tr.Src(int(n.ev))
}

// Func is the event's function.
func (n *Node) Func() string {
	if n.syn != nil {
		return n.syn.Func
	}
	return n.tr.Func(int(n.ev))
}

// File is the event's file.
func (n *Node) File() string {
	if n.syn != nil {
		return n.syn.File
	}
	return n.tr.File(int(n.ev))
}

// Frame is the event's frame.
func (n *Node) Frame() int {
	if n.syn != nil {
		return n.syn.Frame
	}
	return n.tr.Frame(int(n.ev))
}

// Lineno is the event's line.
func (n *Node) Lineno() int {
	if n.syn != nil {
		return n.syn.Lineno
	}
	return n.tr.Lineno(int(n.ev))
}

// Value is the event's return value or exception, nil if it has none.
func (n *Node) Value() *string {
	if n.syn != nil {
		return n.syn.Value
	}
	return n.tr.Value(int(n.ev))
}

// ExcType is the event's exception type.
func (n *Node) ExcType() string {
	if n.syn != nil {
		return n.syn.ExcType
	}
	return n.tr.strs[n.tr.evs[n.ev].exc]
}

// Unwind is the event's Unwind.
func (n *Node) Unwind() bool {
	if n.syn != nil {
		return n.syn.Unwind
	}
	return n.tr.Unwind(int(n.ev))
}

// same returns a node of kind k for the same event as n, at depth.
func (n *Node) same(k Kind, depth int) *Node {
	return &Node{Kind: k, Depth: depth, tr: n.tr, ev: n.ev, dbase: n.dbase, syn: n.syn}
}

// Tree is a state tree. Its order (pre-order: a node, then its children, then its next sibling) is
// the recorded execution order for a forward tree and the reversed order for an inverse tree.
type Tree struct {
	Direction Direction
	// Top is the top level: the entry function's states.
	Top []*Node
	// Order lists every node in tree order.
	Order []*Node
	// Exit is the state reached by moving past the last node.
	Exit Exit

	// lastRet maps a level (by its owner; nil for Top) to the index of its last return node, for
	// step_return's validity in a cut tree without a scan. Set by index.
	lastRet map[*Node]int
	// lastSrc is the position in Order of the last node with a source line (-1 for none).
	lastSrc int
	// srcs indexes the positions in Order of every source line, built on a breakpoint's first
	// draw (see srcIndex).
	srcs  *srcIndex
	start *Node // the first state of a trajectory, when not Order[0] (StartAtFunction)
	// CodeOmitted counts the module-level definitions the visited code needs that its CODE
	// context left out for DefsBudget (set by CodeContext, Item.Tree and RepoItem.Tree).
	CodeOmitted int
}

// Cut reports whether t is a forward tree of a run cut off by a limit (Exit is ExitNever): the
// recorded states end where the run was cut, and what the program did after is unseen. In a cut
// tree only the actions whose target is a recorded state, and continue, are valid (see Valid).
func (t *Tree) Cut() bool { return t.Direction == Forward && t.Exit == ExitNever }

// ExitFor returns the exit state of a forward trajectory over a run that ended with status s.
func ExitFor(s schemas.Status) (Exit, error) {
	switch s {
	case schemas.StatusOK:
		return ExitNormal, nil
	case schemas.StatusException, schemas.StatusMemory:
		return ExitError, nil
	case schemas.StatusTimeout, schemas.StatusEventLimit, schemas.StatusOutputLimit:
		return ExitNever, nil
	}
	return "", fmt.Errorf("a run with status %s has no debugger trajectory", s)
}

// ErrEmptyTrace is returned for a trace without events.
var ErrEmptyTrace = errors.New("debugger: the trace has no events")

// BuildForward builds the forward state tree of a trace: the states of one call are children of the
// calling line node, in order, so a node's depth is its call-stack depth. exit is the exit state of
// the run (see ExitFor).
func BuildForward(events []schemas.Event, exit Exit) (*Tree, error) {
	if len(events) == 0 {
		return nil, ErrEmptyTrace
	}
	return BuildForwardTrace(NewTrace(events), exit)
}

// BuildForwardTrace is BuildForward over a compact trace: the tree's states refer to its events.
func BuildForwardTrace(tr *Trace, exit Exit) (*Tree, error) {
	return buildForward(tr, 0, tr.Len(), 0, exit)
}

// buildForward builds the forward tree of events lo to hi of tr, their depths less dbase.
func buildForward(tr *Trace, lo, hi int, dbase int32, exit Exit) (*Tree, error) {
	if hi <= lo {
		return nil, ErrEmptyTrace
	}
	t := &Tree{Direction: Forward, Exit: exit}
	var owners []*Node // owners[i] holds level i+1; the top level has no owner
	level := func() *[]*Node {
		if len(owners) == 0 {
			return &t.Top
		}
		o := owners[len(owners)-1]
		return &o.Children
	}
	for i := lo; i < hi; i++ {
		n := &Node{Kind: Kind(tr.Kind(i)), tr: tr, ev: int32(i), dbase: dbase}
		switch n.Kind {
		case KindCall:
			// A call belongs to the caller's current state (the line making the call). On the top
			// level, the first call and any call after the entry returned start a level of their own.
			cur := *level()
			if len(cur) > 0 && (len(owners) > 0 || cur[len(cur)-1].Kind != KindReturn) {
				owner := cur[len(cur)-1]
				n.Depth = owner.Depth + 1
				owner.Children = append(owner.Children, n)
				owners = append(owners, owner)
				continue
			}
			t.Top = append(t.Top, n)
		case KindLine, KindException, KindReturn:
			lv := level()
			n.Depth = len(owners)
			*lv = append(*lv, n)
			if n.Kind == KindReturn && len(owners) > 0 {
				owners = owners[:len(owners)-1]
			}
		default:
			return nil, fmt.Errorf("debugger: unknown event %q", tr.Kind(i))
		}
	}
	t.index()
	return t, nil
}

// index numbers every node's position in its level and in the tree order.
func (t *Tree) index() {
	var count func(level []*Node) int
	count = func(level []*Node) int {
		n := len(level)
		for _, x := range level {
			n += count(x.Children)
		}
		return n
	}
	t.Order = slices.Grow(t.Order[:0], count(t.Top))
	t.lastRet, t.lastSrc, t.srcs = map[*Node]int{}, -1, nil
	var walk func(level []*Node, parent *Node)
	walk = func(level []*Node, parent *Node) {
		for i, n := range level {
			n.index, n.Parent = i, parent
			n.seq = len(t.Order)
			t.Order = append(t.Order, n)
			if n.Kind == KindReturn {
				t.lastRet[parent] = i
			}
			if n.Src() != "" {
				t.lastSrc = n.seq
			}
			walk(n.Children, n)
		}
	}
	walk(t.Top, nil)
}

// level returns the level n belongs to.
func (t *Tree) level(n *Node) []*Node {
	if n.Parent == nil {
		return t.Top
	}
	return n.Parent.Children
}

// Start returns the first state of a trajectory over t: the first in its order, or the function's
// call for a wrapped function-level tree started there (StartAtFunction).
func (t *Tree) Start() *Node {
	if t.start != nil {
		return t.start
	}
	return t.Order[0]
}

// next returns the next node in tree order (nil: the exit).
func (t *Tree) next(n *Node) *Node {
	if n.seq+1 < len(t.Order) {
		return t.Order[n.seq+1]
	}
	return nil
}

// after returns the first node after n's subtree: the next node on n's level or, at the end of the
// level, one level up (nil: the exit).
func (t *Tree) after(n *Node) *Node {
	for x := n; x != nil; x = x.Parent {
		if lv := t.level(x); x.index+1 < len(lv) {
			return lv[x.index+1]
		}
	}
	return nil
}

// firstOnLevel returns the first node after n on n's level whose kind is k, or nil.
func (t *Tree) firstOnLevel(n *Node, k Kind) *Node {
	lv := t.level(n)
	for i := n.index + 1; i < len(lv); i++ {
		if lv[i].Kind == k {
			return lv[i]
		}
	}
	return nil
}

// Valid reports whether action a may be taken at n. The invalid moves are the jumps that would
// not move: step_return at a return state and inv_step_call at an inv_call state; and, in a cut
// tree (Cut), every move whose target lies past the cut: step_into from the last recorded state,
// step_over and step_return when the rest of the call was not recorded, a breakpoint when no
// recorded state with a source line lies ahead (docs/debugger.md). continue is always valid
// forward: in a cut tree it reaches exit_never, which says the run was cut.
func (t *Tree) Valid(n *Node, a Action) bool {
	if t.Direction != Forward {
		switch a {
		case InvStepInto, InvStepOver:
			return true
		case InvStepCall:
			return n.Kind != KindInvCall
		}
		return false
	}
	cut := t.Cut()
	switch a {
	case StepInto:
		return !cut || n.seq+1 < len(t.Order)
	case StepOver:
		return !cut || t.after(n) != nil
	case Breakpoint:
		return !cut || t.lastSrc > n.seq
	case Continue:
		return true
	case StepReturn:
		if n.Kind == KindReturn {
			return false
		}
		if cut {
			last, ok := t.lastRet[n.Parent]
			return ok && last > n.index
		}
		return true
	}
	return false
}

// Apply returns the state that action a (with breakpoint source arg) leads to from n, or nil for
// the exit state.
func (t *Tree) Apply(n *Node, a Action, arg string) (*Node, error) {
	if !t.Valid(n, a) {
		if t.Cut() && slices.Contains(ForwardActions, a) && !(a == StepReturn && n.Kind == KindReturn) {
			return nil, fmt.Errorf("%w: %s at a %s state", ErrPastCut, a, n.Kind)
		}
		return nil, fmt.Errorf("debugger: %s is not valid at a %s state of a %s tree", a, n.Kind, t.Direction)
	}
	switch a {
	case StepInto, InvStepInto:
		return t.next(n), nil
	case StepOver, InvStepOver:
		return t.after(n), nil
	case StepReturn:
		// The return state of the current call; a call cut off before returning has none: exit.
		return t.firstOnLevel(n, KindReturn), nil
	case InvStepCall:
		// Straight back to the current call's call state, which shows its arguments.
		return t.firstOnLevel(n, KindInvCall), nil
	case Breakpoint:
		for i := n.seq + 1; i < len(t.Order); i++ {
			if t.Order[i].Src() == arg {
				return t.Order[i], nil
			}
		}
		if t.Cut() {
			// Not reached before the cut: whether the program would have reached it is unseen.
			return nil, fmt.Errorf("%w: no recorded state ahead has the source %q", ErrPastCut, arg)
		}
		return nil, nil
	case Continue:
		return nil, nil
	}
	return nil, fmt.Errorf("debugger: unknown action %q", a)
}

// ErrPastCut is returned (wrapped) by Apply for an action of a cut tree (Tree.Cut) whose target
// lies past the cut (see Valid), or a breakpoint whose line is not among the recorded states
// ahead: what the program did after the cut is unseen.
var ErrPastCut = errors.New("debugger: the action's target lies past where the run was cut")

// ErrNoInverse is returned for traces that have no inverse tree: runs cut off before the entry
// function returned.
var ErrNoInverse = errors.New("debugger: the entry call never returned, so there is no inverse trajectory")

// BuildInverse builds the inverse state tree of a forward tree: the order reversed, and every
// call-site line duplicated, as an inv_line_call node holding the callees' reversed states followed
// by a plain inv_line node. Only the last call on the top level (the entry function) is kept: an
// inverse trajectory runs from the entry's return back to its call.
func BuildInverse(fwd *Tree) (*Tree, error) {
	start := -1
	for i, n := range fwd.Top {
		if n.Kind == KindCall {
			start = i
		}
	}
	return buildInverse(fwd, start)
}

// BuildInverseConsumed builds the inverse state tree of the trace of a call whose iterator the
// tracer consumed (c): the entry is the consumption, from the first state it ran (c.Start) to the
// last: the resumptions of a generator (or the calls of __next__, of map's function) reversed,
// each one's inv_return to its inv_call, so that the trajectory ends at the first resumption's
// call, which shows the generator's arguments. The call's own states before the consumption (its
// arguments, a class's __init__, the generator function's call that ran none of its body) are
// left out as the arguments' calls are for an ordinary call. A consumption that ran no traced
// code falls back to BuildInverse.
func BuildInverseConsumed(fwd *Tree, c *schemas.Consume) (*Tree, error) {
	if c == nil || c.Start < 0 || c.Start >= len(fwd.Order) || fwd.Order[c.Start].Parent != nil {
		return BuildInverse(fwd)
	}
	return buildInverse(fwd, fwd.Order[c.Start].index)
}

// buildInverse builds the inverse tree of the top-level states of fwd from index start on.
func buildInverse(fwd *Tree, start int) (*Tree, error) {
	if start < 0 || start >= len(fwd.Top) || fwd.Top[start].Kind != KindCall || fwd.Top[len(fwd.Top)-1].Kind != KindReturn {
		return nil, ErrNoInverse
	}
	var reverse func(level []*Node, depth int) []*Node
	reverse = func(level []*Node, depth int) []*Node {
		out := make([]*Node, 0, len(level)+2)
		for i := len(level) - 1; i >= 0; i-- {
			n := level[i]
			if len(n.Children) > 0 {
				lc := n.same(KindInvLineCall, depth)
				lc.Children = reverse(n.Children, depth+1)
				out = append(out, lc)
			}
			out = append(out, n.same(inverseKind(n.Kind), depth))
		}
		return out
	}
	t := &Tree{Direction: Inverse, Exit: InvExitEntry, Top: reverse(fwd.Top[start:], 0)}
	t.index()
	return t, nil
}

func inverseKind(k Kind) Kind {
	switch k {
	case KindCall:
		return KindInvCall
	case KindReturn:
		return KindInvReturn
	case KindException:
		return KindInvException
	}
	return KindInvLine
}
