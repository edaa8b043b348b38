package dataset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/ndtrace/ndtrace/store"
	"reflect"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/schemas"
)

// writePackedDataset writes two shards of rows, their packed sequences of length n in one packed
// shard, and commits both.
func writePackedDataset(t testing.TB, s *store.Store, n int, edit func(seqs []schemas.PackedRow)) *Manifest {
	t.Helper()
	ctx := context.Background()
	var infos []ShardInfo
	var all []schemas.Row
	for i := range 2 {
		rows := makeRows(t, i*100, 20)
		info, err := WriteShard(ctx, s, fmt.Sprintf("part-%05d", i), rows)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
		all = append(all, rows...)
	}
	seqs, tooLong, err := Pack(all, n, 0)
	if err != nil || len(tooLong) != 0 {
		t.Fatalf("Pack: %v, %d too long", err, len(tooLong))
	}
	if edit != nil {
		edit(seqs)
	}
	data, pinfo, err := EncodePackedShard(seqs, n)
	if err != nil {
		t.Fatal(err)
	}
	pinfo.Path = PackedShardPath("part-00000")
	if err := s.Put(ctx, pinfo.Path, data, nil); err != nil {
		t.Fatal(err)
	}
	m, err := WriteManifest(ctx, s, Manifest{CreatedAt: testCreated, Versions: testVersions, Shards: infos,
		Packing: &Packing{Length: n, Shards: []ShardInfo{pinfo}}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPackedShardRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "mem://")
	rows := makeRows(t, 0, 50)
	seqs, _, err := Pack(rows, 2048, 7)
	if err != nil {
		t.Fatal(err)
	}
	info, err := WritePackedShard(ctx, s, "part-x", seqs, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if info.Path != "packed/part-x.parquet" || info.Rows != int64(len(seqs)) {
		t.Fatalf("info = %+v", info)
	}
	var tokens int64
	for _, r := range rows {
		tokens += int64(r.NumTokens)
	}
	if info.Tokens != tokens {
		t.Errorf("info.Tokens = %d, rows hold %d", info.Tokens, tokens)
	}
	got, err := ReadPackedRows(ctx, s, info.Path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, seqs) {
		t.Fatalf("read back %d sequences that differ from the %d written", len(got), len(seqs))
	}
	// Same sequences: same bytes, and writing again is a no-op.
	a, _, _ := EncodePackedShard(seqs, 2048)
	b, _, _ := EncodePackedShard(seqs, 2048)
	if !bytes.Equal(a, b) {
		t.Error("encoding the same sequences twice gives different bytes")
	}
	if again, err := WritePackedShard(ctx, s, "part-x", seqs, 2048); err != nil || again != info {
		t.Errorf("rewrite = %+v, %v; want %+v", again, err, info)
	}
	if _, err := WritePackedShard(ctx, s, "part-x", seqs[:1], 2048); !errors.Is(err, store.ErrConflict) {
		t.Errorf("other sequences under the same name: %v, want ErrConflict", err)
	}
	if _, err := ReadPackedRows(ctx, s, "shards/part-x.parquet", 0); err == nil {
		t.Error("ReadPackedRows accepts a path outside packed/")
	}
}

func TestEncodePackedShardErrors(t *testing.T) {
	seqs, _, err := Pack(makeRows(t, 0, 5), 1024, 0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(p *schemas.PackedRow)
		want string
	}{
		{"short", func(p *schemas.PackedRow) { p.InputIDs = p.InputIDs[:10] }, "column input_ids"},
		{"mask", func(p *schemas.PackedRow) { p.LossMask = p.LossMask[:10] }, "column loss_mask"},
		{"learned padding", func(p *schemas.PackedRow) { p.LossMask[1023] = true }, "padding position 1023"},
		{"segments", func(p *schemas.PackedRow) { p.RowIDs = p.RowIDs[:0] }, "column segment_starts"},
		{"first segment", func(p *schemas.PackedRow) { p.SegmentStarts[0] = 1 }, "starts at 1"},
		{"counts", func(p *schemas.PackedRow) { p.NumPadding++ }, "column num_tokens"},
		{"id", func(p *schemas.PackedRow) { p.ID = "x" }, "column id"},
		{"tokenizer", func(p *schemas.PackedRow) { p.Tokenizer = "" }, "column tokenizer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := seqs[0]
			p.InputIDs = append([]int32(nil), p.InputIDs...)
			p.LossMask = append([]bool(nil), p.LossMask...)
			p.SegmentStarts = append([]int32(nil), p.SegmentStarts...)
			p.RowIDs = append([]string(nil), p.RowIDs...)
			tc.edit(&p)
			_, _, err := EncodePackedShard([]schemas.PackedRow{p}, 1024)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, _, err := EncodePackedShard(nil, 1024); err == nil {
		t.Error("no sequences: no error")
	}
}

func TestValidatePacked(t *testing.T) {
	tests := []struct {
		name string
		edit func(seqs []schemas.PackedRow)
		want string // "" for a valid dataset
	}{
		{"valid", nil, ""},
		{"foreign row", func(seqs []schemas.PackedRow) {
			seqs[0].RowIDs[0] = strings.Repeat("f", 64)
			seqs[0].ID = packedID(seqs[0].RowIDs)
		}, "is in no shard of the dataset"},
		{"changed token", func(seqs []schemas.PackedRow) { seqs[0].InputIDs[3]++ }, "differs from row"},
		{"pad id", func(seqs []schemas.PackedRow) {
			last := &seqs[len(seqs)-1]
			last.InputIDs[len(last.InputIDs)-1] = 5
		}, "the pad id is 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, "mem://")
			m := writePackedDataset(t, s, 1500, tc.edit)
			if m.FormatVersion != 2 || m.Packing.Totals.Shards != 1 || m.Packing.Totals.Rows < 2 {
				t.Fatalf("manifest packing = %+v", m.Packing)
			}
			rep, err := Check(context.Background(), s, testLookup, CheckOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if !rep.OK() {
					t.Fatalf("problems: %v", rep.Problems)
				}
				if rep.Shards != 3 {
					t.Errorf("checked %d shards, want 3", rep.Shards)
				}
				return
			}
			if rep.OK() || !strings.Contains(rep.Problems[0].Error(), tc.want) {
				t.Fatalf("problems = %v, want one containing %q", rep.Problems, tc.want)
			}
			if !strings.HasPrefix(rep.Problems[0].Error(), "packed/part-00000.parquet row ") {
				t.Errorf("problem %q does not name the packed shard and row", rep.Problems[0])
			}
		})
	}
}

func TestParseManifestPacking(t *testing.T) {
	s := openTest(t, "mem://")
	writePackedDataset(t, s, 1500, nil)
	data, err := s.ReadAll(context.Background(), ManifestKey)
	if err != nil {
		t.Fatal(err)
	}
	valid := string(data)
	if _, err := ParseManifest(data); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, old, new, want string }{
		{"version 1", `"format_version": 2`, `"format_version": 1`, "not part of format_version 1"},
		{"length", `"length": 1500`, `"length": 0`, "length 0"},
		{"path", `"packed/part-00000.parquet"`, `"shards/part-00000.parquet"`, "packing.shards[0]: bad path"},
		{"totals", `"shards": 1`, `"shards": 2`, "packing: totals"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Replace(valid, tc.old, tc.new, 1)
			if in == valid {
				t.Fatalf("%q not in the manifest:\n%s", tc.old, valid)
			}
			_, err := ParseManifest([]byte(in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
