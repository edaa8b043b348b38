package evalset

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

func TestReadCrux(t *testing.T) {
	in := strings.Join([]string{
		`{"id": "ok", "code": "def f(x):\n    return x", "input": "1", "output": "1"}`,
		`not json at all`,
		`{"id": "nocode", "input": "1"}`,
		`{"code": "def f(x):\n    return x", "input": "2"}`,
	}, "\n")
	rows, bad, err := ReadCrux(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].ID != "ok" || rows[0].Line != 1 || rows[1].ID != "line-4" || rows[1].Line != 4 || rows[1].Input != "2" {
		t.Errorf("rows %+v", rows)
	}
	if len(bad) != 2 || bad[0].Line != 2 || !strings.HasPrefix(bad[0].Reason, "malformed JSON: ") ||
		bad[1] != (Reject{ID: "nocode", Line: 3, Reason: "missing code"}) {
		t.Errorf("rejects %+v", bad)
	}
}

// traceRow traces row r's call of f in a sandbox, as ndtrace prompts does.
func traceRow(t *testing.T, sb *sandbox.Sandbox, r CruxRow) (debugger.Item, error) {
	t.Helper()
	call := sandbox.CallFromInput("f", r.Input)
	res, err := sb.Run(context.Background(), sandbox.Request{Code: r.Code, Filename: "main.py", Call: call})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := debugger.ExitFor(res.Status); err != nil {
		return debugger.Item{}, fmt.Errorf("%s: %s", res.Status, res.Detail)
	}
	return debugger.Item{Code: r.Code, Call: call, Events: res.Events, Blocks: res.Blocks, Status: res.Status, Consume: res.Consume}, nil
}

func newSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.New(context.Background(), sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// TestPrediction builds the three prediction tasks on the paper's count example: each prompt runs
// up to the task's action and its target is the state that action reaches. (The exact listings are
// cmd/ndtrace's golden tests.)
func TestPrediction(t *testing.T) {
	sb := newSandbox(t)
	item, err := traceRow(t, sb, CruxRow{Code: "def f(s, t):\n    n = 0\n    for c in s:\n        n += int(c == t)\n    return n", Input: "'berry', 'r'"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		task              Task
		action, promptEnd string
		targetHas         string
	}{
		{OutputStepReturn, "step_return", "<|step_return|><|frame_sep|>", `<|return_sep|><|src_sep|>    return n<|arg_sep|>"2"`},
		{OutputBreakpoint, "breakpoint", "<|breakpoint|>    return n<|frame_sep|>", `"n": "2"`},
		{InputInvStepCall, "inv_step_call", "<|inv_step_call|><|frame_sep|>", `"s": "'berry'"`},
	} {
		t.Run(string(tc.task), func(t *testing.T) {
			p, err := Prediction(tc.task, "count", item)
			if err != nil {
				t.Fatal(err)
			}
			if p.ID != "count" || p.Task != "" || p.Action != tc.action || !strings.HasSuffix(p.Prompt, tc.promptEnd) {
				t.Errorf("example %+v", p)
			}
			if _, err := tokenize.ParseState(p.Target); err != nil || !strings.Contains(p.Target, tc.targetHas) {
				t.Errorf("target %q (%v) lacks %s", p.Target, err, tc.targetHas)
			}
		})
	}
	if _, err := Prediction(NextState, "count", item); err == nil {
		t.Error("Prediction of the next-state task: no error")
	}
	// A function that never returns has no return line to break on.
	item, err = traceRow(t, sb, CruxRow{Code: "def f(x):\n    raise ValueError(x)", Input: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if item.Status != schemas.StatusException {
		t.Fatalf("status %q, want %q", item.Status, schemas.StatusException)
	}
	if _, err := Prediction(OutputBreakpoint, "raises", item); err == nil || err.Error() != "the function never returned" {
		t.Errorf("breakpoint on a function that raises: %v", err)
	}
}

// TestNextStateSet fills a set of 5 examples per action from the CruxEval corpus: every example
// is a prompt ending with its action and a target that parses.
func TestNextStateSet(t *testing.T) {
	f, err := os.Open(cruxeval.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, _, err := ReadCrux(f)
	if err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t)
	set := NewNextStateSet(5)
	for _, r := range rows {
		if item, err := traceRow(t, sb, r); err == nil {
			if err := set.Add(r.ID, item, 0); err != nil {
				t.Logf("%s: %v", r.ID, err)
			}
		}
		if set.Full() {
			break
		}
	}
	counts := map[string]int{}
	for _, r := range set.Examples() {
		counts[r.Action]++
		if r.Task != string(NextState) || !strings.HasSuffix(r.Prompt, "<|frame_sep|>") || r.Target == "" {
			t.Fatalf("bad example %+v", r)
		}
		// The prompt ends with the action named.
		if !strings.Contains(r.Prompt[strings.LastIndex(r.Prompt, "<|action_sep|>"):], "<|"+r.Action+"|>") {
			t.Fatalf("prompt does not end with %s", r.Action)
		}
		if _, err := tokenize.ParseState(r.Target); err != nil && !strings.HasPrefix(r.Target, "<|exit_") && r.Target != "<|inv_exit_entry|>" {
			t.Fatalf("target %q does not parse: %v", r.Target, err)
		}
	}
	for _, a := range set.Actions() {
		if counts[string(a)] != 5 || set.Count(a) != 5 {
			t.Errorf("%s: %d examples (Count %d), want 5", a, counts[string(a)], set.Count(a))
		}
	}
	if len(set.Actions()) != len(counts) {
		t.Errorf("examples of %d actions, want %d", len(counts), len(set.Actions()))
	}
}

// TestPredictionRenumbers: a prompt's values are numbered as rows number them (rows.Renumber): a
// raw address in a string is a placeholder from 0x1, never the address of one run.
func TestPredictionRenumbers(t *testing.T) {
	sb := newSandbox(t)
	item, err := traceRow(t, sb, CruxRow{Code: "def f(x):\n    s = hex(id(x))\n    return s", Input: "[1]"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Prediction(OutputStepReturn, "addr", item)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Target, "<address 0x1>") || regexp.MustCompile(`0x[0-9a-f]{9,}`).MatchString(p.Prompt+p.Target) {
		t.Errorf("prompt %q, target %q: want the address as <address 0x1>", p.Prompt, p.Target)
	}
}
