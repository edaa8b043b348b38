package main

import (
	"bytes"
	"context"
	"fmt"
	"github.com/ndtrace/ndtrace/store"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/schemas"
)

// statsCLIRow describes one row of a statistics test dataset.
type statsCLIRow struct {
	level, dir, source, sourceID string
	tokens                       int
	events                       [4]int32
	exit                         string
}

// statsCLIRows are the rows of the statistics test dataset, per shard: function level (two corpus
// files) and repository level (one repository, two tests).
var statsCLIRows = [][]statsCLIRow{
	{
		{"function", "forward", "corpus/a.jsonl", "1", 10, [4]int32{1, 3, 1, 0}, "exit_normal"},
		{"function", "inverse", "corpus/a.jsonl", "1", 20, [4]int32{1, 3, 1, 0}, "inv_exit_entry"},
		{"function", "forward", "corpus/a.jsonl", "2", 30, [4]int32{2, 5, 2, 1}, "exit_error"},
		{"function", "inverse", "corpus/a.jsonl", "2", 40, [4]int32{2, 5, 2, 1}, "inv_exit_entry"},
		{"function", "forward", "corpus/a.jsonl", "3", 50, [4]int32{1, 1, 1, 0}, "exit_normal"},
		{"function", "forward", "corpus/b.jsonl", "1", 60, [4]int32{1, 2, 1, 0}, "exit_normal"},
	},
	{
		{"repository", "forward", "https://example.com/r1", "t1", 100, [4]int32{5, 10, 5, 2}, "exit_normal"},
		{"repository", "forward", "https://example.com/r1", "t1", 300, [4]int32{5, 10, 5, 2}, "exit_error"},
		{"repository", "inverse", "https://example.com/r1", "t1", 200, [4]int32{5, 10, 5, 2}, "inv_exit_entry"},
		{"repository", "forward", "https://example.com/r1", "t2", 500, [4]int32{3, 4, 3, 1}, "exit_normal"},
	},
}

const statsCLIRejects = `{"source":"corpus/a.jsonl","key":"corpus/a.jsonl#4","reason":"timeout: ran for 10s"}
{"source":"corpus/a.jsonl","key":"corpus/a.jsonl#5","reason":"timeout: ran for 10s"}
{"source":"corpus/c.jsonl","key":"corpus/c.jsonl#0","reason":"malformed JSON: unexpected end"}
{"source":"https://example.com/r1","key":"r1::t3","reason":"quarantined: outcome changed under tracing"}
{"source":"corpus/a.jsonl","key":"corpus/a.jsonl#6","reason":"decontaminated:cruxeval matches sample_3"}
`

