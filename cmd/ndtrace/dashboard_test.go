package main

import (
	"bufio"
	"context"
	"encoding/json"
	"image"
	"image/png"
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

// startDashboard runs "ndtrace dashboard" in-process on a free loopback port with the given
// datasets and returns its base URL ("http://127.0.0.1:PORT/"). The dashboard is stopped (its
// context cancelled, as SIGINT does) when the test ends, and must then return without error.
func startDashboard(t *testing.T, urls ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	args := []string{"--addr", "127.0.0.1:0"}
	for _, u := range urls {
		args = append(args, "--dataset", u)
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := runDashboard(ctx, args, pw, io.Discard)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("dashboard did not start: %v (%v)", err, <-done)
	}
	m := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/) `).FindStringSubmatch(line)
	if m == nil {
		cancel()
		t.Fatalf("no URL in %q", line)
	}
	go io.Copy(io.Discard, pr)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dashboard returned %v after shutdown", err)
		}
	})
	return m[1]
}

// httpGet returns the status and body of GET url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestDashboardServer(t *testing.T) {
	dir := t.TempDir()
	one := writeStatsCLIDataset(t, dir, "run-one", 1)
	two := writeStatsCLIDataset(t, dir, "run-two", 3)
	writeStoredStats(t, two, nil)
	base := startDashboard(t, one, two)

	tests := []struct {
		name   string
		path   string
		status int
		has    []string
	}{
		{"page", "", 200, []string{"<!DOCTYPE html>", one, two, `id="hist-tokens-function"`, `id="hist-tokens-repository"`,
			`id="hist-code_chars-repository"`, `id="fig5-tokens"`, `id="actions-function"`, `id="rejects-table"`,
			"timeout", "decontaminated", "corpus/a.jsonl#4", "statistics computed from the shards", "statistics from stats.json"}},
		{"forward only", "?direction=forward", 200, []string{`class="active">Forward</a>`, "function level, forward"}},
		{"bad direction", "?direction=sideways", 400, []string{"direction must be"}},
		{"api stats", "api/stats?dataset=1", 200, []string{`"format": "ndtrace-stats"`}},
		{"api stats bad index", "api/stats?dataset=2", 400, []string{`"error": "dataset=\"2\": want an index from 0 to 1"`}},
		{"api stats no index", "api/stats", 400, []string{`"error"`}},
		{"api datasets", "api/datasets", 200, []string{`"index": 0, "url": "` + one, `"statistics": "from stats.json"`}},
		{"unknown path", "nope", 404, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := httpGet(t, base+tc.path)
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

	// /api/stats is exactly the dataset's statistics.
	_, body := httpGet(t, base+"api/stats?dataset=1")
	want, err := readFileFromStore(two, dataset.StatsKey)
	if err != nil {
		t.Fatal(err)
	}
	if body != string(want) {
		t.Error("/api/stats?dataset=1 differs from the dataset's stats.json")
	}
	var st dataset.Stats
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Dataset.Tokens != 3*1310 {
		t.Errorf("api stats: %v, tokens %d", err, st.Dataset.Tokens)
	}
}

func TestDashboardErrors(t *testing.T) {
	dir := t.TempDir()
	good := writeStatsCLIDataset(t, dir, "good", 1)
	tests := []struct {
		name      string
		args      []string
		code      int
		stderrHas string
	}{
		{"no manifest", []string{"--dataset", good, "--dataset", filepath.Join(dir, "empty")}, 1,
			"dataset 1: " + filepath.Join(dir, "empty") + ": no dataset: folder " + filepath.Join(dir, "empty") + " does not exist"},
		{"no dataset", nil, 2, "missing --dataset URL"},
		{"positional", []string{good}, 2, "unexpected argument"},
		{"bad address", []string{"--dataset", good, "--addr", "256.0.0.1:bad"}, 1, "listen on 256.0.0.1:bad"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCmd(append([]string{"dashboard"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.stderrHas) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.stderrHas)
			}
		})
	}
}

// requireChromium returns the Chromium a test drives (chromiumPath); without one the test is
// skipped, or fails when CI is set.
func requireChromium(t *testing.T) string {
	t.Helper()
	chromium := chromiumPath()
	if chromium == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed (CI is set): apt-get install chromium, or set NDTRACE_CHROMIUM")
		}
		t.Skip("chromium is not installed: apt-get install chromium, or set NDTRACE_CHROMIUM")
	}
	return chromium
}

