package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ndtrace/ndtrace/activities"
	"github.com/ndtrace/ndtrace/pipeline"
	"github.com/ndtrace/ndtrace/schemas"
)

// ProgressQuery is the query that returns a DatasetWorkflow's Progress; the same Progress is kept
// in the workflow's memo (MemoProgress), readable without a live worker.
const (
	ProgressQuery = "progress"
	MemoProgress  = "progress"
	// BatchDoneSignal is the signal a BatchWorkflow sends its dataset when it ends.
	BatchDoneSignal = "batch-done"
)

// historyBudget is the history length past which a DatasetWorkflow run continues as new (at the
// next safe point), far below Temporal's limits (50k events, 50 MB).
const historyBudget = 10000

// DatasetInput is the input of DatasetWorkflow. State is nil on the first run and carries the
// progress across continue-as-new.
type DatasetInput struct {
	Spec      schemas.Spec
	Dataset   string
	CreatedAt time.Time
	State     *DatasetState
	// BatchesPerRun bounds the batches one run starts before continuing as new (0: as the history
	// allows).
	BatchesPerRun int
}

// Stages of a dataset run, in order.
const (
	stageScan     = "scan"
	stageMerge    = "merge"
	stageForm     = "form"
	stageBatches  = "batches"
	stageFinalize = "finalize"
)

// DatasetState is what a DatasetWorkflow run hands to the next.
type DatasetState struct {
	Run   pipeline.Run
	Phase pipeline.Phase
	Stage string
	// Scan: the next page and where it starts.
	ScanPage int
	ScanFrom pipeline.ScanCursor
	// Pages counts each phase's scanned pages.
	Pages map[pipeline.Phase]int
	// Form: the next page to form, the state after the last.
	FormPage int
	Form     pipeline.FormResult
	// RepoBatches is the number of repository batches of the sources' phase.
	RepoBatches int
	// Next is the next batch of the phase to start (repository batches first); InFlight the
	// batches started and not yet reported done, by ref.
	Next     int
	InFlight map[string]pipeline.BatchRef
	// Finalized counts the pages finalized (both phases, in order).
	Finalized int
	Progress  Progress
}

// Progress is what ndtrace status and ndtrace run show.
type Progress struct {
	Phase         string // planning, tracing, functions (repositories' function-level items), finalizing, done
	Batches       int
	BatchesDone   int
	BatchesFailed int
	Items         int
	ItemsDone     int
	Rows          int
	Tokens        int64
	Rejected      int
	Poison        int
	Reused        int
	// GenUnits and GenWall sum the batches' functions given generated inputs and the time that
	// took (pipeline.BatchSummary).
	GenUnits int64
	GenWall  time.Duration
	Started  time.Time
	Manifest string
	// InFlight lists the workflow IDs of the batches running (at most Parallelism).
	InFlight []string
	// Failed lists the first maxFailedShown batches that failed (the version's manifest lists
	// them all).
	Failed []string
}

// maxFailedShown bounds the failed batches the progress lists (it travels in every history).
const maxFailedShown = 50

// DatasetResult is the committed dataset.
type DatasetResult struct {
	Progress Progress
	Final    pipeline.CommitResult
}

// BatchDone is the signal a batch sends when it ends.
type BatchDone struct {
	Ref     pipeline.BatchRef
	Summary pipeline.BatchSummary
}

// WorkflowID is the deterministic workflow ID of a dataset: the same spec and output give the same
// ID, so submitting it again attaches to (or re-runs over) the same work.
func WorkflowID(spec schemas.Spec) string {
	sum := sha256.Sum256([]byte(spec.Hash() + "|" + spec.Output))
	return fmt.Sprintf("ndtrace-dataset-%s-%s", spec.Name, hex.EncodeToString(sum[:6]))
}

// retry rides out outages: retried with backoff up to a minute apart until the activity's
// ScheduleToClose, never for bad input.
var retry = &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
	MaximumInterval: time.Minute, NonRetryableErrorTypes: []string{activities.ErrBadInput}}

// ioOptions are the options of an I/O activity whose attempts heartbeat: each attempt is cut at
// attempt, a lost worker is noticed within the heartbeat timeout, and the activity gives up after
// total (long enough to ride out a 10-minute outage of storage or of the Temporal server).
func ioOptions(attempt, total time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              activities.IOQueue,
		StartToCloseTimeout:    attempt,
		ScheduleToCloseTimeout: total,
		HeartbeatTimeout:       2 * time.Minute,
		RetryPolicy:            retry,
	}
}

