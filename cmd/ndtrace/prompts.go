package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/tokenize"
)

// The tasks of ndtrace prompts.
const (
	taskOutputStepReturn = "output-step_return"
	taskOutputBreakpoint = "output-breakpoint"
	taskInputInvStepCall = "input-inv_step_call"
	taskNextState        = "next-state"
)

// cruxRow is one row of a CruxEval-format corpus.
type cruxRow struct {
	ID     string `json:"id"`
	Code   string `json:"code"`
	Input  string `json:"input"`
	Output string `json:"output"`
}

// promptRow is one evaluation example.
type promptRow struct {
	ID     string `json:"id"`
	Task   string `json:"task,omitempty"`
	Action string `json:"action,omitempty"`
	Prompt string `json:"prompt"`
	Target string `json:"target"`
}

// rejectRow records an input row that gave no prompt, and why.
type rejectRow struct {
	ID     string `json:"id"`
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

func runPrompts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("prompts", "--input FILE.jsonl --task TASK --out OUT.jsonl [flags]", stderr)
	var (
		in, task, out, rejects, fn string
		perAction                  int
		seed                       uint64
		sf                         sandboxFlags
	)
	fs.StringVar(&in, "input", "", "CruxEval-format JSONL (id, code, input, output) (required)")
	fs.StringVar(&task, "task", "", "output-step_return, output-breakpoint, input-inv_step_call or next-state (required)")
	fs.StringVar(&out, "out", "", "output JSONL of {id, prompt, target} (required)")
	fs.StringVar(&rejects, "rejects", "", "JSONL of rows that gave no prompt, with the reason (default OUT.rejects.jsonl)")
	fs.StringVar(&fn, "func", "f", "the function each row's input is passed to")
	fs.IntVar(&perAction, "per-action", 800, "next-state: examples per action")
	fs.Uint64Var(&seed, "seed", 0, "next-state: seed of the sampled trajectories")
	sf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch task {
	case taskOutputStepReturn, taskOutputBreakpoint, taskInputInvStepCall, taskNextState:
	case "":
		return usagef("--task is required")
	default:
		return usagef("unknown --task %q", task)
	}
	if in == "" || out == "" {
		return usagef("--input and --out are required")
	}
	if perAction <= 0 {
		return usagef("--per-action must be positive")
	}
	if rejects == "" {
		rejects = strings.TrimSuffix(out, ".jsonl") + ".rejects.jsonl"
	}
	rows, bad, err := readCruxRows(in)
	if err != nil {
		return err
	}
	sb, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer sb.Close()

	var prompts []promptRow
	var next *nextStateSet
	if task == taskNextState {
		next = newNextStateSet(perAction)
	}
	start := time.Now()
	for i, r := range rows {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, err := buildPrompts(ctx, sb, r.row, fn, task, seed, next)
		if err != nil {
			bad = append(bad, rejectRow{ID: r.row.ID, Line: r.line, Reason: oneLine(err.Error())})
		}
		prompts = append(prompts, p...)
		if (i+1)%100 == 0 {
			slog.Info("prompts", "rows", i+1, "of", len(rows), "rejects", len(bad), "elapsed", time.Since(start).Round(time.Second))
		}
		if next != nil && next.full() {
			break
		}
	}
	if next != nil {
		prompts = next.rows()
	}
	if err := writeJSONL(out, prompts); err != nil {
		return err
	}
	if err := writeJSONL(rejects, bad); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d prompts written to %s; %d rejected rows in %s\n", len(prompts), out, len(bad), rejects)
	if next != nil {
		for _, a := range next.order {
			if n := len(next.byAction[a]); n < perAction {
				fmt.Fprintf(stdout, "next-state: only %d of %d examples for %s\n", n, perAction, a)
			}
		}
	}
	return nil
}

type numberedRow struct {
	row  cruxRow
	line int
}

