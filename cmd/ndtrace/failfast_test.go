package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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

// TestRunUnresolvableHost runs ndtrace run over a crawl list whose repository's host does not
// resolve, beside a python source: the repository is one reject of class repository naming the
// host, and the run commits its other source's rows, in minutes at most (it retried the scan for
// hours before). No DNS query leaves the machine: git on the PATH is a wrapper that answers for
// the gone host with git's own error text.
func TestRunUnresolvableHost(t *testing.T) {
	if testing.Short() {
		t.Skip("whole ndtrace run: long integration test; run without -short")
	}
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	bin := t.TempDir()
	script := "#!/bin/sh\ncase \" $* \" in\n*\" ls-remote \"*gone.invalid*)\n" +
		"\techo \"fatal: unable to access 'https://gone.invalid/owner/repo.git/': Could not resolve host: gone.invalid\" >&2\n\texit 128;;\nesac\n" +
		"exec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	code := writeFile(t, "f.py", "def f(x):\n    return x + 1\n")
	list := writeFile(t, "repos.txt", "https://gone.invalid/owner/repo.git\n")
	spec := writeSpec(t, dir, fmt.Sprintf("output: %s\ncreated_at: 2026-11-28T00:00:00Z\nsources:\n  - kind: python\n    path: %s\n    calls: ['f(1)']\n  - kind: repository\n    list: %s\n", out, code, list))
	start := time.Now()
	runSpec(t, spec)
	if took := time.Since(start); took > 5*time.Minute {
		t.Errorf("the run took %s", took)
	}
	_, m := openHead(t, out)
	if m.Totals.Rows < 1 {
		t.Errorf("%d rows, want the python source's", m.Totals.Rows)
	}
	if rejects := readRejects(t, out); !strings.Contains(rejects, "ls-remote failed: could not resolve host gone.invalid (check the URL's host name)") {
		t.Errorf("no reject of the gone host:\n%s", rejects)
	}
}
