package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/ndtrace/ndtrace/activities"
	"github.com/ndtrace/ndtrace/internal/metrics/metricstest"
	"github.com/ndtrace/ndtrace/schemas"
)

// startMetricsWorker starts an embedded cluster and a worker against it that serves /metrics on a
// free loopback port, with args added to its flags and its log written to logs. It returns the
// cluster, the metrics address ("127.0.0.1:PORT") and stop, which cancels the worker and waits for
// it to return; stop may be called more than once, and is called when the test ends.
func startMetricsWorker(t *testing.T, logs io.Writer, args ...string) (srv *embeddedServer, addr string, stop func()) {
	t.Helper()
	srv, _ = testCluster(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runWorker(ctx, append([]string{"--temporal", srv.Addr(), "--metrics-addr", addr}, args...), io.Discard, logs)
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return srv, addr, stop
}

// TestWorkerMetrics runs a worker with --metrics-addr and --log-format json against an embedded
// cluster, produces the built-in examples through it, and scrapes /metrics: ndtrace's counters and
// the Temporal SDK's metrics are there, in a format Prometheus parses, and the logs are JSON.
func TestWorkerMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("a worker against an embedded cluster: long integration test; run without -short")
	}
	var werr bytes.Buffer
	srv, addr, stop := startMetricsWorker(t, &werr, "--log-format", "json")
	out := filepath.Join(t.TempDir(), "data")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--temporal", srv.Addr(), "--no-worker", "--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr.String())
	}
	var text string
	for i := 0; i < 50; i++ {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			text = string(b)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("Prometheus cannot parse /metrics: %v\n%s", err, text)
	}
	sum := func(name string) float64 {
		var s float64
		for _, m := range fams[name].GetMetric() {
			s += m.GetCounter().GetValue()
		}
		return s
	}
	for name, min := range map[string]float64{
		"ndtrace_items_traced_total": 9, // 8 functions and the example repository
		"ndtrace_trajectories_total": 40,
		"ndtrace_tokens_total":       1000,
		"ndtrace_tests_run_total":    6,
	} {
		if got := sum(name); got < min {
			t.Errorf("%s = %v, want at least %v", name, got, min)
		}
	}
	temporal := 0
	for name := range fams {
		if strings.HasPrefix(name, "temporal_") {
			temporal++
		}
	}
	if temporal == 0 {
		t.Errorf("no Temporal SDK metrics in:\n%s", text)
	}
	stop() // the worker's log buffer is read only once it has stopped
	for _, line := range strings.Split(strings.TrimSpace(werr.String()), "\n") {
		if !strings.HasPrefix(line, `{"time":`) {
			t.Errorf("a worker log line is not JSON: %q", line)
		}
	}
	if !strings.Contains(werr.String(), `"msg":"worker started"`) {
		t.Errorf("no start-up log: %s", werr.String())
	}
}

