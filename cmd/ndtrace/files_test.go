package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/schemas"
)

// filesCorpus are the modules of TestRunFilesSource's corpus: functions that come without inputs,
// typed and untyped, a doctest, a method, one that needs I/O and an async one.
var filesCorpus = map[string]string{
	"text/words.py": `def count_words(text):
    """Count the words of text.

    >>> count_words("a b  c")
    3
    """
    return len(text.split())


def initials(name: str) -> str:
    parts = [p for p in name.split() if p]
    if not parts:
        return ""
    return "".join(p[0].upper() for p in parts)


async def fetch(url):
    return url


def read_config(path):
    with open(path) as f:
        return f.read()
`,
	"nums/stats.py": `from typing import List, Optional


def mean(xs: List[float]) -> Optional[float]:
    if not xs:
        return None
    total = 0.0
    for x in xs:
        total += x
    return total / len(xs)


def clamp(n: int, lo: int = 0, hi: int = 10) -> int:
    if n < lo:
        return lo
    if n > hi:
        return hi
    return n


class Counter:
    def __init__(self):
        self.counts = {}

    def add(self, key: str, n: int = 1) -> int:
        self.counts[key] = self.counts.get(key, 0) + n
        return self.counts[key]
`,
}

// TestRunFilesSource turns a folder of Python files that come without inputs into function-level
// rows (issue 30): functions are found and given generated inputs in the sandbox, the inputs kept
// are traced as function-level items where their modules live, rows say how each input was made,
// the yield report counts what was found and lost, and the same spec gives byte-identical shards.
func TestRunFilesSource(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus")
	for name, text := range filesCorpus {
		p := filepath.Join(corpus, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runOnce := func(name string) (string, *dataset.Manifest) {
		out := filepath.Join(dir, name)
		spec := writeSpec(t, dir, fmt.Sprintf(`name: files
output: %s
sources:
  - kind: files
    path: %s
inputs:
  per_function: 3
limits:
  timeout: 5s
created_at: 2026-11-22T00:00:00Z
`, out, corpus))
		var stdout, stderr bytes.Buffer
		if code := run([]string{"run", "--spec", spec}, &stdout, &stderr); code != 0 {
			t.Fatalf("run: exit %d: %s", code, stderr.String())
		}
		// The progress display shows the functions given inputs and the cost of one.
		if !regexp.MustCompile(`inputs generated for \d+ functions \([0-9.]+m?s per function\)`).MatchString(stdout.String() + stderr.String()) {
			t.Errorf("the progress shows no generation:\n%s%s", stdout.String(), stderr.String())
		}
		m, _ := checkDataset(t, out)
		return out, m
	}
	out, m := runOnce("data1")
	// Its groups of files are no rejects: their rows are their functions'.
	if len(m.Rejects) != 0 {
		t.Errorf("rejects %+v", m.Rejects)
	}
	rows := allRows(t, out)
	sources := map[string]int{}
	funcs := map[string]bool{}
	for _, r := range rows {
		if r.Level != "function" {
			t.Errorf("row %s at level %s: a files source gives function-level rows only", r.ID, r.Level)
		}
		if !schemas.GeneratedInputSource(r.InputSource) {
			t.Errorf("row %s: input_source %q, want a generated one", r.ID, r.InputSource)
		}
		if !strings.HasPrefix(r.RepoURL, "files:") {
			t.Errorf("row %s: repo_url %q", r.ID, r.RepoURL)
		}
		sources[r.InputSource]++
		funcs[r.Path+":"+r.QualName] = true
	}
	t.Logf("rows %d by input source %v; functions %v", len(rows), sources, funcs)
	if sources[schemas.InputSourceDoctest] == 0 {
		t.Errorf("no row from count_words's doctest: %v", sources)
	}
	for _, want := range []string{"text/words.py:count_words", "text/words.py:initials", "nums/stats.py:mean", "nums/stats.py:clamp"} {
		if !funcs[want] {
			t.Errorf("no rows of %s", want)
		}
	}
	for f := range funcs {
		if strings.HasSuffix(f, ":fetch") || strings.HasSuffix(f, ":read_config") {
			t.Errorf("rows of %s, which cannot be a unit (async, I/O)", f)
		}
	}
	// The yield report: what was found, kept and lost, in stats.json and ndtrace stats.
	var stdout, stderr bytes.Buffer
	if code := run([]string{"stats", "--json", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("stats --json: exit %d: %s", code, stderr.String())
	}
	var st struct {
		Repositories struct {
			Generation *schemas.GenYield `json:"generation"`
		} `json:"repositories"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &st); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, stdout.String())
	}
	g := st.Repositories.Generation
	if g == nil || g.Modules != 2 || g.Found < 7 || g.Units < 5 || g.WithInput < 5 || g.Inputs < int64(len(funcs)) || g.Losses["async"] != 1 {
		t.Errorf("generation yield %+v", g)
	}
	stdout.Reset()
	if code := run([]string{"stats", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("stats: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "Generated inputs") {
		t.Errorf("ndtrace stats shows no generated inputs:\n%s", stdout.String())
	}
	// The same spec, once more: byte-identical shards.
	_, m2 := runOnce("data2")
	if h1, h2 := shardHashes(m), shardHashes(m2); len(h1) == 0 || !slices.Equal(h1, h2) {
		t.Errorf("two runs of the same spec: shards %v and %v", h1, h2)
	}
	// verify re-executes the rows (their files checked out again from the items).
	code, so, se := runVerifyCLI(t, out, "--fraction", "1", "--seed", "1")
	if code != 0 {
		t.Errorf("verify: exit %d\n%s%s", code, so, se)
	}
}
