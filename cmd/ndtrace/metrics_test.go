package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

// TestWorkerMetrics runs a worker with --metrics-addr and --log-format json against an embedded
// cluster, produces the built-in examples through it, and scrapes /metrics: ndtrace's counters and
// the Temporal SDK's metrics are there, in a format Prometheus parses, and the logs are JSON.
func TestWorkerMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("a worker against an embedded cluster: long integration test; run without -short")
	}
	srv, _ := testCluster(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var werr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runWorker(ctx, []string{"--temporal", srv.Addr(), "--metrics-addr", addr, "--log-format", "json"}, io.Discard, &werr)
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	defer stop()
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
