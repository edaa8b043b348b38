package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/internal/numfmt"
	"github.com/ndtrace/ndtrace/internal/termsafe"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
	"github.com/ndtrace/ndtrace/verify"
)

const statsUsage = `URL [flags]

Prints the dataset's statistics as tables: input items, traces, trajectories and tokens; the
distributions of tokens, learned tokens, actions, events and code length per trajectory (mean,
25th, 50th and 90th percentile, min and max) by level and direction, as in the paper's Figure 5
and A.1; actions, events and exits per type; the trajectories with noisy values (a failed repr,
a value that differed between two runs, an epoch time, a hash-sized integer) and with address
placeholders not numbered from 0x1; the sources; the repositories' yield and, when inputs were
generated for functions that came without them, what that gave (functions found, units, with an
input, line coverage, losses by reason, rows by input source); and the rejects by reason.

It reads stats.json when the dataset has one that matches its manifest (same created_at and
totals), and computes the statistics from the shards otherwise (nothing is written). Last comes
the Verification section: the certificate 'ndtrace verify' left for the version, if any.
--json prints the statistics as stats.json holds them (docs/dataset.md, "Statistics").

URL: a folder (./ndtrace-data), file:///abs/dir, s3://bucket/prefix?region=..., gs://bucket/prefix,
azblob://container/prefix (see docs/dataset.md). Flags may come before or after URL.`

// statsTableMetrics are the per-trajectory metrics "ndtrace stats" prints, with their titles.
var statsTableMetrics = []struct{ name, title string }{
	{"tokens", "Tokens per trajectory"},
	{"learned_tokens", "Learned tokens per trajectory"},
	{"actions", "Actions per trajectory"},
	{"events", "Trace events per trajectory"},
	{"code_chars", "Code length in characters"},
}

// runStats implements "ndtrace stats".
func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("stats", statsUsage, stderr)
	asJSON := fs.Bool("json", false, "print the statistics as JSON (the content of stats.json)")
	nsources := fs.Int("sources", 20, "sources to list, most trajectories first (0: all)")
	url, err := parseURLArg(fs, args)
	if err != nil {
		return err
	}
	if *nsources < 0 {
		return usagef("--sources must be 0 or more")
	}
	st, from, err := loadDatasetStats(ctx, url)
	if err != nil {
		return err
	}
	if *asJSON {
		data, err := st.Marshal()
		if err != nil {
			return err
		}
		_, err = stdout.Write(terminalJSON(stdout, data))
		return err
	}
	printStats(stdout, url, st, from, *nsources)
	v, err := loadVerification(ctx, url)
	if err != nil {
		return err
	}
	statsSection(stdout, "Verification")
	if v == nil {
		fmt.Fprintln(stdout, "none (ndtrace verify certifies a sample of the rows)")
		return nil
	}
	printVerification(stdout, url, v)
	return nil
}

// loadVerification returns the certificate ndtrace verify left for the dataset's head version,
// or nil if there is none.
func loadVerification(ctx context.Context, url string) (*schemas.Verification, error) {
	st, m, err := openDataset(ctx, url)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	v, err := verify.Read(ctx, st, m)
	if err != nil {
		return nil, fmt.Errorf("%s: verification: %w", url, err)
	}
	return v, nil
}

