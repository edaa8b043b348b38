package execute

import (
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

func TestTracedLimits(t *testing.T) {
	s := time.Second
	lim := sandbox.Limits{WallTime: 10 * s, CPUTime: 10 * s, TraceEvents: 7}
	run := func(outcome string, wall time.Duration) *sandbox.TestResult {
		return &sandbox.TestResult{Outcome: outcome, Result: &sandbox.Result{Wall: wall}}
	}
	for _, tc := range []struct {
		name      string
		plain     *sandbox.TestResult
		wall, cpu time.Duration
	}{
		{"passed quickly", run(sandbox.OutcomePassed, 100*time.Millisecond), 10 * s, 10 * s},
		{"passed slowly", run(sandbox.OutcomePassed, 500*time.Millisecond), 20 * s, 20 * s},
		{"failed slowly", run(sandbox.OutcomeFailed, 500*time.Millisecond), 20 * s, 20 * s},
		{"near the limit", run(sandbox.OutcomePassed, 9*s), 40 * s, 40 * s},
		{"timed out", run("", 10*s), 10 * s, 10 * s},
		{"no result", nil, 10 * s, 10 * s},
	} {
		got := tracedLimits(lim, tc.plain)
		if got.WallTime != tc.wall || got.CPUTime != tc.cpu || got.TraceEvents != 7 {
			t.Errorf("%s: %+v, want wall %v, CPU %v and the other limits as they were", tc.name, got, tc.wall, tc.cpu)
		}
	}
}

func TestCountTiming(t *testing.T) {
	s := time.Second
	lim := sandbox.Limits{WallTime: 10 * s}
	run := func(outcome string, status schemas.Status, wall time.Duration) *sandbox.TestResult {
		return &sandbox.TestResult{Outcome: outcome, Result: &sandbox.Result{Status: status, Wall: wall}}
	}
	passed := run(sandbox.OutcomePassed, schemas.StatusOK, s)
	for _, tc := range []struct {
		name      string
		plain, tr *sandbox.TestResult
		want      schemas.CountKey
	}{
		{"within the limit", passed, run(sandbox.OutcomePassed, schemas.StatusOK, 9*s), ""},
		{"past the limit", passed, run(sandbox.OutcomePassed, schemas.StatusOK, 11*s), schemas.CountTestsTracedPastLimit},
		{"timed out traced", passed, run("", schemas.StatusTimeout, 40*s), schemas.CountTestsTracedTimeout},
		{"timed out both", run("", schemas.StatusTimeout, 10*s), run("", schemas.StatusTimeout, 10*s), ""},
		{"event limit", passed, run("", schemas.StatusEventLimit, 12*s), ""},
	} {
		c := schemas.Counts{}
		countTiming(c, lim, tc.plain, tc.tr)
		if len(c) > 1 || (tc.want == "" && len(c) != 0) || (tc.want != "" && c[tc.want] != 1) {
			t.Errorf("%s: counts %v, want %q", tc.name, c, tc.want)
		}
	}
}

// TestTracedTimeAllowance: the traced runs of a repository's tests together take at most one
// limit per test past the limit; past that, budgets are cut back to the limit, and say so.
func TestTracedTimeAllowance(t *testing.T) {
	s := time.Second
	lim := sandbox.Limits{WallTime: 10 * s, CPUTime: 10 * s}
	slow := &sandbox.TestResult{Outcome: sandbox.OutcomePassed, Result: &sandbox.Result{Wall: 9 * s}}
	quick := &sandbox.TestResult{Outcome: sandbox.OutcomePassed, Result: &sandbox.Result{Wall: s / 10}}
	b := newTracedTime(lim, 4) // 40 s past the limit in all
	if l, cut := b.limits(slow); l.WallTime != 40*s || cut {
		t.Fatalf("first: %v %v, want 40s uncut", l.WallTime, cut)
	}
	b.spend(45 * s) // 35 s past: 5 s left
	if l, cut := b.limits(slow); l.WallTime != 15*s || l.CPUTime != 15*s || !cut {
		t.Fatalf("second: %+v %v, want 15s, cut", l, cut)
	}
	if l, cut := b.limits(quick); l.WallTime != 10*s || cut {
		t.Fatalf("a quick test: %v %v, want the limit, uncut", l.WallTime, cut)
	}
	b.spend(40 * s) // overspent (the second traced run of a test)
	if l, cut := b.limits(slow); l.WallTime != 10*s || !cut {
		t.Fatalf("spent: %v %v, want the limit, cut", l.WallTime, cut)
	}
	b.spend(5 * s) // within the limit: nothing spent
	if b.left != -25*s {
		t.Errorf("left %v, want -25s", b.left)
	}
}
