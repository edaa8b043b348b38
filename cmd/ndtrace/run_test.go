package main

import (
	"bytes"
	"context"
	"fmt"
	"github.com/ndtrace/ndtrace/store"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/workflows"
)

func writeSpec(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runSpec runs ndtrace run --spec spec and returns its stdout and stderr; a non-zero exit fails tb.
func runSpec(tb testing.TB, spec string) (string, string) {
	tb.Helper()
	stdout, stderr, code := runCmd("run", "--spec", spec)
	if code != 0 {
		tb.Fatalf("run: exit %d: %s", code, stderr)
	}
	return stdout, stderr
}

// openStore opens the store at url for a test; it closes when the test ends.
func openStore(tb testing.TB, url string) *store.Store {
	tb.Helper()
	st, err := store.Open(context.Background(), url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// openHead opens the dataset at url (see openStore) and reads its head manifest.
func openHead(tb testing.TB, url string) (*store.Store, *dataset.Manifest) {
	tb.Helper()
	st := openStore(tb, url)
	m, err := dataset.ReadManifest(context.Background(), st)
	if err != nil {
		tb.Fatal(err)
	}
	return st, m
}

// checkDataset validates a dataset and returns its manifest, with its shard index resolved into
// Shards (and Packing.Shards), and every row id.
func checkDataset(t *testing.T, url string) (*dataset.Manifest, []string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var vout, verr bytes.Buffer
	if code := run([]string{"validate", url}, &vout, &verr); code != 0 {
		t.Fatalf("ndtrace validate %s: exit %d: %s%s", url, code, vout.String(), verr.String())
	}
	m := resolvedManifest(t, st)
	var ids []string
	for _, s := range m.Shards {
		rows, err := dataset.ReadRows(ctx, st, s.Path, -1)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
	}
	return m, ids
}

func uniqueCount(ids []string) int {
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	return len(seen)
}

// TestRunCruxEvalEndToEnd runs all of CruxEval through the pipeline on a real in-process Temporal
// server, validates the dataset, and checks that running the same spec again reuses every batch.
func TestRunCruxEvalEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "data")
	spec := writeSpec(t, dir, fmt.Sprintf("name: crux\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\nbatch_size: 100\npack_length: 2048\ncreated_at: 2026-11-22T00:00:00Z\n", out, cruxeval.Path(t)))
	so, se := runSpec(t, spec)
	if !strings.Contains(se, "items traced") || !strings.Contains(so, "dataset "+out) {
		t.Errorf("no progress or summary:\n%s\n%s", se, so)
	}
	m, ids := checkDataset(t, out)
	// Every item ends as rows or as a reject: 800 items, two directions each.
	if m.Counts["items"] != 800 || int64(len(ids)) != m.Totals.Rows || uniqueCount(ids) != len(ids) {
		t.Fatalf("items %d, rows %d (%d ids, %d unique)", m.Counts["items"], m.Totals.Rows, len(ids), uniqueCount(ids))
	}
	if m.Totals.Rows+2*m.Counts["rejects"] < 1600 || m.Totals.Rows < 1500 {
		t.Fatalf("%d rows and %d rejects for 800 items", m.Totals.Rows, m.Counts["rejects"])
	}
	t.Logf("CruxEval: %d rows, %d tokens, counts %v", m.Totals.Rows, m.Totals.Tokens, m.Counts)
	// Packed shards (validated above, segment by segment) hold every row that fits 2,048 tokens.
	if m.Packing == nil || m.Packing.Length != 2048 || m.Packing.Totals.Shards != 8 {
		t.Fatalf("packing = %+v", m.Packing)
	}
	members := m.Counts["packing_too_long"]
	ctx := context.Background()
	st, _ := store.Open(ctx, out)
	defer st.Close()
	for _, s := range m.Packing.Shards {
		seqs, err := dataset.ReadPackedRows(ctx, st, s.Path, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range seqs {
			members += int64(len(q.RowIDs))
		}
	}
	if members != m.Totals.Rows {
		t.Errorf("packed sequences hold %d rows (with those too long), the shards %d", members, m.Totals.Rows)
	}
	t.Logf("packed: %d sequences of 2,048 tokens, %.1f%% padding", m.Packing.Totals.Rows,
		100-100*float64(m.Packing.Totals.Tokens)/float64(m.Packing.Totals.Rows*2048))
	before, _ := os.ReadFile(filepath.Join(out, "manifest.json"))

	so, se, code := runCmd("run", "--spec", spec)
	if code != 0 {
		t.Fatalf("re-run: exit %d: %s", code, se)
	}
	if !strings.Contains(so, "8 batches reused") {
		t.Errorf("re-run did not reuse the batches: %s", so)
	}
	after, _ := os.ReadFile(filepath.Join(out, "manifest.json"))
	if !bytes.Equal(before, after) {
		t.Errorf("re-running the same spec changed the manifest")
	}
}

// testCluster starts an embedded Temporal server for a test and connects a client to it.
func testCluster(t *testing.T) (*embeddedServer, client.Client) {
	t.Helper()
	srv, err := startEmbedded("", "default", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	c, err := client.Dial(client.Options{HostPort: srv.Addr(), Logger: sdkLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return srv, c
}

// buildBinary builds ndtrace for tests that need separate processes.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ndtrace")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestWorkerKilledMidRun runs a dataset on two worker processes, SIGKILLs one mid-run, and checks that
// the dataset completes with no lost and no duplicated rows.
func TestWorkerKilledMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	bin := buildBinary(t)
	srv, c := testCluster(t)
	startWorker := func(name string) *exec.Cmd {
		cmd := exec.Command(bin, "worker", "--temporal", srv.Addr(), "--trace-concurrency", "1")
		log, _ := os.Create(filepath.Join(t.TempDir(), name+".log"))
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
		return cmd
	}
	w1 := startWorker("w1")
	startWorker("w2")

	dir := t.TempDir()
	out := filepath.Join(dir, "data")
	spec, err := loadSpec(writeSpec(t, dir, fmt.Sprintf(
		"name: fault\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\n    limit: 240\nbatch_size: 20\nparallelism: 4\nlimits:\n  timeout: 2s\ncreated_at: 2026-11-22T00:00:00Z\n",
		out, cruxeval.Path(t))), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	wr, err := startDataset(ctx, c, spec)
	if err != nil {
		t.Fatal(err)
	}
	// Kill worker 1 (and its sandboxes) as soon as the run is under way.
	killed := false
	for !killed {
		p, err := queryProgress(ctx, c, wr.GetID())
		if err == nil && p.BatchesDone >= 1 {
			if err := syscall.Kill(-w1.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
			t.Logf("killed worker 1 after %d/%d batches", p.BatchesDone, p.Batches)
		}
		if ctx.Err() != nil {
			t.Fatal("the run never got under way")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var res workflows.DatasetResult
	if err := wr.Get(ctx, &res); err != nil {
		t.Fatalf("dataset: %v", err)
	}
	m, ids := checkDataset(t, out)
	if m.Counts["items"] != 240 || int64(len(ids)) != m.Totals.Rows || uniqueCount(ids) != len(ids) {
		t.Fatalf("items %d, rows %d, ids %d, unique %d", m.Counts["items"], m.Totals.Rows, len(ids), uniqueCount(ids))
	}
	if m.Totals.Rows+2*m.Counts["rejects"] < 480 {
		t.Fatalf("rows lost: %d rows, %d rejects for 240 items", m.Totals.Rows, m.Counts["rejects"])
	}
}

// TestWorkerBuild builds the worker binary (without the embedded server) and checks that it refuses
// to run without a cluster.
func TestWorkerBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	bin := filepath.Join(t.TempDir(), "ndtrace-worker")
	if out, err := exec.Command("go", "build", "-tags", "worker", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags worker: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "run").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no embedded Temporal server") {
		t.Fatalf("worker build ran without --temporal: %v %s", err, out)
	}
}

// resolvedManifest reads the manifest of st with its shard index resolved into Shards (and
// Packing.Shards), for tests that look at every shard.
func resolvedManifest(t *testing.T, st *store.Store) *dataset.Manifest {
	t.Helper()
	ctx := context.Background()
	m, err := dataset.ReadManifest(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if m.Shards, err = m.AllShards(ctx, st); err != nil {
		t.Fatal(err)
	}
	if m.Packing != nil {
		if m.Packing.Shards, err = m.AllPacked(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	return m
}
