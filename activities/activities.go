package activities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/pipeline"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
	"github.com/ndtrace/ndtrace/tokenize"
)

// Task queues: sandboxed tracing runs on its own workers, everything else on the I/O queue.
const (
	TraceQueue = "ndtrace-trace"
	IOQueue    = "ndtrace-io"
)

// ErrBadInput is the application error type of bad input: never retried, recorded with its reason.
const ErrBadInput = "BadInput"

// Activities holds what the activities need. A worker creates one and registers its methods.
type Activities struct {
	// Sandboxes hands out sandboxes for tracing (nil on workers that do not trace).
	Sandboxes *execute.SandboxPool
	// Tokenizers looks tokenizers up by name.
	Tokenizers func(name string) (tokenize.Tokenizer, error)
	// Fetcher resolves and checks out repositories (nil: a zero crawl.Fetcher, which cannot serve
	// the built-in example repository; workers use crawl.NewFetcher).
	Fetcher *crawl.Fetcher
	// Scratch is where tracing workers check repositories out (default userdirs.ScratchDir). It must
	// not be under /tmp.
	Scratch string
	// Envs is where tracing workers keep the environments built for repositories (default
	// userdirs.EnvsDir). It must not be under /tmp.
	Envs string
	// Metrics receives the activities' counters (nil: none).
	Metrics *Metrics
}

// RunInput names a run of a spec over its dataset: every activity's input starts with it.
type RunInput struct {
	Run     pipeline.Run
	Dataset string
}

// open opens the run's dataset; a URL that cannot be opened is bad input.
func (in RunInput) open(ctx context.Context) (*store.Store, error) {
	s, err := store.Open(ctx, in.Dataset)
	if err != nil {
		msg := pipeline.OneLine(err.Error())
		if reason, ok := store.Unusable(err); ok {
			msg = fmt.Sprintf("%s cannot be used: %s", in.Dataset, reason)
		}
		return nil, temporal.NewNonRetryableApplicationError(msg, ErrBadInput, err)
	}
	return s, nil
}

// with opens the run's dataset, calls fn with it and classifies fn's error.
func with[T any](ctx context.Context, in RunInput, fn func(*store.Store) (T, error)) (T, error) {
	s, err := in.open(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	defer s.Close()
	out, err := fn(s)
	return out, classify(err)
}

// classify makes the failures no retry can fix non-retryable, each with a message of one line that
// the CLI shows as it is: bad input; a store that cannot be used (no such bucket, access denied, a
// read-only folder: store.Unusable). Anything else (a server that cannot be reached, a timeout, a
// missing object) may be an outage, and is retried.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, execute.ErrBadInput):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrBadInput, err)
	}
	if reason, ok := store.Unusable(err); ok {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the store cannot be used: %s (%s)", reason, cause(err)), ErrBadInput, err)
	}
	// A missing object is retried, as before: on a store without strong consistency an object
	// just written may not be visible yet, and two publishes may move the same shard.
	return err
}

// cause is the cause of a store's failure without the layers around it that repeat what and where:
// the file system's (stat PATH: not a directory), the cloud API's (NoSuchBucket: MESSAGE), or else
// the innermost message of the chain, on one line.
func cause(err error) string {
	var pe *fs.PathError
	var ae interface {
		ErrorCode() string
		ErrorMessage() string
	}
	switch {
	case errors.As(err, &pe):
		return pipeline.OneLine(pe.Error())
	case errors.As(err, &ae):
		return pipeline.OneLine(ae.ErrorCode() + ": " + ae.ErrorMessage())
	}
	return pipeline.LastCause(err)
}

// beat records heartbeats with the given details.
func beat(ctx context.Context) pipeline.Beat {
	return func(d any) { activity.RecordHeartbeat(ctx, d) }
}

// resume decodes the last heartbeat's details into cursor, if the activity has any.
func resume[T any](ctx context.Context, cursor *T) {
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, cursor)
	}
}

func (a *Activities) fetcher() *crawl.Fetcher {
	if a.Fetcher == nil {
		return &crawl.Fetcher{}
	}
	return a.Fetcher
}

// ScanInput names a page of a phase's scan.
type ScanInput struct {
	RunInput
	Page int
	From pipeline.ScanCursor
	// RepoBatches is the number of repository batches of the sources' phase (functions' phase).
	RepoBatches int
}

// ScanPage scans a page of the spec's sources.
func (a *Activities) ScanPage(ctx context.Context, in ScanInput) (pipeline.ScanResult, error) {
	return with(ctx, in.RunInput, func(s *store.Store) (pipeline.ScanResult, error) {
		sets, err := pipeline.EvalSets(ctx, in.Run.Spec)
		if err != nil {
			return pipeline.ScanResult{}, err
		}
		res, err := pipeline.ScanPage(ctx, s, in.Run, a.fetcher(), sets, in.Page, in.From, beat(ctx))
		if err == nil {
			a.Metrics.rejected(res.Classes)
		}
		return res, err
	})
}

