package debugger

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/ndtrace/ndtrace/schemas"
)

// CostFunc returns the tokens a step adds to a rendered trajectory. Package tokenize provides exact
// counts; EstimateTokens is the default.
type CostFunc func(Step) int

// EstimateTokens estimates a step's tokens from its size: about 3.5 bytes a token for the text, plus
// one token per special token.
func EstimateTokens(s Step) int {
	n := len(s.State.Src) + len(s.Arg)
	for _, v := range s.State.Shown {
		n += len(v.Name) + len(v.Value) + 8
	}
	if s.State.Value != nil {
		n += len(*s.State.Value) + 2
	}
	return n*2/7 + 6
}

// NewRand returns the deterministic random source of a trajectory seed.
func NewRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// Sample draws one trajectory over t with policy p, starting at t's first state. code is the CODE
// context. The same tree, code, policy and seed always give the same trajectory. cost may be nil
// (EstimateTokens).
func Sample(t *Tree, code string, p Policy, seed uint64, cost CostFunc) (Trajectory, error) {
	traj, _, err := SampleAtMost(t, code, p, seed, cost, 0)
	return traj, err
}

// SampleAtMost is Sample that gives up after maxSteps steps (0: never): complete is false when it
// stopped there before reaching the exit, and the trajectory is then only its first maxSteps steps,
// which Sample would have continued exactly as drawn. A caller that drops or re-samples every
// trajectory longer than some bound stops the work at that bound instead of drawing, rendering and
// tokenizing a trajectory as long as the whole trace (a step_into policy over an event-capped run).
func SampleAtMost(t *Tree, code string, p Policy, seed uint64, cost CostFunc, maxSteps int) (traj Trajectory, complete bool, err error) {
	if err := p.Validate(); err != nil {
		return Trajectory{}, false, err
	}
	if len(t.Order) == 0 {
		return Trajectory{}, false, ErrEmptyTrace
	}
	if cost == nil {
		cost = EstimateTokens
	}
	rng := NewRand(seed)
	codeLines := breakpointLines(code)
	traj = Trajectory{Direction: t.Direction, Code: code}
	tokens := 0
	var prev *Node
	var prevAction Action
	// Every step has an action, so the actions taken so far are the steps (counted, not recounted:
	// Trajectory.Actions walks every step, which made a long trajectory quadratic).
	for n := t.Start(); ; {
		step := Step{State: stateAt(n, prev, prevAction)}
		finishing := len(traj.Steps)+1 >= p.MaxActions || tokens >= p.MaxTokens
		if finishing {
			// The trajectory is cut short by a cap: the rest is finished as fast as possible.
			traj.Truncated = true
		}
		switch {
		case finishing && t.Direction == Forward:
			step.Action = Continue
		case finishing:
			step.Action = InvStepOver
			if t.Valid(n, InvStepCall) {
				step.Action = InvStepCall
			}
		default:
			step.Action = p.choose(rng, t, n)
		}
		if step.Action == Breakpoint {
			step.Arg = breakpointTarget(rng, t, n, codeLines, p.BreakpointReachable)
		}
		next, err := t.Apply(n, step.Action, step.Arg)
		if err != nil {
			return Trajectory{}, false, err
		}
		tokens += cost(step)
		traj.Steps = append(traj.Steps, step)
		if next == nil {
			traj.Exit = t.Exit
			return traj, true, nil
		}
		if maxSteps > 0 && len(traj.Steps) >= maxSteps {
			return traj, false, nil
		}
		prev, prevAction, n = n, step.Action, next
	}
}

// stateAt is the state shown at n, reached from prev by action a. LOCALS are full at a call and at
// an inv_call, after a breakpoint, and whenever the previous state belongs to another frame (the
// scope changed); otherwise they are the diff against the previous state.
func stateAt(n, prev *Node, a Action) State {
	frame := n.Frame()
	st := State{Kind: n.Kind, Src: n.Src(), Func: n.Func(), Lineno: n.Lineno(), Depth: n.Depth, Frame: frame,
		Locals: n.Locals()}
	if n.Kind.HasArgs() {
		v := "None"
		if ev := n.Value(); ev != nil {
			v = *ev
		}
		st.Value = &v
		return st
	}
	if prev == nil || prev.Frame() != frame || n.Kind == KindCall || n.Kind == KindInvCall || a == Breakpoint {
		st.Shown = append(schemas.Locals{}, st.Locals...)
		return st
	}
	st.Shown, st.Elided = Diff(st.Locals, prev.Locals())
	return st
}

