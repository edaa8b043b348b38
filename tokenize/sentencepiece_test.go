package tokenize

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// tinySP returns a hand-made SentencePiece-style tokenizer.json: <unk> <s> </s> (0–2), the byte
// tokens (3–258), then extra in order from 259, with the given normalizer, pre-tokenizer and
// model settings.
func tinySP(t testing.TB, modelType string, extra []string, scores []float64, merges []any, normalizer, pre any) []byte {
	t.Helper()
	toks := []string{"<unk>", "<s>", "</s>"}
	for b := 0; b < 256; b++ {
		toks = append(toks, byteToken(b))
	}
	toks = append(toks, extra...)
	var model map[string]any
	if modelType == "Unigram" {
		vocab := make([]any, len(toks))
		for i, s := range toks {
			score := 0.0
			if i >= 259 {
				score = scores[i-259]
			}
			vocab[i] = []any{s, score}
		}
		model = map[string]any{"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": true}
	} else {
		vocab := map[string]int{}
		for i, s := range toks {
			vocab[s] = i
		}
		model = map[string]any{"type": "BPE", "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true, "vocab": vocab, "merges": merges}
	}
	data, err := json.Marshal(map[string]any{
		"added_tokens":  []any{map[string]any{"id": 0, "content": "<unk>"}, map[string]any{"id": 1, "content": "<s>"}},
		"normalizer":    normalizer,
		"pre_tokenizer": pre,
		"decoder":       map[string]any{"type": "Metaspace"},
		"model":         model,
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var (
	llama2Norm = map[string]any{"type": "Sequence", "normalizers": []any{
		map[string]any{"type": "Prepend", "prepend": "▁"},
		map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"}}}
	gemmaNorm = map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"}
)

func metaspace(scheme string, split bool) map[string]any {
	return map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split}
}

// byteIDs returns the byte-token ids of s in tinySP files.
func byteIDs(s string) []int32 {
	var ids []int32
	for _, c := range []byte(s) {
		ids = append(ids, 3+int32(c))
	}
	return ids
}

func TestSentencePieceEncode(t *testing.T) {
	// 259 ▁, 260 a, 261 b, 262 ▁a, 263 ab, 264 ▁ab, 265 ▁▁
	extra := []string{"▁", "a", "b", "▁a", "ab", "▁ab", "▁▁"}
	strMerges := []any{"▁ a", "a b", "▁a b", "▁ ▁"}
	pairMerges := []any{[]string{"▁", "a"}, []string{"a", "b"}, []string{"▁a", "b"}, []string{"▁", "▁"}}
	// Unigram scores: ▁ -1, a -2, b -2, ▁a -2.5, ab -1, ▁ab -4, ▁▁ -1.5
	scores := []float64{-1, -2, -2, -2.5, -1, -4, -1.5}
	e := byteIDs("é")
	cat := func(parts ...[]int32) []int32 { return slices.Concat(parts...) }
	tests := []struct {
		name       string
		model      string
		merges     []any
		normalizer any
		pre        any
		text       string
		want       []int32
		decoded    string // Normalize(text) and Decode of the ids
	}{
		{"llama2 word", "BPE", strMerges, llama2Norm, nil, "ab", []int32{264}, "ab"},
		{"llama2 pair merges", "BPE", pairMerges, llama2Norm, nil, "ab", []int32{264}, "ab"},
		{"llama2 byte fallback", "BPE", strMerges, llama2Norm, nil, "ab é", cat([]int32{264, 259}, e), "ab é"},
		{"llama2 leading space", "BPE", strMerges, llama2Norm, nil, " a", []int32{259, 262}, " a"},
		{"llama2 unknown only", "BPE", strMerges, llama2Norm, nil, "😀", cat([]int32{259}, byteIDs("😀")), "😀"},
		{"llama2 empty", "BPE", strMerges, llama2Norm, nil, "", nil, ""},
		{"gemma no prefix", "BPE", strMerges, gemmaNorm, nil, "ab a", []int32{263, 262}, "ab a"},
		{"gemma meta in text", "BPE", strMerges, gemmaNorm, nil, "▁a", []int32{262}, " a"},
		{"metaspace first", "BPE", strMerges, nil, metaspace("first", false), "b ab", []int32{259, 261, 264}, "b ab"},
		{"metaspace leading space", "BPE", strMerges, nil, metaspace("always", false), " ab", []int32{264}, "ab"},
		{"metaspace never", "BPE", strMerges, nil, metaspace("never", false), "ab", []int32{263}, "ab"},
		// split false: "▁▁" merges across the boundary; split true cuts before each "▁".
		{"metaspace no split", "BPE", strMerges, nil, metaspace("never", false), "a  b", []int32{260, 265, 261}, "a  b"},
		{"metaspace split", "BPE", strMerges, nil, metaspace("never", true), "a  b", []int32{260, 259, 259, 261}, "a  b"},
		{"unigram best path", "Unigram", nil, nil, metaspace("always", true), "ab", []int32{259, 263}, "ab"},
		{"unigram byte fallback", "Unigram", nil, nil, metaspace("always", true), "aé", cat([]int32{262}, e), "aé"},
		{"unigram two words", "Unigram", nil, nil, metaspace("always", true), "a b", []int32{262, 259, 261}, "a b"},
		{"unigram no split", "Unigram", nil, nil, metaspace("never", false), "a  b", []int32{260, 265, 261}, "a  b"},
		{"unigram byte token spelled", "Unigram", nil, nil, metaspace("never", false), "<0x41>", []int32{3 + 0x41}, "A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := ReadHF(bytes.NewReader(tinySP(t, tt.model, extra, scores, tt.merges, tt.normalizer, tt.pre)), "tiny")
			if err != nil {
				t.Fatal(err)
			}
			got := tok.EncodeOrdinary(tt.text)
			if !slices.Equal(got, tt.want) {
				t.Errorf("EncodeOrdinary(%q) = %v, want %v", tt.text, got, tt.want)
			}
			back, err := tok.Decode(got)
			if err != nil || back != tt.decoded {
				t.Errorf("Decode = %q, %v; want %q", back, err, tt.decoded)
			}
			if n := tok.Normalize(tt.text); n != tt.decoded && !strings.Contains(tt.name, "spelled") {
				t.Errorf("Normalize = %q, want %q", n, tt.decoded)
			}
		})
	}
}

// TestSentencePieceSegments checks that the "▁" each segment gets is dropped again after a
// special token, and that Normalize works segment by segment as Encode does.
func TestSentencePieceSegments(t *testing.T) {
	text := "x = 1<|frame_sep|>y = 2<|line_sep|>  z"
	tests := []struct {
		style string
		want  string // Decode(Encode(text)) and Normalize(text)
	}{
		{"llama2", text},  // Prepend: a "▁" before every segment, dropped again
		{"mistral", text}, // prepend_scheme first: a "▁" before the first segment only
		{"gemma", text},   // no "▁" prepended
		// prepend_scheme always: "  z" gets no "▁" (it starts with one) but loses a space.
		{"unigram", "x = 1<|frame_sep|>y = 2<|line_sep|> z"},
	}
	for _, tt := range tests {
		t.Run(tt.style, func(t *testing.T) {
			tok := readSP(t, SPOptions{Style: tt.style})
			ids, err := Encode(tok, text)
			if err != nil {
				t.Fatal(err)
			}
			back, err := tok.Decode(ids)
			if err != nil || back != tt.want || tok.Normalize(text) != tt.want {
				t.Errorf("Decode(Encode(%q)) = %q, %v; Normalize %q; want %q", text, back, err, tok.Normalize(text), tt.want)
			}
		})
	}
	// prepend_scheme first: y after a special token has no "▁", at the start it has.
	tok := readSP(t, SPOptions{Style: "mistral"})
	frame, _ := tok.SpecialID(FrameSep)
	a, _ := Encode(tok, "y")
	b, _ := Encode(tok, FrameSep+"y")
	if slices.Equal(a, b[1:]) || b[0] != frame {
		t.Errorf("Encode(y) = %v and Encode(<|frame_sep|>y) = %v: want different ids for y", a, b)
	}
}

func readSP(t testing.TB, o SPOptions) *BPE {
	t.Helper()
	tok, err := ReadHF(bytes.NewReader(SentencePieceTokenizerJSON(o)), "sp-"+o.Style)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestSentencePieceSynthetic round-trips code through each synthetic style and checks that the
// merge formats agree.
func TestSentencePieceSynthetic(t *testing.T) {
	for _, style := range []string{"llama2", "mistral", "gemma", "unigram"} {
		t.Run(style, func(t *testing.T) {
			tok := readSP(t, SPOptions{Style: style})
			for _, text := range append(hfTexts, spCorpus, "  lead", "tab\tnew\nline", "▁meta▁") {
				ids, err := Encode(tok, text)
				if err != nil {
					t.Fatal(err)
				}
				back, err := tok.Decode(ids)
				if err != nil || back != tok.Normalize(text) {
					t.Errorf("Decode(Encode(%q)) = %q, %v; want %q", text, back, err, tok.Normalize(text))
				}
			}
			if style == "unigram" {
				return
			}
			pairs := readSP(t, SPOptions{Style: style, PairMerges: true})
			if a, b := tok.EncodeOrdinary(spCorpus), pairs.EncodeOrdinary(spCorpus); !slices.Equal(a, b) {
				t.Errorf("\"a b\" and [a, b] merges disagree:\n%v\n%v", a, b)
			}
		})
	}
}

func TestSentencePieceErrors(t *testing.T) {
	llama := func(change func(f map[string]any)) []byte {
		return editJSON(t, SentencePieceTokenizerJSON(SPOptions{Style: "llama2", Merges: 10}), change)
	}
	unigram := func(change func(m map[string]any)) []byte {
		return editJSON(t, SentencePieceTokenizerJSON(SPOptions{Style: "unigram", Merges: 10}),
			func(f map[string]any) { change(model(f)) })
	}
	tests := []struct {
		name        string
		data        []byte
		want        string
		unsupported bool
	}{
		{"no byte fallback", llama(func(f map[string]any) {
			model(f)["byte_fallback"] = false
			f["pre_tokenizer"] = metaspace("always", true)
		}), "without byte_fallback", true},
		{"missing byte token", llama(func(f map[string]any) { delete(model(f)["vocab"].(map[string]any), "<0x41>") }), "<0x41>", false},
		{"no meta token", llama(func(f map[string]any) {
			delete(model(f)["vocab"].(map[string]any), "▁")
			model(f)["merges"] = []any{}
		}), `no "▁" token`, false},
		{"regex replace", llama(func(f map[string]any) {
			f["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": " +"}, "content": "▁"}
		}), "Replace normalizer", true},
		{"prepend other", llama(func(f map[string]any) { f["normalizer"] = map[string]any{"type": "Prepend", "prepend": "_"} }), "Prepend normalizer", true},
		{"lowercase", llama(func(f map[string]any) { f["normalizer"] = map[string]any{"type": "Lowercase"} }), `normalizer type "Lowercase"`, true},
		{"other replacement", llama(func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "_"}
		}), "Metaspace replacement", true},
		{"bad scheme", llama(func(f map[string]any) { f["pre_tokenizer"] = metaspace("sometimes", false) }), "prepend_scheme", false},
		{"digits", llama(func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{map[string]any{"type": "Digits"}, metaspace("first", false)}}
		}), `pre_tokenizer type "Digits"`, true},
		{"bytelevel decoder", llama(func(f map[string]any) { f["decoder"] = map[string]any{"type": "ByteLevel"} }), `decoder type "ByteLevel"`, true},
		{"strip both", llama(func(f map[string]any) {
			f["decoder"] = map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 1}
		}), "Strip decoder", true},
		{"merge not in vocab", llama(func(f map[string]any) { model(f)["merges"] = []any{"▁ q"} }), "not in the vocab", false},
		{"wordpiece", llama(func(f map[string]any) { model(f)["type"] = "WordPiece" }), `model type "WordPiece"`, true},
		{"unigram no unk", unigram(func(m map[string]any) { delete(m, "unk_id") }), "unk_id", false},
		{"unigram bad entry", unigram(func(m map[string]any) { m["vocab"] = []any{[]any{"a"}} }), "vocab[0]", false},
		{"unigram vocab object", unigram(func(m map[string]any) { m["vocab"] = map[string]any{"a": 1} }), "vocab", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadHF(bytes.NewReader(tt.data), "x")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to mention %q", err, tt.want)
			}
			if errors.Is(err, ErrUnsupported) != tt.unsupported {
				t.Errorf("errors.Is(ErrUnsupported) = %v", !tt.unsupported)
			}
		})
	}
}

