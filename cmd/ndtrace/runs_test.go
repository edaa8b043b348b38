package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/ndtrace/ndtrace/activities"
	"github.com/ndtrace/ndtrace/pipeline"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/workflows"
)

// opsActivities are stubActivities whose behaviour depends on the spec's name: "bad" fails its
// scan as bad input (the dataset fails), "slow" traces until it is cancelled, "gated" ("gated2")
// traces once gate (gate2) is closed; every other spec commits at once.
type opsActivities struct {
	*stubActivities
	gate, gate2 chan struct{}
}

func (s *opsActivities) ScanPage(ctx context.Context, in activities.ScanInput) (pipeline.ScanResult, error) {
	if in.Run.Spec.Name == "bad" {
		return pipeline.ScanResult{}, temporal.NewNonRetryableApplicationError("sources[0]: no such file", activities.ErrBadInput, nil)
	}
	return s.stubActivities.ScanPage(ctx, in)
}

func (s *opsActivities) TraceBatch(ctx context.Context, in activities.BatchInput) (pipeline.TraceResult, error) {
	var gate <-chan struct{}
	switch in.Run.Spec.Name {
	case "slow":
		// never opens
	case "gated":
		gate = s.gate
	case "gated2":
		gate = s.gate2
	default:
		return s.stubActivities.TraceBatch(ctx, in)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-gate:
			return s.stubActivities.TraceBatch(ctx, in)
		case <-ctx.Done():
			return pipeline.TraceResult{}, ctx.Err()
		case <-tick.C:
			activity.RecordHeartbeat(ctx, 0) // a cancellation comes with a heartbeat's answer
		}
	}
}

