package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/ndtrace/ndtrace/activities"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
	"github.com/ndtrace/ndtrace/workflows"
)

// TestRunFailsFastOnUnusableStore runs the dataset workflow with the real activities over a store
// that opens but cannot be written (a file stands where its work folder goes: a real folder, and a
// failure root cannot write past either): the scan fails on its first attempt, never retried, and
// the failure reaches the top level of ndtrace run as one line that says what is wrong, not the
// chain of workflow, activity and store errors around it.
func TestRunFailsFastOnUnusableStore(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "work"), []byte("in the way\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.DatasetWorkflow)
	env.RegisterWorkflow(workflows.BatchWorkflow)
	env.RegisterActivity(&activities.Activities{Tokenizers: tokenize.Get})
	var attempts atomic.Int32
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "ScanPage" {
			attempts.Add(1)
		}
	})
	spec := schemas.Spec{Sources: []schemas.SourceSpec{{Kind: "examples"}}}.WithDefaults()
	spec.Output = dir
	start := time.Now()
	env.ExecuteWorkflow(workflows.DatasetWorkflow, workflows.DatasetInput{Spec: spec, Dataset: dir, CreatedAt: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)})
	if took := time.Since(start); took > preflightBound {
		t.Errorf("failed after %s", took)
	}
	err := env.GetWorkflowError()
	if err == nil {
		t.Fatal("the run succeeded")
	}
	if n := attempts.Load(); n != 1 {
		t.Errorf("ScanPage ran %d times, want once (not retried)", n)
	}
	got := explainRun(dir, err)
	var he *hintError
	if !errors.As(got, &he) {
		t.Fatalf("explainRun gave %v, want a one-line hint", got)
	}
	msg := got.Error()
	want := "dataset " + dir + ": the store cannot be used: a file stands where a folder is expected"
	if !strings.HasPrefix(msg, want) || strings.Contains(msg, "\n") || strings.Contains(msg, "activity error") || strings.Count(msg, "not a directory") != 1 {
		t.Errorf("top-level error %q (%d bytes), want one line starting %q that gives the cause once", msg, len(msg), want)
	}
}