// FuzzSentencePiece feeds mutated SentencePiece-style tokenizer.json files to the parser, and text
// to the encoders: nothing may panic, and whatever is accepted must round-trip text through Encode
// and Decode.
func FuzzSentencePiece(f *testing.F) {
	for _, style := range []string{"llama2", "mistral", "gemma", "unigram"} {
		f.Add(SentencePieceTokenizerJSON(SPOptions{Style: style, Merges: 8}), "def f(x):\n    return x  # é😀")
	}
	f.Add([]byte(`{"model": {"type": "Unigram", "unk_id": 0, "vocab": [["a", -1]], "byte_fallback": true}}`), "a")
	f.Add([]byte(`{"pre_tokenizer": {"type": "Metaspace"}, "model": {"type": "BPE", "vocab": {"▁": 0}, "merges": []}}`), " ")
	toks := map[string]*BPE{}
	for _, style := range []string{"llama2", "mistral", "gemma", "unigram"} {
		toks[style] = readSP(f, SPOptions{Style: style, Merges: 50})
	}
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		check := func(tok *BPE) {
			if strings.Contains(text, "<0x") {
				return // a spelled byte token is that token (as in Hugging Face) and decodes to its byte
			}
			ids, err := Encode(tok, text)
			if err != nil {
				t.Fatal(err)
			}
			back, err := tok.Decode(ids)
			if err != nil || !utf8.ValidString(text) {
				if err != nil && utf8.ValidString(text) {
					t.Fatalf("%s: Decode(EncodeOrdinary(%q)): %v", tok.Name(), text, err)
				}
				return
			}
			if back != tok.Normalize(text) {
				t.Fatalf("%s: round trip %q: %q, want %q", tok.Name(), text, back, tok.Normalize(text))
			}
		}
		for _, tok := range toks {
			check(tok)
		}
		if tok, err := ReadHF(bytes.NewReader(data), "fuzz"); err == nil {
			check(tok)
		}
	})
}

// BenchmarkSentencePiece encodes the synthetic corpus (with its special tokens) with each
// SentencePiece style, piece cache warm.
func BenchmarkSentencePiece(b *testing.B) {
	text := strings.Repeat(spCorpus, 20)
	for _, style := range []string{"llama2", "mistral", "gemma", "unigram"} {
		tok := readSP(b, SPOptions{Style: style, Merges: 400})
		b.Run(style, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			n := 0
			for i := 0; i < b.N; i++ {
				ids, err := Encode(tok, text)
				if err != nil {
					b.Fatal(err)
				}
				n += len(ids)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
