package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/internal/gencorpus"
)

// benchBinary builds ndtrace from this checkout once per test binary and returns its path.
var benchBinary = sync.OnceValues(func() (string, error) { return buildBenchBinary() })

// benchWorkerBinary builds the worker binary (-tags worker, as deploy/Dockerfile builds it: no
// embedded Temporal server) from this checkout once per test binary and returns its path.
var benchWorkerBinary = sync.OnceValues(func() (string, error) { return buildBenchBinary("-tags", "worker") })

// buildBenchBinary builds ndtrace from this checkout with the extra go build flags into a new
// temporary folder.
func buildBenchBinary(flags ...string) (string, error) {
	dir, err := os.MkdirTemp("", "ndtrace-bench-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ndtrace")
	args := append(append([]string{"build"}, flags...), "-o", bin, ".")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v: %s", strings.Join(flags, " "), err, out)
	}
	return bin, nil
}

// runBinary runs the ndtrace binary with args as a child process and returns its wall time and
// peak RSS in bytes (the child's own maximum resident set; the sandbox's processes are separate
// children of it and not counted).
func runBinary(b *testing.B, args ...string) (time.Duration, int64) {
	b.Helper()
	bin, err := benchBinary()
	if err != nil {
		b.Fatal(err)
	}
	return runBinaryAt(b, bin, args...)
}

// runBinaryAt is runBinary for the binary at bin.
func runBinaryAt(b *testing.B, bin string, args ...string) (time.Duration, int64) {
	b.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("ndtrace %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	wall := time.Since(t0)
	return wall, maxRSS(b, cmd.ProcessState)
}

// maxRSS is the peak RSS in bytes of an ended child process.
func maxRSS(b *testing.B, ps *os.ProcessState) int64 {
	b.Helper()
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		b.Fatal("no rusage")
	}
	return ru.Maxrss << 10 // Linux reports kilobytes
}

