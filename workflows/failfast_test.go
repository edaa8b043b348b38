package workflows

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/ndtrace/ndtrace/activities"
	"github.com/ndtrace/ndtrace/pipeline"
)

// TestDatasetWorkflowFatalBatch checks (with mocked activities) that a batch whose failure cannot
// even be recorded, for a reason no retry fixes (the store cannot be used), fails the run at once
// with that reason, a non-retryable BadInput the CLI shows as one line, instead of leaving the
// dataset waiting for a report that never comes; nothing is committed.
func TestDatasetWorkflowFatalBatch(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	var a *activities.Activities
	env.RegisterWorkflow(BatchWorkflow)
	mockPlan(env, a, 4)
	const reason = "the store cannot be used: access denied"
	broken := temporal.NewNonRetryableApplicationError(reason, activities.ErrBadInput, nil)
	var recordings, commits atomic.Int32
	env.OnActivity(a.TraceBatch, mock.Anything, mock.Anything).Return(pipeline.TraceResult{}, broken)
	env.OnActivity(a.RecordFailure, mock.Anything, mock.Anything, mock.Anything).Return(func(_ context.Context, _ activities.BatchInput, _ string) error {
		recordings.Add(1)
		return broken
	})
	env.OnActivity(a.Commit, mock.Anything, mock.Anything).Return(func(context.Context, activities.CommitInput) (pipeline.CommitResult, error) {
		commits.Add(1)
		return pipeline.CommitResult{}, nil
	})
	env.ExecuteWorkflow(DatasetWorkflow, DatasetInput{Spec: testSpec(2), Dataset: "mem://", CreatedAt: time.Unix(0, 0)})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not end")
	}
	err := env.GetWorkflowError()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activities.ErrBadInput || ae.Message() != reason {
		t.Fatalf("workflow error %v, want the BadInput %q", err, reason)
	}
	if n := recordings.Load(); n < 1 || n > 2 {
		t.Errorf("%d failures recorded, want one per batch in flight (1 or 2), each once", n)
	}
	if commits.Load() != 0 {
		t.Error("committed")
	}
}
