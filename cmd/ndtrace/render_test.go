package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/internal/cruxeval"
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
			got := readJSONL[promptRow](t, out)
			b, err := os.ReadFile("testdata/golden-" + task + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var want promptRow
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
	prompts := readJSONL[promptRow](t, out)
	rejects := readJSONL[rejectRow](t, filepath.Join(dir, "out.rejects.jsonl"))
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
	// The raising row and the looping one still give prompts: their exits are error and never.
	ids := map[string]promptRow{}
	for _, p := range prompts {
		ids[p.ID] = p
	}
	if _, ok := ids["raises"]; !ok {
		t.Errorf("no prompt for a function that raises")
	}
	if p, ok := ids["loops"]; !ok || p.Target != "<|exit_never|>" {
		t.Errorf("looping function: %+v", p)
	}
}

func TestNextStateSet(t *testing.T) {
	out := filepath.Join(t.TempDir(), "next.jsonl")
	in := cruxeval.Path(t)
	if _, stderr, code := runCLI(t, "prompts", "--input", in, "--task", "next-state", "--per-action", "5", "--out", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows := readJSONL[promptRow](t, out)
	counts := map[string]int{}
	for _, r := range rows {
		counts[r.Action]++
		if !strings.HasSuffix(r.Prompt, "<|frame_sep|>") || r.Target == "" {
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
	for _, a := range append(append([]debugger.Action{}, debugger.ForwardActions...), debugger.InverseActions...) {
		if counts[string(a)] != 5 {
			t.Errorf("%s: %d examples, want 5", a, counts[string(a)])
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
