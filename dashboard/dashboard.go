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
	"html/template"
	"io"
	"log/slog"
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
// /api/stats?dataset=N (dataset N's statistics as JSON, from 0), /api/datasets (the datasets'
// index, URL and where their statistics come from) and /api/generation (every dataset's report
// of generated inputs and its rows by input source).
func (d *Dashboard) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.page)
	mux.HandleFunc("GET /api/stats", d.apiStats)
	mux.HandleFunc("GET /api/datasets", d.apiDatasets)
	mux.HandleFunc("GET /api/generation", d.apiGeneration)
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
		// Generation, Losses, CoverageChart, InputRows and InputSourceCols are the generation
		// panel: the datasets' reports, their losses (the largest first, maxLossRows each), the
		// coverage histogram, and the rows by input source (generation.go).
		Generation      []dashGenRow
		Losses          []dashLossRow
		CoverageChart   template.HTML
		InputRows       []dashInputRow
		InputSourceCols []string
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
	d.generationPanel(&p)
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
