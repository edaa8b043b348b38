package activities

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ndtrace/ndtrace/store"
	"sort"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/sync/errgroup"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// Task queues: sandboxed tracing runs on its own workers, everything else on the I/O queue.
const (
	TraceQueue = "ndtrace-trace"
	IOQueue    = "ndtrace-io"
)

// ErrBadInput is the application error type of bad input: never retried, recorded with its reason.
const ErrBadInput = "BadInput"

// Keys of a dataset's working objects, relative to the dataset root.
const (
	workDir      = "work/"
	batchDir     = "batches/"
	rejectsKey   = "rejects.jsonl"
	traceChunk   = 8 // items per trace chunk: the unit of resumption after a retry
	manifestType = "application/json"
)

// Activities holds what the activities need. A worker creates one and registers its methods.
type Activities struct {
	// Sandboxes hands out sandboxes for tracing (nil on workers that do not trace).
	Sandboxes *SandboxPool
	// Tokenizers looks tokenizers up by name.
	Tokenizers func(name string) (tokenize.Tokenizer, error)
	// Fetcher resolves and checks out repositories (nil: a zero crawl.Fetcher, which cannot serve
	// the built-in example repository; workers use crawl.NewFetcher).
	Fetcher *crawl.Fetcher
	// Scratch is where tracing workers check repositories out (default DefaultScratch). It must
	// not be under /tmp.
	Scratch string
	// Metrics receives the activities' counters (nil: none).
	Metrics *Metrics
}

// PlanInput is the input of Plan.
type PlanInput struct {
	Spec    schemas.Spec
	Dataset string
}

// PlanResult sums up a plan; the plan itself is stored in the dataset's work area.
type PlanResult struct {
	PlanKey       string
	Batches       int
	Items         int
	SourceRejects int
	// Repos counts the repository-level items: their function-level items are planned after
	// them (PlanFunctions).
	Repos int
}

// plan is the stored list of batches.
type plan struct {
	SpecHash string      `json:"spec_hash"`
	Batches  []planBatch `json:"batches"`
	Rejects  []crawl.Reject
}

type planBatch struct {
	Hash  string       `json:"hash"`
	Items []crawl.Item `json:"items"`
}

func badInput(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return temporal.NewNonRetryableApplicationError(msg, ErrBadInput, errors.New(msg))
}

// Plan reads every source of the spec and splits the items into batches. A batch's hash covers the
// spec (what changes rows) and its items' content, so an unchanged batch is found again by a
// re-run and its shard reused.
func (a *Activities) Plan(ctx context.Context, in PlanInput) (PlanResult, error) {
	st, err := store.Open(ctx, in.Dataset)
	if err != nil {
		return PlanResult{}, badInput("output %s: %v", in.Dataset, err)
	}
	defer st.Close()
	specHash := in.Spec.Hash()
	var items []crawl.Item
	p := plan{SpecHash: specHash}
	fetcher := a.Fetcher
	if fetcher == nil {
		fetcher = &crawl.Fetcher{}
	}
	for i, src := range in.Spec.Sources {
		its, rej, err := fetcher.Items(ctx, src)
		if err != nil {
			var re *crawl.RepoError
			if errors.As(err, &re) && re.Transient {
				return PlanResult{}, fmt.Errorf("sources[%d]: %w", i, err) // retried
			}
			return PlanResult{}, badInput("sources[%d]: %v", i, err)
		}
		items = append(items, its...)
		p.Rejects = append(p.Rejects, rej...)
	}
	f, err := newFilter(ctx, in.Spec)
	if err != nil {
		return PlanResult{}, err
	}
	items, rej := f.items(items)
	p.Rejects = append(p.Rejects, rej...)
	repos := 0
	for _, it := range items {
		if it.Repo != nil {
			repos++
		}
	}
	// Function-level items go BatchSize to a batch; a repository is a batch of its own (its test
	// suite is the long part), so repositories are traced in parallel and re-traced one by one.
	var fns []crawl.Item
	for _, it := range items {
		if it.Repo != nil {
			p.Batches = append(p.Batches, newBatch(specHash, []crawl.Item{it}))
		} else {
			fns = append(fns, it)
		}
	}
	size := in.Spec.BatchSize
	for start := 0; start < len(fns); start += size {
		p.Batches = append(p.Batches, newBatch(specHash, fns[start:min(start+size, len(fns))]))
	}
	key, err := storePlan(ctx, st, p)
	if err != nil {
		return PlanResult{}, err
	}
	return PlanResult{PlanKey: key, Batches: len(p.Batches), Items: len(items), SourceRejects: len(p.Rejects), Repos: repos}, nil
}

