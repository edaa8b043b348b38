package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ndtrace/ndtrace/internal/jsonmembers"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// TraceChunk is how many items one chunk of a batch's traces holds: the unit of resumption.
const TraceChunk = 8

// PoisonAfter is how many attempts of a batch in a row must die on the same item (crash, hang,
// exhausted sandbox or worker) before the item is given up as poison.
const PoisonAfter = 2

// ErrBadInput marks errors that no retry can fix (a spec the worker cannot run): the activities
// make them non-retryable.
var ErrBadInput = errors.New("bad input")

// ErrItem marks a tracing error the item itself caused (its run broke the sandbox): only those
// count towards giving the item up as poison. Errors of the worker or the network (no sandbox to
// be had, a store or a clone that fails) do not.
var ErrItem = errors.New("the item broke its sandbox")

// itemError wraps err as caused by the item.
func itemError(err error) error { return fmt.Errorf("%w: %w", ErrItem, err) }

// badInput is an ErrBadInput error with a message.
func badInput(format string, args ...any) error {
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
	// Repo is the trace of a repository-level item's tests.
	Repo *RepoTrace `json:"repo,omitempty"`
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
	// environments is the spec's configuration of environments (set by Trace, see forSpec).
	environments *schemas.EnvironmentsSpec
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
		return TracedItem{}, errors.New("this worker has no sandboxes")
	}
	lim, err := LimitsOf(spec)
	if err != nil {
		return TracedItem{}, badInput("%v", err)
	}
	if it.Repo != nil {
		co, err := checkoutLimitsOf(spec)
		if err != nil {
			return TracedItem{}, badInput("%v", err)
		}
		return trc.forSpec(spec).traceRepo(ctx, it, lim, co, alive, nil)
	}
	sb, release, err := trc.Sandboxes.Get(ctx)
	if err != nil {
		return TracedItem{}, err
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
	return TracedItem{Item: it, Status: res.Status, Detail: res.Detail, Trace: trace, Blocks: res.Blocks, Consume: res.Consume}, nil
}

// compactTrace returns the compact form of a run's events, nil for none. Once it is made, the
// decoded events (and any buffer their strings point into) can go.
func compactTrace(events []schemas.Event) *debugger.Trace {
	if len(events) == 0 {
		return nil
	}
	return debugger.NewTrace(events)
}