// Diff returns the variables of cur whose value is new or differs from base, in cur's order, and
// whether any variable of cur was left out as unchanged. Variables of base missing from cur are left
// out silently, as in the paper.
func Diff(cur, base schemas.Locals) (shown schemas.Locals, elided bool) {
	shown = schemas.Locals{}
	for _, v := range cur {
		if old, ok := base.Get(v.Name); ok && old == v.Value {
			elided = true
			continue
		}
		shown = append(shown, v)
	}
	return shown, elided
}

// breakpointLines returns the distinct lines of a CODE context that Python can stop at
// (ExecutableLines: not blank, comment, docstring, else:/try:/finally: or continuation lines), in
// order, trailing whitespace trimmed.
func breakpointLines(code string) []string {
	exec := ExecutableLines(code)
	seen := map[string]bool{}
	var out []string
	for i, l := range strings.Split(code, "\n") {
		l = strings.TrimRight(l, " \t\r")
		if !exec[i] || strings.TrimSpace(l) == "" || seen[l] {
			continue
		}
		seen[l] = true
		out = append(out, l)
	}
	return out
}

// breakpointTarget draws a breakpoint's source line: with probability reachable one of the distinct
// lines still ahead in the trace, otherwise any line of the CODE context (which may never be reached
// again: the breakpoint then leads to the exit). In a cut tree (Tree.Cut) the target is always
// one of the lines ahead: whether the program would have reached another after the cut is unseen.
func breakpointTarget(rng *rand.Rand, t *Tree, n *Node, codeLines []string, reachable float64) string {
	ahead := t.linesAhead(n)
	r := rng.Float64()
	if len(ahead) > 0 && (r < reachable || len(codeLines) == 0 || t.Cut()) {
		return ahead[rng.IntN(len(ahead))]
	}
	if len(codeLines) > 0 {
		return codeLines[rng.IntN(len(codeLines))]
	}
	return n.Src()
}

// srcIndex lists, for every distinct non-empty source line of a tree, the positions in Order of
// the nodes that show it, ascending.
type srcIndex struct {
	srcs []string
	pos  [][]int32
}

// linesAhead returns the distinct non-empty source lines of the nodes after n in tree order, in
// the order of their first occurrence after n. It takes O(D log N) for D distinct lines among N
// nodes (the index is built once per tree, in O(N)), not a scan of the rest of the trace, so that
// a trajectory's breakpoints cost no more than its steps whatever the trace's length.
func (t *Tree) linesAhead(n *Node) []string {
	if t.srcs == nil {
		ix := &srcIndex{}
		at := map[string]int{}
		for i, m := range t.Order {
			s := m.Src()
			if s == "" {
				continue
			}
			k, ok := at[s]
			if !ok {
				k = len(ix.srcs)
				at[s] = k
				ix.srcs = append(ix.srcs, s)
				ix.pos = append(ix.pos, nil)
			}
			ix.pos[k] = append(ix.pos[k], int32(i))
		}
		t.srcs = ix
	}
	type first struct {
		pos int32
		src string
	}
	var firsts []first
	for k, ps := range t.srcs.pos {
		i, _ := slices.BinarySearch(ps, int32(n.seq+1))
		if i < len(ps) {
			firsts = append(firsts, first{ps[i], t.srcs.srcs[k]})
		}
	}
	slices.SortFunc(firsts, func(a, b first) int { return int(a.pos - b.pos) })
	out := make([]string, len(firsts))
	for i, f := range firsts {
		out[i] = f.src
	}
	return out
}

// Replay follows the given actions from t's first state (the breakpoint arguments in args, by
// position) and returns the trajectory, for prompts that prescribe the actions.
func Replay(t *Tree, code string, actions []Action, args []string) (Trajectory, error) {
	traj := Trajectory{Direction: t.Direction, Code: code}
	var prev *Node
	var prevAction Action
	n := t.Start()
	for i, a := range actions {
		step := Step{State: stateAt(n, prev, prevAction), Action: a}
		if a == Breakpoint && i < len(args) {
			step.Arg = args[i]
		}
		next, err := t.Apply(n, a, step.Arg)
		if err != nil {
			return Trajectory{}, fmt.Errorf("action %d: %w", i, err)
		}
		traj.Steps = append(traj.Steps, step)
		if next == nil {
			if i != len(actions)-1 {
				return Trajectory{}, fmt.Errorf("action %d reached the exit before the last action", i)
			}
			traj.Exit = t.Exit
			return traj, nil
		}
		prev, prevAction, n = n, a, next
	}
	// Not at the exit: the trajectory stops at a state (a prompt); its last step has no action.
	traj.Steps = append(traj.Steps, Step{State: stateAt(n, prev, prevAction)})
	return traj, nil
}
