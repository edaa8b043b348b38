package tokenize

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func readSynthetic(t testing.TB, o SyntheticOptions) *BPE {
	t.Helper()
	tok, err := ReadHF(bytes.NewReader(SyntheticTokenizerJSON(o)), "synthetic")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

var hfTexts = []string{
	"def f(nums):\n    return [n * n for n in nums]\n",
	"s = 'naïve café' # don't WE'LL 12345678\n",
	"e\u0301 = 'cafe\u0301'", // NFD text, normalized to NFC
	"<|frame_sep|><|endoftext|>",
	"\t\t  \n\n  x😀😀",
}

func TestReadHFSynthetic(t *testing.T) {
	tok := readSynthetic(t, SyntheticOptions{})
	if ok, _ := regexp.MatchString(`^hf:synthetic@[0-9a-f]{8}$`, tok.Name()); !ok {
		t.Errorf("Name %q", tok.Name())
	}
	// <|frame_sep|> is an added token of the file and keeps its id; the other grammar tokens follow
	// the largest id, in SpecialTokens order, skipping it.
	frame, _ := tok.SpecialID(FrameSep)
	if frame != int32(tok.model.pairs.n+256+1) {
		t.Errorf("<|frame_sep|> has id %d, want the file's %d", frame, tok.model.pairs.n+256+1)
	}
	next := frame + 1
	for _, s := range SpecialTokens {
		if s == FrameSep {
			continue
		}
		if id, _ := tok.SpecialID(s); id != next {
			t.Errorf("%s has id %d, want %d", s, id, next)
		}
		next++
	}
	if tok.VocabSize() != int(next) {
		t.Errorf("VocabSize %d, want %d", tok.VocabSize(), next)
	}
	if s, err := tok.Decode([]int32{frame - 1}); err != nil || s != "<|endoftext|>" {
		t.Errorf("Decode(added <|endoftext|>) = %q, %v", s, err)
	}
	for _, text := range hfTexts {
		ids := tok.EncodeOrdinary(text)
		back, err := tok.Decode(ids)
		if err != nil || back != tok.Normalize(text) {
			t.Errorf("round trip %q: %q, %v", text, back, err)
		}
		if len(ids) >= len(text) && len(text) > 20 {
			t.Errorf("%q: %d ids for %d bytes, merges not applied", text, len(ids), len(text))
		}
	}
	if got := tok.Normalize("e\u0301"); got != "é" {
		t.Errorf("NFC: %q", got)
	}
}

// TestHFVariantsAgree checks that equivalent files give the same ids: merges as strings or pairs,
// the hand-written pre-tokenizer or regexp2 on the same pattern, and ignore_merges (which on a
// vocabulary learned by merging changes nothing).
func TestHFVariantsAgree(t *testing.T) {
	base := readSynthetic(t, SyntheticOptions{})
	variants := map[string]*BPE{
		"pair merges":   readSynthetic(t, SyntheticOptions{PairMerges: true}),
		"regexp2":       readSynthetic(t, SyntheticOptions{Pattern: "(?:" + PatternQwen2 + ")"}),
		"ignore_merges": readSynthetic(t, SyntheticOptions{IgnoreMerges: true}),
	}
	if variants["regexp2"].next != nil || base.next == nil {
		t.Fatal("pattern recognition: want the hand-written splitter only for the exact pattern")
	}
	r := rand.New(rand.NewPCG(3, 4))
	texts := append([]string{}, hfTexts...)
	for i := 0; i < 300; i++ {
		texts = append(texts, randomSplitText(r, 1+r.IntN(60)))
	}
	for _, text := range texts {
		want := base.EncodeOrdinary(text)
		for name, v := range variants {
			if got := v.EncodeOrdinary(text); !slices.Equal(got, want) {
				t.Fatalf("%s: %q gives %v, want %v", name, text, got, want)
			}
		}
	}
}

func TestReadLlama3Table(t *testing.T) {
	// A minimal Llama-3-shaped file: the synthetic vocabulary with added tokens at 128000–128255.
	var f map[string]any
	if err := json.Unmarshal(SyntheticTokenizerJSON(SyntheticOptions{NoNormalizer: true}), &f); err != nil {
		t.Fatal(err)
	}
	mk := func(frameAt int) []byte {
		var added []any
		for id := 128000; id < 128256; id++ {
			var content string
			switch {
			case id == 128000:
				content = BeginOfText
			case id == 128001:
				content = EndOfText
			case id == frameAt:
				content = FrameSep
			default:
				content = "<|reserved_special_token_" + strconv.Itoa(id-128002) + "|>"
			}
			added = append(added, map[string]any{"id": id, "content": content, "special": true})
		}
		f["added_tokens"] = added
		data, _ := json.Marshal(f)
		return data
	}
	tok, err := ReadLlama3(bytes.NewReader(mk(128100)), "tiny")
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range SpecialTokens {
		want := int32(128100 + i - 2)
		if i < 2 {
			want = int32(128000 + i)
		}
		if id, _ := tok.SpecialID(s); id != want {
			t.Errorf("%s: id %d, want %d", s, id, want)
		}
		if got, _ := tok.Decode([]int32{want}); got != s {
			t.Errorf("Decode(%d) = %q, want %s", want, got, s)
		}
	}
	if tok.VocabSize() != 128256 || !strings.HasPrefix(tok.Name(), "llama3:tiny@") {
		t.Errorf("VocabSize %d, Name %q", tok.VocabSize(), tok.Name())
	}
	if _, err := ReadLlama3(bytes.NewReader(mk(128105)), "tiny"); err == nil {
		t.Error("<|frame_sep|> at another id was accepted")
	}
	if _, err := ReadLlama3(bytes.NewReader(SyntheticTokenizerJSON(SyntheticOptions{})), "tiny"); err == nil ||
		!strings.Contains(err.Error(), "not a Llama 3 vocabulary") {
		t.Errorf("non-Llama file: %v", err)
	}
}

// edit returns the synthetic tokenizer.json with one change applied to its decoded JSON.
func edit(t *testing.T, change func(f map[string]any)) []byte {
	t.Helper()
	return editJSON(t, SyntheticTokenizerJSON(SyntheticOptions{Merges: 20}), change)
}

// editJSON returns the JSON file data with one change applied to its decoded object.
func editJSON(t *testing.T, data []byte, change func(f map[string]any)) []byte {
	t.Helper()
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	change(f)
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func model(f map[string]any) map[string]any { return f["model"].(map[string]any) }

func TestReadHFErrors(t *testing.T) {
	tests := []struct {
		name        string
		change      func(f map[string]any)
		want        string
		unsupported bool
	}{
		{"unigram", func(f map[string]any) { model(f)["type"] = "Unigram" }, `pre_tokenizer type "Split" in a SentencePiece-style file`, true},
		{"dropout", func(f map[string]any) { model(f)["dropout"] = 0.1 }, "model.dropout", true},
		{"byte fallback", func(f map[string]any) { model(f)["byte_fallback"] = true }, `pre_tokenizer type "Split" in a SentencePiece-style file`, true},
		{"suffix", func(f map[string]any) { model(f)["end_of_word_suffix"] = "</w>" }, "end_of_word_suffix", true},
		{"prefix", func(f map[string]any) { model(f)["continuing_subword_prefix"] = "##" }, "continuing_subword_prefix", true},
		{"lowercase", func(f map[string]any) { f["normalizer"] = map[string]any{"type": "Lowercase"} }, `normalizer type "Lowercase"`, true},
		{"nested normalizer", func(f map[string]any) {
			f["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}, map[string]any{"type": "Strip"}}}
		}, `normalizer type "Strip"`, true},
		{"metaspace", func(f map[string]any) { f["pre_tokenizer"] = map[string]any{"type": "Metaspace"} }, `decoder type "ByteLevel" in a SentencePiece-style file`, true},
		{"digits", func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{map[string]any{"type": "Digits"}, map[string]any{"type": "ByteLevel"}}}
		}, `pre_tokenizer type "Digits"`, true},
		{"prefix space", func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "add_prefix_space": true}
		}, "add_prefix_space", true},
		{"removed", func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\s+`}, "behavior": "Removed"}, map[string]any{"type": "ByteLevel"}}}
		}, `Split behavior "Removed"`, true},
		{"no pre-tokenizer", func(f map[string]any) { f["pre_tokenizer"] = nil }, "does not end with ByteLevel", true},
		{"wordpiece decoder", func(f map[string]any) { f["decoder"] = map[string]any{"type": "WordPiece"} }, `decoder type "WordPiece"`, true},
		{"no decoder", func(f map[string]any) { f["decoder"] = nil }, "no decoder", true},
		{"bad regex", func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `(`}, "behavior": "Isolated"}, map[string]any{"type": "ByteLevel"}}}
		}, "Split pattern", false},
		{"bad merge", func(f map[string]any) { model(f)["merges"] = []any{"a"} }, "merges[0]", false},
		{"merge not in vocab", func(f map[string]any) { model(f)["merges"] = []any{"Ġ ¬"} }, "not in the vocab", false},
		{"missing byte", func(f map[string]any) { delete(model(f)["vocab"].(map[string]any), "Ā"); model(f)["merges"] = []any{} }, "no token for byte 0x00", false},
		{"no model", func(f map[string]any) { delete(f, "model") }, "no model", false},
		{"added without id", func(f map[string]any) { f["added_tokens"] = []any{map[string]any{"content": "x"}} }, "added_tokens[0]", false},
		{"special is ordinary", func(f map[string]any) {
			f["added_tokens"] = []any{map[string]any{"id": 5, "content": FrameSep}}
		}, "ordinary vocabulary entry", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadHF(bytes.NewReader(edit(t, tt.change)), "x")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to mention %q", err, tt.want)
			}
			if errors.Is(err, ErrUnsupported) != tt.unsupported {
				t.Errorf("errors.Is(ErrUnsupported) = %v", !tt.unsupported)
			}
		})
	}
	if _, err := ReadHF(strings.NewReader("{"), "x"); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("truncated JSON: %v", err)
	}
	if _, err := ReadHF(iotest.ErrReader(errors.New("boom")), "x"); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("read error: %v", err)
	}
	if _, err := ReadHF(strings.NewReader("{}"), "bad label"); err == nil {
		t.Error("bad label accepted")
	}
}

// FuzzReadHF feeds mutated tokenizer.json files to the parser: it must not panic, and whatever it
// accepts must round-trip text.
func FuzzReadHF(f *testing.F) {
	f.Add(SyntheticTokenizerJSON(SyntheticOptions{Merges: 10}))
	f.Add(SyntheticTokenizerJSON(SyntheticOptions{Merges: 10, PairMerges: true, Pattern: `\s+|\w+`}))
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a a"]}}`))
	f.Add([]byte(`{"added_tokens": [{"id": 1e9, "content": "x"}], "model": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := ReadHF(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		for _, text := range []string{"def f(x):\n    return x  # é\n", "<|frame_sep|>'s 123 😀"} {
			ids := tok.EncodeOrdinary(text)
			back, err := tok.Decode(ids)
			if err != nil || back != tok.Normalize(text) {
				t.Fatalf("round trip %q: %q, %v", text, back, err)
			}
		}
	})
}

// TestMergeHeapMatchesScan checks the heap merge of long pieces against the quadratic scan.
func TestMergeHeapMatchesScan(t *testing.T) {
	for _, name := range []string{"cl100k_base", "o200k_base"} {
		tok, err := Tiktoken(name)
		if err != nil {
			t.Fatal(err)
		}
		hf := readSynthetic(t, SyntheticOptions{})
		r := rand.New(rand.NewPCG(5, 6))
		alphabet := []string{"a", "b", "e", "r", "t", " ", "  ", "_", "in", "é", "😀", "\n", "=", "th", "\xff"}
		for i := 0; i < 2000; i++ {
			var b strings.Builder
			for n := 2 + r.IntN(smallPiece-2); b.Len() < n; {
				b.WriteString(alphabet[r.IntN(len(alphabet))])
			}
			piece := b.String()
			if len(piece) > smallPiece {
				piece = piece[:smallPiece]
			}
			for _, m := range []*bpeModel{&tok.model, &hf.model} {
				scan, heap := m.merge(nil, piece), m.mergeHeap(nil, piece)
				if !slices.Equal(scan, heap) {
					t.Fatalf("%s %q: scan %v, heap %v", name, piece, scan, heap)
				}
			}
		}
	}
}

func TestPieceCacheBounded(t *testing.T) {
	var c pieceCache
	for i := 0; i < 20*cacheShards*cacheShardEntries/10; i++ {
		p := strconv.Itoa(i)
		c.put(c.hash(p), p, []int32{int32(i)})
	}
	total := 0
	for i := range c.shards {
		total += len(c.shards[i].cur) + len(c.shards[i].old)
	}
	if total > 2*cacheShards*cacheShardEntries {
		t.Errorf("cache holds %d entries, bound %d", total, 2*cacheShards*cacheShardEntries)
	}
	// A recent piece is still there; a colliding hash with another piece is a miss.
	last := strconv.Itoa(20*cacheShards*cacheShardEntries/10 - 1)
	if ids, ok := c.get(c.hash(last), last); !ok || len(ids) != 1 {
		t.Errorf("recent piece missing")
	}
	if _, ok := c.get(c.hash(last), "other"); ok {
		t.Errorf("hash collision returned another piece's ids")
	}
	c.reset()
	if _, ok := c.get(c.hash(last), last); ok {
		t.Errorf("reset kept entries")
	}
}

func TestFileLabel(t *testing.T) {
	tests := []struct{ spec, label, path string }{
		{"/m/qwen3.json", "qwen3", "/m/qwen3.json"},
		{"/m/Qwen3-8B/tokenizer.json", "tokenizer", "/m/Qwen3-8B/tokenizer.json"},
		{"qwen3=/m/Qwen3-8B/tokenizer.json", "qwen3", "/m/Qwen3-8B/tokenizer.json"},
		{"/a=b/my tok.json", "my_tok", "/a=b/my tok.json"},
	}
	for _, tt := range tests {
		if l, p := fileLabel(tt.spec); l != tt.label || p != tt.path {
			t.Errorf("fileLabel(%q) = %q, %q", tt.spec, l, p)
		}
	}
}
