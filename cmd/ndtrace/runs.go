package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/ndtrace/ndtrace/internal/progress"
	"github.com/ndtrace/ndtrace/internal/termsafe"
	"github.com/ndtrace/ndtrace/workflows"
)

func init() {
	commands["runs"] = command{"list the datasets' runs (running, committed, failed, cancelled) or one dataset's batch workflows", runRuns}
}

// queryTimeout bounds the progress query of a running dataset workflow: a worker that holds it
// answers in milliseconds; with none the server would hold the query for 10 s and fail, so
// status falls back to the memo instead.
const queryTimeout = 1500 * time.Millisecond

// Visibility queries (Temporal's list filter, as the Web UI takes them). Batch workflows are
// children of their dataset workflow, with IDs under its ID ("<dataset ID>/<version>/<batch>").
const (
	// datasetsQuery lists the dataset workflows' executions, not the runs a dataset continued
	// as new from (one line a dataset run).
	datasetsQuery = "WorkflowType = 'DatasetWorkflow' AND ExecutionStatus != 'ContinuedAsNew'"
	// topLevelQuery hides child workflows (the batches): the Web UI's system view "Parent".
	topLevelQuery = "`ParentWorkflowId` is null"
)

// batchesQuery lists the batch workflows of the dataset workflow id.
func batchesQuery(id string) string {
	return fmt.Sprintf("WorkflowType = 'BatchWorkflow' AND ParentWorkflowId = %s", quoteQuery(id))
}

// quoteQuery quotes a value for a visibility query.
func quoteQuery(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// statusWord is how ndtrace names a workflow execution status: a completed dataset workflow has
// committed its version.
func statusWord(s enumspb.WorkflowExecutionStatus, dataset bool) string {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		if dataset {
			return "committed"
		}
		return "completed"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "cancelled"
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out"
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued as new"
	}
	return strings.ToLower(strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

// statusFilter maps a --status value to its visibility filter.
var statusFilter = map[string]string{
	"running":    "ExecutionStatus = 'Running'",
	"committed":  "ExecutionStatus = 'Completed'",
	"failed":     "ExecutionStatus = 'Failed'",
	"cancelled":  "ExecutionStatus = 'Canceled'",
	"terminated": "ExecutionStatus = 'Terminated'",
	"timed-out":  "ExecutionStatus = 'TimedOut'",
}

// runRuns lists the dataset workflows' runs from Temporal's visibility store, newest first, or with
// --batches ID the batch workflows of one dataset.
func runRuns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("runs", "--temporal HOST:PORT [--status S] [--limit N] [--batches ID]", stderr)
	var (
		tf      temporalFlags
		status  string
		batches string
		limit   int
	)
	tf.register(fs, true)
	fs.StringVar(&status, "status", "", "only runs with this status: running, committed, failed, cancelled, terminated or timed-out")
	fs.IntVar(&limit, "limit", 50, "list at most this many (newest first); 0 for all")
	fs.StringVar(&batches, "batches", "", "list the batch workflows of the dataset workflow with this ID instead")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	query := datasetsQuery
	if batches != "" {
		query = batchesQuery(batches)
	}
	if status != "" {
		f, ok := statusFilter[status]
		if !ok {
			return usagef("--status %q: want running, committed, failed, cancelled, terminated or timed-out", status)
		}
		query += " AND " + f
	}
	if limit < 0 {
		return usagef("--limit must not be negative")
	}
	c, err := tf.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	execs, err := listWorkflows(ctx, c, tf.namespace, query, limit)
	if err != nil {
		return err
	}
	if batches != "" {
		return printBatches(stdout, batches, execs)
	}
	return printRuns(stdout, execs)
}

// listWorkflows returns the executions query matches, newest first, at most limit (0: all).
func listWorkflows(ctx context.Context, c client.Client, namespace, query string, limit int) ([]*workflowpb.WorkflowExecutionInfo, error) {
	var out []*workflowpb.WorkflowExecutionInfo
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: query, NextPageToken: token, PageSize: 1000})
		if err != nil {
			return nil, fmt.Errorf("list workflows (%s): %w", query, err)
		}
		out = append(out, resp.GetExecutions()...)
		if limit > 0 && len(out) >= limit {
			return out[:limit], nil
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// printRuns prints one line a dataset run, with the progress its memo holds.
func printRuns(w io.Writer, execs []*workflowpb.WorkflowExecutionInfo) error {
	if len(execs) == 0 {
		fmt.Fprintln(w, "no dataset runs")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW\tSTATUS\tSTARTED\tDURATION\tPHASE\tITEMS\tREJECTS\tBATCHES FAILED")
	for _, e := range execs {
		p, _, _ := memoProgress(e.GetMemo())
		phase, items := "-", "-"
		if p.Phase != "" {
			phase = termsafe.String(p.Phase)
			items = fmt.Sprintf("%d/%d", p.ItemsDone, p.Items)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", termsafe.String(e.GetExecution().GetWorkflowId()),
			statusWord(e.GetStatus(), true), e.GetStartTime().AsTime().UTC().Format(time.RFC3339),
			duration(e), phase, items, p.Rejected, p.BatchesFailed)
	}
	return tw.Flush()
}

// printBatches prints one line a batch workflow of the dataset id.
func printBatches(w io.Writer, id string, execs []*workflowpb.WorkflowExecutionInfo) error {
	if len(execs) == 0 {
		fmt.Fprintf(w, "no batch workflows of %s\n", termsafe.String(id))
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW\tSTATUS\tSTARTED\tDURATION")
	for _, e := range execs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", termsafe.String(e.GetExecution().GetWorkflowId()), statusWord(e.GetStatus(), false),
			e.GetStartTime().AsTime().UTC().Format(time.RFC3339), duration(e))
	}
	return tw.Flush()
}

// duration is how long an execution ran (so far, while it runs), to the second.
func duration(e *workflowpb.WorkflowExecutionInfo) string {
	end := time.Now()
	if e.GetCloseTime() != nil && e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		end = e.GetCloseTime().AsTime()
	}
	return end.Sub(e.GetStartTime().AsTime()).Round(time.Second).String()
}