// shouldContinue reports whether the run's history is long enough to continue as new.
func shouldContinue(ctx workflow.Context, st *DatasetState, started, perRun int) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > historyBudget || (perRun > 0 && started >= perRun)
}

// DatasetWorkflow produces a version of a dataset: for each planning phase (the spec's sources,
// then the function-level items found in its repositories) it scans the sources page by page,
// deduplicates them in one merge, forms batches page by page, and runs a BatchWorkflow per batch
// with a window of Parallelism in flight; then it finalizes the pages and commits the version.
// Every stage's state is in DatasetState, so the workflow continues as new at any point, the
// window of batches staying full.
func DatasetWorkflow(ctx workflow.Context, in DatasetInput) (DatasetResult, error) {
	if in.CreatedAt.IsZero() {
		// Scheduled runs carry no creation time: each version is created when its run starts.
		in.CreatedAt = workflow.Now(ctx).UTC().Truncate(time.Second)
	}
	st := in.State
	if st == nil {
		st = &DatasetState{Run: pipeline.NewRun(in.Spec, in.CreatedAt), Phase: pipeline.PhaseSources, Stage: stageScan,
			Pages: map[pipeline.Phase]int{}, InFlight: map[string]pipeline.BatchRef{},
			Progress: Progress{Phase: "planning", Started: workflow.Now(ctx)}}
	}
	if err := workflow.SetQueryHandler(ctx, ProgressQuery, func() (Progress, error) { return st.Progress, nil }); err != nil {
		return DatasetResult{}, err
	}
	d := &datasetRun{ctx: ctx, in: in, st: st, rin: activities.RunInput{Run: st.Run, Dataset: in.Dataset},
		done: workflow.GetSignalChannel(ctx, BatchDoneSignal)}
	res, err := d.run()
	if err != nil && temporal.IsCanceledError(err) {
		d.cancelInFlight()
	}
	return res, err
}

// datasetRun is one run of a DatasetWorkflow.
type datasetRun struct {
	ctx     workflow.Context
	in      DatasetInput
	st      *DatasetState
	rin     activities.RunInput
	done    workflow.ReceiveChannel
	started int             // batches started by this run
	stuck   workflow.Future // the timer of the check for batches that ended without reporting
}

var a *activities.Activities

func (d *datasetRun) continueAsNew() error {
	d.drain()
	d.memo()
	return workflow.NewContinueAsNewError(d.ctx, DatasetWorkflow, DatasetInput{Spec: d.in.Spec, Dataset: d.in.Dataset,
		CreatedAt: d.in.CreatedAt, State: d.st, BatchesPerRun: d.in.BatchesPerRun})
}

func (d *datasetRun) exec(opts workflow.ActivityOptions, fn any, args ...any) workflow.Future {
	return workflow.ExecuteActivity(workflow.WithActivityOptions(d.ctx, opts), fn, args...)
}

