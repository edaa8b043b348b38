package dataset

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// Dataset statistics: stats.json and stats.parquet next to the manifest (see docs/dataset.md,
// "Statistics"). ComputeStats reads only the columns it needs from the shards the manifest names,
// plus the manifest's counts and rejects.jsonl; the result is a pure function of those, so the same
// dataset always gives the same bytes. The same statistics come without reading the shards from
// the merged StatsPart of every batch (statspart.go).
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
	Counts schemas.Counts `json:"counts"`
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
	// Repositories is the yield report of the repository sources, summed (absent when the dataset
	// has none): tests collected, run, passed untraced and traced, quarantined, and why
	// repositories gave no rows, by class. Each repository's own is its source's Yield.
	Repositories *Yield `json:"repositories,omitempty"`
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
	// Splits counts trajectories per split (the split column; absent for rows written before it).
	Splits map[string]int64 `json:"splits,omitempty"`
	// NoisyRows counts trajectories with noisy values (noisy_values > 0: a failed repr, a value
	// that differed between two runs, an epoch time, a hash-sized integer); NoisyShare is
	// NoisyRows / Trajectories (0 without trajectories), rounded to 6 decimals. Rows of row
	// schema 1 have no noisy_values column and count as clean.
	NoisyRows  int64   `json:"noisy_rows"`
	NoisyShare float64 `json:"noisy_share"`
	// PlaceholderGapRows counts trajectories whose address placeholders do not run 0x1, 0x2, ...
	// in order of first appearance (placeholder_gap; a check: rows renumber them), and
	// PlaceholderGapShare is their share, as NoisyShare.
	PlaceholderGapRows  int64   `json:"placeholder_gap_rows"`
	PlaceholderGapShare float64 `json:"placeholder_gap_share"`
	// InputSources counts trajectories per input_source (function-level rows of row schema 3:
	// corpus, test_call, doctest, example, typed, fuzzed, llm; "other" for a value that is none
	// of these); absent when no row has one.
	InputSources map[string]int64 `json:"input_sources,omitempty"`
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
	// Yield is the yield report of a repository source (absent for other sources).
	Yield *Yield `json:"yield,omitempty"`
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
	// Examples are the first MaxRejectExamples rejects of the class by key (the order in which the
	// pipeline writes rejects.jsonl; ties by source, then reason), reasons cut to 300 characters;
	// empty when the counts come from the manifest alone.
	Examples []RejectExample `json:"examples"`
}

