package dataset

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"github.com/ndtrace/ndtrace/store"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ndtrace/ndtrace/schemas"
)

// rawShard encodes rows with the shard writer settings but without CheckRow, to make bad shards.
func rawShard(t testing.TB, rows []schemas.Row) ([]byte, ShardInfo) {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[schemas.Row](&buf, writerOptions()...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	info := ShardInfo{Rows: int64(len(rows)), Bytes: int64(buf.Len()), SHA256: hexSHA256(sha256.Sum256(buf.Bytes()))}
	for _, r := range rows {
		info.Tokens += int64(r.NumTokens)
		info.LearnedTokens += int64(r.NumLearned)
	}
	return buf.Bytes(), info
}

// commitFiles stores shard files (name → content, info) and commits a manifest naming them.
func commitFiles(t testing.TB, s *store.Store, names []string, files [][]byte, infos []ShardInfo) {
	t.Helper()
	ctx := context.Background()
	for i, name := range names {
		infos[i].Path = ShardPath(name)
		if _, err := s.PutOnce(ctx, infos[i].Path, files[i], ShardContentType, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := WriteManifest(ctx, s, Manifest{CreatedAt: testCreated, Versions: testVersions, Shards: infos}); err != nil {
		t.Fatal(err)
	}
}

// badRowDataset writes a good shard part-00000 and a shard part-00001 whose row 2 is edited.
func badRowDataset(edit func(r *schemas.Row)) func(t *testing.T, s *store.Store) {
	return func(t *testing.T, s *store.Store) {
		good, goodInfo := rawShard(t, makeRows(t, 0, 3))
		rows := makeRows(t, 3, 4)
		edit(&rows[2])
		bad, badInfo := rawShard(t, rows)
		commitFiles(t, s, []string{"part-00000", "part-00001"}, [][]byte{good, bad}, []ShardInfo{goodInfo, badInfo})
	}
}

// tamperManifest commits a good dataset, then rewrites its manifest with old replaced by new.
func tamperManifest(old, new string) func(t *testing.T, s *store.Store) {
	return func(t *testing.T, s *store.Store) {
		writeTestDataset(t, s, 2, 3)
		ctx := context.Background()
		data, err := s.ReadAll(ctx, ManifestKey)
		if err != nil {
			t.Fatal(err)
		}
		edited := strings.Replace(string(data), old, new, 1)
		if edited == string(data) {
			t.Fatalf("%q not in the manifest", old)
		}
		if err := s.Put(ctx, ManifestKey, []byte(edited), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// otherRow has a different column set, for schema problems.
type otherRow struct {
	ID       string  `parquet:"id"`
	InputIDs []int64 `parquet:"input_ids,list"`
}

func TestValidateFindsProblems(t *testing.T) {
	const shard1 = "data/part-00001.parquet"
	tests := []struct {
		name   string
		setup  func(t *testing.T, s *store.Store)
		shard  string
		row    int64
		column string
		msg    string
	}{
		{"no manifest", func(t *testing.T, s *store.Store) {}, "", -1, "", "missing: no committed dataset"},
		{"malformed manifest", func(t *testing.T, s *store.Store) {
			if err := s.Put(context.Background(), ManifestKey, []byte(`{"format":`), nil); err != nil {
				t.Fatal(err)
			}
		}, "", -1, "", "malformed manifest"},
		{"schema version", tamperManifest(`"schema_version": "3"`, `"schema_version": "0"`), "", -1, "", `schema_version is "0"`},
		{"missing shard", func(t *testing.T, s *store.Store) {
			writeTestDataset(t, s, 2, 3)
			if err := s.Delete(context.Background(), shard1); err != nil {
				t.Fatal(err)
			}
		}, shard1, -1, "", "missing"},
		{"size and sha256", func(t *testing.T, s *store.Store) {
			writeTestDataset(t, s, 2, 3)
			if err := s.Put(context.Background(), shard1, []byte("not parquet"), nil); err != nil {
				t.Fatal(err)
			}
		}, shard1, -1, "", "size is 11 bytes"},
		{"rows", tamperManifest(`"rows": 3,`, `"rows": 4,`), "", -1, "", "totals"},
		{"not parquet", func(t *testing.T, s *store.Store) {
			data := []byte("PAR1 this is not a parquet file PAR1")
			commitFiles(t, s, []string{"part-00001"}, [][]byte{data},
				[]ShardInfo{{Rows: 1, Bytes: int64(len(data)), SHA256: hexSHA256(sha256.Sum256(data))}})
		}, shard1, -1, "", "malformed Parquet"},
		{"schema", func(t *testing.T, s *store.Store) {
			data := parquetRows(t, []otherRow{{ID: "x", InputIDs: []int64{1}}})
			commitFiles(t, s, []string{"part-00001"}, [][]byte{data},
				[]ShardInfo{{Rows: 1, Tokens: 1, Bytes: int64(len(data)), SHA256: hexSHA256(sha256.Sum256(data))}})
		}, shard1, -1, "level", "expected here"},
		{"row count", func(t *testing.T, s *store.Store) {
			data, info := rawShard(t, makeRows(t, 0, 3))
			info.Rows = 4
			commitFiles(t, s, []string{"part-00001"}, [][]byte{data}, []ShardInfo{info})
		}, shard1, -1, "", "3 rows, the manifest says 4"},
		{"token sum", func(t *testing.T, s *store.Store) {
			data, info := rawShard(t, makeRows(t, 0, 3))
			info.Tokens++
			commitFiles(t, s, []string{"part-00001"}, [][]byte{data}, []ShardInfo{info})
		}, shard1, -1, "num_tokens", "the manifest says"},
		{"learned sum", func(t *testing.T, s *store.Store) {
			data, info := rawShard(t, makeRows(t, 0, 3))
			info.LearnedTokens--
			commitFiles(t, s, []string{"part-00001"}, [][]byte{data}, []ShardInfo{info})
		}, shard1, -1, "num_learned", "learned tokens"},
		{"input_ids length", badRowDataset(func(r *schemas.Row) { r.InputIDs = r.InputIDs[:len(r.InputIDs)-1] }), shard1, 2, "input_ids", "num_tokens says"},
		{"loss_mask length", badRowDataset(func(r *schemas.Row) { r.LossMask = append(r.LossMask, true) }), shard1, 2, "loss_mask", "entries"},
		{"num_learned", badRowDataset(func(r *schemas.Row) { r.NumLearned-- }), shard1, 2, "num_learned", "true entries"},
		{"no input source", badRowDataset(func(r *schemas.Row) { r.InputSource = "" }), shard1, 2, "input_source", `"" at function level, want one of corpus, test_call`},
		{"unknown input source", badRowDataset(func(r *schemas.Row) { r.InputSource = "\x1b[2Jmagic" }), shard1, 2, "input_source", `"\x1b[2Jmagic" at function level`},
		{"input source at repository level", badRowDataset(func(r *schemas.Row) { r.Level = "repository" }), shard1, 2, "input_source", `"corpus" at "repository" level, want empty`},
		{"empty tokenizer", badRowDataset(func(r *schemas.Row) { r.Tokenizer = "" }), shard1, 2, "tokenizer", "empty"},
		{"unknown tokenizer", badRowDataset(func(r *schemas.Row) { r.Tokenizer = "nope" }), shard1, 2, "tokenizer", `"nope"`},
		{"manifest tokenizer", badRowDataset(func(r *schemas.Row) { r.Tokenizer = "cl100k_base" }), shard1, 2, "tokenizer", `the manifest's versions say "test-bytes"`},
		{"undecodable ids", badRowDataset(func(r *schemas.Row) { r.InputIDs[0] = 1 << 20 }), shard1, 2, "input_ids", "outside the vocabulary"},
		{"text", badRowDataset(func(r *schemas.Row) { r.Text = strings.Replace(r.Text, "y = x", "y = z", 1) }), shard1, 2, "text", "differs from decode(input_ids) at byte"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, "mem://")
			tc.setup(t, s)
			err := Validate(context.Background(), s, testLookup)
			var p *Problem
			if !errors.As(err, &p) {
				t.Fatalf("Validate = %v, want a *Problem", err)
			}
			if p.Shard != tc.shard || p.Row != tc.row || p.Column != tc.column || !strings.Contains(p.Msg, tc.msg) {
				t.Errorf("problem %+v (%v), want shard %q row %d column %q msg containing %q", p, err, tc.shard, tc.row, tc.column, tc.msg)
			}
		})
	}
}

func TestCheckReportsAll(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "mem://")
	rows0, rows1 := makeRows(t, 0, 5), makeRows(t, 5, 5)
	rows0[1].NumLearned++
	rows1[4].Text += "!"
	rows1[0].Tokenizer, rows1[1].Tokenizer = "nope", "nope"
	d0, i0 := rawShard(t, rows0)
	d1, i1 := rawShard(t, rows1)
	commitFiles(t, s, []string{"a", "b"}, [][]byte{d0, d1}, []ShardInfo{i0, i1})
	rep, err := Check(ctx, s, testLookup, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range rep.Problems {
		got = append(got, p.Error())
	}
	want := []string{
		"data/a.parquet row 1 column num_learned",
		"data/b.parquet row 0 column tokenizer",
		"data/b.parquet row 1 column tokenizer",
		"data/b.parquet row 4 column text",
	}
	if len(got) != len(want) {
		t.Fatalf("problems:\n%s", strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
	if rep.Rows != 10 || rep.Shards != 2 || rep.Truncated || rep.OK() {
		t.Errorf("report: rows %d shards %d truncated %v", rep.Rows, rep.Shards, rep.Truncated)
	}
	rep, err = Check(ctx, s, testLookup, CheckOptions{MaxProblems: 2})
	if err != nil || len(rep.Problems) != 2 || !rep.Truncated {
		t.Errorf("MaxProblems 2: %d problems, truncated %v, %v", len(rep.Problems), rep.Truncated, err)
	}
}

func TestCheckValid(t *testing.T) {
	s := openTest(t, "mem://")
	m := writeTestDataset(t, s, 3, 5)
	rep, err := Check(context.Background(), s, testLookup, CheckOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("Check = %+v, %v", rep, err)
	}
	if rep.Rows != m.Totals.Rows || rep.Tokens != m.Totals.Tokens || rep.LearnedTokens != m.Totals.LearnedTokens || rep.Shards != 3 {
		t.Errorf("report %+v does not match totals %+v", rep, m.Totals)
	}
}

func TestValidateCancelled(t *testing.T) {
	s := openTest(t, "mem://")
	writeTestDataset(t, s, 1, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Validate(ctx, s, testLookup); !errors.Is(err, context.Canceled) {
		t.Errorf("Validate with a cancelled context = %v", err)
	}
}

// TestValidateIgnoresStrayShards checks that shards the manifest does not name are not read.
func TestValidateIgnoresStrayShards(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "mem://")
	writeTestDataset(t, s, 1, 2)
	if err := s.Put(ctx, ShardPath("part-99999"), []byte("garbage"), nil); err != nil {
		t.Fatal(err)
	}
	if err := Validate(ctx, s, testLookup); err != nil {
		t.Errorf("Validate = %v", err)
	}
}
