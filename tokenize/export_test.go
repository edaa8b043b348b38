package tokenize

import (
	"encoding/json"
	"sort"
)

// ResetCache empties t's piece cache (benchmarks measure a cold cache).
func (t *BPE) ResetCache() { t.cache.reset() }

// SyntheticOptions shape a synthetic tokenizer.json.
type SyntheticOptions struct {
	// Pattern is the Split regex (default PatternQwen2).
	Pattern string
	// Merges is the number of merges learned (default 300).
	Merges int
	// PairMerges writes merges as ["a", "b"] instead of "a b".
	PairMerges bool
	// NoNormalizer leaves out the NFC normalizer.
	NoNormalizer bool
	// IgnoreMerges sets model.ignore_merges.
	IgnoreMerges bool
}

// syntheticCorpus is the text the synthetic vocabulary is learned from.
const syntheticCorpus = `def f(nums):
    out = []
    for n in nums:
        out.append(n * n)
    return out
<|frame_sep|><|line_sep|><|arg_sep|>{"nums": "[1, 2, 3]", "out": "[]"}<|src_sep|>    for n in nums:
class Stack:
    def __init__(self):
        self.items = []
    def push(self, item):
        self.items.append(item)
s = 'naïve café ünïcödé 中文中文 😀😀' # don't WE'LL
print(f"{x!r:>10} {y:.3f}", end='') 12345678 0xFF
`

// SyntheticTokenizerJSON returns a small but real byte-level BPE tokenizer.json: the 256 byte tokens
// (ids 0–255 in byte order), merges learned from a fixed corpus with the given split pattern, an
// NFC normalizer, and two added tokens: <|endoftext|> and the grammar's <|frame_sep|>.
func SyntheticTokenizerJSON(o SyntheticOptions) []byte {
	if o.Pattern == "" {
		o.Pattern = PatternQwen2
	}
	if o.Merges == 0 {
		o.Merges = 300
	}
	sp, err := newRegexSplitter(o.Pattern)
	if err != nil {
		panic(err)
	}
	// Words: byte-level symbol sequences of each piece, with counts.
	counts := map[string]int{}
	prev := 0
	for _, e := range sp.split(nil, syntheticCorpus) {
		counts[syntheticCorpus[prev:e]]++
		prev = e
	}
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteLevel[b])] = b
	}
	bytesOf := func(k string) []string {
		var syms []string
		for i := 0; i < len(k); i++ {
			syms = append(syms, string(byteLevel[k[i]]))
		}
		return syms
	}
	merges := learnMerges(counts, bytesOf, vocab, func(s string) { vocab[s] = len(vocab) }, o.Merges, o.PairMerges)
	var normalizer any
	if !o.NoNormalizer {
		normalizer = map[string]any{"type": "NFC"}
	}
	n := len(vocab)
	file := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens": []any{addedToken(n, "<|endoftext|>"), addedToken(n+1, "<|frame_sep|>")},
		"normalizer":   normalizer,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": o.Pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": o.IgnoreMerges,
			"vocab": vocab, "merges": merges},
	}
	data, err := json.MarshalIndent(file, "", " ")
	if err != nil {
		panic(err)
	}
	return data
}

// learnMerges learns up to n BPE merges from counts (a piece → how often), each piece cut into
// symbols by symbols. Each round merges, in every piece, the adjacent pair of symbols (both in
// vocab) that is most frequent, the smallest "a b" on ties, and calls add with the merged token when
// vocab does not have it yet. Merges are "a b", or ["a", "b"] with pairForm.
func learnMerges(counts map[string]int, symbols func(string) []string, vocab map[string]int, add func(string), n int, pairForm bool) []any {
	type word struct {
		syms []string
		n    int
	}
	var words []word
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		words = append(words, word{symbols(k), counts[k]})
	}
	var merges []any
	for len(merges) < n {
		pairs := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.syms); i++ {
				if _, ok1 := vocab[w.syms[i]]; !ok1 {
					continue
				}
				if _, ok2 := vocab[w.syms[i+1]]; !ok2 {
					continue
				}
				pairs[[2]string{w.syms[i], w.syms[i+1]}] += w.n
			}
		}
		var best [2]string
		bestN := 0
		for p, n := range pairs {
			if n > bestN || n == bestN && p[0]+" "+p[1] < best[0]+" "+best[1] {
				best, bestN = p, n
			}
		}
		if bestN == 0 {
			break
		}
		merged := best[0] + best[1]
		if _, ok := vocab[merged]; !ok {
			add(merged)
		}
		if pairForm {
			merges = append(merges, []string{best[0], best[1]})
		} else {
			merges = append(merges, best[0]+" "+best[1])
		}
		for wi := range words {
			w := &words[wi]
			out := w.syms[:0:0]
			for i := 0; i < len(w.syms); i++ {
				if i+1 < len(w.syms) && w.syms[i] == best[0] && w.syms[i+1] == best[1] {
					out = append(out, merged)
					i++
					continue
				}
				out = append(out, w.syms[i])
			}
			w.syms = out
		}
	}
	return merges
}

// addedToken is an entry of a tokenizer.json's added_tokens: a special token not normalized.
func addedToken(id int, content string) map[string]any {
	return map[string]any{"id": id, "content": content, "single_word": false, "lstrip": false,
		"rstrip": false, "normalized": false, "special": true}
}
