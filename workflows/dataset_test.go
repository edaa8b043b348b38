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
	"github.com/ndtrace/ndtrace/schemas"
)

func testSpec(parallelism int) schemas.Spec {
	return schemas.Spec{Name: "t", Sources: []schemas.SourceSpec{{Kind: "examples"}}, Parallelism: parallelism}.WithDefaults()
}

// TestDatasetWorkflow runs the dataset workflow with mocked activities: every batch runs once, at
// most Parallelism batches are in flight, the progress adds up, and the manifest is written last.
func TestDatasetWorkflow(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	var a *activities.Activities
	env.RegisterWorkflow(BatchWorkflow)
	env.RegisterActivity(a.Plan)
	env.RegisterActivity(a.PlanFunctions)
	env.RegisterActivity(a.TraceBatch)
	env.RegisterActivity(a.BuildShard)
	env.RegisterActivity(a.Finalize)

	const batches = 10
	var mu sync.Mutex
	inFlight, maxInFlight, finalized := 0, 0, false
	seen := map[int]int{}
	env.OnActivity(a.Plan, mock.Anything, mock.Anything).Return(activities.PlanResult{PlanKey: "plan", Batches: batches, Items: batches * 3}, nil)
	env.OnActivity(a.TraceBatch, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BatchInput) (activities.TraceResult, error) {
			mu.Lock()
			defer mu.Unlock()
			inFlight++
			maxInFlight = max(maxInFlight, inFlight)
			seen[in.Index]++
			return activities.TraceResult{Hash: "h", Items: 3, Chunks: 1}, nil
		})
	env.OnActivity(a.BuildShard, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.BatchInput, _ activities.TraceResult) (activities.BatchSummary, error) {
			mu.Lock()
			defer mu.Unlock()
			inFlight--
			if finalized {
				return activities.BatchSummary{}, errors.New("batch after finalize")
			}
			return activities.BatchSummary{Items: 3, Rows: 5, Tokens: 100, Rejected: 1}, nil
		})
	env.OnActivity(a.Finalize, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ activities.FinalizeInput) (activities.FinalizeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			finalized = true
			return activities.FinalizeResult{Manifest: "mem://x"}, nil
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
	if p.Phase != "done" || p.BatchesDone != batches || p.ItemsDone != 3*batches || p.Rows != 5*batches ||
		p.Tokens != 100*batches || p.Rejected != batches || res.Final.Manifest != "mem://x" {
		t.Fatalf("progress %+v", p)
	}
	if len(seen) != batches || maxInFlight > 3 {
		t.Fatalf("batches %v, max in flight %d", seen, maxInFlight)
	}
}

// TestDatasetWorkflowContinuesAsNew checks that a run stops starting batches at its bound and
// continues as new with its progress.
func TestDatasetWorkflowContinuesAsNew(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	var a *activities.Activities
	env.RegisterWorkflow(BatchWorkflow)
	env.OnActivity(a.Plan, mock.Anything, mock.Anything).Return(activities.PlanResult{PlanKey: "plan", Batches: 7, Items: 7}, nil)
	env.OnActivity(a.TraceBatch, mock.Anything, mock.Anything).Return(activities.TraceResult{Hash: "h", Items: 1, Chunks: 1}, nil)
	env.OnActivity(a.BuildShard, mock.Anything, mock.Anything, mock.Anything).Return(activities.BatchSummary{Items: 1, Rows: 2}, nil)
	env.ExecuteWorkflow(DatasetWorkflow, DatasetInput{Spec: testSpec(2), Dataset: "mem://", BatchesPerRun: 3})
	var can *workflow.ContinueAsNewError
	if !errors.As(env.GetWorkflowError(), &can) {
		t.Fatalf("want continue-as-new, got %v", env.GetWorkflowError())
	}
	var next DatasetInput
	if err := (converterFor(t)).FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.State == nil || next.State.Next != 3 || next.State.Progress.BatchesDone != 3 || next.State.Progress.Rows != 6 {
		t.Fatalf("carried state %+v", next.State)
	}
}

// TestBatchBadInputNotRetried checks that a BadInput failure fails the batch at once.
func TestBatchBadInputNotRetried(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	var a *activities.Activities
	calls := 0
	env.OnActivity(a.TraceBatch, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.BatchInput) (activities.TraceResult, error) {
			calls++
			return activities.TraceResult{}, temporal.NewNonRetryableApplicationError("bad", activities.ErrBadInput, nil)
		})
	env.ExecuteWorkflow(BatchWorkflow, activities.BatchInput{Spec: testSpec(1)})
	if env.GetWorkflowError() == nil || calls != 1 {
		t.Fatalf("error %v after %d calls", env.GetWorkflowError(), calls)
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
	tests := []struct {
		name string
		spec schemas.Spec
		want time.Duration
	}{
		// 64 items of at most 10 s (+5 s slack) each, plus a minute.
		{"functions", fn, 64*15*time.Second + time.Minute},
		// 10 tests twice and 200 functions, a 5 min checkout and a 2 min collection.
		{"repository", repo, time.Duration((220*15+7*60)/15)*15*time.Second + time.Minute},
	}
	for _, tc := range tests {
		if got := traceTimeout(tc.spec, 10*time.Second); got != tc.want {
			t.Errorf("%s: traceTimeout = %v, want %v", tc.name, got, tc.want)
		}
	}
}
