package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
	_ "github.com/ndtrace/ndtrace/store/drivers"
	"github.com/ndtrace/ndtrace/tokenize"
)

func openMem(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// corpus writes a JSONL corpus of n functions, every fifth a copy of the one before it (a
// duplicate), and one malformed line, and returns its path.
func corpus(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < n; i++ {
		k := i
		if i%5 == 4 {
			k = i - 1
		}
		fmt.Fprintf(&b, `{"code": "def f(x):\n    return x + %d\n", "input": "%d", "id": "item-%d"}`+"\n", k, k, i)
		if i == 7 {
			b.WriteString("{not json\n")
		}
	}
	p := filepath.Join(t.TempDir(), "corpus.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// plan runs the planning stages of phase p to the end, as the workflow does, and returns the
// pages and the last form result.
func plan(t *testing.T, s *store.Store, run Run, f *crawl.Fetcher) (int, FormResult) {
	t.Helper()
	ctx := context.Background()
	var cur ScanCursor
	pages := 0
	for {
		r, err := ScanPage(ctx, s, run, f, nil, pages, cur, nil)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		cur = r.Next
		if r.Done {
			break
		}
	}
	if _, err := MergeKeys(ctx, s, run, PhaseSources, pages, MergeCursor{}, nil); err != nil {
		t.Fatal(err)
	}
	var fr FormResult
	for pg := 0; pg < pages; pg++ {
		var err error
		if fr, err = FormBatches(ctx, s, run, PhaseSources, pg, pages, fr, nil); err != nil {
			t.Fatal(err)
		}
	}
	return pages, fr
}

// batchHashes lists the hashes of a run's planned batches, in order.
func batchHashes(t *testing.T, s *store.Store, run Run, fr FormResult) []string {
	t.Helper()
	var out []string
	for _, k := range []struct {
		kind BatchKind
		n    int
	}{{BatchRepo, fr.RepoBatches}, {BatchFunc, fr.FuncBatches}} {
		for i := 0; i < k.n; i++ {
			b, err := ReadBatch(context.Background(), s, run, BatchRef{Phase: PhaseSources, Kind: k.kind, Index: i})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b.Hash)
		}
	}
	return out
}

// TestPagedPlanning plans one corpus in pages of 16 items and in one page: the batches are the
// same (a batch's hash covers its items), duplicates are rejects of class duplicate whatever page
// their first copy is on, the malformed line is a reject, and every input line is accounted for.
func TestPagedPlanning(t *testing.T) {
	path := corpus(t, 50)
	spec := schemas.Spec{Name: "p", Sources: []schemas.SourceSpec{{Kind: "jsonl", Path: path}}, BatchSize: 8}.WithDefaults()
	created := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	var hashes [][]string
	for _, size := range []int{16, 0} {
		s := openMem(t)
		run := NewRun(spec, created)
		run.PageItems = size
		pages, fr := plan(t, s, run, &crawl.Fetcher{})
		if want := map[int]int{16: 4, 0: 1}[size]; pages != want {
			t.Errorf("page size %d: %d pages, want %d", size, pages, want)
		}
		if fr.Items != 40 || fr.FuncBatches != 5 || fr.RepoBatches != 0 || fr.Rejects != 10 {
			t.Errorf("page size %d: %+v", size, fr)
		}
		hashes = append(hashes, batchHashes(t, s, run, fr))
		// Rejects: one malformed line (scan) and ten duplicates (form), with their classes.
		classes := map[schemas.RejectClass]int{}
		for pg := 0; pg < pages; pg++ {
			ps, err := FinalizePage(context.Background(), s, run, PhaseSources, pg, nil)
			if err == nil {
				t.Fatalf("finalize before the batches ran: want an error, got %+v", ps)
			}
			for _, k := range []string{run.pageRejectsKey(PhaseSources, pg), run.formRejectsKey(PhaseSources, pg)} {
				data, err := s.ReadAll(context.Background(), k)
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
					switch {
					case l == "":
					case strings.Contains(l, `"class":"duplicate"`):
						classes[schemas.RejectDuplicate]++
					case strings.Contains(l, `"class":"malformed"`):
						classes[schemas.RejectMalformed]++
					default:
						t.Errorf("reject %s", l)
					}
				}
			}
		}
		if classes[schemas.RejectDuplicate] != 10 || classes[schemas.RejectMalformed] != 1 {
			t.Errorf("page size %d: rejects %v", size, classes)
		}
	}
	if strings.Join(hashes[0], ",") != strings.Join(hashes[1], ",") {
		t.Errorf("paged and unpaged plans differ:\n%v\n%v", hashes[0], hashes[1])
	}
}

// TestDuplicateRepository plans a spec that names the same repository twice (the built-in
// examples, listed twice): one batch for it, and the second listing is a duplicate reject, not a
// second batch (which used to fail the commit with "listed twice").
func TestDuplicateRepository(t *testing.T) {
	spec := schemas.Spec{Name: "d", Sources: []schemas.SourceSpec{{Kind: "examples"}, {Kind: "examples"}}}.WithDefaults()
	s := openMem(t)
	run := NewRun(spec, time.Unix(0, 0))
	f, closeF, err := crawl.NewFetcher(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer closeF()
	_, fr := plan(t, s, run, f)
	if fr.RepoBatches != 1 {
		t.Errorf("%d repository batches, want 1", fr.RepoBatches)
	}
	if n := len(hashesOf(t, s, run, fr)); n != fr.RepoBatches+fr.FuncBatches {
		t.Errorf("%d distinct batches of %d", n, fr.RepoBatches+fr.FuncBatches)
	}
	if fr.Rejects == 0 {
		t.Error("the second listing gave no duplicate reject")
	}
}

func hashesOf(t *testing.T, s *store.Store, run Run, fr FormResult) map[string]bool {
	out := map[string]bool{}
	for _, h := range batchHashes(t, s, run, fr) {
		out[h] = true
	}
	return out
}

// stubTracer is a stub of the sandbox for TraceBatch's logic: it "traces" an item as a clean
// return, except the item whose call is poisonCall, on which it fails as die says.
type stubTracer struct {
	poisonCall string
	// die is how an attempt dies on the poison item: "error" (the attempt fails with an error) or
	// "kill" (the attempt is cut off, as when the worker is killed: no error is reported).
	die    string
	cancel context.CancelFunc
	traced []string
}

var errStubSandbox = errors.New("stub: sandbox exhausted")

func (st *stubTracer) Trace(ctx context.Context, it crawl.Item, spec schemas.Spec, alive func()) (execute.TracedItem, error) {
	if it.Call == st.poisonCall {
		if st.die == "infra" {
			return execute.TracedItem{}, execute.InfraError(errors.New("stub: no sandbox to be had"))
		}
		if st.die == "unknown" {
			// An error of no known class (a plain one, as a failed extraction gives): it counts.
			return execute.TracedItem{}, errors.New("stub: extract: file name too long")
		}
		if st.die == "kill" {
			st.cancel()
			return execute.TracedItem{}, ctx.Err()
		}
		return execute.TracedItem{}, fmt.Errorf("%w: %w", execute.ErrItem, errStubSandbox)
	}
	st.traced = append(st.traced, it.Key)
	return execute.TracedItem{Item: it, Status: schemas.StatusInvalid, Detail: "stub"}, nil
}

// TestPoisonItem runs TraceBatch's attempts with a stubbed sandbox (a unit test of the poison
// logic) on a batch whose fourth item kills every attempt, by an error of its own, an error of no
// known class (which counts as well: no item is retried without bound) or by cutting the attempt
// off: after PoisonAfter attempts in a row died on it (and, when the first attempt left no record,
// one more), it is stored as poison and the batch completes; BuildShard makes it a poison reject.
func TestPoisonItem(t *testing.T) {
	for _, tc := range []struct {
		die      string
		attempts int // the attempt that completes
	}{{"error", 3}, {"unknown", 3}, {"kill", 4}} {
		t.Run(tc.die, func(t *testing.T) {
			path := corpus(t, 12)
			spec := schemas.Spec{Name: "p", Sources: []schemas.SourceSpec{{Kind: "jsonl", Path: path}}, BatchSize: 12}.WithDefaults()
			s := openMem(t)
			run := NewRun(spec, time.Unix(0, 0))
			_, fr := plan(t, s, run, &crawl.Fetcher{})
			ref := BatchRef{Phase: PhaseSources, Kind: BatchFunc, Index: 0}
			b, err := ReadBatch(context.Background(), s, run, ref)
			if err != nil || fr.FuncBatches != 1 {
				t.Fatal(err, fr)
			}
			st := &stubTracer{poisonCall: b.Items[3].Call, die: tc.die}
			var res TraceResult
			var cur TraceCursor
			for attempt := 1; ; attempt++ {
				if attempt > tc.attempts {
					t.Fatalf("attempt %d: the batch never completed", attempt)
				}
				ctx, cancel := context.WithCancel(context.Background())
				st.cancel = cancel
				res, err = TraceBatch(ctx, s, run, ref, st, attempt, cur, func(d any) { cur = d.(TraceCursor) })
				cancel()
				if err == nil {
					if attempt != tc.attempts {
						t.Errorf("completed on attempt %d, want %d", attempt, tc.attempts)
					}
					break
				}
			}
			if res.Poison != 1 {
				t.Errorf("poison %d, want 1", res.Poison)
			}
			sum, err := BuildShard(context.Background(), s, run, Builder{Tokenizers: tokenize.Get}, res, nil)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := ReadRecordFor(context.Background(), s, run, res.Hash)
			if err != nil {
				t.Fatal(err)
			}
			poison := 0
			for _, r := range rec.Rejects {
				if r.Class == schemas.RejectPoison {
					poison++
					if r.Key != b.Items[3].Key || !strings.HasPrefix(r.Reason, "poison: ") {
						t.Errorf("poison reject %+v", r)
					}
				}
			}
			if poison != 1 || sum.Poison != 1 || rec.Items != len(b.Items) {
				t.Errorf("record: %d items, %d poison rejects, summary %+v", rec.Items, poison, sum)
			}
		})
	}
}

// TestWorkerFaultIsNotPoison fails every attempt of a batch on one item with an error that is the
// worker's, not the item's (no sandbox to be had): the item is never given up as poison, however
// many attempts fail (the batch fails as a whole when its time runs out).
func TestWorkerFaultIsNotPoison(t *testing.T) {
	path := corpus(t, 12)
	spec := schemas.Spec{Name: "p", Sources: []schemas.SourceSpec{{Kind: "jsonl", Path: path}}, BatchSize: 12}.WithDefaults()
	s := openMem(t)
	run := NewRun(spec, time.Unix(0, 0))
	plan(t, s, run, &crawl.Fetcher{})
	ref := BatchRef{Phase: PhaseSources, Kind: BatchFunc, Index: 0}
	b, _ := ReadBatch(context.Background(), s, run, ref)
	st := &stubTracer{poisonCall: b.Items[5].Call, die: "infra"}
	var cur TraceCursor
	for attempt := 1; attempt <= 6; attempt++ {
		res, err := TraceBatch(context.Background(), s, run, ref, st, attempt, cur, func(d any) { cur = d.(TraceCursor) })
		if err == nil || res.Poison != 0 {
			t.Fatalf("attempt %d: %+v, %v; want the worker's error and no poison", attempt, res, err)
		}
	}
}

// TestAdoptShard traces a batch in a real sandbox and builds it for version A, then loses A's
// record (as when A is cancelled between its shard and its record): version B, created later,
// adopts A's shard (same bytes, A's created_at) instead of failing on the conflict.
func TestAdoptShard(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	ctx := context.Background()
	path := corpus(t, 4)
	spec := schemas.Spec{Name: "a", Sources: []schemas.SourceSpec{{Kind: "jsonl", Path: path}}, BatchSize: 8}.WithDefaults()
	s := openMem(t)
	pool := execute.NewSandboxPool(sandbox.Config{}, 1)
	defer pool.Close()
	trc := &execute.Tracer{Sandboxes: pool}
	ref := BatchRef{Phase: PhaseSources, Kind: BatchFunc, Index: 0}
	build := func(created time.Time) (Run, BatchSummary) {
		run := NewRun(spec, created)
		plan(t, s, run, &crawl.Fetcher{})
		tr, err := TraceBatch(ctx, s, run, ref, trc, 1, TraceCursor{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := BuildShard(ctx, s, run, Builder{Tokenizers: tokenize.Get}, tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		return run, sum
	}
	a, sumA := build(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	if sumA.Rows == 0 {
		t.Fatalf("version A built no rows: %+v", sumA)
	}
	b0, _ := ReadBatch(ctx, s, a, ref)
	recA, err := readRecordAt(ctx, s, recordKey(b0.Hash), b0.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, recordKey(b0.Hash)); err != nil {
		t.Fatal(err)
	}
	_, sumB := build(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
	recB, err := readRecordAt(ctx, s, recordKey(b0.Hash), b0.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if *recB.Shard != *recA.Shard || !recB.CreatedAt.Equal(recA.CreatedAt) || sumB.Rows != sumA.Rows {
		t.Errorf("B's record %+v (created %v), A's %+v (created %v)", recB.Shard, recB.CreatedAt, recA.Shard, recA.CreatedAt)
	}
}

// TestPagedPlanningFiles plans a files source whose items carry their files: pages end by bytes
// (MaxPageBytes) as well as by items, and the batches are those of one page.
func TestPagedPlanningFiles(t *testing.T) {
	dir := t.TempDir()
	for i := range 40 {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i/3), fmt.Sprintf("m%d.py", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("def f%d(x):\n    return x + %d\n%s", i, i, strings.Repeat("# padding\n", 100))
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := schemas.Spec{Name: "p", Sources: []schemas.SourceSpec{{Kind: "files", Path: dir}}}.WithDefaults()
	created := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	var hashes [][]string
	for _, pageBytes := range []int{4000, 256 << 20} {
		old := MaxPageBytes
		MaxPageBytes = pageBytes
		s := openMem(t)
		run := NewRun(spec, created)
		pages, fr := plan(t, s, run, &crawl.Fetcher{})
		MaxPageBytes = old
		if pageBytes == 4000 && pages < 4 || pageBytes > 4000 && pages != 1 {
			t.Errorf("pages of %d bytes: %d pages", pageBytes, pages)
		}
		if fr.Items != 14 || fr.RepoBatches != 14 || fr.Rejects != 0 {
			t.Errorf("pages of %d bytes: %+v", pageBytes, fr)
		}
		hashes = append(hashes, batchHashes(t, s, run, fr))
	}
	if strings.Join(hashes[0], ",") != strings.Join(hashes[1], ",") {
		t.Error("the batches depend on the page size")
	}
}
