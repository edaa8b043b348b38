package workflows

import (
	"context"
	"errors"
	_ "github.com/ndtrace/ndtrace/store/drivers"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ndtrace/ndtrace/activities"
	"github.com/ndtrace/ndtrace/pipeline"
	"github.com/ndtrace/ndtrace/schemas"
)

func testSpec(parallelism int) schemas.Spec {
	return schemas.Spec{Name: "t", Sources: []schemas.SourceSpec{{Kind: "examples"}}, Parallelism: parallelism}.WithDefaults()
}

// mockPlan mocks the planning activities of a run with one page of batches function batches.
func mockPlan(env *testsuite.TestWorkflowEnvironment, a *activities.Activities, batches int) {
	env.OnActivity(a.ScanPage, mock.Anything, mock.Anything).Return(pipeline.ScanResult{Items: batches * 3, Done: true}, nil)
	env.OnActivity(a.MergeKeys, mock.Anything, mock.Anything).Return(pipeline.MergeResult{Kept: int64(batches * 3)}, nil)
	env.OnActivity(a.FormBatches, mock.Anything, mock.Anything).Return(pipeline.FormResult{FuncBatches: batches, Items: int64(batches * 3)}, nil)
}

// TestDatasetWorkflowMocked runs the dataset workflow with mocked activities (a unit test of its
// logic): every batch runs once, at most Parallelism batches are in flight, a batch that fails is
// recorded and the dataset commits without it, the progress adds up, and the commit comes last.
func TestDatasetWorkflowMocked(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	var a *activities.Activities
	env.RegisterWorkflow(BatchWorkflow)
	const batches = 10
	mockPlan(env, a, batches)
	var mu sync.Mutex
	inFlight, maxInFlight, committed := 0, 0, false
	seen := map[string]int{}
	var failed []string
	env.OnActivity(a.TraceBatch, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BatchInput) (pipeline.TraceResult, error) {
			mu.Lock()
			defer mu.Unlock()
			inFlight++
			maxInFlight = max(maxInFlight, inFlight)
			seen[in.Ref.String()]++
			return pipeline.TraceResult{Hash: "h", Items: 3, Chunks: 1}, nil
		})
	env.OnActivity(a.BuildShard, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BatchInput, _ pipeline.TraceResult) (pipeline.BatchSummary, error) {
			mu.Lock()
			defer mu.Unlock()
			inFlight--
			if committed {
				return pipeline.BatchSummary{}, errors.New("batch after commit")
			}
			if in.Ref.Index == 4 {
				return pipeline.BatchSummary{}, temporal.NewNonRetryableApplicationError("broken", activities.ErrBadInput, nil)
			}
			return pipeline.BatchSummary{Items: 3, Rows: 5, Tokens: 100, Rejected: 1, Poison: 1}, nil
		})
	env.OnActivity(a.RecordFailure, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BatchInput, reason string) error {
			mu.Lock()
			defer mu.Unlock()
			failed = append(failed, in.Ref.String())
			return nil
		})
	env.OnActivity(a.FinalizePage, mock.Anything, mock.Anything).Return(1, nil)
	env.OnActivity(a.Commit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CommitInput) (pipeline.CommitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			committed = true
			if in.Commit.Pages[pipeline.PhaseSources] != 1 {
				return pipeline.CommitResult{}, errors.New("wrong pages")
			}
			return pipeline.CommitResult{Manifest: "mem://x"}, nil
		})
	env.ExecuteWorkflow(DatasetWorkflow, DatasetInput{Spec: testSpec(3), Dataset: "mem://", CreatedAt: time.Unix(0, 0)})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow: %v", env.GetWorkflowError())
	}
	var res DatasetResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	p := res.Progress
	if p.Phase != "done" || p.BatchesDone != batches-1 || p.BatchesFailed != 1 || p.ItemsDone != 3*(batches-1) ||
		p.Rows != 5*(batches-1) || p.Tokens != 100*(batches-1) || p.Poison != batches-1 || res.Final.Manifest != "mem://x" {
		t.Fatalf("progress %+v", p)
	}
	if len(seen) != batches || maxInFlight > 3 {
		t.Fatalf("batches %v, max in flight %d", seen, maxInFlight)
	}
	if len(failed) != 1 || failed[0] != "p1-fn-000004" || len(p.Failed) != 1 {
		t.Fatalf("failed %v, progress lists %v", failed, p.Failed)
	}
}