func (d *datasetRun) run() (DatasetResult, error) {
	ctx, st := d.ctx, d.st
	for {
		if shouldContinue(ctx, st, d.started, d.in.BatchesPerRun) {
			return DatasetResult{}, d.continueAsNew()
		}
		switch st.Stage {
		case stageScan:
			var r pipeline.ScanResult
			in := activities.ScanInput{RunInput: d.rin, Page: st.ScanPage, From: st.ScanFrom, RepoBatches: st.RepoBatches}
			fn := a.ScanPage
			if st.Phase == pipeline.PhaseFunctions {
				fn = a.ScanFunctions
			}
			// A page resolves up to PageItems repositories: heartbeats keep it alive.
			if err := d.exec(ioOptions(2*time.Hour, 6*time.Hour), fn, in).Get(ctx, &r); err != nil {
				return DatasetResult{Progress: st.Progress}, fmt.Errorf("scan page %d of %s: %w", st.ScanPage, st.Phase, err)
			}
			st.ScanPage++
			st.ScanFrom = r.Next
			st.Progress.Items += r.Items
			st.Progress.Rejected += r.Rejects
			if r.Done {
				st.Pages[st.Phase] = st.ScanPage
				st.Stage = stageMerge
			}
		case stageMerge:
			var r pipeline.MergeResult
			in := activities.MergeInput{RunInput: d.rin, Phase: st.Phase, Pages: st.Pages[st.Phase]}
			if err := d.exec(ioOptions(2*time.Hour, 6*time.Hour), a.MergeKeys, in).Get(ctx, &r); err != nil {
				return DatasetResult{Progress: st.Progress}, fmt.Errorf("deduplicate %s: %w", st.Phase, err)
			}
			st.Progress.Items -= int(r.Duplicates)
			st.Progress.Rejected += int(r.Duplicates)
			st.Stage, st.FormPage, st.Form = stageForm, 0, pipeline.FormResult{}
		case stageForm:
			in := activities.FormInput{RunInput: d.rin, Phase: st.Phase, Page: st.FormPage, Pages: st.Pages[st.Phase], Prev: st.Form}
			if err := d.exec(ioOptions(30*time.Minute, 2*time.Hour), a.FormBatches, in).Get(ctx, &st.Form); err != nil {
				return DatasetResult{Progress: st.Progress}, fmt.Errorf("form batches of page %d of %s: %w", st.FormPage, st.Phase, err)
			}
			st.FormPage++
			if st.FormPage >= st.Pages[st.Phase] {
				if st.Phase == pipeline.PhaseSources {
					st.RepoBatches = st.Form.RepoBatches
				}
				st.Progress.Batches += st.Form.RepoBatches + st.Form.FuncBatches
				st.Stage, st.Next = stageBatches, 0
				st.Progress.Phase = "tracing"
				if st.Phase == pipeline.PhaseFunctions {
					st.Progress.Phase = "functions"
				}
				d.memo()
			}
		case stageBatches:
			finished, err := d.batches()
			if err != nil {
				return DatasetResult{Progress: st.Progress}, err
			}
			if !finished {
				return DatasetResult{}, d.continueAsNew()
			}
			if st.Phase == pipeline.PhaseSources && st.RepoBatches > 0 {
				// The repositories are traced: plan the function-level items found in them.
				st.Phase, st.Stage, st.ScanPage, st.ScanFrom = pipeline.PhaseFunctions, stageScan, 0, pipeline.ScanCursor{}
				st.Progress.Phase = "functions"
				continue
			}
			st.Stage = stageFinalize
			st.Progress.Phase = "finalizing"
			d.memo()
		case stageFinalize:
			return d.finalize()
		default:
			return DatasetResult{}, fmt.Errorf("unknown stage %q", st.Stage)
		}
	}
}

// ref is the phase's batch number i: the repository batches first, then the functions'.
func (d *datasetRun) ref(i int) pipeline.BatchRef {
	f := d.st.Form
	if i < f.RepoBatches {
		return pipeline.BatchRef{Phase: d.st.Phase, Kind: pipeline.BatchRepo, Index: i}
	}
	return pipeline.BatchRef{Phase: d.st.Phase, Kind: pipeline.BatchFunc, Index: i - f.RepoBatches}
}

// batches runs the phase's batches with a window of Parallelism in flight. It returns false when
// the run should continue as new first (the batches in flight go on, and report to the next run).
func (d *datasetRun) batches() (bool, error) {
	ctx, st := d.ctx, d.st
	total := st.Form.RepoBatches + st.Form.FuncBatches
	window := max(d.in.Spec.Parallelism, 1)
	for {
		for len(st.InFlight) < window && st.Next < total {
			if shouldContinue(ctx, st, d.started, d.in.BatchesPerRun) {
				return false, nil
			}
			ref := d.ref(st.Next)
			if err := d.startChild(ref); err != nil {
				return false, err
			}
			st.InFlight[ref.String()] = ref
			st.Progress.InFlight = append(st.Progress.InFlight, d.childID(ref))
			st.Next++
			d.started++
		}
		if len(st.InFlight) == 0 && st.Next >= total {
			return true, nil
		}
		if st.Next < total && shouldContinue(ctx, st, d.started, d.in.BatchesPerRun) {
			return false, nil
		}
		done, ok := d.wait()
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if ok {
			d.record(done)
			if done.Summary.Fatal != "" {
				// The batch's failure could not even be recorded: nothing more can be.
				d.cancelInFlight()
				return false, temporal.NewNonRetryableApplicationError(done.Summary.Fatal, activities.ErrBadInput, nil)
			}
		}
	}
}

// childID is the workflow ID of a batch: under the dataset's, and the version's, so that a batch
// left running by an earlier run of the same spec is never taken for this version's.
func (d *datasetRun) childID(ref pipeline.BatchRef) string {
	return workflow.GetInfo(d.ctx).WorkflowExecution.ID + "/" + d.st.Run.ID + "/" + ref.String()
}

