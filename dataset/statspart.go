package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/schemas"
)

// Mergeable statistics. A StatsPart is the exact state from which Stats are computed, small enough
// to store with every batch: it holds counters and, per metric, distinct values with their counts,
// so its size grows with the number of distinct values, level/direction groups, sources and reject
// classes, never with the number of rows. Parts merge (StatsPart.Merge) associatively and
// commutatively, so a dataset's statistics are the merge of its batches' parts in any grouping
// (batches, then pages of batches, then the dataset), and never need the shards again:
//
//	p, _ := NewStatsPart(rows)  // when a batch's shard is built
//	p.AddRejects(rejects)       // the batch's (or a planning page's) rejects
//	total.Merge(p)              // page by page, then pages into the dataset
//	s := total.Stats(manifest)  // the same bytes as ComputeStats
//
// Exactness. Stats from merged parts equal ComputeStats' byte for byte when (1) all rows of a
// trace (one input item) are in one part, which holds for the pipeline's batches — a part counts
// its traces before it is stored, so a trace split over two parts would count twice — and (2) the
// rejects given to the parts are those of rejects.jsonl (reject examples are the first of each
// class in key order, the order in which the pipeline writes rejects.jsonl).
//
// Coarsening. A metric keeps at most MaxPartValues distinct values per level/direction group.
// Below that its values are exact, and so are its percentiles. Beyond it, values are merged into
// power-of-two bins [k·2^s, (k+1)·2^s), s the smallest shift that brings the bins down to
// MaxPartValues; s is a function of the values alone, whatever the order in which they were added
// and parts merged, so the result is still the same in any grouping. Count, sum, mean, minimum,
// maximum and the histogram stay exact (a histogram bin is never narrower than 2^s), and the percentiles
// are then approximate: off by less than the bin width 2^s. ComputeStats shares this code, so its
// output is unchanged for datasets below the cap and equal to the merged parts' above it.
const (
	// StatsPartVersion is the layout version of a StatsPart (its "v" field); ParseStatsPart
	// refuses other versions.
	StatsPartVersion = 1
	// MaxPartValues is the most distinct values (or bins) a part keeps per metric of a
	// level/direction group.
	MaxPartValues = 4096
	// maxPartValue bounds the magnitude of metric values in a parsed part: rows hold int32 counts,
	// and the largest metric (events) sums four of them.
	maxPartValue = 1 << 40
	// maxPartShift is the largest bin shift a parsed part may have.
	maxPartShift = 62
	// sparseValues is how many distinct values a valueCounts keeps in a map before it also uses a
	// dense slice for the small ones.
	sparseValues = 64
	// denseValues is the range of small values (bins) valueCounts keeps in a slice once dense.
	denseValues = 4096
)

// StatsPart is the mergeable state of a dataset's statistics over some of its rows and rejects: see
// the notes on mergeable statistics above StatsPartVersion for how parts are made and merged and
// what is exact. Its JSON (encoding/json) is canonical: lists are sorted by their keys, map keys
// are sorted by the encoder, and empty lists, maps and false flags are left out, so equal parts
// encode to equal bytes; ParseStatsPart reads it back. The zero value is an empty part.
type StatsPart struct {
	// Version is the layout's version, StatsPartVersion when encoded.
	Version int `json:"v"`
	// Groups count the rows per level and direction ("unknown" when the row's is empty), sorted by
	// level then direction.
	Groups []PartGroup `json:"groups,omitempty"`
	// Levels count the traces per level, sorted by level: a trace has one level, but may have
	// trajectories in several directions.
	Levels []PartLevel `json:"levels,omitempty"`
	// Sources count the rows per source, sorted by level then source.
	Sources []PartSource `json:"sources,omitempty"`
	// HaveRejects is set once rejects were added (even none): the statistics then count rejects
	// from the parts rather than from the manifest's counts, as ComputeStats does for a dataset with
	// a rejects.jsonl.
	HaveRejects bool `json:"have_rejects,omitempty"`
	// Rejects count the rejects per source as the rejects name it, sorted by source.
	Rejects []PartRejects `json:"rejects,omitempty"`
	// Examples are, per reason class, the first MaxRejectExamples rejects of the class in
	// (key, source, reason) order, reasons cut to 300 characters.
	Examples map[string][]RejectExample `json:"examples,omitempty"`
	// Yields sum the repositories' yield reports per source (AddYields), sorted by source.
	Yields []PartYield `json:"yields,omitempty"`
	// GenRows count the function-level rows of generated items per repository (their repo_url),
	// sorted by source: the rows of a source's Generation.
	GenRows []PartGenRows `json:"gen_rows,omitempty"`
}

// MarshalJSON encodes p with Version set to StatsPartVersion (the layout this code writes), so
// that the zero value encodes as a valid empty part too.
func (p StatsPart) MarshalJSON() ([]byte, error) {
	type plain StatsPart // without this method
	c := plain(p)
	c.Version = StatsPartVersion
	data, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("dataset: encode statistics part: %w", err)
	}
	return data, nil
}

// PartCounts are the row counters of a group or source. Traces and Events count the distinct traces
// with trajectories in the group or source, each trace once.
type PartCounts struct {
	// Traces counts distinct traces (see RowCounts.Traces); Trajectories counts rows; Tokens and
	// LearnedTokens sum num_tokens and num_learned.
	Traces        int64 `json:"traces"`
	Trajectories  int64 `json:"trajs"`
	Tokens        int64 `json:"tokens"`
	LearnedTokens int64 `json:"learned"`
	// Directions and Exits count trajectories per direction and exit state (as the rows hold them).
	Directions map[string]int64 `json:"dirs"`
	Exits      map[string]int64 `json:"exits"`
	// Splits counts trajectories per split (rows with a split column; absent before it).
	Splits map[string]int64 `json:"splits,omitempty"`
	// Actions sums the actions per type, in the order of ActionTypes; Events sums the traces'
	// events per type, in the order of EventTypes.
	Actions []int64 `json:"actions"`
	Events  []int64 `json:"events"`
	// Noisy counts trajectories with noisy values (noisy_values > 0), Gap those with a
	// placeholder gap (placeholder_gap); left out when 0, so parts without them encode as before.
	Noisy int64 `json:"noisy,omitempty"`
	Gap   int64 `json:"gap,omitempty"`
	// InputSources counts trajectories per input_source (rows of schema 3 at function level; an
	// unknown source counts as GenOther); left out when empty.
	InputSources map[string]int64 `json:"inputs,omitempty"`
}

// PartGroup holds the rows of one level and direction.
type PartGroup struct {
	// Level and Direction are the rows' ("unknown" for an empty one).
	Level     string `json:"level"`
	Direction string `json:"dir"`
	PartCounts
	// Metrics are the distributions of the metrics, in the order of StatsMetrics.
	Metrics []PartValues `json:"metrics"`
}

