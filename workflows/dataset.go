package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ndtrace/ndtrace/activities"
	"github.com/ndtrace/ndtrace/schemas"
)

// ProgressQuery is the query that returns a DatasetWorkflow's Progress.
const ProgressQuery = "progress"

// batchesPerRun bounds the batches one workflow run starts before it continues as new, which keeps
// its history far below Temporal's limits.
const batchesPerRun = 200

// DatasetInput is the input of DatasetWorkflow. State is nil on the first run and carries the
// progress across continue-as-new.
type DatasetInput struct {
	Spec      schemas.Spec
	Dataset   string
	CreatedAt time.Time
	State     *DatasetState
	// BatchesPerRun bounds the batches one run starts before continuing as new (default 200).
	BatchesPerRun int
}

// DatasetState is what a DatasetWorkflow run hands to the next.
type DatasetState struct {
	Plan activities.PlanResult
	// Functions is the second plan, of the function-level items found in repositories (planned
	// once the first plan's batches are done); InFunctions says the batches being run are its.
	Functions   activities.PlanResult
	InFunctions bool
	Next        int
	Progress    Progress
}

// current is the plan whose batches are being run.
func (st *DatasetState) current() activities.PlanResult {
	if st.InFunctions {
		return st.Functions
	}
	return st.Plan
}

// Progress is what ndtrace status and ndtrace run show.
type Progress struct {
	Phase       string // planning, tracing, functions (repositories' function-level items), finalizing, done
	Batches     int
	BatchesDone int
	Items       int
	ItemsDone   int
	Rows        int
	Tokens      int64
	Rejected    int
	Reused      int
	Started     time.Time
	Manifest    string
}

// DatasetResult is the committed dataset.
type DatasetResult struct {
	Progress Progress
	Final    activities.FinalizeResult
}

// WorkflowID is the deterministic workflow ID of a dataset: the same spec and output give the same
// ID, so submitting it again attaches to (or re-runs over) the same work.
func WorkflowID(spec schemas.Spec) string {
	sum := sha256.Sum256([]byte(spec.Hash() + "|" + spec.Output))
	return fmt.Sprintf("ndtrace-dataset-%s-%s", spec.Name, hex.EncodeToString(sum[:6]))
}

// ioOptions are the options of I/O activities: retried with backoff, never for bad input.
func ioOptions(timeout time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:           activities.IOQueue,
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    2 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute, MaximumAttempts: 5, NonRetryableErrorTypes: []string{activities.ErrBadInput}},
	}
}

// DatasetWorkflow produces a dataset: it plans the batches, runs a BatchWorkflow per batch with a
// bounded window in flight, and finalizes the manifest.
func DatasetWorkflow(ctx workflow.Context, in DatasetInput) (DatasetResult, error) {
	var a *activities.Activities
	if in.CreatedAt.IsZero() {
		// Scheduled runs carry no creation time: each version is created when its run starts.
		in.CreatedAt = workflow.Now(ctx).UTC().Truncate(time.Second)
	}
	st := in.State
	if st == nil {
		st = &DatasetState{Progress: Progress{Phase: "planning", Started: workflow.Now(ctx)}}
	}
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (Progress, error) { return st.Progress, nil }); err != nil {
		return DatasetResult{}, err
	}
	if in.State == nil {
		actx := workflow.WithActivityOptions(ctx, ioOptions(30*time.Minute))
		if err := workflow.ExecuteActivity(actx, a.Plan, activities.PlanInput{Spec: in.Spec, Dataset: in.Dataset}).Get(ctx, &st.Plan); err != nil {
			return DatasetResult{}, fmt.Errorf("plan: %w", err)
		}
		st.Progress.Batches, st.Progress.Items = st.Plan.Batches, st.Plan.Items
		st.Progress.Rejected = st.Plan.SourceRejects
		st.Progress.Phase = "tracing"
	}

	// A sliding window of children: at most Parallelism in flight; a child's ID is derived from the
	// parent's and the batch, so a re-run finds the same children.
	parentID := workflow.GetInfo(ctx).WorkflowExecution.ID
	window := in.Spec.Parallelism
	perRun := in.BatchesPerRun
	if perRun <= 0 {
		perRun = batchesPerRun
	}
	pending := 0
	started := 0
	var firstErr error
	sel := workflow.NewSelector(ctx)
	prefix := "batch"
	if st.InFunctions {
		prefix = "fn-batch"
	}
	cur := st.current()
	startChild := func(i int) {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:            fmt.Sprintf("%s/%s-%06d", parentID, prefix, i),
			TaskQueue:             activities.IOQueue,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_TERMINATE,
		})
		f := workflow.ExecuteChildWorkflow(cctx, BatchWorkflow, activities.BatchInput{Spec: in.Spec, Dataset: in.Dataset,
			PlanKey: cur.PlanKey, Index: i, CreatedAt: in.CreatedAt})
		pending++
		sel.AddFuture(f, func(f workflow.Future) {
			pending--
			var s activities.BatchSummary
			if err := f.Get(ctx, &s); err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("batch %d: %w", i, err)
				}
				return
			}
			p := &st.Progress
			p.BatchesDone++
			p.ItemsDone += s.Items
			p.Rows += s.Rows
			p.Tokens += s.Tokens
			p.Rejected += s.Rejected
			if s.Reused {
				p.Reused++
			}
		})
	}
	for st.Next < cur.Batches && started < perRun && firstErr == nil {
		for pending < window && st.Next < cur.Batches && started < perRun {
			startChild(st.Next)
			st.Next++
			started++
		}
		sel.Select(ctx)
	}
	// Drain the window: nothing may be in flight when the run continues as new or finalizes.
	for pending > 0 {
		sel.Select(ctx)
	}
	if firstErr != nil {
		return DatasetResult{Progress: st.Progress}, firstErr
	}
	if st.Next < cur.Batches {
		return DatasetResult{}, workflow.NewContinueAsNewError(ctx, DatasetWorkflow, DatasetInput{
			Spec: in.Spec, Dataset: in.Dataset, CreatedAt: in.CreatedAt, State: st, BatchesPerRun: in.BatchesPerRun})
	}
	if !st.InFunctions && st.Plan.Repos > 0 {
		// The repositories are traced: plan the function-level items found in them, then run
		// their batches (in this run or, if it is long already, the next).
		st.Progress.Phase = "functions"
		actx := workflow.WithActivityOptions(ctx, ioOptions(30*time.Minute))
		if err := workflow.ExecuteActivity(actx, a.PlanFunctions, activities.PlanFunctionsInput{Spec: in.Spec, Dataset: in.Dataset,
			PlanKey: st.Plan.PlanKey}).Get(ctx, &st.Functions); err != nil {
			return DatasetResult{Progress: st.Progress}, fmt.Errorf("plan functions: %w", err)
		}
		st.InFunctions, st.Next = true, 0
		st.Progress.Batches += st.Functions.Batches
		st.Progress.Items += st.Functions.Items
		st.Progress.Rejected += st.Functions.SourceRejects
		return DatasetResult{}, workflow.NewContinueAsNewError(ctx, DatasetWorkflow, DatasetInput{
			Spec: in.Spec, Dataset: in.Dataset, CreatedAt: in.CreatedAt, State: st, BatchesPerRun: in.BatchesPerRun})
	}

	st.Progress.Phase = "finalizing"
	var final activities.FinalizeResult
	actx := workflow.WithActivityOptions(ctx, ioOptions(30*time.Minute))
	if err := workflow.ExecuteActivity(actx, a.Finalize, activities.FinalizeInput{Spec: in.Spec, Dataset: in.Dataset,
		PlanKey: st.Plan.PlanKey, MorePlans: morePlans(st), CreatedAt: in.CreatedAt}).Get(ctx, &final); err != nil {
		return DatasetResult{Progress: st.Progress}, fmt.Errorf("finalize: %w", err)
	}
	st.Progress.Phase, st.Progress.Manifest = "done", final.Manifest
	return DatasetResult{Progress: st.Progress, Final: final}, nil
}