// startChild starts the batch workflow of ref (or finds it running: it reports all the same).
func (d *datasetRun) startChild(ref pipeline.BatchRef) error {
	ctx := d.ctx
	parentID := workflow.GetInfo(ctx).WorkflowExecution.ID
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            d.childID(ref),
		TaskQueue:             activities.IOQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		// Batches outlive a run that continues as new; they report by signal.
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
	})
	f := workflow.ExecuteChildWorkflow(cctx, BatchWorkflow, BatchInput{BatchInput: activities.BatchInput{RunInput: d.rin, Ref: ref}, Parent: parentID})
	var exec workflow.Execution
	if err := f.GetChildWorkflowExecution().Get(ctx, &exec); err != nil {
		var started *temporal.ChildWorkflowExecutionAlreadyStartedError
		if !errors.As(err, &started) {
			return fmt.Errorf("start batch %s: %w", ref, err)
		}
	}
	return nil
}

// stuckAfter is how long the dataset waits for a report before it checks its batches in flight.
const stuckAfter = 30 * time.Minute

// wait waits for a batch's report, or for cancellation. When no report comes for stuckAfter, it
// starts every batch in flight again: one that is running refuses (it reports in time); one that
// ended without reporting (terminated, or its report lost) runs again, finds its record or
// failure, and reports.
func (d *datasetRun) wait() (BatchDone, bool) {
	ctx := d.ctx
	var done BatchDone
	got := false
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(d.done, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &done); got = true })
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	if d.stuck == nil {
		d.stuck = workflow.NewTimer(ctx, stuckAfter)
	}
	fired := false
	sel.AddFuture(d.stuck, func(workflow.Future) { fired = true })
	sel.Select(ctx)
	if fired {
		d.stuck = nil
		for _, key := range sortedKeys(d.st.InFlight) {
			if err := d.startChild(d.st.InFlight[key]); err != nil {
				workflow.GetLogger(ctx).Warn("restarting a batch in flight", "batch", key, "error", err)
			}
		}
	}
	return done, got
}

// sortedKeys returns the keys of a map in order: workflow code never ranges over a map to issue
// commands (the order would differ on replay).
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// record counts a batch's end.
func (d *datasetRun) record(done BatchDone) {
	key := done.Ref.String()
	if _, ok := d.st.InFlight[key]; !ok {
		return // a duplicate report
	}
	delete(d.st.InFlight, key)
	p, s := &d.st.Progress, done.Summary
	id := d.childID(done.Ref)
	p.InFlight = slices.DeleteFunc(p.InFlight, func(k string) bool { return k == id })
	if s.Failed != "" {
		p.BatchesFailed++
		if len(p.Failed) < maxFailedShown {
			p.Failed = append(p.Failed, key+": "+s.Failed)
		}
	} else {
		p.BatchesDone++
	}
	p.ItemsDone += s.Items
	p.Rows += s.Rows
	p.Tokens += s.Tokens
	p.Rejected += s.Rejected
	p.Poison += s.Poison
	p.GenUnits += s.GenUnits
	p.GenWall += s.GenWall
	if s.Reused {
		p.Reused++
	}
	if (p.BatchesDone+p.BatchesFailed)%25 == 0 {
		d.memo()
	}
}

// drain records the reports that arrived and were not received yet: nothing may be left unread
// when a run continues as new.
func (d *datasetRun) drain() {
	for {
		var done BatchDone
		if !d.done.ReceiveAsync(&done) {
			return
		}
		d.record(done)
	}
}

// memo keeps the progress in the workflow's memo, for ndtrace status without a live worker.
func (d *datasetRun) memo() {
	_ = workflow.UpsertMemo(d.ctx, map[string]any{MemoProgress: d.st.Progress})
}

// cancelInFlight asks the batches in flight to stop (they outlive their dataset otherwise).
func (d *datasetRun) cancelInFlight() {
	ctx, _ := workflow.NewDisconnectedContext(d.ctx)
	var fs []workflow.Future
	for _, key := range sortedKeys(d.st.InFlight) {
		fs = append(fs, workflow.RequestCancelExternalWorkflow(ctx, d.childID(d.st.InFlight[key]), ""))
	}
	for _, f := range fs {
		_ = f.Get(ctx, nil)
	}
}

