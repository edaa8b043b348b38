package activities

import (
	"slices"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/internal/metrics"
	"github.com/ndtrace/ndtrace/schemas"
)

// Metrics counts what a worker's activities do, for its Prometheus endpoint (rates such as
// traces/s come from rate() over the counters). A nil *Metrics does nothing.
type Metrics struct{ reg *metrics.Registry }

// NewMetrics returns the activities' metrics, recorded in reg, every series declared at zero: each
// level, direction, kill status and reject class is on /metrics before its first event, so that
// rate() and alerts see a counter start rather than appear.
func NewMetrics(reg *metrics.Registry) *Metrics {
	m := &Metrics{reg: reg}
	levels := []string{crawl.FunctionCall.Level(), crawl.RepositoryTests.Level()}
	for _, level := range levels {
		m.itemsTraced(level)
		m.traceSeconds(level)
		for _, d := range []string{"forward", "inverse"} {
			m.trajectories(level, d)
		}
	}
	m.testsRun()
	m.testsQuarantined()
	m.tokens()
	for _, s := range schemas.Statuses {
		if killStatuses[s] {
			m.kills(s)
		}
	}
	for _, c := range RejectClasses() {
		m.rejects(c)
	}
	return m
}

// RejectClasses lists every class a reject can have: the classes of schemas.RejectClasses and the
// statuses of a run that gave no rows.
func RejectClasses() []schemas.RejectClass {
	cs := slices.Clone(schemas.RejectClasses)
	for _, s := range schemas.Statuses {
		if s != schemas.StatusOK {
			cs = append(cs, schemas.StatusReject(s))
		}
	}
	return cs
}

// The activities' metrics.
func (m *Metrics) itemsTraced(level string) metrics.Counter {
	return m.reg.Counter("ndtrace_items_traced_total", "Items traced (functions, or repositories with all their tests).", metrics.Labels{"level": level})
}

func (m *Metrics) traceSeconds(level string) metrics.Histogram {
	return m.reg.Histogram("ndtrace_trace_seconds", "Time to trace one item.", metrics.Labels{"level": level})
}

func (m *Metrics) testsRun() metrics.Counter {
	return m.reg.Counter("ndtrace_tests_run_total", "Repository tests run (each untraced and traced).", nil)
}

func (m *Metrics) testsQuarantined() metrics.Counter {
	return m.reg.Counter("ndtrace_tests_quarantined_total", "Repository tests whose outcome changed under tracing.", nil)
}

func (m *Metrics) kills(s schemas.Status) metrics.Counter {
	return m.reg.Counter("ndtrace_sandbox_kills_total", "Runs the sandbox stopped, by status.", metrics.Labels{"status": string(s)})
}

func (m *Metrics) trajectories(level, direction string) metrics.Counter {
	return m.reg.Counter("ndtrace_trajectories_total", "Trajectories written, by level and direction.", metrics.Labels{"level": level, "direction": direction})
}

func (m *Metrics) tokens() metrics.Counter {
	return m.reg.Counter("ndtrace_tokens_total", "Tokens written.", nil)
}

func (m *Metrics) rejects(c schemas.RejectClass) metrics.Counter {
	return m.reg.Counter("ndtrace_rejects_total", "Items rejected, by reason class: in planning (malformed, repository, duplicate, decontaminated), in building rows, and the items of failed batches.", metrics.Labels{"reason": string(c)})
}

// rejected counts rejects by class (a nil *Metrics does nothing).
func (m *Metrics) rejected(byClass map[schemas.RejectClass]int) {
	if m == nil {
		return
	}
	for c, n := range byClass {
		m.rejects(c).Add(float64(n))
	}
}

// killStatuses are the statuses of runs the sandbox stopped.
var killStatuses = map[schemas.Status]bool{
	schemas.StatusTimeout: true, schemas.StatusMemory: true, schemas.StatusOutputLimit: true,
	schemas.StatusEventLimit: true, schemas.StatusKilled: true, schemas.StatusTampered: true,
}

// traced records one traced item.
func (m *Metrics) traced(t execute.TracedItem, d time.Duration) {
	if m == nil {
		return
	}
	level := t.Item.Kind().Level()
	m.itemsTraced(level).Inc()
	m.traceSeconds(level).ObserveDuration(d)
	statuses := []schemas.Status{t.Status}
	if t.Repo != nil {
		m.testsRun().Add(float64(t.Repo.Run))
		m.testsQuarantined().Add(float64(len(t.Repo.Quarantined)))
		for _, tt := range t.Repo.Traces {
			statuses = append(statuses, tt.Status)
		}
	}
	for _, s := range statuses {
		if killStatuses[s] {
			m.kills(s).Inc()
		}
	}
}

// built records a built batch.
func (m *Metrics) built(rows []schemas.Row, rejects []schemas.Reject) {
	if m == nil {
		return
	}
	for _, r := range rows {
		m.trajectories(r.Level, r.Direction).Inc()
		m.tokens().Add(float64(r.NumTokens))
	}
	for _, r := range rejects {
		m.rejects(r.Class).Inc()
	}
}

// TemporalMetricsHandler returns a Temporal SDK metrics handler that records the SDK's metrics
// (workflow and activity task latencies, poller counts, ...) in reg, named as the SDK names them
// with "." and "-" mapped to "_".
func TemporalMetricsHandler(reg *metrics.Registry) client.MetricsHandler {
	return temporalHandler{reg: reg}
}

type temporalHandler struct {
	reg  *metrics.Registry
	tags metrics.Labels
}

func (h temporalHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := metrics.Labels{}
	for k, v := range h.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return temporalHandler{reg: h.reg, tags: merged}
}

func (h temporalHandler) Counter(name string) client.MetricsCounter {
	c := h.reg.Counter(name, "", h.tags)
	return counterFunc(func(d int64) { c.Add(float64(d)) })
}

func (h temporalHandler) Gauge(name string) client.MetricsGauge {
	g := h.reg.Gauge(name, "", h.tags)
	return gaugeFunc(g.Set)
}

func (h temporalHandler) Timer(name string) client.MetricsTimer {
	t := h.reg.Histogram(name, "", h.tags)
	return timerFunc(t.ObserveDuration)
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }
