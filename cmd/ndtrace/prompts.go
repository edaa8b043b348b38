package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ndtrace/ndtrace/evalset"
	"github.com/ndtrace/ndtrace/sandbox"
)

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
	switch evalset.Task(task) {
	case evalset.OutputStepReturn, evalset.OutputBreakpoint, evalset.InputInvStepCall, evalset.NextState:
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

	var prompts []evalset.Example
	var next *evalset.NextStateSet
	if evalset.Task(task) == evalset.NextState {
		next = evalset.NewNextStateSet(perAction)
	}
	start := time.Now()
	for i, r := range rows {
		if err := ctx.Err(); err != nil {
			return err
		}
		p, err := buildPrompts(ctx, sb, r, fn, evalset.Task(task), seed, next)
		if err != nil {
			bad = append(bad, evalset.Reject{ID: r.ID, Line: r.Line, Reason: oneLine(err.Error())})
		}
		prompts = append(prompts, p...)
		if (i+1)%100 == 0 {
			slog.Info("prompts", "rows", i+1, "of", len(rows), "rejects", len(bad), "elapsed", time.Since(start).Round(time.Second))
		}
		if next != nil && next.Full() {
			break
		}
	}
	if next != nil {
		prompts = next.Examples()
	}
	if err := writeJSONL(out, prompts); err != nil {
		return err
	}
	if err := writeJSONL(rejects, bad); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d prompts written to %s; %d rejected rows in %s\n", len(prompts), out, len(bad), rejects)
	if next != nil {
		for _, a := range next.Actions() {
			if n := next.Count(a); n < perAction {
				fmt.Fprintf(stdout, "next-state: only %d of %d examples for %s\n", n, perAction, a)
			}
		}
	}
	return nil
}

// readCruxRows reads a CruxEval JSONL file; malformed rows become rejects, not errors.
func readCruxRows(path string) ([]evalset.CruxRow, []evalset.Reject, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, usagef("cannot read input: %v", err)
	}
	defer f.Close()
	rows, bad, err := evalset.ReadCrux(f)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return rows, bad, nil
}

// buildPrompts traces one row and returns its prompt for task, or feeds it to the next-state set.
func buildPrompts(ctx context.Context, sb *sandbox.Sandbox, r evalset.CruxRow, fn string, task evalset.Task, seed uint64, next *evalset.NextStateSet) ([]evalset.Example, error) {
	item, err := traceItem(ctx, sb, r.Code, "main.py", sandbox.CallFromInput(fn, r.Input))
	if err != nil {
		return nil, err
	}
	if next != nil {
		return nil, next.Add(r.ID, item, seed)
	}
	p, err := evalset.Prediction(task, r.ID, item)
	if err != nil {
		return nil, err
	}
	return []evalset.Example{p}, nil
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