// newBatch is the planned batch of items; its hash covers the spec and the items' content.
func newBatch(specHash string, items []crawl.Item) planBatch {
	h := sha256.New()
	h.Write([]byte(specHash))
	for _, it := range items {
		h.Write([]byte(it.Hash()))
	}
	return planBatch{Items: items, Hash: hex.EncodeToString(h.Sum(nil))}
}

// storePlan stores a plan in the work area under a key derived from its content.
func storePlan(ctx context.Context, st *store.Store, p plan) (string, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	key := workDir + "plan-" + hex.EncodeToString(sum[:8]) + ".json"
	if _, err := st.PutOnce(ctx, key, data, manifestType, nil); err != nil {
		return "", fmt.Errorf("store plan: %w", err)
	}
	return key, nil
}

func readPlan(ctx context.Context, st *store.Store, key string) (*plan, error) {
	data, err := st.ReadAll(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	var p plan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("read plan %s: %w", key, err)
	}
	return &p, nil
}

// BatchInput names one batch of a plan.
type BatchInput struct {
	Spec      schemas.Spec
	Dataset   string
	PlanKey   string
	Index     int
	CreatedAt time.Time
}

// TraceResult says where a batch's traces are.
type TraceResult struct {
	// Done is true when the batch's record already exists: nothing to trace or build.
	Done   bool
	Hash   string
	Chunks int
	Items  int
}

// traced is one traced item, as stored between TraceBatch and BuildShard.
type traced struct {
	Item   crawl.Item      `json:"item"`
	Status schemas.Status  `json:"status"`
	Detail string          `json:"detail,omitempty"`
	Events []schemas.Event `json:"events,omitempty"`
	Blocks []schemas.Block `json:"blocks,omitempty"`
	// Repo is the trace of a repository-level item's tests.
	Repo *repoTrace `json:"repo,omitempty"`
}

