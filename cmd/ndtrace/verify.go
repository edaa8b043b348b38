package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/internal/numfmt"
	"github.com/ndtrace/ndtrace/internal/termsafe"
	"github.com/ndtrace/ndtrace/internal/userdirs"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
	"github.com/ndtrace/ndtrace/verify"
)

const verifyUsage = `DATASET [--sample N | --fraction F] [--seed S] [--min-agreement X] [--replay=true]

Certifies a dataset: draws a sample of its rows (reproducibly from --seed, stratified by level,
direction and shard), finds each row's input item again in the sources of the spec the dataset was
made with (the manifest's config: run verify where the run's relative paths resolve), re-executes
it in a fresh sandbox through the tracer the pipeline uses, rebuilds the row's trajectory from the
new trace with the row's seed and policy, and checks that text and input_ids equal the stored row.
With --replay, each row's actions are also replayed on Python's own debugger (bdb) where this
ndtrace can. A difference is printed with the row id and the first differing state.

Repository-level rows are re-executed by checking the repository out again at the row's commit
and running its tests as the pipeline does (--scratch, --envs); the function-level rows found in
its tests are checked against the functions found again; both are replayed on bdb there, in the
checkout and environment, a repository-level row from its entry call inside its test. A
repository whose ref now resolves to
another commit is not re-executed: its rows are counted as such, never as agreement.

The result, the certificate, is written into the dataset as versions/<version>/verify.json
(replacing an earlier verification of that version) and shown by 'ndtrace stats' and the dashboard.
docs/verify.md describes the sampling and every figure.

Exit status: 0 when the agreement (rows agreed / rows re-executed) is at least --min-agreement;
1 with a one-line reason when it is below, when no row could be re-executed, or when the dataset
or its sources cannot be read; 2 for bad usage.

DATASET: a folder (./ndtrace-data), file:///abs/dir, s3://bucket/prefix?region=..., gs://...,
azblob://... (see docs/dataset.md). Flags may come before or after DATASET.`

// runVerify implements "ndtrace verify".
func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("verify", verifyUsage, stderr)
	sample := fs.Int("sample", verify.DefaultSample, "rows to check")
	fraction := fs.Float64("fraction", 0, "check this fraction of the rows (0 < F <= 1, rounded up) instead of --sample")
	seed := fs.Uint64("seed", 0, "seed of the sample: the same seed over the same dataset draws the same rows")
	minAgreement := fs.Float64("min-agreement", verify.DefaultMinAgreement, "fail (exit 1) when the agreement is below this (0 to 1)")
	replay := fs.Bool("replay", true, "also replay the rows' actions on Python's bdb (counted as not run when this ndtrace cannot)")
	concurrency := fs.Int("concurrency", 2, "items re-executed at once (sandboxes)")
	asJSON := fs.Bool("json", false, "print the certificate (verify.json) instead of the report")
	backend := fs.String("backend", "namespaces", "sandbox backend: "+strings.Join(sandbox.Backends(), " or "))
	python := fs.String("python", "/usr/bin/python3", "Python interpreter run inside the sandbox")
	var wf workerFlags
	fs.StringVar(&wf.scratch, "scratch", "", "folder for repository checkouts, not under /tmp (default: $"+userdirs.ScratchEnv+", else per user, docs/operations.md)")
	fs.StringVar(&wf.envs, "envs", "", "folder of the environments built for repositories, not under /tmp (default: $"+userdirs.EnvsEnv+", else per user)")
	url, err := parseURLArg(fs, args)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["sample"] && set["fraction"]:
		return usagef("--sample and --fraction exclude each other")
	case *sample < 1:
		return usagef("--sample must be at least 1")
	case set["fraction"] && (*fraction <= 0 || *fraction > 1 || math.IsNaN(*fraction)):
		return usagef("--fraction must be above 0 and at most 1")
	case *minAgreement < 0 || *minAgreement > 1 || math.IsNaN(*minAgreement):
		return usagef("--min-agreement must be between 0 and 1")
	case *concurrency < 1:
		return usagef("--concurrency must be at least 1")
	}
	if err := resolveWorkDirs(&wf, true); err != nil {
		return err
	}
	st, m, err := openDataset(ctx, url)
	if err != nil {
		return err
	}
	defer st.Close()
	fetcher, closeFetcher, err := crawl.NewFetcher(ctx)
	if err != nil {
		return err
	}
	defer closeFetcher()
	pool := execute.NewSandboxPool(sandbox.Config{Backend: *backend, Python: *python, Limits: sandbox.DefaultLimits}, *concurrency)
	defer pool.Close()
	// The tracer the pipeline's workers use: repositories are checked out into the scratch folder,
	// their environments come from the dataset's cache (or are built again).
	trc := &execute.Tracer{Sandboxes: pool, Fetcher: fetcher, Scratch: wf.scratch, EnvCache: wf.envs, Store: st}
	opts := verify.Options{Sample: *sample, Seed: *seed, MinAgreement: *minAgreement, Tracer: trc,
		Fetcher: fetcher, Tokenizers: tokenize.Get, Concurrency: *concurrency}
	if set["fraction"] {
		opts.Fraction = *fraction
	}
	if *minAgreement == 0 {
		opts.MinAgreement = verify.NoMinAgreement
	}
	if *replay {
		opts.Replayer = verifyReplayer(trc)
	}
	// Progress on stderr: a line at most every 5 s (a repository takes a while), and the last.
	var last time.Time
	opts.Progress = func(done, total int) {
		if now := time.Now(); now.Sub(last) >= 5*time.Second || done == total {
			last = now
			fmt.Fprintf(stderr, "verify: %d/%d rows checked\n", done, total)
		}
	}
	v, err := verify.Run(ctx, st, m, opts)
	if err != nil {
		return err
	}
	key, err := verify.Write(ctx, st, m, v)
	if err != nil {
		return err
	}
	if *asJSON {
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if _, err := stdout.Write(terminalJSON(stdout, append(data, '\n'))); err != nil {
			return err
		}
	} else {
		printVerification(stdout, url, v)
		fmt.Fprintf(stdout, "certificate: %s (%.1f s)\n", termsafe.String(key), v.Seconds)
	}
	return verifyVerdict(v)
}

