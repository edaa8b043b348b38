package execute

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// ErrBadInput marks errors that no retry can fix (a spec the worker cannot run): the activities
// make them non-retryable.
var ErrBadInput = errors.New("bad input")

// Errors of tracing an item come in three classes. ErrItem marks those the item itself caused (its
// run broke the sandbox); ErrInfra those of the worker that no item can cause (no sandbox to be
// had, the worker's scratch folder, the environments' store or disk), which a retry may fix and
// which never count against the item. Any other error is of no known class: it counts towards
// giving the item up as poison like ErrItem, so that no item is retried past a bound whatever it
// does (pipeline.TraceBatch).
var (
	ErrItem  = errors.New("the item broke its sandbox")
	ErrInfra = errors.New("the worker failed")
)

// itemError wraps err as caused by the item.
func itemError(err error) error { return fmt.Errorf("%w: %w", ErrItem, err) }

// InfraError marks err as the worker's (ErrInfra), its message unchanged.
func InfraError(err error) error {
	if err == nil {
		return nil
	}
	return infraError{err}
}

type infraError struct{ error }

func (e infraError) Unwrap() []error { return []error{ErrInfra, e.error} }

// BadInput is an ErrBadInput error with a message.
func BadInput(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadInput, fmt.Sprintf(format, args...))
}

// TracedItem is one traced item, as stored between TraceBatch and BuildShard.
type TracedItem struct {
	Item   crawl.Item     `json:"item"`
	Status schemas.Status `json:"status"`
	Detail string         `json:"detail,omitempty"`
	// Events is the trace as chunks stored before Trace held it (read, never written).
	Events []schemas.Event `json:"events,omitempty"`
	// Trace is the trace in compact form: the locals of each frame as changes, every string
	// interned (debugger.Trace). Nil for a run without events.
	Trace  *debugger.Trace `json:"trace,omitempty"`
	Blocks []schemas.Block `json:"blocks,omitempty"`
	// Consume is set when the call returned an iterator the tracer consumed (sandbox.Result).
	Consume *schemas.Consume `json:"consume,omitempty"`
	// Value is the function-level call's rendered value (sandbox.Result.Value) when it returned;
	// empty for items traced before it was kept.
	Value string `json:"value,omitempty"`
	// Repo is the trace of a repository-level item's tests.
	Repo *RepoTrace `json:"repo,omitempty"`
	// Stage is, for a repository that could not be used (Repo nil, Detail the reason), the stage
	// it stopped at.
	Stage schemas.YieldStage `json:"stage,omitempty"`
	// Poison is set when the item was given up: every attempt that traced it died (the reason).
	Poison string `json:"poison,omitempty"`
}

// ItemTracer traces one item: *Tracer in the sandbox; tests stub it.
type ItemTracer interface {
	Trace(ctx context.Context, it crawl.Item, spec schemas.Spec, alive func()) (TracedItem, error)
}

// Tracer traces items in sandboxes.
type Tracer struct {
	// Sandboxes hands out sandboxes for tracing.
	Sandboxes *SandboxPool
	// Fetcher resolves and checks out repositories (nil: a zero crawl.Fetcher).
	Fetcher *crawl.Fetcher
	// Scratch is where repositories are checked out (default userdirs.ScratchDir: per user). It
	// must not be under /tmp: the sandbox mounts checkouts at their host paths (read-only, each
	// test getting a private writable view), and its private /tmp would hide them.
	Scratch string
	// OnTraced, if set, is told of every item traced and how long it took (metrics).
	OnTraced func(t TracedItem, d time.Duration)
	// Store is the dataset's store, where the environments of repositories are cached for every
	// worker (nil: on this worker only); EnvCache is this worker's folder of extracted environments
	// (default userdirs.EnvsDir, not under /tmp). See env.go.
	Store    *store.Store
	EnvCache string
	// TestStore, if set, keeps each test trace of a repository as soon as it is traced, and the
	// repository's trace holds only its reference (schemas.TestTrace.Ref): what tracing a
	// repository holds then does not grow with its tests (keepTest). Nil: the test traces stay in
	// the repository's trace (verify's re-execution, tests).
	TestStore *store.Store
	// environments is the spec's configuration of environments (set by Trace, see forSpec).
	environments *schemas.EnvironmentsSpec
	// inputs (with its defaults) and seed are the spec's, for generating inputs (set by Trace,
	// see forSpec; generate.go).
	inputs schemas.InputsSpec
	seed   uint64
	// genStart, when set, starts the sandbox of a repository's generation runs in place of
	// sandbox.New (tests); llm, when set, replaces the proposer of inputs.llm (tests).
	genStart func(ctx context.Context, cfg sandbox.Config) (genSandbox, error)
	llm      proposer
}