// PartLevel counts the distinct traces of one level and their events (in the order of EventTypes).
type PartLevel struct {
	// Level is the traces' level ("unknown" for an empty one); Traces counts them; Events sums
	// their events per type.
	Level  string  `json:"level"`
	Traces int64   `json:"traces"`
	Events []int64 `json:"events"`
}

// PartSource holds the rows of one source: level and repository URL or function-level path.
type PartSource struct {
	// Level is the rows' level (as they hold it); Source their repository URL or path.
	Level  string `json:"level"`
	Source string `json:"source"`
	PartCounts
}

// PartRejects counts the rejects of one source, as rejects name it.
type PartRejects struct {
	// Source is the rejects' source field.
	Source string `json:"source"`
	// Classes counts the rejects per reason class (ReasonClass).
	Classes map[string]int64 `json:"classes"`
	// Decontaminated counts the rejects of class "decontaminated" per evaluation set.
	Decontaminated map[string]int64 `json:"decon,omitempty"`
}

// PartValues is the distribution of one metric: distinct values in increasing order with their
// counts. With Shift s > 0 the values are coarsened: each is the low end of a bin [v, v+2^s) and
// its count that of the bin, and Sum, Min and Max keep the exact total, minimum and maximum (with
// Shift 0 they are zero and follow from the values).
type PartValues struct {
	// Shift is s: 0 for exact values, at most 62.
	Shift int `json:"shift,omitempty"`
	// Values are the distinct values (bins' low ends), increasing; Counts how often each occurs.
	Values []int64 `json:"v"`
	Counts []int64 `json:"n"`
	// Sum, Min and Max are the exact total, minimum and maximum (Shift > 0 only).
	Sum int64 `json:"sum,omitempty"`
	Min int64 `json:"min,omitempty"`
	Max int64 `json:"max,omitempty"`
}

// NewStatsPart returns the statistics part of rows: the rows of one batch, as WriteShard writes
// them. All rows of a trace (one input item) must be in the same part (see the notes above
// StatsPartVersion). With no
// rows it returns an empty part.
func NewStatsPart(rows []schemas.Row) (*StatsPart, error) {
	acc := newStatsAcc()
	for i := range rows {
		r := statRowOf(&rows[i])
		if err := acc.add(&r); err != nil {
			return nil, fmt.Errorf("dataset: statistics part: row %d (id %q): %w", i, rows[i].ID, err)
		}
	}
	return acc.part(), nil
}

// statRowOf takes the columns statistics read from a row.
func statRowOf(r *schemas.Row) statRow {
	return statRow{
		Level: r.Level, RepoURL: r.RepoURL, Commit: r.Commit, Path: r.Path, SourceID: r.SourceID,
		Direction: r.Direction, NumTokens: r.NumTokens, NumLearned: r.NumLearned, NumActions: r.NumActions,
		NumStates: r.NumStates, ActStepInto: r.ActStepInto, ActStepOver: r.ActStepOver,
		ActStepReturn: r.ActStepReturn, ActBreakpoint: r.ActBreakpoint, ActContinue: r.ActContinue,
		ActInvStepInto: r.ActInvStepInto, ActInvStepOver: r.ActInvStepOver, ActInvStepCall: r.ActInvStepCall,
		EvCall: r.EvCall, EvLine: r.EvLine, EvReturn: r.EvReturn, EvException: r.EvException,
		Exit: r.Exit, CodeChars: r.CodeChars, Split: r.Split, NoisyValues: r.NoisyValues, PlaceholderGap: r.PlaceholderGap,
		InputSource: r.InputSource,
	}
}

// AddRejects counts rejects into p: per source and class (the reject's Class; for a record
// written before rejects had classes, ReasonClass of its reason), with decontaminated items per
// evaluation set ("decontaminated: <set>"), and keeps the first examples of every class. It marks p as having
// rejects (HaveRejects), even when rejects is empty. Add each reject to one part only: those of a
// batch to the batch's part, those of a planning page to a part of its own.
func (p *StatsPart) AddRejects(rejects []schemas.Reject) {
	o := &StatsPart{Version: StatsPartVersion, HaveRejects: true}
	bySource := map[string]*PartRejects{}
	examples := map[string][]RejectExample{}
	for i := range rejects {
		rej := RejectExample{Source: validUTF8(rejects[i].Source), Key: validUTF8(rejects[i].Key), Reason: validUTF8(rejects[i].Reason)}
		pr := bySource[rej.Source]
		if pr == nil {
			pr = &PartRejects{Source: rej.Source, Classes: map[string]int64{}}
			bySource[rej.Source] = pr
		}
		class := validUTF8(string(rejects[i].Class))
		if class == "" {
			class = ReasonClass(rej.Reason)
		}
		set := rejects[i].EvalSet
		if set == "" && class == string(schemas.RejectDecontaminated) {
			set = decontaminatedSet(rej.Reason) // a reject stored before it named its set
		}
		pr.add(class, validUTF8(set))
		rej.Reason = cut(rej.Reason, maxExampleReason)
		examples[class] = mergeExamples(examples[class], []RejectExample{rej})
	}
	for _, pr := range bySource {
		o.Rejects = append(o.Rejects, *pr)
	}
	slices.SortFunc(o.Rejects, func(a, b PartRejects) int { return strings.Compare(a.Source, b.Source) })
	if len(examples) > 0 {
		o.Examples = examples
	}
	p.Merge(o)
}

// add counts one reject of the source, of class (and, for a decontaminated one, its
// evaluation set).
func (r *PartRejects) add(class, evalSet string) {
	r.Classes[class]++
	if class == string(schemas.RejectDecontaminated) {
		if r.Decontaminated == nil {
			r.Decontaminated = map[string]int64{}
		}
		if evalSet == "" {
			evalSet = "unknown"
		}
		r.Decontaminated[evalSet]++
	}
}

// decontaminatedSet returns the evaluation set the reason of a decontaminated reject stored before
// rejects named their set gives ("decontaminated: <set>", as the pipeline wrote it; "" if none).
func decontaminatedSet(reason string) string {
	set := strings.TrimPrefix(reason, "decontaminated")
	set = strings.TrimSpace(strings.TrimPrefix(set, ":"))
	if i := strings.IndexAny(set, ": "); i >= 0 {
		set = set[:i]
	}
	if set == "" {
		set = "unknown"
	}
	return set
}

// countInto adds the source's rejects to c.
func (r *PartRejects) countInto(c *InputCounts) {
	for class, n := range r.Classes {
		c.Rejects += n
		c.RejectsByClass[class] += n
		switch class {
		case "quarantined":
			c.Quarantined += n
		case "duplicate", "duplicates":
			c.Duplicates += n
		}
	}
	for set, n := range r.Decontaminated {
		c.Decontaminated[set] += n
	}
}

