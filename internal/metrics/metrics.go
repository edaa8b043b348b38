// Package metrics is a small registry of counters, gauges and histograms served in the Prometheus
// text exposition format (version 0.0.4). Workers expose ndtrace's own metrics and the Temporal
// SDK's through one Registry on --metrics-addr.
//
// Unlike client_golang, series of one metric may carry different label names (the Temporal SDK
// tags a metric differently depending on where it is recorded); the exposition format allows it.
// Output is sorted by metric name and labels, so a scrape is deterministic.
package metrics

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
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
}

type family struct {
	kind   string
	help   string
	series map[string]*series // by canonical label string
}

type series struct {
	labels string // canonical {a="b",c="d"} form, "" for none
	value  float64
	// histograms
	buckets []uint64
	count   uint64
	sum     float64
}

// New returns an empty registry.
func New() *Registry { return &Registry{families: map[string]*family{}} }

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
		if s.buckets == nil {
			s.buckets = make([]uint64, len(DefaultBuckets))
		}
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

// Counter returns the counter name with labels, declaring the metric with help on first use. A nil
// Registry gives a counter that does nothing.
func (r *Registry) Counter(name, help string, l Labels) Counter {
	return Counter{r, r.declare(name, help, kindCounter), canonical(l)}
}

// Gauge returns the gauge name with labels (see Counter).
func (r *Registry) Gauge(name, help string, l Labels) Gauge {
	return Gauge{r, r.declare(name, help, kindGauge), canonical(l)}
}

// Histogram returns the histogram name with labels (see Counter).
func (r *Registry) Histogram(name, help string, l Labels) Histogram {
	return Histogram{r, r.declare(name, help, kindHistogram), canonical(l)}
}

// declare records a metric's help and kind and returns its sanitized name.
func (r *Registry) declare(name, help, kind string) string {
	name = sanitize(name)
	if r == nil {
		return name
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.families[name]; ok {
		if f.help == "" {
			f.help = help
		}
		return name
	}
	r.families[name] = &family{kind: kind, help: help, series: map[string]*series{}}
	return name
}

func (r *Registry) update(name, labels, kind string, fn func(*series)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.families[name]
	if !ok {
		f = &family{kind: kind, series: map[string]*series{}}
		r.families[name] = f
	}
	if f.kind != kind {
		return // one name, one kind: a mismatched update is dropped rather than corrupting output
	}
	s, ok := f.series[labels]
	if !ok {
		s = &series{labels: labels}
		f.series[labels] = s
	}
	fn(s)
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

// WriteText writes every metric in the Prometheus text format, sorted.
func (r *Registry) WriteText(w io.Writer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.families))
	for n := range r.families {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		f := r.families[n]
		if f.help != "" {
			fmt.Fprintf(&b, "# HELP %s %s\n", n, escapeHelp(f.help))
		}
		fmt.Fprintf(&b, "# TYPE %s %s\n", n, f.kind)
		keys := make([]string, 0, len(f.series))
		for k := range f.series {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s := f.series[k]
			if f.kind != kindHistogram {
				fmt.Fprintf(&b, "%s%s %s\n", n, braces(s.labels), formatFloat(s.value))
				continue
			}
			for i, le := range DefaultBuckets {
				fmt.Fprintf(&b, "%s_bucket%s %d\n", n, braces(join(s.labels, `le="`+formatFloat(le)+`"`)), s.buckets[i])
			}
			fmt.Fprintf(&b, "%s_bucket%s %d\n", n, braces(join(s.labels, `le="+Inf"`)), s.count)
			fmt.Fprintf(&b, "%s_sum%s %s\n", n, braces(s.labels), formatFloat(s.sum))
			fmt.Fprintf(&b, "%s_count%s %d\n", n, braces(s.labels), s.count)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ServeHTTP serves the metrics (GET /metrics).
func (r *Registry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_ = r.WriteText(w)
}

// canonical renders labels sorted by name with escaped values, without braces.
func canonical(l Labels) string {
	if len(l) == 0 {
		return ""
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, sanitize(k)+`="`+escapeValue(l[k])+`"`)
	}
	return strings.Join(parts, ",")
}

func braces(s string) string {
	if s == "" {
		return ""
	}
	return "{" + s + "}"
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
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

func escapeValue(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
