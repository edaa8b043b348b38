package dashboard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/schemas"
)

// metric is a distribution of n trajectories: all in one histogram bin [lo, lo+width).
func metric(name string, n, lo, width int64, mean float64) dataset.Metric {
	return dataset.Metric{Name: name, Count: n, Sum: int64(mean * float64(n)), Mean: mean, Min: lo, Max: lo + width - 1,
		P25: mean / 2, P50: mean, P90: 2 * mean, Histogram: dataset.Histogram{Lo: lo, Width: width, Counts: []int64{n}}}
}

// testStats are the statistics of a function-level dataset of n forward trajectories of the given
// mean length in tokens, with one reject class.
func testStats(n int64, tokens float64) *dataset.Stats {
	metrics := []dataset.Metric{metric("tokens", n, 0, 100, tokens), metric("actions", n, 0, 10, 5),
		metric("events", n, 0, 10, 7), metric("code_chars", n, 0, 50, 40), metric("learned_tokens", n, 0, 50, tokens/2),
		metric("action:step_into", n, 0, 10, 3), metric("event:line", n, 0, 10, 4)}
	group := func(name, level, dir string) dataset.Group {
		return dataset.Group{Name: name, Level: level, Direction: dir, Metrics: metrics,
			RowCounts: dataset.RowCounts{Trajectories: n, Traces: n, Exits: map[string]int64{"normal": n}}}
	}
	return &dataset.Stats{Format: dataset.StatsFormat, FormatVersion: dataset.StatsFormatVersion,
		CreatedAt: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC), Totals: dataset.Totals{Rows: n},
		Groups: []dataset.Group{group("all", "", ""), group("forward", "", "forward"), group("function", "function", ""),
			group("function/forward", "function", "forward")},
		Rejects: []dataset.RejectClass{{Class: "timeout", Count: 2, Examples: []dataset.RejectExample{{Key: "corpus/a.jsonl#4", Reason: "timeout: ran for 10s"}}}}}
}

func get(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	body, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Code, string(body)
}

func TestHandler(t *testing.T) {
	v := &schemas.Verification{Checked: 10, Agreed: 9, Agreement: 0.9, Passed: true, StartedAt: time.Date(2026, 11, 27, 13, 0, 0, 0, time.UTC),
		Sample: schemas.VerifySample{Size: 10, Seed: 7}}
	d, err := New([]Dataset{
		{URL: "data/one", From: "from stats.json", Stats: testStats(4, 30)},
		{URL: "data/<two>", From: "computed from the shards", Stats: testStats(8, 60), Verify: v},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	tests := []struct {
		name, target string
		status       int
		has          []string
	}{
		{"page", "/", 200, []string{"<!DOCTYPE html>", "data/one", "data/&lt;two&gt;", "statistics computed from the shards",
			`id="fig5-tokens"`, `id="hist-tokens-function"`, `id="actions-function"`, `id="events-function"`,
			`<code>corpus/a.jsonl#4</code> timeout: ran for 10s`, `<strong class="pass">passed</strong>`, `<td class="n">90.0%</td>`,
			"background: #1c7ed6", "background: #e8590c"}},
		{"forward", "/?direction=forward", 200, []string{`class="active">Forward</a>`, "function level, forward"}},
		{"bad direction", "/?direction=sideways", 400, []string{"direction must be"}},
		{"api stats", "/api/stats?dataset=1", 200, []string{`"format": "ndtrace-stats"`, `"rows": 8`}},
		{"api stats bad index", "/api/stats?dataset=2", 400, []string{`"error": "dataset=\"2\": want an index from 0 to 1"`}},
		{"api datasets", "/api/datasets", 200, []string{`"index": 1, "url": "data/<two>", "statistics": "computed from the shards"`}},
		{"unknown path", "/nope", 404, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(t, h, tc.target)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %.300s", status, tc.status, body)
			}
			for _, s := range tc.has {
				if !strings.Contains(body, s) {
					t.Errorf("body lacks %q", s)
				}
			}
		})
	}
	// Every chart has bars, one per dataset in the histogram's one bin.
	_, page := get(t, h, "/")
	for _, id := range []string{"hist-tokens-function", "fig5-tokens", "actions-function"} {
		m := regexp.MustCompile(`<svg id="` + id + `"[^>]*>(.*?)</svg>`).FindStringSubmatch(page)
		if m == nil {
			t.Errorf("no SVG %s", id)
		} else if strings.Count(m[1], "<rect") < 2 {
			t.Errorf("SVG %s has no bars: %.300s", id, m[1])
		}
	}
}

func TestNewEmpty(t *testing.T) {
	d, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if status, body := get(t, d.Handler(), "/"); status != 200 || !strings.Contains(body, "no trajectories") {
		t.Errorf("empty dashboard: status %d: %.300s", status, body)
	}
}