// statusFlags are ndtrace status's command line.
type statusFlags struct {
	tf    temporalFlags
	watch bool
	id    string
}

// parseStatus parses "status ID --temporal HOST:PORT [--watch]".
func parseStatus(args []string, stderr io.Writer) (statusFlags, error) {
	var sf statusFlags
	fs := newFlagSet("status", "ID --temporal HOST:PORT [--watch]", stderr)
	sf.tf.register(fs, true)
	fs.BoolVar(&sf.watch, "watch", false, "follow the run until it ends: the live progress block on a terminal, progress lines otherwise; exits non-zero unless it commits")
	id, err := parseWithID(fs, args, "the workflow ID is required (ndtrace submit and ndtrace runs print it)")
	sf.id = id
	return sf, err
}

// printStatus prints a dataset workflow's status: the result of a committed one; the progress of a
// running one, queried from its worker or, when none answers within queryTimeout, read from its
// memo; how a closed one ended, with the progress its memo kept (no rate, no ETA).
func printStatus(ctx context.Context, c client.Client, id string, stdout io.Writer) error {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return fmt.Errorf("workflow %s: %w", id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	st := info.GetStatus()
	fmt.Fprintf(stdout, "workflow %s: %s\n", termsafe.String(id), statusWord(st, true))
	mp, hasMemo, merr := memoProgress(info.GetMemo())
	if merr != nil {
		return merr
	}
	switch st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		var res workflows.DatasetResult
		if err := c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
			return err
		}
		printSummary(stdout, res.Progress.Manifest, res)
		return nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		p, err := queryProgressWithin(ctx, c, id, queryTimeout)
		if err != nil {
			if !hasMemo {
				fmt.Fprintln(stdout, "no progress yet: no worker answered, and none has recorded any (a workflow waits for a worker: ndtrace worker, or ndtrace server --worker)")
				return nil
			}
			// The memo's counts are as of its last update (every 25 batches and each stage): no
			// rate or ETA from them.
			fmt.Fprintln(stdout, "(from the workflow's memo: no worker answered)")
			fmt.Fprintln(stdout, staticLine(mp, mp.Phase, time.Now()))
			printFailures(stdout, mp)
			return nil
		}
		fmt.Fprintln(stdout, progressLine(progress.NewMeter(nil, 0).Update(snapshotOf(p))))
		printFailures(stdout, p)
		return nil
	}
	// Closed without a commit: cancelled, failed, terminated, timed out.
	if st == enumspb.WORKFLOW_EXECUTION_STATUS_FAILED || st == enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT {
		if err := c.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
			fmt.Fprintf(stdout, "error: %s\n", termsafe.String(oneLine(err.Error())))
		}
	}
	if st == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED || st == enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED {
		fmt.Fprintln(stdout, "nothing was committed")
	}
	if hasMemo {
		fmt.Fprintln(stdout, staticLine(mp, statusWord(st, true)+" in "+mp.Phase, info.GetCloseTime().AsTime()))
		printFailures(stdout, mp)
	}
	return nil
}

