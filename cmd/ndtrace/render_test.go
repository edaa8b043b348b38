package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/evalset"
	"github.com/ndtrace/ndtrace/tokenize"
)

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

func readJSONL[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	return out
}

// TestPromptsGolden checks the three CruxEval prompt tasks against hand-written listings in the
// shape of the paper's Fig. B.3 (output prediction with step_return and with a breakpoint on the
// return line) and Fig. B.4 (input prediction with inv_step_call), on the paper's count example.
func TestPromptsGolden(t *testing.T) {
	for _, task := range []string{"output-step_return", "output-breakpoint", "input-inv_step_call"} {
		t.Run(task, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.jsonl")
			if _, stderr, code := runCLI(t, "prompts", "--input", "testdata/count.jsonl", "--task", task, "--out", out); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			got := readJSONL[evalset.Example](t, out)
			b, err := os.ReadFile("testdata/golden-" + task + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var want evalset.Example
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != want {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
			if !strings.HasSuffix(got[0].Prompt, "<|frame_sep|>") {
				t.Error("prompt does not end with <|frame_sep|>")
			}
		})
	}
}

func TestPromptsRejects(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	rows := strings.Join([]string{
		`{"id": "ok", "code": "def f(x):\n    return x + 1", "input": "1", "output": "2"}`,
		`{"id": "syntax", "code": "def f(x)\n    return x", "input": "1", "output": "1"}`,
		`{"id": "raises", "code": "def f(x):\n    return 1 // x", "input": "0", "output": ""}`,
		`not json at all`,
		`{"id": "nocode", "input": "1"}`,
		`{"id": "loops", "code": "def f(x):\n    while True:\n        pass", "input": "1", "output": ""}`,
	}, "\n")
	if err := os.WriteFile(in, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	stdout, stderr, code := runCLI(t, "prompts", "--input", in, "--task", "output-step_return", "--out", out, "--timeout", "1s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	prompts := readJSONL[evalset.Example](t, out)
	rejects := readJSONL[evalset.Reject](t, filepath.Join(dir, "out.rejects.jsonl"))
	// Every input row ends as a prompt or a reject with a reason.
	if len(prompts)+len(rejects) != 6 {
		t.Fatalf("%d prompts + %d rejects for 6 rows (%s)", len(prompts), len(rejects), stdout)
	}
	reasons := map[string]string{}
	for _, r := range rejects {
		reasons[r.ID] = r.Reason
		if r.Reason == "" {
			t.Errorf("reject %+v without a reason", r)
		}
	}
	for id, want := range map[string]string{"syntax": "SyntaxError", "nocode": "missing code", "": "malformed JSON"} {
		if !strings.Contains(reasons[id], want) {
			t.Errorf("reject %q: reason %q lacks %q", id, reasons[id], want)
		}
	}
	// The raising row still gives a prompt (its exit is error); the looping one, cut off by the
	// time limit, does not: where step_return leads lies past the cut, unseen (issue 28).
	ids := map[string]evalset.Example{}
	for _, p := range prompts {
		ids[p.ID] = p
	}
	if _, ok := ids["raises"]; !ok {
		t.Errorf("no prompt for a function that raises")
	}
	if p, ok := ids["loops"]; ok {
		t.Errorf("looping function gave a prompt: %+v", p)
	}
	if !strings.Contains(reasons["loops"], "cut") {
		t.Errorf("looping function: reject reason %q does not say the run was cut", reasons["loops"])
	}
}

// TestPromptsNextState runs the next-state task on one row: the examples are written with their
// task and action, and every action left without one is named on stdout. (The set itself is tested
// in evalset.)
func TestPromptsNextState(t *testing.T) {
	out := filepath.Join(t.TempDir(), "next.jsonl")
	stdout, stderr, code := runCLI(t, "prompts", "--input", "testdata/count.jsonl", "--task", "next-state", "--per-action", "1", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows := readJSONL[evalset.Example](t, out)
	if want := fmt.Sprintf("%d prompts written to %s; 0 rejected rows in ", len(rows), out); len(rows) == 0 || !strings.HasPrefix(stdout, want) {
		t.Fatalf("stdout %q, want it to start with %q", stdout, want)
	}
	got := map[string]bool{}
	for _, r := range rows {
		if r.ID != "count" || r.Task != "next-state" || got[r.Action] {
			t.Errorf("example %s/%s/%s: want one per action, of row count, task next-state", r.ID, r.Task, r.Action)
		}
		got[r.Action] = true
	}
	for _, a := range append(append([]debugger.Action{}, debugger.ForwardActions...), debugger.InverseActions...) {
		if short := strings.Contains(stdout, "next-state: only 0 of 1 examples for "+string(a)+"\n"); short == got[string(a)] {
			t.Errorf("%s: example %v, named short on stdout %v:\n%s", a, got[string(a)], short, stdout)
		}
	}
}

func TestRenderCommand(t *testing.T) {
	code := writeFile(t, "count.py", "def f(s, t):\n    n = 0\n    for c in s:\n        n += int(c == t)\n    return n\n")
	// text: the grammar, parseable back.
	stdout, stderr, exit := runCLI(t, "render", "--code", code, "--call", "f('berry', 'r')", "--seed", "3")
	if exit != 0 {
		t.Fatalf("exit %d: %s", exit, stderr)
	}
	traj, err := tokenize.Parse(strings.TrimSuffix(stdout, "\n"))
	if err != nil {
		t.Fatalf("render output does not parse: %v", err)
	}
	if traj.Direction != debugger.Forward || traj.Steps[0].State.Src != "def main():" {
		t.Errorf("trajectory %+v", traj.Steps[0])
	}
	// json with the step_into policy: every recorded state, full locals, the exit last.
	stdout, stderr, exit = runCLI(t, "render", "--code", code, "--call", "f('berry', 'r')", "--policy", "step_into", "--format", "json")
	if exit != 0 {
		t.Fatalf("exit %d: %s", exit, stderr)
	}
	var rt renderedTrajectory
	if err := json.Unmarshal([]byte(stdout), &rt); err != nil {
		t.Fatal(err)
	}
	last := rt.States[len(rt.States)-1]
	if last.Event != "exit_normal" || last.Action != "" {
		t.Errorf("last state %+v", last)
	}
	for _, s := range rt.States[:len(rt.States)-1] {
		if s.Action != "step_into" {
			t.Fatalf("action %q under the step_into policy", s.Action)
		}
	}
	var sawFull bool
	for _, s := range rt.States {
		if s.Src == "    return n" && s.Event == "line" {
			sawFull = len(s.Locals) == 4
		}
	}
	if !sawFull {
		t.Errorf("json locals are not the full dictionaries")
	}
	// inverse json ends in inv_exit_entry.
	stdout, _, exit = runCLI(t, "render", "--code", code, "--call", "f('berry', 'r')", "--direction", "inverse", "--format", "json")
	if exit != 0 || !strings.Contains(stdout, `"event": "inv_exit_entry"`) || !strings.Contains(stdout, `"event": "inv_return"`) {
		t.Errorf("inverse json: %s", stdout)
	}
	// cwm: the entry is marked and the trace ends with end_of_text.
	stdout, stderr, exit = runCLI(t, "render", "--code", code, "--call", "f('berry', 'r')", "--format", "cwm")
	if exit != 0 || !strings.Contains(stdout, "def f(s, t):  # << START_OF_TRACE") || !strings.HasSuffix(strings.TrimSpace(stdout), "<|end_of_text|>") {
		t.Errorf("cwm (%d, %s): %s", exit, stderr, stdout)
	}
	// bad flags
	for _, args := range [][]string{{"--direction", "sideways"}, {"--policy", "random"}, {"--format", "xml"}} {
		if _, _, exit := runCLI(t, append([]string{"render", "--code", code, "--call", "f('a', 'b')"}, args...)...); exit != 2 {
			t.Errorf("%v: exit %d, want 2", args, exit)
		}
	}
}
