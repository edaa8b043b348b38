package dataset

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ndtrace/ndtrace/schemas"
)

func TestEncodeShardDeterministic(t *testing.T) {
	rows := makeRows(t, 0, 300)
	a, ia, err := EncodeShard(rows)
	if err != nil {
		t.Fatal(err)
	}
	// A deep copy, so that nothing shared (slices, strings) can make the outputs equal by accident.
	c := make([]schemas.Row, len(rows))
	for i, r := range rows {
		r.InputIDs = append([]int32(nil), r.InputIDs...)
		r.LossMask = append([]bool(nil), r.LossMask...)
		r.Text = strings.Clone(r.Text)
		c[i] = r
	}
	b, ib, err := EncodeShard(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) || ia != ib {
		t.Fatalf("same rows gave different files (%d and %d bytes)", len(a), len(b))
	}
	if fmt.Sprintf("%x", sha256.Sum256(a)) != ia.SHA256 || ia.Bytes != int64(len(a)) {
		t.Errorf("info %+v does not describe the bytes", ia)
	}
	// And through two different stores.
	ctx := context.Background()
	s1, s2 := openTest(t, "mem://"), openTest(t, t.TempDir())
	i1, err1 := WriteShard(ctx, s1, "part-00003", rows)
	i2, err2 := WriteShard(ctx, s2, "part-00003", rows)
	if err1 != nil || err2 != nil || i1 != i2 || i1.SHA256 != ia.SHA256 {
		t.Fatalf("WriteShard: %+v %v / %+v %v", i1, err1, i2, err2)
	}
}

func TestShardRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "mem://")
	rows := makeRows(t, 10, 40)
	rows[3].RepoURL, rows[3].Commit, rows[3].Level, rows[3].InputSource = "https://example.invalid/r.git", "abc123", "repository", ""
	rows[5].Seed = -1 << 40
	info, err := WriteShard(ctx, s, "part-00001", rows)
	if err != nil {
		t.Fatal(err)
	}
	want := ShardInfo{Path: "data/part-00001.parquet", Rows: 40}
	for _, r := range rows {
		want.Tokens += int64(r.NumTokens)
		want.LearnedTokens += int64(r.NumLearned)
	}
	if info.Rows != want.Rows || info.Tokens != want.Tokens || info.LearnedTokens != want.LearnedTokens || info.Path != want.Path {
		t.Errorf("info = %+v, want %+v", info, want)
	}
	got, err := ReadRows(ctx, s, info.Path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rows) {
		for i := range rows {
			if !reflect.DeepEqual(got[i], rows[i]) {
				t.Fatalf("row %d read back as\n%+v\nwant\n%+v", i, got[i], rows[i])
			}
		}
		t.Fatalf("read %d rows, want %d", len(got), len(rows))
	}
	some, err := ReadRows(ctx, s, info.Path, 7)
	if err != nil || len(some) != 7 {
		t.Errorf("ReadRows(limit 7) = %d rows, %v", len(some), err)
	}
	if _, err := ReadRows(ctx, s, "../manifest.json", 1); err == nil {
		t.Error("ReadRows accepted a path outside data/ and shards/")
	}
}

func TestShardFileLayout(t *testing.T) {
	data, _, err := EncodeShard(makeRows(t, 0, 2*MaxRowsPerRowGroup+452))
	if err != nil {
		t.Fatal(err)
	}
	f, err := openParquet(data)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, rg := range f.RowGroups() {
		sizes = append(sizes, rg.NumRows())
	}
	if !reflect.DeepEqual(sizes, []int64{1024, 1024, 452}) {
		t.Errorf("row groups = %v, want [1024 1024 452]", sizes)
	}
	for _, kv := range []struct{ key, want string }{
		{MetaFormat, Format},
		{MetaSchemaVersion, schemas.RowSchemaVersion},
		{MetaArrowSchema, arrowSchemaMetadata()},
	} {
		if got, ok := f.Lookup(kv.key); !ok || got != kv.want {
			t.Errorf("key-value metadata %s = %q, %v", kv.key, got, ok)
		}
	}
	for _, col := range f.Metadata().RowGroups[0].Columns {
		if c := col.MetaData.Codec.String(); c != "ZSTD" {
			t.Errorf("column %v is compressed with %s, want ZSTD", col.MetaData.PathInSchema, c)
		}
	}
}