// compareReject orders reject examples: by key, then source, then reason.
func compareReject(a, b *RejectExample) int {
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	if c := strings.Compare(a.Source, b.Source); c != 0 {
		return c
	}
	return strings.Compare(a.Reason, b.Reason)
}

// mergeExamples returns the first MaxRejectExamples of two sorted example lists, as a new list.
func mergeExamples(a, b []RejectExample) []RejectExample {
	out := make([]RejectExample, 0, min(len(a)+len(b), MaxRejectExamples))
	for len(out) < MaxRejectExamples && (len(a) > 0 || len(b) > 0) {
		if len(b) == 0 || (len(a) > 0 && compareReject(&a[0], &b[0]) <= 0) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// Merge adds o to p: afterwards p is the part of both parts' rows and rejects. Merging is
// associative and commutative, so parts give the same result (and the same JSON) whatever their
// grouping and order. o is not changed, and p keeps no reference to o's memory.
func (p *StatsPart) Merge(o *StatsPart) {
	p.Version = StatsPartVersion
	if o == nil {
		return
	}
	if o == p {
		o = o.clone()
	}
	p.Groups = mergeSorted(p.Groups, o.Groups, comparePartGroups, func(d, s *PartGroup) {
		d.PartCounts.merge(&s.PartCounts)
		for j := range d.Metrics {
			d.Metrics[j].merge(&s.Metrics[j], MaxPartValues)
		}
	}, (*PartGroup).clone)
	p.Levels = mergeSorted(p.Levels, o.Levels, func(a, b *PartLevel) int { return strings.Compare(a.Level, b.Level) },
		func(d, s *PartLevel) {
			d.Traces += s.Traces
			addInts(d.Events, s.Events)
		}, func(s *PartLevel) PartLevel {
			return PartLevel{Level: s.Level, Traces: s.Traces, Events: slices.Clone(s.Events)}
		})
	p.Sources = mergeSorted(p.Sources, o.Sources, comparePartSources,
		func(d, s *PartSource) { d.PartCounts.merge(&s.PartCounts) },
		func(s *PartSource) PartSource {
			return PartSource{Level: s.Level, Source: s.Source, PartCounts: s.PartCounts.clone()}
		})
	p.HaveRejects = p.HaveRejects || o.HaveRejects
	p.Rejects = mergeSorted(p.Rejects, o.Rejects, func(a, b *PartRejects) int { return strings.Compare(a.Source, b.Source) },
		func(d, s *PartRejects) {
			d.Classes = addCounts(d.Classes, s.Classes)
			d.Decontaminated = addCounts(d.Decontaminated, s.Decontaminated)
		}, func(s *PartRejects) PartRejects {
			return PartRejects{Source: s.Source, Classes: addCounts(nil, s.Classes), Decontaminated: addCounts(nil, s.Decontaminated)}
		})
	p.mergeYields(o)
	p.mergeGenRows(o)
	for class, ex := range o.Examples {
		if len(ex) == 0 {
			continue
		}
		if p.Examples == nil {
			p.Examples = map[string][]RejectExample{}
		}
		p.Examples[class] = mergeExamples(p.Examples[class], ex)
	}
}

// clone returns a deep copy of p.
func (p *StatsPart) clone() *StatsPart {
	c := &StatsPart{Version: p.Version, HaveRejects: p.HaveRejects}
	c.Merge(p)
	c.Version = p.Version
	return c
}

// mergeSorted merges src into dst, both sorted by cmp without repeats: add merges an element of src
// into the equal one of dst, clone copies an element of src that dst lacks. It returns the merged
// list (dst itself, changed in place, when dst already has every element of src).
func mergeSorted[T any](dst, src []T, cmp func(a, b *T) int, add func(d, s *T), clone func(s *T) T) []T {
	if len(src) == 0 {
		return dst
	}
	idx := make([]int, len(src))
	inPlace := true
	for i := range src {
		k := sort.Search(len(dst), func(k int) bool { return cmp(&dst[k], &src[i]) >= 0 })
		if k == len(dst) || cmp(&dst[k], &src[i]) != 0 {
			inPlace = false
			break
		}
		idx[i] = k
	}
	if inPlace {
		for i, k := range idx {
			add(&dst[k], &src[i])
		}
		return dst
	}
	out := make([]T, 0, len(dst)+len(src))
	i, j := 0, 0
	for i < len(dst) || j < len(src) {
		switch {
		case j == len(src) || (i < len(dst) && cmp(&dst[i], &src[j]) < 0):
			out = append(out, dst[i])
			i++
		case i == len(dst) || cmp(&dst[i], &src[j]) > 0:
			out = append(out, clone(&src[j]))
			j++
		default:
			add(&dst[i], &src[j])
			out = append(out, dst[i])
			i++
			j++
		}
	}
	return out
}

// comparePartGroups orders groups by level, then direction.
func comparePartGroups(a, b *PartGroup) int {
	if c := strings.Compare(a.Level, b.Level); c != 0 {
		return c
	}
	return strings.Compare(a.Direction, b.Direction)
}

// comparePartSources orders sources by level, then source.
func comparePartSources(a, b *PartSource) int {
	if c := strings.Compare(a.Level, b.Level); c != 0 {
		return c
	}
	return strings.Compare(a.Source, b.Source)
}

// clone returns a deep copy of g.
func (g *PartGroup) clone() PartGroup {
	c := PartGroup{Level: g.Level, Direction: g.Direction, PartCounts: g.PartCounts.clone(), Metrics: make([]PartValues, len(g.Metrics))}
	for j := range g.Metrics {
		c.Metrics[j] = g.Metrics[j].clone()
	}
	return c
}

// newPartCounts returns zero counters.
func newPartCounts() PartCounts {
	return PartCounts{Directions: map[string]int64{}, Exits: map[string]int64{},
		Actions: make([]int64, len(ActionTypes)), Events: make([]int64, len(EventTypes))}
}

// addRow counts a row's trajectory (not its trace) in c.
func (c *PartCounts) addRow(r *statRow) {
	c.Trajectories++
	c.Tokens += int64(r.NumTokens)
	c.LearnedTokens += int64(r.NumLearned)
	c.Directions[validUTF8(r.Direction)]++
	c.Exits[validUTF8(r.Exit)]++
	if r.Split != "" {
		if c.Splits == nil {
			c.Splits = map[string]int64{}
		}
		c.Splits[validUTF8(r.Split)]++
	}
	for i, n := range r.actions() {
		c.Actions[i] += n
	}
	if r.NoisyValues > 0 {
		c.Noisy++
	}
	if r.PlaceholderGap {
		c.Gap++
	}
	if r.InputSource != "" {
		if c.InputSources == nil {
			c.InputSources = map[string]int64{}
		}
		c.InputSources[inputSourceKey(r.InputSource)]++
	}
}

// inputSourceKey is the key an input_source is counted under: itself if it is one of
// schemas.InputSources, else GenOther (a shard's column may hold anything).
func inputSourceKey(s string) string {
	if schemas.IsInputSource(s) {
		return s
	}
	return GenOther
}

// addTrace counts one trace with its events in c.
func (c *PartCounts) addTrace(events [4]int32) {
	c.Traces++
	for i, n := range events {
		c.Events[i] += int64(n)
	}
}

// merge adds o's counters to c.
func (c *PartCounts) merge(o *PartCounts) {
	c.Traces += o.Traces
	c.Trajectories += o.Trajectories
	c.Tokens += o.Tokens
	c.LearnedTokens += o.LearnedTokens
	c.Directions = addCounts(c.Directions, o.Directions)
	c.Exits = addCounts(c.Exits, o.Exits)
	c.Splits = addCounts(c.Splits, o.Splits)
	addInts(c.Actions, o.Actions)
	addInts(c.Events, o.Events)
	c.Noisy += o.Noisy
	c.Gap += o.Gap
	c.InputSources = addCounts(c.InputSources, o.InputSources)
}

// clone returns a deep copy of c.
func (c *PartCounts) clone() PartCounts {
	return PartCounts{Traces: c.Traces, Trajectories: c.Trajectories, Tokens: c.Tokens, LearnedTokens: c.LearnedTokens,
		Directions: addCounts(nil, c.Directions), Exits: addCounts(nil, c.Exits), Splits: addCounts(nil, c.Splits),
		Actions: slices.Clone(c.Actions), Events: slices.Clone(c.Events), Noisy: c.Noisy, Gap: c.Gap,
		InputSources: addCounts(nil, c.InputSources)}
}

// addCounts adds o's counts to m (allocated if nil and o is not empty) and returns m.
func addCounts(m, o map[string]int64) map[string]int64 {
	if m == nil && len(o) > 0 {
		m = make(map[string]int64, len(o))
	}
	for k, v := range o {
		m[k] += v
	}
	return m
}

// addInts adds o to d element by element (as far as both go).
func addInts(d, o []int64) {
	for i := range min(len(d), len(o)) {
		d[i] += o[i]
	}
}

// addCounts adds c's trajectory counters (not traces or events) to r.
func (r *RowCounts) addCounts(c *PartCounts) {
	r.Trajectories += c.Trajectories
	r.Tokens += c.Tokens
	r.LearnedTokens += c.LearnedTokens
	for k, v := range c.Directions {
		r.Directions[k] += v
	}
	for i := range min(len(c.Actions), len(ActionTypes)) {
		r.Actions[ActionTypes[i]] += c.Actions[i]
	}
	for k, v := range c.Exits {
		r.Exits[k] += v
	}
	r.Splits = addCounts(r.Splits, c.Splits)
	r.InputSources = addCounts(r.InputSources, c.InputSources)
	r.NoisyRows += c.Noisy
	r.PlaceholderGapRows += c.Gap
	r.NoisyShare, r.PlaceholderGapShare = share(r.NoisyRows, r.Trajectories), share(r.PlaceholderGapRows, r.Trajectories)
}

// share is n / of rounded to 6 decimals, 0 when of is 0.
func share(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return round6(float64(n) / float64(of))
}

// addTraces adds n traces with their events (in the order of EventTypes) to r.
func (r *RowCounts) addTraces(n int64, events []int64) {
	r.Traces += n
	for i := range min(len(events), len(EventTypes)) {
		r.Events[EventTypes[i]] += events[i]
	}
}

// Stats returns the statistics of the dataset whose manifest is m and whose rows and rejects p
// counts: the same as ComputeStats for a dataset whose shards hold those rows and whose
// rejects.jsonl holds those rejects (a dataset without rejects.jsonl if p.HaveRejects is false),
// byte for byte through Stats.Marshal (see the notes above StatsPartVersion for the conditions).
// p must come from NewStatsPart, AddRejects, Merge or ParseStatsPart; it is not changed.
func (p *StatsPart) Stats(m *Manifest) *Stats {
	s := &Stats{
		Format: StatsFormat, FormatVersion: StatsFormatVersion,
		CreatedAt: m.CreatedAt.UTC(), Totals: m.Totals, Versions: m.Versions,
		Counts: schemas.Counts{}, Groups: []Group{}, Sources: []SourceStats{}, Rejects: []RejectClass{},
	}
	s.Counts.Add(m.Counts)

	// Sources: those with rows, then those found only in rejects. A reject's source is matched by
	// name to a source with rows; the first level in sorted order wins.
	srcs := make([]SourceStats, 0, len(p.Sources)+len(p.Rejects))
	bySource := map[string]int{}
	for i := range p.Sources {
		ps := &p.Sources[i]
		rc := newRowCounts()
		rc.addCounts(&ps.PartCounts)
		rc.addTraces(ps.Traces, ps.Events)
		if _, ok := bySource[ps.Source]; !ok {
			bySource[ps.Source] = len(srcs)
		}
		srcs = append(srcs, SourceStats{Level: ps.Level, Source: ps.Source, RowCounts: rc, InputCounts: newInputCounts()})
	}
	// source returns the index in srcs of the source named name, added without rows if absent.
	source := func(name string) int {
		k, ok := bySource[name]
		if !ok {
			k = len(srcs)
			bySource[name] = k
			srcs = append(srcs, SourceStats{Source: name, RowCounts: newRowCounts(), InputCounts: newInputCounts()})
		}
		return k
	}
	dsInputs := newInputCounts()
	classes := map[string]*RejectClass{}
	if p.HaveRejects {
		for i := range p.Rejects {
			pr := &p.Rejects[i]
			k := source(pr.Source)
			pr.countInto(&srcs[k].InputCounts)
			pr.countInto(&dsInputs)
		}
		for class, n := range dsInputs.RejectsByClass {
			classes[class] = &RejectClass{Class: class, Count: n, Examples: append([]RejectExample{}, p.Examples[class]...)}
		}
	}
	var total *Yield
	for i := range p.Yields {
		py := &p.Yields[i]
		k := source(py.Source)
		y := py.Yield.clone()
		if y.Generation != nil {
			y.Generation.finish(p.genRowsOf(py.Source))
		}
		srcs[k].Yield = &y
		if total == nil {
			total = &Yield{}
		}
		total.merge(&py.Yield)
	}
	s.Repositories = total
	for i := range srcs {
		srcs[i].Items = srcs[i].Traces + srcs[i].Rejects
	}
	slices.SortFunc(srcs, func(x, y SourceStats) int { return compareSource(&x, &y) })
	s.Sources = srcs

	// The dataset: rows from every group, inputs from the manifest's counts where it has them.
	ds := SourceStats{RowCounts: newRowCounts(), InputCounts: dsInputs}
	for i := range p.Groups {
		ds.addCounts(&p.Groups[i].PartCounts)
	}
	for i := range p.Levels {
		ds.addTraces(p.Levels[i].Traces, p.Levels[i].Events)
	}
	if !p.HaveRejects {
		ds.RejectsByClass = map[string]int64{}
		for k, v := range m.Counts {
			if class, ok := k.RejectClass(); ok {
				ds.RejectsByClass[string(class)] = v
				classes[string(class)] = &RejectClass{Class: string(class), Count: v, Examples: []RejectExample{}}
			}
		}
		ds.Rejects = 0
		for _, v := range ds.RejectsByClass {
			ds.Rejects += v
		}
	}
	if v, ok := m.Counts[schemas.CountRejects]; ok {
		ds.Rejects = v
	}
	if v, ok := m.Counts[schemas.CountQuarantined]; ok {
		ds.Quarantined = v
	}
	if v, ok := m.Counts[schemas.CountDuplicates]; ok {
		ds.Duplicates = v
	}
	// The manifest's decontaminated:<set> counts, when it has any, are the dataset's, all of them:
	// laid over the rejects' per-set counts key by key, a set the rejects name otherwise (such as
	// "unknown", from reasons parsed before rejects named their set) was counted twice
	// (cruxeval=250 unknown=250). They also count the repository rows left out (rows.Options).
	fromCounts := map[string]int64{}
	for k, v := range m.Counts {
		if set, ok := k.EvalSet(); ok {
			fromCounts[set] = v
		}
	}
	if len(fromCounts) > 0 {
		ds.Decontaminated = fromCounts
	}
	ds.Items = ds.Traces + ds.Rejects
	if v, ok := m.Counts[schemas.CountItems]; ok {
		ds.Items = v
	}
	s.Dataset = ds
	if total != nil && total.Generation != nil {
		total.Generation.finish(generatedRows(ds.InputSources))
	}

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

	s.Groups = p.groupStats()
	return s
}

// groupStats merges the level/direction groups into every group: all, per direction, per level,
// per pair.
func (p *StatsPart) groupStats() []Group {
	levels, dirs := map[string]bool{}, map[string]bool{}
	fine := map[fineKey]bool{}
	for i := range p.Groups {
		g := &p.Groups[i]
		levels[g.Level], dirs[g.Direction], fine[fineKey{g.Level, g.Direction}] = true, true, true
	}
	type spec struct{ level, dir string }
	specs := []spec{{"", ""}}
	for _, d := range sortedKeys(dirs) {
		specs = append(specs, spec{"", d})
	}
	for _, l := range sortedKeys(levels) {
		specs = append(specs, spec{l, ""})
		for _, d := range sortedKeys(dirs) {
			if fine[fineKey{l, d}] {
				specs = append(specs, spec{l, d})
			}
		}
	}
	// Every group's histograms use the bin width that covers the dataset's range.
	var lo, hi, widths [numMetrics]int64
	for j := range numMetrics {
		seen := false
		for i := range p.Groups {
			n, _, mn, mx := p.Groups[i].Metrics[j].summary()
			if n == 0 {
				continue
			}
			if !seen || mn < lo[j] {
				lo[j] = mn
			}
			if !seen || mx > hi[j] {
				hi[j] = mx
			}
			seen = true
		}
		widths[j] = HistogramWidth(lo[j], hi[j])
	}
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
		var vals [numMetrics]PartValues
		for i := range p.Groups {
			pg := &p.Groups[i]
			if (sp.level != "" && sp.level != pg.Level) || (sp.dir != "" && sp.dir != pg.Direction) {
				continue
			}
			g.addCounts(&pg.PartCounts)
			if sp.dir != "" {
				// A trace of the direction has trajectories in it at its one level.
				g.addTraces(pg.Traces, pg.Events)
			}
			for j := range numMetrics {
				vals[j].merge(&pg.Metrics[j], 0)
			}
		}
		if sp.dir == "" {
			for i := range p.Levels {
				if sp.level == "" || sp.level == p.Levels[i].Level {
					g.addTraces(p.Levels[i].Traces, p.Levels[i].Events)
				}
			}
		}
		for j := range numMetrics {
			g.Metrics[j] = vals[j].metric(StatsMetrics[j], lo[j], widths[j])
		}
		out = append(out, g)
	}
	return out
}

// ParseStatsPart decodes a StatsPart from its JSON, refusing unknown fields, trailing data, other
// versions and parts that break its invariants (order, consistency of counts, bounds).
func ParseStatsPart(data []byte) (*StatsPart, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p StatsPart
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("dataset: malformed statistics part: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("dataset: malformed statistics part: trailing data after the JSON object")
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("dataset: bad statistics part: %w", err)
	}
	return &p, nil
}

// validate checks p's invariants: what NewStatsPart, AddRejects and Merge always produce.
func (p *StatsPart) validate() error {
	if p.Version != StatsPartVersion {
		return fmt.Errorf("version %d, want %d", p.Version, StatsPartVersion)
	}
	groupLevels := map[string]bool{}
	var trajectories, traces, srcTrajectories, srcTraces int64
	for i := range p.Groups {
		g := &p.Groups[i]
		if i > 0 && comparePartGroups(&p.Groups[i-1], g) >= 0 {
			return fmt.Errorf("group %q/%q: groups not sorted or repeated", g.Level, g.Direction)
		}
		if err := g.validate(); err != nil {
			return fmt.Errorf("group %q/%q: %w", g.Level, g.Direction, err)
		}
		groupLevels[g.Level] = true
		if !addCount(&trajectories, g.Trajectories) {
			return errors.New("groups: too many trajectories")
		}
	}
	for i := range p.Levels {
		l := &p.Levels[i]
		switch {
		case i > 0 && p.Levels[i-1].Level >= l.Level:
			return fmt.Errorf("level %q: levels not sorted or repeated", l.Level)
		case !groupLevels[l.Level]:
			return fmt.Errorf("level %q: no group has it", l.Level)
		case l.Traces < 1:
			return fmt.Errorf("level %q: %d traces", l.Level, l.Traces)
		case len(l.Events) != len(EventTypes):
			return fmt.Errorf("level %q: %d event counts, want %d", l.Level, len(l.Events), len(EventTypes))
		case !addCount(&traces, l.Traces):
			return errors.New("levels: too many traces")
		}
	}
	if len(p.Levels) != len(groupLevels) {
		return errors.New("levels: a group's level has no traces")
	}
	for i := range p.Sources {
		s := &p.Sources[i]
		if i > 0 && comparePartSources(&p.Sources[i-1], s) >= 0 {
			return fmt.Errorf("source %q/%q: sources not sorted or repeated", s.Level, s.Source)
		}
		if err := s.PartCounts.validate(); err != nil {
			return fmt.Errorf("source %q/%q: %w", s.Level, s.Source, err)
		}
		if !addCount(&srcTrajectories, s.Trajectories) || !addCount(&srcTraces, s.Traces) {
			return errors.New("sources: too many trajectories or traces")
		}
	}
	if srcTrajectories != trajectories || srcTraces != traces {
		return fmt.Errorf("sources count %d trajectories of %d traces, groups and levels %d of %d",
			srcTrajectories, srcTraces, trajectories, traces)
	}
	if err := p.validateYields(); err != nil {
		return err
	}
	if err := p.validateGenRows(trajectories); err != nil {
		return err
	}
	return p.validateRejects()
}

// validateRejects checks p's rejects and examples.
func (p *StatsPart) validateRejects() error {
	if !p.HaveRejects && (len(p.Rejects) > 0 || len(p.Examples) > 0) {
		return errors.New("rejects without have_rejects")
	}
	classes := map[string]int64{}
	for i := range p.Rejects {
		r := &p.Rejects[i]
		if i > 0 && p.Rejects[i-1].Source >= r.Source {
			return fmt.Errorf("rejects of %q: not sorted or repeated", r.Source)
		}
		if len(r.Classes) == 0 {
			return fmt.Errorf("rejects of %q: no classes", r.Source)
		}
		for class, n := range r.Classes {
			total := classes[class]
			if n < 1 || !addCount(&total, n) {
				return fmt.Errorf("rejects of %q: class %q: bad count %d", r.Source, class, n)
			}
			classes[class] = total
		}
		var decon int64
		for set, n := range r.Decontaminated {
			if n < 1 || !addCount(&decon, n) {
				return fmt.Errorf("rejects of %q: decontaminated %q: bad count", r.Source, set)
			}
		}
		if decon != r.Classes["decontaminated"] {
			return fmt.Errorf("rejects of %q: %d decontaminated by set, %d by class", r.Source, decon, r.Classes["decontaminated"])
		}
	}
	for class, ex := range p.Examples {
		if _, ok := classes[class]; !ok {
			return fmt.Errorf("examples of class %q, which has no rejects", class)
		}
		for k := range ex {
			if k > 0 && compareReject(&ex[k-1], &ex[k]) > 0 {
				return fmt.Errorf("examples of class %q: not sorted", class)
			}
			if utf8.RuneCountInString(ex[k].Reason) > maxExampleReason {
				return fmt.Errorf("examples of class %q: reason longer than %d characters", class, maxExampleReason)
			}
		}
	}
	for class, n := range classes {
		if want := min(n, MaxRejectExamples); int64(len(p.Examples[class])) != want {
			return fmt.Errorf("class %q: %d examples, want %d", class, len(p.Examples[class]), want)
		}
	}
	return nil
}

// validate checks a group's counters and metrics.
func (g *PartGroup) validate() error {
	if g.Level == "" || g.Direction == "" {
		return errors.New("empty level or direction")
	}
	if err := g.PartCounts.validate(); err != nil {
		return err
	}
	if len(g.Metrics) != numMetrics {
		return fmt.Errorf("%d metrics, want %d", len(g.Metrics), numMetrics)
	}
	for j := range g.Metrics {
		if err := g.Metrics[j].validate(g.Trajectories); err != nil {
			return fmt.Errorf("metric %s: %w", StatsMetrics[j], err)
		}
	}
	return nil
}

// validate checks the counters of a group or source, which has at least one trajectory.
func (c *PartCounts) validate() error {
	switch {
	case c.Trajectories < 1 || c.Traces < 1 || c.Traces > c.Trajectories:
		return fmt.Errorf("%d traces, %d trajectories", c.Traces, c.Trajectories)
	case len(c.Actions) != len(ActionTypes):
		return fmt.Errorf("%d action counts, want %d", len(c.Actions), len(ActionTypes))
	case len(c.Events) != len(EventTypes):
		return fmt.Errorf("%d event counts, want %d", len(c.Events), len(EventTypes))
	case c.Noisy < 0 || c.Noisy > c.Trajectories || c.Gap < 0 || c.Gap > c.Trajectories:
		return fmt.Errorf("%d noisy and %d gap trajectories of %d", c.Noisy, c.Gap, c.Trajectories)
	}
	for k := range c.InputSources {
		if k != GenOther && !schemas.IsInputSource(k) {
			return fmt.Errorf("inputs: unknown input source %.60q", k)
		}
	}
	for name, m := range map[string]map[string]int64{"directions": c.Directions, "exits": c.Exits, "splits": c.Splits, "inputs": c.InputSources} {
		var n int64
		for k, v := range m {
			if v < 1 || !addCount(&n, v) {
				return fmt.Errorf("%s: %q: bad count %d", name, k, v)
			}
		}
		// Rows written before the split and input_source columns have none, and repository
		// rows no input source: splits and inputs may count fewer.
		if n != c.Trajectories && (name != "splits" && name != "inputs" || n > c.Trajectories) {
			return fmt.Errorf("%s count %d trajectories, not %d", name, n, c.Trajectories)
		}
	}
	return nil
}

// addCount adds n >= 0 to *total and reports whether it did without overflow.
func addCount(total *int64, n int64) bool {
	if n < 0 || *total > math.MaxInt64-n {
		return false
	}
	*total += n
	return true
}

// valueCount is one distinct value (or bin) and how often it occurs.
type valueCount struct{ v, n int64 }

// valueCounts counts how often each integer value occurs, in memory that grows with the number of
// distinct values (at most MaxPartValues bins, see StatsPart), not of rows.
type valueCounts struct {
	shift    uint            // values are binned by v >> shift
	dense    []int64         // dense[b] for bins 0 <= b < denseValues, once sparse outgrew sparseValues
	sparse   map[int64]int64 // the other bins
	distinct int             // number of non-empty bins
	n, sum   int64           // values counted and their sum
	lo, hi   int64           // their minimum and maximum
}

func (c *valueCounts) add(v int64) {
	if c.n == 0 || v < c.lo {
		c.lo = v
	}
	if c.n == 0 || v > c.hi {
		c.hi = v
	}
	c.n++
	c.sum += v
	c.addBin(v>>c.shift, 1)
	if c.distinct > MaxPartValues {
		c.coarsen()
	}
}

// addBin adds n to the count of bin b.
func (c *valueCounts) addBin(b, n int64) {
	if c.dense != nil && b >= 0 && b < denseValues {
		if c.dense[b] == 0 {
			c.distinct++
		}
		c.dense[b] += n
		return
	}
	if c.sparse == nil {
		c.sparse = map[int64]int64{}
	}
	old, ok := c.sparse[b]
	if !ok {
		c.distinct++
	}
	c.sparse[b] = old + n
	if c.dense == nil && len(c.sparse) > sparseValues {
		c.dense = make([]int64, denseValues)
		for b, n := range c.sparse {
			if b >= 0 && b < denseValues {
				c.dense[b] = n
				delete(c.sparse, b)
			}
		}
	}
}

// coarsen doubles the bin width until there are at most MaxPartValues bins.
func (c *valueCounts) coarsen() {
	vals := c.sorted()
	shift := c.shift
	for len(vals) > MaxPartValues {
		shift++
		vals = rebin(vals, shift)
	}
	c.shift, c.dense, c.sparse, c.distinct = shift, nil, nil, 0
	for _, vc := range vals {
		c.addBin(vc.v>>shift, vc.n)
	}
}

// sorted returns the bins' low ends and counts in increasing order.
func (c *valueCounts) sorted() []valueCount {
	out := make([]valueCount, 0, c.distinct)
	for b, n := range c.sparse {
		out = append(out, valueCount{b << c.shift, n})
	}
	for b, n := range c.dense {
		if n != 0 {
			out = append(out, valueCount{int64(b) << c.shift, n})
		}
	}
	slices.SortFunc(out, func(a, b valueCount) int { return cmpInt64(a.v, b.v) })
	return out
}

// values returns the counted values as PartValues.
func (c *valueCounts) values() PartValues {
	return newPartValues(c.sorted(), c.shift, c.sum, c.lo, c.hi)
}

// metric summarizes the counted values (see PartValues.metric).
func (c *valueCounts) metric(name string, lo, width int64) Metric {
	v := c.values()
	return v.metric(name, lo, width)
}

// rebin merges sorted values (bins' low ends) into bins of width 2^shift, in place.
func rebin(vals []valueCount, shift uint) []valueCount {
	out := vals[:0]
	for _, vc := range vals {
		low := (vc.v >> shift) << shift
		if k := len(out) - 1; k >= 0 && out[k].v == low {
			out[k].n += vc.n
			continue
		}
		out = append(out, valueCount{low, vc.n})
	}
	return out
}

// newPartValues builds the canonical PartValues of sorted bins of width 2^shift with the values'
// exact sum, minimum and maximum.
func newPartValues(vals []valueCount, shift uint, sum, lo, hi int64) PartValues {
	v := PartValues{Shift: int(shift), Values: make([]int64, len(vals)), Counts: make([]int64, len(vals))}
	for i, vc := range vals {
		v.Values[i], v.Counts[i] = vc.v, vc.n
	}
	if shift > 0 {
		v.Sum, v.Min, v.Max = sum, lo, hi
	}
	return v
}

// pairs returns v's values and counts as a new list.
func (v *PartValues) pairs() []valueCount {
	out := make([]valueCount, min(len(v.Values), len(v.Counts)))
	for i := range out {
		out[i] = valueCount{v.Values[i], v.Counts[i]}
	}
	return out
}

// summary returns the number of values, their sum, minimum and maximum.
func (v *PartValues) summary() (n, sum, lo, hi int64) {
	for _, c := range v.Counts {
		n += c
	}
	if v.Shift > 0 {
		return n, v.Sum, v.Min, v.Max
	}
	for i := range min(len(v.Values), len(v.Counts)) {
		sum += v.Values[i] * v.Counts[i]
	}
	if len(v.Values) > 0 {
		lo, hi = v.Values[0], v.Values[len(v.Values)-1]
	}
	return n, sum, lo, hi
}

// clone returns a deep copy of v.
func (v *PartValues) clone() PartValues {
	c := *v
	c.Values, c.Counts = slices.Clone(v.Values), slices.Clone(v.Counts)
	return c
}

// merge adds o's values to v, then coarsens v until it has at most limit bins (no limit if limit
// is 0). The result's bin width is the larger of both and, with a limit, the smallest that fits
// the merged values in limit bins: it does not depend on the order of merges.
func (v *PartValues) merge(o *PartValues, limit int) {
	if len(o.Values) == 0 {
		return
	}
	if len(v.Values) == 0 {
		*v = o.clone()
		return
	}
	_, vsum, vlo, vhi := v.summary()
	_, osum, olo, ohi := o.summary()
	sum, lo, hi := vsum+osum, min(vlo, olo), max(vhi, ohi)
	if o.Shift <= v.Shift && v.addInPlace(o) {
		if v.Shift > 0 {
			v.Sum, v.Min, v.Max = sum, lo, hi
		}
		return
	}
	shift := uint(max(v.Shift, o.Shift))
	a, b := rebin(v.pairs(), shift), rebin(o.pairs(), shift)
	vals := make([]valueCount, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || (len(a) > 0 && a[0].v < b[0].v):
			vals, a = append(vals, a[0]), a[1:]
		case len(a) == 0 || b[0].v < a[0].v:
			vals, b = append(vals, b[0]), b[1:]
		default:
			vals = append(vals, valueCount{a[0].v, a[0].n + b[0].n})
			a, b = a[1:], b[1:]
		}
	}
	for limit > 0 && len(vals) > limit {
		shift++
		vals = rebin(vals, shift)
	}
	*v = newPartValues(vals, shift, sum, lo, hi)
}

