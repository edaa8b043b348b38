package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/ndtrace/ndtrace/schemas"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	Glob        struct{ Rows int64 } `json:"glob"`
	KV          map[string]string    `json:"kv"`
	Compression []string             `json:"compression"`
	RowGroups   []int                `json:"row_groups"`
	Packed      *struct {
		Sequences   int `json:"sequences"`
		Tokens      int `json:"tokens"`
		BadLength   int `json:"bad_length"`
		BadSegments int `json:"bad_segments"`
		UnknownRows int `json:"unknown_rows"`
	} `json:"packed"`
}

// TestDuckDB writes a dataset to a folder and reads it with DuckDB (npm @duckdb/node-api, pinned by
// testdata/duckdb/package-lock.json): column types, row and token counts per shard and in total,
// list lengths of every row, key-value metadata.
func TestDuckDB(t *testing.T) {
	if testing.Short() {
		t.Skip("installs DuckDB from npm")
	}
	node := requireTool(t, "node", "DuckDB runs under Node.js")
	npm := requireTool(t, "npm", "DuckDB is installed with npm")

	dir := filepath.Join(t.TempDir(), "ds")
	s := openTest(t, dir)
	ctx := context.Background()
	var infos []ShardInfo
	for i, n := range []int{3, 1100, 7} { // the middle shard has two row groups
		info, err := WriteShard(ctx, s, fmt.Sprintf("part-%05d", i), makeRows(t, i*10000, n))
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	var all []schemas.Row
	for i, n := range []int{3, 1100, 7} {
		all = append(all, makeRows(t, i*10000, n)...)
	}
	packed, _, err := Pack(all, 4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	pinfo, err := WritePackedShard(ctx, s, "part-00000", packed, 4096)
	if err != nil {
		t.Fatal(err)
	}
	m, err := WriteManifest(ctx, s, Manifest{CreatedAt: testCreated, Versions: testVersions, Shards: infos,
		Packing: &Packing{Length: 4096, Shards: []ShardInfo{pinfo}}})
	if err != nil {
		t.Fatal(err)
	}

	work := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "check.mjs"} {
		data, err := os.ReadFile(filepath.Join("testdata", "duckdb", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(timeout time.Duration, name string, args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = work
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("%s %v: %w\n%s", filepath.Base(name), args, err, stderr.Bytes())
		}
		return out, nil
	}
	// npm ci installs exactly the lock file. It refuses a lock file that lacks the optional native
	// packages of other platforms; at 1.5.6-r.1 the registry serves only the Linux x64 ones, so the
	// lock cannot list the others. npm install --no-save then installs the same locked versions.
	if _, err := run(5*time.Minute, npm, "ci", "--no-audit", "--no-fund"); err != nil {
		t.Logf("npm ci failed, using npm install --no-save: %s", firstLines(err.Error(), 6))
		if _, err := run(5*time.Minute, npm, "install", "--no-save", "--no-audit", "--no-fund"); err != nil {
			t.Fatal(err)
		}
	}
	out, err := run(2*time.Minute, node, "check.mjs", dir)
	if err != nil {
		t.Fatal(err)
	}
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
	if rep.KV[MetaFormat] != Format || rep.KV[MetaSchemaVersion] != "1" || rep.KV[MetaArrowSchema] != arrowSchemaMetadata() {
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
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
