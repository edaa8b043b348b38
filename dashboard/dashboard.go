// Package dashboard builds the web page of dataset statistics that "ndtrace dashboard" serves, and
// its JSON API: the per-trajectory summary of the paper's Figure 5, the histograms of Figure A.1 by
// level, actions and events per type, exits, rejects, repositories, the certificate of "ndtrace
// verify" and the sources, several datasets compared one colour each. The charts are SVG drawn on
// the server and the style sheet is inlined: the page loads nothing from the network.
//
// The package reads no store: the caller loads each dataset's statistics and certificate into a
// Dataset and serves Handler.
package dashboard

import (
	"embed"
	"fmt"
	"html"
	"html/template"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/internal/numfmt"
	"github.com/ndtrace/ndtrace/schemas"
)

//go:embed index.html style.css
var files embed.FS

// pageTemplate is the page; pageCSS its style sheet, inlined.
var (
	pageTemplate = template.Must(template.New("index.html").Funcs(template.FuncMap{
		"thousands": numfmt.Thousands,
		"decimal":   numfmt.Decimal,
		"add1":      func(i int) int { return i + 1 },
		"int64":     func(i int) int64 { return int64(i) },
	}).ParseFS(files, "index.html"))
	pageCSS = func() template.CSS {
		b, err := files.ReadFile("style.css")
		if err != nil {
			panic(err)
		}
		return template.CSS(b) //nolint:gosec // our own embedded file
	}()
)

// datasetColors are the datasets' colours, in the order given (then repeated).
var datasetColors = []string{"#1c7ed6", "#e8590c", "#2f9e44", "#ae3ec9", "#c92a2a", "#495057"}

// Dataset is one dataset the dashboard shows, as the caller loaded it.
type Dataset struct {
	// URL names the dataset on the page and in the API.
	URL string
	// From says where the statistics come from ("from stats.json", "computed from the shards").
	From string
	// Stats are the dataset's statistics.
	Stats *dataset.Stats
	// Verify is the certificate ndtrace verify left for the dataset's version (nil: none).
	Verify *schemas.Verification
}

// dashDataset is one dataset as the page shows it: its place, colour and statistics as JSON.
type dashDataset struct {
	Index int
	URL   string
	Color string
	From  string
	Stats *dataset.Stats
	JSON  []byte
	// Verify is the certificate ndtrace verify left for the dataset's version (nil: none).
	Verify *schemas.Verification
}

// Dashboard serves the statistics of a fixed set of datasets.
type Dashboard struct {
	datasets []*dashDataset
}

// New returns the dashboard of datasets, numbered and coloured in the order given.
func New(datasets []Dataset) (*Dashboard, error) {
	d := &Dashboard{}
	for i, ds := range datasets {
		js, err := ds.Stats.Marshal()
		if err != nil {
			return nil, fmt.Errorf("dataset %d: %s: statistics: %w", i, ds.URL, err)
		}
		d.datasets = append(d.datasets, &dashDataset{Index: i, URL: ds.URL, Color: datasetColors[i%len(datasetColors)],
			From: ds.From, Stats: ds.Stats, JSON: js, Verify: ds.Verify})
	}
	return d, nil
}

// Handler serves the page at / (?direction=forward or inverse for one direction),
// /api/stats?dataset=N (dataset N's statistics as JSON, from 0) and /api/datasets (the datasets'
// index, URL and where their statistics come from).
func (d *Dashboard) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.page)
	mux.HandleFunc("GET /api/stats", d.apiStats)
	mux.HandleFunc("GET /api/datasets", d.apiDatasets)
	return logRequests(mux)
}

// logRequests logs every request at debug level.
func logRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slog.Debug("dashboard: request", "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery, "remote", r.RemoteAddr)
		h.ServeHTTP(w, r)
	})
}

