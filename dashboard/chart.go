package dashboard

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/internal/numfmt"
)

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
		c.printf(`<text class="xtick" x="%.1f" y="%d" text-anchor="middle" fill="#495057">%s</text>`, x, marginT+plotH+16, svgEsc(compactNum(v)))
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
		return newSVGChart(kind+"-"+level, "bars", title, chartW, chartH).empty(chartW, chartH, "no "+kind)
	}
	// The type labels go on as many staggered rows as the widest needs to clear its neighbours
	// (the eight action types do not fit side by side on one), the chart growing to hold them.
	slot := float64(plotW) / float64(len(groups))
	rows := labelRows(shown, slot)
	height := chartH + (rows-1)*labelRowH
	c := newSVGChart(kind+"-"+level, "bars", title, chartW, height)
	top = axisCeil(top)
	c.yAxis(top, compactNum)
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
		c.printf(`<text class="xtick" x="%.1f" y="%d" text-anchor="middle" fill="#495057">%s</text>`, x+slot/2, marginT+plotH+16+(i%rows)*labelRowH, svgEsc(shown[i]))
	}
	c.printf(`<text x="%d" y="%d" text-anchor="middle" fill="#495057">mean %s per trajectory, by type</text>`, marginL+plotW/2, height-6, svgEsc(kind))
	return c.html()
}

// labelRowH is the distance between two rows of staggered axis labels (SVG units).
const labelRowH = 14

// labelRows returns on how many staggered rows labels centred slot apart must go so that none
// reaches its neighbours on its row, by a generous estimate of their width (textWidth); at most 4.
func labelRows(labels []string, slot float64) int {
	rows := 1
	for _, l := range labels {
		for rows < 4 && textWidth(l) > float64(rows)*slot-6 {
			rows++
		}
	}
	return rows
}

// textWidth estimates the width of s at the charts' font size, on the wide side: 0.62 em a
// character (system-ui's lowercase letters and underscores are narrower).
func textWidth(s string) float64 { return 0.62 * fontSize * float64(utf8.RuneCountInString(s)) }

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
		c.printf(`<text class="xtick" x="%.1f" y="%d" text-anchor="middle" fill="#495057">%s</text>`, x, bottom+14, svgEsc(compactNum(v)))
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