// waitFor runs f until it returns true, for up to two minutes.
func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if f() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestOperations drives status, cancel, runs and status --watch against a real embedded Temporal
// server, with the real workflows and stubbed activities (opsActivities):
//
//   - with no worker, status answers at once: "no progress yet" for a workflow no worker took up,
//     the memo's progress for one that has a memo (not a 10 s wait ending in RST_STREAM);
//   - cancel of a run that ended says so and exits 1; a cancelled run's status says cancelled,
//     with no ETA;
//   - runs lists the dataset runs as running, committed, failed, cancelled and terminated, and
//     --batches one dataset's batch workflows, which the top-level query hides;
//   - status --watch follows a run to its commit.
func TestOperations(t *testing.T) {
	if testing.Short() {
		t.Skip("status, cancel and runs against an embedded server: long integration test; run without -short")
	}
	srv, c := testCluster(t)
	addr := srv.Addr()
	ctx, cancelCtx := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancelCtx()
	spec := func(name string) schemas.Spec {
		return schemas.Spec{Name: name, Output: "stub://" + name, Sources: []schemas.SourceSpec{{Kind: "jsonl", Path: "stub"}},
			BatchSize: 2, Parallelism: 2, CreatedAt: "2026-11-28T00:00:00Z"}.WithDefaults()
	}
	start := func(name string) client.WorkflowRun {
		run, err := startDataset(ctx, c, spec(name))
		if err != nil {
			t.Fatal(err)
		}
		return run
	}

	// No worker yet.
	waiting := start("waiting")
	t0 := time.Now()
	code, out := cli("status", waiting.GetID(), "--temporal", addr)
	took := time.Since(t0)
	t.Logf("status with no worker took %s:\n%s", took, out)
	if code != 0 || !strings.Contains(out, ": running") || !strings.Contains(out, "no progress yet") {
		t.Errorf("status of a workflow no worker took up: exit %d:\n%s", code, out)
	}
	if took > 8*time.Second {
		t.Errorf("status with no worker took %s", took)
	}
	// A workflow with a memo (as one a worker left): its progress, from the memo.
	started := time.Now().Add(-time.Minute)
	memo, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "ndtrace-dataset-memo", TaskQueue: activities.IOQueue,
		Memo: map[string]any{workflows.MemoProgress: workflows.Progress{Phase: "tracing", Items: 100, ItemsDone: 40, Batches: 50, BatchesDone: 20, Started: started}}},
		workflows.DatasetWorkflow, workflows.DatasetInput{Spec: spec("memo"), Dataset: "stub://memo"})
	if err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	code, out = cli("status", memo.GetID(), "--temporal", addr)
	took = time.Since(t0)
	t.Logf("status from the memo took %s:\n%s", took, out)
	if code != 0 || !strings.Contains(out, "from the workflow's memo") || !strings.Contains(out, "tracing: 40/100 items") || strings.Contains(out, "ETA") {
		t.Errorf("status from the memo: exit %d:\n%s", code, out)
	}
	if took > 8*time.Second {
		t.Errorf("status from the memo took %s", took)
	}
	// Both end before a worker comes: terminated.
	for _, id := range []string{waiting.GetID(), memo.GetID()} {
		if err := c.TerminateWorkflow(ctx, id, "", "test"); err != nil {
			t.Fatal(err)
		}
	}
	code, out = cli("status", memo.GetID(), "--temporal", addr)
	if code != 0 || !strings.Contains(out, ": terminated") || !strings.Contains(out, "terminated in tracing: 40/100 items") || strings.Contains(out, "ETA") {
		t.Errorf("status of a terminated workflow: exit %d:\n%s", code, out)
	}

	// A worker with stubbed activities.
	stub := &opsActivities{stubActivities: &stubActivities{items: 4, pageSize: 4, batch: 2}, gate: make(chan struct{}), gate2: make(chan struct{})}
	startStubWorkers(t, c, worker.Options{}, stub, stub.TraceBatch)
	ok, bad, slow := start("ok"), start("bad"), start("slow")
	if err := ok.Get(ctx, nil); err != nil {
		t.Fatalf("ok: %v", err)
	}
	if err := bad.Get(ctx, nil); err == nil {
		t.Fatal("bad committed")
	}
	waitFor(t, "the slow dataset to trace", func() bool {
		_, out := cli("status", slow.GetID(), "--temporal", addr)
		return strings.Contains(out, "tracing:") && strings.Contains(out, "in flight")
	})
	runsOut := func(args ...string) string {
		code, out := cli(append([]string{"runs", "--temporal", addr}, args...)...)
		if code != 0 {
			t.Fatalf("runs %v: exit %d:\n%s", args, code, out)
		}
		return out
	}
	hasRun := func(out, id, status string) bool {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == id && strings.Join(f[1:], " ") != "" && strings.HasPrefix(strings.Join(f[1:], " "), status) {
				return true
			}
		}
		return false
	}
	waitFor(t, "runs to list the running dataset", func() bool { return hasRun(runsOut(), slow.GetID(), "running") })

	// Cancel: the running one, then the ended ones.
	if code, out := cli("cancel", slow.GetID(), "--temporal", addr); code != 0 || !strings.Contains(out, "cancel requested") {
		t.Fatalf("cancel: exit %d:\n%s", code, out)
	}
	if err := slow.Get(ctx, nil); !temporal.IsCanceledError(err) {
		t.Fatalf("slow ended with %v, want cancelled", err)
	}
	code, out = cli("status", slow.GetID(), "--temporal", addr)
	t.Logf("status of the cancelled dataset:\n%s", out)
	if code != 0 || !strings.Contains(out, ": cancelled") || !strings.Contains(out, "nothing was committed") || strings.Contains(out, "ETA") {
		t.Errorf("status of a cancelled workflow: exit %d:\n%s", code, out)
	}
	for id, how := range map[string]string{slow.GetID(): "cancelled", ok.GetID(): "committed", bad.GetID(): "failed"} {
		code, out := cli("cancel", id, "--temporal", addr)
		if code != 1 || !strings.Contains(out, "already ended ("+how+")") || strings.Contains(out, "cancel requested") {
			t.Errorf("cancel of a %s workflow: exit %d:\n%s", how, code, out)
		}
	}
	code, out = cli("status", bad.GetID(), "--temporal", addr)
	if code != 0 || !strings.Contains(out, ": failed") || !strings.Contains(out, "no such file") {
		t.Errorf("status of a failed workflow: exit %d:\n%s", code, out)
	}

	// runs: every dataset run with how it stands; visibility follows the workflows shortly after.
	want := map[string]string{ok.GetID(): "committed", bad.GetID(): "failed", slow.GetID(): "cancelled",
		waiting.GetID(): "terminated", memo.GetID(): "terminated"}
	var list string
	waitFor(t, "runs to list every dataset run", func() bool {
		list = runsOut()
		for id, st := range want {
			if !hasRun(list, id, st) {
				return false
			}
		}
		return true
	})
	t.Logf("ndtrace runs:\n%s", list)
	if strings.Contains(list, ok.GetID()+"/") {
		t.Errorf("runs lists batch workflows:\n%s", list)
	}
	if out := runsOut("--status", "cancelled"); !hasRun(out, slow.GetID(), "cancelled") || strings.Contains(out, ok.GetID()) {
		t.Errorf("runs --status cancelled:\n%s", out)
	}
	if code, out := cli("runs", "--temporal", addr, "--status", "sideways"); code != 2 {
		t.Errorf("runs --status sideways: exit %d:\n%s", code, out)
	}
	// Batches: findable from their dataset, hidden from the top-level list.
	batches := runsOut("--batches", ok.GetID())
	t.Logf("ndtrace runs --batches %s:\n%s", ok.GetID(), batches)
	if n := strings.Count(batches, ok.GetID()+"/"); n != 2 || strings.Count(batches, "completed") != 2 {
		t.Errorf("runs --batches lists %d batches, want 2:\n%s", n, batches)
	}
	prefixed, err := listWorkflows(ctx, c, "default", "WorkflowId STARTS_WITH "+quoteQuery(ok.GetID()+"/"), 0)
	if err != nil || len(prefixed) != 2 {
		t.Errorf("WorkflowId STARTS_WITH the dataset's ID: %d workflows, %v", len(prefixed), err)
	}
	if odd, err := listWorkflows(ctx, c, "default", batchesQuery(`it's a\' test`), 0); err != nil || len(odd) != 0 {
		t.Errorf("the batches of an ID with quotes: %d, %v", len(odd), err)
	}
	top, err := listWorkflows(ctx, c, "default", topLevelQuery, 0)
	if err != nil {
		t.Fatal(err)
	}
	all, err := listWorkflows(ctx, c, "default", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	children := 0
	for _, e := range all {
		if e.GetParentExecution() != nil {
			children++
		}
	}
	if children == 0 {
		t.Error("no batch workflows in the namespace")
	}
	for _, e := range top {
		if e.GetType().GetName() != "DatasetWorkflow" || e.GetParentExecution() != nil {
			t.Errorf("the top-level query %s lists %s (%s)", topLevelQuery, e.GetExecution().GetWorkflowId(), e.GetType().GetName())
		}
	}
	if len(top) == 0 || len(top)+children != len(all) {
		t.Errorf("top-level query: %d of %d workflows, %d children", len(top), len(all), children)
	}

	// status --watch follows a run until it commits.
	gated := start("gated")
	var wout, werr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run([]string{"status", gated.GetID(), "--temporal", addr, "--watch"}, &wout, &werr) }()
	waitFor(t, "status --watch to show progress", func() bool { return strings.Contains(werr.String(), "tracing:") })
	close(stub.gate)
	if code := <-done; code != 0 || !strings.Contains(wout.String(), "rows in") {
		t.Errorf("status --watch: exit %d\nstdout:\n%s\nstderr:\n%s", code, wout.String(), werr.String())
	}
	t.Logf("status --watch:\n%s%s", werr.String(), wout.String())
	// On a terminal, status --watch draws run's live block, redrawn in place.
	t.Setenv("TERM", "xterm")
	ptmx, tty := openTerminal(t)
	var raw syncBuffer
	read := make(chan struct{})
	go func() {
		io.Copy(&raw, ptmx) // until the terminal closes (EIO)
		close(read)
	}()
	gated2 := start("gated2")
	var tout syncBuffer
	go func() { done <- run([]string{"status", gated2.GetID(), "--temporal", addr, "--watch"}, &tout, tty) }()
	waitFor(t, "the live block", func() bool { return strings.Contains(raw.String(), "tracing") })
	close(stub.gate2)
	code = <-done
	tty.Close()
	<-read
	lines, err := screen([]byte(raw.String()))
	if err != nil {
		t.Fatalf("%v in %q", err, raw.String())
	}
	shown := strings.Join(lines, "\n")
	t.Logf("status --watch on a terminal, the screen:\n%s", shown)
	if code != 0 || !strings.Contains(tout.String(), "rows in") {
		t.Errorf("status --watch on a terminal: exit %d: %s", code, tout.String())
	}
	for _, want := range []string{"done ", "4/4 items", "100%", "batches 2/2"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the screen lacks %q", want)
		}
	}
	if strings.Contains(raw.String(), "items traced") || len(lines) > 5 {
		t.Errorf("progress lines on a terminal, or more than the block: %d lines", len(lines))
	}

	// --watch of a run that ended without a commit exits 1.
	if code, out := cli("status", slow.GetID(), "--temporal", addr, "--watch"); code != 1 || !strings.Contains(out, "cancelled") {
		t.Errorf("status --watch of a cancelled run: exit %d:\n%s", code, out)
	}
}

