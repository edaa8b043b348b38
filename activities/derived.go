package activities

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/ndtrace/ndtrace/store"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/schemas"
)

// filter applies exact deduplication and decontamination to function-level items in order: an item
// whose DedupKey was seen before (in seen, which it updates) is a duplicate of the first; an item
// whose source is in an evaluation set is excluded. Both become rejects whose reasons start with
// "duplicate of" and "decontaminated:" (counted in the manifest as duplicates and
// decontaminated:<set>). Repository-level items pass through.
type filter struct {
	dedup bool
	sets  []*crawl.EvalSet
	seen  map[string]string // dedup key -> the first item's key
}

// newFilter reads the spec's evaluation sets.
func newFilter(ctx context.Context, spec schemas.Spec) (*filter, error) {
	f := &filter{dedup: spec.DedupOn(), seen: map[string]string{}}
	for i, u := range spec.DedupAgainst {
		keys, err := readDedupKeys(ctx, u)
		if err != nil {
			return nil, badInput("dedup_against[%d]: %v", i, err)
		}
		for k, item := range keys {
			f.seen[k] = item + " in " + u
		}
	}
	for i, e := range spec.Decontaminate {
		set, err := crawl.ReadEvalSet(ctx, e.Name, e.Path)
		if err != nil {
			return nil, badInput("decontaminate[%d]: %v", i, err)
		}
		f.sets = append(f.sets, set)
	}
	return f, nil
}

// reject returns the reason an item is filtered out, or "" if it is kept.
func (f *filter) reject(it crawl.Item) string {
	if it.Repo != nil {
		return ""
	}
	for _, s := range f.sets {
		if s.Contains(it.Source()) {
			return "decontaminated: " + s.Name
		}
	}
	if !f.dedup {
		return ""
	}
	k := it.DedupKey()
	if first, ok := f.seen[k]; ok {
		return "duplicate of " + first
	}
	f.seen[k] = it.Key
	return ""
}

// items filters items (see reject) and returns those kept and the rejects.
func (f *filter) items(items []crawl.Item) ([]crawl.Item, []crawl.Reject) {
	kept := items[:0:0]
	var rejects []crawl.Reject
	for _, it := range items {
		if r := f.reject(it); r != "" {
			rejects = append(rejects, crawl.Reject{Source: rejectSource(it), Key: it.Key, Reason: r})
			continue
		}
		kept = append(kept, it)
	}
	return kept, rejects
}

// PlanFunctionsInput names the plan whose repositories' function-level items are planned.
type PlanFunctionsInput struct {
	Spec    schemas.Spec
	Dataset string
	PlanKey string
}

// PlanFunctions plans the second phase of a dataset with repository sources: the function-level
// items found in the repositories' test traces (already traced by TraceBatch), deduplicated
// against each other and every function-level item of the first plan, and decontaminated, in plan
// order (so the same repositories always give the same items). Their traces are stored as the trace
// chunks of the new batches, so the batches only build rows. It returns the new plan (zero batches
// if there is nothing to add).
func (a *Activities) PlanFunctions(ctx context.Context, in PlanFunctionsInput) (PlanResult, error) {
	st, err := store.Open(ctx, in.Dataset)
	if err != nil {
		return PlanResult{}, err
	}
	defer st.Close()
	p, err := readPlan(ctx, st, in.PlanKey)
	if err != nil {
		return PlanResult{}, err
	}
	f, err := newFilter(ctx, in.Spec)
	if err != nil {
		return PlanResult{}, err
	}
	for _, b := range p.Batches {
		for _, it := range b.Items {
			if it.Repo == nil {
				f.reject(it) // the first plan's items come first
			}
		}
	}
	var kept []traced
	out := plan{SpecHash: p.SpecHash}
	for _, b := range p.Batches {
		if !hasRepo(b.Items) {
			continue
		}
		for c := 0; c*traceChunk < len(b.Items); c++ {
			ts, err := readChunk(ctx, st, chunkKey(b.Hash, c))
			if err != nil {
				return PlanResult{}, err
			}
			for _, t := range ts {
				if t.Repo == nil {
					continue
				}
				for _, ft := range t.Repo.Functions {
					if r := f.reject(ft.Item); r != "" {
						out.Rejects = append(out.Rejects, crawl.Reject{Source: rejectSource(ft.Item), Key: ft.Item.Key, Reason: r})
						continue
					}
					kept = append(kept, ft)
				}
			}
		}
	}
	size := in.Spec.BatchSize
	items := 0
	for start := 0; start < len(kept); start += size {
		ts := kept[start:min(start+size, len(kept))]
		batchItems := make([]crawl.Item, len(ts))
		for i, t := range ts {
			batchItems[i] = t.Item
		}
		b := newBatch(p.SpecHash+"functions from repositories", batchItems)
		for c := 0; c*traceChunk < len(ts); c++ {
			if err := writeChunk(ctx, st, chunkKey(b.Hash, c), ts[c*traceChunk:min((c+1)*traceChunk, len(ts))]); err != nil {
				return PlanResult{}, err
			}
		}
		items += len(ts)
		out.Batches = append(out.Batches, b)
	}
	key, err := storePlan(ctx, st, out)
	if err != nil {
		return PlanResult{}, err
	}
	return PlanResult{PlanKey: key, Batches: len(out.Batches), Items: items, SourceRejects: len(out.Rejects)}, nil
}

