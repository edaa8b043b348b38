// Package evalset builds evaluation sets from traced calls: the CruxEval prediction prompts in the
// shape of the paper's Fig. B.3 and B.4 (output prediction by step_return or by a breakpoint on the
// return line, input prediction by inv_step_call) and the next-state set of its §5.1 (a number of
// examples per action, each a sampled trajectory cut right after an action of that kind).
//
// It traces nothing itself: the caller runs each row in the sandbox and hands over the
// debugger.Item.
package evalset

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strings"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/tokenize"
)

// Task is an evaluation task.
type Task string

// The tasks.
const (
	// OutputStepReturn predicts the function's return value by one step_return (Fig. B.3).
	OutputStepReturn Task = "output-step_return"
	// OutputBreakpoint predicts it by a breakpoint on the function's return line (Fig. B.3).
	OutputBreakpoint Task = "output-breakpoint"
	// InputInvStepCall predicts the function's input by one inv_step_call (Fig. B.4).
	InputInvStepCall Task = "input-inv_step_call"
	// NextState is the next-state set: examples per action (§5.1).
	NextState Task = "next-state"
)

// CruxRow is one row of a CruxEval-format corpus.
type CruxRow struct {
	ID     string `json:"id"`
	Code   string `json:"code"`
	Input  string `json:"input"`
	Output string `json:"output"`
	// Line is the row's line in the corpus, from 1.
	Line int `json:"-"`
}

// Example is one evaluation example: the prompt, and the target a model should give.
type Example struct {
	ID     string `json:"id"`
	Task   string `json:"task,omitempty"`
	Action string `json:"action,omitempty"`
	Prompt string `json:"prompt"`
	Target string `json:"target"`
}

