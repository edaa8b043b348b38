package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// TestPreflightLocal checks what Preflight checks with and without Local: local paths only where
// the workers read this machine's files, names always; problems come in the spec's order, each
// naming its field.
func TestPreflightLocal(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	evalset := filepath.Join(dir, "eval.jsonl")
	if err := os.WriteFile(evalset, []byte(`{"code": "def f(x):\n    return x\n"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := schemas.Spec{
		Output:    filepath.Join(dir, "out"),
		Tokenizer: "hf:/nonexistent/tokenizer.json",
		Sources: []schemas.SourceSpec{
			{Kind: "examples"},
			{Kind: "jsonl", Path: "/nonexistent/a.jsonl"},
			{Kind: "repository", URL: "https://example.invalid/o/r.git"}, // never contacted
			{Kind: "repository", URL: "/nonexistent/repo", Venv: "/nonexistent/venv"},
		},
		Decontaminate: []schemas.EvalSetSpec{{Path: evalset}, {Path: "/nonexistent/e.jsonl"}},
	}.WithDefaults()
	opts := PreflightOptions{Tokenizers: tokenize.Get, Local: true}
	var fields []string
	for _, p := range Preflight(ctx, spec, opts) {
		fields = append(fields, p.Field)
		if strings.Contains(p.Msg, "\n") || p.Msg == "" {
			t.Errorf("%s: message %q", p.Field, p.Msg)
		}
	}
	want := "tokenizer sources[1].path sources[3].url sources[3].venv decontaminate[1].path"
	if got := strings.Join(fields, " "); got != want {
		t.Errorf("local problems: %s\nwant %s", got, want)
	}
	opts.Local = false
	spec.Output = filepath.Join(dir, "workers", "out") // a folder only the workers have
	if ps := Preflight(ctx, spec, opts); len(ps) != 0 {
		t.Errorf("without Local: %v, want no problem (the paths are the workers')", ps)
	}
	// Nor is a local output probed (attacker's review, issue 27: opening it made the workers'
	// folder on the submitting machine).
	if _, err := os.Stat(filepath.Join(dir, "workers")); !os.IsNotExist(err) {
		t.Errorf("the workers' output folder was made here: %v", err)
	}
	spec.Tokenizer = "gpt5"
	spec.Output = "mem://"
	if ps := Preflight(ctx, spec, opts); len(ps) != 1 || ps[0].Field != "tokenizer" {
		t.Errorf("an unknown tokenizer without Local: %v", ps)
	}
	if msg := ProbeOutput(ctx, "mem://"); msg != "" {
		t.Errorf("ProbeOutput(mem://) = %q", msg)
	}
}