// addInPlace adds o's counts to v's bins if v has a bin for each of o's values (o.Shift <=
// v.Shift) and reports whether it did.
func (v *PartValues) addInPlace(o *PartValues) bool {
	shift := uint(v.Shift)
	find := func(x int64) (int, bool) { return slices.BinarySearch(v.Values, (x>>shift)<<shift) }
	for _, x := range o.Values {
		if _, ok := find(x); !ok {
			return false
		}
	}
	for i, x := range o.Values {
		k, _ := find(x)
		v.Counts[k] += o.Counts[i]
	}
	return true
}

// metric summarizes the values; the histogram starts at the multiple of width at or below lo (the
// dataset's minimum). Coarsened values stand for their bin's middle (within the minimum and
// maximum) in the percentiles.
func (v *PartValues) metric(name string, lo, width int64) Metric {
	m := Metric{Name: name, Histogram: Histogram{Width: width, Counts: []int64{}}}
	n, sum, mn, mx := v.summary()
	m.Count, m.Sum = n, sum
	if m.Count == 0 {
		return m
	}
	m.Mean = round6(float64(m.Sum) / float64(m.Count))
	m.Min, m.Max = mn, mx
	vals := v.pairs()
	if v.Shift > 0 {
		half := int64((uint64(1)<<uint(v.Shift) - 1) / 2)
		for i := range vals {
			vals[i].v = min(max(vals[i].v+half, mn), mx)
		}
	}
	m.P25 = round6(percentile(vals, m.Count, 0.25))
	m.P50 = round6(percentile(vals, m.Count, 0.50))
	m.P90 = round6(percentile(vals, m.Count, 0.90))
	first := floorDiv(lo, width)
	m.Histogram.Lo = first * width
	m.Histogram.Counts = make([]int64, floorDiv(m.Max, width)-first+1)
	for i := range min(len(v.Values), len(v.Counts)) {
		m.Histogram.Counts[floorDiv(min(max(v.Values[i], mn), mx), width)-first] += v.Counts[i]
	}
	return m
}