// TestRowGroupBytes checks that long rows cut row groups by size: rows of ~1 MiB with a 3 MiB limit
// give row groups of 3 rows (2 rows reach 2 MiB plus; the third fits; the fourth does not).
func TestRowGroupBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	text := make([]byte, 200<<10)
	for i := range text {
		text[i] = byte('a' + rng.IntN(26))
	}
	rows := make([]schemas.Row, 10)
	for i := range rows {
		rows[i] = makeRow(t, i, string(text))
	}
	per := rowBytes(&rows[0])
	groups := groupRows(rows, MaxRowsPerRowGroup, 3*per)
	if !reflect.DeepEqual(groups, []int{3, 3, 3, 1}) {
		t.Errorf("groups = %v, want [3 3 3 1]", groups)
	}
	if g := groupRows(rows[:1], MaxRowsPerRowGroup, 1); !reflect.DeepEqual(g, []int{1}) {
		t.Errorf("a row larger than the limit: groups %v, want [1]", g)
	}
}

func TestEncodeShardRejects(t *testing.T) {
	good := makeRows(t, 0, 1)[0]
	tests := []struct {
		name string
		edit func(r *schemas.Row)
		want string
	}{
		{"short input_ids", func(r *schemas.Row) { r.InputIDs = r.InputIDs[1:] }, "column input_ids"},
		{"short loss_mask", func(r *schemas.Row) { r.LossMask = r.LossMask[1:] }, "column loss_mask"},
		{"num_learned", func(r *schemas.Row) { r.NumLearned++ }, "column num_learned"},
		{"tokenizer", func(r *schemas.Row) { r.Tokenizer = "" }, "column tokenizer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := good
			r.InputIDs = append([]int32(nil), good.InputIDs...)
			r.LossMask = append([]bool(nil), good.LossMask...)
			tc.edit(&r)
			_, err := WriteShard(context.Background(), openTest(t, "mem://"), "part-00000", []schemas.Row{good, r})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "row 1") {
				t.Errorf("error %v, want one naming row 1 and %q", err, tc.want)
			}
		})
	}
	if _, _, err := EncodeShard(nil); err == nil {
		t.Error("EncodeShard accepted no rows")
	}
}

func TestCheckShardName(t *testing.T) {
	for name, ok := range map[string]bool{
		"part-00012":             true,
		"fn-part-00003":          true,
		"p.1_a":                  true,
		"":                       false,
		"-x":                     false,
		"a/b":                    false,
		"../x":                   false,
		"x y":                    false,
		strings.Repeat("a", 201): false,
	} {
		if err := CheckShardName(name); (err == nil) != ok {
			t.Errorf("CheckShardName(%q) = %v, want ok=%v", name, err, ok)
		}
		_, err := WriteShard(context.Background(), openTest(t, "mem://"), name, makeRows(t, 0, 1))
		if (err == nil) != ok {
			t.Errorf("WriteShard(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

// TestReadRowsAliasing checks that rows read back do not share memory.
func TestReadRowsAliasing(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "mem://")
	info, err := WriteShard(ctx, s, "p", makeRows(t, 0, 200))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ReadRows(ctx, s, info.Path, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := makeRows(t, 0, 200)
	for i := range rows {
		if !reflect.DeepEqual(rows[i].InputIDs, want[i].InputIDs) {
			t.Fatalf("row %d input_ids changed after reading later rows", i)
		}
	}
}

// parquetRows is a helper for tests that need a file with other columns.
func parquetRows[T any](t testing.TB, rows []T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
