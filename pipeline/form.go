package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// PlannedBatch is one batch of a plan, stored as one object: a batch's workflow reads only its own.
type PlannedBatch struct {
	// Hash covers the spec (what changes rows) and the items' content: an unchanged batch is found
	// again by a later run, and its record and shard reused.
	Hash  string       `json:"hash"`
	Items []crawl.Item `json:"items"`
}

// newBatch is the planned batch of items, its hash salted with salt (the spec's hash, and the
// phase for the functions found in repositories).
func newBatch(salt string, items []crawl.Item) PlannedBatch {
	h := sha256.New()
	h.Write([]byte(salt))
	for _, it := range items {
		h.Write([]byte(it.Hash()))
	}
	return PlannedBatch{Items: items, Hash: hex.EncodeToString(h.Sum(nil))}
}

// batchSalt is what a phase's batch hashes are salted with: the spec's hash, and the content of
// its evaluation sets (rows are decontaminated when a batch's shard is built, and a batch whose
// record exists is reused: a set changed at the same path must not leave the rows it now
// matches).
func batchSalt(ctx context.Context, run Run, p Phase) (string, error) {
	salt := run.Spec.Hash()
	if p == PhaseFunctions {
		salt += "functions from repositories"
	}
	for i, e := range run.Spec.Decontaminate {
		data, err := crawl.ReadEvalFile(ctx, e.Path)
		if err != nil {
			return "", execute.BadInput("decontaminate[%d]: evaluation set %s: %v", i, e.Name, err)
		}
		salt += fmt.Sprintf("\x00eval set %d %x", i, sha256.Sum256(data))
	}
	return salt, nil
}

// ReadBatch reads a planned batch.
func ReadBatch(ctx context.Context, s *store.Store, run Run, ref BatchRef) (*PlannedBatch, error) {
	b, err := readJSON[PlannedBatch](ctx, s, run.BatchKey(ref), "batch "+ref.String())
	if err != nil {
		return nil, fmt.Errorf("batch %s: %w", ref, err)
	}
	return b, nil
}

// FormResult is the state of a phase's batch formation after a page: the batches formed so far,
// and the functions waiting for the next page to fill a batch (Carry).
type FormResult struct {
	Page        int `json:"page"`
	RepoBatches int `json:"repo_batches"`
	FuncBatches int `json:"func_batches"`
	Carry       int `json:"carry"`
	// Items counts the items planned into batches so far, Rejects the duplicates dropped.
	Items   int64 `json:"items"`
	Rejects int64 `json:"rejects"`
}