// finalize gathers every formed page (a window of them at a time) and commits the version.
func (d *datasetRun) finalize() (DatasetResult, error) {
	ctx, st := d.ctx, d.st
	var pages []activities.PageInput
	for _, p := range []pipeline.Phase{pipeline.PhaseSources, pipeline.PhaseFunctions} {
		for page := 0; page < st.Pages[p]; page++ {
			pages = append(pages, activities.PageInput{RunInput: d.rin, Phase: p, Page: page})
		}
	}
	window := max(d.in.Spec.Parallelism, 1)
	for st.Finalized < len(pages) {
		var fs []workflow.Future
		for i := st.Finalized; i < len(pages) && len(fs) < window; i++ {
			fs = append(fs, d.exec(ioOptions(time.Hour, 4*time.Hour), a.FinalizePage, pages[i]))
		}
		for _, f := range fs {
			if err := f.Get(ctx, nil); err != nil {
				return DatasetResult{Progress: st.Progress}, fmt.Errorf("finalize page %d: %w", st.Finalized, err)
			}
			st.Finalized++
		}
		if st.Finalized < len(pages) && shouldContinue(ctx, st, 0, 0) {
			return DatasetResult{}, d.continueAsNew()
		}
	}
	keys := pipeline.PhaseSources
	if st.Pages[pipeline.PhaseFunctions] > 0 {
		keys = pipeline.PhaseFunctions
	}
	var final pipeline.CommitResult
	in := activities.CommitInput{RunInput: d.rin, Commit: pipeline.CommitInput{Pages: st.Pages, KeysPhase: keys}}
	if err := d.exec(ioOptions(2*time.Hour, 6*time.Hour), a.Commit, in).Get(ctx, &final); err != nil {
		return DatasetResult{Progress: st.Progress}, fmt.Errorf("commit: %w", err)
	}
	st.Progress.Phase, st.Progress.Manifest = "done", final.Manifest
	d.memo()
	return DatasetResult{Progress: st.Progress, Final: final}, nil
}

// BatchInput is the input of BatchWorkflow: its batch, and the dataset workflow to report to.
type BatchInput struct {
	activities.BatchInput
	Parent string
}

// BatchWorkflow traces one batch on the sandbox queue, then builds its rows and shard on the I/O
// queue, and reports to its dataset. Both activities are idempotent: a batch whose record exists is
// reused. A batch that fails on every attempt is recorded as failed, and reported: its dataset goes
// on without it.
func BatchWorkflow(ctx workflow.Context, in BatchInput) (pipeline.BatchSummary, error) {
	s, err := batch(ctx, in.BatchInput)
	if err != nil {
		if temporal.IsCanceledError(err) {
			return s, err
		}
		s = pipeline.BatchSummary{Failed: err.Error()}
		// RecordFailure is one small write: no heartbeats, so no heartbeat timeout.
		ro := ioOptions(5*time.Minute, time.Hour)
		ro.HeartbeatTimeout = 0
		rctx := workflow.WithActivityOptions(ctx, ro)
		if rerr := workflow.ExecuteActivity(rctx, a.RecordFailure, in.BatchInput, err.Error()).Get(ctx, nil); rerr != nil {
			// A failure no retry fixes (the store cannot be used) is reported, so that the run
			// fails with it at once rather than waiting for a report that never comes.
			msg, fatal := permanent(rerr)
			if !fatal || in.Parent == "" || workflow.GetVersion(ctx, "report-fatal-batch", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
				return s, fmt.Errorf("%w (and recording the failure: %v)", err, rerr)
			}
			s.Fatal = msg
		}
	}
	if in.Parent != "" {
		if err := workflow.SignalExternalWorkflow(ctx, in.Parent, "", BatchDoneSignal, BatchDone{Ref: in.Ref, Summary: s}).Get(ctx, nil); err != nil {
			return s, fmt.Errorf("report to %s: %w", in.Parent, err)
		}
	}
	return s, nil
}

// permanent returns the message of an activity's failure that no retry fixes (a non-retryable
// BadInput application error), and whether err is one.
func permanent(err error) (string, bool) {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) && ae.NonRetryable() && ae.Type() == activities.ErrBadInput {
		return ae.Message(), true
	}
	return "", false
}

