package dataset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// Yield sums the yield reports of repositories (schemas.RepoYield): how many tests each stage
// kept, and why repositories gave no rows. A source's yield in stats.json is its repository's;
// the dataset's sums every repository.
type Yield struct {
	// Repositories counts the repositories; WithRows those that gave repository-level rows.
	Repositories int64 `json:"repositories"`
	WithRows     int64 `json:"with_rows"`
	// The sums of the repositories' RepoYield counters.
	Collected        int64 `json:"collected"`
	Run              int64 `json:"run"`
	PassedPlain      int64 `json:"passed_plain"`
	PassedTraced     int64 `json:"passed_traced"`
	Quarantined      int64 `json:"quarantined"`
	Neutralised      int64 `json:"runner_neutralised"`
	ChangedByOptions int64 `json:"changed_by_runner_options"`
	ReadOnly         int64 `json:"checkout_read_only"`
	SandboxErrors    int64 `json:"sandbox_errors"`
	Rows             int64 `json:"rows"`
	// Nondeterministic and NondeterministicValues sum the tests quarantined because their two
	// traced runs differed, and the values replaced by "<nondeterministic>" (reexecute).
	Nondeterministic       int64 `json:"nondeterministic,omitempty"`
	NondeterministicValues int64 `json:"nondeterministic_values,omitempty"`
	// TracedTimeout, TracedPastLimit and SandboxRefused sum the tests whose traced run timed out
	// within its budget, finished past limits.timeout, and failed on a refusal of the sandbox.
	TracedTimeout   int64 `json:"traced_timeout,omitempty"`
	TracedPastLimit int64 `json:"traced_past_limit,omitempty"`
	SandboxRefused  int64 `json:"sandbox_refused,omitempty"`
	// ExcludedFiles sums the test files left out of collection because they ended it tampered;
	// RunnerFallbacks the repositories whose tests the other runner collected.
	ExcludedFiles   int64 `json:"excluded_files,omitempty"`
	RunnerFallbacks int64 `json:"runner_fallbacks,omitempty"`
	// RejectedByClass counts the repositories that gave no rows, per class (RepoYield.Rejected).
	RejectedByClass map[string]int64 `json:"rejected_by_class"`
	// Generation sums what generating inputs gave (RepoYield.Generation); absent when no
	// repository generated any.
	Generation *Generation `json:"generation,omitempty"`
}

// add sums one repository's report into y.
func (y *Yield) add(r *schemas.RepoYield) {
	y.Repositories++
	y.Collected += r.Collected
	y.Run += r.Run
	y.PassedPlain += r.PassedPlain
	y.PassedTraced += r.PassedTraced
	y.Quarantined += r.Quarantined
	y.Neutralised += r.Neutralised
	y.ChangedByOptions += r.ChangedByOptions
	y.ReadOnly += r.ReadOnly
	y.SandboxErrors += r.SandboxErrors
	y.Rows += r.Rows
	y.Nondeterministic += r.Nondeterministic
	y.NondeterministicValues += r.NondeterministicValues
	y.TracedTimeout += r.TracedTimeout
	y.TracedPastLimit += r.TracedPastLimit
	y.SandboxRefused += r.SandboxRefused
	y.ExcludedFiles += r.ExcludedFiles
	y.RunnerFallbacks += r.RunnerFallbacks
	addGen(&y.Generation, r.Generation)
	if r.Rejected == "" {
		y.WithRows++
		return
	}
	if y.RejectedByClass == nil {
		y.RejectedByClass = map[string]int64{}
	}
	y.RejectedByClass[validUTF8(string(r.Rejected))]++
}

// merge adds o to y.
func (y *Yield) merge(o *Yield) {
	y.Repositories += o.Repositories
	y.WithRows += o.WithRows
	y.Collected += o.Collected
	y.Run += o.Run
	y.PassedPlain += o.PassedPlain
	y.PassedTraced += o.PassedTraced
	y.Quarantined += o.Quarantined
	y.Neutralised += o.Neutralised
	y.ChangedByOptions += o.ChangedByOptions
	y.ReadOnly += o.ReadOnly
	y.SandboxErrors += o.SandboxErrors
	y.Rows += o.Rows
	y.Nondeterministic += o.Nondeterministic
	y.NondeterministicValues += o.NondeterministicValues
	y.TracedTimeout += o.TracedTimeout
	y.TracedPastLimit += o.TracedPastLimit
	y.SandboxRefused += o.SandboxRefused
	y.ExcludedFiles += o.ExcludedFiles
	y.RunnerFallbacks += o.RunnerFallbacks
	y.RejectedByClass = addCounts(y.RejectedByClass, o.RejectedByClass)
	mergeGen(&y.Generation, o.Generation)
}