// openDataset opens the store at url and reads the dataset's manifest; the caller closes the store.
// A store that cannot be read, or holds no committed dataset, is an error in one line saying which
// (openCommitted).
func openDataset(ctx context.Context, url string) (*store.Store, *dataset.Manifest, error) {
	st, err := openCommitted(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	m, err := dataset.ReadManifest(ctx, st)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, m, nil
}

// loadDatasetStats opens the dataset at url and returns its statistics and where they came from
// ("stats.json" or "computed"). A missing manifest is an error saying so.
func loadDatasetStats(ctx context.Context, url string) (*dataset.Stats, string, error) {
	st, m, err := openDataset(ctx, url)
	if err != nil {
		return nil, "", err
	}
	defer st.Close()
	stats, computed, err := dataset.LoadStats(ctx, st, m)
	if err != nil {
		return nil, "", fmt.Errorf("%s: statistics: %w", url, err)
	}
	if computed {
		return stats, "computed from the shards", nil
	}
	return stats, "from " + dataset.StatsKey, nil
}

// printStats prints the statistics as readable tables. Every name in them (groups, sources,
// reject classes and reasons, exception types) may come from traced code, a repository or a
// corpus: each is escaped for a terminal (termsafe.String), as one cell of one line.
func printStats(w io.Writer, url string, st *dataset.Stats, from string, nsources int) {
	d := st.Dataset
	fmt.Fprintf(w, "dataset %s: %d shards, %s rows, %s tokens (%s learned); created %s; statistics %s\n", termsafe.String(url),
		st.Totals.Shards, numfmt.Thousands(st.Totals.Rows), numfmt.Thousands(st.Totals.Tokens), numfmt.Thousands(st.Totals.LearnedTokens),
		st.CreatedAt.UTC().Format(time.RFC3339), termsafe.String(from))

	statsSection(w, "Inputs")
	tw := statsTable(w)
	fmt.Fprintln(tw, "items\ttraces\ttrajectories\ttokens\tlearned\trejects\tquarantined\tduplicates\tdecontaminated\t")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", numfmt.Thousands(d.Items), numfmt.Thousands(d.Traces),
		numfmt.Thousands(d.Trajectories), numfmt.Thousands(d.Tokens), numfmt.Thousands(d.LearnedTokens), numfmt.Thousands(d.Rejects),
		numfmt.Thousands(d.Quarantined), numfmt.Thousands(d.Duplicates), fmtKeyCounts(d.Decontaminated))
	tw.Flush()

	for _, mt := range statsTableMetrics {
		statsSection(w, mt.title)
		tw := statsTable(w)
		fmt.Fprintln(tw, "group\ttrajectories\tmean\tp25\tmedian\tp90\tmin\tmax\t")
		for _, g := range st.Groups {
			m := g.Metric(mt.name)
			if m == nil {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", termsafe.String(g.Name), numfmt.Thousands(m.Count), numfmt.Decimal(m.Mean),
				numfmt.Decimal(m.P25), numfmt.Decimal(m.P50), numfmt.Decimal(m.P90), numfmt.Thousands(m.Min), numfmt.Thousands(m.Max))
		}
		tw.Flush()
	}

	statsSection(w, "Actions per type (all trajectories of the group)")
	tw = statsTable(w)
	fmt.Fprintf(tw, "group\t%s\t\n", strings.Join(dataset.ActionTypes, "\t"))
	for _, g := range st.Groups {
		fmt.Fprintf(tw, "%s\t%s\t\n", termsafe.String(g.Name), fmtCountsInOrder(g.Actions, dataset.ActionTypes))
	}
	tw.Flush()

	statsSection(w, "Trace events per type (each trace once)")
	tw = statsTable(w)
	fmt.Fprintf(tw, "group\ttraces\t%s\t\n", strings.Join(dataset.EventTypes, "\t"))
	for _, g := range st.Groups {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", termsafe.String(g.Name), numfmt.Thousands(g.Traces), fmtCountsInOrder(g.Events, dataset.EventTypes))
	}
	tw.Flush()

	statsSection(w, "Exits")
	tw = statsTable(w)
	fmt.Fprintln(tw, "group\texits\t")
	for _, g := range st.Groups {
		fmt.Fprintf(tw, "%s\t%s\t\n", termsafe.String(g.Name), fmtKeyCounts(g.Exits))
	}
	tw.Flush()

	statsSection(w, "Values (trajectories with noisy values; with placeholders not numbered 0x1, 0x2, ...)")
	tw = statsTable(w)
	fmt.Fprintln(tw, "group\ttrajectories\tnoisy values\tplaceholder gap\t")
	for _, g := range st.Groups {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", termsafe.String(g.Name), numfmt.Thousands(g.Trajectories),
			passRate(g.NoisyRows, g.Trajectories), passRate(g.PlaceholderGapRows, g.Trajectories))
	}
	tw.Flush()

	srcs := append([]dataset.SourceStats(nil), st.Sources...)
	sort.SliceStable(srcs, func(i, j int) bool { return srcs[i].Trajectories > srcs[j].Trajectories })
	title := fmt.Sprintf("Sources (%d)", len(srcs))
	if nsources > 0 && len(srcs) > nsources {
		title = fmt.Sprintf("Sources (%d of %d, most trajectories first; --sources 0 for all)", nsources, len(srcs))
		srcs = srcs[:nsources]
	}
	statsSection(w, title)
	tw = statsTable(w)
	fmt.Fprintln(tw, "level\tsource\titems\ttraces\ttrajectories\ttokens\trejects\tquarantined\tduplicates\tdecontaminated\t")
	for _, s := range srcs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", termsafe.String(orDash(s.Level)), termsafe.String(orDash(s.Source)), numfmt.Thousands(s.Items),
			numfmt.Thousands(s.Traces), numfmt.Thousands(s.Trajectories), numfmt.Thousands(s.Tokens), numfmt.Thousands(s.Rejects),
			numfmt.Thousands(s.Quarantined), numfmt.Thousands(s.Duplicates), fmtKeyCounts(s.Decontaminated))
	}
	tw.Flush()

	printYields(w, st, nsources)
	printGeneration(w, st, nsources)

	statsSection(w, "Rejects by reason")
	if len(st.Rejects) == 0 {
		fmt.Fprintln(w, "none")
		return
	}
	tw = statsTable(w)
	fmt.Fprintln(tw, "reason\tcount\texample\t")
	for _, rc := range st.Rejects {
		ex := "-"
		if len(rc.Examples) > 0 {
			ex = termsafe.String(rc.Examples[0].Key + ": " + oneLine(rc.Examples[0].Reason))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", termsafe.String(rc.Class), numfmt.Thousands(rc.Count), ex)
	}
	tw.Flush()
}