// batch traces and builds a batch.
func batch(ctx workflow.Context, in activities.BatchInput) (pipeline.BatchSummary, error) {
	spec := in.Run.Spec
	timeout, err := spec.Limits.Timeout.Value()
	if err != nil {
		return pipeline.BatchSummary{}, temporal.NewNonRetryableApplicationError("limits.timeout", activities.ErrBadInput, err)
	}
	attempt := traceTimeout(spec, timeout)
	tctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: activities.TraceQueue,
		// Every item may take the whole wall-clock limit; a repository, every test twice, after its
		// checkout and collection. The heartbeat timeout catches a stuck attempt long before. An
		// item that kills PoisonAfter attempts in a row is given up (poison), so attempts are not
		// capped by number: the schedule-to-close timeout bounds them.
		StartToCloseTimeout:    attempt,
		ScheduleToCloseTimeout: 4*attempt + 30*time.Minute,
		// A heartbeat follows every item, and every run of a repository's test, whose traced run
		// may take longer than the timeout (schemas.TracedTimeLimit).
		HeartbeatTimeout: schemas.TracedTimeCapOf(timeout) + 30*time.Second,
		RetryPolicy:      retry,
	})
	var tr pipeline.TraceResult
	if err := workflow.ExecuteActivity(tctx, a.TraceBatch, in).Get(ctx, &tr); err != nil {
		return pipeline.BatchSummary{}, fmt.Errorf("trace: %w", err)
	}
	var s pipeline.BatchSummary
	bctx := workflow.WithActivityOptions(ctx, ioOptions(30*time.Minute, 2*time.Hour))
	if err := workflow.ExecuteActivity(bctx, a.BuildShard, in, tr).Get(ctx, &s); err != nil {
		return pipeline.BatchSummary{}, fmt.Errorf("build shard: %w", err)
	}
	return s, nil
}

// traceTimeout bounds one TraceBatch attempt: a batch of BatchSize items, or one repository with
// up to max_tests tests run three or four times (maxCollection says how), each for at most the
// wall-clock limit (plus start-up slack), after a checkout and a collection.
func traceTimeout(spec schemas.Spec, perRun time.Duration) time.Duration {
	runs := spec.BatchSize
	for _, src := range spec.Sources {
		switch src.Kind {
		case "repository", "examples":
			tests := src.MaxTests
			if tests == 0 {
				tests = 500
			}
			// Parsed and validated with the spec; a spec recorded before checkout_timeout existed
			// has none, and 0 here, as it always had.
			checkout := spec.Limits.CheckoutTimeout.Duration()
			// Each test: untraced, untraced with the repository's original runner options (when
			// the sandbox neutralised some), traced, and the time a traced run may take past the
			// limit (at most one more limit per test in all, execute's allowance, overshot once
			// by at most three); with reexecute a second traced run, and every function twice
			// too. Collection: its budget of three collection timeouts, and the last collection
			// begun within it (three more).
			perTest, functions := 4, maxFunctionRuns
			if src.ReexecuteOn() {
				perTest, functions = 5, 2*maxFunctionRuns
			}
			d := time.Duration(perTest*tests+3+functions)*(perRun+5*time.Second) + checkout + maxCollection + generationTime(spec, src, perRun)
			if d > time.Duration(runs)*(perRun+5*time.Second) {
				runs = int(d / (perRun + 5*time.Second))
			}
		case "files":
			// A group of files: no tests, its functions' inputs generated and traced.
			d := spec.Limits.CheckoutTimeout.Duration() + generationTime(spec, src, perRun)
			if d > time.Duration(runs)*(perRun+5*time.Second) {
				runs = int(d / (perRun + 5*time.Second))
			}
		}
	}
	return time.Duration(runs)*(perRun+5*time.Second) + time.Minute
}

// generationTime is what generating inputs adds to one repository's (or group of files')
// activity for source src (functions: all, or a files source; else 0): the finds and generations
// (schemas.InputsSpec.GenerationTime: a find per module and a generation per unit, each within
// its limit and slack, up to the repository's cap), then the traced runs of the items kept (up to
// GenerationItems, twice with reexecute), each for at most perRun and its slack.
func generationTime(spec schemas.Spec, src schemas.SourceSpec, perRun time.Duration) time.Duration {
	if !src.FunctionsAll() && src.Kind != "files" {
		return 0
	}
	items := spec.Inputs.GenerationItems()
	if src.ReexecuteOn() {
		items *= 2
	}
	return spec.Inputs.GenerationTime() + time.Duration(items)*(perRun+5*time.Second)
}

// maxCollection is the longest a repository's collection may take: collections (each up to
// three runs: a usage error's retry, the other runner) go on leaving out files that tampered for
// up to three collection timeouts of two minutes (execute's collectionBudget), and the last one
// begun within that budget may take three more.
const maxCollection = 12 * time.Minute

// maxFunctionRuns is how many function-level items one repository gives at most (traced in the
// repository's activity); it matches pipeline's cap.
const maxFunctionRuns = 200
