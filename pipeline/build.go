package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
	"github.com/ndtrace/ndtrace/tokenize"
)

// recordKey is where the record of the batch with hash is stored. Records and shards are shared by
// the versions whose runs plan the same batch, and written once.
func recordKey(hash string) string { return "batches/" + hash + ".json" }

// BatchRecord is what a finished batch leaves in the dataset: its shards, what became of every
// item, and its statistics.
type BatchRecord struct {
	Hash  string             `json:"hash"`
	Shard *dataset.ShardInfo `json:"shard"`
	// Packed is the batch's packed shard, when the spec packs (pack_length).
	Packed  *dataset.ShardInfo `json:"packed,omitempty"`
	Items   int                `json:"items"`
	Rows    int                `json:"rows"`
	Rejects []schemas.Reject   `json:"rejects"`
	Counts  schemas.Counts     `json:"counts"`
	// CreatedAt is when the batch's rows were built (their created_at): a later version that
	// reuses the batch keeps it.
	CreatedAt time.Time `json:"created_at"`
	// Stats are the statistics of the batch's rows and rejects, merged into the version's.
	Stats *dataset.StatsPart `json:"stats,omitempty"`
	// Yields are the yield reports of the batch's repositories.
	Yields []schemas.RepoYield `json:"yields,omitempty"`
}

// BatchSummary is the small part of a BatchRecord that goes back to the workflow.
type BatchSummary struct {
	Items    int   `json:"items"`
	Rows     int   `json:"rows"`
	Tokens   int64 `json:"tokens"`
	Rejected int   `json:"rejected"`
	Poison   int   `json:"poison,omitempty"`
	Reused   bool  `json:"reused,omitempty"`
	// Failed is the reason the batch failed on every attempt ("" if it did not).
	Failed string `json:"failed,omitempty"`
	// Fatal is set when even the batch's failure could not be recorded, for a reason no retry
	// fixes (the store cannot be used): the run cannot go on, and fails with it.
	Fatal string `json:"fatal,omitempty"`
	// GenUnits counts the functions its repositories generated inputs for (issue 30), GenWall the
	// time that took (zero for a batch whose record was reused): the progress display's cost per
	// function.
	GenUnits int64         `json:"gen_units,omitempty"`
	GenWall  time.Duration `json:"gen_wall,omitempty"`
}

// Summary sums a record up.
func (rec *BatchRecord) Summary(reused bool) BatchSummary {
	s := BatchSummary{Items: rec.Items, Rows: rec.Rows, Rejected: len(rec.Rejects), Reused: reused}
	for _, y := range rec.Yields {
		if y.Generation != nil {
			s.GenUnits += y.Generation.Units
		}
	}
	if rec.Shard != nil {
		s.Tokens = rec.Shard.Tokens
	}
	for _, r := range rec.Rejects {
		if r.Class == schemas.RejectPoison {
			s.Poison++
		}
	}
	return s
}

// runRecordKey is where a run keeps the record of a batch that had poison items: its own, so
// that a later run traces them again rather than reusing the verdict.
func (r Run) runRecordKey(hash string) string { return r.WorkPrefix() + "records/" + hash + ".json" }

// ReadRecordFor reads the record of the batch with hash as run sees it: the run's own (a batch
// with poison items), or the shared one. A missing record gives an error for which
// store.IsNotExist is true.
func ReadRecordFor(ctx context.Context, s *store.Store, run Run, hash string) (*BatchRecord, error) {
	rec, err := readRecordAt(ctx, s, run.runRecordKey(hash), hash)
	if store.IsNotExist(err) {
		return readRecordAt(ctx, s, recordKey(hash), hash)
	}
	return rec, err
}

func readRecordAt(ctx context.Context, s *store.Store, key, hash string) (*BatchRecord, error) {
	return readJSON[BatchRecord](ctx, s, key, "batch record "+hash)
}

