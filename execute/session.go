package execute

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/replay"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// Replay on bdb of a repository's rows (docs/debugger.md, "Replay on bdb"): they need the
// repository's checkout and environment, so they are replayed while its re-execution keeps them
// in place (Tracer.TraceRepo, a RepoSession).

// RowReplayer replays one row's actions on Python's own debugger (bdb) in the sandbox, given the
// row's input item and the run's spec (*Tracer and *RepoSession implement it).
type RowReplayer interface {
	Replay(ctx context.Context, it crawl.Item, row schemas.Row, spec schemas.Spec) (schemas.ReplayOutcome, error)
}

// RepoReplayer re-executes a repository-level item as ItemTracer.Trace does and, before its
// checkout and environment are removed, hands within its trace and a RowReplayer for its rows
// (*Tracer). within's error is returned as is.
type RepoReplayer interface {
	TraceRepo(ctx context.Context, it crawl.Item, spec schemas.Spec, alive func(), within func(TracedItem, RowReplayer) error) (TracedItem, error)
}

// TraceRepo traces the repository-level item it as Trace does and, when the repository could be
// traced, calls within with the trace and a RepoSession that replays its rows in the checkout and
// environment the tests ran with (within is not called when the repository gave no trace).
func (trc *Tracer) TraceRepo(ctx context.Context, it crawl.Item, spec schemas.Spec, alive func(), within func(TracedItem, RowReplayer) error) (TracedItem, error) {
	if it.Kind() != crawl.RepositoryTests {
		return TracedItem{}, errors.New("trace repository: not a repository-level item")
	}
	if trc.Sandboxes == nil {
		return TracedItem{}, errors.New("this worker has no sandboxes")
	}
	lim, err := LimitsOf(spec)
	if err != nil {
		return TracedItem{}, BadInput("%v", err)
	}
	co, err := checkoutLimitsOf(spec)
	if err != nil {
		return TracedItem{}, BadInput("%v", err)
	}
	return trc.forSpec(spec).traceRepo(ctx, it, lim, co, alive, func(t TracedItem, s *RepoSession) error { return within(t, s) })
}

// RepoSession replays the rows of one traced repository on bdb while its checkout, environment
// and the tests' sandbox are in place (made by traceRepo for TraceRepo; a RowReplayer).
type RepoSession struct {
	traced     TracedItem // the repository's trace (file names relative to dir)
	dir        string     // the checkout
	hidden     workerPaths
	tests      *sandbox.Sandbox
	funcConfig sandbox.Config // the sandbox configuration of its functions (functionConfig)
	funcs      *sandbox.Sandbox
	imports    []string
	runner     string
	options    sandbox.RunnerOptions
}

func (s *RepoSession) close() {
	if s.funcs != nil {
		s.funcs.Close()
	}
}

// Replay replays a forward row of the session's repository: a repository-level row from its
// entry call inside its test (replayRepoRow), a function-level row of a function found in its
// tests (it, the function item found again) as Tracer.Replay does, with the checkout importable.
func (s *RepoSession) Replay(ctx context.Context, it crawl.Item, row schemas.Row, spec schemas.Spec) (schemas.ReplayOutcome, error) {
	if row.Direction != string(debugger.Forward) {
		return replay.NotInverse, nil
	}
	if row.Level == "repository" {
		return s.replayRepoRow(ctx, row, spec)
	}
	if s.funcs == nil {
		sb, err := sandbox.New(ctx, s.funcConfig)
		if err != nil {
			return schemas.ReplayOutcome{}, fmt.Errorf("sandbox for replaying the functions of %s: %w", s.traced.Item.Key, err)
		}
		s.funcs = sb
	}
	return replayFunction(ctx, s.funcs, placeOf(s.dir, s.imports), it, row, spec, s.hidden)
}

