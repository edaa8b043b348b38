package rows

import (
	"strings"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/schemas"
)

// maxYieldReason bounds the reason a yield report keeps.
const maxYieldReason = 300

// Yield is the yield report of a traced repository item that gave rows (rej nil) or the reject.
func Yield(t execute.TracedItem, rows int, rej *schemas.Reject) schemas.RepoYield {
	y := schemas.RepoYield{Source: t.Item.Path, Key: t.Item.Key, Rows: int64(rows)}
	if rt := t.Repo; rt != nil {
		c := rt.Counts
		y.Runner, y.Collected, y.Run, y.Quarantined = rt.Runner, int64(rt.Tests), int64(rt.Run), int64(len(rt.Quarantined))
		y.PassedPlain, y.PassedTraced = c[schemas.CountTestOutcome("passed")], c[schemas.CountTracedOutcome("passed")]
		y.Neutralised, y.ChangedByOptions = c[schemas.CountTestsNeutralised], c[schemas.CountTestsChangedByOption]
		y.ReadOnly, y.SandboxErrors = c[schemas.CountTestsReadOnly], c[schemas.CountTestsSandboxError]
		y.Nondeterministic, y.NondeterministicValues = c[schemas.CountTestsNondeterministic], c[schemas.CountValuesNondeterministic]
		y.TracedTimeout, y.TracedPastLimit = c[schemas.CountTestsTracedTimeout], c[schemas.CountTestsTracedPastLimit]
		y.SandboxRefused = c[schemas.CountTestsSandboxRefused]
		for k, n := range c {
			switch {
			case strings.HasPrefix(string(k), string(schemas.CountCollectionExcluded(""))):
				y.ExcludedFiles += n
			case strings.HasPrefix(string(k), string(schemas.CountRunnerFallback(""))):
				y.RunnerFallbacks += n
			}
		}
		if rt.Gen != nil {
			// A copy: the report must not share the trace's maps.
			y.Generation = &schemas.GenYield{}
			y.Generation.Add(rt.Gen)
		}
	}
	if rej != nil {
		y.Rejected, y.Reason = stageOf(*rej, t.Stage), cutReason(rej.Reason)
	} else if rows == 0 && noTestsToRun(t) {
		// Not a reject (its function items are its output), but a repository without rows of
		// its own in the repositories' table.
		y.Rejected, y.Reason = schemas.YieldNoTrajectory, "no tests to run: function items only"
	}
	return y
}

// EarlyYield is the yield report of a repository rejected before it was traced: at planning (it
// did not resolve: schemas.YieldUnresolved) or in a batch that failed (schemas.YieldBatchFailed).
func EarlyYield(source, key string, stage schemas.YieldStage, reason string) schemas.RepoYield {
	return schemas.RepoYield{Source: source, Key: key, Rejected: stage, Reason: cutReason(reason)}
}

// stageOf is the stage a repository's reject stopped at: its class says it, but for a repository
// that could not be used, whose stage traceRepo recorded (stage; YieldOther when none was).
func stageOf(r schemas.Reject, stage schemas.YieldStage) schemas.YieldStage {
	switch r.Class {
	case schemas.RejectPoison:
		return schemas.YieldPoison
	case schemas.RejectBatchFailed:
		return schemas.YieldBatchFailed
	case schemas.RejectNoTrajectory:
		return schemas.YieldNoTrajectory
	case schemas.RejectEnvironment:
		return schemas.YieldEnvironment
	case schemas.RejectRepository:
		if stage != "" {
			return stage
		}
	}
	return schemas.YieldOther
}

// cutReason keeps the first maxYieldReason characters of a reason.
func cutReason(s string) string { return cutText(s, maxYieldReason) }

// cutText cuts s to its first n characters, marking the cut with "...".
func cutText(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "..."
}