// BatchWorkflow traces one batch on the sandbox queue, then builds its rows and shard on the I/O
// queue. Both activities are idempotent: a batch whose record exists is reused.
func BatchWorkflow(ctx workflow.Context, in activities.BatchInput) (activities.BatchSummary, error) {
	var a *activities.Activities
	timeout, err := time.ParseDuration(in.Spec.Limits.Timeout)
	if err != nil {
		return activities.BatchSummary{}, temporal.NewNonRetryableApplicationError("limits.timeout", activities.ErrBadInput, err)
	}
	tctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: activities.TraceQueue,
		// Every item may take the whole wall-clock limit; a repository, every test twice, after its
		// checkout and collection. The heartbeat timeout catches a stuck attempt long before.
		StartToCloseTimeout: traceTimeout(in.Spec, timeout),
		HeartbeatTimeout:    timeout + 30*time.Second, // a heartbeat follows every item
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute, MaximumAttempts: 5, NonRetryableErrorTypes: []string{activities.ErrBadInput}},
	})
	var tr activities.TraceResult
	if err := workflow.ExecuteActivity(tctx, a.TraceBatch, in).Get(ctx, &tr); err != nil {
		return activities.BatchSummary{}, fmt.Errorf("trace: %w", err)
	}
	var s activities.BatchSummary
	bctx := workflow.WithActivityOptions(ctx, ioOptions(30*time.Minute))
	if err := workflow.ExecuteActivity(bctx, a.BuildShard, in, tr).Get(ctx, &s); err != nil {
		return activities.BatchSummary{}, fmt.Errorf("build shard: %w", err)
	}
	return s, nil
}

// morePlans lists the plans after the first.
func morePlans(st *DatasetState) []string {
	if st.InFunctions {
		return []string{st.Functions.PlanKey}
	}
	return nil
}

// traceTimeout bounds one TraceBatch attempt: a batch of BatchSize items, or one repository with
// up to max_tests tests run twice, each for at most the wall-clock limit (plus start-up slack),
// after a checkout and a collection.
func traceTimeout(spec schemas.Spec, perRun time.Duration) time.Duration {
	runs := spec.BatchSize
	for _, src := range spec.Sources {
		switch src.Kind {
		case "repository", "examples":
			tests := src.MaxTests
			if tests == 0 {
				tests = 500
			}
			checkout, _ := time.ParseDuration(spec.Limits.CheckoutTimeout)
			if d := time.Duration(2*tests+maxFunctionRuns)*(perRun+5*time.Second) + checkout + 2*time.Minute; d > time.Duration(runs)*(perRun+5*time.Second) {
				runs = int(d / (perRun + 5*time.Second))
			}
		}
	}
	return time.Duration(runs)*(perRun+5*time.Second) + time.Minute
}

// maxFunctionRuns is how many function-level items one repository gives at most (traced in the
// repository's activity); it matches activities' cap.
const maxFunctionRuns = 200
