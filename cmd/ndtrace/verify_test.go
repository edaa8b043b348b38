package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/replay"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
	"github.com/ndtrace/ndtrace/tokenize"
	"github.com/ndtrace/ndtrace/verify"
)

// runVerifyCLI runs ndtrace verify with args and returns its exit code and output.
func runVerifyCLI(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"verify"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestVerifyCatchesAlteredRow makes a small dataset with ndtrace run (CruxEval functions and the
// built-in examples, whose repository-level rows verify counts as not re-executed), checks that
// verify agrees on every re-executable row, then alters one row's text (a value in one state,
// re-tokenized, the shard, its index page and the manifest rewritten to match, so that the dataset
// still validates) and checks that verify names the row and the state and exits non-zero.
func TestVerifyCatchesAlteredRow(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "data")
	spec := writeSpec(t, dir, fmt.Sprintf("name: verify\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\n    limit: 12\n  - kind: examples\nbatch_size: 4\ncreated_at: 2026-11-22T00:00:00Z\n", out, cruxeval.Path(t)))
	runSpec(t, spec)

	code, so, se := runVerifyCLI(t, out, "--fraction", "1", "--seed", "3")
	if code != 0 {
		t.Fatalf("verify of an unaltered dataset: exit %d\n%s%s", code, so, se)
	}
	st, m := openHead(t, out)
	v, err := verify.Read(context.Background(), st, m)
	if err != nil || v == nil {
		t.Fatalf("no certificate after verify: %v", err)
	}
	if v.Checked == 0 || v.Agreed != v.Checked || v.Agreement != 1 || !v.Passed || int64(v.Sample.Size) != m.Totals.Rows {
		t.Fatalf("unaltered dataset: %+v", v)
	}
	// Every row is re-executed: the CruxEval functions, the examples, the example repository's
	// repository-level rows and the functions found in its tests.
	levels := map[string]bool{}
	for _, r := range allRows(t, out) {
		levels[r.Level+"/"+fmt.Sprint(r.RepoURL != "")] = true
	}
	if v.Checked != v.Sample.Size || len(v.NotReExecuted) != 0 || !levels["repository/true"] || !levels["function/true"] || !levels["function/false"] {
		t.Errorf("not every kind of row was re-executed: %+v (rows: %v)", v, levels)
	}
	// Every forward row is replayed on bdb, the repository's rows in its re-executed checkout:
	// each agrees or differs by a named kind, never an unexplained mismatch.
	fwdLevels := map[string]int{}
	for _, r := range allRows(t, out) {
		if r.Direction == "forward" {
			fwdLevels[r.Level+"/"+fmt.Sprint(r.RepoURL != "")]++
		}
	}
	forwardRows := fwdLevels["function/false"] + fwdLevels["function/true"] + fwdLevels["repository/true"]
	agreedOrNamed := v.Replay.Agreed
	for k, n := range v.Replay.Differences {
		if k != replay.Mismatch && k != replay.Tampered {
			agreedOrNamed += n
		}
	}
	if fwdLevels["repository/true"] == 0 || fwdLevels["function/true"] == 0 || v.Replay.Run != forwardRows ||
		agreedOrNamed != v.Replay.Run || v.Replay.NotReplayed[schemas.NotReplayedInverse] != v.Sample.Size-forwardRows {
		t.Errorf("replay on bdb of %v forward rows: %+v\n%v", fwdLevels, v.Replay, v.Examples)
	}
	if !strings.Contains(so, "PASSED") || !strings.Contains(so, "100.0%") || !strings.Contains(so, "verify.json") {
		t.Errorf("report:\n%s", so)
	}
	t.Logf("unaltered:\n%s", so)

	// ndtrace stats shows the certificate.
	var stdout, stderr bytes.Buffer
	if code := run([]string{"stats", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("stats: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "\nVerification\n") || !strings.Contains(stdout.String(), "re-execution") {
		t.Errorf("stats shows no Verification section:\n%s", stdout.String())
	}

	// The same seed draws the same rows; a smaller sample is bounded and still agrees.
	code, so, _ = runVerifyCLI(t, out, "--sample", "5", "--seed", "9", "--json")
	var small schemas.Verification
	if err := json.Unmarshal([]byte(so), &small); err != nil || code != 0 {
		t.Fatalf("verify --sample 5 --json: exit %d, %v\n%s", code, err, so)
	}
	if small.Sample.Size != 5 || small.Sample.Requested != 5 {
		t.Errorf("sample of 5: %+v", small.Sample)
	}

	rowID, state := alterOneRow(t, out)
	var vout, verr bytes.Buffer
	if code := run([]string{"validate", out}, &vout, &verr); code != 0 {
		t.Fatalf("the altered dataset should still validate: %s%s", vout.String(), verr.String())
	}
	code, so, se = runVerifyCLI(t, out, "--fraction", "1", "--seed", "3")
	if code == 0 {
		t.Fatalf("verify of an altered dataset exited 0:\n%s", so)
	}
	want := fmt.Sprintf("difference: row %s (reexec, text): state %d", rowID, state)
	if !strings.Contains(so, want) || !strings.Contains(so, "FAILED") {
		t.Errorf("report does not name the altered row and state (%q):\n%s", want, so)
	}
	// stderr: progress lines ("verify: N/M rows checked"), then the one-line reason.
	lines := strings.Split(strings.TrimSpace(se), "\n")
	if reason := lines[len(lines)-1]; !strings.HasPrefix(reason, "ndtrace verify: agreement ") || !strings.Contains(reason, "below --min-agreement 100.0%") {
		t.Errorf("want a one-line reason last on stderr, got %q", se)
	}
	st, m = openHead(t, out)
	v, err = verify.Read(context.Background(), st, m)
	if err != nil || v == nil || v.Differences[schemas.DiffText] != 1 || v.Agreed != v.Checked-1 || v.Passed {
		t.Fatalf("certificate of the altered dataset: %+v, %v", v, err)
	}
	var reexec []schemas.VerifyExample // (a replay on bdb, when wired in, may add its own)
	for _, e := range v.Examples {
		if e.Check == "reexec" {
			reexec = append(reexec, e)
		}
	}
	if len(reexec) != 1 || reexec[0].RowID != rowID || reexec[0].State != state || reexec[0].Kind != schemas.DiffText {
		t.Errorf("examples %+v, want row %s state %d", v.Examples, rowID, state)
	}
	t.Logf("altered:\n%s%s", so, se)

	// Replay counts: with a replayer (a stub standing for the one on bdb), forward rows are
	// replayed and counted apart from re-execution, inverse ones are not replayed, and a
	// disagreement is counted by its kind, never as agreement.
	stub := &stubReplayer{disagree: rowID}
	saved := verifyReplayer
	verifyReplayer = func(*execute.Tracer) execute.RowReplayer { return stub }
	code, so, _ = runVerifyCLI(t, out, "--fraction", "1", "--seed", "3", "--json")
	verifyReplayer = saved
	var rv schemas.Verification
	if err := json.Unmarshal([]byte(so), &rv); err != nil {
		t.Fatalf("verify with a replayer: exit %d, %v", code, err)
	}
	forward := 0
	for _, r := range allRows(t, out) {
		if r.Direction == "forward" {
			forward++
		}
	}
	if rv.Replay.Run != forward || rv.Replay.Agreed != forward-1 || rv.Replay.Differences["mismatch"] != 1 ||
		rv.Replay.NotReplayed[schemas.NotReplayedInverse] != rv.Sample.Size-forward || stub.calls.Load() != int64(forward) {
		t.Errorf("replay counts %+v with %d forward rows of %d (%d replays)", rv.Replay, forward, rv.Sample.Size, stub.calls.Load())
	}

	// A threshold below the agreement passes.
	if code, so, se := runVerifyCLI(t, out, "--fraction", "1", "--seed", "3", "--min-agreement", "0.5"); code != 0 {
		t.Errorf("--min-agreement 0.5: exit %d\n%s%s", code, so, se)
	}
}

// allRows reads every row of the dataset at out.
func allRows(t *testing.T, out string) []schemas.Row {
	t.Helper()
	ctx := context.Background()
	st, m := openHead(t, out)
	shards, err := m.AllShards(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	var rows []schemas.Row
	for _, sh := range shards {
		r, err := dataset.ReadRows(ctx, st, sh.Path, -1)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r...)
	}
	return rows
}

// alterOneRow changes one digit in a state of the first re-executable forward row of the dataset at
// out, re-tokenizes the row, and rewrites its shard, the shard's index page and manifest.json so
// that they stay consistent. It returns the altered row's id and the state changed.
func alterOneRow(t *testing.T, out string) (string, int) {
	t.Helper()
	ctx := context.Background()
	st, m := openHead(t, out)
	tok, err := tokenize.Get(m.Versions.Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := m.AllShards(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards {
		shard, err := dataset.ReadRows(ctx, st, sh.Path, -1)
		if err != nil {
			t.Fatal(err)
		}
		for i := range shard {
			r := &shard[i]
			if r.Level != "function" || r.RepoURL != "" || r.Direction != "forward" {
				continue
			}
			parts := strings.Split(r.Text, tokenize.FrameSep)
			for k := 2; k < len(parts)-1; k++ {
				j := strings.IndexAny(parts[k], "0123456789")
				if j < 0 {
					continue
				}
				d := parts[k][j]
				parts[k] = parts[k][:j] + string('0'+(d-'0'+1)%10) + parts[k][j+1:]
				r.Text = strings.Join(parts, tokenize.FrameSep)
				if r.InputIDs, err = tokenize.Encode(tok, r.Text); err != nil {
					t.Fatal(err)
				}
				if r.LossMask, err = tokenize.LossMask(tok, r.InputIDs, tokenize.MaskStates); err != nil {
					t.Fatal(err)
				}
				r.NumTokens = int32(len(r.InputIDs))
				r.NumLearned = int32(tokenize.LearnedTokens(r.LossMask))
				r.ID = rows.ID(*r)
				rewriteShard(t, st, m, sh.Path, shard)
				return r.ID, k
			}
		}
	}
	t.Fatal("no row to alter")
	return "", 0
}

// rewriteShard writes rows over the shard at path and updates the shard's entry (inline or in its
// index page) and manifest.json to match.
func rewriteShard(t *testing.T, st *store.Store, m *dataset.Manifest, path string, rows []schemas.Row) {
	t.Helper()
	ctx := context.Background()
	data, info, err := dataset.EncodeShard(rows)
	if err != nil {
		t.Fatal(err)
	}
	info.Path = path
	if err := st.Put(ctx, path, data, nil); err != nil {
		t.Fatal(err)
	}
	for i := range m.Shards {
		if m.Shards[i].Path == path {
			m.Shards[i] = info
		}
	}
	for i, p := range m.ShardIndex {
		page, err := st.ReadAll(ctx, p.Key)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		var totals dataset.Totals
		found := false
		for _, line := range strings.Split(strings.TrimSpace(string(page)), "\n") {
			var s dataset.ShardInfo
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				t.Fatal(err)
			}
			if s.Path == path {
				s, found = info, true
			}
			totals.Rows += s.Rows
			totals.Tokens += s.Tokens
			totals.LearnedTokens += s.LearnedTokens
			totals.Shards++
			if err := enc.Encode(s); err != nil {
				t.Fatal(err)
			}
		}
		if !found {
			continue
		}
		if err := st.Put(ctx, p.Key, buf.Bytes(), nil); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(buf.Bytes())
		m.ShardIndex[i] = dataset.ShardPage{Key: p.Key, SHA256: hex.EncodeToString(sum[:]), Bytes: int64(buf.Len()), Totals: totals}
	}
	nm, err := dataset.Normalized(*m)
	if err != nil {
		t.Fatal(err)
	}
	man, err := nm.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, dataset.ManifestKey, man, nil); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkVerifyCruxEval makes the CruxEval end-to-end dataset (as TestRunCruxEvalEndToEnd does,
// outside the timing) and verifies every row of it (--fraction 1: re-executed in the sandbox with
// two sandboxes, rebuilt, compared). It reports the agreement, the rows checked and rows/s, and
// logs the report: the figures in README.md come from
//
//	go test ./cmd/ndtrace -run '^$' -bench BenchmarkVerifyCruxEval -benchtime 1x -v
func BenchmarkVerifyCruxEval(b *testing.B) {
	dir := b.TempDir()
	out := filepath.Join(dir, "data")
	spec := writeSpec(&testing.T{}, dir, fmt.Sprintf("name: crux\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\nbatch_size: 100\npack_length: 2048\ncreated_at: 2026-11-22T00:00:00Z\n", out, cruxeval.Path(b)))
	runSpec(b, spec)
	v, elapsed := benchVerify(b, out, "the CruxEval dataset", "--seed", "0", "--concurrency", "2")
	b.ReportMetric(float64(v.Checked)*float64(b.N)/elapsed.Seconds(), "rows/s")
	logVerification(b, "crux", "CruxEval", v)
}

// benchVerify runs ndtrace verify out --fraction 1 args... --json b.N times, timed, and returns the
// last certificate and the time the runs took; what names the dataset in errors. It reports the
// agreement and the rows checked.
func benchVerify(b *testing.B, out, what string, args ...string) (schemas.Verification, time.Duration) {
	args = append(append([]string{out, "--fraction", "1"}, args...), "--json")
	b.ResetTimer()
	var v schemas.Verification
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		code, so, se := runVerifyCLI(b, args...)
		elapsed += time.Since(t0)
		if err := json.Unmarshal([]byte(so), &v); err != nil {
			b.Fatalf("verify: exit %d, %v\n%s%s", code, err, so, se)
		}
		if code != 0 {
			b.Errorf("verify of %s: exit %d: %s", what, code, se)
		}
	}
	b.StopTimer()
	b.ReportMetric(100*v.Agreement, "agreement-%")
	b.ReportMetric(float64(v.Checked), "rows-checked")
	return v, elapsed
}

// logVerification logs v as the verify report of the dataset name, made over over.
func logVerification(b *testing.B, name, over string, v schemas.Verification) {
	var report bytes.Buffer
	printVerification(&report, name, &v)
	b.Logf("ndtrace verify DATASET --fraction 1 over %s:\n%s", over, report.String())
}

// BenchmarkVerifyRepositories makes a dataset of the fixture repositories of BenchmarkRepositories
// (local git repositories: repository-level rows and the functions found in their tests), outside
// the timing, and verifies every row: each repository checked out again and its tests run again.
//
//	go test ./cmd/ndtrace -run '^$' -bench BenchmarkVerifyRepositories -benchtime 1x -v
func BenchmarkVerifyRepositories(b *testing.B) {
	dir := b.TempDir()
	_, listPath := writeBenchRepoList(b, dir)
	out := filepath.Join(dir, "data")
	spec := writeSpec(&testing.T{}, dir, fmt.Sprintf("name: bench-repos\noutput: %s\nsources:\n  - kind: repository\n    list: %s\n    trust_list: true\ncreated_at: 2026-11-22T00:00:00Z\n", out, listPath))
	runSpec(b, spec)
	v, _ := benchVerify(b, out, "the repositories' dataset")
	logVerification(b, "repos", "the fixture repositories", v)
}

// stubReplayer agrees on every row but one; it stands for the replayer on bdb in the test of
// verify's counts.
type stubReplayer struct {
	disagree string
	calls    atomic.Int64
}

func (s *stubReplayer) Replay(_ context.Context, _ crawl.Item, row schemas.Row, _ schemas.Spec) (schemas.ReplayOutcome, error) {
	s.calls.Add(1)
	if row.ID == s.disagree {
		return schemas.ReplayOutcome{Replayed: true, Kind: "mismatch", Detail: "stub: state 2 differs"}, nil
	}
	return schemas.ReplayOutcome{Replayed: true, Agreed: true}, nil
}
