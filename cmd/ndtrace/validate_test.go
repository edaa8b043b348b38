package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

var cliCreated = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// cliRow builds a consistent row tokenized with the "bytes" tokenizer.
func cliRow(t *testing.T, seed int) schemas.Row {
	t.Helper()
	text := tokenize.BeginOfText + tokenize.TraceContextStart + fmt.Sprintf("def f(x):\n    return x + %d  # é\n", seed) +
		tokenize.FrameSep + fmt.Sprintf(`{"x": %d}`, seed) + tokenize.ActionSep + tokenize.StepOver + tokenize.FrameSep +
		fmt.Sprintf(`{"x": %d, "s": "日本"}`, seed) + tokenize.ActionSep + tokenize.ExitNormal + tokenize.TraceEnd + tokenize.EndOfText
	tok := tokenize.Bytes()
	ids, err := tokenize.Encode(tok, text)
	if err != nil {
		t.Fatal(err)
	}
	mask, err := tokenize.LossMask(tok, ids, tokenize.MaskStates)
	if err != nil {
		t.Fatal(err)
	}
	learned := int32(0)
	for _, m := range mask {
		if m {
			learned++
		}
	}
	return schemas.Row{
		ID: fmt.Sprintf("%064x", seed), Level: "function", Path: "corpus.jsonl", QualName: "f", SourceID: fmt.Sprint(seed),
		Direction: "forward", Policy: "paper", Seed: int64(seed), Text: text, InputIDs: ids, LossMask: mask,
		NumTokens: int32(len(ids)), NumLearned: learned, NumActions: 1, NumStates: 2, ActStepOver: 1, EvCall: 1,
		EvLine: 1, EvReturn: 1, Exit: "exit_normal", CodeChars: 30, TracerVersion: "t1", PipelineVersion: "p1",
		Tokenizer: tok.Name(), CreatedAt: cliCreated, InputSource: schemas.InputSourceCorpus,
	}
}

// cliShards returns the rows of the two shards (3 and 2 rows) of the test datasets: row i of shard
// s is cliRow(t, 10*s+i).
func cliShards(t *testing.T) [][]schemas.Row {
	t.Helper()
	var shards [][]schemas.Row
	for s, n := range []int{3, 2} {
		rows := make([]schemas.Row, n)
		for i := range rows {
			rows[i] = cliRow(t, 10*s+i)
		}
		shards = append(shards, rows)
	}
	return shards
}

// writeCLIDataset writes a dataset of two shards (3 and 2 rows) into a new folder and returns it;
// edit, if not nil, may change the rows before they are written (bypassing WriteShard's checks is
// not needed: it changes only what WriteShard accepts).
func writeCLIDataset(t *testing.T, edit func(shard int, rows []schemas.Row)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	ctx := context.Background()
	st := openStore(t, dir)
	var infos []dataset.ShardInfo
	for s, rows := range cliShards(t) {
		if edit != nil {
			edit(s, rows)
		}
		info, err := dataset.WriteShard(ctx, st, fmt.Sprintf("part-%05d", s), rows)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	_, err := dataset.WriteManifest(ctx, st, dataset.Manifest{CreatedAt: cliCreated, Shards: infos,
		Versions: dataset.Versions{Tracer: "t1", Pipeline: "p1", Tokenizer: "bytes"},
		Counts:   schemas.Counts{"rejects.timeout": 2}})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// runCmd runs the CLI and returns stdout, stderr and the exit code.
func runCmd(args ...string) (string, string, int) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

func TestValidateCommand(t *testing.T) {
	good := writeCLIDataset(t, nil)
	// Row 1 of shard 1 and row 0 of shard 0 have text that does not match their ids.
	bad := writeCLIDataset(t, func(shard int, rows []schemas.Row) {
		if shard == 1 {
			rows[1].Text += " "
		} else {
			rows[0].Text = strings.Replace(rows[0].Text, "return", "yield", 1)
		}
	})
	empty := t.TempDir()
	tests := []struct {
		name       string
		args       []string
		code       int
		stdoutHas  []string
		stderrHas  string
		stdoutRows int // lines on stdout, if > 0
	}{
		{name: "valid", args: []string{good}, code: 0, stdoutHas: []string{"ok: " + good + ": 2 shards, 5 rows, ", "learned), schema 3"}, stdoutRows: 1},
		{name: "flags after the URL", args: []string{good, "--all"}, code: 0, stdoutHas: []string{"ok: "}},
		{name: "file URL", args: []string{"file://" + good}, code: 0, stdoutHas: []string{"ok: file://"}},
		{name: "first problem", args: []string{bad}, code: 1, stderrHas: "data/part-00000.parquet row 0 column text: differs from decode(input_ids) at byte"},
		{name: "all problems", args: []string{"--all", bad}, code: 1, stderrHas: "2 problem(s); first: data/part-00000.parquet row 0",
			stdoutHas: []string{"data/part-00000.parquet row 0 column text", "data/part-00001.parquet row 1 column text"}, stdoutRows: 2},
		{name: "max problems", args: []string{"--all", "--max-problems", "1", bad}, code: 1, stderrHas: "1 problem(s) or more"},
		{name: "no dataset", args: []string{empty}, code: 1, stderrHas: empty + ": no committed dataset (no manifest.json): check the URL"},
		{name: "no URL", args: nil, code: 2, stderrHas: "missing the dataset URL"},
		{name: "two URLs", args: []string{good, good}, code: 2, stderrHas: "unexpected argument"},
		{name: "bad flag", args: []string{"--bogus", good}, code: 2, stderrHas: "bogus"},
		{name: "bad max", args: []string{"--max-problems", "0", good}, code: 2, stderrHas: "--max-problems"},
		{name: "bad scheme", args: []string{"ftp://x/y"}, code: 1, stderrHas: `unsupported scheme "ftp"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCmd(append([]string{"validate"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			for _, s := range tc.stdoutHas {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout %q lacks %q", stdout, s)
				}
			}
			if tc.stdoutRows > 0 {
				if n := strings.Count(stdout, "\n"); n != tc.stdoutRows {
					t.Errorf("stdout has %d lines, want %d: %q", n, tc.stdoutRows, stdout)
				}
			}
			if tc.stderrHas != "" && !strings.Contains(stderr, tc.stderrHas) {
				t.Errorf("stderr %q lacks %q", stderr, tc.stderrHas)
			}
			if code != 0 && strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("error is not one line: %q", stderr)
			}
		})
	}
}

func TestValidateHelp(t *testing.T) {
	for _, cmd := range []string{"validate", "inspect"} {
		stdout, stderr, code := runCmd(cmd, "-h")
		if code != 0 || !strings.Contains(stdout, "Usage: ndtrace "+cmd+" URL") || stderr != "" {
			t.Errorf("%s -h: exit %d, stdout %q, stderr %q", cmd, code, stdout, stderr)
		}
	}
	stdout, _, _ := runCmd("help")
	for _, cmd := range []string{"validate", "inspect"} {
		if !strings.Contains(stdout, "  "+cmd+" ") {
			t.Errorf("help does not list %s:\n%s", cmd, stdout)
		}
	}
}