// TestWorkerMetricsComplete scrapes a worker's /metrics before it has done anything, then after a
// run of a corpus with malformed lines, a duplicate and code that does not compile: every counter
// is there at zero from the start (each reject class, each kill status, each level), the Go and
// process collectors are on, and the rejects counted by class are the manifest's, planning's
// included.
func TestWorkerMetricsComplete(t *testing.T) {
	if testing.Short() {
		t.Skip("a worker against an embedded cluster: long integration test; run without -short")
	}
	srv, addr, stop := startMetricsWorker(t, io.Discard)
	defer stop() // before the test's temporary directories go
	scrape := func() map[string]*dto.MetricFamily {
		t.Helper()
		var text string
		waitFor(t, "/metrics", func() bool {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			text = string(b)
			return resp.StatusCode == http.StatusOK
		})
		var p expfmt.TextParser
		fams, err := p.TextToMetricFamilies(strings.NewReader(text))
		if err != nil {
			t.Fatalf("Prometheus cannot parse /metrics: %v\n%s", err, text)
		}
		return fams
	}
	series := func(fams map[string]*dto.MetricFamily, name, label string) map[string]float64 {
		out := map[string]float64{}
		for _, m := range fams[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
		return out
	}

	// Before any work.
	fams := scrape()
	rejects := series(fams, "ndtrace_rejects_total", "reason")
	for _, c := range activities.RejectClasses() {
		if v, ok := rejects[string(c)]; !ok || v != 0 {
			t.Errorf("ndtrace_rejects_total{reason=%q} = %v, %v at the start; want 0", c, v, ok)
		}
	}
	kills := series(fams, "ndtrace_sandbox_kills_total", "status")
	for _, s := range []string{"timeout", "memory", "output_limit", "event_limit", "killed", "tampered"} {
		if v, ok := kills[s]; !ok || v != 0 {
			t.Errorf("ndtrace_sandbox_kills_total{status=%q} = %v, %v at the start; want 0", s, v, ok)
		}
	}
	if lv := series(fams, "ndtrace_items_traced_total", "level"); len(lv) != 2 {
		t.Errorf("ndtrace_items_traced_total at the start: %v; want function and repository at 0", lv)
	}
	for _, name := range []string{"ndtrace_tokens_total", "ndtrace_tests_run_total", "ndtrace_tests_quarantined_total", "ndtrace_trajectories_total", "ndtrace_trace_seconds",
		"go_goroutines", "go_memstats_heap_alloc_bytes", "go_gc_duration_seconds", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		if fams[name] == nil {
			t.Errorf("no %s at the start", name)
		}
	}

	// A run whose rejects come from every stage: scanning (malformed), forming (duplicate),
	// building rows (invalid).
	dir := t.TempDir()
	corpus := writeFile(t, "corpus.jsonl", strings.Join([]string{
		`{"id":"a","code":"def f(x):\n    return x + 1","input":"1"}`,
		`{"id":"b","code":"def f(x):\n    return [x] * 2","input":"3"}`,
		`{"id":"a2","code":"def f(x):\n    return x + 1","input":"1"}`,
		`not json at all`,
		`{"id":"nocode","input":"1"}`,
		`{"id":"syntax","code":"def f(x) return","input":"1"}`,
	}, "\n")+"\n")
	out := filepath.Join(dir, "data")
	spec := writeSpec(t, dir, fmt.Sprintf("name: metrics\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\ncreated_at: 2026-11-28T00:00:00Z\n", out, corpus))
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--spec", spec, "--temporal", srv.Addr(), "--no-worker"}, &stdout, &stderr); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr.String())
	}
	_, m := openHead(t, out)
	rejects = series(scrape(), "ndtrace_rejects_total", "reason")
	var total float64
	for c, v := range rejects {
		total += v
		if want := m.Counts[schemas.CountRejectClass(schemas.RejectClass(c))]; v != float64(want) {
			t.Errorf("ndtrace_rejects_total{reason=%q} = %v; the manifest counts %d", c, v, want)
		}
	}
	t.Logf("rejects by class: %v; manifest: %v", rejects, m.Counts)
	if total != float64(m.Counts[schemas.CountRejects]) || rejects["malformed"] != 2 || rejects["duplicate"] != 1 || total < 4 {
		t.Errorf("%v rejects in the metrics (%v), %d in the manifest; want 2 malformed, 1 duplicate and one that does not compile",
			total, rejects, m.Counts[schemas.CountRejects])
	}
}

// TestServerWorkerMetrics: ndtrace server --worker --metrics-addr serves its worker's metrics (the
// flag was accepted and ignored before).
func TestServerWorkerMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("ndtrace server with a worker: long integration test; run without -short")
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	mport, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", mport)
	startServer(t, "--db", filepath.Join(t.TempDir(), "temporal.db"), "--port", fmt.Sprint(port), "--headless",
		"--worker", "--trace-concurrency", "1", "--metrics-addr", addr)
	fams := metricstest.Scrape(t, "http://"+addr+"/metrics")
	for _, name := range []string{"ndtrace_rejects_total", "ndtrace_items_traced_total", "go_goroutines", "process_cpu_seconds_total"} {
		if fams[name] == nil {
			t.Errorf("no %s on the server's worker's /metrics", name)
		}
	}
}