// apiStats serves dataset N's statistics as JSON.
func (d *Dashboard) apiStats(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("dataset")
	n, err := strconv.Atoi(q)
	if err != nil || n < 0 || n >= len(d.datasets) {
		httpJSONError(w, http.StatusBadRequest, fmt.Sprintf("dataset=%q: want an index from 0 to %d", q, len(d.datasets)-1))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(d.datasets[n].JSON)
}

// apiDatasets lists the datasets: index, URL and where their statistics come from.
func (d *Dashboard) apiDatasets(w http.ResponseWriter, _ *http.Request) {
	var b strings.Builder
	b.WriteString("[")
	for i, ds := range d.datasets {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n  {\"index\": %d, \"url\": %s, \"statistics\": %s}", i, strconv.Quote(ds.URL), strconv.Quote(ds.From))
	}
	b.WriteString("\n]\n")
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, b.String())
}

func httpJSONError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, "{\"error\": %s}\n", strconv.Quote(msg))
}

// page data.
type (
	dashPage struct {
		CSS        template.CSS
		Datasets   []*dashDataset
		Direction  string
		DirLinks   []dashDirLink
		Summary    []dashSummaryRow
		Fig5       []template.HTML
		Levels     []string
		Histograms []dashHistRow
		Actions    []template.HTML
		Events     []template.HTML
		Exits      []dashExitRow
		Rejects    []dashRejectRow
		Sources    []dashSourceRow
		// Yields are the datasets' repository yield reports; Repos the repositories with the
		// most tests run, SourcesShown per dataset.
		Yields []dashYieldRow
		Repos  []dashSourceRow
		// SourcesShown is the most sources listed per dataset.
		SourcesShown int
		// Verifications are the datasets' certificates (ndtrace verify), one row per dataset.
		Verifications []dashVerifyRow
	}
	dashVerifyRow struct {
		DS *dashDataset
		*schemas.Verification
		Agreement, ReplayAgreement, Differences, NotReExecuted, ReplayDifferences, NotReplayed, Verified string
	}
	dashDirLink struct {
		Label, Href string
		Active      bool
	}
	dashSummaryRow struct {
		DS                                   *dashDataset
		Group                                string
		Trajectories, Traces                 int64
		Tokens, Actions, Events, Code, Learn *dataset.Metric
	}
	dashHistRow struct {
		ID, Title, Unit string
		Panels          []template.HTML
	}
	dashExitRow struct {
		DS    *dashDataset
		Group string
		Exits string
	}
	dashRejectRow struct {
		DS       *dashDataset
		Class    string
		Count    int64
		Examples []dataset.RejectExample
	}
	dashSourceRow struct {
		DS *dashDataset
		dataset.SourceStats
	}
	dashYieldRow struct {
		DS *dashDataset
		*dataset.Yield
		// PlainRate and TracedRate are the pass rates of the tests run, untraced and traced.
		PlainRate, TracedRate string
		Rejected              string
	}
)

// percent is n of total as a percentage with one decimal, "–" when total is 0.
func percent(n, total int64) string {
	if total == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
}

// dashboardSources is the number of sources listed per dataset.
const dashboardSources = 10

