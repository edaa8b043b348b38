package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// PageItems is how many items a planning page holds at most: it bounds a scan's memory (one page)
// and the fan-in of the dedup merge (one run per page; docs/operations.md).
const PageItems = 16384

// MaxPageBytes bounds the items of a planning page in bytes too (their JSON): a files source's
// items carry their files, up to limits.repo_bytes each, and a page of them ends once it holds
// this much. A variable for tests.
var MaxPageBytes = 256 << 20

// errPageFull ends a page's scan once it holds MaxPageBytes.
var errPageFull = errors.New("page full")

// ScanCursor is where a phase's scan goes on: for the sources' phase, the source and the position in
// it; for the functions' phase, the next repository batch. Ordinal is the next item's.
type ScanCursor struct {
	Source  int                `json:"source"`
	At      crawl.SourceCursor `json:"at"`
	Ordinal int64              `json:"ordinal"`
}

// ScanResult is a scanned page.
type ScanResult struct {
	Page int `json:"page"`
	// First is the page's first ordinal; Items, Repos and Rejects count its entries.
	First   int64 `json:"first"`
	Items   int   `json:"items"`
	Repos   int   `json:"repos"`
	Rejects int   `json:"rejects"`
	// Classes counts the page's rejects by class (for the workers' metrics).
	Classes map[schemas.RejectClass]int `json:"classes,omitempty"`
	// Next is where the next page starts; Done says the phase's input is over (this page may be
	// empty then).
	Next ScanCursor `json:"next"`
	Done bool       `json:"done"`
}

// pageLine is one line of a page's items: the item, its ordinal in the phase and, for a function
// found in a repository, its trace (traced with the repository).
type pageLine struct {
	Ordinal int64               `json:"o"`
	Item    crawl.Item          `json:"item"`
	Traced  *execute.TracedItem `json:"traced,omitempty"`
}

// pageWriter collects a page's outputs.
type pageWriter struct {
	items   bytes.Buffer
	enc     *json.Encoder
	keys    []keyRecord
	rejects bytes.Buffer
	renc    *json.Encoder
	res     ScanResult
	sets    []*crawl.EvalSet
}

func newPageWriter(page int, first int64, sets []*crawl.EvalSet) *pageWriter {
	w := &pageWriter{sets: sets, res: ScanResult{Page: page, First: first}}
	w.enc = json.NewEncoder(&w.items)
	w.renc = json.NewEncoder(&w.rejects)
	return w
}

// reject records a reject of the page.
func (w *pageWriter) reject(r schemas.Reject) error {
	w.res.Rejects++
	if w.res.Classes == nil {
		w.res.Classes = map[schemas.RejectClass]int{}
	}
	w.res.Classes[r.Class]++
	return w.renc.Encode(r)
}

// item records an item at ordinal o, unless it is a function of an evaluation set.
func (w *pageWriter) item(it crawl.Item, traced *execute.TracedItem, o *int64) error {
	if it.Kind() == crawl.FunctionCall {
		for _, s := range w.sets {
			if s.Contains(it.Source()) {
				return w.reject(schemas.Reject{Source: it.Origin(), Key: it.Key, Class: schemas.RejectDecontaminated,
					Reason: "decontaminated: " + s.Name, EvalSet: s.Name})
			}
		}
	}
	if err := w.enc.Encode(pageLine{Ordinal: *o, Item: it, Traced: traced}); err != nil {
		return fmt.Errorf("encode item %s: %w", it.Key, err)
	}
	w.keys = append(w.keys, itemRecord(&it, uint64(*o)))
	*o++
	w.res.Items++
	if it.Kind() == crawl.RepositoryTests {
		w.res.Repos++
	}
	return nil
}

// write stores the page's objects, the done marker last: a retry before the marker writes them
// again, a retry after it finds the result.
func (w *pageWriter) write(ctx context.Context, s *store.Store, run Run, p Phase) (ScanResult, error) {
	if err := s.Put(ctx, run.pageItemsKey(p, w.res.Page), w.items.Bytes(), nil); err != nil {
		return ScanResult{}, err
	}
	if err := s.Put(ctx, run.pageKeysKey(p, w.res.Page), encodeRun(w.keys), nil); err != nil {
		return ScanResult{}, err
	}
	if err := s.Put(ctx, run.pageRejectsKey(p, w.res.Page), w.rejects.Bytes(), nil); err != nil {
		return ScanResult{}, err
	}
	data, err := json.Marshal(w.res)
	if err != nil {
		return ScanResult{}, err
	}
	if _, err := s.PutOnce(ctx, run.pageDoneKey(p, w.res.Page), data, "application/json", nil); err != nil {
		return ScanResult{}, err
	}
	return w.res, nil
}

// pageDone returns the recorded result of a page scanned before, if any.
func pageDone(ctx context.Context, s *store.Store, run Run, p Phase, page int) (*ScanResult, error) {
	return readDone[ScanResult](ctx, s, run.pageDoneKey(p, page), fmt.Sprintf("page %d", page))
}

