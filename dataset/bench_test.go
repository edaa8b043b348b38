package dataset

import (
	"context"
	"fmt"
	"github.com/ndtrace/ndtrace/store"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/schemas"
)

// benchRows returns n realistic rows: ~8 KB of trace-like text and ~2,000 token ids each. The ids
// hash the text's words into a 100k vocabulary, so they follow its Zipf-like distribution (which is
// what dictionary encoding of input_ids sees in real data); about half the tokens are learned, in
// spans. Rows differ from each other (no two share a body).
func benchRows(n int) []schemas.Row {
	rng := rand.New(rand.NewPCG(7, 11))
	words := make([]string, 5000)
	for i := range words {
		words[i] = fmt.Sprintf("w%x_%d", rng.Uint32()%0xffff, i%97)
	}
	zipf := rand.NewZipf(rng, 1.1, 4, uint64(len(words)-1))
	rows := make([]schemas.Row, n)
	for r := range rows {
		var text strings.Builder
		var ids []int32
		for text.Len() < 8000 {
			// A "line" of a trace: a few words, then a separator token.
			for range 4 + rng.IntN(6) {
				w := words[zipf.Uint64()]
				text.WriteString(w)
				text.WriteByte(' ')
				h := fnv.New32a()
				h.Write([]byte(w))
				ids = append(ids, int32(h.Sum32()%100000))
			}
			text.WriteString("<|frame_sep|>")
			ids = append(ids, 100277)
		}
		mask := make([]bool, len(ids))
		learned, on := 0, false
		for i := range mask {
			if rng.IntN(40) == 0 {
				on = !on
			}
			mask[i] = on
			if on {
				learned++
			}
		}
		rows[r] = schemas.Row{
			ID: fmt.Sprintf("%064x", r), Level: "function", Path: "corpus/part-3.jsonl", QualName: "pkg.mod.f", InputSource: schemas.InputSourceCorpus,
			SourceID: fmt.Sprintf("item-%d", r), Direction: []string{"forward", "inverse"}[r%2], Policy: "paper",
			Seed: rng.Int64(), Text: text.String(), InputIDs: ids, LossMask: mask, NumTokens: int32(len(ids)),
			NumLearned: int32(learned), NumActions: 12, NumStates: 13, ActStepInto: 4, ActStepOver: 8, EvCall: 3,
			EvLine: 40, EvReturn: 3, Exit: "exit_normal", CodeChars: 900, TracerVersion: "1", PipelineVersion: "1",
			Tokenizer: "cl100k_base", CreatedAt: testCreated,
		}
	}
	return rows
}

// logicalBytes is the uncompressed payload of rows: text, 4 bytes per id, 1 per mask entry.
func logicalBytes(rows []schemas.Row) int64 {
	var n int64
	for i := range rows {
		n += int64(len(rows[i].Text) + 4*len(rows[i].InputIDs) + len(rows[i].LossMask))
	}
	return n
}

// BenchmarkEncodeShard measures Parquet encoding alone: one 2,048-row shard (two row groups) per op.
// MB/s is logical payload (text + 4 bytes per id + 1 per mask entry) per second.
func BenchmarkEncodeShard(b *testing.B) {
	rows := benchRows(2048)
	b.SetBytes(logicalBytes(rows))
	var size int64
	for b.Loop() {
		_, info, err := EncodeShard(rows)
		if err != nil {
			b.Fatal(err)
		}
		size = info.Bytes
	}
	b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(logicalBytes(rows))/float64(size), "ratio")
}

// BenchmarkWriteShard measures WriteShard end to end (encode, hash, conditional write) into a memory
// and a local-folder store, one 2,048-row shard under a new name per op.
func BenchmarkWriteShard(b *testing.B) {
	rows := benchRows(2048)
	for _, kind := range []string{"mem", "file"} {
		b.Run(kind, func(b *testing.B) {
			url := "mem://"
			if kind == "file" {
				url = b.TempDir()
			}
			s, err := store.Open(context.Background(), url)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.SetBytes(logicalBytes(rows))
			i := 0
			for b.Loop() {
				if _, err := WriteShard(context.Background(), s, fmt.Sprintf("part-%05d", i), rows); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkValidate measures Check over one shard (read, hash, decode every row back with a
// byte-level tokenizer); MB/s is logical payload.
func BenchmarkValidate(b *testing.B) {
	rows := makeRows(b, 0, 512)
	for i := range rows {
		rows[i] = makeRow(b, i, strings.Repeat(trajectoryText(i, 3), 20))
	}
	s, err := store.Open(context.Background(), "mem://")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	info, err := WriteShard(context.Background(), s, "part-00000", rows)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := WriteManifest(context.Background(), s, Manifest{CreatedAt: testCreated, Versions: testVersions, Shards: []ShardInfo{info}}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(logicalBytes(rows))
	for b.Loop() {
		if err := Validate(context.Background(), s, testLookup); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
