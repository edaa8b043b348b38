package rows

import (
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestRepositoryStage: a repository that could not be used is rejected with the class and yield
// stage its tracing recorded (TracedItem.Stage), never read back from the reason's text.
func TestRepositoryStage(t *testing.T) {
	for _, tc := range []struct {
		stage     schemas.YieldStage
		reason    string
		wantClass schemas.RejectClass
		want      schemas.YieldStage
	}{
		{schemas.YieldCheckout, "checkout: symlink escapes checkout", schemas.RejectRepository, schemas.YieldCheckout},
		{schemas.YieldLayout, "import layout: bad toml", schemas.RejectRepository, schemas.YieldLayout},
		{schemas.YieldEnvironment, "environment: pip: ERROR", schemas.RejectEnvironment, schemas.YieldEnvironment},
		{schemas.YieldMounts, "venv: not a virtualenv", schemas.RejectRepository, schemas.YieldMounts},
		{schemas.YieldMissing, "missing module hypothesis", schemas.RejectRepository, schemas.YieldMissing},
		{schemas.YieldCollection, "test collection failed: exception: x", schemas.RejectRepository, schemas.YieldCollection},
		{schemas.YieldNoTests, "no tests found", schemas.RejectRepository, schemas.YieldNoTests},
		// A reason that reads like a stage names none: only Stage does.
		{"", "checkout: a stored trace from before stages", schemas.RejectRepository, schemas.YieldOther},
	} {
		tr := execute.TracedItem{Item: crawl.Item{Key: "r", Path: "https://example.invalid/r", Repo: &crawl.RepoTarget{}},
			Status: schemas.StatusInvalid, Detail: tc.reason, Stage: tc.stage}
		got, rej, err := Of(tr, schemas.Spec{}.WithDefaults(), debugger.Policy{}, Options{}, schemas.Counts{})
		if got != nil || rej == nil || err != nil {
			t.Fatalf("%s: rows %v, reject %v, error %v", tc.stage, got, rej, err)
		}
		if rej.Class != tc.wantClass || rej.Reason != tc.reason {
			t.Errorf("%s: reject %+v, want class %s", tc.stage, *rej, tc.wantClass)
		}
		if y := Yield(tr, 0, rej); y.Rejected != tc.want || y.Reason != tc.reason {
			t.Errorf("%s: yield %+v, want stage %s", tc.stage, y, tc.want)
		}
	}
	for _, tc := range []struct {
		class schemas.RejectClass
		want  schemas.YieldStage
	}{
		{schemas.RejectNoTrajectory, schemas.YieldNoTrajectory},
		{schemas.RejectPoison, schemas.YieldPoison},
		{schemas.RejectBatchFailed, schemas.YieldBatchFailed},
		{schemas.RejectEnvironment, schemas.YieldEnvironment},
		{schemas.StatusReject(schemas.StatusTimeout), schemas.YieldOther},
	} {
		if got := stageOf(schemas.Reject{Class: tc.class}, schemas.YieldCheckout); got != tc.want {
			t.Errorf("stageOf(%s) = %s, want %s", tc.class, got, tc.want)
		}
	}
}

// TestYieldTimingAndRefusals (issue 29): the tests that timed out traced within their budget, ran
// past limits.timeout traced, or failed on a refusal of the sandbox are in the yield report.
func TestYieldTimingAndRefusals(t *testing.T) {
	tr := execute.TracedItem{Item: crawl.Item{Key: "r", Path: "https://example.invalid/r", Repo: &crawl.RepoTarget{}},
		Repo: &execute.RepoTrace{Tests: 5, Run: 5, Quarantined: []string{"t::hangs"}, Counts: schemas.Counts{
			schemas.CountTestsTracedTimeout: 1, schemas.CountTestsTracedPastLimit: 2, schemas.CountTestsSandboxRefused: 3}}}
	y := Yield(tr, 4, nil)
	if y.TracedTimeout != 1 || y.TracedPastLimit != 2 || y.SandboxRefused != 3 || y.Quarantined != 1 {
		t.Errorf("yield %+v", y)
	}
}

// TestYieldCollection (issue 29): the files left out of collection (by reason) and a runner
// fallback are in the yield report.
func TestYieldCollection(t *testing.T) {
	tr := execute.TracedItem{Item: crawl.Item{Key: "r", Path: "https://example.invalid/r", Repo: &crawl.RepoTarget{}},
		Repo: &execute.RepoTrace{Tests: 5, Run: 5, Runner: "unittest", Counts: schemas.Counts{
			schemas.CountCollectionExcluded("tampered"): 2, schemas.CountCollectionExcluded("other"): 1,
			schemas.CountRunnerFallback("unittest"): 1}}}
	y := Yield(tr, 4, nil)
	if y.ExcludedFiles != 3 || y.RunnerFallbacks != 1 {
		t.Errorf("yield %+v", y)
	}
}

// TestYieldGeneration (issue 30): what generating inputs gave is in the yield report, a copy
// that does not share the trace's maps; a repository without generation has none.
func TestYieldGeneration(t *testing.T) {
	gen := &schemas.GenYield{Modules: 2, Found: 10, Units: 8, WithInput: 6, Inputs: 15, Attempts: 900, Traced: 14,
		Coverage: [schemas.CoverageBuckets]int64{9: 4, 5: 2}, BySource: map[string]int64{schemas.InputSourceTyped: 10, schemas.InputSourceFuzzed: 5},
		Losses: map[string]int64{"async": 1, "needs_io": 1, "no_candidates": 2}}
	tr := execute.TracedItem{Item: crawl.Item{Key: "r", Path: "files:corpus", Repo: &crawl.RepoTarget{FunctionsAll: true, NoTests: true}},
		Repo: &execute.RepoTrace{Gen: gen}}
	y := Yield(tr, 0, nil)
	if y.Generation == nil || y.Generation == gen || y.Generation.Found != 10 || y.Generation.Coverage[9] != 4 ||
		y.Generation.BySource[schemas.InputSourceTyped] != 10 || y.Generation.Losses["no_candidates"] != 2 {
		t.Fatalf("generation %+v", y.Generation)
	}
	y.Generation.Losses["async"] = 99
	if gen.Losses["async"] != 1 {
		t.Error("the report shares the trace's losses")
	}
	tr.Repo.Gen = nil
	if y := Yield(tr, 0, nil); y.Generation != nil {
		t.Errorf("no generation, report has %+v", y.Generation)
	}
}
