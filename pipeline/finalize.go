package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
	"github.com/ndtrace/ndtrace/tokenize"
)

// FailedBatch is a batch that failed on every attempt: the version is committed without it, and
// lists it (ndtrace retry re-runs it into a new version).
type FailedBatch struct {
	Ref    string `json:"batch"`
	Hash   string `json:"hash"`
	Items  int    `json:"items"`
	Reason string `json:"reason"`
}

// RecordFailure records that the batch ref failed on every attempt, with the reason, and returns
// how many items the batch holds (each becomes a reject of class batch_failed). The first record
// stays.
func RecordFailure(ctx context.Context, s *store.Store, run Run, ref BatchRef, reason string) (items int, err error) {
	b, err := ReadBatch(ctx, s, run, ref)
	if err != nil {
		return 0, err
	}
	data, err := json.Marshal(FailedBatch{Ref: ref.String(), Hash: b.Hash, Items: len(b.Items), Reason: reason})
	if err != nil {
		return 0, err
	}
	_, err = s.PutFirst(ctx, run.FailedKey(ref), data, "application/json")
	return len(b.Items), err
}

// PageSummary is what FinalizePage gathers of one formed page: the shards of its batches, its
// rejects (stored as one object of the version) and counters.
type PageSummary struct {
	// Shards and Packed are the version's index pages of the page's shards (nil if none).
	Shards *dataset.ShardPage `json:"shards,omitempty"`
	Packed *dataset.ShardPage `json:"packed,omitempty"`
	// Rejects is the version's object holding the page's rejects (nil if it has none).
	Rejects *dataset.ObjectRef `json:"rejects,omitempty"`
	// Repos is the version's object holding the page's repository yield reports (nil if none).
	Repos  *dataset.ObjectRef `json:"repos,omitempty"`
	Failed []FailedBatch      `json:"failed,omitempty"`
	Counts schemas.Counts     `json:"counts"`
	// Stats is the work-area object holding the page's merged statistics.
	Stats string `json:"stats"`
}

func (r Run) pageSummaryKey(p Phase, page int) string {
	return fmt.Sprintf("%sfinal/%s-page-%06d.json", r.WorkPrefix(), p, page)
}

// VersionPrefix is where the objects of the run's version live.
func (r Run) VersionPrefix() string { return dataset.VersionPrefix(r.ID) }