// serverChild runs `ndtrace server` (the full binary, no Web UI) on a database in dir as a child
// process and returns its frontend's address once it is ready, and a stop that interrupts it, as
// Ctrl-C does, and returns its peak RSS in bytes.
func serverChild(b *testing.B, dir string) (addr string, stop func() int64) {
	b.Helper()
	bin, err := benchBinary()
	if err != nil {
		b.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "server", "--headless", "--port", fmt.Sprint(port), "--db", filepath.Join(dir, "server.db"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	ready := false
	for !ready && sc.Scan() {
		ready = strings.Contains(sc.Text(), "starts a dataset")
	}
	if !ready {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.Fatalf("ndtrace server did not start: %s", stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	stopped := false
	b.Cleanup(func() { // a benchmark that failed before stopping it leaves no server behind
		if !stopped {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return fmt.Sprintf("127.0.0.1:%d", port), func() int64 {
		stopped = true
		_ = cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			b.Errorf("ndtrace server: %v: %s", err, stderr.String())
		}
		return maxRSS(b, cmd.ProcessState)
	}
}

// bigCallSource is a CPU-bound function whose call f(76000) makes about 305,000 trace events.
const bigCallSource = gencorpus.LoopWorkload

// BenchmarkPipelinePeakRSS runs one CPU-bound call of about 305,000 events (issue 14) through the
// whole pipeline (`ndtrace run --spec`, built from this checkout, as a child process: embedded
// Temporal, sandbox, trees in both directions, tokens, Parquet) and reports its peak RSS, with
// that of a one-event call of the same function measured in the same run as the baseline (the
// binary, the embedded server and the tokenizer). Both run as `ndtrace run` runs by default, on
// an in-memory Temporal; the big call also runs with --db (a database that outlives the run, for
// which the embedded server also runs its worker service: Schedules, scavengers), reported apart.
// The big call runs a third time as a cluster runs it: the worker binary (-tags worker, as
// deploy/Dockerfile builds it) with --temporal against `ndtrace server` in another process; the
// two processes' peaks are reported apart (worker-peak-RSS-MiB, server-peak-RSS-MiB: the server's
// over all iterations). Run with -benchtime=1x.
func BenchmarkPipelinePeakRSS(b *testing.B) {
	dir := b.TempDir()
	spec := func(name, input string) string {
		corpus := filepath.Join(dir, name+".jsonl")
		row, _ := json.Marshal(map[string]string{"id": name, "code": bigCallSource, "input": input, "output": ""})
		if err := os.WriteFile(corpus, append(row, '\n'), 0o644); err != nil {
			b.Fatal(err)
		}
		p := filepath.Join(dir, name+".yaml")
		body := fmt.Sprintf("name: %s\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\ncreated_at: 2026-11-22T00:00:00Z\nlimits:\n  timeout: 120s\n  max_events: 1000000\n",
			name, filepath.Join(dir, name+"-data-%d"), corpus)
		return p + "\x00" + body
	}
	workerBin, err := benchWorkerBinary()
	if err != nil {
		b.Fatal(err)
	}
	temporal, stopServer := serverChild(b, dir)
	var bigWall, dbWall, workerWall time.Duration
	var bigPeak, smallPeak, dbPeak, workerPeak int64
	for i := 0; i < b.N; i++ {
		for _, s := range []struct {
			name, input string
			db, worker  bool
			peak        *int64
			wall        *time.Duration
		}{{"small", "1", false, false, &smallPeak, nil}, {"big", "76000", false, false, &bigPeak, &bigWall},
			{"bigdb", "76000", true, false, &dbPeak, &dbWall}, {"bigworker", "76000", false, true, &workerPeak, &workerWall}} {
			p, body, _ := strings.Cut(spec(s.name, s.input), "\x00")
			if err := os.WriteFile(p, []byte(fmt.Sprintf(body, i)), 0o644); err != nil {
				b.Fatal(err)
			}
			args := []string{"run", "--spec", p}
			if s.db {
				args = append(args, "--db", filepath.Join(dir, fmt.Sprintf("%s-%d.db", s.name, i)))
			}
			var wall time.Duration
			var peak int64
			if s.worker {
				wall, peak = runBinaryAt(b, workerBin, append(args, "--temporal", temporal)...)
			} else {
				wall, peak = runBinary(b, args...)
			}
			*s.peak = max(*s.peak, peak)
			if s.wall != nil {
				*s.wall += wall
			}
			m := benchManifest(b, filepath.Join(dir, fmt.Sprintf("%s-data-%d", s.name, i)))
			if m.Totals.Rows == 0 {
				b.Fatalf("%s: no rows", s.name)
			}
		}
	}
	b.ReportMetric(float64(bigPeak)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(smallPeak)/(1<<20), "baseline-RSS-MiB")
	b.ReportMetric(bigWall.Seconds()/float64(b.N), "wall-s")
	b.ReportMetric(float64(dbPeak)/(1<<20), "db-peak-RSS-MiB")
	b.ReportMetric(dbWall.Seconds()/float64(b.N), "db-wall-s")
	b.ReportMetric(float64(workerPeak)/(1<<20), "worker-peak-RSS-MiB")
	b.ReportMetric(workerWall.Seconds()/float64(b.N), "worker-wall-s")
	b.ReportMetric(float64(stopServer())/(1<<20), "server-peak-RSS-MiB")
}

// naiveCorpusTracer is the baseline BenchmarkPipelineCorpus measures against: sys.settrace, every local
// repr'd at every event, one JSON line per event, over the calls of a CruxEval-format corpus:
// python3 naive.py CORPUS OUT [K] traces every call, or only the K-th (0-based) with K.
const naiveCorpusTracer = `import json, sys
out = open(sys.argv[2], "a")
only = int(sys.argv[3]) if len(sys.argv) > 3 else -1
def tracer(frame, event, arg):
    if frame.f_code.co_filename != "<item>":
        return tracer
    loc = {}
    for k, v in frame.f_locals.items():
        try:
            loc[k] = repr(v)
        except Exception as e:
            loc[k] = "<repr failed>"
    out.write(json.dumps({"event": event, "func": frame.f_code.co_qualname, "lineno": frame.f_lineno, "locals": loc}) + "\n")
    return tracer
for k, line in enumerate(open(sys.argv[1])):
    if only >= 0 and k != only:
        continue
    row = json.loads(line)
    g = {"__name__": "item"}
    try:
        exec(compile(row["code"], "<item>", "exec"), g)
        call = compile("f(" + row["input"] + ")", "<item>", "eval")
        sys.settrace(tracer)
        try:
            eval(call, g)
        finally:
            sys.settrace(None)
    except Exception:
        pass
out.close()
`

// BenchmarkPipelineCorpus runs the CruxEval corpus (800 small calls) through the whole pipeline
// (`ndtrace run --spec` as a child process: embedded Temporal, sandboxes, trees in both
// directions, tokens, Parquet) and, in the same run, the naive tracer above over the same calls
// with /usr/bin/python3, each call in a fresh interpreter, one after the other (naive-s: the
// isolation the pipeline gives every item, without a sandbox), and all calls in one interpreter
// (naive-1proc-s, for scale: no isolation at all). It reports the wall times, the ratio
// pipeline-s / naive-s (the target is <= 0.25 on 2 cores) and the pipeline's tokens per second per
// core. The pipeline runs as `ndtrace run` runs by default, on an in-memory Temporal; with --db
// (the embedded server's worker service started and stopped besides) it is reported apart
// (pipeline-db-s, db-ratio). Run with -benchtime=1x or more.
func BenchmarkPipelineCorpus(b *testing.B) {
	corpus := cruxeval.Path(b)
	dir := b.TempDir()
	script := filepath.Join(dir, "naive.py")
	if err := os.WriteFile(script, []byte(naiveCorpusTracer), 0o644); err != nil {
		b.Fatal(err)
	}
	calls := len(cruxeval.Rows(b))
	var pipe, pipeDB, naive, naive1 time.Duration
	var tokens int64
	var naiveLines int
	for i := 0; i < b.N; i++ {
		events := filepath.Join(dir, fmt.Sprintf("naive-%d.jsonl", i))
		t0 := time.Now()
		for k := 0; k < calls; k++ {
			if out, err := exec.Command("/usr/bin/python3", script, corpus, events, fmt.Sprint(k)).CombinedOutput(); err != nil {
				b.Fatalf("naive tracer, call %d: %v: %s", k, err, out)
			}
		}
		naive += time.Since(t0)
		naiveLines = countLines(b, events)
		events1 := filepath.Join(dir, fmt.Sprintf("naive1-%d.jsonl", i))
		t0 = time.Now()
		if out, err := exec.Command("/usr/bin/python3", script, corpus, events1).CombinedOutput(); err != nil {
			b.Fatalf("naive tracer: %v: %s", err, out)
		}
		naive1 += time.Since(t0)
		if n := countLines(b, events1); n != naiveLines {
			b.Fatalf("naive tracer: %d events in one interpreter, %d in one per call", n, naiveLines)
		}

		out := filepath.Join(dir, fmt.Sprintf("data-%d", i))
		spec := filepath.Join(dir, fmt.Sprintf("spec-%d.yaml", i))
		body := fmt.Sprintf("name: corpus\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\nparallelism: 2\ncreated_at: 2026-11-22T00:00:00Z\n", out, corpus)
		if err := os.WriteFile(spec, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
		wall, _ := runBinary(b, "run", "--spec", spec)
		pipe += wall
		tokens += benchManifest(b, out).Totals.Tokens
		if err := os.RemoveAll(out); err != nil {
			b.Fatal(err)
		}
		wall, _ = runBinary(b, "run", "--spec", spec, "--db", filepath.Join(dir, fmt.Sprintf("t-%d.db", i)))
		pipeDB += wall
	}
	n := float64(b.N)
	b.ReportMetric(pipe.Seconds()/n, "pipeline-s")
	b.ReportMetric(naive.Seconds()/n, "naive-s")
	b.ReportMetric(naive1.Seconds()/n, "naive-1proc-s")
	b.ReportMetric(pipe.Seconds()/naive.Seconds(), "ratio")
	b.ReportMetric(pipeDB.Seconds()/n, "pipeline-db-s")
	b.ReportMetric(pipeDB.Seconds()/naive.Seconds(), "db-ratio")
	b.ReportMetric(float64(tokens)/pipe.Seconds()/float64(runtime.NumCPU()), "tokens/s/core")
	b.ReportMetric(float64(naiveLines), "naive-events")
}

// countLines counts the lines of a file.
func countLines(b *testing.B, path string) int {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		n++
	}
	return n
}
