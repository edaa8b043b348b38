// Command summarize prints the tables of internal/genyield/measure.sh from the `ndtrace stats
// --json` output of its runs: the yield of generating inputs per library, and the throughput of
// items with generated inputs against items whose inputs are given.
//
//	summarize yield LIB=STATS.json:WALL_SECONDS ...
//	summarize throughput NAME=STATS.json:WALL_SECONDS ...
//
// It reads only the files named; nothing is run.
package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/ndtrace/ndtrace/schemas"
)

// maxStatsBytes bounds a stats file read (stats.json of a measured run is some kilobytes).
const maxStatsBytes = 64 << 20

// stats is the part of `ndtrace stats --json` the tables use.
type stats struct {
	Totals struct {
		Rows int64 `json:"rows"`
	} `json:"totals"`
	Counts       map[string]int64 `json:"counts"`
	Repositories struct {
		Generation *struct {
			schemas.GenYield
			MedianCoverage int   `json:"median_coverage"`
			Rows           int64 `json:"rows"`
		} `json:"generation"`
	} `json:"repositories"`
	Groups []struct {
		Name       string           `json:"name"`
		Directions map[string]int64 `json:"directions"`
	} `json:"groups"`
	Rejects []struct {
		Class string `json:"class"`
		Count int64  `json:"count"`
	} `json:"rejects"`
}

// run is one measured run: its name, stats and wall time.
type run struct {
	name string
	st   stats
	wall float64
}

// row is one line of a table, computed from a run.
type row struct {
	Name                                 string
	Found, Units, WithInput, Inputs      int64
	Traced, Rowed, Rows, Items           int64
	UnitsPct, FoundPct                   float64
	Median                               int
	BySource, Losses, Rejects            string
	Wall, ItemsPerSec, RowsPerSec        float64
	ModulesSearched, Attempts, RepoItems int64
}

// parseArg splits NAME=PATH:WALL.
func parseArg(a string) (name, path string, wall float64, err error) {
	name, rest, ok := strings.Cut(a, "=")
	i := strings.LastIndexByte(rest, ':')
	if !ok || name == "" || i < 0 {
		return "", "", 0, fmt.Errorf("argument %q: want NAME=STATS.json:WALL_SECONDS", a)
	}
	path = rest[:i]
	wall, err = strconv.ParseFloat(rest[i+1:], 64)
	if err != nil || wall < 0 {
		return "", "", 0, fmt.Errorf("argument %q: wall time %q: want seconds", a, rest[i+1:])
	}
	return name, path, wall, nil
}

// readStats decodes a stats file of at most maxStatsBytes.
func readStats(r io.Reader) (stats, error) {
	var st stats
	data, err := io.ReadAll(io.LimitReader(r, maxStatsBytes+1))
	if err != nil {
		return st, fmt.Errorf("reading stats: %w", err)
	}
	if len(data) > maxStatsBytes {
		return st, errors.New("stats: larger than 64 MiB")
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("decoding stats: %w", err)
	}
	return st, nil
}

// summarize computes r's row. Rowed counts the function-level items that gave a forward row (one
// per item with trajectories_per_trace 1); Items the items traced (the run's counts.items, the
// files groups or repositories included).
func summarize(r run) row {
	out := row{Name: r.name, Wall: r.wall, Rows: r.st.Totals.Rows, Items: r.st.Counts["items"], Median: -1}
	for _, g := range r.st.Groups {
		if g.Name == "all" {
			out.Rowed = g.Directions["forward"]
		}
	}
	if g := r.st.Repositories.Generation; g != nil {
		out.Found, out.Units, out.WithInput, out.Inputs, out.Traced = g.Found, g.Units, g.WithInput, g.Inputs, g.Traced
		out.ModulesSearched, out.Attempts = g.Modules, g.Attempts
		out.Median = g.MedianCoverage
		out.UnitsPct, out.FoundPct = pct(g.WithInput, g.Units), pct(g.WithInput, g.Found)
		out.BySource = top(g.BySource, 0)
		out.Losses = top(g.Losses, 4)
		out.RepoItems = r.st.Counts["items"] - g.Traced
	}
	rej := map[string]int64{}
	for _, c := range r.st.Rejects {
		rej[c.Class] += c.Count
	}
	out.Rejects = top(rej, 0)
	if r.wall > 0 {
		out.ItemsPerSec = float64(out.Rowed) / r.wall
		out.RowsPerSec = float64(out.Rows) / r.wall
	}
	return out
}

// pct is 100·n/d, 0 when d is 0.
func pct(n, d int64) float64 {
	if d <= 0 {
		return 0
	}
	return 100 * float64(n) / float64(d)
}

// top renders the n largest counts of m (all when n is 0) as "k N, k N", largest first, ties by
// key.
func top(m map[string]int64, n int) string {
	keys := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(m[b], m[a]) })
	if n > 0 && len(keys) > n {
		keys = keys[:n]
	}
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// total sums the rows' counts (percentages recomputed; the median is not a sum: -1).
func total(rows []row) row {
	t := row{Name: "total", Median: -1}
	for _, r := range rows {
		t.Found += r.Found
		t.Units += r.Units
		t.WithInput += r.WithInput
		t.Inputs += r.Inputs
		t.Traced += r.Traced
		t.Rowed += r.Rowed
		t.Rows += r.Rows
		t.Items += r.Items
		t.Wall += r.Wall
	}
	t.UnitsPct, t.FoundPct = pct(t.WithInput, t.Units), pct(t.WithInput, t.Found)
	return t
}

// writeYield prints the yield table (markdown).
func writeYield(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| library | found | units | with input | % units | % found | median cov. | inputs | traced | rowed | rows | time s | inputs by source | top losses | rejects |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range append(rows, total(rows)) {
		med := "-"
		if r.Median >= 0 {
			med = fmt.Sprintf("%d%%+", r.Median)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %.1f%% | %.1f%% | %s | %d | %d | %d | %d | %.0f | %s | %s | %s |\n",
			r.Name, r.Found, r.Units, r.WithInput, r.UnitsPct, r.FoundPct, med, r.Inputs, r.Traced, r.Rowed,
			r.Rows, r.Wall, r.BySource, r.Losses, r.Rejects)
	}
}

// writeThroughput prints the throughput table (markdown) and each run's ratio to the first.
func writeThroughput(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| run | wall s | items rowed | rows | items/s | rows/s | slower than first |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, r := range rows {
		ratio := "-"
		if r.ItemsPerSec > 0 && rows[0].ItemsPerSec > 0 {
			ratio = fmt.Sprintf("%.2fx", rows[0].ItemsPerSec/r.ItemsPerSec)
		}
		fmt.Fprintf(w, "| %s | %.1f | %d | %d | %.2f | %.2f | %s |\n", r.Name, r.Wall, r.Rowed, r.Rows, r.ItemsPerSec,
			r.RowsPerSec, ratio)
	}
}

func main() {
	if err := mainErr(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "summarize:", err)
		os.Exit(1)
	}
}

func mainErr(args []string, w io.Writer) error {
	if len(args) < 2 || args[0] != "yield" && args[0] != "throughput" {
		return errors.New("usage: summarize yield|throughput NAME=STATS.json:WALL_SECONDS ...")
	}
	var rows []row
	for _, a := range args[1:] {
		name, path, wall, err := parseArg(a)
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		st, err := readStats(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", name, path, err)
		}
		rows = append(rows, summarize(run{name: name, st: st, wall: wall}))
	}
	if args[0] == "yield" {
		writeYield(w, rows)
	} else {
		writeThroughput(w, rows)
	}
	return nil
}
