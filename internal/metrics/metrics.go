// Package metrics is a registry of counters, gauges and histograms that a worker serves to
// Prometheus on --metrics-addr: ndtrace's own metrics, the Temporal SDK's, and the Go runtime's and
// the process's (client_golang's Go and process collectors).
//
// The registry is our own because series of one metric may carry different label names (the
// Temporal SDK tags a metric differently depending on where it is recorded), which client_golang's
// metric vectors refuse and the exposition format allows. Everything else is client_golang's: the
// registry is a prometheus.Gatherer, encoded by expfmt and served by promhttp (content
// negotiation, OpenMetrics, compression) together with the collectors.
//
// A series exists from the moment it is declared (Counter, Gauge, Histogram), at zero, so that a
// scrape shows every counter before its first event. Output is sorted by metric name and labels.
package metrics

import (
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// Kinds of metric.
const (
	kindCounter   = "counter"
	kindGauge     = "gauge"
	kindHistogram = "histogram"
)

// DefaultBuckets are the histogram buckets, in seconds.
var DefaultBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// Labels are a series' label names and values.
type Labels map[string]string

// Registry holds metrics. The zero value is not usable; use New. It is safe for concurrent use.
type Registry struct {
	mu       sync.Mutex
	families map[string]*family
	// runtime holds client_golang's Go and process collectors; handler serves both registries.
	runtime *prometheus.Registry
	handler http.Handler
}

type family struct {
	kind   string
	help   string
	series map[string]*series // by canonical label string
}

type series struct {
	labels []*dto.LabelPair // sorted by name
	value  float64
	// histograms: cumulative counts per DefaultBuckets bound
	buckets []uint64
	count   uint64
	sum     float64
}

// New returns a registry with no metrics of its own yet, and the Go runtime's and the process's
// collectors (go_*, process_*).
func New() *Registry {
	rt := prometheus.NewRegistry()
	rt.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r := &Registry{families: map[string]*family{}, runtime: rt}
	r.handler = promhttp.HandlerFor(prometheus.Gatherers{r, rt}, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return r
}

// Counter is a monotonically increasing count.
type Counter struct {
	r            *Registry
	name, labels string
}

// Add adds d (negative values are ignored).
func (c Counter) Add(d float64) {
	if d <= 0 || c.r == nil {
		return
	}
	c.r.update(c.name, c.labels, kindCounter, func(s *series) { s.value += d })
}

// Inc adds one.
func (c Counter) Inc() { c.Add(1) }

// Gauge is a value that goes up and down.
type Gauge struct {
	r            *Registry
	name, labels string
}

// Set sets the gauge.
func (g Gauge) Set(v float64) {
	if g.r != nil {
		g.r.update(g.name, g.labels, kindGauge, func(s *series) { s.value = v })
	}
}

// Histogram counts observations in DefaultBuckets.
type Histogram struct {
	r            *Registry
	name, labels string
}

// Observe records one value.
func (h Histogram) Observe(v float64) {
	if h.r == nil {
		return
	}
	h.r.update(h.name, h.labels, kindHistogram, func(s *series) {
		for i, b := range DefaultBuckets {
			if v <= b {
				s.buckets[i]++
			}
		}
		s.count++
		s.sum += v
	})
}

// ObserveDuration records d in seconds.
func (h Histogram) ObserveDuration(d time.Duration) { h.Observe(d.Seconds()) }

// Counter returns the counter name with labels, declaring the metric with help on first use and
// the series at zero. A nil Registry gives a counter that does nothing.
func (r *Registry) Counter(name, help string, l Labels) Counter {
	name, key := r.declare(name, help, kindCounter, l)
	return Counter{r, name, key}
}

// Gauge returns the gauge name with labels (see Counter).
func (r *Registry) Gauge(name, help string, l Labels) Gauge {
	name, key := r.declare(name, help, kindGauge, l)
	return Gauge{r, name, key}
}

// Histogram returns the histogram name with labels (see Counter).
func (r *Registry) Histogram(name, help string, l Labels) Histogram {
	name, key := r.declare(name, help, kindHistogram, l)
	return Histogram{r, name, key}
}

// declare records a metric's help and kind, and its series with labels l at zero; it returns the
// sanitized name and the series' key.
func (r *Registry) declare(name, help, kind string, l Labels) (string, string) {
	name = sanitize(name)
	key := canonical(l)
	if r == nil {
		return name, key
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.families[name]
	if !ok {
		f = &family{kind: kind, help: help, series: map[string]*series{}}
		r.families[name] = f
	}
	if f.help == "" {
		f.help = help
	}
	if f.kind == kind {
		if _, ok := f.series[key]; !ok {
			f.series[key] = newSeries(kind, l)
		}
	}
	return name, key
}

func newSeries(kind string, l Labels) *series {
	s := &series{}
	for k, v := range l {
		s.labels = append(s.labels, &dto.LabelPair{Name: proto.String(sanitize(k)), Value: proto.String(v)})
	}
	sort.Slice(s.labels, func(i, j int) bool { return s.labels[i].GetName() < s.labels[j].GetName() })
	if kind == kindHistogram {
		s.buckets = make([]uint64, len(DefaultBuckets))
	}
	return s
}

// update applies fn to the declared series of name with labels.
func (r *Registry) update(name, labels, kind string, fn func(*series)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.families[name]
	if !ok || f.kind != kind {
		return // one name, one kind: a mismatched update is dropped rather than corrupting output
	}
	if s, ok := f.series[labels]; ok {
		fn(s)
	}
}

// Value returns the current value of a counter or gauge series (0 if absent), for tests and
// progress reports.
func (r *Registry) Value(name string, l Labels) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.families[sanitize(name)]; ok {
		if s, ok := f.series[canonical(l)]; ok {
			return s.value
		}
	}
	return 0
}

// Gather returns the registry's own metrics (not the collectors'), sorted by name and labels: the
// registry is a prometheus.Gatherer.
func (r *Registry) Gather() ([]*dto.MetricFamily, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.families))
	for n := range r.families {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*dto.MetricFamily, 0, len(names))
	for _, n := range names {
		f := r.families[n]
		if len(f.series) == 0 {
			continue
		}
		mf := &dto.MetricFamily{Name: proto.String(n)}
		if f.help != "" {
			mf.Help = proto.String(f.help)
		}
		keys := make([]string, 0, len(f.series))
		for k := range f.series {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s := f.series[k]
			m := &dto.Metric{Label: s.labels}
			switch f.kind {
			case kindCounter:
				mf.Type = dto.MetricType_COUNTER.Enum()
				m.Counter = &dto.Counter{Value: proto.Float64(s.value)}
			case kindGauge:
				mf.Type = dto.MetricType_GAUGE.Enum()
				m.Gauge = &dto.Gauge{Value: proto.Float64(s.value)}
			case kindHistogram:
				mf.Type = dto.MetricType_HISTOGRAM.Enum()
				h := &dto.Histogram{SampleCount: proto.Uint64(s.count), SampleSum: proto.Float64(s.sum)}
				for i, le := range DefaultBuckets {
					h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(le), CumulativeCount: proto.Uint64(s.buckets[i])})
				}
				m.Histogram = h
			}
			mf.Metric = append(mf.Metric, m)
		}
		out = append(out, mf)
	}
	return out, nil
}

// WriteText writes the registry's own metrics (not the collectors', whose values change by
// themselves) in the Prometheus text format, sorted: two writes of the same state are identical.
func (r *Registry) WriteText(w io.Writer) error {
	mfs, err := r.Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}

// ServeHTTP serves every metric, the registry's and the Go and process collectors' (GET
// /metrics), through promhttp: the text format, or OpenMetrics or protobuf as the scraper asks.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.handler.ServeHTTP(w, req) }

// canonical renders labels sorted by name, as the key of a series.
func canonical(l Labels) string {
	if len(l) == 0 {
		return ""
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(sanitize(k))
		b.WriteByte(0)
		b.WriteString(l[k])
		b.WriteByte(0)
	}
	return b.String()
}

// sanitize maps a name to [a-zA-Z_:][a-zA-Z0-9_:]*.
func sanitize(name string) string {
	var b strings.Builder
	for i, c := range name {
		ok := c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9'
		if ok {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}