// FinalizePage gathers page page of phase p: the records of the batches formed in it (or their
// failures), the page's rejects from scanning and forming, into a PageSummary and one rejects
// object of the version. Its memory is bounded by the page. A page finalized before is read back.
func FinalizePage(ctx context.Context, s *store.Store, run Run, p Phase, page int, beat Beat) (*PageSummary, error) {
	key := run.pageSummaryKey(p, page)
	if done, err := readDone[PageSummary](ctx, s, key, "page summary "+key); err != nil || done != nil {
		return done, err
	}
	ps := &PageSummary{Counts: schemas.Counts{}}
	var rejects []schemas.Reject
	var shards, packed []dataset.ShardInfo
	stats := &dataset.StatsPart{}
	var pageRejects []schemas.Reject // of this page's planning and failed batches (not in a record)
	for _, k := range []string{run.pageRejectsKey(p, page), run.formRejectsKey(p, page)} {
		rs, err := readJSONL[schemas.Reject](ctx, s, k)
		if err != nil {
			return nil, err
		}
		rejects = append(rejects, rs...)
	}
	ps.Counts[schemas.CountItems] += int64(len(rejects))
	pageRejects = append(pageRejects, rejects...)
	var yields, pageYields []schemas.RepoYield // (pageYields: not in a record)
	for _, r := range rejects {
		if r.Class == schemas.RejectRepository {
			pageYields = append(pageYields, rows.EarlyYield(r.Key, r.Key, schemas.YieldUnresolved, r.Reason))
		}
	}
	outcomes, err := pageOutcomes(ctx, s, run, p, page)
	if err != nil {
		return nil, err
	}
	for i, o := range outcomes {
		fb := o.FormedBatch
		if o.Failed {
			failed, err := readJSON[FailedBatch](ctx, s, run.FailedKey(fb.Ref), "failure of "+fb.Ref.String())
			if err != nil {
				return nil, err
			}
			ps.Failed = append(ps.Failed, *failed)
			ps.Counts[schemas.CountItems] += int64(fb.Items)
			ps.Counts[schemas.CountBatchesFailed]++
			b, err := ReadBatch(ctx, s, run, fb.Ref)
			if err != nil {
				return nil, err
			}
			for _, it := range b.Items {
				r := schemas.Reject{Source: it.Origin(), Key: it.Key, Class: schemas.RejectBatchFailed,
					Reason: fmt.Sprintf("batch %s failed: %s", fb.Ref, failed.Reason)}
				rejects = append(rejects, r)
				pageRejects = append(pageRejects, r)
				if it.Kind() == crawl.RepositoryTests {
					pageYields = append(pageYields, rows.EarlyYield(it.Path, it.Key, schemas.YieldBatchFailed, r.Reason))
				}
			}
			continue
		}
		rec, err := readRecordAt(ctx, s, o.Record, fb.Hash)
		if err != nil {
			return nil, err
		}
		ps.Counts[schemas.CountItems] += int64(rec.Items)
		if rec.Shard != nil {
			shards = append(shards, *rec.Shard)
		}
		if rec.Packed != nil {
			packed = append(packed, *rec.Packed)
		}
		rejects = append(rejects, rec.Rejects...)
		yields = append(yields, rec.Yields...)
		ps.Counts.Add(rec.Counts)
		bs, err := statsOf(ctx, s, rec)
		if err != nil {
			return nil, err
		}
		stats.Merge(bs)
		if i%256 == 255 {
			beat.beat(i + 1)
		}
	}
	// The shards are there, as their records say (a page at a time: the commit reads no shard).
	if err := dataset.CheckStored(ctx, s, append(slices.Clone(shards), packed...)); err != nil {
		return nil, err
	}
	for _, x := range []struct {
		list []dataset.ShardInfo
		dst  **dataset.ShardPage
		name string
	}{{shards, &ps.Shards, "shards"}, {packed, &ps.Packed, "packed"}} {
		if len(x.list) == 0 {
			continue
		}
		pg, err := dataset.PutShardPage(ctx, s, fmt.Sprintf("%s%s/%s-%06d.jsonl", run.VersionPrefix(), x.name, p, page), x.list)
		if err != nil {
			return nil, err
		}
		*x.dst = &pg
	}
	slices.SortStableFunc(rejects, func(a, b schemas.Reject) int { return strings.Compare(a.Key, b.Key) })
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range rejects {
		countReject(ps.Counts, r)
		if err := enc.Encode(r); err != nil {
			return nil, err
		}
	}
	ps.Counts[schemas.CountRejects] += int64(len(rejects))
	if len(rejects) > 0 {
		ref, err := dataset.PutObject(ctx, s, fmt.Sprintf("%srejects/%s-%06d.jsonl", run.VersionPrefix(), p, page), buf.Bytes(), int64(len(rejects)))
		if err != nil {
			return nil, err
		}
		ps.Rejects = &ref
	}
	stats.AddRejects(pageRejects)
	stats.AddYields(pageYields)
	if yields = append(yields, pageYields...); len(yields) > 0 {
		slices.SortStableFunc(yields, func(a, b schemas.RepoYield) int { return strings.Compare(a.Key, b.Key) })
		buf.Reset()
		for _, y := range yields {
			if err := enc.Encode(y); err != nil {
				return nil, err
			}
		}
		ref, err := dataset.PutObject(ctx, s, fmt.Sprintf("%srepos/%s-%06d.jsonl", run.VersionPrefix(), p, page), buf.Bytes(), int64(len(yields)))
		if err != nil {
			return nil, err
		}
		ps.Repos = &ref
	}
	sdata, err := json.Marshal(stats)
	if err != nil {
		return nil, err
	}
	ps.Stats = fmt.Sprintf("%sfinal/%s-page-%06d.stats.json", run.WorkPrefix(), p, page)
	if err := s.Put(ctx, ps.Stats, sdata, nil); err != nil {
		return nil, err
	}
	data, err := json.Marshal(ps)
	if err != nil {
		return nil, err
	}
	if _, err := s.PutFirst(ctx, key, data, "application/json"); err != nil {
		return nil, err
	}
	return ps, nil
}

// countReject counts a reject by class (and the evaluation set of a decontaminated one).
func countReject(counts schemas.Counts, r schemas.Reject) {
	class := r.Class
	if class == "" {
		class = schemas.RejectClass(dataset.ReasonClass(r.Reason))
	}
	counts[schemas.CountRejectClass(class)]++
	switch r.Class {
	case schemas.RejectDuplicate:
		counts[schemas.CountDuplicates]++
	case schemas.RejectDecontaminated:
		counts[schemas.CountDecontaminated(r.EvalSet)]++
	}
}

// CommitInput says what a version holds: the pages to gather, by phase.
type CommitInput struct {
	// Pages counts the formed pages of each phase.
	Pages map[Phase]int `json:"pages"`
	// KeysPhase is the phase whose dedup keys are the version's (the last that ran).
	KeysPhase Phase `json:"keys_phase"`
	// Tokenizer is the tokenizer's name as recorded (its Name()).
	Tokenizer string `json:"tokenizer"`
}

// maxFailedReported bounds the failed batches a CommitResult lists.
const maxFailedReported = 50

// CommitResult is the committed version's summary.
type CommitResult struct {
	Manifest string         `json:"manifest"`
	Version  string         `json:"version"`
	Head     bool           `json:"head"`
	Totals   dataset.Totals `json:"totals"`
	Counts   schemas.Counts `json:"counts"`
	// Failed lists the first maxFailedReported failed batches (Counts["batches_failed"] counts
	// them all; the manifest lists them all).
	Failed []FailedBatch `json:"failed,omitempty"`
}

// Commit gathers the page summaries into the version's manifest and commits it (dataset.Commit):
// the rejects, dedup keys and statistics it references by sha256 were written by the pages and
// the merges, under the version's prefix or as write-once objects.
func Commit(ctx context.Context, s *store.Store, run Run, in CommitInput, tok tokenize.Tokenizer, beat Beat) (CommitResult, error) {
	counts := schemas.Counts{}
	var shards, packed []dataset.ShardPage
	var rejects, repos []dataset.ObjectRef
	var failed []dataset.FailedBatch
	var out []FailedBatch
	stats := &dataset.StatsPart{}
	for _, p := range []Phase{PhaseSources, PhaseFunctions} {
		for page := 0; page < in.Pages[p]; page++ {
			ps, err := FinalizePage(ctx, s, run, p, page, nil)
			if err != nil {
				return CommitResult{}, err
			}
			if ps.Shards != nil {
				shards = append(shards, *ps.Shards)
			}
			if ps.Packed != nil {
				packed = append(packed, *ps.Packed)
			}
			if ps.Rejects != nil {
				rejects = append(rejects, *ps.Rejects)
			}
			if ps.Repos != nil {
				repos = append(repos, *ps.Repos)
			}
			for _, f := range ps.Failed {
				failed = append(failed, dataset.FailedBatch{Batch: f.Ref, Items: f.Items, Reason: f.Reason})
				out = append(out, f)
			}
			counts.Add(ps.Counts)
			data, err := s.ReadAll(ctx, ps.Stats)
			if err != nil {
				return CommitResult{}, err
			}
			part, err := dataset.ParseStatsPart(data)
			if err != nil {
				return CommitResult{}, fmt.Errorf("statistics of %s page %d: %w", p, page, err)
			}
			stats.Merge(part)
			beat.beat(page + 1)
		}
	}
	keys, err := keyRefs(ctx, s, run, in.KeysPhase)
	if err != nil {
		return CommitResult{}, err
	}
	cfg, err := json.Marshal(run.Spec)
	if err != nil {
		return CommitResult{}, err
	}
	man := dataset.Manifest{CreatedAt: run.CreatedAt, Config: cfg,
		Versions:   dataset.Versions{Tracer: sandbox.TracerVersion, Pipeline: rows.Version, Tokenizer: in.Tokenizer},
		ShardIndex: shards, Counts: counts, Rejects: rejects, Repos: repos, DedupKeys: keys, FailedBatches: failed}
	if n := run.Spec.PackLength; n > 0 {
		pad, ok := tok.SpecialID(tokenize.EndOfText)
		if !ok {
			return CommitResult{}, execute.BadInput("tokenizer %s has no id for %s", tok.Name(), tokenize.EndOfText)
		}
		man.Packing = &dataset.Packing{Length: n, PadID: pad, Index: packed}
	}
	if err := putStats(ctx, s, run, &man, stats); err != nil {
		return CommitResult{}, err
	}
	m, head, err := dataset.Commit(ctx, s, run.ID, man)
	if err != nil {
		return CommitResult{}, fmt.Errorf("commit: %w", err)
	}
	// The head's files: data/ and packed/ hold copies of its shards only, and the dataset card
	// (README.md) describes it. Run whether or not this version is the head: the head may be a
	// version whose commit has not published yet (or crashed before it did).
	if _, err := dataset.Publish(ctx, s, func(n int) { beat.beat(fmt.Sprintf("publish %d", n)) }); err != nil {
		return CommitResult{}, fmt.Errorf("publish: %w", err)
	}
	if len(out) > maxFailedReported {
		out = out[:maxFailedReported] // the manifest lists them all; the result travels in histories
	}
	return CommitResult{Manifest: s.URL(), Version: run.ID, Head: head, Totals: m.Totals, Counts: counts, Failed: out}, nil
}

