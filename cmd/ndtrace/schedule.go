package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ndtrace/ndtrace/activities"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/workflows"
)

// scheduleCommands are schedule's subcommands.
var scheduleCommands = []struct{ name, summary string }{
	{"create", "register a schedule that re-runs a spec periodically (--spec FILE --every DURATION --temporal HOST:PORT [--id ID])"},
	{"list", "list the schedules (--temporal HOST:PORT)"},
	{"delete", "delete a schedule (ID --temporal HOST:PORT)"},
}

// printScheduleUsage prints schedule's usage: its subcommands.
func printScheduleUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: ndtrace schedule <subcommand> [flags]\n\nCreates, lists or deletes Temporal Schedules that re-run a spec periodically.\n\nSubcommands:")
	for _, c := range scheduleCommands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'ndtrace schedule <subcommand> -h' for its flags.")
}

func runSchedule(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("schedule needs a subcommand: create, list or delete; see ndtrace schedule -h")
	}
	if isHelpArg(args[0]) || args[0] == "help" {
		if len(args) > 1 && args[0] == "help" {
			return runSchedule(ctx, []string{args[1], "-h"}, stdout, stderr)
		}
		return helpRequest{usage: printScheduleUsage}
	}
	switch args[0] {
	case "create":
		return scheduleCreate(ctx, args[1:], stdout, stderr)
	case "list":
		return scheduleList(ctx, args[1:], stdout, stderr)
	case "delete":
		return scheduleDelete(ctx, args[1:], stdout, stderr)
	}
	names := make([]string, len(scheduleCommands))
	for i, c := range scheduleCommands {
		names[i] = c.name
	}
	hint := ""
	if s := suggest(args[0], names); s != "" {
		hint = fmt.Sprintf(" (did you mean %s?)", s)
	}
	return usagef("unknown schedule subcommand %q%s; see ndtrace schedule -h", args[0], hint)
}

// scheduleID names the schedule of a spec unless --id is given.
func scheduleID(spec schemas.Spec) string {
	return "ndtrace-schedule-" + strings.TrimPrefix(workflows.WorkflowID(spec), "ndtrace-dataset-")
}

// createSchedule registers a Temporal Schedule that re-runs spec every interval. Overlap policy skip:
// a run still going when the next is due makes that one skip. Each run is a new dataset version that
// re-traces only sources whose content changed.
func createSchedule(ctx context.Context, c client.Client, spec schemas.Spec, id string, every time.Duration) (client.ScheduleHandle, error) {
	return c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:      id,
		Spec:    client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}},
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action: &client.ScheduleWorkflowAction{
			ID:        workflows.WorkflowID(spec),
			Workflow:  workflows.DatasetWorkflow,
			TaskQueue: activities.IOQueue,
			// No CreatedAt: every run is a version created when it starts.
			Args: []any{workflows.DatasetInput{Spec: spec, Dataset: spec.Output}},
		},
	})
}

func scheduleCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("schedule create", "--spec FILE --every DURATION --temporal HOST:PORT [--id ID]", stderr)
	var (
		specPath, out, id string
		every             time.Duration
		tf                temporalFlags
	)
	fs.StringVar(&specPath, "spec", "", "dataset spec (YAML) (required)")
	fs.StringVar(&out, "out", "", "dataset URL, overriding the spec's output")
	fs.DurationVar(&every, "every", 24*time.Hour, "interval between runs")
	fs.StringVar(&id, "id", "", "schedule ID (default derived from the spec)")
	noLocal := registerNoLocalCheck(fs)
	tf.register(fs, true)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if specPath == "" {
		return usagef("--spec is required")
	}
	if every < time.Minute {
		return usagef("--every must be at least 1m")
	}
	spec, err := loadSpec(specPath, out)
	if err != nil {
		return err
	}
	if spec.CreatedAt != "" {
		return usagef("a scheduled spec must not pin created_at: every run is a new version")
	}
	if err := preflight(ctx, spec, specPath, !*noLocal); err != nil {
		return err
	}
	if id == "" {
		id = scheduleID(spec)
	}
	c, err := tf.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := createSchedule(ctx, c, spec, id, every); err != nil {
		return fmt.Errorf("create schedule: %w", err)
	}
	fmt.Fprintln(stdout, id)
	return nil
}

func scheduleList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("schedule list", "--temporal HOST:PORT", stderr)
	var tf temporalFlags
	tf.register(fs, true)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c, err := tf.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	it, err := c.ScheduleClient().List(ctx, client.ScheduleListOptions{})
	if err != nil {
		return fmt.Errorf("list schedules: %w", err)
	}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return fmt.Errorf("list schedules: %w", err)
		}
		every := ""
		if e.Spec != nil && len(e.Spec.Intervals) > 0 {
			every = e.Spec.Intervals[0].Every.String()
		}
		next := ""
		if len(e.NextActionTimes) > 0 {
			next = e.NextActionTimes[0].UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(stdout, "%s\tevery %s\tnext %s\tpaused %v\n", e.ID, every, next, e.Paused)
	}
	return nil
}

func scheduleDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, id, err := dialWithID("schedule delete", "the schedule ID is required", args, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.ScheduleClient().GetHandle(ctx, id).Delete(ctx); err != nil {
		return fmt.Errorf("delete schedule %s: %w", id, err)
	}
	fmt.Fprintf(stdout, "deleted %s\n", id)
	return nil
}
