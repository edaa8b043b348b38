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

// TestPreflightFiles checks a files source's path: it must exist, have a format, and its first
// Parquet shard the columns named; each problem in one line naming sources[i].path.
func TestPreflightFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.py"), []byte("def f(x):\n    return x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x.csv"), []byte("a,b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.parquet") // beside the .py files, it would make dir a folder of shards
	if err := os.WriteFile(bad, []byte("not parquet"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := schemas.Spec{
		Output: filepath.Join(dir, "out"),
		Sources: []schemas.SourceSpec{
			{Kind: "files", Path: dir},
			{Kind: "files", Path: "/nonexistent/corpus"},
			{Kind: "files", Path: filepath.Join(dir, "x.csv")},
			{Kind: "files", Path: bad},
			{Kind: "files", Path: dir, Venv: "/nonexistent/venv"},
		},
	}.WithDefaults()
	var got []string
	for _, p := range Preflight(ctx, spec, PreflightOptions{Local: true}) {
		if strings.Contains(p.Msg, "\n") || p.Msg == "" {
			t.Errorf("%s: message %q", p.Field, p.Msg)
		}
		got = append(got, p.Field+": "+p.Msg)
	}
	want := []string{
		"sources[1].path: /nonexistent/corpus does not exist",
		"sources[2].path: " + filepath.Join(dir, "x.csv") + ": cannot tell the format",
		"sources[3].path: " + bad + ": not a readable Parquet file",
		"sources[4].venv: ",
	}
	if len(got) != len(want) {
		t.Fatalf("problems %q, want %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %q, want %q", got[i], want[i])
		}
	}
}