// page renders the dashboard's page.
func (d *Dashboard) page(w http.ResponseWriter, r *http.Request) {
	dir := r.URL.Query().Get("direction")
	if dir != "" && dir != "forward" && dir != "inverse" {
		http.Error(w, "direction must be forward, inverse or empty", http.StatusBadRequest)
		return
	}
	p := dashPage{CSS: pageCSS, Datasets: d.datasets, Direction: dir, Levels: d.levels(), SourcesShown: dashboardSources}
	for _, l := range []struct{ label, dir string }{{"All directions", ""}, {"Forward", "forward"}, {"Inverse", "inverse"}} {
		href := "/"
		if l.dir != "" {
			href = "/?direction=" + l.dir
		}
		p.DirLinks = append(p.DirLinks, dashDirLink{l.label, href, l.dir == dir})
	}
	for _, ds := range d.datasets {
		for _, g := range ds.Stats.Groups {
			if g.Level == "" {
				continue
			}
			p.Summary = append(p.Summary, dashSummaryRow{DS: ds, Group: g.Name, Trajectories: g.Trajectories, Traces: g.Traces,
				Tokens: g.Metric("tokens"), Actions: g.Metric("actions"), Events: g.Metric("events"),
				Code: g.Metric("code_chars"), Learn: g.Metric("learned_tokens")})
		}
		if sel := ds.Stats.Group("", dir); sel != nil {
			p.Exits = append(p.Exits, dashExitRow{DS: ds, Group: sel.Name, Exits: numfmt.Counts(sel.Exits, "-")})
		}
		for _, rc := range ds.Stats.Rejects {
			p.Rejects = append(p.Rejects, dashRejectRow{DS: ds, Class: rc.Class, Count: rc.Count, Examples: rc.Examples})
		}
		if y := ds.Stats.Repositories; y != nil {
			p.Yields = append(p.Yields, dashYieldRow{DS: ds, Yield: y, PlainRate: percent(y.PassedPlain, y.Run),
				TracedRate: percent(y.PassedTraced, y.Run), Rejected: numfmt.Counts(y.RejectedByClass, "-")})
			var repos []dataset.SourceStats
			for _, s := range ds.Stats.Sources {
				if s.Yield != nil {
					repos = append(repos, s)
				}
			}
			slices.SortStableFunc(repos, func(a, b dataset.SourceStats) int { return cmpInt64Desc(a.Yield.Run, b.Yield.Run) })
			for _, s := range repos[:min(len(repos), dashboardSources)] {
				p.Repos = append(p.Repos, dashSourceRow{DS: ds, SourceStats: s})
			}
		}
		if v := ds.Verify; v != nil {
			row := dashVerifyRow{DS: ds, Verification: v, Agreement: numfmt.RatioPercent(v.Agreement), ReplayAgreement: "–",
				Differences: numfmt.Counts(v.Differences, "none"), NotReExecuted: numfmt.Counts(v.NotReExecuted, "none"),
				ReplayDifferences: numfmt.Counts(v.Replay.Differences, "none"), NotReplayed: numfmt.Counts(v.Replay.NotReplayed, "none"),
				Verified: v.StartedAt.UTC().Format("2006-01-02 15:04Z")}
			if v.Replay.Run > 0 {
				row.ReplayAgreement = numfmt.RatioPercent(float64(v.Replay.Agreed) / float64(v.Replay.Run))
			}
			p.Verifications = append(p.Verifications, row)
		}
		srcs := slices.Clone(ds.Stats.Sources)
		slices.SortStableFunc(srcs, func(a, b dataset.SourceStats) int { return cmpInt64Desc(a.Trajectories, b.Trajectories) })
		for _, s := range srcs[:min(len(srcs), dashboardSources)] {
			p.Sources = append(p.Sources, dashSourceRow{DS: ds, SourceStats: s})
		}
	}
	for _, m := range []struct{ name, title string }{{"tokens", "Tokens"}, {"actions", "Actions"}, {"events", "Trace events"}} {
		p.Fig5 = append(p.Fig5, d.rangeChart(m.name, m.title))
	}
	for _, m := range []struct{ name, title, unit string }{
		{"tokens", "Tokens per trajectory", "tokens"},
		{"actions", "Actions per trajectory", "actions"},
		{"events", "Trace events per trajectory", "events"},
		{"code_chars", "Code length in characters", "characters"},
	} {
		row := dashHistRow{ID: "hist-" + m.name, Title: m.title, Unit: m.unit}
		for _, level := range p.Levels {
			row.Panels = append(row.Panels, d.histogramChart(m.name, level, dir, m.unit))
		}
		p.Histograms = append(p.Histograms, row)
	}
	for _, level := range p.Levels {
		p.Actions = append(p.Actions, d.barChart("actions", level, dir, "action:", dataset.ActionTypes))
		p.Events = append(p.Events, d.barChart("events", level, dir, "event:", dataset.EventTypes))
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pageTemplate.Execute(w, p); err != nil {
		slog.Error("dashboard: render page", "err", err)
	}
}

func cmpInt64Desc(a, b int64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// levels returns the levels of every dataset: function, repository, then any other, sorted.
func (d *Dashboard) levels() []string {
	seen := map[string]bool{}
	for _, ds := range d.datasets {
		for _, g := range ds.Stats.Groups {
			if g.Level != "" {
				seen[g.Level] = true
			}
		}
	}
	var out []string
	for _, l := range []string{"function", "repository"} {
		if seen[l] {
			out = append(out, l)
			delete(seen, l)
		}
	}
	rest := make([]string, 0, len(seen))
	for l := range seen {
		rest = append(rest, l)
	}
	slices.Sort(rest)
	if len(out)+len(rest) == 0 {
		return []string{"function", "repository"}
	}
	return append(out, rest...)
}

// Chart geometry (SVG user units).
const (
	chartW   = 600
	chartH   = 240
	marginL  = 58
	marginR  = 14
	marginT  = 30
	marginB  = 40
	plotW    = chartW - marginL - marginR
	plotH    = chartH - marginT - marginB
	fontSize = 11
)

// dashChart builds one SVG chart.
type dashChart struct {
	b     strings.Builder
	class string
}

func newSVGChart(id, class, title string, width, height int) *dashChart {
	c := &dashChart{class: class}
	fmt.Fprintf(&c.b, `<svg id="%s" class="chart %s" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg" font-family="system-ui, sans-serif" font-size="%d">`,
		svgEsc(id), svgEsc(class), width, height, width, height, svgEsc(title), fontSize)
	fmt.Fprintf(&c.b, `<text x="%d" y="18" class="title" font-size="13" font-weight="600" fill="#212529">%s</text>`, marginL, svgEsc(title))
	return c
}

func (c *dashChart) printf(format string, args ...any) { fmt.Fprintf(&c.b, format, args...) }

func (c *dashChart) html() template.HTML {
	c.b.WriteString("</svg>")
	return template.HTML(c.b.String()) //nolint:gosec // every text in it is escaped by esc
}

// empty draws a "no data" note.
func (c *dashChart) empty(width, height int, msg string) template.HTML {
	c.printf(`<text x="%d" y="%d" text-anchor="middle" fill="#868e96">%s</text>`, width/2, height/2, svgEsc(msg))
	return c.html()
}

func svgEsc(s string) string { return html.EscapeString(s) }

// yAxis draws horizontal grid lines and labels from 0 to top.
func (c *dashChart) yAxis(top float64, format func(float64) string) {
	for _, v := range axisTicks(0, top, 4) {
		y := marginT + plotH - v/top*plotH
		c.printf(`<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e9ecef"/>`, marginL, marginL+plotW, y, y)
		c.printf(`<text x="%d" y="%.1f" text-anchor="end" fill="#495057">%s</text>`, marginL-6, y+4, svgEsc(format(v)))
	}
	c.printf(`<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#adb5bd"/>`, marginL, marginL+plotW, marginT+plotH, marginT+plotH)
}

// histogramChart draws the histograms of one metric at one level (and direction), one colour per
// dataset, re-binned to a common width; the y axis is the share of the dataset's trajectories.
func (d *Dashboard) histogramChart(metric, level, dir, unit string) template.HTML {
	title := fmt.Sprintf("%s level", level)
	if dir != "" {
		title += ", " + dir
	}
	id := "hist-" + metric + "-" + level
	c := newSVGChart(id, "hist", title, chartW, chartH)
	type series struct {
		ds     *dashDataset
		h      dataset.Histogram
		n      int64
		counts map[int64]int64 // bin index (of the common width) -> count
	}
	var ss []series
	var width int64 = 1
	for _, ds := range d.datasets {
		g := ds.Stats.Group(level, dir)
		if g == nil {
			continue
		}
		m := g.Metric(metric)
		if m == nil || m.Count == 0 {
			continue
		}
		ss = append(ss, series{ds: ds, h: m.Histogram, n: m.Count})
		width = max(width, m.Histogram.Width)
	}
	if len(ss) == 0 {
		return c.empty(chartW, chartH, "no trajectories")
	}
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	var top float64
	for i := range ss {
		ss[i].counts = map[int64]int64{}
		for k, n := range ss[i].h.Counts {
			if n == 0 {
				continue
			}
			bin := floorDivInt(ss[i].h.Lo+int64(k)*ss[i].h.Width, width)
			ss[i].counts[bin] += n
			first, last = min(first, bin), max(last, bin)
		}
		for _, n := range ss[i].counts {
			top = max(top, float64(n)/float64(ss[i].n))
		}
	}
	top = axisCeil(top)
	lo, hi := first*width, (last+1)*width
	xOf := func(v int64) float64 { return marginL + float64(v-lo)/float64(hi-lo)*plotW }
	c.yAxis(top, func(v float64) string { return strconv.FormatFloat(math.Round(v*1000)/10, 'f', -1, 64) + "%" })
	for k, s := range ss {
		bins := make([]int64, 0, len(s.counts))
		for b := range s.counts {
			bins = append(bins, b)
		}
		slices.Sort(bins)
		for _, b := range bins {
			n := s.counts[b]
			share := float64(n) / float64(s.n)
			// Within a bin, one bar per dataset side by side.
			x0, x1 := xOf(b*width), xOf((b+1)*width)
			bw := (x1 - x0) / float64(len(ss))
			x0 += float64(k) * bw
			h := share / top * plotH
			c.printf(`<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.75"><title>%s: %s–%s %s: %s trajectories (%.1f%%)</title></rect>`,
				x0+0.5, marginT+plotH-h, math.Max(bw-1, 1), h, s.ds.Color,
				svgEsc(s.ds.URL), numfmt.Thousands(b*width), numfmt.Thousands((b+1)*width-1), svgEsc(unit), numfmt.Thousands(n), share*100)
		}
	}
	for _, v := range axisTicks(float64(lo), float64(hi), 6) {
		x := xOf(int64(v))
		c.printf(`<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#adb5bd"/>`, x, x, marginT+plotH, marginT+plotH+4)
		c.printf(`<text x="%.1f" y="%d" text-anchor="middle" fill="#495057">%s</text>`, x, marginT+plotH+16, svgEsc(compactNum(v)))
	}
	c.printf(`<text x="%d" y="%d" text-anchor="middle" fill="#495057">%s per trajectory (bins of %s)</text>`,
		marginL+plotW/2, chartH-6, svgEsc(unit), numfmt.Thousands(width))
	return c.html()
}

// barChart draws the mean per trajectory of each type (metric prefix+type) at one level, one bar
// per dataset within each type.
func (d *Dashboard) barChart(kind, level, dir, prefix string, types []string) template.HTML {
	title := fmt.Sprintf("%s level", level)
	if dir != "" {
		title += ", " + dir
	}
	c := newSVGChart(kind+"-"+level, "bars", title, chartW, chartH)
	type bar struct {
		ds    *dashDataset
		mean  float64
		total int64
	}
	var groups [][]bar
	var shown []string
	var top float64
	for _, t := range types {
		var bars []bar
		any := false
		for _, ds := range d.datasets {
			g := ds.Stats.Group(level, dir)
			if g == nil {
				continue
			}
			m := g.Metric(prefix + t)
			if m == nil {
				continue
			}
			bars = append(bars, bar{ds, m.Mean, m.Sum})
			any = any || m.Sum > 0
			top = max(top, m.Mean)
		}
		if any {
			groups = append(groups, bars)
			shown = append(shown, t)
		}
	}
	if len(groups) == 0 {
		return c.empty(chartW, chartH, "no "+kind)
	}
	top = axisCeil(top)
	c.yAxis(top, compactNum)
	slot := float64(plotW) / float64(len(groups))
	for i, bars := range groups {
		x := marginL + float64(i)*slot
		bw := (slot * 0.7) / float64(max(len(d.datasets), 1))
		for _, b := range bars {
			h := b.mean / top * plotH
			bx := x + slot*0.15 + float64(b.ds.Index%max(len(d.datasets), 1))*bw
			c.printf(`<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.8"><title>%s: %s %s, %s per trajectory (%s in all)</title></rect>`,
				bx, marginT+plotH-h, math.Max(bw-1, 1), h, b.ds.Color, svgEsc(b.ds.URL), svgEsc(shown[i]), svgEsc(kind),
				numfmt.Decimal(b.mean), numfmt.Thousands(b.total))
		}
		c.printf(`<text x="%.1f" y="%d" text-anchor="middle" fill="#495057">%s</text>`, x+slot/2, marginT+plotH+16, svgEsc(shown[i]))
	}
	c.printf(`<text x="%d" y="%d" text-anchor="middle" fill="#495057">mean %s per trajectory, by type</text>`, marginL+plotW/2, chartH-6, svgEsc(kind))
	return c.html()
}

// rangeChart draws, for every dataset, level and direction, the 25–90 % range of a metric as a box
// with the mean as a dot and the median as a tick (the paper's Figure 5).
func (d *Dashboard) rangeChart(metric, title string) template.HTML {
	type item struct {
		ds    *dashDataset
		group string
		m     *dataset.Metric
	}
	var items []item
	var top float64
	for _, ds := range d.datasets {
		for i := range ds.Stats.Groups {
			g := &ds.Stats.Groups[i]
			if g.Level == "" || g.Direction == "" {
				continue
			}
			m := g.Metric(metric)
			if m == nil || m.Count == 0 {
				continue
			}
			items = append(items, item{ds, g.Name, m})
			top = max(top, m.P90, m.Mean)
		}
	}
	const rowH = 22
	const labelW = 140
	const width = 420
	height := marginT + max(len(items), 1)*rowH + 24
	c := newSVGChart("fig5-"+metric, "range", title+" per trajectory", width, height)
	if len(items) == 0 {
		return c.empty(width, height, "no trajectories")
	}
	top = axisCeil(top)
	x0, w := float64(labelW), float64(width-labelW-marginR-6)
	xOf := func(v float64) float64 { return x0 + v/top*w }
	bottom := marginT + len(items)*rowH
	for _, v := range axisTicks(0, top, 5) {
		x := xOf(v)
		c.printf(`<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#e9ecef"/>`, x, x, marginT-4, bottom)
		c.printf(`<text x="%.1f" y="%d" text-anchor="middle" fill="#495057">%s</text>`, x, bottom+14, svgEsc(compactNum(v)))
	}
	for i, it := range items {
		y := float64(marginT + i*rowH)
		label := it.group
		if len(d.datasets) > 1 {
			label = fmt.Sprintf("#%d %s", it.ds.Index+1, it.group)
		}
		c.printf(`<text x="%.1f" y="%.1f" text-anchor="end" fill="#212529">%s</text>`, x0-8, y+rowH/2+4, svgEsc(label))
		c.printf(`<g><title>%s %s: mean %s, p25 %s, median %s, p90 %s (n=%s)</title>`, svgEsc(it.ds.URL), svgEsc(it.group),
			numfmt.Decimal(it.m.Mean), numfmt.Decimal(it.m.P25), numfmt.Decimal(it.m.P50), numfmt.Decimal(it.m.P90), numfmt.Thousands(it.m.Count))
		c.printf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s" fill-opacity="0.3" stroke="%s"/>`,
			xOf(it.m.P25), y+4, math.Max(xOf(it.m.P90)-xOf(it.m.P25), 1.5), rowH-8, it.ds.Color, it.ds.Color)
		c.printf(`<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`, xOf(it.m.P50), xOf(it.m.P50), y+4, y+rowH-4, it.ds.Color)
		c.printf(`<circle cx="%.1f" cy="%.1f" r="4" fill="%s" stroke="#fff"/></g>`, xOf(it.m.Mean), y+rowH/2, it.ds.Color)
	}
	return c.html()
}

// axisTicks returns about n round values from lo to hi (inclusive when round).
func axisTicks(lo, hi float64, n int) []float64 {
	if hi <= lo {
		return []float64{lo}
	}
	step := axisStep((hi - lo) / float64(n))
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		out = append(out, math.Round(v/step)*step)
	}
	return out
}

// axisStep returns the smallest 1, 2 or 5 × 10^k at least x.
func axisStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// axisCeil rounds x up to a round axis maximum (0 becomes 1).
func axisCeil(x float64) float64 {
	if x <= 0 {
		return 1
	}
	step := axisStep(x / 4)
	return math.Ceil(x/step*(1-1e-9)) * step
}

// compactNum formats an axis value: 950, 1,500, 16k, 16,100, 2.3M, 0.25.
func compactNum(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6 && math.Mod(a, 1e5) == 0:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e4 && math.Mod(a, 1e3) == 0:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	case a == math.Trunc(a) && a < 1<<62:
		return numfmt.Thousands(int64(v))
	default:
		return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
	}
}

func floorDivInt(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
