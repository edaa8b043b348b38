package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/verify"
)

// layoutScript measures the page as Chromium laid it out and appends the measurements, as JSON, in
// a <pre id="ndtrace-layout">: each table's scroll and client width, and each chart's box and the
// boxes of its x-axis labels (text.xtick).
const layoutScript = `<script>
(function () {
  var out = {width: window.innerWidth, tables: [], charts: []};
  document.querySelectorAll('table').forEach(function (t) {
    var s = t.closest('section');
    out.tables.push({id: t.id || (s ? s.id : ''), scroll: t.scrollWidth, client: t.clientWidth});
  });
  document.querySelectorAll('svg.chart').forEach(function (svg) {
    var b = svg.getBoundingClientRect();
    var labels = Array.prototype.map.call(svg.querySelectorAll('text.xtick'), function (e) {
      var r = e.getBoundingClientRect();
      return {text: e.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom};
    });
    out.charts.push({id: svg.id, left: b.left, right: b.right, top: b.top, bottom: b.bottom, labels: labels});
  });
  var pre = document.createElement('pre');
  pre.id = 'ndtrace-layout';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>`

// pageLayout is what layoutScript measures.
type pageLayout struct {
	Width  float64 `json:"width"`
	Tables []struct {
		ID             string
		Scroll, Client float64
	} `json:"tables"`
	Charts []struct {
		ID                       string
		Left, Right, Top, Bottom float64
		Labels                   []layoutBox
	} `json:"charts"`
}

type layoutBox struct {
	Text                     string
	Left, Right, Top, Bottom float64
}

// overlaps reports whether a and b share more than half a pixel both ways.
func (a layoutBox) overlaps(b layoutBox) bool {
	const eps = 0.5
	return a.Left < b.Right-eps && b.Left < a.Right-eps && a.Top < b.Bottom-eps && b.Top < a.Bottom-eps
}

// TestDashboardLayoutChromium lays the dashboard of three verified datasets, every action type
// used, out in real headless Chromium at two window widths and measures it: no table is wider than
// its box (the verification table used to scroll sideways), and no chart's x-axis labels overlap
// each other or leave the chart (the action types' did). Without Chromium it is skipped, or fails
// when CI is set.
func TestDashboardLayoutChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("the dashboard in headless Chromium: long integration test; run without -short")
	}
	chromium := requireChromium(t)
	dir := t.TempDir()
	var urls []string
	for i, name := range []string{"run-one", "run-two", "run-three"} {
		u := writeStatsCLIDataset(t, dir, name, 40*(i+1))
		writeStoredStats(t, u, func(s *dataset.Stats) { everyActionType(s); wideGeneration(s) })
		writeWideVerification(t, u)
		urls = append(urls, u)
	}
	base := startDashboard(t, urls...)
	resp, err := http.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(body), "</body>") {
		t.Fatalf("dashboard page: %v\n%.300s", err, body)
	}
	tmp := t.TempDir()
	page := filepath.Join(tmp, "layout.html")
	if err := os.WriteFile(page, []byte(strings.Replace(string(body), "</body>", layoutScript+"</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, width := range []int{1280, 1024} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			l := measureLayout(t, chromium, filepath.Join(tmp, fmt.Sprint("profile-", width)), page, width)
			if l.Width != float64(width) || len(l.Tables) < 5 || len(l.Charts) < 10 {
				t.Fatalf("measured a %vpx window, %d tables, %d charts", l.Width, len(l.Tables), len(l.Charts))
			}
			verifyTable, genTables := false, 0
			for _, tb := range l.Tables {
				verifyTable = verifyTable || tb.ID == "verify-table"
				if tb.ID == "generation-table" || tb.ID == "losses-table" || tb.ID == "input-sources-table" {
					genTables++
				}
				if tb.Scroll > tb.Client {
					t.Errorf("table %s scrolls sideways: %vpx wide in a %vpx box", tb.ID, tb.Scroll, tb.Client)
				}
			}
			if !verifyTable || genTables != 3 {
				t.Errorf("verification table measured: %v; %d of the 3 generation tables", verifyTable, genTables)
			}
			labelled := 0
			for _, c := range l.Charts {
				labelled += min(len(c.Labels), 1)
				for i, a := range c.Labels {
					if a.Left < c.Left-0.5 || a.Right > c.Right+0.5 || a.Bottom > c.Bottom+0.5 {
						t.Errorf("chart %s: x label %q (%.1f–%.1f) leaves the chart (%.1f–%.1f)", c.ID, a.Text, a.Left, a.Right, c.Left, c.Right)
					}
					for _, b := range c.Labels[i+1:] {
						if a.overlaps(b) {
							t.Errorf("chart %s: x labels %q (%.1f–%.1f) and %q (%.1f–%.1f) overlap", c.ID, a.Text, a.Left, a.Right, b.Text, b.Left, b.Right)
						}
					}
				}
			}
			if labelled < 10 {
				t.Errorf("only %d charts have x-axis labels", labelled)
			}
		})
	}
}