// validate checks a metric's values: sorted, bounded, binned, counting n values in all.
func (v *PartValues) validate(n int64) error {
	switch {
	case v.Shift < 0 || v.Shift > maxPartShift:
		return fmt.Errorf("shift %d", v.Shift)
	case len(v.Values) == 0 || len(v.Values) != len(v.Counts):
		return fmt.Errorf("%d values, %d counts", len(v.Values), len(v.Counts))
	case len(v.Values) > MaxPartValues:
		return fmt.Errorf("%d values, more than %d", len(v.Values), MaxPartValues)
	case v.Shift > 0 && len(v.Values) <= MaxPartValues/2:
		return fmt.Errorf("%d values with shift %d: coarser than needed", len(v.Values), v.Shift)
	case v.Shift == 0 && (v.Sum != 0 || v.Min != 0 || v.Max != 0):
		return errors.New("sum, min or max given for exact values")
	}
	shift := uint(v.Shift)
	var total int64
	for i, x := range v.Values {
		switch {
		case x < -maxPartValue || x > maxPartValue:
			return fmt.Errorf("value %d out of range", x)
		case (x>>shift)<<shift != x:
			return fmt.Errorf("value %d is not a multiple of 2^%d", x, shift)
		case i > 0 && v.Values[i-1] >= x:
			return fmt.Errorf("values not increasing at %d", x)
		case v.Counts[i] < 1 || !addCount(&total, v.Counts[i]):
			return fmt.Errorf("value %d: bad count %d", x, v.Counts[i])
		}
	}
	if total != n {
		return fmt.Errorf("%d values counted, want %d", total, n)
	}
	if shift > 0 {
		first, last := v.Values[0], v.Values[len(v.Values)-1]
		if v.Min < first || v.Min>>shift != first>>shift || v.Max < last || v.Max>>shift != last>>shift {
			return fmt.Errorf("min %d or max %d outside the first and last bins", v.Min, v.Max)
		}
	}
	return nil
}

