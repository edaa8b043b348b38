package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/tokenize"
)

func TestInspectCommand(t *testing.T) {
	dir := writeCLIDataset(t, nil)
	row0 := cliRow(t, 0)
	tests := []struct {
		name     string
		args     []string
		code     int
		has      []string
		hasNot   []string
		rows     int // row headers expected
		errHas   string
		firstRow string // header of the first row printed
	}{
		{name: "default", args: []string{dir}, has: []string{
			"dataset " + dir + ": 2 shards, 5 rows, ",
			"format ndtrace-dataset v2, schema 3, created 2026-11-22T09:00:00Z; tracer t1, pipeline p1, tokenizer bytes",
			"counts: rejects.timeout=2",
			"id=0000000000000000… level=function direction=forward policy=paper seed=0 exit=exit_normal tokens=",
			"[step_over:1] events=call:1,line:1,return:1,exception:0 code_chars=30 qualname=f path=corpus.jsonl source=0 tokenizer=bytes",
			tokenize.FrameSep + markOpen + `{"x": 0, "s": "日本"}` + tokenize.ActionSep + markClose,
		}, hasNot: []string{"\x1b["}, rows: 3, firstRow: "── data/part-00000.parquet row 0 ──"},
		{name: "all rows", args: []string{dir, "--rows", "0"}, rows: 5},
		{name: "rows across shards", args: []string{"--rows", "4", dir}, rows: 4, has: []string{"── data/part-00001.parquet row 0 ──"}},
		{name: "one shard", args: []string{dir, "--shard", "part-00001", "--rows", "0"}, rows: 2, firstRow: "── data/part-00001.parquet row 0 ──"},
		{name: "shard path", args: []string{dir, "--shard", "data/part-00001.parquet"}, rows: 2, firstRow: "── data/part-00001.parquet row 0 ──"},
		{name: "ansi", args: []string{dir, "--color", "always", "--rows", "1"}, rows: 1, has: []string{ansiOpen, ansiClose}, hasNot: []string{markOpen}},
		{name: "unknown shard", args: []string{dir, "--shard", "part-9"}, code: 2, errHas: `no shard "part-9"`},
		{name: "bad color", args: []string{dir, "--color", "pink"}, code: 2, errHas: "--color"},
		{name: "negative rows", args: []string{dir, "--rows", "-1"}, code: 2, errHas: "--rows"},
		{name: "no dataset", args: []string{t.TempDir()}, code: 1, errHas: "manifest.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCmd(append([]string{"inspect"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstderr: %s", code, tc.code, stderr)
			}
			if tc.errHas != "" && !strings.Contains(stderr, tc.errHas) {
				t.Errorf("stderr %q lacks %q", stderr, tc.errHas)
			}
			for _, s := range tc.has {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(stdout, s) {
					t.Errorf("stdout has %q:\n%s", s, stdout)
				}
			}
			if tc.code == 0 {
				if n := strings.Count(stdout, "\n── "); n != tc.rows {
					t.Errorf("%d rows printed, want %d", n, tc.rows)
				}
			}
			if tc.firstRow != "" && !strings.Contains(stdout, "\n"+tc.firstRow+"\n") {
				t.Errorf("first row header %q missing:\n%s", tc.firstRow, stdout)
			}
		})
	}

	// Without the markers the decoded text is the row's text.
	stdout, _, _ := runCmd("inspect", dir, "--rows", "1")
	plain := strings.NewReplacer(markOpen, "", markClose, "").Replace(stdout)
	if !strings.Contains(plain, row0.Text) {
		t.Errorf("decoded text of row 0 not found:\n%s", stdout)
	}
}

func TestInspectUnknownTokenizer(t *testing.T) {
	dir := writeCLIDataset(t, nil)
	saved := tokenizerLookup
	t.Cleanup(func() { tokenizerLookup = saved })
	tokenizerLookup = func(name string) (tokenize.Tokenizer, error) { return nil, errors.New("no such tokenizer") }
	stdout, stderr, code := runCmd("inspect", dir, "--rows", "1")
	if code != 0 || !strings.Contains(stdout, "[loss mask not shown: no such tokenizer]\n"+cliRow(t, 0).Text) {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	// validate fails, naming the column.
	_, stderr, code = runCmd("validate", dir)
	if code != 1 || !strings.Contains(stderr, "row 0 column tokenizer: cannot load tokenizer \"bytes\"") {
		t.Errorf("validate: exit %d, stderr %q", code, stderr)
	}
}

func TestRenderMasked(t *testing.T) {
	tok := tokenize.Bytes()
	ids := tok.EncodeOrdinary("aé b") // a, 0xC3, 0xA9, ' ', b
	tests := []struct {
		mask []bool
		want string
	}{
		{[]bool{false, false, false, false, false}, "aé b"},
		{[]bool{true, true, true, true, true}, "[aé b]"},
		{[]bool{false, true, true, false, true}, "a[é] [b]"},
		// é's bytes straddle the boundary: shown with the span it starts in.
		{[]bool{false, false, true, true, true}, "aé[ b]"},
		{[]bool{true, true, false, false, false}, "[aé] b"},
	}
	for _, tc := range tests {
		got, err := renderMasked(tok, ids, tc.mask, "[", "]")
		if err != nil || got != tc.want {
			t.Errorf("mask %v: %q, %v; want %q", tc.mask, got, err, tc.want)
		}
	}
	if _, err := renderMasked(tok, ids, []bool{true}, "[", "]"); err == nil {
		t.Error("a short mask was accepted")
	}
	if _, err := renderMasked(tok, []int32{1 << 30}, []bool{true}, "[", "]"); err == nil {
		t.Error("an id outside the vocabulary was accepted")
	}
}