// measureLayout loads page in headless Chromium with a window width px wide and returns what
// layoutScript measured.
func measureLayout(t *testing.T, chromium, profile, page string, width int) pageLayout {
	t.Helper()
	dom, err := exec.CommandContext(t.Context(), chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--user-data-dir="+profile,
		fmt.Sprintf("--window-size=%d,2000", width), "--dump-dom", "file://"+page).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	m := regexp.MustCompile(`(?s)<pre id="ndtrace-layout">(.*?)</pre>`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the page measured nothing: %.500s", dom)
	}
	var l pageLayout
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &l); err != nil {
		t.Fatalf("measurements: %v: %s", err, m[1])
	}
	return l
}

// everyActionType makes every action type used in every group, so that the action charts label
// all of them.
func everyActionType(s *dataset.Stats) {
	for i := range s.Groups {
		for j := range s.Groups[i].Metrics {
			m := &s.Groups[i].Metrics[j]
			if strings.HasPrefix(m.Name, "action:") && m.Sum == 0 {
				m.Sum, m.Mean = int64(len(m.Name))*m.Count+1, float64(len(m.Name))
			}
		}
	}
}

// wideGeneration gives the statistics a generation report with the most loss reasons the
// dashboard lists, long ones among them, and rows of every input source.
func wideGeneration(s *dataset.Stats) {
	losses := map[string]int64{}
	for i := range 24 {
		losses[fmt.Sprintf("reason_%02d_%s", i, strings.Repeat("x", 3*i))] = int64(1000 * (i + 1))
	}
	g := &dataset.Generation{GenYield: schemas.GenYield{Modules: 123456, Found: 1234567, Units: 987654, WithInput: 765432,
		Inputs: 2345678, Attempts: 123456789, Traced: 2345000, Coverage: [schemas.CoverageBuckets]int64{1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000},
		BySource: map[string]int64{"doctest": 12345, "example": 23456, "typed": 345678, "fuzzed": 456789, "llm": 5678}, Losses: losses},
		WithInputShare: 0.775, MedianCoverage: 70, Rows: 4567890}
	if s.Repositories == nil {
		s.Repositories = &dataset.Yield{Repositories: 1}
	}
	s.Repositories.Generation = g
	s.Dataset.InputSources = map[string]int64{}
	for i, k := range append(schemas.InputSources, dataset.GenOther) {
		s.Dataset.InputSources[k] = int64(1234567 * (i + 1))
	}
}

// writeWideVerification stores a certificate for the dataset at url whose every count map is full,
// as a verification that found every kind of difference would leave.
func writeWideVerification(t *testing.T, url string) {
	t.Helper()
	st, m := openHead(t, url)
	v := &schemas.Verification{Format: schemas.VerifyFormat, Version: m.Version, DatasetCreatedAt: m.CreatedAt, Rows: 1234567,
		Sample: schemas.VerifySample{Seed: 1234567890, Requested: 200000, Size: 123456, Strata: 4}, Checked: 120000, Agreed: 119000, Agreement: 0.991,
		Differences: map[string]int{schemas.DiffText: 1000, schemas.DiffInputIDs: 1000, schemas.DiffStatus: 10, schemas.DiffRebuild: 10,
			schemas.DiffItemMissing: 10},
		NotReExecuted: map[string]int{schemas.NotRunRepositoryMoved: 3456},
		Replay: schemas.VerifyReplay{Run: 100000, Agreed: 99000, Differences: map[string]int{"state": 900, "position": 100},
			NotReplayed: map[string]int{schemas.NotReplayedInverse: 20000, schemas.NotReplayedNotReExecuted: 3456, schemas.NotReplayedNoEntry: 12,
				schemas.NotReplayedOther: 3}},
		MinAgreement: 0.99, Verifier: schemas.VerifyVersions{Tracer: "6", Pipeline: "1"}, StartedAt: m.CreatedAt}
	if _, err := verify.Write(context.Background(), st, m, v); err != nil {
		t.Fatal(err)
	}
}