// chromiumPath finds a Chromium to drive headless: $NDTRACE_CHROMIUM, chromium, chromium-browser.
func chromiumPath() string {
	if p := os.Getenv("NDTRACE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestDashboardChromium loads the dashboard in real headless Chromium: it takes a screenshot (kept
// at $NDTRACE_DASHBOARD_SCREENSHOT if set) and checks the DOM Chromium built. Without Chromium it
// is skipped, or fails when CI is set.
func TestDashboardChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("the dashboard in headless Chromium: long integration test; run without -short")
	}
	chromium := requireChromium(t)
	dir := t.TempDir()
	one := writeStatsCLIDataset(t, dir, "run-one", 1)
	two := writeStatsCLIDataset(t, dir, "run-two", 3)
	writeTestVerification(t, two)
	base := startDashboard(t, one, two)

	tmp := t.TempDir()
	shot := filepath.Join(tmp, "page.png")
	flags := func(profile string, extra ...string) []string {
		return append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--disable-dev-shm-usage", "--hide-scrollbars", "--user-data-dir=" + filepath.Join(tmp, profile)}, extra...)
	}
	ctx := t.Context()
	out, err := exec.CommandContext(ctx, chromium, flags("shot", "--screenshot="+shot, "--window-size=1280,2000", base)...).CombinedOutput()
	if err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	dom, err := exec.CommandContext(ctx, chromium, flags("dom", "--dump-dom", base)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}

	// The screenshot: a 1280×2000 PNG with real content (many colours, not a blank page).
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, out)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 2000 {
		t.Errorf("screenshot is %dx%d, want 1280x2000", b.Dx(), b.Dy())
	}
	if n := countColors(img, 64); n < 64 {
		t.Errorf("screenshot has only %d colours: the page looks empty", n)
	}
	if keep := os.Getenv("NDTRACE_DASHBOARD_SCREENSHOT"); keep != "" {
		data, err := os.ReadFile(shot)
		if err == nil {
			err = os.WriteFile(keep, data, 0o644)
		}
		if err != nil {
			t.Errorf("keep screenshot: %v", err)
		}
	}

	// The DOM Chromium rendered: both datasets, the numbers, the histograms and the rejects table.
	page := string(dom)
	for _, s := range []string{
		one, two,
		`<td class="n">1,310</td>`, `<td class="n">3,930</td>`, // tokens of each dataset
		`<td class="n">37.5</td>`, `<td class="n">112.5</td>`, // mean tokens, function/forward
		`<td class="n">460</td>`, // p90 tokens, repository/forward
	} {
		if !strings.Contains(page, s) {
			t.Errorf("DOM lacks %q", s)
		}
	}
	for _, id := range []string{"hist-tokens-function", "hist-tokens-repository", "hist-actions-function", "hist-events-repository",
		"hist-code_chars-function", "fig5-tokens", "fig5-actions", "fig5-events", "actions-function", "actions-repository"} {
		re := regexp.MustCompile(`<svg id="` + id + `"[^>]*>(.*?)</svg>`)
		m := re.FindStringSubmatch(page)
		if m == nil {
			t.Errorf("DOM has no SVG %s", id)
			continue
		}
		if strings.Count(m[1], "<rect") < 2 {
			t.Errorf("SVG %s has no bars: %.300s", id, m[1])
		}
	}
	// The certificate of dataset two (ndtrace verify), and none for dataset one.
	verify := regexp.MustCompile(`(?s)<table id="verify-table">(.*?)</table>`).FindStringSubmatch(page)
	if verify == nil {
		t.Fatal("DOM has no verification table")
	}
	for _, s := range []string{"#2</th>", `class="fail">failed`, `<td class="n">9 of 10</td>`, `<td class="n">80.0%</td>`,
		"<td>text=1</td>", "<td>repository_moved=4</td>", `<td class="n">100.0%</td>`, "inverse=2 not_re_executed=4"} {
		if !strings.Contains(verify[1], s) {
			t.Errorf("verification table lacks %q: %s", s, verify[1])
		}
	}
	if strings.Contains(verify[1], "#1</th>") {
		t.Error("verification table has a column for dataset 1, which was not verified")
	}
	rejects := regexp.MustCompile(`(?s)<table id="rejects-table">(.*?)</table>`).FindStringSubmatch(page)
	if rejects == nil {
		t.Fatal("DOM has no rejects table")
	}
	for _, s := range []string{"<th>reason</th>", "<code>timeout</code></td><td class=\"n\">2</td>",
		"<code>corpus/a.jsonl#4</code> timeout: ran for 10s", "<code>quarantined</code>", "<code>malformed</code>"} {
		if !strings.Contains(rejects[1], s) {
			t.Errorf("rejects table lacks %q", s)
		}
	}
}

// writeTestVerification stores a certificate (as ndtrace verify would) for the dataset at url.
func writeTestVerification(t *testing.T, url string) {
	t.Helper()
	st, m := openHead(t, url)
	v := &schemas.Verification{Format: schemas.VerifyFormat, Version: m.Version, DatasetCreatedAt: m.CreatedAt, Rows: m.Totals.Rows,
		Sample: schemas.VerifySample{Seed: 7, Requested: 200, Size: 9, Strata: 4}, Checked: 5, Agreed: 4, Agreement: 0.8,
		Differences: map[string]int{schemas.DiffText: 1}, NotReExecuted: map[string]int{schemas.NotRunRepositoryMoved: 4},
		Replay:       schemas.VerifyReplay{Run: 3, Agreed: 3, NotReplayed: map[string]int{"inverse": 2, schemas.NotReplayedNotReExecuted: 4}},
		MinAgreement: 1, Verifier: schemas.VerifyVersions{Tracer: "5", Pipeline: "1"}, StartedAt: m.CreatedAt}
	if _, err := verify.Write(context.Background(), st, m, v); err != nil {
		t.Fatal(err)
	}
}

// countColors counts distinct colours in img, up to limit.
func countColors(img image.Image, limit int) int {
	seen := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
			if len(seen) >= limit {
				return len(seen)
			}
		}
	}
	return len(seen)
}
