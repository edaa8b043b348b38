package dashboard

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/internal/numfmt"
	"github.com/ndtrace/ndtrace/schemas"
)

// The generation panel (issue 30): what generating inputs gave for functions that came without
// them, per dataset: the line coverage of the units with an input (an SVG histogram), the share
// of units with an input, the losses by reason, and the rows by input source.

// maxLossRows is the most loss reasons listed per dataset (the largest first).
const maxLossRows = 20

type (
	// dashGenRow is one dataset's generation report as the page shows it.
	dashGenRow struct {
		DS *dashDataset
		*dataset.Generation
		// Share is the share of units with an input; Median the median coverage ("80%+", "–").
		Share, Median string
		// BySource is the inputs kept per source, the largest first.
		BySource string
	}
	// dashLossRow is one loss reason of one dataset.
	dashLossRow struct {
		DS     *dashDataset
		Reason string
		Count  int64
		// More is set on a dataset's last row when reasons were left out: how many.
		More int
	}
	// dashInputRow is one dataset's rows by input source, in the order of InputSourceCols.
	dashInputRow struct {
		DS     *dashDataset
		Counts []int64
	}
)

// inputSourceCols are the columns of the rows by input source: the sources, then other.
var inputSourceCols = append(slices.Clone(schemas.InputSources), dataset.GenOther)

// generationPanel fills the page's generation panel: nothing when no dataset generated inputs.
func (d *Dashboard) generationPanel(p *dashPage) {
	for _, ds := range d.datasets {
		if in := ds.Stats.Dataset.InputSources; len(in) > 0 {
			row := dashInputRow{DS: ds}
			for _, k := range inputSourceCols {
				row.Counts = append(row.Counts, in[k])
			}
			p.InputRows = append(p.InputRows, row)
		}
		g := generationOf(ds.Stats)
		if g == nil {
			continue
		}
		median := "–"
		if g.MedianCoverage >= 0 {
			median = fmt.Sprintf("%d%%+", g.MedianCoverage)
		}
		p.Generation = append(p.Generation, dashGenRow{DS: ds, Generation: g, Share: percent(g.WithInput, g.Units),
			Median: median, BySource: byCount(g.BySource, 0)})
		keys := sortedByCount(g.Losses)
		shown := keys[:min(len(keys), maxLossRows)]
		for i, k := range shown {
			row := dashLossRow{DS: ds, Reason: k, Count: g.Losses[k]}
			if i == len(shown)-1 {
				row.More = len(keys) - len(shown)
			}
			p.Losses = append(p.Losses, row)
		}
	}
	if len(p.InputRows) > 0 {
		p.InputSourceCols = inputSourceCols
	}
	if len(p.Generation) > 0 {
		p.CoverageChart = d.coverageChart()
	}
}

// generationOf is a dataset's generation report, or nil.
func generationOf(st *dataset.Stats) *dataset.Generation {
	if st.Repositories == nil {
		return nil
	}
	return st.Repositories.Generation
}

// sortedByCount returns the keys of counts, the largest count first, then by key.
func sortedByCount(counts map[string]int64) []string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmpInt64Desc(counts[a], counts[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return keys
}

// byCount formats counts as "k n, k n", the largest first; with limit > 0 at most limit.
func byCount(counts map[string]int64, limit int) string {
	keys := sortedByCount(counts)
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + numfmt.Thousands(counts[k])
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, ", ")
}

// coverageChart draws the line coverage of the units with an input in its ten buckets, one bar
// per dataset within each bucket, as a share of the dataset's units with an input.
func (d *Dashboard) coverageChart() template.HTML {
	const title = "Line coverage of the units with an input"
	c := newSVGChart("gen-coverage", "hist", title, chartW, chartH)
	type series struct {
		ds    *dashDataset
		g     *dataset.Generation
		total int64
	}
	var ss []series
	var top float64
	for _, ds := range d.datasets {
		g := generationOf(ds.Stats)
		if g == nil {
			continue
		}
		var total int64
		for _, n := range g.Coverage {
			total += n
		}
		if total <= 0 {
			continue
		}
		for _, n := range g.Coverage {
			top = max(top, float64(n)/float64(total))
		}
		ss = append(ss, series{ds, g, total})
	}
	if len(ss) == 0 {
		return c.empty(chartW, chartH, "no unit kept an input")
	}
	top = axisCeil(top)
	c.yAxis(top, func(v float64) string { return strconv.FormatFloat(math.Round(v*1000)/10, 'f', -1, 64) + "%" })
	slot := float64(plotW) / schemas.CoverageBuckets
	for b := range schemas.CoverageBuckets {
		x := marginL + float64(b)*slot
		bw := (slot * 0.8) / float64(len(ss))
		lo, hi := b*100/schemas.CoverageBuckets, (b+1)*100/schemas.CoverageBuckets-1
		if b == schemas.CoverageBuckets-1 {
			hi = 100
		}
		for k, s := range ss {
			n := s.g.Coverage[b]
			share := float64(max(n, 0)) / float64(s.total)
			h := share / top * plotH
			c.printf(`<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.8"><title>%s: %d–%d%% of the lines: %s units (%.1f%%)</title></rect>`,
				x+slot*0.1+float64(k)*bw, marginT+plotH-h, math.Max(bw-1, 1), h, s.ds.Color, svgEsc(s.ds.URL), lo, hi, numfmt.Thousands(n), share*100)
		}
		c.printf(`<text class="xtick" x="%.1f" y="%d" text-anchor="middle" fill="#495057">%d%%</text>`, x+slot/2, marginT+plotH+16, lo)
	}
	c.printf(`<text x="%d" y="%d" text-anchor="middle" fill="#495057">share of the function's lines its kept inputs reached (bucket's lower bound)</text>`,
		marginL+plotW/2, chartH-6)
	return c.html()
}

// apiGeneration serves every dataset's generation report and rows by input source as JSON:
// [{"index", "url", "generation" (null if none), "input_sources"}].
func (d *Dashboard) apiGeneration(w http.ResponseWriter, _ *http.Request) {
	type entry struct {
		Index        int                 `json:"index"`
		URL          string              `json:"url"`
		Generation   *dataset.Generation `json:"generation"`
		InputSources map[string]int64    `json:"input_sources"`
	}
	out := make([]entry, 0, len(d.datasets))
	for i, ds := range d.datasets {
		in := ds.Stats.Dataset.InputSources
		if in == nil {
			in = map[string]int64{}
		}
		out = append(out, entry{Index: i, URL: ds.URL, Generation: generationOf(ds.Stats), InputSources: in})
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		httpJSONError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(data, '\n'))
}
