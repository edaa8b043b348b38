package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/workflows"
)

// TestRetryAndCancel runs `ndtrace retry` and `ndtrace cancel` against a real in-process server
// and a worker process: a retry makes a new version that reuses every batch; a cancel ends the
// dataset workflow and its batches in flight, and commits nothing.
func TestRetryAndCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	bin := buildBinary(t)
	srv, c := testCluster(t)
	w := exec.Command(bin, "worker", "--temporal", srv.Addr(), "--trace-concurrency", "1")
	w.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-w.Process.Pid, syscall.SIGKILL); w.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	for _, d := range []string{"r", "c"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// Retry: a second version of a finished dataset, every batch reused.
	out := filepath.Join(dir, "retry")
	spec, err := loadSpec(writeSpec(t, filepath.Join(dir, "r"), fmt.Sprintf(
		"name: retry\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\n    limit: 60\nbatch_size: 20\ncreated_at: 2026-11-24T00:00:00Z\n", out, cruxeval.Path(t))), "")
	if err != nil {
		t.Fatal(err)
	}
	run, err := startDataset(ctx, c, spec)
	if err != nil {
		t.Fatal(err)
	}
	var first workflows.DatasetResult
	if err := run.Get(ctx, &first); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := runRetry(ctx, []string{run.GetID(), "--temporal", srv.Addr()}, &stdout, &stderr); err != nil {
		t.Fatalf("retry: %v: %s", err, stderr.String())
	}
	var second workflows.DatasetResult
	if err := c.GetWorkflow(ctx, run.GetID(), "").Get(ctx, &second); err != nil {
		t.Fatal(err)
	}
	if second.Final.Version == first.Final.Version || !second.Final.Head || second.Progress.Reused != 3 {
		t.Fatalf("retry: version %s after %s, head %v, %d batches reused", second.Final.Version, first.Final.Version, second.Final.Head, second.Progress.Reused)
	}
	versions, _ := filepath.Glob(filepath.Join(out, "versions", "*", "manifest.json"))
	if len(versions) != 2 {
		t.Errorf("%d versions, want 2", len(versions))
	}

	// Cancel: mid-run, nothing committed, no batch left running.
	out2 := filepath.Join(dir, "cancel")
	spec2, err := loadSpec(writeSpec(t, filepath.Join(dir, "c"), fmt.Sprintf(
		"name: cancel\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\nbatch_size: 10\nparallelism: 1\ncreated_at: 2026-11-24T00:00:00Z\n", out2, cruxeval.Path(t))), "")
	if err != nil {
		t.Fatal(err)
	}
	run2, err := startDataset(ctx, c, spec2)
	if err != nil {
		t.Fatal(err)
	}
	var inFlight []string
	for len(inFlight) == 0 {
		if p, err := queryProgress(ctx, c, run2.GetID()); err == nil && p.BatchesDone >= 1 {
			inFlight = p.InFlight
		}
		if ctx.Err() != nil {
			t.Fatal("the run never got under way")
		}
		time.Sleep(50 * time.Millisecond)
	}
	stdout.Reset()
	if err := runCancel(ctx, []string{run2.GetID(), "--temporal", srv.Addr()}, &stdout, &stderr); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if err := run2.Get(ctx, nil); err == nil || !strings.Contains(strings.ToLower(err.Error()), "cancel") {
		t.Fatalf("the cancelled workflow ended with %v", err)
	}
	for _, id := range inFlight {
		for {
			d, err := c.DescribeWorkflowExecution(ctx, id, "")
			if err != nil {
				t.Fatal(err)
			}
			if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("batch %s still running after the cancel", id)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if _, err := os.Stat(filepath.Join(out2, "manifest.json")); !os.IsNotExist(err) {
		t.Errorf("a cancelled run committed: %v", err)
	}
}
