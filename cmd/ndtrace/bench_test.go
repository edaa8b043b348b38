package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/internal/gencorpus"
	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/sandbox"
)

// BenchmarkEndToEnd runs CruxEval through the whole pipeline (embedded Temporal, one worker with one
// sandbox, trajectories in both directions, cl100k_base, Parquet) and, in the same run, traces the
// same 800 items with one sandbox alone. It reports trajectories/s and tokens/s of the pipeline
// and the pipeline's overhead over tracing alone.
func BenchmarkEndToEnd(b *testing.B) {
	rows := cruxeval.Rows(b)
	ctx := context.Background()
	var traceTime, pipeTime time.Duration
	var trajectories, tokens int64
	for i := 0; i < b.N; i++ {
		// The tracer alone.
		sb, err := sandbox.New(ctx, sandbox.Config{})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		for _, r := range rows {
			if _, err := sb.Run(ctx, sandbox.Request{Code: r.Code, Call: sandbox.CallFromInput("f", r.Input)}); err != nil {
				b.Fatal(err)
			}
		}
		traceTime += time.Since(t0)
		sb.Close()

		// The pipeline.
		dir := b.TempDir()
		out := filepath.Join(dir, "data")
		spec := writeSpec(&testing.T{}, dir, fmt.Sprintf("name: bench\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\nbatch_size: 100\nparallelism: 2\ncreated_at: 2026-11-22T00:00:00Z\n", out, cruxeval.Path(b)))
		var stdout, stderr bytes.Buffer
		t0 = time.Now()
		if code := run([]string{"run", "--spec", spec, "--trace-concurrency", "1"}, &stdout, &stderr); code != 0 {
			b.Fatalf("run: %s", stderr.String())
		}
		pipeTime += time.Since(t0)
		m := benchManifest(b, out)
		trajectories += m.Totals.Rows
		tokens += m.Totals.Tokens
	}
	b.ReportMetric(float64(trajectories)/pipeTime.Seconds(), "trajectories/s")
	b.ReportMetric(float64(tokens)/pipeTime.Seconds(), "tokens/s")
	b.ReportMetric(traceTime.Seconds()/float64(b.N), "trace-only-s")
	b.ReportMetric(pipeTime.Seconds()/float64(b.N), "pipeline-s")
	b.ReportMetric(100*(pipeTime.Seconds()-traceTime.Seconds())/traceTime.Seconds(), "overhead-%")
}

// writeBenchRepoList serves the fixture repositories of the repository benchmarks as local git
// repositories and writes their URLs, one a line, to dir/repos.txt; it returns their names and the
// list's path.
func writeBenchRepoList(b *testing.B, dir string) ([]string, string) {
	names := []string{"passing", "failing", "forking", "unittest_only", "trace_sensitive"}
	var list strings.Builder
	for _, name := range names {
		url, _ := testrepos.Git(b, name)
		fmt.Fprintf(&list, "%s\n", url)
	}
	listPath := filepath.Join(dir, "repos.txt")
	if err := os.WriteFile(listPath, []byte(list.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return names, listPath
}

// BenchmarkRepositories runs the fixture repositories (served as local git repositories) through
// the whole pipeline with one worker (two sandboxes): checkout, each test run untraced and traced,
// repository-level trajectories and the function-level items found in them. It reports
// repositories per hour, and trajectories and tests per repository.
func BenchmarkRepositories(b *testing.B) {
	dir := b.TempDir()
	names, listPath := writeBenchRepoList(b, dir)
	var elapsed time.Duration
	var rows, tests int64
	for i := 0; i < b.N; i++ {
		out := filepath.Join(dir, fmt.Sprintf("data-%d", i))
		spec := writeSpec(&testing.T{}, dir, fmt.Sprintf("name: bench-repos\noutput: %s\nsources:\n  - kind: repository\n    list: %s\n    trust_list: true\ncreated_at: 2026-11-22T00:00:00Z\n", out, listPath))
		var stdout, stderr bytes.Buffer
		t0 := time.Now()
		if code := run([]string{"run", "--spec", spec}, &stdout, &stderr); code != 0 {
			b.Fatalf("run: %s", stderr.String())
		}
		elapsed += time.Since(t0)
		m := benchManifest(b, out)
		rows += m.Totals.Rows
		tests += m.Counts["tests_run"]
	}
	repos := float64(len(names) * b.N)
	b.ReportMetric(repos/elapsed.Hours(), "repos/hour")
	b.ReportMetric(float64(rows)/repos, "trajectories/repo")
	b.ReportMetric(float64(tests)/repos, "tests/repo")
}

// benchManifest reads the manifest of the dataset at url.
func benchManifest(b *testing.B, url string) *dataset.Manifest {
	b.Helper()
	_, m := openHead(b, url)
	return m
}

// BenchmarkScale runs generated corpora (internal/gencorpus; made here, not committed) of
// different sizes through the whole pipeline (embedded Temporal, one worker, trajectories in both
// directions) and reports items/s and the process's peak RSS for each size: the orchestration's
// cost per item must not grow with the dataset. Sizes: NDTRACE_BENCH_SCALE (comma-separated),
// default 2500,25000. Run with -benchtime=1x.
func BenchmarkScale(b *testing.B) {
	sizes := []int{2500, 25000}
	if v := os.Getenv("NDTRACE_BENCH_SCALE"); v != "" {
		sizes = sizes[:0]
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				b.Fatalf("NDTRACE_BENCH_SCALE: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			corpus := filepath.Join(dir, "corpus.jsonl")
			f, err := os.Create(corpus)
			if err != nil {
				b.Fatal(err)
			}
			if err := gencorpus.Write(f, n, 7); err != nil {
				b.Fatal(err)
			}
			f.Close()
			var elapsed time.Duration
			var peak int64
			for i := 0; i < b.N; i++ {
				out := filepath.Join(dir, fmt.Sprintf("data-%d", i))
				spec := writeSpec(&testing.T{}, dir, fmt.Sprintf("name: scale\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\nbatch_size: 64\nparallelism: 4\ncreated_at: 2026-11-24T00:00:00Z\n", out, corpus))
				resetPeakRSS()
				var stdout, stderr bytes.Buffer
				t0 := time.Now()
				if code := run([]string{"run", "--spec", spec, "--db", filepath.Join(dir, fmt.Sprintf("t-%d.db", i))}, &stdout, &stderr); code != 0 {
					b.Fatalf("run: %s", stderr.String())
				}
				elapsed += time.Since(t0)
				peak = max(peak, peakRSS())
				if m := benchManifest(b, out); m.Counts["items"] != int64(n) {
					b.Fatalf("%d items in the manifest, want %d", m.Counts["items"], n)
				}
			}
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "items/s")
			b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
		})
	}
}