// keyRefs references the dedup key shards of phase p (which hold every key of the run so far).
func keyRefs(ctx context.Context, s *store.Store, run Run, p Phase) ([]dataset.ObjectRef, error) {
	var refs []dataset.ObjectRef
	for k := 0; k < 256; k++ {
		key := run.keysShardKey(p, k)
		info, err := s.Stat(ctx, key)
		if store.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sum, ok := info.Metadata["sha256"]
		if !ok {
			// No metadata (a local folder opened with metadata=skip): hash the object.
			data, err := s.ReadLimit(ctx, key, info.Size)
			if err != nil {
				return nil, err
			}
			h := sha256.Sum256(data)
			sum = hex.EncodeToString(h[:])
		}
		refs = append(refs, dataset.ObjectRef{Key: key, SHA256: sum, Bytes: info.Size})
	}
	return refs, nil
}

// putStats writes the version's statistics (stats.json, stats.parquet) from its merged parts and
// references them from man.
func putStats(ctx context.Context, s *store.Store, run Run, man *dataset.Manifest, part *dataset.StatsPart) error {
	norm, err := dataset.Normalized(*man)
	if err != nil {
		return err
	}
	st := part.Stats(norm)
	js, err := st.Marshal()
	if err != nil {
		return err
	}
	pq, err := st.EncodeParquet()
	if err != nil {
		return err
	}
	ref, err := dataset.PutObject(ctx, s, run.VersionPrefix()+dataset.StatsKey, js, 0)
	if err != nil {
		return err
	}
	pref, err := dataset.PutObject(ctx, s, run.VersionPrefix()+dataset.StatsParquetKey, pq, 0)
	if err != nil {
		return err
	}
	man.Stats, man.StatsParquet = &ref, &pref
	return nil
}

// pageOutcome is what became of one batch of a page, as its finalization saw it once: its record
// (the key it is under), or its failure.
type pageOutcome struct {
	FormedBatch
	Record string `json:"record,omitempty"`
	Failed bool   `json:"failed,omitempty"`
}

// pageOutcomes returns the outcome of every batch of a page, fixed by the first finalization that
// looked (written once): a batch that fails in this run and gets its record from another run
// meanwhile stays failed in this version, so that every attempt builds the same objects.
func pageOutcomes(ctx context.Context, s *store.Store, run Run, p Phase, page int) ([]pageOutcome, error) {
	key := fmt.Sprintf("%sfinal/%s-page-%06d.outcomes.jsonl", run.WorkPrefix(), p, page)
	if _, err := s.Stat(ctx, key); store.IsNotExist(err) {
		formed, err := readFormed(ctx, s, run, p, page)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for _, fb := range formed {
			o := pageOutcome{FormedBatch: fb}
			for _, k := range []string{run.runRecordKey(fb.Hash), recordKey(fb.Hash)} {
				ok, err := s.Exists(ctx, k)
				if err != nil {
					return nil, err
				}
				if ok {
					o.Record = k
					break
				}
			}
			if o.Record == "" {
				ok, err := s.Exists(ctx, run.FailedKey(fb.Ref))
				if err != nil {
					return nil, err
				}
				if !ok {
					return nil, fmt.Errorf("batch %s has neither a record nor a failure", fb.Ref)
				}
				o.Failed = true
			}
			if err := enc.Encode(o); err != nil {
				return nil, err
			}
		}
		if _, err := s.PutFirst(ctx, key, buf.Bytes(), "application/jsonl"); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	return readJSONL[pageOutcome](ctx, s, key)
}
