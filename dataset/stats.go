package dataset

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ndtrace/ndtrace/store"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"gocloud.dev/blob"
)

// Dataset statistics: stats.json and stats.parquet next to the manifest (see docs/dataset.md,
// "Statistics"). ComputeStats reads only the columns it needs from the shards the manifest names,
// plus the manifest's counts and rejects.jsonl; the result is a pure function of those, so the same
// dataset always gives the same bytes.
const (
	// StatsKey and StatsParquetKey are the statistics' keys relative to the dataset root.
	StatsKey        = "stats.json"
	StatsParquetKey = "stats.parquet"
	// RejectsKey is the key of the pipeline's rejects, one JSON object per line.
	RejectsKey = "rejects.jsonl"
	// StatsFormat and StatsFormatVersion are stats.json's format fields.
	StatsFormat        = "ndtrace-stats"
	StatsFormatVersion = 1
	// MaxHistogramBins is the most bins a histogram has.
	MaxHistogramBins = 40
	// MaxRejectExamples is the number of example rejects kept per reason class.
	MaxRejectExamples = 3
	// maxExampleReason is the longest reject reason kept in an example, in characters.
	maxExampleReason = 300
	// MaxStatsBytes is the largest stats.json ReadStats accepts.
	MaxStatsBytes = 256 << 20
	// maxRejectLine is the longest line of rejects.jsonl read.
	maxRejectLine = 16 << 20
	// statsReadAhead is the number of shards read and decoded ahead of the one being counted.
	statsReadAhead = 4
)

// ActionTypes are the action types counted, in display order (the row columns act_<type>).
var ActionTypes = []string{"step_into", "step_over", "step_return", "breakpoint", "continue",
	"inv_step_into", "inv_step_over", "inv_step_call"}

// EventTypes are the trace event types counted, in display order (the row columns ev_<type>).
var EventTypes = []string{"call", "line", "return", "exception"}

// Stats are a dataset's statistics (stats.json). Every map is present (possibly empty) and encoded
// with sorted keys; every list has a fixed order, so the encoding is deterministic.
type Stats struct {
	// Format is "ndtrace-stats"; FormatVersion the layout's version (1).
	Format        string `json:"format"`
	FormatVersion int    `json:"format_version"`
	// CreatedAt, Totals and Versions are copied from the manifest the statistics describe: stats
	// match a manifest when its created_at and totals are these (see Matches).
	CreatedAt time.Time `json:"created_at"`
	Totals    Totals    `json:"totals"`
	Versions  Versions  `json:"versions"`
	// Counts are the manifest's counts, verbatim.
	Counts map[string]int64 `json:"counts"`
	// Dataset counts the whole dataset.
	Dataset SourceStats `json:"dataset"`
	// Groups split the trajectories by level and direction: "all", then each direction, then each
	// level and each level/direction pair, in that order (levels and directions sorted).
	Groups []Group `json:"groups"`
	// Sources count per source (level and repository URL or function-level path), sorted by level
	// then source.
	Sources []SourceStats `json:"sources"`
	// Rejects are the rejects by reason class, sorted by count (descending) then class.
	Rejects []RejectClass `json:"rejects"`
}

// RowCounts are the counters taken from the rows (trajectories) of a dataset, group or source.
type RowCounts struct {
	// Traces counts distinct traces: distinct (level, repo_url, commit, source_id) at repository
	// level, (level, path, source_id) at function level.
	Traces int64 `json:"traces"`
	// Trajectories counts rows; Tokens and LearnedTokens sum num_tokens and num_learned.
	Trajectories  int64 `json:"trajectories"`
	Tokens        int64 `json:"tokens"`
	LearnedTokens int64 `json:"learned_tokens"`
	// Directions counts trajectories per direction.
	Directions map[string]int64 `json:"directions"`
	// Actions sums the act_* columns: actions per type (every ActionTypes key present).
	Actions map[string]int64 `json:"actions"`
	// Events sums the ev_* columns over distinct traces (each trace once, however many trajectories
	// were sampled from it; every EventTypes key present).
	Events map[string]int64 `json:"events"`
	// Exits counts trajectories per exit state.
	Exits map[string]int64 `json:"exits"`
}

// InputCounts are the counters of input items: what went in, what was rejected and why.
type InputCounts struct {
	// Items counts input items (function-level calls, repository tests): for the dataset, the
	// manifest's "items" count if present, else traces plus rejects; for a source, its traces plus
	// its rejects.
	Items int64 `json:"items"`
	// Rejects counts rejected items; RejectsByClass by reason class (the reason's first word).
	Rejects        int64            `json:"rejects"`
	RejectsByClass map[string]int64 `json:"rejects_by_class"`
	// Quarantined counts repository tests whose outcome changed under tracing.
	Quarantined int64 `json:"quarantined"`
	// Decontaminated counts items removed per evaluation set.
	Decontaminated map[string]int64 `json:"decontaminated"`
	// Duplicates counts items removed as duplicates.
	Duplicates int64 `json:"duplicates"`
}