// ScanPage scans page page of the run's sources from cursor from: up to PageItems items, with
// their dedup keys and the page's rejects (malformed entries, repositories that cannot be used,
// functions of the evaluation sets). A page scanned before is not scanned again.
func ScanPage(ctx context.Context, s *store.Store, run Run, f *crawl.Fetcher, sets []*crawl.EvalSet, page int, from ScanCursor, beat Beat) (ScanResult, error) {
	if done, err := pageDone(ctx, s, run, PhaseSources, page); err != nil || done != nil {
		if done != nil {
			return *done, nil
		}
		return ScanResult{}, err
	}
	w := newPageWriter(page, from.Ordinal, sets)
	cur := from
	srcs := run.Spec.Sources
	// Resolving a page of repositories takes a while before any entry comes: beat meanwhile.
	ctx = crawl.WithProgress(ctx, func() { beat.beat(w.res.Items + w.res.Rejects) })
	size := run.pageItems()
	if f.MaxGroupBytes == 0 && run.Spec.Limits.RepoBytes > 0 {
		fc := *f // a files source's groups stay within limits.repo_bytes
		fc.MaxGroupBytes = run.Spec.Limits.RepoBytes
		f = &fc
	}
	for cur.Source < len(srcs) && w.res.Items < size && w.items.Len() < MaxPageBytes {
		src := srcs[cur.Source]
		var ferr error
		next, done, err := f.Scan(ctx, src, cur.At, size-w.res.Items, func(e crawl.Entry) error {
			beat.beat(w.res.Items + w.res.Rejects)
			if w.items.Len() >= MaxPageBytes {
				// Items that carry their files (a files source's) fill a page by bytes first:
				// the page ends before this entry, which the next page begins with.
				return errPageFull
			}
			if e.Reject != nil {
				ferr = w.reject(*e.Reject)
			} else {
				ferr = w.item(*e.Item, nil, &cur.Ordinal)
			}
			return ferr
		})
		if errors.Is(err, errPageFull) {
			cur.At = next
			break
		}
		if err != nil {
			if ferr != nil {
				return ScanResult{}, ferr
			}
			if errors.Is(err, fs.ErrNotExist) || store.IsNotExist(err) {
				return ScanResult{}, execute.BadInput("sources[%d]: %v", cur.Source, err)
			}
			return ScanResult{}, fmt.Errorf("sources[%d]: %w", cur.Source, err)
		}
		cur.At = next
		if done {
			cur.Source++
			cur.At = crawl.SourceCursor{}
		}
	}
	w.res.Next = cur
	w.res.Done = cur.Source >= len(srcs)
	return w.write(ctx, s, run, PhaseSources)
}

// ScanFunctions scans page page of the functions' phase: the function-level items found in the
// repositories of the sources' phase (traced with their repository), from repository batch
// from.Source on, until a page holds PageItems items or more. Function-level items never come from
// a repository the spec does not ask them of.
func ScanFunctions(ctx context.Context, s *store.Store, run Run, sets []*crawl.EvalSet, repoBatches int, page int, from ScanCursor, beat Beat) (ScanResult, error) {
	if done, err := pageDone(ctx, s, run, PhaseFunctions, page); err != nil || done != nil {
		if done != nil {
			return *done, nil
		}
		return ScanResult{}, err
	}
	w := newPageWriter(page, from.Ordinal, sets)
	cur := from
	// A page of this phase carries its items' traces (made with their repository): a sixteenth
	// of a page's items, so that its memory stays near a page of the sources' phase.
	for cur.Source < repoBatches && w.res.Items < max(run.pageItems()/16, 1) {
		ref := BatchRef{Phase: PhaseSources, Kind: BatchRepo, Index: cur.Source}
		b, err := ReadBatch(ctx, s, run, ref)
		if err != nil {
			return ScanResult{}, err
		}
		if failed, err := s.Exists(ctx, run.FailedKey(ref)); err != nil {
			return ScanResult{}, err
		} else if failed {
			// The repository's batch failed: it gives no function-level items (its items are
			// rejects of class batch_failed).
			cur.Source++
			continue
		}
		ts, err := readTraces(ctx, s, run, b)
		if err != nil {
			return ScanResult{}, err
		}
		for _, t := range ts {
			if t.Repo == nil {
				continue
			}
			for i := range t.Repo.Functions {
				ft := t.Repo.Functions[i]
				if err := w.item(ft.Item, &ft, &cur.Ordinal); err != nil {
					return ScanResult{}, err
				}
			}
		}
		cur.Source++
		beat.beat(cur.Source)
	}
	w.res.Next = cur
	w.res.Done = cur.Source >= repoBatches
	return w.write(ctx, s, run, PhaseFunctions)
}

// EvalSets reads the evaluation sets a spec decontaminates against (indexed once per process
// for the same files and options).
func EvalSets(ctx context.Context, spec schemas.Spec) ([]*crawl.EvalSet, error) {
	return cachedEvalSets(ctx, spec)
}