func statsSection(w io.Writer, title string) {
	fmt.Fprintf(w, "\n%s\n", title)
}

func statsTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// fmtCountsInOrder formats counts[k] for each key, tab-separated.
func fmtCountsInOrder(counts map[string]int64, keys []string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = numfmt.Thousands(counts[k])
	}
	return strings.Join(parts, "\t")
}

// fmtKeyCounts formats a map as "k=v k=v" in key order ("-" if empty), escaped for a terminal
// (keys such as exception types come from traced code).
func fmtKeyCounts(counts map[string]int64) string { return termsafe.String(numfmt.Counts(counts, "-")) }

// printYields prints the repositories' yield report: the totals, why repositories gave no rows, and
// the repositories (those with the most tests run first, nsources of them; 0 for all).
func printYields(w io.Writer, st *dataset.Stats, nsources int) {
	y := st.Repositories
	if y == nil {
		return
	}
	statsSection(w, fmt.Sprintf("Repositories (%s, %s with rows)", numfmt.Thousands(y.Repositories), numfmt.Thousands(y.WithRows)))
	tw := statsTable(w)
	fmt.Fprintln(tw, "collected\trun\tpassed untraced\tpassed traced\tquarantined\trunner options neutralised\tchanged by them\tread-only checkout\tsandbox errors\trows\t")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", numfmt.Thousands(y.Collected), numfmt.Thousands(y.Run),
		passRate(y.PassedPlain, y.Run), passRate(y.PassedTraced, y.Run), numfmt.Thousands(y.Quarantined), numfmt.Thousands(y.Neutralised),
		numfmt.Thousands(y.ChangedByOptions), numfmt.Thousands(y.ReadOnly), numfmt.Thousands(y.SandboxErrors), numfmt.Thousands(y.Rows))
	tw.Flush()
	if len(y.RejectedByClass) > 0 {
		fmt.Fprintf(w, "without rows, by stage: %s\n", fmtKeyCounts(y.RejectedByClass))
	}
	if y.Nondeterministic > 0 || y.NondeterministicValues > 0 {
		fmt.Fprintf(w, "traced twice: %s tests quarantined (their runs differ), %s values read <nondeterministic>\n",
			numfmt.Thousands(y.Nondeterministic), numfmt.Thousands(y.NondeterministicValues))
	}
	if y.TracedTimeout > 0 || y.TracedPastLimit > 0 || y.SandboxRefused > 0 {
		fmt.Fprintf(w, "time and sandbox: %s tests ran past limits.timeout traced, %s timed out traced (quarantined), %s failed on a refusal of the sandbox\n",
			numfmt.Thousands(y.TracedPastLimit), numfmt.Thousands(y.TracedTimeout), numfmt.Thousands(y.SandboxRefused))
	}
	if y.ExcludedFiles > 0 || y.RunnerFallbacks > 0 {
		fmt.Fprintf(w, "collection: %s test files left out (their import tampered), %s repositories collected by the other runner\n",
			numfmt.Thousands(y.ExcludedFiles), numfmt.Thousands(y.RunnerFallbacks))
	}
	var repos []dataset.SourceStats
	for _, s := range st.Sources {
		if s.Yield != nil {
			repos = append(repos, s)
		}
	}
	sort.SliceStable(repos, func(i, j int) bool { return repos[i].Yield.Run > repos[j].Yield.Run })
	if nsources > 0 && len(repos) > nsources {
		fmt.Fprintf(w, "(%d of %d repositories, most tests run first; --sources 0 for all)\n", nsources, len(repos))
		repos = repos[:nsources]
	}
	tw = statsTable(w)
	fmt.Fprintln(tw, "repository\tcollected\trun\tpassed untraced\tpassed traced\tquarantined\trows\twithout rows\t")
	for _, s := range repos {
		r := s.Yield
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", termsafe.String(s.Source), numfmt.Thousands(r.Collected), numfmt.Thousands(r.Run),
			numfmt.Thousands(r.PassedPlain), numfmt.Thousands(r.PassedTraced), numfmt.Thousands(r.Quarantined), numfmt.Thousands(r.Rows),
			fmtKeyCounts(r.RejectedByClass))
	}
	tw.Flush()
}

