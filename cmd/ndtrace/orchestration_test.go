package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"

	"github.com/ndtrace/ndtrace/activities"
	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/pipeline"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/workflows"
)

// stubActivities stands in for the pipeline's activities in TestOrchestrationMillionItems: they
// do no tracing and no storage, and answer at once with results of the sizes a real run of that
// many items would give. The workflows, the server and the worker are real.
type stubActivities struct {
	items    int // items the sources hold
	pageSize int
	batch    int
	started  atomic.Int64 // batches traced
	commit   atomic.Int64 // manifest bytes of the commit
}

func (s *stubActivities) pages() int { return (s.items + s.pageSize - 1) / s.pageSize }

func (s *stubActivities) ScanPage(ctx context.Context, in activities.ScanInput) (pipeline.ScanResult, error) {
	n := min(s.pageSize, s.items-in.Page*s.pageSize)
	return pipeline.ScanResult{Page: in.Page, Items: n, Next: pipeline.ScanCursor{Ordinal: int64((in.Page + 1) * s.pageSize)},
		Done: in.Page+1 >= s.pages()}, nil
}

func (s *stubActivities) ScanFunctions(ctx context.Context, in activities.ScanInput) (pipeline.ScanResult, error) {
	return pipeline.ScanResult{Done: true}, nil
}

func (s *stubActivities) MergeKeys(ctx context.Context, in activities.MergeInput) (pipeline.MergeResult, error) {
	return pipeline.MergeResult{Kept: int64(s.items)}, nil
}

func (s *stubActivities) FormBatches(ctx context.Context, in activities.FormInput) (pipeline.FormResult, error) {
	r := in.Prev
	r.Page = in.Page
	r.Items += int64(min(s.pageSize, s.items-in.Page*s.pageSize))
	r.FuncBatches = int((r.Items + int64(s.batch) - 1) / int64(s.batch))
	if in.Page+1 < in.Pages {
		r.FuncBatches = int(r.Items / int64(s.batch)) // the rest is carried to the next page
	}
	return r, nil
}

func (s *stubActivities) TraceBatch(ctx context.Context, in activities.BatchInput) (pipeline.TraceResult, error) {
	s.started.Add(1)
	return pipeline.TraceResult{Hash: fmt.Sprintf("%064x", in.Ref.Index), Items: s.batch, Chunks: s.batch / pipeline.TraceChunk}, nil
}

func (s *stubActivities) BuildShard(ctx context.Context, in activities.BatchInput, tr pipeline.TraceResult) (pipeline.BatchSummary, error) {
	return pipeline.BatchSummary{Items: tr.Items, Rows: 2 * tr.Items, Tokens: 1000 * int64(tr.Items)}, nil
}

func (s *stubActivities) RecordFailure(ctx context.Context, in activities.BatchInput, reason string) error {
	return nil
}

func (s *stubActivities) FinalizePage(ctx context.Context, in activities.PageInput) (int, error) {
	return s.pageSize / s.batch, nil
}

// Commit builds the manifest a real commit of the run would write (one shard and one packed shard
// per batch, the rejects in one object per page, 256 dedup key shards) and reports its size.
func (s *stubActivities) Commit(ctx context.Context, in activities.CommitInput) (pipeline.CommitResult, error) {
	m := dataset.Manifest{Format: dataset.Format, FormatVersion: dataset.FormatVersion, CreatedAt: in.Run.CreatedAt, Version: in.Run.ID}
	// One shard index page and one packed index page per planning page, as FinalizePage writes.
	m.Packing = &dataset.Packing{Length: 4096}
	for i := 0; i < s.pages(); i++ {
		per := int64(s.pageSize / s.batch)
		for _, kind := range []string{"shards", "packed"} {
			pg := dataset.ShardPage{Key: fmt.Sprintf("versions/%s/%s/p1-%06d.jsonl", in.Run.ID, kind, i), SHA256: fmt.Sprintf("%064x", i),
				Bytes: 250 * per, Totals: dataset.Totals{Rows: 2 * int64(s.pageSize), Tokens: 1000 * int64(s.pageSize), Shards: per}}
			if kind == "shards" {
				m.ShardIndex = append(m.ShardIndex, pg)
			} else {
				m.Packing.Index = append(m.Packing.Index, pg)
			}
		}
	}
	for i := 0; i < s.pages(); i++ {
		m.Rejects = append(m.Rejects, dataset.ObjectRef{Key: fmt.Sprintf("versions/%s/rejects/p1-%06d.jsonl", in.Run.ID, i), SHA256: fmt.Sprintf("%064x", i), Bytes: 1 << 20, Count: 100})
	}
	for k := 0; k < 256; k++ {
		m.DedupKeys = append(m.DedupKeys, dataset.ObjectRef{Key: fmt.Sprintf("work/runs/%s/p1/dedup/keys-%02x.bin", in.Run.ID, k), SHA256: fmt.Sprintf("%064x", k), Bytes: 300000})
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return pipeline.CommitResult{}, err
	}
	s.commit.Store(int64(len(data)))
	activity.RecordHeartbeat(ctx, 1)
	return pipeline.CommitResult{Manifest: "stub://", Version: in.Run.ID, Head: true}, nil
}

