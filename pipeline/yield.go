package pipeline

import (
	"strings"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/schemas"
)

// Why a repository gave no repository-level row (schemas.RepoYield.Rejected): the stage it stopped
// at.
const (
	YieldUnresolved   = "unresolved"    // it did not resolve (planning)
	YieldCheckout     = "checkout"      // its checkout was refused
	YieldLayout       = "import_layout" // its package declarations could not be read
	YieldEnvironment  = "environment"   // its environment could not be built
	YieldMounts       = "mounts"        // a venv or python_path the source names is unusable
	YieldMissing      = "missing_module"
	YieldCollection   = "collection" // its tests did not collect
	YieldNoTests      = "no_tests"
	YieldNoTrajectory = "no_trajectory" // tests ran, none gave a trajectory
	YieldPoison       = "poison"
	YieldBatchFailed  = "batch_failed"
	YieldOther        = "other"
)

// maxYieldReason bounds the reason a yield report keeps.
const maxYieldReason = 300

// repoYield is the yield report of a traced repository item that gave rows (rej nil) or the reject.
func repoYield(t TracedItem, rows int, rej *schemas.Reject) schemas.RepoYield {
	y := schemas.RepoYield{Source: t.Item.Path, Key: t.Item.Key, Rows: int64(rows)}
	if rt := t.Repo; rt != nil {
		c := rt.Counts
		y.Runner, y.Collected, y.Run, y.Quarantined = rt.Runner, int64(rt.Tests), int64(rt.Run), int64(len(rt.Quarantined))
		y.PassedPlain, y.PassedTraced = c["tests:passed"], c["traced:passed"]
		y.Neutralised, y.ChangedByOptions = c["tests:runner_options_neutralised"], c["tests:changed_by_runner_options"]
		y.ReadOnly, y.SandboxErrors = c["tests:checkout_read_only"], c["tests:sandbox_error"]
	}
	if rej != nil {
		y.Rejected, y.Reason = yieldClass(*rej), cutReason(rej.Reason)
	}
	return y
}

// earlyYield is the yield report of a repository rejected before it was traced: at planning (it
// did not resolve: class YieldUnresolved) or in a batch that failed (YieldBatchFailed).
func earlyYield(source, key, class, reason string) schemas.RepoYield {
	return schemas.RepoYield{Source: source, Key: key, Rejected: class, Reason: cutReason(reason)}
}

// yieldClass names the stage a repository's reject stopped at, from its class and reason (the
// reasons traceRepo gives).
func yieldClass(r schemas.Reject) string {
	switch r.Class {
	case schemas.RejectPoison:
		return YieldPoison
	case schemas.RejectBatchFailed:
		return YieldBatchFailed
	case schemas.RejectNoTrajectory:
		return YieldNoTrajectory
	case schemas.RejectEnvironment:
		return YieldEnvironment
	case schemas.RejectRepository:
	default:
		return YieldOther
	}
	for _, p := range []struct{ prefix, class string }{
		{"checkout:", YieldCheckout}, {"import layout:", YieldLayout},
		{"venv:", YieldMounts}, {"python_path:", YieldMounts}, {"sandbox with", YieldMounts},
		{"missing module", YieldMissing}, {"test collection failed", YieldCollection},
		{"no tests collected", YieldCollection}, {"no tests found", YieldNoTests},
	} {
		if strings.HasPrefix(r.Reason, p.prefix) {
			return p.class
		}
	}
	return YieldOther
}

// cutReason keeps the first maxYieldReason characters of a reason.
func cutReason(s string) string {
	if utf8.RuneCountInString(s) <= maxYieldReason {
		return s
	}
	r := []rune(s)
	return string(r[:maxYieldReason]) + "..."
}
