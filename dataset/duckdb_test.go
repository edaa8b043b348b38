package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/schemas"
)

// requireTool returns the path of a program, skipping the test if it is missing (failing under CI).
func requireTool(t *testing.T, name, why string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing (%s) and CI is set", name, why)
		}
		t.Skipf("%s is missing (%s); install it to run this test", name, why)
	}
	return p
}

// globReport is what a glob over one configuration's folder gives.
type globReport struct {
	Rows    int64    `json:"rows"`
	Tokens  int64    `json:"tokens"`
	Files   int      `json:"files"`
	Columns []string `json:"columns"`
}

// duckdbReport is what testdata/duckdb/check.mjs prints.
type duckdbReport struct {
	Columns map[string]string `json:"columns"`
	Shards  []struct {
		Path          string `json:"path"`
		Rows          int64  `json:"rows"`
		Tokens        int64  `json:"tokens"`
		LearnedTokens int64  `json:"learned_tokens"`
	} `json:"shards"`
	Total struct {
		Rows        int64 `json:"rows"`
		Tokens      int64 `json:"tokens"`
		BadInputIDs int64 `json:"bad_input_ids"`
		BadLossMask int64 `json:"bad_loss_mask"`
		BadLearned  int64 `json:"bad_learned"`
		MinID       int64 `json:"min_id"`
	} `json:"total"`
	Glob       globReport  `json:"glob"`
	PackedGlob *globReport `json:"packed_glob"`
	RootGlob   struct {
		Rows  int64  `json:"rows"`
		Error string `json:"error"`
	} `json:"root_glob"`
	KV          map[string]string `json:"kv"`
	Compression []string          `json:"compression"`
	RowGroups   []int             `json:"row_groups"`
	Packed      *struct {
		Sequences   int `json:"sequences"`
		Tokens      int `json:"tokens"`
		BadLength   int `json:"bad_length"`
		BadSegments int `json:"bad_segments"`
		UnknownRows int `json:"unknown_rows"`
	} `json:"packed"`
}

