package debugger

import (
	"errors"
	"fmt"

	"github.com/ndtrace/ndtrace/schemas"
)

// Node is one state of a state tree.
type Node struct {
	// Kind is the state's event type.
	Kind Kind
	// Event is the traced event the state comes from; its Locals are the frame's full locals.
	Event schemas.Event
	// Children are the states of the calls made from this node (a call-site line), in order. In an
	// inverse tree only inv_line_call nodes have children: the callees' states, reversed.
	Children []*Node
	// Parent is the node whose Children hold this one, nil on the top level.
	Parent *Node
	// Depth is the call-stack depth: 0 for the entry function's states.
	Depth int

	index int // position in its level
	seq   int // position in the tree's order
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
}

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
	t := &Tree{Direction: Forward, Exit: exit}
	var owners []*Node // owners[i] holds level i+1; the top level has no owner
	level := func() *[]*Node {
		if len(owners) == 0 {
			return &t.Top
		}
		o := owners[len(owners)-1]
		return &o.Children
	}
	for _, ev := range events {
		n := &Node{Kind: Kind(ev.Event), Event: ev}
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
			return nil, fmt.Errorf("debugger: unknown event %q", ev.Event)
		}
	}
	t.index()
	return t, nil
}

// index numbers every node's position in its level and in the tree order.
func (t *Tree) index() {
	t.Order = t.Order[:0]
	var walk func(level []*Node, parent *Node)
	walk = func(level []*Node, parent *Node) {
		for i, n := range level {
			n.index, n.Parent = i, parent
			n.seq = len(t.Order)
			t.Order = append(t.Order, n)
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

// Start returns the first state of a trajectory over t.
func (t *Tree) Start() *Node { return t.Order[0] }

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

// Valid reports whether action a may be taken at n. The only invalid moves are the jumps that would
// not move: step_return at a return state and inv_step_call at an inv_call state (docs/debugger.md).
func (t *Tree) Valid(n *Node, a Action) bool {
	switch a {
	case StepInto, StepOver, Breakpoint, Continue:
		return t.Direction == Forward
	case StepReturn:
		return t.Direction == Forward && n.Kind != KindReturn
	case InvStepInto, InvStepOver:
		return t.Direction == Inverse
	case InvStepCall:
		return t.Direction == Inverse && n.Kind != KindInvCall
	}
	return false
}

// Apply returns the state that action a (with breakpoint source arg) leads to from n, or nil for
// the exit state.
func (t *Tree) Apply(n *Node, a Action, arg string) (*Node, error) {
	if !t.Valid(n, a) {
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
			if t.Order[i].Event.Src == arg {
				return t.Order[i], nil
			}
		}
		return nil, nil
	case Continue:
		return nil, nil
	}
	return nil, fmt.Errorf("debugger: unknown action %q", a)
}

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
				lc := &Node{Kind: KindInvLineCall, Event: n.Event, Depth: depth}
				lc.Children = reverse(n.Children, depth+1)
				out = append(out, lc)
			}
			out = append(out, &Node{Kind: inverseKind(n.Kind), Event: n.Event, Depth: depth})
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
