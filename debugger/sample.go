package debugger

import (
	"fmt"
	"math/rand/v2"
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
	if err := p.Validate(); err != nil {
		return Trajectory{}, err
	}
	if len(t.Order) == 0 {
		return Trajectory{}, ErrEmptyTrace
	}
	if cost == nil {
		cost = EstimateTokens
	}
	rng := NewRand(seed)
	codeLines := breakpointLines(code)
	traj := Trajectory{Direction: t.Direction, Code: code}
	tokens := 0
	var prev *Node
	var prevAction Action
	for n := t.Start(); ; {
		step := Step{State: stateAt(n, prev, prevAction)}
		finishing := traj.Actions()+1 >= p.MaxActions || tokens >= p.MaxTokens
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
			return Trajectory{}, err
		}
		tokens += cost(step)
		traj.Steps = append(traj.Steps, step)
		if next == nil {
			traj.Exit = t.Exit
			return traj, nil
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

// breakpointLines returns the distinct non-blank lines of a CODE context, in order.
func breakpointLines(code string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range strings.Split(code, "\n") {
		l = strings.TrimRight(l, " \t\r")
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") || seen[l] {
			continue
		}
		seen[l] = true
		out = append(out, l)
	}
	return out
}

// breakpointTarget draws a breakpoint's source line: with probability reachable one of the distinct
// lines still ahead in the trace, otherwise any line of the CODE context (which may never be reached
// again: the breakpoint then leads to the exit).
func breakpointTarget(rng *rand.Rand, t *Tree, n *Node, codeLines []string, reachable float64) string {
	var ahead []string
	seen := map[string]bool{}
	for _, m := range t.Order[n.seq+1:] {
		if s := m.Src(); s != "" && !seen[s] {
			seen[s] = true
			ahead = append(ahead, s)
		}
	}
	r := rng.Float64()
	if len(ahead) > 0 && (r < reachable || len(codeLines) == 0) {
		return ahead[rng.IntN(len(ahead))]
	}
	if len(codeLines) > 0 {
		return codeLines[rng.IntN(len(codeLines))]
	}
	return n.Src()
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
