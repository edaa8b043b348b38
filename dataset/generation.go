package dataset

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ndtrace/ndtrace/schemas"
)

// The yield of generating inputs (issue 30): each repository's or group of files' GenYield
// (schemas.RepoYield.Generation) summed per source (a source's yield.generation in stats.json) and
// for the dataset (repositories.generation), with the rows of the generated items.
const (
	// MaxGenKeys is the most keys a Generation's Losses or BySource keep besides GenOther: the
	// others' counts are summed into GenOther. The keys come from bounded vocabularies of the
	// worker's code, so the cap holds only against a report that breaks them.
	MaxGenKeys = 64
	// GenOther is the key that holds the counts of the keys past MaxGenKeys.
	GenOther = "other"
	// maxGenKey is the longest key kept, in bytes (the vocabularies' are at most 40); a longer
	// one is counted under GenOther.
	maxGenKey = 64
)

// Generation sums what generating inputs gave: the sums of GenYield, and what follows from them.
// In a StatsPart the derived fields are zero; Stats sets them.
type Generation struct {
	schemas.GenYield
	// WithInputShare is WithInput / Units (0 without units), rounded to 6 decimals.
	WithInputShare float64 `json:"with_input_share"`
	// MedianCoverage is the median unit's coverage bucket's lower bound in percent (0, 10, ...,
	// 90; GenYield.MedianCoverage), -1 when no unit kept an input.
	MedianCoverage int `json:"median_coverage"`
	// Rows counts the function-level rows of the generated items (input_source doctest, example,
	// typed, fuzzed or llm): for a source, those whose repo_url is the source.
	Rows int64 `json:"rows"`
}

// addGen adds the report g to the sum *dst (allocated on first use): negative counts read as 0,
// map keys are made valid UTF-8 and capped (capGenKeys).
func addGen(dst **Generation, g *schemas.GenYield) {
	if g == nil {
		return
	}
	if *dst == nil {
		*dst = &Generation{}
	}
	d := &(*dst).GenYield
	for _, f := range []struct {
		d *int64
		n int64
	}{{&d.Modules, g.Modules}, {&d.Found, g.Found}, {&d.Units, g.Units}, {&d.WithInput, g.WithInput},
		{&d.Inputs, g.Inputs}, {&d.Attempts, g.Attempts}, {&d.Traced, g.Traced}} {
		*f.d += max(f.n, 0)
	}
	for i, n := range g.Coverage {
		d.Coverage[i] += max(n, 0)
	}
	d.BySource = addGenCounts(d.BySource, g.BySource)
	d.Losses = addGenCounts(d.Losses, g.Losses)
}

// mergeGen adds the sum o to the sum *dst.
func mergeGen(dst **Generation, o *Generation) {
	if o != nil {
		addGen(dst, &o.GenYield)
	}
}

// cloneGen returns a deep copy of g (nil for nil).
func cloneGen(g *Generation) *Generation {
	if g == nil {
		return nil
	}
	c := *g
	c.BySource, c.Losses = addCounts(nil, g.BySource), addCounts(nil, g.Losses)
	return &c
}

// addGenCounts adds o's positive counts to m under valid UTF-8 keys (a key longer than maxGenKey
// counts as GenOther) and caps the result (capGenKeys).
func addGenCounts(m, o map[string]int64) map[string]int64 {
	for k, n := range o {
		if n <= 0 {
			continue
		}
		if k = validUTF8(k); k == "" || len(k) > maxGenKey {
			k = GenOther
		}
		if m == nil {
			m = map[string]int64{}
		}
		m[k] += n
	}
	return capGenKeys(m)
}

// capGenKeys keeps the MaxGenKeys first keys of m in byte order besides GenOther and sums the
// others' counts into GenOther. Keeping the first keys (not the largest counts) makes the cap
// independent of how sums were grouped: a key dropped from a partial sum has MaxGenKeys smaller
// keys there, which are in the whole sum too, so it is dropped from that as well; and the kept
// keys' counts are exact. Merged parts still give the same statistics in any grouping.
func capGenKeys(m map[string]int64) map[string]int64 {
	n := len(m)
	if _, ok := m[GenOther]; ok {
		n--
	}
	if n <= MaxGenKeys {
		return m
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != GenOther {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys[MaxGenKeys:] {
		m[GenOther] += m[k]
		delete(m, k)
	}
	return m
}

// finish sets the derived fields of a sum; rows are the rows of its generated items.
func (g *Generation) finish(rows int64) {
	g.WithInputShare = share(g.WithInput, g.Units)
	g.MedianCoverage = g.GenYield.MedianCoverage()
	g.Rows = rows
}

// validate checks a sum as a StatsPart holds it: counts not negative, maps within the cap, derived
// fields zero.
func (g *Generation) validate() error {
	for _, n := range []int64{g.Modules, g.Found, g.Units, g.WithInput, g.Inputs, g.Attempts, g.Traced} {
		if n < 0 {
			return errors.New("generation: a negative count")
		}
	}
	for _, n := range g.Coverage {
		if n < 0 {
			return errors.New("generation: a negative coverage count")
		}
	}
	if g.WithInputShare != 0 || g.MedianCoverage != 0 || g.Rows != 0 {
		return errors.New("generation: derived fields set in a part")
	}
	for name, m := range map[string]map[string]int64{"by_source": g.BySource, "losses": g.Losses} {
		n := len(m)
		if _, ok := m[GenOther]; ok {
			n--
		}
		if n > MaxGenKeys {
			return fmt.Errorf("generation: %s: %d keys, more than %d", name, n, MaxGenKeys)
		}
		for k, v := range m {
			if v < 1 || k == "" || len(k) > maxGenKey || validUTF8(k) != k {
				return fmt.Errorf("generation: %s: %.80q: bad key or count %d", name, k, v)
			}
		}
	}
	return nil
}

// PartGenRows counts the function-level rows of generated items (GeneratedInputSource) of one
// repository (their repo_url), for its source's Generation.Rows.
type PartGenRows struct {
	Source string `json:"source"`
	Rows   int64  `json:"rows"`
}

// mergeGenRows merges o's generated rows into p's.
func (p *StatsPart) mergeGenRows(o *StatsPart) {
	p.GenRows = mergeSorted(p.GenRows, o.GenRows, func(a, b *PartGenRows) int { return strings.Compare(a.Source, b.Source) },
		func(d, s *PartGenRows) { d.Rows += s.Rows }, func(s *PartGenRows) PartGenRows { return *s })
}

// validateGenRows checks p's generated rows: sorted, positive, no more than the trajectories.
func (p *StatsPart) validateGenRows(trajectories int64) error {
	var n int64
	for i := range p.GenRows {
		r := &p.GenRows[i]
		if i > 0 && p.GenRows[i-1].Source >= r.Source {
			return fmt.Errorf("generated rows of %q: not sorted or repeated", r.Source)
		}
		if r.Rows < 1 || !addCount(&n, r.Rows) {
			return fmt.Errorf("generated rows of %q: bad count %d", r.Source, r.Rows)
		}
	}
	if n > trajectories {
		return fmt.Errorf("%d generated rows of %d trajectories", n, trajectories)
	}
	return nil
}

// generatedRows sums the counts of generated input sources in counts (rows by input_source).
func generatedRows(counts map[string]int64) int64 {
	var n int64
	for k, v := range counts {
		if schemas.GeneratedInputSource(k) {
			n += v
		}
	}
	return n
}