// verifyReplayer is the replayer on bdb of trc, when this ndtrace's tracer has one (nil otherwise:
// replay is then counted as not run). Tests replace it.
var verifyReplayer = func(trc *execute.Tracer) execute.RowReplayer {
	if r, ok := any(trc).(execute.RowReplayer); ok {
		return r
	}
	return nil
}

// verifyVerdict is nil when v passed, else the one-line reason it did not.
func verifyVerdict(v *schemas.Verification) error {
	switch {
	case v.Passed:
		return nil
	case v.Checked == 0:
		return fmt.Errorf("no row could be re-executed (%d drawn; not re-executed: %s)", v.Sample.Size, fmtIntCounts(v.NotReExecuted))
	}
	return fmt.Errorf("agreement %s (%d of %d rows re-executed) is below --min-agreement %s; differences: %s",
		numfmt.RatioPercent(v.Agreement), v.Agreed, v.Checked, numfmt.RatioPercent(v.MinAgreement), fmtIntCounts(v.Differences))
}

// fmtIntCounts formats counts as "k=v k=v" in key order ("none" if empty), escaped for a terminal.
func fmtIntCounts(counts map[string]int) string {
	return termsafe.String(numfmt.Counts(counts, "none"))
}

// printVerification prints a certificate as the verify report (also the Verification section of
// ndtrace stats). Its text (versions, row IDs, the details of differences, which quote traced
// values) is escaped for a terminal.
func printVerification(w io.Writer, url string, v *schemas.Verification) {
	version := v.Version
	if version == "" {
		version = v.DatasetCreatedAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	fmt.Fprintf(w, "verified %s (version %s) on %s: %s of %s rows drawn (seed %d, %d strata of level, direction and shard)\n",
		termsafe.String(url), termsafe.String(version), v.StartedAt.UTC().Format("2006-01-02 15:04:05Z"), numfmt.Thousands(int64(v.Sample.Size)), numfmt.Thousands(v.Rows), v.Sample.Seed, v.Sample.Strata)
	verdict := "PASSED"
	if !v.Passed {
		verdict = "FAILED"
	}
	tw := statsTable(w)
	fmt.Fprintln(tw, "check\trows\tagreed\tagreement\tdifferences\tnot run\t")
	fmt.Fprintf(tw, "re-execution\t%s\t%s\t%s\t%s\t%s\t\n", numfmt.Thousands(int64(v.Checked)), numfmt.Thousands(int64(v.Agreed)),
		numfmt.RatioPercent(v.Agreement), fmtIntCounts(v.Differences), fmtIntCounts(v.NotReExecuted))
	ra := "-"
	if v.Replay.Run > 0 {
		ra = numfmt.RatioPercent(float64(v.Replay.Agreed) / float64(v.Replay.Run))
	}
	fmt.Fprintf(tw, "replay on bdb\t%s\t%s\t%s\t%s\t%s\t\n", numfmt.Thousands(int64(v.Replay.Run)), numfmt.Thousands(int64(v.Replay.Agreed)),
		ra, fmtIntCounts(v.Replay.Differences), fmtIntCounts(v.Replay.NotReplayed))
	tw.Flush()
	fmt.Fprintf(w, "%s: minimum agreement %s; verified by tracer %s, pipeline %s (dataset made by tracer %s, pipeline %s)\n",
		verdict, numfmt.RatioPercent(v.MinAgreement), termsafe.String(v.Verifier.Tracer), termsafe.String(v.Verifier.Pipeline),
		termsafe.String(v.DatasetVersions.Tracer), termsafe.String(v.DatasetVersions.Pipeline))
	for _, e := range v.Examples {
		fmt.Fprintf(w, "difference: row %s (%s, %s): %s\n", termsafe.String(e.RowID), termsafe.String(e.Check),
			termsafe.String(e.Kind), termsafe.String(e.Detail))
	}
}