// requireNodePackage returns the folder testdata/<dir> after checking that node and the npm
// package pkg are installed there (by the README's test set-up, never by a test: install names the
// command). Without them the test is skipped, or fails when CI is set.
func requireNodePackage(t *testing.T, dir, pkg, install string) (node, folder string) {
	t.Helper()
	node = requireTool(t, "node", pkg+" runs under Node.js")
	folder, err := filepath.Abs(filepath.Join("testdata", dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(folder, "node_modules", pkg, "package.json")); err != nil {
		msg := fmt.Sprintf("npm package %s is not installed in dataset/testdata/%s: run, from the module root, %s", pkg, dir, install)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node, folder
}

// Install commands of the npm packages the reader tests use (run from the module root).
const (
	duckdbInstall = "(cd dataset/testdata/duckdb && npm install --no-save --no-audit --no-fund)"
	polarsInstall = "(cd dataset/testdata/polars && npm install --no-save --no-audit --no-fund)"
)

// readerDataset is a dataset folder as the pipeline leaves it: shards in the pool (pool/data/,
// pool/packed/) and their published copies in data/ and packed/, the version's objects (its manifest, statistics as stats.json and stats.parquet) under
// versions/, a batch record under batches/, the run's work area under work/, the manifest and the
// dataset card at the root. Readers must see the rows and nothing else.
type readerDataset struct {
	dir    string
	m      *Manifest
	packed []schemas.PackedRow
}

func writeReaderDataset(t *testing.T) readerDataset {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	s := openTest(t, dir)
	ctx := context.Background()
	var shards []pooledShard
	for i, n := range []int{3, 1100, 7} { // the middle shard has two row groups
		shards = append(shards, pooledShard{fmt.Sprintf("part-%05d", i), makeRows(t, i*10000, n)})
	}
	const id = "run-1"
	man, _, packed := pooledVersion(t, s, id, "part-00000", shards, true)
	for key, data := range map[string]string{
		"batches/0123abcd.json":                       `{"hash": "0123abcd"}`,
		"work/runs/" + id + "/scan/page-000000.jsonl": `{"key": "x"}` + "\n",
	} {
		if err := s.Put(ctx, key, []byte(data), nil); err != nil {
			t.Fatal(err)
		}
	}
	m, head, err := Commit(ctx, s, id, man)
	if err != nil || !head {
		t.Fatalf("Commit = head %v, %v", head, err)
	}
	if _, err := Publish(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	return readerDataset{dir: dir, m: m, packed: packed}
}

// runNode runs node script args in folder and returns its standard output.
func runNode(t *testing.T, node, folder, script string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = folder
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s %v: %v\n%s", script, args, err, stderr.Bytes())
	}
	return out
}

// TestDuckDB writes a dataset folder as the pipeline does and reads it with DuckDB (npm
// @duckdb/node-api, pinned by testdata/duckdb/package-lock.json, installed by the test set-up):
// through the manifest (column types, row and token counts per shard and in total, list lengths of
// every row, key-value metadata), and as a user would, by a glob over each configuration's folder
// (data/**/*.parquet: every row and nothing else; packed/**/*.parquet likewise).
func TestDuckDB(t *testing.T) {
	if testing.Short() {
		t.Skip("DuckDB reading a dataset under Node.js: long integration test; run without -short")
	}
	node, folder := requireNodePackage(t, "duckdb", "@duckdb/node-api", duckdbInstall)
	ds := writeReaderDataset(t)
	dir, m, packed := ds.dir, ds.m, ds.packed
	out := runNode(t, node, folder, "check.mjs", dir)
	var rep duckdbReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("DuckDB: input_ids %s, shards %+v, total %+v, row groups %v, kv keys %d",
		rep.Columns["input_ids"], rep.Shards, rep.Total, rep.RowGroups, len(rep.KV))

	for col, want := range map[string]string{
		"input_ids": "INTEGER[]", "loss_mask": "BOOLEAN[]", "text": "VARCHAR", "seed": "BIGINT",
		"num_tokens": "INTEGER", "created_at": "TIMESTAMP WITH TIME ZONE",
	} {
		if got := rep.Columns[col]; got != want {
			t.Errorf("DuckDB sees %s as %q, want %q", col, got, want)
		}
	}
	if len(rep.Columns) != len(ArrowSchema().Fields()) {
		t.Errorf("DuckDB sees %d columns, want %d", len(rep.Columns), len(ArrowSchema().Fields()))
	}
	if len(rep.Shards) != len(m.Shards) {
		t.Fatalf("DuckDB read %d shards, the manifest has %d", len(rep.Shards), len(m.Shards))
	}
	for i, sh := range rep.Shards {
		w := m.Shards[i]
		if sh.Path != w.Path || sh.Rows != w.Rows || sh.Tokens != w.Tokens || sh.LearnedTokens != w.LearnedTokens {
			t.Errorf("DuckDB: %+v, manifest: %+v", sh, w)
		}
	}
	if rep.Total.Rows != m.Totals.Rows || rep.Total.Tokens != m.Totals.Tokens || rep.Glob.Rows != m.Totals.Rows {
		t.Errorf("DuckDB totals %+v (glob %d), manifest %+v", rep.Total, rep.Glob.Rows, m.Totals)
	}
	if rep.Total.BadInputIDs != 0 || rep.Total.BadLossMask != 0 || rep.Total.BadLearned != 0 || rep.Total.MinID < 0 {
		t.Errorf("DuckDB finds rows whose lists disagree with num_tokens/num_learned: %+v", rep.Total)
	}
	if rep.KV[MetaFormat] != Format || rep.KV[MetaSchemaVersion] != schemas.RowSchemaVersion || rep.KV[MetaArrowSchema] != arrowSchemaMetadata() {
		t.Errorf("key-value metadata read by DuckDB: %v", rep.KV)
	}
	if fmt.Sprint(rep.Compression) != "[ZSTD]" {
		t.Errorf("compression = %v, want [ZSTD]", rep.Compression)
	}
	if p := rep.Packed; p == nil || p.Sequences != len(packed) || int64(p.Tokens) != m.Packing.Totals.Tokens || p.BadLength != 0 || p.BadSegments != 0 || p.UnknownRows != 0 {
		t.Errorf("DuckDB reads the packed shard as %+v, want %d sequences and %d tokens, all %d long, naming known rows", p, len(packed), m.Packing.Totals.Tokens, 4096)
	}
	if fmt.Sprint(rep.RowGroups) != "[1 2 1]" {
		t.Errorf("row groups per shard = %v, want [1 2 1]", rep.RowGroups)
	}
	checkGlobs(t, "DuckDB", m, rep.Glob, rep.PackedGlob)
	// The root glob (**/*.parquet) reaches the packed sequences and the version's statistics table
	// too: DuckDB 1.5 reads them all without an error (unifying the schemas), so its count is not
	// the rows'. docs/dataset.md says to glob data/; this pins the behaviour it describes.
	if rep.RootGlob.Error == "" && rep.RootGlob.Rows == m.Totals.Rows {
		t.Errorf("DuckDB read_parquet('<dir>/**/*.parquet') now gives exactly the rows (%d): update docs/dataset.md", rep.RootGlob.Rows)
	}
	t.Logf("DuckDB read_parquet('<dir>/**/*.parquet'): %+v (the dataset has %d rows)", rep.RootGlob, m.Totals.Rows)
}

// checkGlobs checks what a reader's globs over data/ and packed/ gave: exactly the manifest's rows
// (tokens) and files, with the rows' (packed rows') columns in order.
func checkGlobs(t *testing.T, reader string, m *Manifest, rows globReport, packed *globReport) {
	t.Helper()
	want := func(row any) []string {
		var cols []string
		for _, f := range CardFeatures(row) {
			cols = append(cols, f.Name)
		}
		return cols
	}
	if rows.Rows != m.Totals.Rows || rows.Tokens != m.Totals.Tokens || (rows.Files != 0 && int64(rows.Files) != m.Totals.Shards) ||
		!slices.Equal(rows.Columns, want(schemas.Row{})) {
		t.Errorf("%s: data/**/*.parquet gives %+v, want the manifest's %d rows, %d tokens in %d files, columns %v",
			reader, rows, m.Totals.Rows, m.Totals.Tokens, m.Totals.Shards, want(schemas.Row{}))
	}
	if packed == nil || packed.Rows != m.Packing.Totals.Rows || packed.Tokens != m.Packing.Totals.Tokens ||
		(packed.Files != 0 && int64(packed.Files) != m.Packing.Totals.Shards) || !slices.Equal(packed.Columns, want(schemas.PackedRow{})) {
		t.Errorf("%s: packed/**/*.parquet gives %+v, want the manifest's packing totals %+v", reader, packed, m.Packing.Totals)
	}
}

// polarsReport is what testdata/polars/check.mjs prints.
type polarsReport struct {
	Glob struct {
		globReport
		Types map[string]string `json:"types"`
	} `json:"glob"`
	PackedGlob *globReport `json:"packed_glob"`
}

// TestPolars reads the same dataset folder with nodejs-polars (npm, pinned by
// testdata/polars/package-lock.json, installed by the test set-up), as a user would:
// scanParquet over data/**/*.parquet gives every row and nothing else, over packed/**/*.parquet
// every packed sequence.
func TestPolars(t *testing.T) {
	if testing.Short() {
		t.Skip("Polars reading a dataset under Node.js: long integration test; run without -short")
	}
	node, folder := requireNodePackage(t, "polars", "nodejs-polars", polarsInstall)
	ds := writeReaderDataset(t)
	out := runNode(t, node, folder, "check.mjs", ds.dir)
	var rep polarsReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("Polars: data/**/*.parquet %d rows, %d tokens; packed %+v", rep.Glob.Rows, rep.Glob.Tokens, rep.PackedGlob)
	checkGlobs(t, "Polars", ds.m, rep.Glob.globReport, rep.PackedGlob)
	for col, want := range map[string]string{"input_ids": "DataType(List(DataType(Int32)))", "loss_mask": "DataType(List(DataType(Bool)))", "text": "DataType(String)", "seed": "DataType(Int64)", "created_at": "DataType(Datetime(us,UTC))"} {
		if got := rep.Glob.Types[col]; got != want {
			t.Errorf("Polars sees %s as %q, want %q", col, got, want)
		}
	}
}

// TestReadersAfterVersions commits three versions into one folder (re-runs with other seeds: each
// has shards of its own and all share one), publishing after each, and reads the folder with
// DuckDB and Polars as users do: the data globs (data/**/*.parquet, data/*, data/*.parquet; for
// Polars the bare folder data/ too) and the dataset card's default config give exactly the head's
// rows, packed/**/*.parquet exactly its packed sequences, and every version's manifest still names
// exactly that version's rows.
func TestReadersAfterVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("DuckDB and Polars reading three versions under Node.js: long integration test; run without -short")
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ds")
	s := openTest(t, dir)
	want := map[string][]string{} // read name -> the ids it must give
	var versions []*Manifest
	for i, v := range threeVersions {
		m, rows := commitPooled(t, s, v, i+1)
		if _, err := Publish(ctx, s, nil); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, m)
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		slices.Sort(ids)
		want["version:"+v.id] = ids
	}
	head := versions[len(versions)-1]
	reads := map[string][]string{
		"data/**/*.parquet": {filepath.Join(dir, "data", "**", "*.parquet")},
		"data/*":            {filepath.Join(dir, "data", "*")},
		"data/*.parquet":    {filepath.Join(dir, "data", "*.parquet")},
	}
	for name := range reads {
		want[name] = want["version:"+head.Version]
	}
	card, err := os.ReadFile(filepath.Join(dir, CardKey))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range parseCard(t, card).Configs {
		var files []string
		for _, df := range c.DataFiles {
			for _, p := range df.Path {
				files = append(files, filepath.Join(dir, filepath.FromSlash(p)))
			}
		}
		if c.ConfigName == RowsConfig {
			reads["card:default"] = files
			want["card:default"] = want["version:"+head.Version]
		}
	}
	for _, m := range versions {
		shards, err := m.AllShards(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		var files []string
		for _, sh := range shards {
			files = append(files, filepath.Join(dir, filepath.FromSlash(sh.Path)))
		}
		reads["version:"+m.Version] = files
	}
	packed, err := ReadPackedRows(ctx, s, head.Packing.Shards[0].Path, -1)
	if err != nil {
		t.Fatal(err)
	}
	reads["packed/**/*.parquet"] = []string{filepath.Join(dir, "packed", "**", "*.parquet")}
	for _, p := range packed {
		want["packed/**/*.parquet"] = append(want["packed/**/*.parquet"], p.ID)
	}
	slices.Sort(want["packed/**/*.parquet"])

	for _, reader := range []struct{ name, dir, pkg, install string }{
		{"DuckDB", "duckdb", "@duckdb/node-api", duckdbInstall},
		{"Polars", "polars", "nodejs-polars", polarsInstall},
	} {
		t.Run(reader.name, func(t *testing.T) {
			node, folder := requireNodePackage(t, reader.dir, reader.pkg, reader.install)
			r := maps.Clone(reads)
			w := maps.Clone(want)
			if reader.name == "Polars" {
				r["data/"] = []string{filepath.Join(dir, "data") + "/"}
				w["data/"] = want["version:"+head.Version]
			}
			spec, _ := json.Marshal(r)
			file := filepath.Join(t.TempDir(), "reads.json")
			if err := os.WriteFile(file, spec, 0o644); err != nil {
				t.Fatal(err)
			}
			var got map[string]struct {
				Rows  int      `json:"rows"`
				IDs   []string `json:"ids"`
				Error string   `json:"error"`
			}
			out := runNode(t, node, folder, "versions.mjs", file)
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			for name, ids := range w {
				g := got[name]
				if g.Error != "" || !slices.Equal(g.IDs, ids) {
					t.Errorf("%s reading %s: %d rows (error %q), want the %d rows of %s", reader.name, name, g.Rows, g.Error, len(ids), map[bool]string{true: "that version", false: "the head, " + head.Version}[strings.HasPrefix(name, "version:")])
				} else {
					t.Logf("%s reading %s: %d rows", reader.name, name, g.Rows)
				}
			}
		})
	}
}