// traceInfo is what the accumulator keeps per distinct trace.
type traceInfo struct {
	groups uint64   // bit i: the trace has trajectories in fine group i
	source int32    // index of its source
	events [4]int32 // its events per type
}

// fineKey is a (level, direction) pair: the finest grouping, from which the others are merged.
type fineKey struct{ level, direction string }

// fineGroup accumulates the trajectories of one level and direction.
type fineGroup struct {
	counts  PartCounts
	metrics [numMetrics]valueCounts
}

// sourceAcc accumulates one source.
type sourceAcc struct {
	key    sourceKey
	counts PartCounts
}

// statsAcc accumulates rows into a StatsPart: the rows of a batch (NewStatsPart), or of a whole
// dataset shard by shard in manifest order (ComputeStats). It keeps every distinct trace until
// part counts them.
type statsAcc struct {
	fine      map[fineKey]int // index into groups
	groups    []*fineGroup
	groupKeys []fineKey
	sources   map[sourceKey]int
	srcs      []*sourceAcc
	traces    map[[16]byte]*traceInfo
	// genRows counts the function-level rows of generated items per repo_url.
	genRows map[string]int64
}

func newStatsAcc() *statsAcc {
	return &statsAcc{fine: map[fineKey]int{}, sources: map[sourceKey]int{}, traces: map[[16]byte]*traceInfo{}}
}

