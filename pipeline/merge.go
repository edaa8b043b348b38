package pipeline

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/ndtrace/ndtrace/store"
)

// dropFlushAt is how many duplicates a merge holds before it writes them out.
const dropFlushAt = 1 << 18

// MergeCursor is where an interrupted merge resumes: at the first key prefix (byte) whose
// duplicates are not all written, after Flushes writes.
type MergeCursor struct {
	Prefix  int `json:"prefix"`
	Flushes int `json:"flushes"`
	// Kept and Duplicates count the items merged before Prefix.
	Kept       int64 `json:"kept"`
	Duplicates int64 `json:"duplicates"`
}

// MergeResult sums up a phase's merge.
type MergeResult struct {
	// Kept counts the phase's items that are planned, Duplicates those dropped as duplicates.
	Kept       int64 `json:"kept"`
	Duplicates int64 `json:"duplicates"`
	// Flushes is how many times duplicates were written (their fragments' numbers).
	Flushes int `json:"flushes"`
}

// drop is one duplicate: the item at ordinal O duplicates the item First (its key, and " in URL"
// for an item of a dataset named in dedup_against).
type drop struct {
	O     int64  `json:"o"`
	First string `json:"first"`
}

// stream is one input of a merge.
type mergeStream struct {
	src  recordStream
	rank int    // lower wins a key: the datasets of dedup_against, the previous phase, the pages
	page int    // the page of a page run, else -1
	url  string // the dataset of a dedup_against stream
	kind int    // streamAgainst, streamPrevious, streamPage
}

const (
	streamAgainst = iota
	streamPrevious
	streamPage
)

type heapItem struct {
	rec keyRecord
	s   int
}

type recordHeap struct {
	items   []heapItem
	streams []mergeStream
}

func (h *recordHeap) Len() int { return len(h.items) }
func (h *recordHeap) Less(i, j int) bool {
	a, b := &h.items[i], &h.items[j]
	if c := bytes.Compare(a.rec.Key[:], b.rec.Key[:]); c != 0 {
		return c < 0
	}
	if ra, rb := h.streams[a.s].rank, h.streams[b.s].rank; ra != rb {
		return ra < rb
	}
	return a.rec.Ordinal < b.rec.Ordinal
}
func (h *recordHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *recordHeap) Push(x any)    { h.items = append(h.items, x.(heapItem)) }
func (h *recordHeap) Pop() any {
	n := len(h.items)
	it := h.items[n-1]
	h.items = h.items[:n-1]
	return it
}

// MergeKeys deduplicates a phase in one streaming merge of the key runs of its pages, the
// previous phase's keys (for the functions' phase) and the keys of the datasets in against. For
// each key, the first item wins: a dataset of against before this run, the previous phase before
// this one, then the lowest ordinal. The others of this phase are duplicates (only the same item
// twice when the spec turns deduplication off; a repository only when it is the same repository
// at the same commit). It writes the duplicates of each page (FormBatches drops them) and the
// run's dedup keys, sharded by their first byte, for datasets that name this one in their
// dedup_against. Memory is bounded by the number of pages (a read buffer each) and dropFlushAt.
func MergeKeys(ctx context.Context, s *store.Store, run Run, p Phase, pages int, from MergeCursor, beat Beat) (MergeResult, error) {
	if done, err := readDone[MergeResult](ctx, s, run.mergeDoneKey(p), "merge of "+string(p)); err != nil || done != nil {
		if err != nil {
			return MergeResult{}, err
		}
		return *done, nil
	}
	dedup := run.Spec.DedupOn()
	m := &merger{ctx: ctx, s: s, run: run, phase: p, dedup: dedup, drops: map[int][]drop{}, flushes: from.Flushes,
		kept: from.Kept, dups: from.Duplicates}
	defer m.closeAll()
	if err := m.open(pages, from.Prefix); err != nil {
		return MergeResult{}, err
	}
	// The resume point: the first prefix whose duplicates are not all written. A retry redoes the
	// prefixes after it (their key shards are written once, their duplicates again, in fragments
	// numbered after the last written).
	resumeAt := MergeCursor{Prefix: from.Prefix, Flushes: m.flushes, Kept: m.kept, Duplicates: m.dups}
	for prefix := from.Prefix; prefix < 256; prefix++ {
		if err := m.mergePrefix(prefix); err != nil {
			return MergeResult{}, err
		}
		if m.pending >= dropFlushAt || prefix == 255 {
			if err := m.flush(); err != nil {
				return MergeResult{}, err
			}
			resumeAt = MergeCursor{Prefix: prefix + 1, Flushes: m.flushes, Kept: m.kept, Duplicates: m.dups}
		}
		beat.beat(resumeAt) // every prefix: a large phase with few duplicates flushes rarely
	}
	res := MergeResult{Kept: m.kept, Duplicates: m.dups, Flushes: m.flushes}
	data, err := json.Marshal(res)
	if err != nil {
		return MergeResult{}, err
	}
	if _, err := s.PutOnce(ctx, run.mergeDoneKey(p), data, "application/json", nil); err != nil {
		return MergeResult{}, err
	}
	return res, nil
}

// merger holds a merge's state.
type merger struct {
	ctx     context.Context
	s       *store.Store
	run     Run
	phase   Phase
	dedup   bool
	h       recordHeap
	drops   map[int][]drop // by page
	pending int
	flushes int
	kept    int64
	dups    int64
	closers []func() error
}

func (m *merger) closeAll() {
	for _, c := range m.closers {
		c()
	}
}

