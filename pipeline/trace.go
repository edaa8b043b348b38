package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// TraceChunk is how many items one chunk of a batch's traces holds: the unit of resumption.
const TraceChunk = 8

// PoisonAfter is how many attempts of a batch in a row must die on the same item (crash, hang,
// exhausted sandbox or worker) before the item is given up as poison.
const PoisonAfter = 2

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
func readRunChunk(ctx context.Context, s *store.Store, run Run, hash string, c int) ([]execute.TracedItem, error) {
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
func writeChunk(ctx context.Context, s *store.Store, key string, items []execute.TracedItem) error {
	var buf []byte
	for _, t := range items {
		var err error
		if buf, err = t.AppendJSON(buf); err != nil {
			return fmt.Errorf("encode traces of %s: %w", t.Item.Key, err)
		}
	}
	if _, err := s.PutFirst(ctx, key, buf, "application/jsonl"); err != nil {
		return fmt.Errorf("store traces: %w", err)
	}
	return nil
}

// readChunk reads one stored chunk of traces.
func readChunk(ctx context.Context, s *store.Store, key string) ([]execute.TracedItem, error) {
	data, err := s.ReadAll(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read traces: %w", err)
	}
	var out []execute.TracedItem
	err = eachJSONLine(data, func(line []byte) error {
		t, err := execute.DecodeTracedItem(line)
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
func writeTraces(ctx context.Context, s *store.Store, hash string, ts []execute.TracedItem) error {
	for c := 0; c < chunks(len(ts)); c++ {
		if err := writeChunk(ctx, s, chunkKey(hash, c), ts[c*TraceChunk:min((c+1)*TraceChunk, len(ts))]); err != nil {
			return err
		}
	}
	return nil
}

// readTraces reads every trace of a planned batch, as run sees them.
func readTraces(ctx context.Context, s *store.Store, run Run, b *PlannedBatch) ([]execute.TracedItem, error) {
	var out []execute.TracedItem
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
// An item on which PoisonAfter attempts in a row died (an error of the item's or of no known
// class, a crash of the worker, a hang past the heartbeat timeout; not an execute.ErrInfra error,
// which no item can cause) is not traced again: it is stored with its Poison reason, which
// BuildShard makes a `poison` reject, and the batch goes on.
func TraceBatch(ctx context.Context, s *store.Store, run Run, ref BatchRef, trc execute.ItemTracer, attempt int, from TraceCursor, beat Beat) (TraceResult, error) {
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
						ch.items = append(ch.items, execute.TracedItem{Item: it, Status: schemas.StatusSandboxError, Poison: reason})
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
						switch {
						case gctx.Err() != nil:
							// Cut off: the mark (if any) stands, as for a worker that died.
						case errors.Is(err, execute.ErrInfra):
							// The worker's fault, which no item can cause: take back the mark, so
							// that it counts no death.
							if marking {
								_ = s.Delete(context.WithoutCancel(ctx), run.attemptKey(ref, attempt))
							}
						default:
							// The item's (ErrItem) or of no known class: either counts towards
							// giving the item up. Tell the next attempt which item this one died
							// on, and why.
							_ = mark(context.WithoutCancel(ctx), attemptMark{Item: i, Err: err.Error()})
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
	items  []execute.TracedItem
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