// staticLine is the progress line of progress that is not moving, or not known to: a run's last
// progress when it ended without a commit, or the memo's while no worker answers. It shows the
// counts under the phase label and the time from the start to end, with no rate or ETA.
func staticLine(p workflows.Progress, label string, end time.Time) string {
	st := progress.NewMeter(nil, 0).Update(snapshotOf(p))
	st.Phase = label
	st.Rate, st.ETA, st.ETAKnown = 0, 0, false
	st.Elapsed = 0
	if !p.Started.IsZero() && end.After(p.Started) {
		st.Elapsed = end.Sub(p.Started)
	}
	return progressLine(st)
}

// queryProgressWithin is queryProgress with a deadline.
func queryProgressWithin(ctx context.Context, c client.Client, id string, d time.Duration) (workflows.Progress, error) {
	qctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return queryProgress(qctx, c, id)
}

// watchStatus follows the dataset workflow id until it ends (ndtrace status --watch): the live
// block on a terminal, progress lines otherwise; the summary of a committed run on stdout. A run
// that ends without a commit is an error.
func watchStatus(ctx context.Context, c client.Client, id string, stdout, stderr io.Writer) error {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return fmt.Errorf("workflow %s: %w", id, err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		// Nothing to follow: say how it ended.
		if err := printStatus(ctx, c, id, stdout); err != nil {
			return err
		}
		if st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			return fmt.Errorf("workflow %s %s", id, statusWord(st, true))
		}
		return nil
	}
	logs := &logSwitch{out: stderr}
	if canRedraw(stderr) {
		if err := setLogs("text", stderr, logs); err != nil {
			return err
		}
	}
	view := newProgressView(stderr, false, progress.DefaultEvery, logs)
	// Until a worker answers the query, the progress the memo kept.
	if p, ok, _ := memoProgress(desc.GetWorkflowExecutionInfo().GetMemo()); ok {
		view.update(p)
	}
	res, err := watch(ctx, c, c.GetWorkflow(ctx, id, ""), view)
	if err != nil {
		if d, derr := c.DescribeWorkflowExecution(context.WithoutCancel(ctx), id, ""); derr == nil {
			if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				return fmt.Errorf("workflow %s %s: %w", id, statusWord(st, true), err)
			}
		}
		return fmt.Errorf("workflow %s: %w", id, err)
	}
	printSummary(stdout, res.Progress.Manifest, res)
	return nil
}

// cancelDataset cancels the running dataset workflow id; one that has ended is an error that says how.
func cancelDataset(ctx context.Context, c client.Client, id string, stdout io.Writer) error {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return fmt.Errorf("workflow %s: %w", id, err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return fmt.Errorf("workflow %s has already ended (%s): nothing to cancel", id, statusWord(st, true))
	}
	if err := c.CancelWorkflow(ctx, id, ""); err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			// It ended between the two calls.
			return fmt.Errorf("workflow %s has already ended: nothing to cancel", id)
		}
		return fmt.Errorf("cancel %s: %w", id, err)
	}
	fmt.Fprintf(stdout, "workflow %s: cancel requested (its batches in flight are cancelled with it; nothing is committed)\n", termsafe.String(id))
	return nil
}