// clone returns a deep copy of y.
func (y *Yield) clone() Yield {
	c := *y
	c.RejectedByClass = addCounts(nil, y.RejectedByClass)
	c.Generation = cloneGen(y.Generation)
	return c
}

// validate checks the invariants of a sum of reports.
func (y *Yield) validate() error {
	var rejected int64
	for class, n := range y.RejectedByClass {
		if n < 1 || !addCount(&rejected, n) {
			return fmt.Errorf("rejected %q: bad count %d", class, n)
		}
	}
	for _, n := range []int64{y.Repositories, y.WithRows, y.Collected, y.Run, y.PassedPlain, y.PassedTraced, y.Quarantined,
		y.Neutralised, y.ChangedByOptions, y.ReadOnly, y.SandboxErrors, y.Rows, y.Nondeterministic, y.NondeterministicValues,
		y.TracedTimeout, y.TracedPastLimit, y.SandboxRefused, y.ExcludedFiles, y.RunnerFallbacks} {
		if n < 0 {
			return errors.New("a negative count")
		}
	}
	if y.Repositories < 1 || y.WithRows+rejected != y.Repositories {
		return fmt.Errorf("%d repositories, %d with rows and %d rejected", y.Repositories, y.WithRows, rejected)
	}
	if y.Generation != nil {
		return y.Generation.validate()
	}
	return nil
}

// PartYield is the yield of one source (repository) in a StatsPart.
type PartYield struct {
	Source string `json:"source"`
	Yield
}

// AddYields counts repositories' yield reports into p, per source. Add each report to one part
// only, as rejects (AddRejects).
func (p *StatsPart) AddYields(ys []schemas.RepoYield) {
	if len(ys) == 0 {
		return
	}
	o := &StatsPart{Version: StatsPartVersion}
	by := map[string]*PartYield{}
	for i := range ys {
		src := validUTF8(ys[i].Source)
		py := by[src]
		if py == nil {
			py = &PartYield{Source: src}
			by[src] = py
		}
		py.add(&ys[i])
	}
	for _, py := range by {
		o.Yields = append(o.Yields, *py)
	}
	slices.SortFunc(o.Yields, func(a, b PartYield) int { return strings.Compare(a.Source, b.Source) })
	p.Merge(o)
}

// mergeYields merges the yields of o into p's.
func (p *StatsPart) mergeYields(o *StatsPart) {
	p.Yields = mergeSorted(p.Yields, o.Yields, func(a, b *PartYield) int { return strings.Compare(a.Source, b.Source) },
		func(d, s *PartYield) { d.Yield.merge(&s.Yield) },
		func(s *PartYield) PartYield { return PartYield{Source: s.Source, Yield: s.Yield.clone()} })
}

// validateYields checks p's yields.
func (p *StatsPart) validateYields() error {
	for i := range p.Yields {
		y := &p.Yields[i]
		if i > 0 && p.Yields[i-1].Source >= y.Source {
			return fmt.Errorf("yield of %q: not sorted or repeated", y.Source)
		}
		if err := y.Yield.validate(); err != nil {
			return fmt.Errorf("yield of %q: %w", y.Source, err)
		}
	}
	return nil
}

// maxYieldLine bounds one line of a yields object.
const maxYieldLine = 1 << 20

// EachRepoYield calls fn with every repository yield report of the dataset m describes, object by
// object (memory bounded by one object). Manifests without yields call fn never.
func EachRepoYield(ctx context.Context, st *store.Store, m *Manifest, fn func(schemas.RepoYield) error) error {
	for _, ref := range m.Repos {
		data, err := ReadObject(ctx, st, ref)
		if err != nil {
			return err
		}
		if err := eachJSONLine(data, ref.Key, st.URL(), maxYieldLine, fn); err != nil {
			return err
		}
	}
	return nil
}
