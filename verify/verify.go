package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
	"github.com/ndtrace/ndtrace/tokenize"
)

// Verification of a dataset (`ndtrace verify`, docs/verify.md): a sample of a version's rows is
// drawn (verifysample.go), each row's input item is found again in the sources of the run's spec
// (the manifest's config) and re-executed in the sandbox through the tracer the pipeline uses, the
// row's trajectory is rebuilt from the new trace with the row's seed and policy, and its text and
// input_ids are compared with the stored row's. A execute.RowReplayer, when given, replays the row's actions
// on Python's own debugger as well. The result is a certificate, schemas.Verification, stored as
// verify.json beside the version's statistics.

// DefaultSample is how many rows verify checks when asked for neither a size nor a fraction.
const DefaultSample = 200

// DefaultMinAgreement is the agreement below which a verification fails: re-executing an item
// and rebuilding its trajectory is deterministic, so any difference is a fault.
const DefaultMinAgreement = 1.0

// maxVerifyExamples bounds the differences a certificate lists.
const maxVerifyExamples = 50

// KeyName is the certificate's name under its version's prefix.
const KeyName = "verify.json"

// Options configures Verify.
type Options struct {
	// Sample is how many rows to check (default DefaultSample); Fraction, if positive, checks
	// that fraction of the rows (rounded up) instead. Seed seeds the draw.
	Sample   int
	Fraction float64
	Seed     uint64
	// MinAgreement is the agreement the verification needs to pass (default DefaultMinAgreement;
	// set NoMinAgreement for none).
	MinAgreement float64
	// Tracer re-executes items: a *execute.Tracer with sandboxes of its own.
	Tracer execute.ItemTracer
	// Fetcher reads the spec's sources (nil: a zero crawl.Fetcher).
	Fetcher *crawl.Fetcher
	// Tokenizers finds the spec's tokenizer by name.
	Tokenizers func(name string) (tokenize.Tokenizer, error)
	// Replayer replays rows on bdb; nil: replay is not run (every row counted as not replayed).
	Replayer execute.RowReplayer
	// Concurrency is how many items are re-executed at once (default 1).
	Concurrency int
	// Progress, if set, is told of every row checked: how many so far, of how many drawn.
	Progress func(done, total int)
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// NoMinAgreement as Options.MinAgreement asks for no threshold (0 would mean the default).
const NoMinAgreement = -1

// verifyItem is one input item to re-execute and the sampled rows built from it: a function
// (path and source id), or a repository (path and commit) for its repository-level rows and the
// function-level rows found in its tests.
type verifyItem struct {
	repo           bool
	path, sourceID string // for a repository, sourceID is its commit
	item           *crawl.Item
	// moved says, for a repository found at another commit, which.
	moved string
	rows  []int // indexes into the sample
}

// rowResult is what checking one sampled row found.
type rowResult struct {
	reexec  *schemas.VerifyExample // nil: agreed (when checked)
	checked bool
	notRun  string // reason not re-executed
	replay  *schemas.ReplayOutcome
	noRep   string // reason not replayed
}

// Run verifies the version of the dataset in s whose manifest is m and returns its certificate
// (not stored: see Write). Rows it cannot re-execute (of a repository that moved) are
// counted as such; an error is returned only when the verification itself cannot proceed (the
// dataset or its sources cannot be read, the sandbox fails).
func Run(ctx context.Context, s *store.Store, m *dataset.Manifest, o Options) (*schemas.Verification, error) {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	start := now()
	if o.Tracer == nil || o.Tokenizers == nil {
		return nil, errors.New("verify: no tracer or tokenizers")
	}
	if o.Fraction < 0 || o.Fraction > 1 {
		return nil, fmt.Errorf("verify: fraction %v is not between 0 and 1", o.Fraction)
	}
	if o.Sample <= 0 {
		o.Sample = DefaultSample
	}
	switch {
	case o.MinAgreement == 0:
		o.MinAgreement = DefaultMinAgreement
	case o.MinAgreement < 0:
		o.MinAgreement = 0
	}
	spec, err := SpecOf(m)
	if err != nil {
		return nil, err
	}
	tok, err := o.Tokenizers(spec.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("verify: tokenizer %s: %w", spec.Tokenizer, err)
	}

	strata, err := countStrata(ctx, s, m)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, st := range strata {
		total += st.Rows
	}
	n := sampleSize(total, o.Sample, o.Fraction)
	allocate(strata, n, o.Seed)
	sampled, err := drawRows(ctx, s, strata, o.Seed)
	if err != nil {
		return nil, err
	}

	v := &schemas.Verification{Format: schemas.VerifyFormat, Version: m.Version, DatasetCreatedAt: m.CreatedAt,
		Rows: total, Sample: schemas.VerifySample{Seed: o.Seed, Size: len(sampled), Strata: len(strata)},
		Differences: map[string]int{}, NotReExecuted: map[string]int{},
		Replay:          schemas.VerifyReplay{Differences: map[string]int{}, NotReplayed: map[string]int{}},
		MinAgreement:    o.MinAgreement,
		Verifier:        schemas.VerifyVersions{Tracer: sandbox.TracerVersion, Pipeline: rows.Version},
		DatasetVersions: schemas.VerifyVersions{Tracer: m.Versions.Tracer, Pipeline: m.Versions.Pipeline},
		StartedAt:       start.UTC()}
	if o.Fraction > 0 {
		v.Sample.Fraction = o.Fraction
	} else {
		v.Sample.Requested = o.Sample
	}

	results := make([]rowResult, len(sampled))
	items := groupItems(sampled, results)
	if err := findItems(ctx, o.Fetcher, spec, items); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	done := 0
	progress := func(k int) {
		if o.Progress == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		done += k
		o.Progress(done, len(sampled))
	}
	progress(len(sampled) - countToCheck(items))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(o.Concurrency, 1))
	for _, vi := range items {
		g.Go(func() error {
			err := checkItem(gctx, o, spec, tok, vi, sampled, results)
			progress(len(vi.rows))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	for i, r := range results {
		switch {
		case r.notRun != "":
			v.NotReExecuted[r.notRun]++
		case r.checked && r.reexec == nil:
			v.Checked++
			v.Agreed++
		case r.checked:
			v.Checked++
			v.Differences[r.reexec.Kind]++
			addExample(v, *r.reexec)
		}
		switch {
		case r.noRep != "":
			v.Replay.NotReplayed[r.noRep]++
		case r.replay != nil && !r.replay.Replayed:
			v.Replay.NotReplayed[cmpOr(r.replay.Kind, schemas.NotReplayedOther)]++
		case r.replay != nil && r.replay.Agreed:
			v.Replay.Run++
			v.Replay.Agreed++
		case r.replay != nil:
			v.Replay.Run++
			kind := cmpOr(r.replay.Kind, "mismatch")
			v.Replay.Differences[kind]++
			addExample(v, schemas.VerifyExample{RowID: sampled[i].ID, Check: "replay", Kind: kind, State: -1, Detail: r.replay.Detail})
		}
	}
	if v.Checked > 0 {
		v.Agreement = float64(v.Agreed) / float64(v.Checked)
	}
	v.Passed = v.Checked > 0 && v.Agreement >= v.MinAgreement
	v.Seconds = now().Sub(start).Seconds()
	return v, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func addExample(v *schemas.Verification, e schemas.VerifyExample) {
	if len(v.Examples) < maxVerifyExamples {
		v.Examples = append(v.Examples, e)
	}
}

// SpecOf returns the spec of the run that made the version whose manifest is m (its config), with
// its defaults.
func SpecOf(m *dataset.Manifest) (schemas.Spec, error) {
	var spec schemas.Spec
	if len(bytes.TrimSpace(m.Config)) == 0 || string(m.Config) == "null" {
		return spec, errors.New("verify: the manifest records no spec (config is empty): not a dataset of ndtrace run")
	}
	if err := json.Unmarshal(m.Config, &spec); err != nil {
		return spec, fmt.Errorf("verify: the manifest's config is not a spec: %w", err)
	}
	return spec.WithDefaults(), nil
}

// groupItems groups the sampled rows by input item, in sample order, and marks the rows that are
// not re-executed in results.
func groupItems(sampled []schemas.Row, results []rowResult) []*verifyItem {
	var items []*verifyItem
	byKey := map[[3]string]*verifyItem{}
	for i, r := range sampled {
		k := [3]string{"", r.Path, r.SourceID}
		if r.RepoURL != "" {
			// A repository-level row, or a function found in a repository's tests: both come
			// from tracing the repository again.
			k = [3]string{"repo", r.RepoURL, r.Commit}
		}
		vi := byKey[k]
		if vi == nil {
			vi = &verifyItem{repo: k[0] != "", path: k[1], sourceID: k[2]}
			byKey[k] = vi
			items = append(items, vi)
		}
		vi.rows = append(vi.rows, i)
	}
	return items
}

func countToCheck(items []*verifyItem) int {
	n := 0
	for _, vi := range items {
		n += len(vi.rows)
	}
	return n
}

// verifyScanPage is how many items findItems asks a source for at a time.
const verifyScanPage = 1024

// findItems reads the spec's function-level sources (jsonl, python, the examples) as the pipeline
// scans them and sets the item of every entry of items it finds (by path and source id). Memory is
// bounded by a page of a source and the items sought.
func findItems(ctx context.Context, f *crawl.Fetcher, spec schemas.Spec, items []*verifyItem) error {
	if len(items) == 0 {
		return nil
	}
	if f == nil {
		f = &crawl.Fetcher{}
	}
	want := map[[2]string]*verifyItem{}
	repos := map[string]*verifyItem{} // by path: a repository found at another commit
	funcs := false
	for _, vi := range items {
		want[[2]string{vi.path, vi.sourceID}] = vi
		if vi.repo {
			repos[vi.path] = vi
		} else {
			funcs = true
		}
	}
	left := len(want)
	for i, src := range spec.Sources {
		if left == 0 {
			break
		}
		switch src.Kind {
		case "jsonl", "python":
			if !funcs || !wanted(want, src.Path) {
				continue
			}
		case "examples":
		case "repository", "files":
			// A files source's groups are repositories without tests, all under the source's
			// path (files:PATH) and told apart by their content hash.
			if len(repos) == 0 {
				continue
			}
		default:
			continue
		}
		var cur crawl.SourceCursor
		for done := false; !done && left > 0; {
			var err error
			cur, done, err = f.Scan(ctx, src, cur, verifyScanPage, func(e crawl.Entry) error {
				if e.Item == nil {
					return nil
				}
				k := [2]string{e.Item.Path, e.Item.SourceID}
				if e.Item.Kind() == crawl.RepositoryTests {
					k[1] = e.Item.Repo.Resolved.Pin()
					if vi := repos[e.Item.Path]; vi != nil && vi.item == nil && k[1] != vi.sourceID && e.Item.Repo.Resolved.Kind != crawl.KindFiles {
						vi.moved = k[1]
					}
				}
				if vi := want[k]; vi != nil && vi.item == nil && vi.repo == (e.Item.Kind() == crawl.RepositoryTests) {
					it := *e.Item
					vi.item = &it
					left--
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("verify: read sources[%d] (%s) of the run's spec: %w", i, cmpOr(src.Path, src.Kind), err)
			}
		}
	}
	return nil
}

// wanted reports whether some sought item comes from path.
func wanted(want map[[2]string]*verifyItem, path string) bool {
	for k := range want {
		if k[0] == path {
			return true
		}
	}
	return false
}

// checkItem re-executes one item and checks (and replays) each of its sampled rows.
func checkItem(ctx context.Context, o Options, spec schemas.Spec, tok tokenize.Tokenizer, vi *verifyItem, sampled []schemas.Row, results []rowResult) error {
	if vi.repo {
		return checkRepo(ctx, o, spec, tok, vi, sampled, results)
	}
	if vi.item == nil {
		for _, i := range vi.rows {
			results[i] = rowResult{checked: true, noRep: schemas.NotReplayedNotReExecuted,
				reexec: &schemas.VerifyExample{RowID: sampled[i].ID, Check: "reexec", Kind: schemas.DiffItemMissing, State: -1,
					Detail: fmt.Sprintf("no item with source_id %q in %s among the spec's sources", vi.sourceID, vi.path)}}
		}
		return nil
	}
	t, err := o.Tracer.Trace(ctx, *vi.item, spec, func() {})
	var traceErr string
	if err != nil {
		if !errors.Is(err, execute.ErrItem) {
			return fmt.Errorf("verify: re-execute %s: %w", vi.item.Key, err)
		}
		traceErr = err.Error()
	}
	for _, i := range vi.rows {
		row := &sampled[i]
		res := rowResult{checked: true}
		if traceErr != "" {
			res.reexec = &schemas.VerifyExample{RowID: row.ID, Check: "reexec", Kind: schemas.DiffStatus, State: -1,
				Detail: "the re-execution broke its sandbox: " + traceErr}
		} else {
			res.reexec = compareRow(t, row, spec, tok)
		}
		if err := replay(ctx, o.Replayer, spec, *vi.item, row, &res); err != nil {
			return err
		}
		results[i] = res
	}
	return nil
}

// replay replays row, whose item is it, with rep, if any, into res: forward rows only.
func replay(ctx context.Context, rep execute.RowReplayer, spec schemas.Spec, it crawl.Item, row *schemas.Row, res *rowResult) error {
	switch {
	case rep == nil:
		res.noRep = schemas.NotReplayedNotRun
		return nil
	case row.Direction == string(debugger.Inverse):
		res.noRep = schemas.NotReplayedInverse // pdb does not run backwards
		return nil
	}
	out, err := rep.Replay(ctx, it, *row, spec)
	if err != nil {
		return fmt.Errorf("verify: replay row %s on bdb: %w", row.ID, err)
	}
	res.replay = &out
	return nil
}

// checkRepo traces a repository again (checkout, its tests untraced and traced, the functions
// found in them, as the pipeline does) and checks (and replays) each of its sampled rows:
// repository-level rows against the test they name, function-level rows against the function
// item found again in the tests.
func checkRepo(ctx context.Context, o Options, spec schemas.Spec, tok tokenize.Tokenizer, vi *verifyItem, sampled []schemas.Row, results []rowResult) error {
	all := func(res func(row *schemas.Row) rowResult) {
		for _, i := range vi.rows {
			results[i] = res(&sampled[i])
		}
	}
	if vi.item == nil {
		if vi.moved != "" {
			all(func(*schemas.Row) rowResult {
				return rowResult{notRun: schemas.NotRunRepositoryMoved, noRep: schemas.NotReplayedNotReExecuted}
			})
			return nil
		}
		all(func(row *schemas.Row) rowResult {
			return rowResult{checked: true, noRep: schemas.NotReplayedNotReExecuted,
				reexec: &schemas.VerifyExample{RowID: row.ID, Check: "reexec", Kind: schemas.DiffItemMissing, State: -1,
					Detail: fmt.Sprintf("no repository %s at %s among the spec's sources", vi.path, vi.sourceID)}}
		})
		return nil
	}
	// The rows of a repository replay in its checkout and environment: when the tracer is also the
	// replayer and can (a execute.RepoReplayer), they are checked while its re-execution keeps them.
	var (
		t        execute.TracedItem
		err      error
		checked  bool
		checkErr error
	)
	rr, ok := o.Tracer.(execute.RepoReplayer)
	if self, isRep := o.Tracer.(execute.RowReplayer); ok && isRep && o.Replayer != nil && o.Replayer == self {
		t, err = rr.TraceRepo(ctx, *vi.item, spec, func() {}, func(t execute.TracedItem, rep execute.RowReplayer) error {
			checked = true
			checkErr = checkRepoRows(ctx, spec, tok, vi, sampled, results, t, rep)
			return checkErr
		})
	} else {
		t, err = o.Tracer.Trace(ctx, *vi.item, spec, func() {})
	}
	switch {
	case checkErr != nil:
		return checkErr
	case err != nil && !errors.Is(err, execute.ErrItem):
		return fmt.Errorf("verify: re-execute %s: %w", vi.item.Key, err)
	case checked:
		return nil
	}
	if err != nil || t.Repo == nil {
		reason := ""
		if err != nil {
			reason = "the re-execution broke its sandbox: " + err.Error()
		} else {
			reason = fmt.Sprintf("the repository gave no trace on re-execution (%s)", cmpOr(t.Detail, string(t.Status)))
		}
		all(func(row *schemas.Row) rowResult {
			return rowResult{checked: true, noRep: schemas.NotReplayedNotReExecuted,
				reexec: &schemas.VerifyExample{RowID: row.ID, Check: "reexec", Kind: schemas.DiffStatus, State: -1, Detail: reason}}
		})
		return nil
	}
	return checkRepoRows(ctx, spec, tok, vi, sampled, results, t, o.Replayer)
}

// checkRepoRows checks each sampled row of the re-executed repository t and replays it with rep
// (nil: not replayed): repository-level rows against the test they name, function-level rows
// against the function item found again in the tests.
func checkRepoRows(ctx context.Context, spec schemas.Spec, tok tokenize.Tokenizer, vi *verifyItem, sampled []schemas.Row, results []rowResult, t execute.TracedItem, rep execute.RowReplayer) error {
	for _, i := range vi.rows {
		row := &sampled[i]
		res := rowResult{checked: true}
		it := *vi.item
		if row.Level == "repository" {
			res.reexec = compareRepoRow(t, row, spec, tok)
		} else {
			k := slices.IndexFunc(t.Repo.Functions, func(f execute.TracedItem) bool {
				return f.Item.Path == row.Path && f.Item.SourceID == row.SourceID && f.Item.QualName == row.QualName &&
					seedOf(spec, f.Item.Key, row)
			})
			if k < 0 {
				res.reexec = &schemas.VerifyExample{RowID: row.ID, Check: "reexec", Kind: schemas.DiffItemMissing, State: -1,
					Detail: fmt.Sprintf("the function item %s#%s was not found again in the repository's tests", row.Path, row.SourceID)}
				res.noRep = schemas.NotReplayedNotReExecuted
				results[i] = res
				continue
			}
			res.reexec = compareRow(t.Repo.Functions[k], row, spec, tok)
			it = t.Repo.Functions[k].Item
		}
		if err := replay(ctx, rep, spec, it, row, &res); err != nil {
			return err
		}
		results[i] = res
	}
	return nil
}

// seedOf reports whether row's seed is one the pipeline derives for the item with key (one test
// calls a function with several inputs: path, test and function name do not tell them apart, the
// item's key, which the seed is derived from, does).
func seedOf(spec schemas.Spec, key string, row *schemas.Row) bool {
	for k := 0; k < spec.TrajectoriesPerTrace; k++ {
		if rows.Seed(spec.Seed, key, row.Direction, k) == uint64(row.Seed) {
			return true
		}
	}
	return false
}

// compareRepoRow rebuilds a repository-level row from the re-executed repository t (the test the
// row names, its direction, policy and seed) and compares it with the row.
func compareRepoRow(t execute.TracedItem, row *schemas.Row, spec schemas.Spec, tok tokenize.Tokenizer) *schemas.VerifyExample {
	diff := func(kind string, format string, args ...any) *schemas.VerifyExample {
		return &schemas.VerifyExample{RowID: row.ID, Check: "reexec", Kind: kind, State: -1, Detail: fmt.Sprintf(format, args...)}
	}
	k := slices.IndexFunc(t.Repo.Traces, func(tt schemas.TestTrace) bool { return tt.Test == row.SourceID })
	if k < 0 {
		return diff(schemas.DiffStatus, "test %s gave no trace on re-execution (not run, or quarantined: its outcome changed under tracing)", row.SourceID)
	}
	tt := t.Repo.Traces[k]
	if _, err := debugger.ExitFor(tt.Status); err != nil {
		return diff(schemas.DiffStatus, "test %s ended %s on re-execution (%s)", tt.Test, tt.Status, cmpOr(tt.Detail, "no trajectory"))
	}
	p, err := debugger.PolicyByName(row.Policy)
	if err != nil {
		return diff(schemas.DiffRebuild, "policy: %v", err)
	}
	got, err := rows.RepoRow(t.Item, tt, nil, debugger.Direction(row.Direction), uint64(row.Seed), p, rows.OptionsFor(spec, tok, row.CreatedAt))
	if err != nil {
		return diff(schemas.DiffRebuild, "rebuild with seed %d: %v", row.Seed, err)
	}
	return compareBuilt(row, &got)
}

// compareRow rebuilds row's trajectory from the re-executed trace t with the row's seed and policy
// and compares it with the row: nil if text and input_ids are equal, else the difference.
func compareRow(t execute.TracedItem, row *schemas.Row, spec schemas.Spec, tok tokenize.Tokenizer) *schemas.VerifyExample {
	diff := func(kind string, state int, format string, args ...any) *schemas.VerifyExample {
		return &schemas.VerifyExample{RowID: row.ID, Check: "reexec", Kind: kind, State: state, Detail: fmt.Sprintf(format, args...)}
	}
	if _, err := debugger.ExitFor(t.Status); err != nil {
		return diff(schemas.DiffStatus, -1, "the re-executed run ended %s (%s)", t.Status, cmpOr(t.Detail, "no trajectory"))
	}
	p, err := debugger.PolicyByName(row.Policy)
	if err != nil {
		return diff(schemas.DiffRebuild, -1, "policy: %v", err)
	}
	got, err := rows.FunctionRow(t, debugger.Direction(row.Direction), uint64(row.Seed), p, rows.OptionsFor(spec, tok, row.CreatedAt))
	var tree *rows.TreeError
	switch {
	case errors.As(err, &tree):
		return diff(schemas.DiffRebuild, -1, "no %s tree from the re-executed trace: %v", row.Direction, tree.Err)
	case err != nil:
		return diff(schemas.DiffRebuild, -1, "rebuild with seed %d: %v", row.Seed, err)
	}
	return compareBuilt(row, &got)
}

// compareBuilt compares a rebuilt row with the stored one: nil if text and input_ids are equal.
func compareBuilt(row, got *schemas.Row) *schemas.VerifyExample {
	diff := func(kind string, state int, format string, args ...any) *schemas.VerifyExample {
		return &schemas.VerifyExample{RowID: row.ID, Check: "reexec", Kind: kind, State: state, Detail: fmt.Sprintf(format, args...)}
	}
	if got.Text != row.Text {
		k, stored, rerun, n := firstDifferentState(row.Text, got.Text)
		return diff(schemas.DiffText, k, "%s differs (stored row has %d states and exit): stored %q, re-executed %q",
			stateName(k, n), n-2, stored, rerun)
	}
	if !slices.Equal(got.InputIDs, row.InputIDs) {
		i := 0
		for i < len(got.InputIDs) && i < len(row.InputIDs) && got.InputIDs[i] == row.InputIDs[i] {
			i++
		}
		return diff(schemas.DiffInputIDs, -1, "same text, input_ids differ from token %d (stored %d ids, re-encoded %d)",
			i, len(row.InputIDs), len(got.InputIDs))
	}
	return nil
}

// splitStates splits a trajectory's text at the grammar's state boundaries (<|frame_sep|>, which
// opens every state and the exit): part 0 is the CODE context, the last part the exit.
func splitStates(text string) []string { return strings.Split(text, tokenize.FrameSep) }

// firstDifferentState returns the index of the first part (splitStates) in which a and b differ,
// both parts (cut to a readable length around the difference), and a's number of parts.
func firstDifferentState(a, b string) (int, string, string, int) {
	pa, pb := splitStates(a), splitStates(b)
	for k := 0; k < max(len(pa), len(pb)); k++ {
		var x, y string
		if k < len(pa) {
			x = pa[k]
		}
		if k < len(pb) {
			y = pb[k]
		}
		if x != y || k >= len(pa) || k >= len(pb) {
			return k, excerpt(x, y), excerpt(y, x), len(pa)
		}
	}
	return -1, "", "", len(pa)
}

// stateName names part k of a text of n parts.
func stateName(k, n int) string {
	switch {
	case k == 0:
		return "state 0 (the CODE context)"
	case k == n-1:
		return fmt.Sprintf("state %d (the exit)", k)
	}
	return fmt.Sprintf("state %d", k)
}

// excerpt cuts s to about 160 bytes around where it first differs from t.
func excerpt(s, t string) string {
	const width = 160
	if len(s) <= width {
		return s
	}
	i := 0
	for i < len(s) && i < len(t) && s[i] == t[i] {
		i++
	}
	from := max(0, i-width/4)
	for from > 0 && !utf8.RuneStart(s[from]) {
		from--
	}
	to := min(len(s), from+width)
	for to < len(s) && !utf8.RuneStart(s[to]) {
		to++
	}
	out := s[from:to]
	if from > 0 {
		out = "…" + out
	}
	if to < len(s) {
		out += "…"
	}
	return out
}

// Key is where the certificate of the version whose manifest is m is stored:
// versions/<id>/verify.json, or verify.json at the root for a dataset written before versions.
func Key(m *dataset.Manifest) string {
	if m.Version == "" {
		return KeyName
	}
	return dataset.VersionPrefix(m.Version) + KeyName
}

// maxVerificationBytes bounds a certificate read.
const maxVerificationBytes = 4 << 20

// Write stores v as the certificate of the version whose manifest is m, replacing an
// earlier one: it is not part of the version's commit (which stays write-once), and the last
// verification is the one that counts.
func Write(ctx context.Context, s *store.Store, m *dataset.Manifest, v *schemas.Verification) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("verify: encode certificate: %w", err)
	}
	key := Key(m)
	if err := s.Put(ctx, key, buf.Bytes(), &store.PutOptions{ContentType: "application/json"}); err != nil {
		return "", fmt.Errorf("verify: write %s: %w", key, err)
	}
	return key, nil
}

// Read reads the certificate of the version whose manifest is m: nil, without an
// error, when the version has none (or the one found certifies another version).
func Read(ctx context.Context, s *store.Store, m *dataset.Manifest) (*schemas.Verification, error) {
	key := Key(m)
	data, err := s.ReadLimit(ctx, key, maxVerificationBytes)
	if store.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if v.Version != m.Version || !v.DatasetCreatedAt.Equal(m.CreatedAt) {
		// A certificate of an earlier version, left at the root by a dataset without versions.
		return nil, nil
	}
	return v, nil
}

// Parse decodes a certificate (verify.json), refusing unknown fields, trailing data
// and another format.
func Parse(data []byte) (*schemas.Verification, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var v schemas.Verification
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("malformed certificate: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("malformed certificate: trailing data after the JSON object")
	}
	if v.Format != schemas.VerifyFormat {
		return nil, fmt.Errorf("certificate: format %q, want %q", v.Format, schemas.VerifyFormat)
	}
	return &v, nil
}