// statsOf returns the statistics of a batch: its record's, or, for a record written before
// records had them, computed from its shard (one batch's rows).
func statsOf(ctx context.Context, s *store.Store, rec *BatchRecord) (*dataset.StatsPart, error) {
	if rec.Stats != nil {
		return rec.Stats, nil
	}
	var rows []schemas.Row
	if rec.Shard != nil {
		var err error
		if rows, err = dataset.ReadRows(ctx, s, rec.Shard.Path, -1); err != nil {
			return nil, fmt.Errorf("statistics of batch %s: %w", rec.Hash, err)
		}
	}
	p, err := dataset.NewStatsPart(rows)
	if err != nil {
		return nil, fmt.Errorf("statistics of batch %s: %w", rec.Hash, err)
	}
	p.AddRejects(rec.Rejects)
	p.AddYields(rec.Yields)
	return p, nil
}

// Builder builds rows: the tokenizers by name, and a hook told of every batch built (metrics).
type Builder struct {
	Tokenizers func(name string) (tokenize.Tokenizer, error)
	// OnBuilt, if set, is told of every batch's rows and rejects.
	OnBuilt func(rows []schemas.Row, rejects []schemas.Reject)
}

// BuildShard turns a batch's traces into trajectories, tokenizes them and writes the batch's
// shard, packed shard and record. A batch whose record exists is reused as it is.
func BuildShard(ctx context.Context, s *store.Store, run Run, b Builder, tr TraceResult, beat Beat) (BatchSummary, error) {
	if rec, err := ReadRecordFor(ctx, s, run, tr.Hash); err == nil {
		return rec.Summary(true), nil
	} else if !store.IsNotExist(err) {
		return BatchSummary{}, err
	}
	spec := run.Spec
	tok, err := b.Tokenizers(spec.Tokenizer)
	if err != nil {
		return BatchSummary{}, execute.BadInput("tokenizer: %v", err)
	}
	policy, err := debugger.PolicyByName(spec.Policy)
	if err != nil {
		return BatchSummary{}, execute.BadInput("policy: %v", err)
	}
	opts := rows.OptionsFor(spec, tok, run.CreatedAt)
	sets, err := cachedEvalSets(ctx, spec)
	if err != nil {
		return BatchSummary{}, err
	}
	opts.Decontaminate = Decontaminator(sets) // every function of every row's CODE
	// A repository's test traces are kept apart (execute.Tracer.TestStore): read one at a time.
	opts.LoadTest = func(ref string) (schemas.TestTrace, *debugger.Trace, error) { return execute.LoadTest(ctx, s, ref) }
	rec := &BatchRecord{Hash: tr.Hash, Counts: schemas.Counts{}, CreatedAt: run.CreatedAt}
	var built []schemas.Row
	var genWall time.Duration // the time its repositories took generating inputs
	for c := 0; c < tr.Chunks; c++ {
		ts, err := readRunChunk(ctx, s, run, tr.Hash, c)
		if err != nil {
			return BatchSummary{}, err
		}
		for _, t := range ts {
			rec.Items++
			r, rej, err := rows.Of(t, spec, policy, opts, rec.Counts)
			if err != nil {
				return BatchSummary{}, err
			}
			if t.Item.Kind() == crawl.RepositoryTests {
				rec.Yields = append(rec.Yields, rows.Yield(t, len(r), rej))
				if t.Repo != nil {
					genWall += t.Repo.GenWall
				}
			}
			if rej != nil {
				rec.Rejects = append(rec.Rejects, *rej)
				continue
			}
			built = append(built, r...)
		}
		beat.beat(c + 1)
	}
	rec.Rows = len(built)
	if rec.Stats, err = dataset.NewStatsPart(built); err != nil {
		return BatchSummary{}, fmt.Errorf("statistics: %w", err)
	}
	rec.Stats.AddRejects(rec.Rejects)
	rec.Stats.AddYields(rec.Yields)
	if b.OnBuilt != nil {
		b.OnBuilt(built, rec.Rejects)
	}
	poisoned := rec.Summary(false).Poison > 0
	if len(built) > 0 {
		name := "part-" + tr.Hash[:24]
		if poisoned {
			// Not the batch's shard (that one holds every item): this run's, without its poison.
			name += "-" + run.ID[len(run.ID)-8:]
		}
		info, err := dataset.WritePoolShard(ctx, s, name, built)
		if errors.Is(err, store.ErrConflict) {
			// Another run built this batch's shard (with its created_at) and did not get to write
			// its record: adopt that shard, as a run that found the record would.
			if built, info, err = adoptShard(ctx, s, name); err == nil && len(built) > 0 {
				rec.CreatedAt = built[0].CreatedAt
				rec.Rows = len(built)
			}
		}
		if err != nil {
			return BatchSummary{}, fmt.Errorf("write shard: %w", err)
		}
		rec.Shard = &info
		if n := spec.PackLength; n > 0 {
			if rec.Packed, err = packBatch(ctx, s, tok, name, built, n, rec.Counts); err != nil {
				return BatchSummary{}, err
			}
		}
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return BatchSummary{}, err
	}
	key := recordKey(tr.Hash)
	if poisoned {
		key = run.runRecordKey(tr.Hash)
	}
	created, err := s.PutFirst(ctx, key, data, "application/json")
	if err != nil {
		return BatchSummary{}, fmt.Errorf("write batch record: %w", err)
	}
	// The first record written is the batch's (a concurrent run may have won): report that one.
	won, err := readRecordAt(ctx, s, key, tr.Hash)
	if err != nil {
		return BatchSummary{}, err
	}
	sum := won.Summary(!created)
	if created {
		sum.GenWall = genWall
	}
	return sum, nil
}

