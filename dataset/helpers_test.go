package dataset

import (
	"context"
	"errors"
	"fmt"
	"github.com/ndtrace/ndtrace/store"
	_ "github.com/ndtrace/ndtrace/store/drivers"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// byteTokenizer is a test tokenizer: one id per byte (0–255), then one id per special token in the
// order of tokenize.SpecialTokens.
type byteTokenizer struct{}

const byteTokenizerName = "test-bytes"

func (byteTokenizer) Name() string { return byteTokenizerName }

func (byteTokenizer) EncodeOrdinary(text string) []int32 {
	ids := make([]int32, len(text))
	for i := 0; i < len(text); i++ {
		ids[i] = int32(text[i])
	}
	return ids
}

func (byteTokenizer) SpecialID(token string) (int32, bool) {
	i := slices.Index(tokenize.SpecialTokens, token)
	if i < 0 {
		return 0, false
	}
	return int32(256 + i), true
}

func (byteTokenizer) Decode(ids []int32) (string, error) {
	var b strings.Builder
	for _, id := range ids {
		switch {
		case id >= 0 && id < 256:
			b.WriteByte(byte(id))
		case id >= 256 && int(id) < 256+len(tokenize.SpecialTokens):
			b.WriteString(tokenize.SpecialTokens[id-256])
		default:
			return "", fmt.Errorf("id %d is outside the vocabulary", id)
		}
	}
	if !utf8.ValidString(b.String()) {
		return "", errors.New("ids do not decode to valid UTF-8")
	}
	return b.String(), nil
}

func (byteTokenizer) VocabSize() int { return 256 + len(tokenize.SpecialTokens) }

// testLookup knows only the byte tokenizer.
func testLookup(name string) (tokenize.Tokenizer, error) {
	if name == byteTokenizerName {
		return byteTokenizer{}, nil
	}
	return nil, fmt.Errorf("unknown tokenizer %q", name)
}

// testCreated is the creation time of every test dataset.
var testCreated = time.Date(2026, 11, 22, 7, 0, 0, 123456000, time.UTC)

// testVersions are the versions every test row carries.
var testVersions = Versions{Tracer: "tracer-1", Pipeline: "pipeline-1", Tokenizer: byteTokenizerName}

// trajectoryText renders a small trajectory in the shape of the grammar (CODE context, initial
// state, then action/state pairs, then the exit), with some non-ASCII text.
func trajectoryText(seed, steps int) string {
	var b strings.Builder
	b.WriteString(tokenize.BeginOfText + tokenize.TraceContextStart)
	fmt.Fprintf(&b, "def f(x):  # café ☕ %d\n    y = x * %d\n    return y\n", seed, seed)
	b.WriteString(tokenize.FrameSep)
	fmt.Fprintf(&b, `{"x": %d}`, seed)
	b.WriteString(tokenize.ActionSep)
	for s := range steps {
		b.WriteString(tokenize.StepOver + tokenize.FrameSep)
		fmt.Fprintf(&b, `{"x": %d, "y": %d, "é": "日本"}`, seed, s)
		b.WriteString(tokenize.ActionSep)
	}
	b.WriteString(tokenize.StepOver + tokenize.FrameSep + tokenize.ExitNormal + tokenize.TraceEnd + tokenize.EndOfText)
	return b.String()
}

// makeRow builds a consistent row from a text, tokenized with the byte tokenizer.
func makeRow(t testing.TB, seed int, text string) schemas.Row {
	t.Helper()
	tok := byteTokenizer{}
	ids, err := tokenize.Encode(tok, text)
	if err != nil {
		t.Fatal(err)
	}
	mask, err := tokenize.LossMask(tok, ids, tokenize.MaskStates)
	if err != nil {
		t.Fatal(err)
	}
	learned := 0
	for _, m := range mask {
		if m {
			learned++
		}
	}
	return schemas.Row{
		ID:              fmt.Sprintf("%064x", seed),
		Level:           "function",
		Path:            "corpus/test.jsonl",
		QualName:        "f",
		SourceID:        fmt.Sprintf("test-%d", seed),
		Direction:       "forward",
		Policy:          "paper",
		Seed:            int64(seed),
		Text:            text,
		InputIDs:        ids,
		LossMask:        mask,
		NumTokens:       int32(len(ids)),
		NumLearned:      int32(learned),
		NumActions:      3,
		NumStates:       4,
		ActStepOver:     3,
		EvCall:          1,
		EvLine:          2,
		EvReturn:        1,
		Exit:            "exit_normal",
		CodeChars:       40,
		InputSource:     schemas.InputSourceCorpus,
		TracerVersion:   testVersions.Tracer,
		PipelineVersion: testVersions.Pipeline,
		Tokenizer:       byteTokenizerName,
		CreatedAt:       testCreated,
	}
}

// makeRows builds n rows with seeds from first on.
func makeRows(t testing.TB, first, n int) []schemas.Row {
	t.Helper()
	rows := make([]schemas.Row, n)
	for i := range rows {
		rows[i] = makeRow(t, first+i, trajectoryText(first+i, 1+(first+i)%4))
	}
	return rows
}

// writeTestDataset writes shards part-00000… of rowsPerShard rows each and commits the manifest.
func writeTestDataset(t testing.TB, st *store.Store, shards, rowsPerShard int) *Manifest {
	t.Helper()
	ctx := context.Background()
	var infos []ShardInfo
	for s := range shards {
		info, err := WriteShard(ctx, st, fmt.Sprintf("part-%05d", s), makeRows(t, s*rowsPerShard, rowsPerShard))
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	m, err := WriteManifest(ctx, st, Manifest{
		CreatedAt: testCreated,
		Config:    []byte(`{"seed": 7, "mask": "states", "policy": {"name": "paper"}}`),
		Versions:  testVersions,
		Shards:    infos,
		Counts:    schemas.Counts{"rejects.syntax_error": 2, "dropped_too_long": 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// openTest opens a store that is closed when the test ends.
func openTest(t *testing.T, rawURL string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), rawURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