// open opens every input at prefix: the datasets of dedup_against (when deduplicating), the
// previous phase's keys, the pages' runs.
func (m *merger) open(pages, prefix int) error {
	add := func(st mergeStream) error {
		m.closers = append(m.closers, st.src.close)
		m.h.streams = append(m.h.streams, st)
		return nil
	}
	rank := 0
	if m.dedup {
		for _, u := range m.run.Spec.DedupAgainst {
			src, closeStore, err := openAgainst(m.ctx, u, prefix)
			if err != nil {
				return fmt.Errorf("dedup_against %s: %w", u, err)
			}
			m.closers = append(m.closers, closeStore)
			add(mergeStream{src: src, rank: rank, page: -1, url: u, kind: streamAgainst})
			rank++
		}
	}
	if m.phase == PhaseFunctions {
		prev := PhaseSources
		add(mergeStream{src: &shardStream{ctx: m.ctx, s: m.s, keyOf: func(k int) string { return m.run.keysShardKey(prev, k) }, prefix: prefix},
			rank: rank, page: -1, kind: streamPrevious})
		rank++
	}
	for pg := 0; pg < pages; pg++ {
		rr, err := openRun(m.ctx, m.s, m.run.pageKeysKey(m.phase, pg), prefix)
		if err != nil {
			return fmt.Errorf("page %d: %w", pg, err)
		}
		add(mergeStream{src: rr, rank: rank, page: pg, kind: streamPage})
	}
	m.h.items = m.h.items[:0]
	for i := range m.h.streams {
		if err := m.advance(i); err != nil {
			return err
		}
	}
	heap.Init(&m.h)
	return nil
}

// advance pushes stream i's next record, if any (before heap.Init, or after a Pop).
func (m *merger) advance(i int) error {
	rec, err := m.h.streams[i].src.next()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	m.h.items = append(m.h.items, heapItem{rec: *rec, s: i})
	return nil
}

// mergePrefix merges the records whose key starts with prefix, and writes that prefix's shard of
// the run's keys.
func (m *merger) mergePrefix(prefix int) error {
	var keys []keyRecord // the shard: one record per key of this run's (or the previous phase's) items
	for len(m.h.items) > 0 && int(m.h.items[0].rec.Key[0]) == prefix {
		// One key's group, winner first.
		var group []heapItem
		key := m.h.items[0].rec.Key
		for len(m.h.items) > 0 && m.h.items[0].rec.Key == key {
			it := heap.Pop(&m.h).(heapItem)
			group = append(group, it)
			before := len(m.h.items)
			if err := m.advance(it.s); err != nil {
				return err
			}
			if len(m.h.items) > before {
				heap.Fix(&m.h, len(m.h.items)-1)
			}
		}
		m.group(group, &keys)
	}
	if len(keys) == 0 {
		return nil
	}
	_, err := m.s.PutFirst(m.ctx, m.run.keysShardKey(m.phase, prefix), encodeRun(keys), "application/octet-stream")
	return err
}

// group decides one key's records: the winner, the duplicates among this phase's items.
func (m *merger) group(g []heapItem, keys *[]keyRecord) {
	win := g[0]
	ws := &m.h.streams[win.s]
	first := win.rec.ItemKey
	if ws.kind == streamAgainst {
		first += " in " + ws.url
	}
	exported := false
	for i, it := range g {
		st := &m.h.streams[it.s]
		if st.kind == streamAgainst {
			continue
		}
		if !exported && it.rec.Flags&flagRepo == 0 {
			*keys = append(*keys, keyRecord{Key: it.rec.Key, Ident: it.rec.Ident, ItemKey: it.rec.ItemKey})
			exported = true
		}
		if st.kind != streamPage {
			continue
		}
		dup := i > 0 && (m.dedup || it.rec.Flags&flagRepo != 0)
		if !dup && i > 0 {
			// Without deduplication only the very same item (the same source listed twice) goes.
			for _, e := range g[:i] {
				if e.rec.Ident == it.rec.Ident && m.h.streams[e.s].kind != streamAgainst {
					dup = true
					break
				}
			}
		}
		if dup {
			m.drops[st.page] = append(m.drops[st.page], drop{O: int64(it.rec.Ordinal), First: first})
			m.pending++
			m.dups++
		} else {
			m.kept++
		}
	}
}

// flush writes the duplicates held, one fragment per page.
func (m *merger) flush() error {
	pages := make([]int, 0, len(m.drops))
	for pg := range m.drops {
		pages = append(pages, pg)
	}
	sort.Ints(pages)
	for _, pg := range pages {
		ds := m.drops[pg]
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for _, d := range ds {
			if err := enc.Encode(d); err != nil {
				return err
			}
		}
		if _, err := m.s.PutFirst(m.ctx, m.run.dropKey(m.phase, pg, m.flushes), buf.Bytes(), "application/jsonl"); err != nil {
			return err
		}
	}
	m.drops = map[int][]drop{}
	m.pending = 0
	m.flushes++
	return nil
}

// readDrops returns the duplicates of a page, by ordinal.
func readDrops(ctx context.Context, s *store.Store, run Run, p Phase, page int) (map[int64]string, error) {
	out := map[int64]string{}
	err := s.List(ctx, run.dropPrefix(p, page), func(key string, _ int64) error {
		ds, err := readJSONL[drop](ctx, s, key)
		for _, d := range ds {
			out[d.O] = d.First
		}
		return err
	})
	return out, err
}