// trace returns the item's trace in compact form, from Events for a chunk stored before Trace.
func (t *TracedItem) trace() *debugger.Trace {
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

// chunkKey is where chunk c of the traces of the batch with hash is stored. Traces are shared by
// the runs that plan the same batch (its hash covers the spec and the items), and written once.
// A chunk that holds a poison item is the run's own (runChunkKey): poison is a verdict on one run's
// attempts, and a later run (ndtrace retry) traces the item again.
func chunkKey(hash string, c int) string {
	return fmt.Sprintf("work/traces/%s/chunk-%04d.jsonl", hash, c)
}

func (r Run) runChunkKey(hash string, c int) string {
	return fmt.Sprintf("%straces/%s/chunk-%04d.jsonl", r.WorkPrefix(), hash, c)
}

// findChunk returns the key chunk c of a batch is stored under for run (its own, or the shared
// one), or "" if it is not stored.
func findChunk(ctx context.Context, s *store.Store, run Run, hash string, c int) (string, error) {
	for _, k := range []string{run.runChunkKey(hash, c), chunkKey(hash, c)} {
		ok, err := s.Exists(ctx, k)
		if err != nil {
			return "", err
		}
		if ok {
			return k, nil
		}
	}
	return "", nil
}

// readRunChunk reads chunk c of a batch's traces as run sees it.
func readRunChunk(ctx context.Context, s *store.Store, run Run, hash string, c int) ([]TracedItem, error) {
	k, err := findChunk(ctx, s, run, hash, c)
	if err != nil {
		return nil, err
	}
	if k == "" {
		k = chunkKey(hash, c) // for the error
	}
	return readChunk(ctx, s, k)
}

// chunks is how many trace chunks n items fill.
func chunks(n int) int { return (n + TraceChunk - 1) / TraceChunk }

// writeChunk stores traced items as one chunk: JSON Lines, one item a line. The first write of a
// chunk wins (a retry that traced again finds it).
func writeChunk(ctx context.Context, s *store.Store, key string, items []TracedItem) error {
	var buf []byte
	for _, t := range items {
		var err error
		if buf, err = appendTracedItem(buf, t); err != nil {
			return fmt.Errorf("encode traces of %s: %w", t.Item.Key, err)
		}
	}
	if _, err := s.PutFirst(ctx, key, buf, "application/jsonl"); err != nil {
		return fmt.Errorf("store traces: %w", err)
	}
	return nil
}

// appendTracedItem appends t to b as one JSON line. The compact trace, most of the line, is
// appended in place (debugger.Trace.AppendJSON) rather than marshalled, then checked and copied
// again by encoding/json as a json.Marshaler's output would be.
func appendTracedItem(b []byte, t TracedItem) ([]byte, error) {
	tr := t.Trace
	t.Trace = nil
	rest, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	if tr == nil {
		return append(append(b, rest...), '\n'), nil
	}
	b = append(b, rest[:len(rest)-1]...) // without its closing brace
	if len(rest) > 2 {
		b = append(b, ',')
	}
	b = append(b, `"trace":`...)
	if b, err = tr.AppendJSON(b); err != nil {
		return nil, err
	}
	return append(b, '}', '\n'), nil
}

// decodeTracedItem reads one line of a stored chunk (appendTracedItem's) as json.Unmarshal would,
// except that the trace's bytes go to debugger.Trace.DecodeJSON unscanned: they are most of the
// line, and encoding/json would validate and skip them before the trace reads them.
func decodeTracedItem(line []byte) (TracedItem, error) {
	var tr *debugger.Trace
	rest := append(make([]byte, 0, 512), '{')
	n, err := jsonmembers.Walk(line, func(name string, v []byte) (int, error) {
		if strings.EqualFold(name, "trace") { // as json.Unmarshal matches a field
			if bytes.HasPrefix(v, []byte("null")) {
				tr = nil
				return len("null"), nil
			}
			tr = new(debugger.Trace)
			return tr.DecodeJSON(v)
		}
		n, err := jsonmembers.ValueLen(v)
		if err != nil {
			return 0, err
		}
		if len(rest) > 1 {
			rest = append(rest, ',')
		}
		key, _ := json.Marshal(name)
		rest = append(append(append(rest, key...), ':'), v[:n]...)
		return n, nil
	})
	if err == nil {
		err = jsonmembers.End(line, n)
	}
	var t TracedItem
	if err == nil {
		err = json.Unmarshal(append(rest, '}'), &t)
	}
	if err != nil {
		return TracedItem{}, err
	}
	t.Trace = tr
	return t, nil
}

// readChunk reads one stored chunk of traces.
func readChunk(ctx context.Context, s *store.Store, key string) ([]TracedItem, error) {
	data, err := s.ReadAll(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read traces: %w", err)
	}
	var out []TracedItem
	err = eachJSONLine(data, func(line []byte) error {
		t, err := decodeTracedItem(line)
		if err != nil {
			return err
		}
		out = append(out, t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read traces %s: %w", key, err)
	}
	return out, nil
}

// writeTraces stores the traces of a planned batch whose items were traced already (the functions
// found in repositories), in chunks.
func writeTraces(ctx context.Context, s *store.Store, hash string, ts []TracedItem) error {
	for c := 0; c < chunks(len(ts)); c++ {
		if err := writeChunk(ctx, s, chunkKey(hash, c), ts[c*TraceChunk:min((c+1)*TraceChunk, len(ts))]); err != nil {
			return err
		}
	}
	return nil
}

// readTraces reads every trace of a planned batch, as run sees them.
func readTraces(ctx context.Context, s *store.Store, run Run, b *PlannedBatch) ([]TracedItem, error) {
	var out []TracedItem
	for c := 0; c < chunks(len(b.Items)); c++ {
		ts, err := readRunChunk(ctx, s, run, b.Hash, c)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

// TraceCursor is where a TraceBatch attempt resumes: the chunks stored so far.
type TraceCursor struct {
	Chunks int `json:"chunks"`
}

// TraceResult says where a batch's traces are.
type TraceResult struct {
	// Done is true when the batch's record exists already: nothing to trace or build.
	Done   bool   `json:"done"`
	Hash   string `json:"hash"`
	Chunks int    `json:"chunks"`
	Items  int    `json:"items"`
	// Poison counts the items given up as poison.
	Poison int `json:"poison,omitempty"`
}

// attemptMark is what an attempt of TraceBatch records of the item it is on: written before each
// item in a retry (attempt 2 on), and with the error when an attempt fails. The attempts after it
// read it to find an item that kills its attempts.
type attemptMark struct {
	Item int    `json:"item"`
	Err  string `json:"err,omitempty"`
}

func (r Run) attemptKey(ref BatchRef, attempt int) string {
	return fmt.Sprintf("%strace/%s/attempt-%03d.json", r.WorkPrefix(), ref, attempt)
}
func (r Run) poisonKey(ref BatchRef) string {
	return fmt.Sprintf("%strace/%s/poison.json", r.WorkPrefix(), ref)
}

// TraceBatch traces every item of a planned batch in the sandbox, in chunks written once under the
// batch's hash. attempt is the activity's attempt (1 for the first); a retry resumes from from
// (and skips the chunks it finds stored). beat is called with the cursor after every chunk stored
// and whenever an item makes progress.
//
// An item on which PoisonAfter attempts in a row died (an error, a crash of the worker, a hang
// past the heartbeat timeout) is not traced again: it is stored with its Poison reason, which
// BuildShard makes a `poison` reject, and the batch goes on.
func TraceBatch(ctx context.Context, s *store.Store, run Run, ref BatchRef, trc ItemTracer, attempt int, from TraceCursor, beat Beat) (TraceResult, error) {
	b, err := ReadBatch(ctx, s, run, ref)
	if err != nil {
		return TraceResult{}, err
	}
	res := TraceResult{Hash: b.Hash, Items: len(b.Items), Chunks: chunks(len(b.Items))}
	if rec, err := ReadRecordFor(ctx, s, run, b.Hash); err == nil && rec != nil {
		res.Done = true
		return res, nil
	} else if err != nil && !store.IsNotExist(err) {
		return res, err
	}
	poison, err := findPoison(ctx, s, run, ref, attempt)
	if err != nil {
		return res, err
	}
	res.Poison = len(poison)
	marking := attempt > 1
	mark := func(ctx context.Context, m attemptMark) error {
		data, _ := json.Marshal(m)
		return s.Put(ctx, run.attemptKey(ref, attempt), data, nil)
	}
	hb := &chunkBeat{beat: beat, stored: from.Chunks}
	g, gctx := errgroup.WithContext(ctx)
	out := make(chan tracedChunk, 1)
	g.Go(func() error { return storeChunks(gctx, s, out, hb) })
	g.Go(func() error {
		defer close(out)
		for c := from.Chunks; c < res.Chunks; c++ {
			ch := tracedChunk{index: c, key: chunkKey(b.Hash, c)}
			if k, err := findChunk(gctx, s, run, b.Hash, c); err != nil {
				return err
			} else if k != "" {
				ch.stored = true
			} else {
				for i := c * TraceChunk; i < min((c+1)*TraceChunk, len(b.Items)); i++ {
					it := b.Items[i]
					if reason, ok := poison[i]; ok {
						ch.items = append(ch.items, TracedItem{Item: it, Status: schemas.StatusSandboxError, Poison: reason})
						ch.key = run.runChunkKey(b.Hash, c)
						continue
					}
					if marking {
						if err := gctx.Err(); err != nil {
							return err // cut off (or a zombie of a timed-out attempt): mark nothing
						}
						if err := mark(gctx, attemptMark{Item: i}); err != nil {
							return err
						}
					}
					t, err := trc.Trace(gctx, it, run.Spec, hb.alive)
					if err != nil {
						if errors.Is(err, ErrItem) && gctx.Err() == nil {
							// Tell the next attempt which item this one died on, and why.
							_ = mark(context.WithoutCancel(ctx), attemptMark{Item: i, Err: err.Error()})
						} else if marking && gctx.Err() == nil {
							// Not the item's fault: take back the mark, so that it counts no death.
							_ = s.Delete(context.WithoutCancel(ctx), run.attemptKey(ref, attempt))
						}
						return err
					}
					ch.items = append(ch.items, t)
					hb.alive()
				}
			}
			select {
			case out <- ch:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	return res, g.Wait()
}

// findPoison returns the items of a batch given up as poison (by index, with the reason), adding
// the item the last PoisonAfter attempts died on, if they all died on the same one.
func findPoison(ctx context.Context, s *store.Store, run Run, ref BatchRef, attempt int) (map[int]string, error) {
	poison := map[int]string{}
	if attempt <= 1 {
		return poison, nil
	}
	if data, err := s.ReadAll(ctx, run.poisonKey(ref)); err == nil {
		if err := json.Unmarshal(data, &poison); err != nil {
			return nil, fmt.Errorf("poison list of %s: %w", ref, err)
		}
	} else if !store.IsNotExist(err) {
		return nil, err
	}
	if attempt-PoisonAfter < 1 {
		return poison, nil
	}
	var marks []attemptMark
	for a := attempt - PoisonAfter; a < attempt; a++ {
		data, err := s.ReadAll(ctx, run.attemptKey(ref, a))
		if store.IsNotExist(err) {
			return poison, nil // an attempt that recorded nothing (the first, killed): no verdict
		}
		if err != nil {
			return nil, err
		}
		var m attemptMark
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("attempt %d of %s: %w", a, ref, err)
		}
		marks = append(marks, m)
	}
	x := marks[0].Item
	for _, m := range marks[1:] {
		if m.Item != x {
			return poison, nil
		}
	}
	if _, ok := poison[x]; ok {
		return poison, nil
	}
	reason := fmt.Sprintf("%d attempts in a row died on this item", PoisonAfter)
	if last := marks[len(marks)-1].Err; last != "" {
		reason += ": " + last
	} else {
		reason += " (the worker crashed, or the item hung past the heartbeat timeout)"
	}
	poison[x] = reason
	data, err := json.Marshal(poison)
	if err != nil {
		return nil, err
	}
	if err := s.Put(ctx, run.poisonKey(ref), data, nil); err != nil {
		return nil, err
	}
	return poison, nil
}

// tracedChunk is one chunk of a batch's traces on its way to storage; stored says it is there
// already (from an earlier attempt).
type tracedChunk struct {
	index  int
	key    string
	items  []TracedItem
	stored bool
}

// storeChunks stores the chunks in the order they come and beats the number stored after each.
// Storing runs beside the tracing of the next chunk, so the sandbox never waits for storage.
func storeChunks(ctx context.Context, s *store.Store, in <-chan tracedChunk, hb *chunkBeat) error {
	for ch := range in {
		if !ch.stored {
			if err := writeChunk(ctx, s, ch.key, ch.items); err != nil {
				return err
			}
		}
		hb.storedThrough(ch.index)
	}
	return nil
}

// chunkBeat beats from TraceBatch's two goroutines: always the number of chunks stored (the
// resume point), which never goes backwards.
type chunkBeat struct {
	beat   Beat
	mu     sync.Mutex
	stored int
}

// alive beats without progress in storage.
func (h *chunkBeat) alive() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.beat.beat(TraceCursor{Chunks: h.stored})
}

// storedThrough records that every chunk up to and including index c is stored.
func (h *chunkBeat) storedThrough(c int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stored = c + 1
	h.beat.beat(TraceCursor{Chunks: h.stored})
}