// TestStaticLine: the line of a run that ended, or of a memo, has its counts and the time from its
// start to its end, and no rate or ETA.
func TestStaticLine(t *testing.T) {
	start := time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)
	p := workflows.Progress{Phase: "tracing", Items: 100, ItemsDone: 40, Batches: 10, BatchesDone: 4, Started: start}
	for _, tc := range []struct {
		label string
		end   time.Time
		want  string
	}{
		{"cancelled in tracing", start.Add(90 * time.Second), "cancelled in tracing: 40/100 items traced, 0 trajectories, 0 tokens, 0 rejects, 4/10 batches, elapsed 1m30s"},
		{"tracing", start.Add(-time.Second), "tracing: 40/100 items traced, 0 trajectories, 0 tokens, 0 rejects, 4/10 batches"},
	} {
		if got := staticLine(p, tc.label, tc.end); got != tc.want {
			t.Errorf("staticLine(%q):\n got %s\nwant %s", tc.label, got, tc.want)
		}
	}
}

// TestQuoteQuery: a workflow ID cannot end a visibility query's string early.
func TestQuoteQuery(t *testing.T) {
	for in, want := range map[string]string{
		"ndtrace-dataset-a-1": `'ndtrace-dataset-a-1'`,
		`it's`:                `'it\'s'`,
		`a\' OR 1=1`:          `'a\\\' OR 1=1'`,
	} {
		if got := quoteQuery(in); got != want {
			t.Errorf("quoteQuery(%q) = %s, want %s", in, got, want)
		}
	}
}