// RejectExample is one line of rejects.jsonl: an input item that gave no rows, and why.
type RejectExample struct {
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
	Split          string `parquet:"split,dict"`
	// Columns of row schema 2: a shard of schema 1 lacks them and they read as zero.
	NoisyValues    int32 `parquet:"noisy_values"`
	PlaceholderGap bool  `parquet:"placeholder_gap"`
	// The column of row schema 3: a shard of schema 1 or 2 lacks it and it reads as empty.
	InputSource string `parquet:"input_source,dict"`
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

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// ComputeStats computes the statistics of the dataset whose manifest is m: it reads the columns it
// needs from every shard m names (a few shards at a time, counted in manifest order), the counts in
// m, and rejects.jsonl if the dataset has one. It accumulates every row into one StatsPart (so a
// trace whose rows span shards still counts once), adds the rejects and returns the part's Stats:
// the same code and result as merging the parts of the dataset's batches. Memory grows with the
// number of distinct traces (about 100 bytes each), sources and metric values (at most
// MaxPartValues per metric and level/direction group), not with the number of rows.
func ComputeStats(ctx context.Context, st *store.Store, m *Manifest) (*Stats, error) {
	acc := newStatsAcc()
	shards, err := m.AllShards(ctx, st)
	if err != nil {
		return nil, err
	}
	if err := readStatRows(ctx, st, shards, acc.add); err != nil {
		return nil, err
	}
	p := acc.part()
	// The rejects, a few thousand at a time.
	var batch []schemas.Reject
	haveRejects, err := EachReject(ctx, st, m, func(r schemas.Reject) error {
		if batch = append(batch, r); len(batch) == 4096 {
			p.AddRejects(batch)
			batch = batch[:0]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dataset: statistics: %w", err)
	}
	if haveRejects {
		p.AddRejects(batch)
	}
	var ys []schemas.RepoYield
	err = EachRepoYield(ctx, st, m, func(y schemas.RepoYield) error {
		if ys = append(ys, y); len(ys) == 4096 {
			p.AddYields(ys)
			ys = ys[:0]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dataset: statistics: %w", err)
	}
	p.AddYields(ys)
	return p.Stats(m), nil
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
	data, err := readStored(ctx, st, path)
	if err != nil {
		return nil, fmt.Errorf("dataset: statistics: %w", err)
	}
	f, err := openParquet(data)
	if err != nil {
		return nil, fmt.Errorf("dataset: statistics: shard %s: %w", path, err)
	}
	if err := compareStatSchema(f.Schema()); err != nil {
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

// rowSchema2Columns are the columns row schema 2 added to schema 1.
var rowSchema2Columns = map[string]bool{"code_omitted": true, "function_id": true, "split": true,
	"truncated": true, "noisy_values": true, "placeholder_gap": true}

// rowSchema3Columns are the columns row schema 3 added to schema 2.
var rowSchema3Columns = map[string]bool{"input_source": true}

// statSchemas are the shard schemas statistics read: the current row schema, schema 2 (the
// current one without rowSchema3Columns), whose rows have no input source, and schema 1 (schema 2
// without rowSchema2Columns), whose rows also count as clean (no noisy values, no placeholder
// gap).
var statSchemas = func() [][]SchemaColumn {
	cur := DescribeSchema(expectedSchema)
	var v2, v1 []SchemaColumn
	for _, c := range cur {
		if rowSchema3Columns[c.Path] {
			continue
		}
		v2 = append(v2, c)
		if !rowSchema2Columns[c.Path] {
			v1 = append(v1, c)
		}
	}
	return [][]SchemaColumn{cur, v2, v1}
}()

// compareStatSchema checks that a shard's schema is one statistics read (statSchemas): the
// error is the comparison with the current schema.
func compareStatSchema(got *parquet.Schema) error {
	have := DescribeSchema(got)
	var first error
	for _, want := range statSchemas {
		err := compareColumns(want, have)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// ReasonClass is a reject reason's class: its first word (up to the first ':' or space).
func ReasonClass(reason string) string {
	if i := strings.IndexAny(reason, ": "); i >= 0 {
		return reason[:i]
	}
	return reason
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

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
	if m.Stats != nil {
		// A version's own statistics, computed when it was committed.
		data, err := ReadObject(ctx, st, *m.Stats)
		if err != nil {
			return nil, false, err
		}
		s, err := ParseStats(data)
		return s, false, err
	}
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
	if err := st.Put(ctx, StatsParquetKey, pq, &store.PutOptions{ContentType: ShardContentType}); err != nil {
		return err
	}
	return st.Put(ctx, StatsKey, js, &store.PutOptions{ContentType: manifestContentType})
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
	s.Dataset.counters(func(n []string, v []int64) {
		if s.Repositories != nil {
			n, v = s.Repositories.Generation.counters(n, v)
		}
		counters("dataset", "", "", "", n, v)
	})
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
		src.counters(func(n []string, v []int64) {
			if src.Yield != nil {
				n, v = src.Yield.Generation.counters(n, v)
			}
			counters("source", src.Level, "", src.Source, n, v)
		})
	}
	return out
}

// counters lists the row counters by name: traces, trajectories, tokens, learned_tokens, then
// direction:<d>, action:<type>, event:<type>, exit:<state>, noisy_rows, placeholder_gap_rows and
// input_source:<source>.
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
	names, vals = append(names, "noisy_rows", "placeholder_gap_rows"), append(vals, c.NoisyRows, c.PlaceholderGapRows)
	for _, k := range sortedKeys(c.InputSources) {
		names, vals = append(names, "input_source:"+k), append(vals, c.InputSources[k])
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

// counters appends the generation's counters to names and vals (none for nil):
// generation:<field> for modules, found, units, with_input, inputs, attempts, traced and rows,
// generation:coverage:<lower bound in percent>, generation:by_source:<source> and
// generation:loss:<reason>.
func (g *Generation) counters(names []string, vals []int64) ([]string, []int64) {
	if g == nil {
		return names, vals
	}
	for _, f := range []struct {
		name string
		n    int64
	}{{"modules", g.Modules}, {"found", g.Found}, {"units", g.Units}, {"with_input", g.WithInput},
		{"inputs", g.Inputs}, {"attempts", g.Attempts}, {"traced", g.Traced}, {"rows", g.Rows}} {
		names, vals = append(names, "generation:"+f.name), append(vals, f.n)
	}
	for i, n := range g.Coverage {
		names, vals = append(names, fmt.Sprintf("generation:coverage:%d", i*100/schemas.CoverageBuckets)), append(vals, n)
	}
	for _, k := range sortedKeys(g.BySource) {
		names, vals = append(names, "generation:by_source:"+k), append(vals, g.BySource[k])
	}
	for _, k := range sortedKeys(g.Losses) {
		names, vals = append(names, "generation:loss:"+k), append(vals, g.Losses[k])
	}
	return names, vals
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