// SourceStats counts one source, or the whole dataset.
type SourceStats struct {
	// Level is "function" or "repository" (empty for the dataset, and for a source that appears only
	// in rejects.jsonl); Source is the repository URL or the function-level path (empty for the
	// dataset).
	Level  string `json:"level"`
	Source string `json:"source"`
	RowCounts
	InputCounts
}

// Group holds the statistics of the trajectories of one level and direction ("" means any).
type Group struct {
	// Name is "all", the level, the direction, or "level/direction".
	Name      string `json:"name"`
	Level     string `json:"level"`
	Direction string `json:"direction"`
	RowCounts
	// Metrics are the per-trajectory distributions, in the order of StatsMetrics.
	Metrics []Metric `json:"metrics"`
}

// Metric is the distribution of one per-trajectory quantity over a group's trajectories.
type Metric struct {
	// Name is the metric (see StatsMetrics).
	Name string `json:"name"`
	// Count is the number of trajectories; Sum the total; Mean = Sum / Count (0 when Count is 0).
	// Mean and the percentiles are rounded to 6 decimals.
	Count int64   `json:"count"`
	Sum   int64   `json:"sum"`
	Mean  float64 `json:"mean"`
	// Min, P25, P50 (median), P90 and Max: percentiles with linear interpolation between the
	// closest ranks (rank (n-1)·p from 0, as numpy's default); 0 when Count is 0.
	Min int64   `json:"min"`
	P25 float64 `json:"p25"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	Max int64   `json:"max"`
	// Histogram counts the values in bins.
	Histogram Histogram `json:"histogram"`
}

// Histogram counts values in equal bins: bin i holds the values v with Lo + i·Width <= v <
// Lo + (i+1)·Width. Width is a power of two, the same for every group of a dataset, and Lo a
// multiple of it, so histograms of different groups and datasets line up (merge 2^k bins to
// compare with a coarser width). There are at most MaxHistogramBins bins; none when Count is 0.
type Histogram struct {
	Lo     int64   `json:"lo"`
	Width  int64   `json:"width"`
	Counts []int64 `json:"counts"`
}

// RejectClass counts the rejects of one reason class.
type RejectClass struct {
	// Class is the reason's first word ("timeout", "malformed", ...); Count the rejects.
	Class string `json:"class"`
	Count int64  `json:"count"`
	// Examples are the first MaxRejectExamples rejects of the class in rejects.jsonl (reasons cut
	// to 300 characters); empty when the counts come from the manifest alone.
	Examples []Reject `json:"examples"`
}

// Reject is one line of rejects.jsonl: an input item that gave no rows, and why.
type Reject struct {
	Source string `json:"source"`
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

// StatsMetrics are the per-trajectory metrics of every group, in order: tokens, learned_tokens,
// actions, states, events (all types), code_chars, then action:<type> and event:<type>.
var StatsMetrics = func() []string {
	m := []string{"tokens", "learned_tokens", "actions", "states", "events", "code_chars"}
	for _, a := range ActionTypes {
		m = append(m, "action:"+a)
	}
	for _, e := range EventTypes {
		m = append(m, "event:"+e)
	}
	return m
}()

// statRow holds the columns ComputeStats reads: parquet-go reads only these columns of a shard.
type statRow struct {
	Level          string `parquet:"level,dict"`
	RepoURL        string `parquet:"repo_url,dict"`
	Commit         string `parquet:"commit,dict"`
	Path           string `parquet:"path,dict"`
	SourceID       string `parquet:"source_id"`
	Direction      string `parquet:"direction,dict"`
	NumTokens      int32  `parquet:"num_tokens"`
	NumLearned     int32  `parquet:"num_learned"`
	NumActions     int32  `parquet:"num_actions"`
	NumStates      int32  `parquet:"num_states"`
	ActStepInto    int32  `parquet:"act_step_into"`
	ActStepOver    int32  `parquet:"act_step_over"`
	ActStepReturn  int32  `parquet:"act_step_return"`
	ActBreakpoint  int32  `parquet:"act_breakpoint"`
	ActContinue    int32  `parquet:"act_continue"`
	ActInvStepInto int32  `parquet:"act_inv_step_into"`
	ActInvStepOver int32  `parquet:"act_inv_step_over"`
	ActInvStepCall int32  `parquet:"act_inv_step_call"`
	EvCall         int32  `parquet:"ev_call"`
	EvLine         int32  `parquet:"ev_line"`
	EvReturn       int32  `parquet:"ev_return"`
	EvException    int32  `parquet:"ev_exception"`
	Exit           string `parquet:"exit,dict"`
	CodeChars      int32  `parquet:"code_chars"`
}

// actions returns the row's actions per type, in the order of ActionTypes.
func (r *statRow) actions() [8]int64 {
	return [8]int64{int64(r.ActStepInto), int64(r.ActStepOver), int64(r.ActStepReturn), int64(r.ActBreakpoint),
		int64(r.ActContinue), int64(r.ActInvStepInto), int64(r.ActInvStepOver), int64(r.ActInvStepCall)}
}

// events returns the row's events per type, in the order of EventTypes.
func (r *statRow) events() [4]int64 {
	return [4]int64{int64(r.EvCall), int64(r.EvLine), int64(r.EvReturn), int64(r.EvException)}
}

// metricValues returns the row's value of every metric, in the order of StatsMetrics.
func (r *statRow) metricValues(v *[numMetrics]int64) {
	ev := r.events()
	v[0], v[1], v[2], v[3] = int64(r.NumTokens), int64(r.NumLearned), int64(r.NumActions), int64(r.NumStates)
	v[4] = ev[0] + ev[1] + ev[2] + ev[3]
	v[5] = int64(r.CodeChars)
	a := r.actions()
	copy(v[6:14], a[:])
	copy(v[14:18], ev[:])
}

// numMetrics is len(StatsMetrics).
const numMetrics = 18

// sourceKey identifies a source: its level and repository URL or path.
type sourceKey struct{ level, source string }

// sourceOf returns the source of a row: level + repo_url at repository level, level + path otherwise.
func sourceOf(r *statRow) sourceKey {
	if r.Level == "repository" {
		return sourceKey{r.Level, r.RepoURL}
	}
	return sourceKey{r.Level, r.Path}
}

// traceKey identifies a trace (see RowCounts.Traces).
func traceKey(r *statRow) [16]byte {
	h := sha256.New()
	path := r.Path
	if r.Level == "repository" {
		path = ""
	}
	for _, f := range []string{r.Level, r.RepoURL, r.Commit, path, r.SourceID} {
		fmt.Fprintf(h, "%d:%s;", len(f), f)
	}
	var k [16]byte
	copy(k[:], h.Sum(nil))
	return k
}

// traceInfo is what ComputeStats keeps per distinct trace.
type traceInfo struct {
	groups uint64   // bit i: the trace has trajectories in fine group i
	source int32    // index of its source
	events [4]int32 // its events per type
}

// fineKey is a (level, direction) pair: the finest grouping, from which the others are merged.
type fineKey struct{ level, direction string }

// fineGroup accumulates the trajectories of one level and direction.
type fineGroup struct {
	rows    RowCounts
	metrics [numMetrics]valueCounts
}

// sourceAcc accumulates one source.
type sourceAcc struct {
	key  sourceKey
	rows RowCounts
}

// statsAcc accumulates a dataset's statistics, shard by shard in manifest order.
type statsAcc struct {
	fine      map[fineKey]int // index into groups
	groups    []*fineGroup
	groupKeys []fineKey
	sources   map[sourceKey]int
	srcs      []*sourceAcc
	traces    map[[16]byte]*traceInfo
	lo, hi    [numMetrics]int64 // dataset-wide minimum and maximum per metric
	rows      int64
}

func newRowCounts() RowCounts {
	r := RowCounts{Directions: map[string]int64{}, Actions: map[string]int64{}, Events: map[string]int64{}, Exits: map[string]int64{}}
	for _, a := range ActionTypes {
		r.Actions[a] = 0
	}
	for _, e := range EventTypes {
		r.Events[e] = 0
	}
	return r
}

func newInputCounts() InputCounts {
	return InputCounts{RejectsByClass: map[string]int64{}, Decontaminated: map[string]int64{}}
}

// addRow adds a row's trajectory counters (not traces or events) to c.
func (c *RowCounts) addRow(r *statRow) {
	c.Trajectories++
	c.Tokens += int64(r.NumTokens)
	c.LearnedTokens += int64(r.NumLearned)
	c.Directions[r.Direction]++
	for i, n := range r.actions() {
		c.Actions[ActionTypes[i]] += n
	}
	c.Exits[r.Exit]++
}

// merge adds o's trajectory counters (not traces or events) to c.
func (c *RowCounts) merge(o *RowCounts) {
	c.Trajectories += o.Trajectories
	c.Tokens += o.Tokens
	c.LearnedTokens += o.LearnedTokens
	for k, v := range o.Directions {
		c.Directions[k] += v
	}
	for k, v := range o.Actions {
		c.Actions[k] += v
	}
	for k, v := range o.Exits {
		c.Exits[k] += v
	}
}

// addTrace counts one trace with its events in c.
func (c *RowCounts) addTrace(t *traceInfo) {
	c.Traces++
	for i, n := range t.events {
		c.Events[EventTypes[i]] += int64(n)
	}
}

func (a *statsAcc) add(r *statRow) error {
	fk := fineKey{orUnknown(r.Level), orUnknown(r.Direction)}
	gi, ok := a.fine[fk]
	if !ok {
		if len(a.groups) == 64 {
			return errors.New("more than 64 level/direction pairs")
		}
		gi = len(a.groups)
		a.fine[fk] = gi
		g := &fineGroup{rows: newRowCounts()}
		a.groups = append(a.groups, g)
		a.groupKeys = append(a.groupKeys, fk)
	}
	g := a.groups[gi]
	g.rows.addRow(r)
	var v [numMetrics]int64
	r.metricValues(&v)
	for i := range numMetrics {
		g.metrics[i].add(v[i])
		if a.rows == 0 || v[i] < a.lo[i] {
			a.lo[i] = v[i]
		}
		if a.rows == 0 || v[i] > a.hi[i] {
			a.hi[i] = v[i]
		}
	}
	a.rows++

	sk := sourceOf(r)
	si, ok := a.sources[sk]
	if !ok {
		si = len(a.srcs)
		a.sources[sk] = si
		a.srcs = append(a.srcs, &sourceAcc{key: sk, rows: newRowCounts()})
	}
	a.srcs[si].rows.addRow(r)

	tk := traceKey(r)
	t, ok := a.traces[tk]
	if !ok {
		// The first row of a trace (in manifest and file order) gives its events; every row of a
		// trace carries the same.
		t = &traceInfo{source: int32(si), events: [4]int32{r.EvCall, r.EvLine, r.EvReturn, r.EvException}}
		a.traces[tk] = t
	}
	t.groups |= 1 << uint(gi)
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// ComputeStats computes the statistics of the dataset whose manifest is m: it reads the columns it
// needs from every shard m names (a few shards at a time, counted in manifest order), the counts in
// m, and rejects.jsonl if the dataset has one. Memory grows with the number of distinct traces
// (about 100 bytes each) and distinct metric values, not with the number of rows.
func ComputeStats(ctx context.Context, st *store.Store, m *Manifest) (*Stats, error) {
	acc := &statsAcc{fine: map[fineKey]int{}, sources: map[sourceKey]int{}, traces: map[[16]byte]*traceInfo{}}
	if err := readStatRows(ctx, st, m.Shards, acc.add); err != nil {
		return nil, err
	}
	rejects, haveRejects, err := readRejects(ctx, st)
	if err != nil {
		return nil, err
	}
	return acc.stats(m, rejects, haveRejects), nil
}

// shardRows is the outcome of reading one shard's stat columns.
type shardRows struct {
	rows []statRow
	err  error
}

// readStatRows reads the stat columns of shards, up to statsReadAhead at a time, and calls fn for
// every row in manifest and file order.
func readStatRows(ctx context.Context, st *store.Store, shards []ShardInfo, fn func(*statRow) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make([]chan shardRows, len(shards))
	for i := range slots {
		slots[i] = make(chan shardRows, 1)
	}
	sem := make(chan struct{}, statsReadAhead)
	go func() {
		for i, s := range shards {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			go func() {
				rows, err := readShardStatRows(ctx, st, s.Path)
				slots[i] <- shardRows{rows, err}
			}()
		}
	}()
	for i := range shards {
		var res shardRows
		select {
		case res = <-slots[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
		<-sem
		if res.err != nil {
			return res.err
		}
		for k := range res.rows {
			if err := fn(&res.rows[k]); err != nil {
				return fmt.Errorf("dataset: statistics: %s row %d: %w", shards[i].Path, k, err)
			}
		}
	}
	return nil
}

// readShardStatRows reads the stat columns of one shard after checking its schema.
func readShardStatRows(ctx context.Context, st *store.Store, path string) ([]statRow, error) {
	if !shardPathRE.MatchString(path) {
		return nil, fmt.Errorf("dataset: statistics: bad shard path %q", path)
	}
	data, err := st.ReadAll(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("dataset: statistics: %w", err)
	}
	f, err := openParquet(data)
	if err != nil {
		return nil, fmt.Errorf("dataset: statistics: shard %s: %w", path, err)
	}
	if err := compareSchema(f.Schema()); err != nil {
		return nil, fmt.Errorf("dataset: statistics: shard %s: %w", path, err)
	}
	rows := make([]statRow, 0, f.NumRows())
	err = eachOf(f, func(_ int64, r *statRow) error {
		rows = append(rows, *r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dataset: statistics: shard %s: %w", path, err)
	}
	return rows, nil
}

// readRejects reads rejects.jsonl; ok is false if the dataset has none.
func readRejects(ctx context.Context, st *store.Store) (rejects []Reject, ok bool, err error) {
	r, err := st.NewRangeReader(ctx, RejectsKey, 0, -1)
	if err != nil {
		if store.IsNotExist(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxRejectLine)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var rej Reject
		if err := json.Unmarshal(b, &rej); err != nil {
			return nil, false, fmt.Errorf("dataset: statistics: %s line %d in %s: %w", RejectsKey, line, st.URL(), err)
		}
		rejects = append(rejects, rej)
	}
	if err := sc.Err(); err != nil {
		return nil, false, fmt.Errorf("dataset: statistics: %s in %s: %w", RejectsKey, st.URL(), err)
	}
	return rejects, true, nil
}

// ReasonClass is a reject reason's class: its first word (up to the first ':' or space).
func ReasonClass(reason string) string {
	if i := strings.IndexAny(reason, ": "); i >= 0 {
		return reason[:i]
	}
	return reason
}

// countReject counts one reject of a source: its class, and quarantined, duplicate and
// decontaminated items when the reason says so ("quarantined…", "duplicate…",
// "decontaminated:<set>…").
func (c *InputCounts) countReject(rej *Reject) {
	class := ReasonClass(rej.Reason)
	c.Rejects++
	c.RejectsByClass[class]++
	switch class {
	case "quarantined":
		c.Quarantined++
	case "duplicate", "duplicates":
		c.Duplicates++
	case "decontaminated":
		set := strings.TrimPrefix(rej.Reason, "decontaminated")
		set = strings.TrimPrefix(set, ":")
		if i := strings.IndexAny(set, ": "); i >= 0 {
			set = set[:i]
		}
		if set == "" {
			set = "unknown"
		}
		c.Decontaminated[set]++
	}
}

// stats turns the accumulated counts into Stats.
func (a *statsAcc) stats(m *Manifest, rejects []Reject, haveRejects bool) *Stats {
	s := &Stats{
		Format: StatsFormat, FormatVersion: StatsFormatVersion,
		CreatedAt: m.CreatedAt.UTC(), Totals: m.Totals, Versions: m.Versions,
		Counts: map[string]int64{}, Groups: []Group{}, Sources: []SourceStats{}, Rejects: []RejectClass{},
	}
	for k, v := range m.Counts {
		s.Counts[k] = v
	}

	// Sources: those with rows, then those found only in rejects.jsonl.
	srcs := make([]SourceStats, len(a.srcs))
	for i, sa := range a.srcs {
		srcs[i] = SourceStats{Level: sa.key.level, Source: sa.key.source, RowCounts: sa.rows, InputCounts: newInputCounts()}
	}
	for _, t := range a.traces {
		srcs[t.source].addTrace(t)
	}
	bySource := map[string]int{} // reject source -> index; the first level in sorted order wins
	order := make([]int, len(srcs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return compareSource(&srcs[i], &srcs[j]) })
	for _, i := range order {
		if _, ok := bySource[srcs[i].Source]; !ok {
			bySource[srcs[i].Source] = i
		}
	}
	dsInputs := newInputCounts()
	classes := map[string]*RejectClass{}
	for k := range rejects {
		rej := &rejects[k]
		dsInputs.countReject(rej)
		i, ok := bySource[rej.Source]
		if !ok {
			i = len(srcs)
			bySource[rej.Source] = i
			srcs = append(srcs, SourceStats{Source: rej.Source, RowCounts: newRowCounts(), InputCounts: newInputCounts()})
		}
		srcs[i].countReject(rej)
		class := ReasonClass(rej.Reason)
		rc := classes[class]
		if rc == nil {
			rc = &RejectClass{Class: class, Examples: []Reject{}}
			classes[class] = rc
		}
		rc.Count++
		if len(rc.Examples) < MaxRejectExamples {
			ex := *rej
			ex.Reason = cut(ex.Reason, maxExampleReason)
			rc.Examples = append(rc.Examples, ex)
		}
	}
	for i := range srcs {
		srcs[i].Items = srcs[i].Traces + srcs[i].Rejects
	}
	slices.SortFunc(srcs, func(x, y SourceStats) int { return compareSource(&x, &y) })
	s.Sources = srcs

	// The dataset: rows from every group, inputs from the manifest's counts where it has them.
	ds := SourceStats{RowCounts: newRowCounts(), InputCounts: dsInputs}
	for _, g := range a.groups {
		ds.merge(&g.rows)
	}
	for _, t := range a.traces {
		ds.addTrace(t)
	}
	if !haveRejects {
		ds.RejectsByClass = map[string]int64{}
		for k, v := range m.Counts {
			if class, ok := strings.CutPrefix(k, "rejects:"); ok && class != "" {
				ds.RejectsByClass[class] = v
				classes[class] = &RejectClass{Class: class, Count: v, Examples: []Reject{}}
			}
		}
		ds.Rejects = 0
		for _, v := range ds.RejectsByClass {
			ds.Rejects += v
		}
	}
	if v, ok := m.Counts["rejects"]; ok {
		ds.Rejects = v
	}
	if v, ok := m.Counts["quarantined"]; ok {
		ds.Quarantined = v
	}
	if v, ok := m.Counts["duplicates"]; ok {
		ds.Duplicates = v
	}
	for k, v := range m.Counts {
		if set, ok := strings.CutPrefix(k, "decontaminated:"); ok && set != "" {
			ds.Decontaminated[set] = v
		}
	}
	ds.Items = ds.Traces + ds.Rejects
	if v, ok := m.Counts["items"]; ok {
		ds.Items = v
	}
	s.Dataset = ds

	for _, rc := range classes {
		s.Rejects = append(s.Rejects, *rc)
	}
	slices.SortFunc(s.Rejects, func(x, y RejectClass) int {
		if x.Count != y.Count {
			if x.Count > y.Count {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Class, y.Class)
	})

	s.Groups = a.groupStats()
	return s
}

// compareSource orders sources by level, then source.
func compareSource(x, y *SourceStats) int {
	if c := strings.Compare(x.Level, y.Level); c != 0 {
		return c
	}
	return strings.Compare(x.Source, y.Source)
}

// cut shortens s to at most n characters, marking the cut with "…".
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// groupStats merges the fine groups into every group: all, per direction, per level, per pair.
func (a *statsAcc) groupStats() []Group {
	levels, dirs := map[string]bool{}, map[string]bool{}
	for _, k := range a.groupKeys {
		levels[k.level] = true
		dirs[k.direction] = true
	}
	type spec struct{ level, dir string }
	specs := []spec{{"", ""}}
	for _, d := range sortedKeys(dirs) {
		specs = append(specs, spec{"", d})
	}
	for _, l := range sortedKeys(levels) {
		specs = append(specs, spec{l, ""})
		for _, d := range sortedKeys(dirs) {
			if _, ok := a.fine[fineKey{l, d}]; ok {
				specs = append(specs, spec{l, d})
			}
		}
	}
	widths := a.histogramWidths()
	var out []Group
	for _, sp := range specs {
		g := Group{Level: sp.level, Direction: sp.dir, RowCounts: newRowCounts(), Metrics: make([]Metric, numMetrics)}
		switch {
		case sp.level == "" && sp.dir == "":
			g.Name = "all"
		case sp.level == "":
			g.Name = sp.dir
		case sp.dir == "":
			g.Name = sp.level
		default:
			g.Name = sp.level + "/" + sp.dir
		}
		var mask uint64
		var vcs [numMetrics]valueCounts
		for i, k := range a.groupKeys {
			if (sp.level == "" || sp.level == k.level) && (sp.dir == "" || sp.dir == k.direction) {
				mask |= 1 << uint(i)
				g.merge(&a.groups[i].rows)
				for j := range numMetrics {
					vcs[j].merge(&a.groups[i].metrics[j])
				}
			}
		}
		for _, t := range a.traces {
			if t.groups&mask != 0 {
				g.addTrace(t)
			}
		}
		for j := range numMetrics {
			g.Metrics[j] = vcs[j].metric(StatsMetrics[j], a.lo[j], widths[j])
		}
		out = append(out, g)
	}
	return out
}

// histogramWidths returns each metric's bin width: the smallest power of two that covers the
// dataset's range in at most MaxHistogramBins bins aligned on multiples of the width.
func (a *statsAcc) histogramWidths() [numMetrics]int64 {
	var w [numMetrics]int64
	for i := range numMetrics {
		w[i] = HistogramWidth(a.lo[i], a.hi[i])
	}
	return w
}

// HistogramWidth returns the bin width for values in [lo, hi]: the smallest power of two w for
// which the bins [k·w, (k+1)·w) covering lo to hi are at most MaxHistogramBins.
func HistogramWidth(lo, hi int64) int64 {
	w := int64(1)
	for floorDiv(hi, w)-floorDiv(lo, w)+1 > MaxHistogramBins && w < 1<<62 {
		w *= 2
	}
	return w
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// denseValues is the range of small values valueCounts keeps in a slice instead of a map.
const denseValues = 4096

// valueCounts counts how often each integer value occurs: exact percentiles in memory that grows
// with the number of distinct values, not of rows.
type valueCounts struct {
	dense  []int64 // dense[v] for 0 <= v < denseValues
	sparse map[int64]int64
}

func (c *valueCounts) add(v int64) { c.addN(v, 1) }

func (c *valueCounts) addN(v, n int64) {
	if v >= 0 && v < denseValues {
		if c.dense == nil {
			c.dense = make([]int64, denseValues)
		}
		c.dense[v] += n
		return
	}
	if c.sparse == nil {
		c.sparse = map[int64]int64{}
	}
	c.sparse[v] += n
}

func (c *valueCounts) merge(o *valueCounts) {
	for v, n := range o.dense {
		if n != 0 {
			c.addN(int64(v), n)
		}
	}
	for v, n := range o.sparse {
		c.addN(v, n)
	}
}

// valueCount is one distinct value and how often it occurs.
type valueCount struct{ v, n int64 }

// sorted returns the distinct values in increasing order.
func (c *valueCounts) sorted() []valueCount {
	var out []valueCount
	for v, n := range c.sparse {
		if v < 0 {
			out = append(out, valueCount{v, n})
		}
	}
	slices.SortFunc(out, func(a, b valueCount) int { return cmpInt64(a.v, b.v) })
	for v, n := range c.dense {
		if n != 0 {
			out = append(out, valueCount{int64(v), n})
		}
	}
	var big []valueCount
	for v, n := range c.sparse {
		if v >= denseValues {
			big = append(big, valueCount{v, n})
		}
	}
	slices.SortFunc(big, func(a, b valueCount) int { return cmpInt64(a.v, b.v) })
	return append(out, big...)
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// metric summarizes the counted values; the histogram starts at the multiple of width at or below
// lo (the dataset's minimum).
func (c *valueCounts) metric(name string, lo, width int64) Metric {
	vals := c.sorted()
	m := Metric{Name: name, Histogram: Histogram{Width: width, Counts: []int64{}}}
	for _, vc := range vals {
		m.Count += vc.n
		m.Sum += vc.v * vc.n
	}
	if m.Count == 0 {
		return m
	}
	m.Mean = round6(float64(m.Sum) / float64(m.Count))
	m.Min, m.Max = vals[0].v, vals[len(vals)-1].v
	m.P25 = round6(percentile(vals, m.Count, 0.25))
	m.P50 = round6(percentile(vals, m.Count, 0.50))
	m.P90 = round6(percentile(vals, m.Count, 0.90))
	first := floorDiv(lo, width)
	m.Histogram.Lo = first * width
	m.Histogram.Counts = make([]int64, floorDiv(m.Max, width)-first+1)
	for _, vc := range vals {
		m.Histogram.Counts[floorDiv(vc.v, width)-first] += vc.n
	}
	return m
}

// round6 rounds x to 6 decimals (when that is exact enough to matter), so that floating-point noise
// such as 319.99999999999994 for 320 stays out of the statistics.
func round6(x float64) float64 {
	if math.Abs(x) >= 1e9 {
		return x
	}
	return math.Round(x*1e6) / 1e6
}

// percentile returns the p-quantile (0 <= p <= 1) of n values given as distinct values in increasing
// order with their counts, interpolating linearly between the values of ranks floor(h) and
// floor(h)+1 where h = (n-1)·p (numpy's default "linear" method).
func percentile(vals []valueCount, n int64, p float64) float64 {
	if n == 0 {
		return 0
	}
	h := float64(n-1) * p
	k := int64(math.Floor(h))
	lo := valueAt(vals, k)
	if k+1 >= n {
		return float64(lo)
	}
	hi := valueAt(vals, k+1)
	return float64(lo) + (h-float64(k))*float64(hi-lo)
}

// valueAt returns the value of rank k (from 0) among the counted values.
func valueAt(vals []valueCount, k int64) int64 {
	for _, vc := range vals {
		if k < vc.n {
			return vc.v
		}
		k -= vc.n
	}
	return vals[len(vals)-1].v
}

// Matches reports whether s describes the dataset version whose manifest is m: same created_at and
// totals.
func (s *Stats) Matches(m *Manifest) bool {
	return s.CreatedAt.Equal(m.CreatedAt) && s.Totals == m.Totals
}

// Group returns the group of the given level and direction ("" for any), or nil.
func (s *Stats) Group(level, direction string) *Group {
	for i := range s.Groups {
		if s.Groups[i].Level == level && s.Groups[i].Direction == direction {
			return &s.Groups[i]
		}
	}
	return nil
}

// Metric returns the group's metric of that name, or nil.
func (g *Group) Metric(name string) *Metric {
	for i := range g.Metrics {
		if g.Metrics[i].Name == name {
			return &g.Metrics[i]
		}
	}
	return nil
}

// Marshal returns the canonical JSON of s: fields in declaration order, map keys sorted, two-space
// indent, no HTML escaping, a final newline.
func (s *Stats) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("dataset: encode statistics: %w", err)
	}
	return buf.Bytes(), nil
}

// ParseStats decodes stats.json, refusing unknown fields, trailing data and other formats.
func ParseStats(data []byte) (*Stats, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Stats
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("dataset: malformed %s: %w", StatsKey, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("dataset: malformed %s: trailing data after the JSON object", StatsKey)
	}
	if s.Format != StatsFormat || s.FormatVersion != StatsFormatVersion {
		return nil, fmt.Errorf("dataset: %s: format %q version %d, want %q version %d", StatsKey, s.Format, s.FormatVersion, StatsFormat, StatsFormatVersion)
	}
	return &s, nil
}

// ReadStats reads stats.json from the dataset in store. If there is none, the error satisfies
// IsNotExist.
func ReadStats(ctx context.Context, st *store.Store) (*Stats, error) {
	data, err := st.ReadLimit(ctx, StatsKey, MaxStatsBytes)
	if err != nil {
		return nil, err
	}
	s, err := ParseStats(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", st.URL(), err)
	}
	return s, nil
}

// LoadStats returns the statistics of the dataset whose manifest is m: stats.json if it exists
// and Matches m, otherwise freshly computed (computed is then true). Nothing is written.
func LoadStats(ctx context.Context, st *store.Store, m *Manifest) (s *Stats, computed bool, err error) {
	s, err = ReadStats(ctx, st)
	switch {
	case err == nil && s.Matches(m):
		return s, false, nil
	case err != nil && !store.IsNotExist(err) && ctx.Err() != nil:
		return nil, false, ctx.Err()
	}
	s, err = ComputeStats(ctx, st, m)
	return s, true, err
}

// WriteStats writes s as stats.parquet, then stats.json (the file readers check against the
// manifest), next to the manifest in store, replacing earlier ones (a dataset that gets a new
// version gets new statistics).
func WriteStats(ctx context.Context, st *store.Store, s *Stats) error {
	pq, err := s.EncodeParquet()
	if err != nil {
		return err
	}
	js, err := s.Marshal()
	if err != nil {
		return err
	}
	if err := st.Put(ctx, StatsParquetKey, pq, &blob.WriterOptions{ContentType: ShardContentType}); err != nil {
		return err
	}
	return st.Put(ctx, StatsKey, js, &blob.WriterOptions{ContentType: manifestContentType})
}

// StatsRecord is one row of stats.parquet, a long table: a distribution (kind "distribution": one
// metric of one group, every field set) or a counter (kind "counter": Count holds the value; the
// statistics fields are zero).
type StatsRecord struct {
	// Kind is "distribution" or "counter".
	Kind string `parquet:"kind,dict" json:"kind"`
	// Group is the group's name ("all", "forward", "function", "function/forward", ...), "dataset"
	// for the dataset's counters, or "source" for a source's.
	Group     string `parquet:"group,dict" json:"group"`
	Level     string `parquet:"level,dict" json:"level"`
	Direction string `parquet:"direction,dict" json:"direction"`
	// Source is the source's repository URL or path (source rows only).
	Source string `parquet:"source,dict" json:"source"`
	// Metric is the distribution's metric (StatsMetrics) or the counter's name.
	Metric string  `parquet:"metric,dict" json:"metric"`
	Count  int64   `parquet:"count" json:"count"`
	Sum    int64   `parquet:"sum" json:"sum"`
	Mean   float64 `parquet:"mean" json:"mean"`
	Min    int64   `parquet:"min" json:"min"`
	P25    float64 `parquet:"p25" json:"p25"`
	P50    float64 `parquet:"p50" json:"p50"`
	P90    float64 `parquet:"p90" json:"p90"`
	Max    int64   `parquet:"max" json:"max"`
	// HistLo, HistWidth and HistCounts are the distribution's histogram.
	HistLo     int64   `parquet:"hist_lo" json:"hist_lo"`
	HistWidth  int64   `parquet:"hist_width" json:"hist_width"`
	HistCounts []int64 `parquet:"hist_counts,list" json:"hist_counts"`
}

// Records returns s as the rows of stats.parquet: the dataset's counters, then per group its
// counters and distributions, then per source its counters.
func (s *Stats) Records() []StatsRecord {
	var out []StatsRecord
	counters := func(group, level, dir, source string, names []string, vals []int64) {
		for i, n := range names {
			out = append(out, StatsRecord{Kind: "counter", Group: group, Level: level, Direction: dir, Source: source,
				Metric: n, Count: vals[i], HistCounts: []int64{}})
		}
	}
	s.Dataset.counters(func(n []string, v []int64) { counters("dataset", "", "", "", n, v) })
	for _, g := range s.Groups {
		names, vals := g.RowCounts.counters()
		counters(g.Name, g.Level, g.Direction, "", names, vals)
		for _, m := range g.Metrics {
			out = append(out, StatsRecord{Kind: "distribution", Group: g.Name, Level: g.Level, Direction: g.Direction,
				Metric: m.Name, Count: m.Count, Sum: m.Sum, Mean: m.Mean, Min: m.Min, P25: m.P25, P50: m.P50,
				P90: m.P90, Max: m.Max, HistLo: m.Histogram.Lo, HistWidth: m.Histogram.Width,
				HistCounts: slices.Clone(m.Histogram.Counts)})
		}
	}
	for _, src := range s.Sources {
		src.counters(func(n []string, v []int64) { counters("source", src.Level, "", src.Source, n, v) })
	}
	return out
}

// counters lists the row counters by name: traces, trajectories, tokens, learned_tokens, then
// direction:<d>, action:<type>, event:<type>, exit:<state>.
func (c *RowCounts) counters() ([]string, []int64) {
	names := []string{"traces", "trajectories", "tokens", "learned_tokens"}
	vals := []int64{c.Traces, c.Trajectories, c.Tokens, c.LearnedTokens}
	for _, k := range sortedKeys(c.Directions) {
		names, vals = append(names, "direction:"+k), append(vals, c.Directions[k])
	}
	for _, k := range ActionTypes {
		names, vals = append(names, "action:"+k), append(vals, c.Actions[k])
	}
	for _, k := range EventTypes {
		names, vals = append(names, "event:"+k), append(vals, c.Events[k])
	}
	for _, k := range sortedKeys(c.Exits) {
		names, vals = append(names, "exit:"+k), append(vals, c.Exits[k])
	}
	return names, vals
}

// counters calls fn with the row counters, then items, rejects, rejects:<class>, quarantined,
// decontaminated:<set> and duplicates.
func (s *SourceStats) counters(fn func([]string, []int64)) {
	names, vals := s.RowCounts.counters()
	names, vals = append(names, "items", "rejects"), append(vals, s.Items, s.Rejects)
	for _, k := range sortedKeys(s.RejectsByClass) {
		names, vals = append(names, "rejects:"+k), append(vals, s.RejectsByClass[k])
	}
	names, vals = append(names, "quarantined"), append(vals, s.Quarantined)
	for _, k := range sortedKeys(s.Decontaminated) {
		names, vals = append(names, "decontaminated:"+k), append(vals, s.Decontaminated[k])
	}
	names, vals = append(names, "duplicates"), append(vals, s.Duplicates)
	fn(names, vals)
}

// EncodeParquet returns stats.parquet's bytes: Records as one zstd-compressed Parquet file. The
// bytes are a pure function of s.
func (s *Stats) EncodeParquet() ([]byte, error) {
	recs := s.Records()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[StatsRecord](&buf,
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedDefault}),
		parquet.KeyValueMetadata(MetaFormat, StatsFormat),
	)
	if _, err := w.Write(recs); err != nil {
		return nil, fmt.Errorf("dataset: encode %s: %w", StatsParquetKey, err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("dataset: encode %s: %w", StatsParquetKey, err)
	}
	return buf.Bytes(), nil
}