// resetPeakRSS resets the process's peak RSS (VmHWM) where the kernel allows it.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS returns the process's peak RSS in bytes (VmHWM), or 0 if unknown.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// traceCLIWorkload is BenchmarkTraceCLI's program: a CPU-bound call with a long trace (f(60000):
// 240,005 events) and no growing container, so that the naive tracer is not quadratic.
const traceCLIWorkload = gencorpus.LoopWorkload

// naiveTracer is BenchmarkTraceCLI's baseline, our own code run outside any sandbox: sys.settrace,
// every local repr'd at every event, one JSON line per event through json.dumps.
const naiveTracer = `import json, sys
path, call = sys.argv[1], sys.argv[2]
g = {"__name__": "__main__"}
exec(compile(open(path).read(), path, "exec"), g)
out, dumps = sys.stdout, json.dumps
def trace(frame, event, arg):
    code = frame.f_code
    out.write(dumps({"event": event, "func": code.co_qualname, "file": code.co_filename,
                     "lineno": frame.f_lineno,
                     "locals": {k: repr(v) for k, v in frame.f_locals.items()}}) + "\n")
    return trace
sys.settrace(trace)
eval(call, g)
sys.settrace(None)
`

// BenchmarkTraceCLI times the whole of ndtrace trace (run in process: sandbox start-up, tracing,
// decoding, JSON Lines to a file) against the naive tracer (naiveTracer, run by the same
// /usr/bin/python3 without a sandbox, its lines to a file) on the same call, alternating the two
// in each iteration. It reports both wall times per run and their ratio (target: <= 0.5).
func BenchmarkTraceCLI(b *testing.B) {
	dir := b.TempDir()
	code := filepath.Join(dir, "work.py")
	naive := filepath.Join(dir, "naive.py")
	if err := os.WriteFile(code, []byte(traceCLIWorkload), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(naive, []byte(naiveTracer), 0o644); err != nil {
		b.Fatal(err)
	}
	const call = "f(60000)"
	var naiveTime, cliTime time.Duration
	var naiveBytes, cliBytes int64
	for i := 0; i < b.N; i++ {
		out, err := os.Create(filepath.Join(dir, "naive.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command("/usr/bin/python3", naive, code, call)
		cmd.Stdout = out
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("naive tracer: %v", err)
		}
		naiveTime += time.Since(t0)
		st, _ := out.Stat()
		naiveBytes = st.Size()
		out.Close()

		out, err = os.Create(filepath.Join(dir, "ndtrace.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		var stderr bytes.Buffer
		t0 = time.Now()
		rc := run([]string{"trace", "--code", code, "--call", call, "--max-events", "1000000", "--timeout", "60s"}, out, &stderr)
		cliTime += time.Since(t0)
		if rc != 0 {
			b.Fatalf("ndtrace trace: %s", stderr.String())
		}
		st, _ = out.Stat()
		cliBytes = st.Size()
		out.Close()
	}
	b.ReportMetric(naiveTime.Seconds()/float64(b.N), "naive-s")
	b.ReportMetric(cliTime.Seconds()/float64(b.N), "ndtrace-s")
	b.ReportMetric(cliTime.Seconds()/naiveTime.Seconds(), "ratio")
	b.ReportMetric(float64(naiveBytes)/1e6, "naive-MB")
	b.ReportMetric(float64(cliBytes)/1e6, "ndtrace-MB")
}
