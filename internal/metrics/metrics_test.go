package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/ndtrace/ndtrace/internal/metrics/metricstest"
)

// serve serves r on a loopback HTTP server, closed when the test ends, and returns its URL.
func serve(t *testing.T, r *Registry) string {
	t.Helper()
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestRegistryText(t *testing.T) {
	r := New()
	r.Counter("ndtrace_traces_total", "Items traced.", nil).Add(3)
	r.Counter("ndtrace_rejects_total", "Rejects by reason.", Labels{"reason": `say "hi"\n`}).Inc()
	r.Counter("ndtrace_rejects_total", "", Labels{"reason": "timeout"}).Add(2)
	r.Counter("ndtrace_rejects_total", "", Labels{"reason": "timeout"}).Add(-5) // ignored
	// Series of one metric with different label names, as the Temporal SDK records them.
	r.Counter("temporal_request", "", Labels{"namespace": "default"}).Inc()
	r.Counter("temporal_request", "", Labels{"namespace": "default", "operation": "Poll"}).Inc()
	r.Gauge("temporal.worker-slots", "", Labels{"task_queue": "q"}).Set(4)
	h := r.Histogram("ndtrace_trace_seconds", "Time to trace one item.", nil)
	h.ObserveDuration(3 * time.Millisecond)
	h.Observe(0.2)
	h.Observe(1e6)
	var nilReg *Registry
	nilReg.Counter("x", "", nil).Inc() // no panic

	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("the official parser rejects the output: %v\n%s", err, text)
	}
	checks := map[string]float64{"ndtrace_traces_total": 3}
	for name, want := range checks {
		if got := fams[name].GetMetric()[0].GetCounter().GetValue(); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if n := len(fams["ndtrace_rejects_total"].GetMetric()); n != 2 {
		t.Errorf("%d reject series, want 2", n)
	}
	if g := fams["temporal_worker_slots"]; g == nil || g.GetMetric()[0].GetGauge().GetValue() != 4 {
		t.Errorf("sanitized gauge: %v", g)
	}
	hist := fams["ndtrace_trace_seconds"].GetMetric()[0].GetHistogram()
	if hist.GetSampleCount() != 3 || hist.GetBucket()[1].GetCumulativeCount() != 1 {
		t.Errorf("histogram %v", hist)
	}
	if r.Value("ndtrace_rejects_total", Labels{"reason": "timeout"}) != 2 {
		t.Error("Value")
	}
	var again strings.Builder
	r.WriteText(&again)
	if again.String() != text {
		t.Error("two scrapes of the same state differ")
	}

	resp, err := http.Get(serve(t, r) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q", ct)
	}
}

// TestServedFromTheStart: a series is on /metrics at zero from the moment it is declared, before
// any event, and the Go runtime's and the process's collectors are served beside the registry's
// metrics (which WriteText leaves out, its output staying deterministic).
func TestServedFromTheStart(t *testing.T) {
	r := New()
	r.Counter("ndtrace_rejects_total", "Rejects.", Labels{"reason": "malformed"})
	r.Counter("ndtrace_rejects_total", "", Labels{"reason": "timeout"})
	r.Histogram("ndtrace_trace_seconds", "Time.", Labels{"level": "function"})
	r.Gauge("temporal_slots", "", nil)
	r.Counter("temporal_slots", "", nil).Inc() // another kind for a declared name: dropped

	fams := metricstest.Scrape(t, serve(t, r)+"/metrics")
	rejects := fams["ndtrace_rejects_total"].GetMetric()
	if len(rejects) != 2 {
		t.Fatalf("%d reject series, want the 2 declared", len(rejects))
	}
	for _, m := range rejects {
		if m.GetCounter() == nil || m.GetCounter().GetValue() != 0 {
			t.Errorf("declared counter %v: want 0", m)
		}
	}
	if h := fams["ndtrace_trace_seconds"].GetMetric(); len(h) != 1 || h[0].GetHistogram().GetSampleCount() != 0 || len(h[0].GetHistogram().GetBucket()) != len(DefaultBuckets)+1 { // and +Inf
		t.Errorf("declared histogram: %v", h)
	}
	if g := fams["temporal_slots"]; g == nil || g.GetType().String() != "GAUGE" || g.GetMetric()[0].GetGauge().GetValue() != 0 {
		t.Errorf("temporal_slots: %v", g)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"} {
		if fams[name] == nil {
			t.Errorf("no %s on /metrics", name)
		}
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "go_goroutines") || !strings.Contains(b.String(), `ndtrace_rejects_total{reason="malformed"} 0`) {
		t.Errorf("WriteText:\n%s", b.String())
	}
}