// TestOrchestrationMillionItems plans and runs 1,000,000 function-level items (NDTRACE_ORCH_ITEMS
// to change) through the real workflows on a real in-process Temporal server, with the pipeline's
// activities stubbed (stubActivities: no tracing, no storage). It checks that every batch runs
// once, that no workflow run's history exceeds the budget (the dataset continues as new with its
// window of batches in flight), and reports the histories, the worker's heap and the manifest size.
// startStubWorkers starts, on c, a worker for the I/O queue with the dataset and batch workflows
// and the activities of acts (its options ioOpts), and one for the trace queue with traceBatch as
// its activity; both stop when the test ends.
func startStubWorkers(t *testing.T, c client.Client, ioOpts worker.Options, acts, traceBatch interface{}) {
	t.Helper()
	w := worker.New(c, activities.IOQueue, ioOpts)
	w.RegisterWorkflow(workflows.DatasetWorkflow)
	w.RegisterWorkflow(workflows.BatchWorkflow)
	w.RegisterActivity(acts)
	tw := worker.New(c, activities.TraceQueue, worker.Options{})
	tw.RegisterActivity(traceBatch)
	for _, x := range []worker.Worker{w, tw} {
		if err := x.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(x.Stop)
	}
}

func TestOrchestrationMillionItems(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	items := 1_000_000
	if v := os.Getenv("NDTRACE_ORCH_ITEMS"); v != "" {
		items, _ = strconv.Atoi(v)
	}
	stub := &stubActivities{items: items, pageSize: pipeline.PageItems, batch: 256}
	_, c := testCluster(t)
	startStubWorkers(t, c, worker.Options{MaxConcurrentActivityExecutionSize: 64, MaxConcurrentWorkflowTaskExecutionSize: 64}, stub, stub.TraceBatch)
	spec := schemas.Spec{Name: "million", Output: "stub://", Sources: []schemas.SourceSpec{{Kind: "jsonl", Path: "stub"}},
		BatchSize: stub.batch, Parallelism: 32, CreatedAt: "2026-11-24T00:00:00Z"}.WithDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	t0 := time.Now()
	run, err := startDataset(ctx, c, spec)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.DatasetResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	batches := (items + stub.batch - 1) / stub.batch
	if res.Progress.BatchesDone != batches || res.Progress.ItemsDone != batches*stub.batch || int(stub.started.Load()) != batches {
		t.Fatalf("progress %+v, %d batches traced; want %d batches", res.Progress, stub.started.Load(), batches)
	}
	// Every run of the dataset workflow, along its continue-as-new chain from the last run back.
	runs, maxEvents, maxBytes := 0, 0, 0
	runID := ""
	for {
		it := c.GetWorkflowHistory(ctx, run.GetID(), runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		events, size, prev := 0, 0, ""
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			events++
			size += proto.Size(ev)
			if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				prev = a.GetContinuedExecutionRunId()
			}
		}
		runs++
		maxEvents, maxBytes = max(maxEvents, events), max(maxBytes, size)
		if prev == "" {
			break
		}
		runID = prev
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("%d items, %d batches in %s: %d workflow runs, at most %d events (%d KiB) in one run; worker heap %d MiB after; manifest %d KiB",
		items, batches, time.Since(t0).Round(time.Second), runs, maxEvents, maxBytes>>10, ms.HeapAlloc>>20, stub.commit.Load()>>10)
	if maxEvents > 12000 || maxBytes > 8<<20 {
		t.Errorf("a run's history holds %d events, %d bytes: over the budget", maxEvents, maxBytes)
	}
	if stub.commit.Load() > dataset.MaxManifestBytes/4 {
		t.Errorf("the manifest of %d items is %d bytes", items, stub.commit.Load())
	}
}