// Reject records an input row that gave no example, and why.
type Reject struct {
	ID     string `json:"id"`
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

// ReadCrux reads a CruxEval-format JSONL corpus. Malformed rows and rows without code become
// rejects, not errors; a row without an id is named "line-N". The error is the reader's.
func ReadCrux(r io.Reader) ([]CruxRow, []Reject, error) {
	var rows []CruxRow
	var bad []Reject
	err := crawl.EachLine(r, func(line int, text []byte) error {
		var r CruxRow
		if err := json.Unmarshal(text, &r); err != nil {
			bad = append(bad, Reject{Line: line, Reason: "malformed JSON: " + err.Error()})
			return nil
		}
		if r.Code == "" {
			bad = append(bad, Reject{ID: r.ID, Line: line, Reason: "missing code"})
			return nil
		}
		if r.ID == "" {
			r.ID = fmt.Sprintf("line-%d", line)
		}
		r.Line = line
		rows = append(rows, r)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return rows, bad, nil
}

// Prediction returns the example of a prediction task (OutputStepReturn, OutputBreakpoint or
// InputInvStepCall) for the traced call of one row, named id: the trajectory from main's call up to
// the task's action, and the state that action reaches (or the exit).
func Prediction(task Task, id string, item debugger.Item) (Example, error) {
	var (
		tr      *debugger.Tree
		code    string
		err     error
		actions []debugger.Action
		args    []string
	)
	switch task {
	case OutputStepReturn, OutputBreakpoint:
		if tr, code, err = item.Tree(debugger.Forward); err != nil {
			return Example{}, err
		}
		// main's call, main's line, the function's call; then the jump to its return.
		actions = []debugger.Action{debugger.StepInto, debugger.StepInto, debugger.StepReturn}
		if task == OutputBreakpoint {
			ret := entryReturnSrc(tr)
			if ret == "" {
				return Example{}, errors.New("the function never returned")
			}
			actions[2], args = debugger.Breakpoint, []string{2: ret}
		}
	case InputInvStepCall:
		if tr, code, err = item.Tree(debugger.Inverse); err != nil {
			return Example{}, err
		}
		actions = []debugger.Action{debugger.InvStepCall}
	default:
		return Example{}, fmt.Errorf("evalset: %q is not a prediction task", task)
	}
	traj, err := debugger.Replay(tr, code, actions, args)
	if err != nil {
		return Example{}, err
	}
	traj = rows.Renumber(traj) // values as rows show them: addresses numbered from 0x1
	p, err := cut(traj, len(actions)-1)
	if err != nil {
		return Example{}, err
	}
	p.ID = id
	return p, nil
}

// entryReturnSrc is the source line of the traced function's last return (depth 1, under main).
func entryReturnSrc(tr *debugger.Tree) string {
	src := ""
	for _, n := range tr.Order {
		if n.Kind == debugger.KindReturn && n.Depth == 1 && !n.Unwind() {
			src = n.Src()
		}
	}
	return src
}

// cut returns the prompt of traj up to and including the action of step k, and its target: the next
// state (or the exit).
func cut(traj debugger.Trajectory, k int) (Example, error) {
	prefix := traj
	prefix.Steps = traj.Steps[:k+1]
	prompt, err := tokenize.RenderPrompt(prefix)
	if err != nil {
		return Example{}, err
	}
	var target string
	if k+1 < len(traj.Steps) {
		target, err = tokenize.RenderState(traj.Steps[k+1].State)
	} else {
		target, err = tokenize.RenderExit(traj.Exit)
	}
	if err != nil {
		return Example{}, err
	}
	return Example{Prompt: prompt, Target: target, Action: string(traj.Steps[k].Action)}, nil
}

// NextStateSet collects the paper's next-state evaluation set (§5.1): a number of examples per
// action, each a sampled trajectory cut right after an action of that kind.
type NextStateSet struct {
	per      int
	order    []debugger.Action
	byAction map[debugger.Action][]Example
}

// NewNextStateSet returns an empty set that wants perAction examples of every forward and inverse
// action.
func NewNextStateSet(perAction int) *NextStateSet {
	order := append(append([]debugger.Action{}, debugger.ForwardActions...), debugger.InverseActions...)
	return &NextStateSet{per: perAction, order: order, byAction: map[debugger.Action][]Example{}}
}

// Full reports whether every action has its examples.
func (s *NextStateSet) Full() bool {
	for _, a := range s.order {
		if len(s.byAction[a]) < s.per {
			return false
		}
	}
	return true
}

// Add samples one trajectory per direction of the traced call of one row, named id (seeded by seed
// and the id), and, for every action still short of examples, cuts it after one occurrence of that
// action drawn at random. It fails only when neither direction gives a trajectory.
func (s *NextStateSet) Add(id string, item debugger.Item, seed uint64) error {
	var errs []string
	for _, dir := range []debugger.Direction{debugger.Forward, debugger.Inverse} {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%s/%s", seed, id, dir)
		rowSeed := h.Sum64()
		traj, err := item.Sample(dir, debugger.PaperPolicy(), rowSeed, nil)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", dir, err))
			continue
		}
		traj = rows.Renumber(traj) // values as rows show them: addresses numbered from 0x1
		rng := debugger.NewRand(rowSeed)
		for _, a := range s.order {
			if len(s.byAction[a]) >= s.per {
				continue
			}
			var at []int
			for i, st := range traj.Steps {
				if st.Action == a {
					at = append(at, i)
				}
			}
			if len(at) == 0 {
				continue
			}
			p, err := cut(traj, at[rng.IntN(len(at))])
			if err != nil {
				return err
			}
			p.ID, p.Task = id, string(NextState)
			s.byAction[a] = append(s.byAction[a], p)
		}
	}
	if len(errs) == 2 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// Actions returns the actions the set wants examples of, forward then inverse.
func (s *NextStateSet) Actions() []debugger.Action { return slices.Clone(s.order) }

// Count returns the number of examples of action a.
func (s *NextStateSet) Count(a debugger.Action) int { return len(s.byAction[a]) }

// Examples returns the examples, action by action in the order of Actions.
func (s *NextStateSet) Examples() []Example {
	var out []Example
	for _, a := range s.order {
		out = append(out, s.byAction[a]...)
	}
	return out
}