// TraceBatch traces every item of a batch in the sandbox, in chunks stored in the work area. It
// heartbeats the number of chunks stored and, after a retry, resumes from the last stored chunk.
//
// Encoding and storing a chunk happen on a second goroutine while the sandbox traces the next one,
// so the sandbox never waits for storage; chunks are still stored in order, so the number stored
// is always a valid resume point.
func (a *Activities) TraceBatch(ctx context.Context, in BatchInput) (TraceResult, error) {
	if a.Sandboxes == nil {
		return TraceResult{}, errors.New("this worker has no sandboxes")
	}
	st, err := store.Open(ctx, in.Dataset)
	if err != nil {
		return TraceResult{}, err
	}
	defer st.Close()
	p, err := readPlan(ctx, st, in.PlanKey)
	if err != nil {
		return TraceResult{}, err
	}
	if in.Index < 0 || in.Index >= len(p.Batches) {
		return TraceResult{}, badInput("batch %d is not in the plan", in.Index)
	}
	b := p.Batches[in.Index]
	res := TraceResult{Hash: b.Hash, Items: len(b.Items), Chunks: (len(b.Items) + traceChunk - 1) / traceChunk}
	if done, err := st.Exists(ctx, batchKey(b.Hash)); err != nil {
		return res, err
	} else if done {
		res.Done = true
		return res, nil
	}
	lim, err := limitsOf(in.Spec)
	if err != nil {
		return res, badInput("%v", err)
	}
	first := 0
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &first)
	}
	hb := &chunkHeartbeat{ctx: ctx, stored: first}
	g, gctx := errgroup.WithContext(ctx)
	chunks := make(chan tracedChunk, 1)
	g.Go(func() error { return storeChunks(gctx, st, chunks, hb) })
	g.Go(func() error {
		defer close(chunks)
		for c := first; c < res.Chunks; c++ {
			ch := tracedChunk{index: c, key: chunkKey(b.Hash, c)}
			if ok, err := st.Exists(gctx, ch.key); err != nil {
				return err
			} else if !ok {
				for _, it := range b.Items[c*traceChunk : min((c+1)*traceChunk, len(b.Items))] {
					t, err := a.trace(gctx, it, in.Spec, lim, hb.alive)
					if err != nil {
						return err
					}
					ch.items = append(ch.items, t)
					hb.alive() // liveness: a heartbeat follows every item
				}
			} else {
				ch.stored = true
			}
			select {
			case chunks <- ch:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	return res, g.Wait()
}

// tracedChunk is one chunk of a batch's traces on its way to storage; stored says it is there
// already (from an earlier attempt).
type tracedChunk struct {
	index  int
	key    string
	items  []traced
	stored bool
}

// storeChunks encodes and stores the chunks in the order they come and heartbeats the number
// stored after each.
func storeChunks(ctx context.Context, st *store.Store, chunks <-chan tracedChunk, hb *chunkHeartbeat) error {
	for ch := range chunks {
		if !ch.stored {
			if err := writeChunk(ctx, st, ch.key, ch.items); err != nil {
				return err
			}
		}
		hb.storedThrough(ch.index)
	}
	return nil
}

// writeChunk stores traced items as one chunk of traces: JSON Lines, one item a line.
func writeChunk(ctx context.Context, st *store.Store, key string, items []traced) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, t := range items {
		if err := enc.Encode(t); err != nil {
			return fmt.Errorf("encode traces of %s: %w", t.Item.Key, err)
		}
	}
	if err := st.Put(ctx, key, buf.Bytes(), nil); err != nil {
		return fmt.Errorf("store traces: %w", err)
	}
	return nil
}

// chunkHeartbeat records a tracing activity's heartbeats from its two goroutines. The details are
// always the number of chunks stored, the resume point, and never go backwards.
type chunkHeartbeat struct {
	ctx    context.Context
	mu     sync.Mutex
	stored int
}

// alive records a heartbeat that only says the activity is making progress.
func (h *chunkHeartbeat) alive() {
	h.mu.Lock()
	defer h.mu.Unlock()
	activity.RecordHeartbeat(h.ctx, h.stored)
}

// storedThrough records that every chunk up to and including index c is stored.
func (h *chunkHeartbeat) storedThrough(c int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stored = c + 1
	activity.RecordHeartbeat(h.ctx, h.stored)
}

// trace runs one item; a sandbox failure is an error (retried), anything the code does is data.
func (a *Activities) trace(ctx context.Context, it crawl.Item, spec schemas.Spec, lim sandbox.Limits, alive func()) (t traced, err error) {
	start := time.Now()
	defer func() {
		if err == nil {
			a.Metrics.traced(t, time.Since(start))
		}
	}()
	if it.Repo != nil {
		co, err := checkoutLimitsOf(spec)
		if err != nil {
			return traced{}, badInput("%v", err)
		}
		return a.traceRepo(ctx, it, lim, co, alive)
	}
	sb, release, err := a.Sandboxes.Get(ctx)
	if err != nil {
		return traced{}, err
	}
	defer release()
	res, err := sb.Run(ctx, sandbox.Request{Code: it.Code, Filename: it.Filename, Call: it.Call, Limits: lim})
	if err != nil {
		if res != nil && res.Status == schemas.StatusSandboxError {
			return traced{}, fmt.Errorf("trace %s: %w", it.Key, err)
		}
		return traced{Item: it, Status: schemas.StatusInvalid, Detail: err.Error()}, nil
	}
	return traced{Item: it, Status: res.Status, Detail: res.Detail, Events: res.Events, Blocks: res.Blocks}, nil
}

// checkoutLimitsOf returns the repository checkout limits of a spec.
func checkoutLimitsOf(spec schemas.Spec) (crawl.CheckoutLimits, error) {
	d, err := time.ParseDuration(spec.Limits.CheckoutTimeout)
	if err != nil {
		return crawl.CheckoutLimits{}, fmt.Errorf("limits.checkout_timeout: %w", err)
	}
	return crawl.CheckoutLimits{MaxBytes: spec.Limits.RepoBytes, MaxFiles: spec.Limits.RepoFiles, Timeout: d}, nil
}

func limitsOf(spec schemas.Spec) (sandbox.Limits, error) {
	d, err := time.ParseDuration(spec.Limits.Timeout)
	if err != nil {
		return sandbox.Limits{}, fmt.Errorf("limits.timeout: %w", err)
	}
	return sandbox.Limits{WallTime: d, CPUTime: d, TraceEvents: spec.Limits.MaxEvents, ValueChars: spec.Limits.ValueChars}, nil
}

func chunkKey(hash string, c int) string {
	return fmt.Sprintf("%straces/%s/chunk-%04d.jsonl", workDir, hash, c)
}
func batchKey(hash string) string { return batchDir + hash + ".json" }

// BatchRecord is what a finished batch leaves in the dataset: its shard and what became of every
// item.
type BatchRecord struct {
	Index int                `json:"index"`
	Hash  string             `json:"hash"`
	Shard *dataset.ShardInfo `json:"shard"`
	// Packed is the batch's packed shard, when the spec packs (pack_length).
	Packed  *dataset.ShardInfo `json:"packed,omitempty"`
	Items   int                `json:"items"`
	Rows    int                `json:"rows"`
	Rejects []crawl.Reject     `json:"rejects"`
	Counts  map[string]int64   `json:"counts"`
}

// packBatch packs a batch's rows into sequences of n tokens (dataset.Pack, padded with the
// tokenizer's end-of-text id) and writes them as the packed shard name. Rows longer than n are
// counted as packing_too_long; it returns nil when no row fits.
func packBatch(ctx context.Context, st *store.Store, tok tokenize.Tokenizer, name string, rows []schemas.Row, n int, counts map[string]int64) (*dataset.ShardInfo, error) {
	pad, ok := tok.SpecialID(tokenize.EndOfText)
	if !ok {
		return nil, badInput("tokenizer %s has no id for %s to pad packed sequences with", tok.Name(), tokenize.EndOfText)
	}
	seqs, tooLong, err := dataset.Pack(rows, n, pad)
	if err != nil {
		return nil, err
	}
	if len(tooLong) > 0 {
		counts["packing_too_long"] += int64(len(tooLong))
	}
	if len(seqs) == 0 {
		return nil, nil
	}
	info, err := dataset.WritePackedShard(ctx, st, name, seqs, n)
	if err != nil {
		return nil, fmt.Errorf("write packed shard: %w", err)
	}
	return &info, nil
}

// BatchSummary is the small part of a BatchRecord that goes back to the workflow.
type BatchSummary struct {
	Items    int
	Rows     int
	Tokens   int64
	Rejected int
	Reused   bool
}

// BuildShard turns a batch's traces into trajectories, tokenizes them and writes the batch's shard
// and record. A batch whose record exists is reused as it is.
func (a *Activities) BuildShard(ctx context.Context, in BatchInput, tr TraceResult) (BatchSummary, error) {
	st, err := store.Open(ctx, in.Dataset)
	if err != nil {
		return BatchSummary{}, err
	}
	defer st.Close()
	if rec, err := readBatch(ctx, st, tr.Hash); err == nil {
		return summary(rec, true), nil
	} else if !store.IsNotExist(err) {
		return BatchSummary{}, err
	}
	tok, err := a.Tokenizers(in.Spec.Tokenizer)
	if err != nil {
		return BatchSummary{}, badInput("tokenizer: %v", err)
	}
	policy, err := debugger.PolicyByName(in.Spec.Policy)
	if err != nil {
		return BatchSummary{}, badInput("policy: %v", err)
	}
	opts := dataset.RowOptions{Tokenizer: tok, Mask: tokenize.MaskMode(in.Spec.Mask), MaxTokens: in.Spec.MaxTokens,
		TooLong: dataset.TooLong(in.Spec.TooLong), CreatedAt: in.CreatedAt, TracerVersion: sandbox.TracerVersion}
	rec := &BatchRecord{Index: in.Index, Hash: tr.Hash, Counts: map[string]int64{}}
	var rows []schemas.Row
	for c := 0; c < tr.Chunks; c++ {
		ts, err := readChunk(ctx, st, chunkKey(tr.Hash, c))
		if err != nil {
			return BatchSummary{}, err
		}
		for _, t := range ts {
			rec.Items++
			var r []schemas.Row
			var reason string
			switch {
			case t.Item.Repo != nil && t.Repo == nil:
				reason = t.Detail // the repository could not be used
				if reason == "" {
					reason = string(t.Status)
				}
			case t.Item.Repo != nil:
				r, reason = repoRows(t, in.Spec, policy, opts, rec.Counts)
			default:
				r, reason = itemRows(t, in.Spec, policy, opts, rec.Counts)
			}
			if reason != "" {
				rec.Rejects = append(rec.Rejects, crawl.Reject{Source: rejectSource(t.Item), Key: t.Item.Key, Reason: reason})
				continue
			}
			rows = append(rows, r...)
		}
		activity.RecordHeartbeat(ctx, c)
	}
	rec.Rows = len(rows)
	if a.Metrics != nil {
		classes := map[string]int{}
		for _, r := range rec.Rejects {
			classes[reasonClass(r.Reason)]++
		}
		a.Metrics.built(rows, classes)
	}
	if len(rows) > 0 {
		info, err := dataset.WriteShard(ctx, st, "part-"+tr.Hash[:24], rows)
		if err != nil {
			return BatchSummary{}, fmt.Errorf("write shard: %w", err)
		}
		rec.Shard = &info
		if n := in.Spec.PackLength; n > 0 {
			if rec.Packed, err = packBatch(ctx, st, tok, "part-"+tr.Hash[:24], rows, n, rec.Counts); err != nil {
				return BatchSummary{}, err
			}
		}
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return BatchSummary{}, err
	}
	if _, err := st.PutOnce(ctx, batchKey(tr.Hash), data, manifestType, nil); err != nil {
		return BatchSummary{}, fmt.Errorf("write batch record: %w", err)
	}
	return summary(rec, false), nil
}

func summary(rec *BatchRecord, reused bool) BatchSummary {
	s := BatchSummary{Items: rec.Items, Rows: rec.Rows, Rejected: len(rec.Rejects), Reused: reused}
	if rec.Shard != nil {
		s.Tokens = rec.Shard.Tokens
	}
	return s
}

func readBatch(ctx context.Context, st *store.Store, hash string) (*BatchRecord, error) {
	data, err := st.ReadAll(ctx, batchKey(hash))
	if err != nil {
		return nil, err
	}
	var rec BatchRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("batch record %s: %w", hash, err)
	}
	return &rec, nil
}

// itemRows builds every row of one traced item. It returns the reason when the item gives no row.
func itemRows(t traced, spec schemas.Spec, p debugger.Policy, o dataset.RowOptions, counts map[string]int64) ([]schemas.Row, string) {
	if _, err := debugger.ExitFor(t.Status); err != nil {
		if t.Detail != "" {
			return nil, fmt.Sprintf("%s: %s", t.Status, t.Detail)
		}
		return nil, string(t.Status)
	}
	item := debugger.Item{Code: t.Item.Code, Call: t.Item.Call, Events: t.Events, Blocks: t.Blocks, Status: t.Status}
	src := dataset.Source{Level: "function", RepoURL: t.Item.RepoURL, Commit: t.Item.Commit, Path: t.Item.Path,
		QualName: t.Item.QualName, SourceID: t.Item.SourceID}
	var rows []schemas.Row
	var last string
	for _, dir := range spec.Directions {
		tree, code, err := item.Tree(debugger.Direction(dir))
		if err != nil {
			counts["skipped:"+dir+":"+reasonKey(err)]++
			last = err.Error()
			continue
		}
		for k := 0; k < spec.TrajectoriesPerTrace; k++ {
			seed := trajectorySeed(spec.Seed, t.Item.Key, dir, k)
			row, err := dataset.BuildRow(src, tree, code, t.Events, p, seed, o)
			if err != nil {
				counts["dropped:"+reasonKey(err)]++
				last = err.Error()
				continue
			}
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		if last == "" {
			last = "no trajectory"
		}
		return nil, last
	}
	return rows, ""
}

// reasonKey is a short counter key for an error.
func reasonKey(err error) string {
	switch {
	case errors.Is(err, dataset.ErrTooLong):
		return "too_long"
	case errors.Is(err, debugger.ErrNoInverse):
		return "run_cut_off"
	case errors.Is(err, tokenize.ErrSpecialToken):
		return "special_token_in_source"
	}
	return "error"
}

// trajectorySeed derives a trajectory's seed from the spec's seed, the item and the draw.
func trajectorySeed(seed uint64, key, dir string, k int) uint64 {
	h := sha256.New()
	fmt.Fprintf(h, "%d/%s/%s/%d", seed, key, dir, k)
	return binary.LittleEndian.Uint64(h.Sum(nil)[:8])
}

// FinalizeInput names a planned dataset to commit.
type FinalizeInput struct {
	Spec    schemas.Spec
	Dataset string
	PlanKey string
	// MorePlans are the keys of later plans of the same dataset (the function-level items found
	// in repositories, PlanFunctions).
	MorePlans []string
	CreatedAt time.Time
}

// FinalizeResult is the committed dataset's summary.
type FinalizeResult struct {
	Manifest string
	Totals   dataset.Totals
	Counts   map[string]int64
}

// Finalize gathers every batch record, writes the rejects and the manifest (the commit point).
func (a *Activities) Finalize(ctx context.Context, in FinalizeInput) (FinalizeResult, error) {
	st, err := store.Open(ctx, in.Dataset)
	if err != nil {
		return FinalizeResult{}, err
	}
	defer st.Close()
	counts := map[string]int64{}
	var rejects []crawl.Reject
	var shards, packed []dataset.ShardInfo
	items := int64(0)
	var plans []*plan
	for _, key := range append([]string{in.PlanKey}, in.MorePlans...) {
		p, err := readPlan(ctx, st, key)
		if err != nil {
			return FinalizeResult{}, err
		}
		plans = append(plans, p)
		rejects = append(rejects, p.Rejects...)
		items += int64(len(p.Rejects))
		for _, b := range p.Batches {
			rec, err := readBatch(ctx, st, b.Hash)
			if err != nil {
				return FinalizeResult{}, fmt.Errorf("batch %s is not finished: %w", b.Hash[:12], err)
			}
			items += int64(rec.Items)
			if rec.Shard != nil {
				shards = append(shards, *rec.Shard)
			}
			if rec.Packed != nil {
				packed = append(packed, *rec.Packed)
			}
			rejects = append(rejects, rec.Rejects...)
			for k, v := range rec.Counts {
				counts[k] += v
			}
		}
	}
	sort.SliceStable(rejects, func(i, j int) bool { return rejects[i].Key < rejects[j].Key })
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range rejects {
		counts["rejects:"+reasonClass(r.Reason)]++
		switch {
		case strings.HasPrefix(r.Reason, "duplicate of "):
			counts["duplicates"]++
		case strings.HasPrefix(r.Reason, "decontaminated: "):
			counts["decontaminated:"+strings.TrimPrefix(r.Reason, "decontaminated: ")]++
		}
		if err := enc.Encode(r); err != nil {
			return FinalizeResult{}, err
		}
	}
	counts["items"] = items
	counts["rejects"] = int64(len(rejects))
	if err := st.Put(ctx, rejectsKey, buf.Bytes(), nil); err != nil {
		return FinalizeResult{}, fmt.Errorf("write rejects: %w", err)
	}
	if err := writeDedupKeys(ctx, st, plans); err != nil {
		return FinalizeResult{}, err
	}
	cfg, err := json.Marshal(in.Spec)
	if err != nil {
		return FinalizeResult{}, err
	}
	man := dataset.Manifest{CreatedAt: in.CreatedAt, Config: cfg,
		Versions: dataset.Versions{Tracer: sandbox.TracerVersion, Pipeline: dataset.PipelineVersion, Tokenizer: tokName(a, in.Spec.Tokenizer)},
		Shards:   shards, Counts: counts}
	if n := in.Spec.PackLength; n > 0 {
		tok, err := a.Tokenizers(in.Spec.Tokenizer)
		if err != nil {
			return FinalizeResult{}, badInput("tokenizer: %v", err)
		}
		pad, _ := tok.SpecialID(tokenize.EndOfText)
		man.Packing = &dataset.Packing{Length: n, PadID: pad, Shards: packed}
	}
	m, err := dataset.CommitVersion(ctx, st, man)
	if err != nil {
		return FinalizeResult{}, fmt.Errorf("commit dataset: %w", err)
	}
	// Statistics next to the manifest (dashboards read them; ndtrace stats recomputes them if they
	// are missing or stale). A retry after a failure here commits the same manifest again.
	stats, err := dataset.ComputeStats(ctx, st, m)
	if err != nil {
		return FinalizeResult{}, fmt.Errorf("statistics: %w", err)
	}
	if err := dataset.WriteStats(ctx, st, stats); err != nil {
		return FinalizeResult{}, fmt.Errorf("statistics: %w", err)
	}
	return FinalizeResult{Manifest: st.URL(), Totals: m.Totals, Counts: counts}, nil
}

func tokName(a *Activities, name string) string {
	if tok, err := a.Tokenizers(name); err == nil {
		return tok.Name()
	}
	return name
}

// reasonClass is the first word of a reject reason (the status or the kind of problem).
func reasonClass(reason string) string {
	for i, c := range reason {
		if c == ':' || c == ' ' {
			return reason[:i]
		}
	}
	return reason
}