// ScanFunctions scans a page of the function-level items found in the repositories.
func (a *Activities) ScanFunctions(ctx context.Context, in ScanInput) (pipeline.ScanResult, error) {
	return with(ctx, in.RunInput, func(s *store.Store) (pipeline.ScanResult, error) {
		sets, err := pipeline.EvalSets(ctx, in.Run.Spec)
		if err != nil {
			return pipeline.ScanResult{}, err
		}
		res, err := pipeline.ScanFunctions(ctx, s, in.Run, sets, in.RepoBatches, in.Page, in.From, beat(ctx))
		if err == nil {
			a.Metrics.rejected(res.Classes)
		}
		return res, err
	})
}

// MergeInput names a phase's merge of dedup keys.
type MergeInput struct {
	RunInput
	Phase pipeline.Phase
	Pages int
}

// MergeKeys deduplicates a phase, resuming from its last heartbeat.
func (a *Activities) MergeKeys(ctx context.Context, in MergeInput) (pipeline.MergeResult, error) {
	var from pipeline.MergeCursor
	resume(ctx, &from)
	return with(ctx, in.RunInput, func(s *store.Store) (pipeline.MergeResult, error) {
		return pipeline.MergeKeys(ctx, s, in.Run, in.Phase, in.Pages, from, beat(ctx))
	})
}

// FormInput names a page of a phase's batch formation.
type FormInput struct {
	RunInput
	Phase pipeline.Phase
	Page  int
	Pages int
	Prev  pipeline.FormResult
}

// FormBatches forms the batches of a page.
func (a *Activities) FormBatches(ctx context.Context, in FormInput) (pipeline.FormResult, error) {
	return with(ctx, in.RunInput, func(s *store.Store) (pipeline.FormResult, error) {
		res, err := pipeline.FormBatches(ctx, s, in.Run, in.Phase, in.Page, in.Pages, in.Prev, beat(ctx))
		if err == nil { // the page's duplicates (Rejects counts those of the pages so far)
			a.Metrics.rejected(map[schemas.RejectClass]int{schemas.RejectDuplicate: int(res.Rejects - in.Prev.Rejects)})
		}
		return res, err
	})
}

// BatchInput names one planned batch.
type BatchInput struct {
	RunInput
	Ref pipeline.BatchRef
}

// TraceBatch traces a batch, resuming from its last heartbeat.
func (a *Activities) TraceBatch(ctx context.Context, in BatchInput) (pipeline.TraceResult, error) {
	var from pipeline.TraceCursor
	resume(ctx, &from)
	trc := &execute.Tracer{Sandboxes: a.Sandboxes, Fetcher: a.fetcher(), Scratch: a.Scratch, EnvCache: a.Envs, OnTraced: a.Metrics.traced}
	return with(ctx, in.RunInput, func(s *store.Store) (pipeline.TraceResult, error) {
		trc.Store = s     // repositories' environments are cached in the dataset's store
		trc.TestStore = s // and their test traces kept, one object a test
		return pipeline.TraceBatch(ctx, s, in.Run, in.Ref, trc, int(activity.GetInfo(ctx).Attempt), from, beat(ctx))
	})
}

// BuildShard builds a traced batch's rows, shards and record.
func (a *Activities) BuildShard(ctx context.Context, in BatchInput, tr pipeline.TraceResult) (pipeline.BatchSummary, error) {
	b := pipeline.Builder{Tokenizers: a.Tokenizers, OnBuilt: a.Metrics.built}
	return with(ctx, in.RunInput, func(s *store.Store) (pipeline.BatchSummary, error) {
		return pipeline.BuildShard(ctx, s, in.Run, b, tr, beat(ctx))
	})
}

// RecordFailure records that a batch failed on every attempt.
func (a *Activities) RecordFailure(ctx context.Context, in BatchInput, reason string) error {
	items, err := with(ctx, in.RunInput, func(s *store.Store) (int, error) {
		return pipeline.RecordFailure(ctx, s, in.Run, in.Ref, reason)
	})
	if err == nil {
		a.Metrics.rejected(map[schemas.RejectClass]int{schemas.RejectBatchFailed: items})
	}
	return err
}

// PageInput names a formed page to finalize.
type PageInput struct {
	RunInput
	Phase pipeline.Phase
	Page  int
}

// FinalizePage gathers a formed page for the commit.
func (a *Activities) FinalizePage(ctx context.Context, in PageInput) (int, error) {
	return with(ctx, in.RunInput, func(s *store.Store) (int, error) {
		ps, err := pipeline.FinalizePage(ctx, s, in.Run, in.Phase, in.Page, beat(ctx))
		if err != nil {
			return 0, err
		}
		if ps.Shards == nil {
			return 0, nil
		}
		return int(ps.Shards.Totals.Shards), nil
	})
}

// CommitInput names a run to commit.
type CommitInput struct {
	RunInput
	Commit pipeline.CommitInput
}

// Commit writes the version's manifest and commits it.
func (a *Activities) Commit(ctx context.Context, in CommitInput) (pipeline.CommitResult, error) {
	tok, err := a.Tokenizers(in.Run.Spec.Tokenizer)
	if err != nil {
		return pipeline.CommitResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("tokenizer: %v", err), ErrBadInput, err)
	}
	in.Commit.Tokenizer = tok.Name()
	return with(ctx, in.RunInput, func(s *store.Store) (pipeline.CommitResult, error) {
		return pipeline.Commit(ctx, s, in.Run, in.Commit, tok, beat(ctx))
	})
}