// FormBatches forms the batches of page page of a phase (of pages in all), after prev (the state
// after the page before; zero for page 0): each repository is a batch of its own, functions go
// BatchSize to a batch in ordinal order across pages, and the page's duplicates (MergeKeys) become
// rejects. In the functions' phase, the items' traces (made with their repository) are stored as
// the batches' trace chunks, so tracing them has nothing left to do. A page formed before is not
// formed again.
func FormBatches(ctx context.Context, s *store.Store, run Run, p Phase, page, pages int, prev FormResult, beat Beat) (FormResult, error) {
	if done, err := readDone[FormResult](ctx, s, run.formDoneKey(p, page), fmt.Sprintf("formed page %d", page)); err != nil || done != nil {
		if err != nil {
			return FormResult{}, err
		}
		return *done, nil
	}
	res := prev
	res.Page = page
	var fns []pageLine
	if prev.Carry > 0 {
		var err error
		if fns, err = readJSONL[pageLine](ctx, s, run.formCarryKey(p, page-1)); err != nil {
			return FormResult{}, fmt.Errorf("carry of page %d: %w", page-1, err)
		}
	}
	drops, err := readDrops(ctx, s, run, p, page)
	if err != nil {
		return FormResult{}, err
	}
	data, err := s.ReadAll(ctx, run.pageItemsKey(p, page))
	if err != nil {
		return FormResult{}, err
	}
	var rejects, formed bytes.Buffer
	renc := json.NewEncoder(&rejects)
	fenc := json.NewEncoder(&formed)
	put := func(ref BatchRef, b PlannedBatch) error {
		if err := writeBatch(ctx, s, run, ref, b); err != nil {
			return err
		}
		beat.beat(ref.String()) // a page of repositories writes 16,384 batches
		return fenc.Encode(FormedBatch{Ref: ref, Hash: b.Hash, Items: len(b.Items)})
	}
	salt, err := batchSalt(ctx, run, p)
	if err != nil {
		return FormResult{}, err
	}
	size := run.Spec.BatchSize
	writeFuncs := func(ls []pageLine) error {
		items := make([]crawl.Item, len(ls))
		for i := range ls {
			items[i] = ls[i].Item
		}
		b := newBatch(salt, items)
		if err := put(BatchRef{Phase: p, Kind: BatchFunc, Index: res.FuncBatches}, b); err != nil {
			return err
		}
		if p == PhaseFunctions {
			traced := make([]execute.TracedItem, len(ls))
			for i := range ls {
				if ls[i].Traced == nil {
					return fmt.Errorf("function %s of the functions' phase has no trace", ls[i].Item.Key)
				}
				traced[i] = *ls[i].Traced
			}
			if err := writeTraces(ctx, s, b.Hash, traced); err != nil {
				return err
			}
		}
		res.FuncBatches++
		res.Items += int64(len(ls))
		return nil
	}
	err = eachJSONLine(data, func(line []byte) error {
		var l pageLine
		if err := json.Unmarshal(line, &l); err != nil {
			return err
		}
		if first, ok := drops[l.Ordinal]; ok {
			res.Rejects++
			return renc.Encode(schemas.Reject{Source: l.Item.Origin(), Key: l.Item.Key, Class: schemas.RejectDuplicate,
				Reason: "duplicate of " + first})
		}
		if l.Item.Kind() == crawl.RepositoryTests {
			b := newBatch(salt, []crawl.Item{l.Item})
			if err := put(BatchRef{Phase: p, Kind: BatchRepo, Index: res.RepoBatches}, b); err != nil {
				return err
			}
			res.RepoBatches++
			res.Items++
			return nil
		}
		fns = append(fns, l)
		if len(fns) == size {
			if err := writeFuncs(fns); err != nil {
				return err
			}
			fns = fns[:0]
		}
		return nil
	})
	if err != nil {
		return FormResult{}, fmt.Errorf("page %d: %w", page, err)
	}
	res.Carry = 0
	if len(fns) > 0 {
		if page == pages-1 {
			if err := writeFuncs(fns); err != nil {
				return FormResult{}, err
			}
		} else {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			for _, l := range fns {
				if err := enc.Encode(l); err != nil {
					return FormResult{}, err
				}
			}
			if err := s.Put(ctx, run.formCarryKey(p, page), buf.Bytes(), nil); err != nil {
				return FormResult{}, err
			}
			res.Carry = len(fns)
		}
	}
	if err := s.Put(ctx, run.formRejectsKey(p, page), rejects.Bytes(), nil); err != nil {
		return FormResult{}, err
	}
	if err := s.Put(ctx, run.formedKey(p, page), formed.Bytes(), nil); err != nil {
		return FormResult{}, err
	}
	out, err := json.Marshal(res)
	if err != nil {
		return FormResult{}, err
	}
	if _, err := s.PutOnce(ctx, run.formDoneKey(p, page), out, "application/json", nil); err != nil {
		return FormResult{}, err
	}
	return res, nil
}

// writeBatch stores a planned batch. The same run forms the same batches (its pages are fixed
// once scanned), so a retry writes the same bytes.
func writeBatch(ctx context.Context, s *store.Store, run Run, ref BatchRef, b PlannedBatch) error {
	data, err := json.Marshal(b)
	if err != nil {
		return err
	}
	if err := s.Put(ctx, run.BatchKey(ref), data, nil); err != nil {
		return fmt.Errorf("write batch %s: %w", ref, err)
	}
	return nil
}

// FormedBatch is one batch formed in a page, as FinalizePage finds it.
type FormedBatch struct {
	Ref   BatchRef `json:"ref"`
	Hash  string   `json:"hash"`
	Items int      `json:"items"`
}

func (r Run) formedKey(p Phase, page int) string {
	return fmt.Sprintf("%sform/page-%06d.batches.jsonl", r.phasePrefix(p), page)
}

// readFormed lists the batches formed in a page.
func readFormed(ctx context.Context, s *store.Store, run Run, p Phase, page int) ([]FormedBatch, error) {
	return readJSONL[FormedBatch](ctx, s, run.formedKey(p, page))
}