func (a *statsAcc) add(r *statRow) error {
	fk := fineKey{orUnknown(validUTF8(r.Level)), orUnknown(validUTF8(r.Direction))}
	gi, ok := a.fine[fk]
	if !ok {
		if len(a.groups) == 64 {
			return errors.New("more than 64 level/direction pairs")
		}
		gi = len(a.groups)
		a.fine[fk] = gi
		a.groups = append(a.groups, &fineGroup{counts: newPartCounts()})
		a.groupKeys = append(a.groupKeys, fk)
	}
	g := a.groups[gi]
	g.counts.addRow(r)
	var v [numMetrics]int64
	r.metricValues(&v)
	for i := range numMetrics {
		g.metrics[i].add(v[i])
	}

	sk := sourceOf(r)
	sk = sourceKey{validUTF8(sk.level), validUTF8(sk.source)}
	si, ok := a.sources[sk]
	if !ok {
		si = len(a.srcs)
		a.sources[sk] = si
		a.srcs = append(a.srcs, &sourceAcc{key: sk, counts: newPartCounts()})
	}
	a.srcs[si].counts.addRow(r)
	if r.Level == "function" && r.RepoURL != "" && schemas.GeneratedInputSource(r.InputSource) {
		if a.genRows == nil {
			a.genRows = map[string]int64{}
		}
		a.genRows[validUTF8(r.RepoURL)]++
	}

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

// part counts the traces into the groups, levels and sources and returns the accumulated part. It
// is called once: the accumulator is spent.
func (a *statsAcc) part() *StatsPart {
	p := &StatsPart{Version: StatsPartVersion}
	levels := map[string]*PartLevel{}
	for _, t := range a.traces {
		for m := t.groups; m != 0; m &= m - 1 {
			a.groups[bits.TrailingZeros64(m)].counts.addTrace(t.events)
		}
		a.srcs[t.source].counts.addTrace(t.events)
		level := a.groupKeys[bits.TrailingZeros64(t.groups)].level
		l := levels[level]
		if l == nil {
			l = &PartLevel{Level: level, Events: make([]int64, len(EventTypes))}
			levels[level] = l
		}
		l.Traces++
		for i, n := range t.events {
			l.Events[i] += int64(n)
		}
	}
	for i, g := range a.groups {
		pg := PartGroup{Level: a.groupKeys[i].level, Direction: a.groupKeys[i].direction, PartCounts: g.counts,
			Metrics: make([]PartValues, numMetrics)}
		for j := range numMetrics {
			pg.Metrics[j] = g.metrics[j].values()
		}
		p.Groups = append(p.Groups, pg)
	}
	slices.SortFunc(p.Groups, func(x, y PartGroup) int { return comparePartGroups(&x, &y) })
	for _, l := range sortedKeys(levels) {
		p.Levels = append(p.Levels, *levels[l])
	}
	for _, s := range a.srcs {
		p.Sources = append(p.Sources, PartSource{Level: s.key.level, Source: s.key.source, PartCounts: s.counts})
	}
	slices.SortFunc(p.Sources, func(x, y PartSource) int { return comparePartSources(&x, &y) })
	for _, src := range sortedKeys(a.genRows) {
		p.GenRows = append(p.GenRows, PartGenRows{Source: src, Rows: a.genRows[src]})
	}
	return p
}

// genRowsOf returns the rows of generated items of the repository source names.
func (p *StatsPart) genRowsOf(source string) int64 {
	i, ok := slices.BinarySearchFunc(p.GenRows, source, func(r PartGenRows, s string) int { return strings.Compare(r.Source, s) })
	if !ok {
		return 0
	}
	return p.GenRows[i].Rows
}

// validUTF8 returns s with every byte that is not part of valid UTF-8 replaced by U+FFFD, as
// encoding/json writes it: parts then read back from JSON as they were written.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
