package debugger

import (
	"fmt"
	"math/rand/v2"
	"sort"
)

// Component is one categorical distribution of a policy mixture. Weights are relative: they need
// not sum to 1 (Table A.1's first component sums to 0.8).
type Component struct {
	// Weight is the probability of picking this component, relative to the others.
	Weight float64 `yaml:"weight" json:"weight"`
	// Actions maps each action to its relative probability within the component.
	Actions map[Action]float64 `yaml:"actions" json:"actions"`
}

// Policy is the data-generating action policy: at every state it picks a mixture component, then an
// action from that component among the actions valid at the state.
type Policy struct {
	// Name identifies the policy in dataset rows.
	Name string `yaml:"name" json:"name"`
	// Forward and Inverse are the mixtures of each direction.
	Forward []Component `yaml:"forward" json:"forward"`
	Inverse []Component `yaml:"inverse" json:"inverse"`
	// BreakpointReachable is the probability that a breakpoint's target line is drawn from the
	// source lines still ahead in the trace; otherwise it is drawn from every line of the CODE
	// context, which includes lines never reached (the breakpoint then leads to the exit).
	BreakpointReachable float64 `yaml:"breakpoint_reachable" json:"breakpoint_reachable"`
	// MaxActions caps the actions of a trajectory; MaxTokens caps its estimated tokens (see Cost).
	// On reaching a cap the trajectory is finished as quickly as possible: continue forward, and
	// inv_step_call/inv_step_over back to the entry inverse.
	MaxActions int `yaml:"max_actions" json:"max_actions"`
	MaxTokens  int `yaml:"max_tokens" json:"max_tokens"`
}

// PaperPolicy returns the paper's policy (Table A.1): a 50/50 mixture of a component over every
// forward action and one over step_into and step_over. The paper gives no inverse policy; ours is
// the same shape: a component over every inverse action and one over the two steps.
func PaperPolicy() Policy {
	return Policy{
		Name: "paper",
		Forward: []Component{
			{Weight: 0.5, Actions: map[Action]float64{StepInto: 0.35, StepOver: 0.1, StepReturn: 0.2, Breakpoint: 0.1, Continue: 0.05}},
			{Weight: 0.5, Actions: map[Action]float64{StepInto: 0.5, StepOver: 0.5}},
		},
		Inverse: []Component{
			{Weight: 0.5, Actions: map[Action]float64{InvStepInto: 0.5, InvStepOver: 0.3, InvStepCall: 0.2}},
			{Weight: 0.5, Actions: map[Action]float64{InvStepInto: 0.5, InvStepOver: 0.5}},
		},
		BreakpointReachable: 0.8,
		MaxActions:          2048,
		MaxTokens:           16384,
	}
}

// StepIntoPolicy takes only step_into (inverse: inv_step_into): the trajectory replays the whole
// recorded trace.
func StepIntoPolicy() Policy {
	return Policy{
		Name:       "step_into",
		Forward:    []Component{{Weight: 1, Actions: map[Action]float64{StepInto: 1}}},
		Inverse:    []Component{{Weight: 1, Actions: map[Action]float64{InvStepInto: 1}}},
		MaxActions: 1 << 20,
		MaxTokens:  1 << 30,
	}
}

// PolicyByName returns a built-in policy: "paper" or "step_into".
func PolicyByName(name string) (Policy, error) {
	switch name {
	case "paper", "":
		return PaperPolicy(), nil
	case "step_into":
		return StepIntoPolicy(), nil
	}
	return Policy{}, fmt.Errorf("unknown policy %q (want paper or step_into)", name)
}

// Validate checks that every weight is finite and non-negative, every action belongs to its
// direction, and each direction can take at least one action.
func (p *Policy) Validate() error {
	check := func(dir Direction, comps []Component, allowed []Action) error {
		total := 0.0
		for i, c := range comps {
			if !(c.Weight >= 0) || c.Weight > 1e9 {
				return fmt.Errorf("policy %s: %s component %d: bad weight %v", p.Name, dir, i, c.Weight)
			}
			sum := 0.0
			for a, w := range c.Actions {
				if !contains(allowed, a) {
					return fmt.Errorf("policy %s: %s component %d: %q is not a %s action", p.Name, dir, i, a, dir)
				}
				if !(w >= 0) || w > 1e9 {
					return fmt.Errorf("policy %s: %s component %d: bad probability %v for %s", p.Name, dir, i, w, a)
				}
				sum += w
			}
			if sum > 0 {
				total += c.Weight
			}
		}
		if total <= 0 {
			return fmt.Errorf("policy %s: no %s action has a positive probability", p.Name, dir)
		}
		return nil
	}
	if err := check(Forward, p.Forward, ForwardActions); err != nil {
		return err
	}
	if err := check(Inverse, p.Inverse, InverseActions); err != nil {
		return err
	}
	if p.BreakpointReachable < 0 || p.BreakpointReachable > 1 {
		return fmt.Errorf("policy %s: breakpoint_reachable %v is not a probability", p.Name, p.BreakpointReachable)
	}
	if p.MaxActions <= 0 || p.MaxTokens <= 0 {
		return fmt.Errorf("policy %s: max_actions and max_tokens must be positive", p.Name)
	}
	return nil
}

func contains(as []Action, a Action) bool {
	for _, x := range as {
		if x == a {
			return true
		}
	}
	return false
}

// choose draws an action valid at n: a component by weight, then an action of it among the valid
// ones. A component with no valid action is redrawn from the others.
func (p *Policy) choose(rng *rand.Rand, t *Tree, n *Node) Action {
	comps := p.Forward
	if t.Direction == Inverse {
		comps = p.Inverse
	}
	type option struct {
		a Action
		w float64
	}
	var weights []float64
	var options [][]option
	for _, c := range comps {
		var opts []option
		sum := 0.0
		// Sorted, so the draw does not depend on map iteration order.
		keys := make([]string, 0, len(c.Actions))
		for a := range c.Actions {
			keys = append(keys, string(a))
		}
		sort.Strings(keys)
		for _, k := range keys {
			a := Action(k)
			if w := c.Actions[a]; w > 0 && t.Valid(n, a) {
				opts = append(opts, option{a, w})
				sum += w
			}
		}
		if sum > 0 && c.Weight > 0 {
			weights = append(weights, c.Weight)
			options = append(options, opts)
		}
	}
	if len(options) == 0 {
		if t.Direction == Inverse {
			return InvStepInto
		}
		// No action of the policy is valid: only in a cut tree, at a state whose every move but
		// continue would cross the cut. The trajectory stops there: exit_never, the run was cut.
		return Continue
	}
	opts := options[pick(rng, weights)]
	ws := make([]float64, len(opts))
	for i, o := range opts {
		ws[i] = o.w
	}
	return opts[pick(rng, ws)].a
}

// pick draws an index with probability proportional to its weight.
func pick(rng *rand.Rand, weights []float64) int {
	total := 0.0
	for _, w := range weights {
		total += w
	}
	r := rng.Float64() * total
	for i, w := range weights {
		if r < w {
			return i
		}
		r -= w
	}
	return len(weights) - 1
}