// replayRepoRow replays a forward repository-level row: its test is run again under bdb from the
// entry call the row's seed picks in the re-executed trace of that test (debugger.RepoItem's
// SampleEntry, as the row was built: the row names the entry's file and function, the trace
// which of its calls), taking the row's actions from there.
func (s *RepoSession) replayRepoRow(ctx context.Context, row schemas.Row, spec schemas.Spec) (schemas.ReplayOutcome, error) {
	k := slices.IndexFunc(s.traced.Repo.Traces, func(tt schemas.TestTrace) bool { return tt.Test == row.SourceID })
	if k < 0 {
		return schemas.ReplayOutcome{Kind: schemas.NotReplayedNotReExecuted,
			Detail: fmt.Sprintf("test %s gave no trace on re-execution: its entry call is not known", row.SourceID)}, nil
	}
	tt := s.traced.Repo.Traces[k]
	_, entry, err := debugger.RepoItem{Events: tt.Events, Status: tt.Status, Functions: tt.Functions}.SampleEntry(uint64(row.Seed))
	if err != nil {
		return schemas.ReplayOutcome{Kind: schemas.NotReplayedNoEntry,
			Detail: fmt.Sprintf("no entry call in the re-executed trace of test %s: %v", tt.Test, err)}, nil
	}
	if entry.File != row.Path || entry.QualName != row.QualName {
		return schemas.ReplayOutcome{Kind: schemas.NotReplayedNoEntry,
			Detail: fmt.Sprintf("the re-executed trace of test %s gives seed %d the entry %s of %s, the row %s of %s",
				tt.Test, row.Seed, entry.QualName, entry.File, row.QualName, row.Path)}, nil
	}
	traj, err := tokenize.Parse(row.Text)
	if err != nil {
		return schemas.ReplayOutcome{}, fmt.Errorf("replay row %s: %w", row.ID, err)
	}
	if traj.Direction != debugger.Forward {
		return schemas.ReplayOutcome{}, fmt.Errorf("replay row %s: not a forward trajectory", row.ID)
	}
	actions, err := replay.Actions(traj)
	if err != nil {
		return schemas.ReplayOutcome{}, fmt.Errorf("replay row %s: %w", row.ID, err)
	}
	lim, err := LimitsOf(spec)
	if err != nil {
		return schemas.ReplayOutcome{}, fmt.Errorf("replay row %s: %w", row.ID, err)
	}
	if filepath.IsAbs(entry.File) {
		return schemas.ReplayOutcome{Kind: schemas.NotReplayedNoEntry,
			Detail: fmt.Sprintf("the entry %s is in %s, outside the checkout", entry.QualName, entry.File)}, nil
	}
	file := filepath.Join(s.dir, filepath.FromSlash(entry.File))
	res, err := s.tests.ReplayTest(ctx, sandbox.ReplayTestRequest{Dir: s.dir, Runner: s.runner, Test: tt.Test,
		Paths: s.imports, Options: s.options, Actions: actions, Limits: lim,
		Entry: sandbox.ReplayEntry{File: file, QualName: entry.QualName, Occurrence: entry.Occurrence}})
	// The row's values name the worker's folders by their aliases (relativize): so do the
	// replay's.
	s.hidden.hideResult(res)
	return replayOutcome(row, traj, res, err, 0)
}

// Replay replays a forward function-level row's actions on Python's bdb in a sandbox
// (sandbox.Replay) and compares every landing state with the row's next state (replay.Compare).
// Inverse rows are not replayed (Replayed false, Detail says why), nor are the rows of a
// repository (repository-level rows and function-level rows of its functions): they need its
// checkout and environment, and are replayed by the RepoSession of its re-execution
// (TraceRepo). The error is non-nil only when the sandbox failed (ErrItem when the replayed item
// broke it), the spec's limits are unusable or the row's text does not parse.
func (t *Tracer) Replay(ctx context.Context, it crawl.Item, row schemas.Row, spec schemas.Spec) (schemas.ReplayOutcome, error) {
	if row.Direction != string(debugger.Forward) {
		return replay.NotInverse, nil
	}
	if row.Level == "repository" || it.Kind() == crawl.RepositoryTests || it.RepoURL != "" {
		return schemas.ReplayOutcome{Detail: "a row of a repository is replayed only with the repository's re-execution " +
			"(Tracer.TraceRepo), which has its checkout and environment"}, nil
	}
	if t.Sandboxes == nil {
		return schemas.ReplayOutcome{}, errors.New("this worker has no sandboxes")
	}
	sb, release, err := t.Sandboxes.Get(ctx)
	if err != nil {
		return schemas.ReplayOutcome{}, err
	}
	defer release()
	return replayFunction(ctx, sb, funcPlace{}, it, row, spec, nil)
}

// replayFunction replays a forward function-level row of item it in sandbox sb; the replay's
// values name the worker's folders by their aliases (hidden: a repository's; nil for none), as
// the row's do.
func replayFunction(ctx context.Context, sb *sandbox.Sandbox, at funcPlace, it crawl.Item, row schemas.Row, spec schemas.Spec, hidden workerPaths) (schemas.ReplayOutcome, error) {
	traj, err := tokenize.Parse(row.Text)
	if err != nil {
		return schemas.ReplayOutcome{}, fmt.Errorf("replay row %s: %w", row.ID, err)
	}
	req, err := replay.RequestOf(it, traj, spec.ForwardStart)
	if err != nil {
		return schemas.ReplayOutcome{}, fmt.Errorf("replay row %s: %w", row.ID, err)
	}
	if req.Limits, err = LimitsOf(spec); err != nil {
		return schemas.ReplayOutcome{}, fmt.Errorf("replay row %s: %w", row.ID, err)
	}
	at.replay(it, &req)
	res, err := sb.Replay(ctx, req)
	hidden.hideResult(res)
	return replayOutcome(row, traj, res, err, len(replay.LeadActions(spec.ForwardStart, it.Call, traj)))
}

// replayOutcome compares a replay's result, whose first lead stops come before the row's first
// state, with the row's trajectory; a replay that broke its sandbox is the item's error (ErrItem).
func replayOutcome(row schemas.Row, traj debugger.Trajectory, res *sandbox.Result, err error, lead int) (schemas.ReplayOutcome, error) {
	out, err := replay.OutcomeLead(row, traj, res, err, lead)
	if err != nil {
		return out, itemError(err)
	}
	return out, nil
}