// writeStatsCLIDataset writes the statistics test dataset into dir/name, its token counts
// multiplied by scale, with rejects.jsonl and the manifest's counts, and returns its path.
func writeStatsCLIDataset(t *testing.T, dir, name string, scale int) string {
	t.Helper()
	path := filepath.Join(dir, name)
	ctx := context.Background()
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var infos []dataset.ShardInfo
	i := 0
	for s, specs := range statsCLIRows {
		var rows []schemas.Row
		for _, sp := range specs {
			n := sp.tokens * scale
			mask := make([]bool, n)
			for k := range n / 2 {
				mask[k] = true
			}
			r := schemas.Row{
				ID: fmt.Sprintf("%064x", i), Level: sp.level, Direction: sp.dir, SourceID: sp.sourceID, Policy: "paper",
				QualName: "f", Seed: int64(i), Text: "x", InputIDs: make([]int32, n), LossMask: mask,
				NumTokens: int32(n), NumLearned: int32(n / 2), EvCall: sp.events[0], EvLine: sp.events[1],
				EvReturn: sp.events[2], EvException: sp.events[3], Exit: sp.exit, TracerVersion: "t1",
				PipelineVersion: "p1", Tokenizer: "bytes", CreatedAt: cliCreated,
			}
			if sp.level == "repository" {
				r.RepoURL, r.Commit, r.Path, r.CodeChars = sp.source, "c1", "pkg/m.py", 1000
			} else {
				r.Path, r.CodeChars, r.InputSource = sp.source, 40, schemas.InputSourceCorpus
			}
			if i == 2 || i == 7 {
				r.NoisyValues = int32(i)
			}
			r.PlaceholderGap = i == 9
			if sp.dir == "forward" {
				r.ActStepInto, r.ActStepOver, r.ActBreakpoint, r.NumActions, r.NumStates = 2, 1, int32(scale-1), int32(2+scale), 4
			} else {
				r.ActInvStepInto, r.ActInvStepCall, r.NumActions, r.NumStates = 1, 1, 2, 3
			}
			rows = append(rows, r)
			i++
		}
		info, err := dataset.WriteShard(ctx, st, fmt.Sprintf("part-%05d", s), rows)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	if err := st.Put(ctx, dataset.RejectsKey, []byte(statsCLIRejects), nil); err != nil {
		t.Fatal(err)
	}
	_, err = dataset.WriteManifest(ctx, st, dataset.Manifest{CreatedAt: cliCreated, Shards: infos,
		Versions: dataset.Versions{Tracer: "t1", Pipeline: "p1", Tokenizer: "bytes"},
		Counts: schemas.Counts{"items": 20, "rejects": 5, "rejects:timeout": 2, "rejects:malformed": 1,
			"rejects:quarantined": 1, "rejects:decontaminated": 1, "quarantined": 1, "decontaminated:cruxeval": 1,
			"duplicates": 3}})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// writeStoredStats computes the statistics of the dataset at path and writes them, edited by edit
// if not nil (to make them stale).
func writeStoredStats(t *testing.T, path string, edit func(*dataset.Stats)) {
	t.Helper()
	ctx := context.Background()
	st, m := openHead(t, path)
	stats, err := dataset.ComputeStats(ctx, st, m)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(stats)
	}
	if err := dataset.WriteStats(ctx, st, stats); err != nil {
		t.Fatal(err)
	}
}

func TestStatsCommand(t *testing.T) {
	dir := t.TempDir()
	plain := writeStatsCLIDataset(t, dir, "plain", 1)
	stored := writeStatsCLIDataset(t, dir, "stored", 1)
	writeStoredStats(t, stored, nil)
	stale := writeStatsCLIDataset(t, dir, "stale", 1)
	writeStoredStats(t, stale, func(s *dataset.Stats) { s.CreatedAt = s.CreatedAt.Add(time.Hour) })

	// Lines of the tables, as regular expressions (columns are aligned with spaces).
	tables := []string{
		`(?m)^items +traces +trajectories +tokens +learned +rejects +quarantined +duplicates +decontaminated\s*$`,
		`(?m)^20 +6 +10 +1,310 +655 +5 +1 +3 +cruxeval=1\s*$`,
		`(?m)^Tokens per trajectory$`,
		`(?m)^group +trajectories +mean +p25 +median +p90 +min +max\s*$`,
		`(?m)^all +10 +131 +32\.5 +55 +320 +10 +500\s*$`,
		`(?m)^function/forward +4 +37\.5 +25 +40 +57 +10 +60\s*$`,
		`(?m)^repository/forward +3 +300 +200 +300 +460 +100 +500\s*$`,
		`(?m)^inverse +3 +86\.7 +30 +40 +168 +20 +200\s*$`,
		`(?m)^Code length in characters$`,
		`(?m)^repository +4 +1,000 +1,000 +1,000 +1,000 +1,000 +1,000\s*$`,
		`(?m)^group +step_into +step_over +step_return +breakpoint +continue +inv_step_into +inv_step_over +inv_step_call\s*$`,
		`(?m)^all +14 +7 +0 +0 +0 +3 +0 +3\s*$`,
		`(?m)^group +traces +call +line +return +exception\s*$`,
		`(?m)^all +6 +13 +25 +13 +4\s*$`,
		`(?m)^function +exit_error=1 exit_normal=3 inv_exit_entry=2\s*$`,
		`(?m)^Values \(trajectories with noisy values; with placeholders not numbered 0x1, 0x2, \.\.\.\)$`,
		`(?m)^group +trajectories +noisy values +placeholder gap\s*$`,
		`(?m)^all +10 +2 \(20\.0%\) +1 \(10\.0%\)\s*$`,
		`(?m)^function +6 +1 \(16\.7%\) +0 \(0\.0%\)\s*$`,
		`(?m)^repository +4 +1 \(25\.0%\) +1 \(25\.0%\)\s*$`,
		`(?m)^Sources \(4\)$`,
		`(?m)^repository +https://example\.com/r1 +3 +2 +4 +1,100 +1 +1 +0 +-\s*$`,
		`(?m)^function +corpus/a\.jsonl +6 +3 +5 +150 +3 +0 +0 +cruxeval=1\s*$`,
		`(?m)^- +corpus/c\.jsonl +1 +0 +0 +0 +1 +0 +0 +-\s*$`,
		`(?m)^reason +count +example\s*$`,
		`(?m)^timeout +2 +corpus/a\.jsonl#4: timeout: ran for 10s\s*$`,
	}
	tests := []struct {
		name      string
		args      []string
		code      int
		has       []string
		match     []string
		stderrHas string
	}{
		{name: "computed", args: []string{plain}, match: tables, has: []string{
			"dataset " + plain + ": 2 shards, 10 rows, 1,310 tokens (655 learned); created 2026-11-22T09:00:00Z; statistics computed from the shards"}},
		{name: "from stats.json", args: []string{stored}, match: tables, has: []string{"; statistics from stats.json"}},
		{name: "stale stats.json", args: []string{stale}, has: []string{"; statistics computed from the shards"}},
		{name: "few sources", args: []string{plain, "--sources", "1"}, has: []string{"Sources (1 of 4, most trajectories first; --sources 0 for all)", "corpus/a.jsonl"}},
		{name: "json", args: []string{"--json", plain}, has: []string{"{\n  \"format\": \"ndtrace-stats\",\n  \"format_version\": 1,",
			"\"noisy_rows\": 2,\n    \"noisy_share\": 0.2,\n    \"placeholder_gap_rows\": 1,\n    \"placeholder_gap_share\": 0.1,"}},
		{name: "no folder", args: []string{filepath.Join(dir, "none")}, code: 1, stderrHas: ": no dataset: folder " + filepath.Join(dir, "none") + " does not exist (check the path)"},
		{name: "no dataset", args: []string{t.TempDir()}, code: 1, stderrHas: ": no committed dataset (no manifest.json): check the URL"},
		{name: "no URL", code: 2, stderrHas: "missing the dataset URL"},
		{name: "bad sources", args: []string{plain, "--sources", "-2"}, code: 2, stderrHas: "--sources"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCmd(append([]string{"stats"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstderr: %s\nstdout: %s", code, tc.code, stderr, stdout)
			}
			if tc.stderrHas != "" && !strings.Contains(stderr, tc.stderrHas) {
				t.Errorf("stderr %q lacks %q", stderr, tc.stderrHas)
			}
			for _, s := range tc.has {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, re := range tc.match {
				if !regexp.MustCompile(re).MatchString(stdout) {
					t.Errorf("stdout does not match %s:\n%s", re, stdout)
				}
			}
		})
	}

	// --json prints exactly what WriteStats stores, whether read or computed.
	want, err := readFileFromStore(stored, dataset.StatsKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{plain, stored} {
		got, _, _ := runCmd("stats", "--json", p)
		if got != string(want) {
			t.Errorf("stats --json %s differs from stats.json", p)
		}
	}
}

// readFileFromStore reads key from the dataset at path.
func readFileFromStore(path, key string) ([]byte, error) {
	ctx := context.Background()
	st, err := store.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return st.ReadAll(ctx, key)
}

func TestStatsSection(t *testing.T) {
	var buf bytes.Buffer
	statsSection(&buf, "x")
	if buf.String() != "\nx\n" {
		t.Errorf("section %q", buf.String())
	}
}