// TestDatasetWorkflowContinuesAsNew checks (with mocked activities) that a run stops starting
// batches at its bound and continues as new with its progress, the batches in flight carried.
func TestDatasetWorkflowContinuesAsNew(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	var a *activities.Activities
	env.RegisterWorkflow(BatchWorkflow)
	mockPlan(env, a, 7)
	env.OnActivity(a.TraceBatch, mock.Anything, mock.Anything).Return(pipeline.TraceResult{Hash: "h", Items: 1, Chunks: 1}, nil)
	env.OnActivity(a.BuildShard, mock.Anything, mock.Anything, mock.Anything).Return(pipeline.BatchSummary{Items: 1, Rows: 2}, nil)
	env.ExecuteWorkflow(DatasetWorkflow, DatasetInput{Spec: testSpec(2), Dataset: "mem://", BatchesPerRun: 3})
	var can *workflow.ContinueAsNewError
	if !errors.As(env.GetWorkflowError(), &can) {
		t.Fatalf("want continue-as-new, got %v", env.GetWorkflowError())
	}
	var next DatasetInput
	if err := (converterFor(t)).FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	st := next.State
	if st == nil || st.Next != 3 || st.Stage != stageBatches || st.Progress.BatchesDone+len(st.InFlight) != 3 || len(st.InFlight) > 2 {
		t.Fatalf("carried state %+v", st)
	}
}

// TestBatchBadInputNotRetried checks (with mocked activities) that a BadInput failure fails the
// batch at once, and that the failure is recorded rather than returned.
func TestBatchBadInputNotRetried(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	var a *activities.Activities
	calls := 0
	env.OnActivity(a.TraceBatch, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.BatchInput) (pipeline.TraceResult, error) {
			calls++
			return pipeline.TraceResult{}, temporal.NewNonRetryableApplicationError("bad", activities.ErrBadInput, nil)
		})
	recorded := ""
	env.OnActivity(a.RecordFailure, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ activities.BatchInput, reason string) error { recorded = reason; return nil })
	env.ExecuteWorkflow(BatchWorkflow, BatchInput{BatchInput: activities.BatchInput{RunInput: activities.RunInput{Run: pipeline.Run{Spec: testSpec(1)}}}})
	var s pipeline.BatchSummary
	if err := env.GetWorkflowResult(&s); err != nil || calls != 1 || s.Failed == "" || recorded == "" {
		t.Fatalf("result %+v, %v after %d calls (recorded %q)", s, err, calls, recorded)
	}
}

func converterFor(t *testing.T) interface {
	FromPayloads(*commonpb.Payloads, ...interface{}) error
} {
	t.Helper()
	return converter.GetDefaultDataConverter()
}

func TestTraceTimeout(t *testing.T) {
	fn := schemas.Spec{Sources: []schemas.SourceSpec{{Kind: "jsonl", Path: "x"}}}.WithDefaults()
	repo := schemas.Spec{Sources: []schemas.SourceSpec{{Kind: "repository", URL: "x", MaxTests: 10}}}.WithDefaults()
	no := false
	once := schemas.Spec{Sources: []schemas.SourceSpec{{Kind: "repository", URL: "x", MaxTests: 10, Reexecute: &no}}}.WithDefaults()
	tests := []struct {
		name string
		spec schemas.Spec
		want time.Duration
	}{
		// 64 items of at most 10 s (+5 s slack) each, plus a minute.
		{"functions", fn, 64*15*time.Second + time.Minute},
		// 10 tests five times (untraced twice, traced twice, the allowance past the limit), its
		// overshoot (3), 200 functions twice, a 5 min checkout and a 12 min collection.
		{"repository", repo, time.Duration((453*15+17*60)/15)*15*time.Second + time.Minute},
		// Traced once: four runs a test, the functions once.
		{"repository traced once", once, time.Duration((243*15+17*60)/15)*15*time.Second + time.Minute},
	}
	for _, tc := range tests {
		if got := traceTimeout(tc.spec, 10*time.Second); got != tc.want {
			t.Errorf("%s: traceTimeout = %v, want %v", tc.name, got, tc.want)
		}
	}
	// functions: all adds the generation (capped at 2 h, and the last find begun within it, 35 s)
	// and its items' traced runs (2000, twice with reexecute, once without).
	all := schemas.Spec{Sources: []schemas.SourceSpec{{Kind: "repository", URL: "x", MaxTests: 10,
		Functions: schemas.Functions(schemas.FunctionsModeAll)}}}.WithDefaults()
	allOnce := schemas.Spec{Sources: []schemas.SourceSpec{{Kind: "repository", URL: "x", MaxTests: 10, Reexecute: &no,
		Functions: schemas.Functions(schemas.FunctionsModeAll)}}}.WithDefaults()
	files := schemas.Spec{Sources: []schemas.SourceSpec{{Kind: "files", Path: "x"}}}.WithDefaults()
	for _, tc := range []struct {
		name string
		spec schemas.Spec
		want time.Duration
	}{
		{"functions all", all, time.Duration((453*15+17*60+2*3600+35+4000*15)/15)*15*time.Second + time.Minute},
		{"functions all traced once", allOnce, time.Duration((243*15+17*60+2*3600+35+2000*15)/15)*15*time.Second + time.Minute},
		{"files", files, time.Duration((5*60+2*3600+35+4000*15)/15)*15*time.Second + time.Minute},
	} {
		if got := traceTimeout(tc.spec, 10*time.Second); got != tc.want {
			t.Errorf("%s: traceTimeout = %v, want %v", tc.name, got, tc.want)
		}
	}
}