// packBatch packs a batch's rows into sequences of n tokens (dataset.Pack, padded with the
// tokenizer's end-of-text id) and writes them as the packed shard name. Rows longer than n are
// counted as packing_too_long; it returns nil when no row fits.
func packBatch(ctx context.Context, s *store.Store, tok tokenize.Tokenizer, name string, rows []schemas.Row, n int, counts schemas.Counts) (*dataset.ShardInfo, error) {
	pad, ok := tok.SpecialID(tokenize.EndOfText)
	if !ok {
		return nil, execute.BadInput("tokenizer %s has no id for %s to pad packed sequences with", tok.Name(), tokenize.EndOfText)
	}
	seqs, tooLong, err := dataset.Pack(rows, n, pad)
	if err != nil {
		return nil, err
	}
	if len(tooLong) > 0 {
		counts[schemas.CountPackTooLong] += int64(len(tooLong))
	}
	if len(seqs) == 0 {
		return nil, nil
	}
	info, err := dataset.WritePoolPackedShard(ctx, s, name, seqs, n)
	if err != nil {
		return nil, fmt.Errorf("write packed shard: %w", err)
	}
	return &info, nil
}

// adoptShard reads the shard stored under name and returns its rows and their info (encoding is
// deterministic, so the info is that of the stored bytes).
func adoptShard(ctx context.Context, s *store.Store, name string) ([]schemas.Row, dataset.ShardInfo, error) {
	rows, err := dataset.ReadRows(ctx, s, dataset.PoolShardPath(name), -1)
	if err != nil {
		return nil, dataset.ShardInfo{}, fmt.Errorf("adopt shard %s: %w", name, err)
	}
	_, info, err := dataset.EncodeShard(rows)
	if err != nil {
		return nil, dataset.ShardInfo{}, fmt.Errorf("adopt shard %s: %w", name, err)
	}
	info.Path = dataset.PoolShardPath(name)
	stored, err := s.Stat(ctx, info.Path)
	if err != nil {
		return nil, dataset.ShardInfo{}, err
	}
	if stored.Size != info.Bytes {
		return nil, dataset.ShardInfo{}, fmt.Errorf("adopt shard %s: re-encoding its %d rows gives %d bytes, not the %d stored", name, len(rows), info.Bytes, stored.Size)
	}
	return rows, info, nil
}
