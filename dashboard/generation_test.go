package dashboard

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/schemas"
)

// withGeneration adds a generation report to st: units whose coverage is in buckets, losses
// by reason, and rows by input source.
func withGeneration(st *dataset.Stats, coverage [schemas.CoverageBuckets]int64, losses map[string]int64) *dataset.Stats {
	var with int64
	for _, n := range coverage {
		with += n
	}
	g := &dataset.Generation{GenYield: schemas.GenYield{Modules: 4, Found: 2 * with, Units: with + 5, WithInput: with,
		Inputs: 3 * with, Attempts: 100 * with, Traced: 3 * with, Coverage: coverage,
		BySource: map[string]int64{"typed": 2 * with, "fuzzed": with}, Losses: losses},
		WithInputShare: float64(with) / float64(with+5), Rows: 6 * with}
	g.MedianCoverage = g.GenYield.MedianCoverage()
	st.Repositories = &dataset.Yield{Repositories: 1, Generation: g}
	st.Dataset.InputSources = map[string]int64{"corpus": 10, "typed": 4 * with, "fuzzed": 2 * with}
	return st
}

// TestGenerationPanel checks the generation panel: the coverage histogram (a bar per dataset
// and bucket, as a share of its units with an input), the with-input share, the losses the
// largest first and capped at maxLossRows per dataset, escaped like every repository text, the
// rows by input source, and /api/generation.
func TestGenerationPanel(t *testing.T) {
	many := map[string]int64{"<script>alert(1)</script>": 1000}
	for i := range 30 {
		many[fmt.Sprintf("reason_%02d", i)] = int64(i + 1)
	}
	one := withGeneration(testStats(4, 30), [schemas.CoverageBuckets]int64{2: 1, 8: 4, 9: 3}, many)
	two := withGeneration(testStats(8, 60), [schemas.CoverageBuckets]int64{9: 10}, map[string]int64{"async": 2})
	plain := testStats(3, 20) // no generation, no input sources
	d, err := New([]Dataset{{URL: "one", Stats: one}, {URL: "two", Stats: two}, {URL: "plain", Stats: plain}})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	status, page := get(t, h, "/")
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	for _, want := range []string{`<section id="generation">`, `id="gen-coverage"`, `<td class="n">8 (61.5%)</td>`, `<td class="n">90%&#43;</td>`,
		`<td class="n">80%&#43;</td>`, `typed 16, fuzzed 8`, `<code>&lt;script&gt;alert(1)&lt;/script&gt;</code>`, `(and 11 more reasons)`,
		`<section id="input-sources">`, `<th class="n">test_call</th>`, `/api/generation`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>alert") {
		t.Error("a loss reason reached the page unescaped")
	}
	losses := regexp.MustCompile(`(?s)<table id="losses-table">.*?</table>`).FindString(page)
	if got := strings.Count(losses, "<tr><td>"); got != maxLossRows+1 {
		t.Errorf("%d loss rows, want %d (20 of dataset one, 1 of two)", got, maxLossRows+1)
	}
	if i, j := strings.Index(losses, "alert"), strings.Index(losses, "reason_29"); i < 0 || j < 0 || i > j || strings.Contains(losses, "reason_09<") {
		t.Errorf("losses not the largest first, or not capped:\n%s", losses)
	}
	svg := regexp.MustCompile(`(?s)<svg id="gen-coverage"[^>]*>(.*?)</svg>`).FindStringSubmatch(page)
	if svg == nil {
		t.Fatal("no coverage chart")
	}
	// Ten buckets, two datasets with a report: 20 bars; dataset one has 4 of its 8 units in 80–89%.
	if n := strings.Count(svg[1], `<rect class="bar"`); n != 2*schemas.CoverageBuckets {
		t.Errorf("%d bars, want %d", n, 2*schemas.CoverageBuckets)
	}
	if !strings.Contains(svg[1], "one: 80–89% of the lines: 4 units (50.0%)") || !strings.Contains(svg[1], "two: 90–100% of the lines: 10 units (100.0%)") {
		t.Errorf("bar titles: %.600s", svg[1])
	}

	status, body := get(t, h, "/api/generation")
	var api []struct {
		Index        int                 `json:"index"`
		URL          string              `json:"url"`
		Generation   *dataset.Generation `json:"generation"`
		InputSources map[string]int64    `json:"input_sources"`
	}
	if err := json.Unmarshal([]byte(body), &api); status != 200 || err != nil || len(api) != 3 {
		t.Fatalf("/api/generation: %d %v: %.300s", status, err, body)
	}
	if api[0].Generation == nil || api[0].Generation.WithInput != 8 || api[1].Generation.Losses["async"] != 2 || api[2].Generation != nil ||
		api[1].InputSources["typed"] != 40 || api[2].InputSources == nil {
		t.Errorf("/api/generation: %s", body)
	}
	// The statistics' JSON carries the report too.
	if _, body := get(t, h, "/api/stats?dataset=1"); !strings.Contains(body, `"generation": {`) || !strings.Contains(body, `"median_coverage": 90`) {
		t.Errorf("/api/stats lacks the generation: %.400s", body)
	}
}

// TestGenerationPanelAbsent: datasets that generated nothing have no generation panel, and no
// rows-by-input-source table when their rows have none.
func TestGenerationPanelAbsent(t *testing.T) {
	d, err := New([]Dataset{{URL: "plain", Stats: testStats(3, 20)}})
	if err != nil {
		t.Fatal(err)
	}
	_, page := get(t, d.Handler(), "/")
	if strings.Contains(page, `id="generation"`) || strings.Contains(page, `id="input-sources"`) || strings.Contains(page, "gen-coverage") {
		t.Error("a generation panel without a report")
	}
	// A report whose units kept no input draws an empty chart.
	st := withGeneration(testStats(3, 20), [schemas.CoverageBuckets]int64{}, nil)
	d, _ = New([]Dataset{{URL: "none", Stats: st}})
	_, page = get(t, d.Handler(), "/")
	if !strings.Contains(page, "no unit kept an input") || !strings.Contains(page, "No function lost.") || !strings.Contains(page, `<td class="n">–</td>`) {
		t.Errorf("empty report: %.2000s", page[strings.Index(page, `<section id="generation">`):])
	}
}