// maxLossesShown is the most loss reasons a line of the generated inputs' section names.
const maxLossesShown = 8

// printGeneration prints what generating inputs gave (issue 30), only when some repository or
// group of files generated inputs: a line for the dataset, its coverage buckets, the inputs by
// source, the rows by input source, and a line per source (most functions found first, nsources
// of them; 0 for all). Reasons and sources are escaped for a terminal.
func printGeneration(w io.Writer, st *dataset.Stats, nsources int) {
	if st.Repositories == nil || st.Repositories.Generation == nil {
		return
	}
	g := st.Repositories.Generation
	statsSection(w, "Generated inputs (functions that came without inputs)")
	fmt.Fprintf(w, "all: %s\n", genLine(g))
	buckets := make([]string, len(g.Coverage))
	for i, n := range g.Coverage {
		lo := i * 100 / schemas.CoverageBuckets
		hi := lo + 100/schemas.CoverageBuckets - 1
		if i == len(g.Coverage)-1 {
			hi = 100
		}
		buckets[i] = fmt.Sprintf("%d-%d%% %s", lo, hi, numfmt.Thousands(n))
	}
	fmt.Fprintf(w, "line coverage of the units with an input: %s\n", strings.Join(buckets, ", "))
	if len(g.BySource) > 0 {
		fmt.Fprintf(w, "inputs kept by source: %s\n", countsByCount(g.BySource, 0))
	}
	if in := st.Dataset.InputSources; len(in) > 0 {
		fmt.Fprintf(w, "rows by input source: %s\n", countsByCount(in, 0))
	}
	var srcs []dataset.SourceStats
	for _, s := range st.Sources {
		if s.Yield != nil && s.Yield.Generation != nil {
			srcs = append(srcs, s)
		}
	}
	sort.SliceStable(srcs, func(i, j int) bool { return srcs[i].Yield.Generation.Found > srcs[j].Yield.Generation.Found })
	if nsources > 0 && len(srcs) > nsources {
		fmt.Fprintf(w, "(%d of %d sources, most functions found first; --sources 0 for all)\n", nsources, len(srcs))
		srcs = srcs[:nsources]
	}
	for _, s := range srcs {
		fmt.Fprintf(w, "%s: %s\n", termsafe.String(s.Source), genLine(s.Yield.Generation))
	}
}

// genLine is one generation report on a line: "found 120, units 97, with input 71 (73.2%),
// inputs 240, traced 238, rows 480, attempts 9,000, median coverage 80%+; losses: needs_io 5,
// async 3".
func genLine(g *dataset.Generation) string {
	median := "-"
	if g.MedianCoverage >= 0 {
		median = fmt.Sprintf("%d%%+", g.MedianCoverage)
	}
	losses := "none"
	if len(g.Losses) > 0 {
		losses = countsByCount(g.Losses, maxLossesShown)
	}
	return fmt.Sprintf("found %s, units %s, with input %s, inputs %s, traced %s, rows %s, attempts %s, median coverage %s; losses: %s",
		numfmt.Thousands(g.Found), numfmt.Thousands(g.Units), passRate(g.WithInput, g.Units), numfmt.Thousands(g.Inputs),
		numfmt.Thousands(g.Traced), numfmt.Thousands(g.Rows), numfmt.Thousands(g.Attempts), median, losses)
}

// countsByCount formats counts as "k n, k n", the largest first (then by key), escaped for a
// terminal; with limit > 0 at most limit of them, then "(+N more)".
func countsByCount(counts map[string]int64, limit int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	more := 0
	if limit > 0 && len(keys) > limit {
		more, keys = len(keys)-limit, keys[:limit]
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = termsafe.String(k) + " " + numfmt.Thousands(counts[k])
	}
	out := strings.Join(parts, ", ")
	if more > 0 {
		out += fmt.Sprintf(" (+%d more)", more)
	}
	return out
}

// passRate is n of run as "n (p%)" (n alone when run is 0).
func passRate(n, run int64) string {
	if run == 0 {
		return numfmt.Thousands(n)
	}
	return fmt.Sprintf("%s (%.1f%%)", numfmt.Thousands(n), 100*float64(n)/float64(run))
}
