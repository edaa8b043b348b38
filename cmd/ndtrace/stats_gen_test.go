package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestPrintGeneration checks the generated inputs' section of ndtrace stats: absent without a
// report; with one, a line for the dataset and one per source, most functions found first and
// as many as --sources says, losses the largest first and capped, every name escaped.
func TestPrintGeneration(t *testing.T) {
	gen := func(found, units, with int64, median int, losses map[string]int64) *dataset.Generation {
		return &dataset.Generation{GenYield: schemas.GenYield{Found: found, Units: units, WithInput: with, Inputs: 2 * with,
			Traced: 2 * with, Attempts: 100 * units, Coverage: [schemas.CoverageBuckets]int64{8: with}, Losses: losses,
			BySource: map[string]int64{"typed": with, "fuzzed": with}},
			WithInputShare: float64(with) / float64(units), MedianCoverage: median, Rows: 4 * with}
	}
	many := map[string]int64{}
	for i, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		many[k] = int64(i + 1)
	}
	st := &dataset.Stats{
		Dataset:      dataset.SourceStats{RowCounts: dataset.RowCounts{InputSources: map[string]int64{"corpus": 5, "typed": 40, "fuzzed": 40, "test_call": 2}}},
		Repositories: &dataset.Yield{Generation: gen(120, 97, 71, 80, map[string]int64{"async": 3, "needs_io": 5, "\x1b[31mred": 1})},
		Sources: []dataset.SourceStats{
			{Source: "files:small", Yield: &dataset.Yield{Generation: gen(20, 17, 11, 70, nil)}},
			{Source: "files:\x1b[2Jbig", Yield: &dataset.Yield{Generation: gen(100, 80, 60, 90, many)}},
			{Source: "https://example.invalid/tests-only", Yield: &dataset.Yield{}},
		},
	}
	var buf bytes.Buffer
	printGeneration(&buf, st, 0)
	out := buf.String()
	for _, want := range []string{
		"\nGenerated inputs (functions that came without inputs)\n",
		"all: found 120, units 97, with input 71 (73.2%), inputs 142, traced 142, rows 284, attempts 9,700, median coverage 80%+; losses: needs_io 5, async 3, \\x1b[31mred 1\n",
		"line coverage of the units with an input: 0-9% 0, 10-19% 0, 20-29% 0, 30-39% 0, 40-49% 0, 50-59% 0, 60-69% 0, 70-79% 0, 80-89% 71, 90-100% 0\n",
		"inputs kept by source: fuzzed 71, typed 71\n",
		"rows by input source: fuzzed 40, typed 40, corpus 5, test_call 2\n",
		"files:\\x1b[2Jbig: found 100, units 80, with input 60 (75.0%), inputs 120, traced 120, rows 240, attempts 8,000, median coverage 90%+; losses: j 10, i 9, h 8, g 7, f 6, e 5, d 4, c 3 (+2 more)\nfiles:small: found 20,",
		"files:small: found 20, units 17, with input 11 (64.7%), inputs 22, traced 22, rows 44, attempts 1,700, median coverage 70%+; losses: none\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tests-only") || strings.Contains(out, "\x1b") {
		t.Errorf("a source without generation listed, or an escape left raw:\n%s", out)
	}
	buf.Reset()
	printGeneration(&buf, st, 1)
	if out := buf.String(); !strings.Contains(out, "(1 of 2 sources, most functions found first; --sources 0 for all)") || strings.Contains(out, "files:small") {
		t.Errorf("--sources 1:\n%s", out)
	}
	// Nothing generated: no section.
	for _, st := range []*dataset.Stats{{}, {Repositories: &dataset.Yield{}}} {
		buf.Reset()
		printGeneration(&buf, st, 0)
		if buf.Len() != 0 {
			t.Errorf("section without a report: %q", buf.String())
		}
	}
	// No unit kept an input: no median.
	if got := genLine(&dataset.Generation{MedianCoverage: -1}); !strings.Contains(got, "with input 0, ") || !strings.Contains(got, "median coverage -;") {
		t.Errorf("empty report: %q", got)
	}
}