// Trace runs one item; a sandbox failure is an error (retried), anything the code does is data.
// alive is called while a long item (a repository) makes progress.
func (trc *Tracer) Trace(ctx context.Context, it crawl.Item, spec schemas.Spec, alive func()) (t TracedItem, err error) {
	start := time.Now()
	defer func() {
		if err == nil && trc.OnTraced != nil {
			trc.OnTraced(t, time.Since(start))
		}
	}()
	if trc.Sandboxes == nil {
		return TracedItem{}, InfraError(errors.New("this worker has no sandboxes"))
	}
	lim, err := LimitsOf(spec)
	if err != nil {
		return TracedItem{}, BadInput("%v", err)
	}
	if it.Kind() == crawl.RepositoryTests {
		co, err := checkoutLimitsOf(spec)
		if err != nil {
			return TracedItem{}, BadInput("%v", err)
		}
		return trc.forSpec(spec).traceRepo(ctx, it, lim, co, alive, nil)
	}
	sb, release, err := trc.Sandboxes.Get(ctx)
	if err != nil {
		return TracedItem{}, InfraError(err)
	}
	defer release()
	// The events go into their compact form as they are decoded: the whole decoded trace (full
	// locals at every event) never exists at once.
	tb := debugger.NewTraceBuilder()
	n := 0
	res, err := sb.Run(ctx, sandbox.Request{Code: it.Code, Filename: it.Filename, Call: it.Call, Limits: lim,
		Events: func(ev *schemas.Event) { tb.Add(ev); n++ }})
	if err != nil {
		if res != nil && res.Status == schemas.StatusSandboxError {
			return TracedItem{}, itemError(fmt.Errorf("trace %s: %w", it.Key, err))
		}
		return TracedItem{Item: it, Status: schemas.StatusInvalid, Detail: err.Error()}, nil
	}
	var trace *debugger.Trace
	if n > 0 {
		trace = tb.Trace()
	}
	return TracedItem{Item: it, Status: res.Status, Detail: res.Detail, Trace: trace, Blocks: res.Blocks, Consume: res.Consume, Value: okValue(res)}, nil
}

// CompactTrace returns the item's trace in compact form, from Events for a chunk stored before
// Trace.
func (t *TracedItem) CompactTrace() *debugger.Trace {
	if t.Trace == nil {
		return debugger.NewTrace(t.Events)
	}
	return t.Trace
}

// checkoutLimitsOf returns the repository checkout limits of a spec.
func checkoutLimitsOf(spec schemas.Spec) (crawl.CheckoutLimits, error) {
	d, err := spec.Limits.CheckoutTimeout.Value()
	if err != nil {
		return crawl.CheckoutLimits{}, fmt.Errorf("limits.checkout_timeout: %w", err)
	}
	return crawl.CheckoutLimits{MaxBytes: spec.Limits.RepoBytes, MaxFiles: spec.Limits.RepoFiles, Timeout: d}, nil
}

// LimitsOf returns the sandbox limits of one item of a spec.
func LimitsOf(spec schemas.Spec) (sandbox.Limits, error) {
	d, err := spec.Limits.Timeout.Value()
	if err != nil {
		return sandbox.Limits{}, fmt.Errorf("limits.timeout: %w", err)
	}
	return sandbox.Limits{WallTime: d, CPUTime: d, TraceEvents: spec.Limits.MaxEvents, ValueChars: spec.Limits.ValueChars}, nil
}

// okValue is the call's rendered value of a run that returned (status ok), or "".
func okValue(res *sandbox.Result) string {
	if res.Status != schemas.StatusOK {
		return ""
	}
	return res.Value
}