// rejectSource is the source a reject of it is recorded under: the repository a function was
// found in, or the item's path.
func rejectSource(it crawl.Item) string {
	if it.RepoURL != "" {
		return it.RepoURL
	}
	return it.Path
}

// hasRepo reports whether a batch holds a repository-level item.
func hasRepo(items []crawl.Item) bool {
	for _, it := range items {
		if it.Repo != nil {
			return true
		}
	}
	return false
}

// readChunk reads one stored chunk of traces.
func readChunk(ctx context.Context, st *store.Store, key string) ([]traced, error) {
	data, err := st.ReadAll(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read traces: %w", err)
	}
	var out []traced
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	for sc.Scan() {
		var t traced
		if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
			return nil, fmt.Errorf("read traces %s: %w", key, err)
		}
		out = append(out, t)
	}
	return out, sc.Err()
}

// dedupKeysKey is the object, next to the manifest, that lists the dedup keys of a dataset's
// function-level items (for dedup_against in later runs).
const dedupKeysKey = "dedup_keys.json"

// dedupKeys is the content of dedup_keys.json.
type dedupKeys struct {
	Format string `json:"format"`
	// Keys maps the dedup key (crawl.Item.DedupKey) of every function-level item planned into a
	// batch to the item's key.
	Keys map[string]string `json:"keys"`
}

// writeDedupKeys stores the dedup keys of the function-level items of plans.
func writeDedupKeys(ctx context.Context, st *store.Store, plans []*plan) error {
	d := dedupKeys{Format: "ndtrace-dedup-keys", Keys: map[string]string{}}
	for _, p := range plans {
		for _, b := range p.Batches {
			for _, it := range b.Items {
				if it.Repo == nil {
					if _, ok := d.Keys[it.DedupKey()]; !ok {
						d.Keys[it.DedupKey()] = it.Key
					}
				}
			}
		}
	}
	data, err := json.Marshal(d) // map keys sorted: the same items give the same bytes
	if err != nil {
		return err
	}
	if err := st.Put(ctx, dedupKeysKey, data, nil); err != nil {
		return fmt.Errorf("write %s: %w", dedupKeysKey, err)
	}
	return nil
}

// readDedupKeys reads the dedup keys of the dataset at url.
func readDedupKeys(ctx context.Context, url string) (map[string]string, error) {
	st, err := store.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	data, err := st.ReadAll(ctx, dedupKeysKey)
	if err != nil {
		if store.IsNotExist(err) {
			return nil, fmt.Errorf("%s has no %s (not an ndtrace dataset, or not committed)", url, dedupKeysKey)
		}
		return nil, err
	}
	var d dedupKeys
	if err := json.Unmarshal(data, &d); err != nil || d.Format != "ndtrace-dedup-keys" {
		return nil, fmt.Errorf("%s/%s is malformed", url, dedupKeysKey)
	}
	return d.Keys, nil
}
