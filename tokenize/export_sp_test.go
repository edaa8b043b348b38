package tokenize

import (
	"encoding/json"
	"fmt"
	"strings"
)

// SPOptions shape a synthetic SentencePiece-style tokenizer.json.
type SPOptions struct {
	// Style is "llama2" (BPE, byte_fallback, normalizer Prepend "▁" + Replace " " → "▁", no
	// pre-tokenizer), "mistral" (BPE, byte_fallback, Metaspace prepend_scheme first, split false),
	// "gemma" (BPE, byte_fallback, normalizer Replace only: no "▁" is prepended) or "unigram"
	// (Unigram with byte_fallback, Metaspace prepend_scheme always, split true).
	Style string
	// Merges is the number of merges learned (default 200).
	Merges int
	// PairMerges writes merges as ["a", "b"] instead of "a b".
	PairMerges bool
	// Chars are added to the vocabulary as single characters, so that they need no byte fallback.
	Chars string
	// Specials adds the grammar's special tokens (SpecialTokens) as added tokens after the
	// vocabulary, as a model fine-tuned on trajectories would have them.
	Specials bool
}

// spCorpus is the text the synthetic SentencePiece vocabularies are learned from.
const spCorpus = syntheticCorpus + `
def g(text, n=3):
    words = text.split()
    return {"words": words[:n], "count": len(words)}
<|frame_sep|><|line_sep|>{"text": "'a b c'", "n": "3"}<|src_sep|>    return {"words": words[:n]}
`

// SentencePieceTokenizerJSON returns a small but real SentencePiece-style tokenizer.json: <unk>,
// <s>, </s> (ids 0–2, also added tokens), the 256 byte tokens <0x00>…<0xFF> (3–258), "▁" and the
// printable ASCII characters, then o.Chars and the tokens of merges learned from a fixed corpus
// (pieces cut before each "▁", so no token has a "▁" but first). Unigram files score a token by
// its merge order; single characters score lowest.
func SentencePieceTokenizerJSON(o SPOptions) []byte {
	if o.Merges == 0 {
		o.Merges = 200
	}
	var tokens []string
	vocab := map[string]int{}
	add := func(s string) {
		if _, ok := vocab[s]; !ok {
			vocab[s] = len(tokens)
			tokens = append(tokens, s)
		}
	}
	for _, s := range []string{"<unk>", "<s>", "</s>"} {
		add(s)
	}
	for b := 0; b < 256; b++ {
		add(byteToken(b))
	}
	nChars := len(tokens)
	add(metaSpace)
	for c := '!'; c <= '~'; c++ {
		add(string(c))
	}
	for _, r := range o.Chars {
		if r != ' ' {
			add(string(r))
		}
	}
	chars := len(tokens) - nChars
	// Words: the corpus with spaces as "▁", cut before each "▁", as symbol sequences with counts.
	text := strings.ReplaceAll(spCorpus, " ", metaSpace)
	counts := map[string]int{}
	for _, w := range strings.SplitAfter(strings.ReplaceAll(text, metaSpace, "\x00"+metaSpace), "\x00") {
		if w = strings.TrimSuffix(w, "\x00"); w != "" {
			counts[w]++
		}
	}
	runesOf := func(k string) []string {
		var syms []string
		for _, r := range k {
			syms = append(syms, string(r))
		}
		return syms
	}
	merges := learnMerges(counts, runesOf, vocab, add, o.Merges, o.PairMerges)
	str := func(s string) map[string]any { return map[string]any{"String": s} }
	replace := map[string]any{"type": "Replace", "pattern": str(" "), "content": metaSpace}
	spDecoder := map[string]any{"type": "Sequence", "decoders": []any{
		map[string]any{"type": "Replace", "pattern": str(metaSpace), "content": " "},
		map[string]any{"type": "ByteFallback"},
		map[string]any{"type": "Fuse"},
		map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
	}}
	addedTokens := []any{addedToken(0, "<unk>"), addedToken(1, "<s>"), addedToken(2, "</s>")}
	if o.Specials {
		for i, s := range SpecialTokens {
			addedTokens = append(addedTokens, addedToken(len(tokens)+i, s))
		}
	}
	file := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens":   addedTokens,
		"post_processor": nil,
	}
	bpe := map[string]any{"type": "BPE", "dropout": nil, "unk_token": "<unk>", "continuing_subword_prefix": nil,
		"end_of_word_suffix": nil, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
		"vocab": vocab, "merges": merges}
	switch o.Style {
	case "llama2":
		file["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": metaSpace}, replace}}
		file["pre_tokenizer"] = nil
		file["decoder"] = spDecoder
		file["model"] = bpe
	case "mistral":
		file["normalizer"] = nil
		file["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": metaSpace, "prepend_scheme": "first", "split": false}
		file["decoder"] = map[string]any{"type": "Metaspace", "replacement": metaSpace, "prepend_scheme": "first", "split": false}
		file["model"] = bpe
	case "gemma":
		file["normalizer"] = replace
		file["pre_tokenizer"] = nil
		file["decoder"] = map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": str(metaSpace), "content": " "},
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"}}}
		file["model"] = bpe
	case "unigram":
		pieces := make([]any, len(tokens))
		for i, s := range tokens {
			// Dyadic scores: sums are exact, so no rounding decides between paths.
			score := 0.0
			switch {
			case i < nChars:
			case i < nChars+chars:
				score = -16 - float64(i%4)/4
			default:
				score = -2 - float64(i-nChars-chars)/64
			}
			pieces[i] = []any{s, score}
		}
		file["normalizer"] = nil
		file["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": metaSpace, "prepend_scheme": "always", "split": true}
		file["decoder"] = map[string]any{"type": "Metaspace", "replacement": metaSpace, "prepend_scheme": "always", "split": true}
		file["model"] = map[string]any{"type": "Unigram", "unk_id": 0, "vocab": pieces, "byte_fallback": true}
	default:
		panic(fmt.Sprintf("unknown SentencePiece style %q", o.Style))
	}
	data, err := json.MarshalIndent(file, "", " ")
	if err != nil {
		panic(err)
	}
	return data
}
