package sandbox_test

import (
	"testing"

	"github.com/ndtrace/ndtrace/sandbox"
)

func TestSandboxRefused(t *testing.T) {
	run := func(outcome, msg string) *sandbox.TestResult {
		return &sandbox.TestResult{Outcome: outcome, Result: &sandbox.Result{ExcType: "PermissionError", ExcMessage: msg}}
	}
	pyc := "ndtrace: bytecode (.pyc) is loaded only from read-only directories"
	for _, tc := range []struct {
		name string
		r    *sandbox.TestResult
		want bool
	}{
		{"refused .pyc", run(sandbox.OutcomeFailed, pyc), true},
		{"error at import", run(sandbox.OutcomeError, "No module named 'x' (ndtrace: this module is not available in the sandbox)"), true},
		{"the code's own failure", run(sandbox.OutcomeFailed, "assert 1 == 2"), false},
		{"passed", run(sandbox.OutcomePassed, pyc), false},
		{"did not finish", run("", pyc), false},
		{"nil", nil, false},
		{"no result", &sandbox.TestResult{Outcome: sandbox.OutcomeFailed}, false},
	} {
		if got := tc.r.SandboxRefused(); got != tc.want {
			t.Errorf("%s: SandboxRefused() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