// readCruxRows reads a CruxEval JSONL file; malformed rows become rejects, not errors.
func readCruxRows(path string) ([]numberedRow, []rejectRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, usagef("cannot read input: %v", err)
	}
	defer f.Close()
	var rows []numberedRow
	var bad []rejectRow
	err = crawl.EachLine(f, func(line int, text []byte) error {
		var r cruxRow
		if err := json.Unmarshal(text, &r); err != nil {
			bad = append(bad, rejectRow{Line: line, Reason: "malformed JSON: " + err.Error()})
			return nil
		}
		if r.Code == "" {
			bad = append(bad, rejectRow{ID: r.ID, Line: line, Reason: "missing code"})
			return nil
		}
		if r.ID == "" {
			r.ID = fmt.Sprintf("line-%d", line)
		}
		rows = append(rows, numberedRow{r, line})
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return rows, bad, nil
}

// buildPrompts traces one row and builds its prompts for task (or feeds the next-state set).
func buildPrompts(ctx context.Context, sb *sandbox.Sandbox, r cruxRow, fn, task string, seed uint64, next *nextStateSet) ([]promptRow, error) {
	call := sandbox.CallFromInput(fn, r.Input)
	item, err := traceItem(ctx, sb, r.Code, "main.py", call)
	if err != nil {
		return nil, err
	}
	if next != nil {
		return nil, next.add(r.ID, item, seed)
	}
	var (
		tr      *debugger.Tree
		code    string
		actions []debugger.Action
		args    []string
	)
	switch task {
	case taskOutputStepReturn, taskOutputBreakpoint:
		if tr, code, err = item.Tree(debugger.Forward); err != nil {
			return nil, err
		}
		// main's call, main's line, the function's call; then the jump to its return.
		actions = []debugger.Action{debugger.StepInto, debugger.StepInto, debugger.StepReturn}
		if task == taskOutputBreakpoint {
			ret := entryReturnSrc(tr)
			if ret == "" {
				return nil, errors.New("the function never returned")
			}
			actions[2], args = debugger.Breakpoint, []string{2: ret}
		}
	case taskInputInvStepCall:
		if tr, code, err = item.Tree(debugger.Inverse); err != nil {
			return nil, err
		}
		actions = []debugger.Action{debugger.InvStepCall}
	}
	traj, err := debugger.Replay(tr, code, actions, args)
	if err != nil {
		return nil, err
	}
	p, err := cut(traj, len(actions)-1)
	if err != nil {
		return nil, err
	}
	p.ID = r.ID
	return []promptRow{p}, nil
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
func cut(traj debugger.Trajectory, k int) (promptRow, error) {
	prefix := traj
	prefix.Steps = traj.Steps[:k+1]
	prompt, err := tokenize.RenderPrompt(prefix)
	if err != nil {
		return promptRow{}, err
	}
	var target string
	if k+1 < len(traj.Steps) {
		target, err = tokenize.RenderState(traj.Steps[k+1].State)
	} else {
		target, err = tokenize.RenderExit(traj.Exit)
	}
	if err != nil {
		return promptRow{}, err
	}
	return promptRow{Prompt: prompt, Target: target, Action: string(traj.Steps[k].Action)}, nil
}

// nextStateSet collects the paper's next-state evaluation set (§5.1): N examples per action, each a
// sampled trajectory cut right after an action of that kind.
type nextStateSet struct {
	per      int
	order    []debugger.Action
	byAction map[debugger.Action][]promptRow
}

func newNextStateSet(per int) *nextStateSet {
	order := append(append([]debugger.Action{}, debugger.ForwardActions...), debugger.InverseActions...)
	return &nextStateSet{per: per, order: order, byAction: map[debugger.Action][]promptRow{}}
}

func (s *nextStateSet) full() bool {
	for _, a := range s.order {
		if len(s.byAction[a]) < s.per {
			return false
		}
	}
	return true
}

// add samples one trajectory per direction of the item (seeded by the row id) and, for every action
// kind still short of examples, cuts it after one occurrence of that action drawn at random.
func (s *nextStateSet) add(id string, item debugger.Item, seed uint64) error {
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
			p.ID, p.Task = id, taskNextState
			s.byAction[a] = append(s.byAction[a], p)
		}
	}
	if len(errs) == 2 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func (s *nextStateSet) rows() []promptRow {
	var out []promptRow
	for _, a := range s.order {
		out = append(out, s.byAction[a]...)
	}
	return out
}

// writeJSONL writes rows as JSON Lines, atomically (a temporary file renamed into place).
func writeJSONL[T any](path string, rows []T) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range rows {
		if err := enc.Encode(&rows[i]); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}
