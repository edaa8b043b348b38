package tokenize

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// tiktokenEncoding describes one of OpenAI's tiktoken encodings.
type tiktokenEncoding struct {
	file  string
	split func() splitter
	// own lists the encoding's own special tokens (decoded, never produced).
	own map[string]int32
}

var tiktokenEncodings = map[string]tiktokenEncoding{
	"cl100k_base": {
		file:  "cl100k_base.tiktoken",
		split: func() splitter { return cl100kSplitter{digits: 3} },
		own: map[string]int32{"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
			"<|fim_suffix|>": 100260, "<|endofprompt|>": 100276},
	},
	"o200k_base": {
		file:  "o200k_base.tiktoken",
		split: func() splitter { return o200kSplitter{} },
		own:   map[string]int32{"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
	},
}

// Tiktoken returns OpenAI's encoding "cl100k_base" or "o200k_base", offline: the ranks are the
// .tiktoken files embedded in github.com/pkoukk/tiktoken-go-loader. Ordinary ids equal tiktoken's.
// The grammar's special tokens take the ids after the encoding's last id, in SpecialTokens order:
// cl100k_base 100277–100305 (its ranks end at 100255, its own specials at 100276), o200k_base
// 200019–200047 (ranks end at 199997, own specials at 200018). The encoding's own special tokens
// (<|endoftext|>, ...) decode to their spelling but are never produced. Loading takes about 0.2 s
// (cl100k_base) or 0.5 s (o200k_base) and builds a new tokenizer every call; Get caches one per name.
func Tiktoken(encoding string) (*BPE, error) {
	enc, ok := tiktokenEncodings[encoding]
	if !ok {
		return nil, fmt.Errorf("tokenize: unknown tiktoken encoding %q (want cl100k_base or o200k_base)", encoding)
	}
	data, err := assets.Assets.ReadFile(enc.file)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %s: reading the embedded ranks: %w", encoding, err)
	}
	ranks, err := parseTiktoken(data)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %s: %w", encoding, err)
	}
	last := int32(len(ranks) - 1)
	for _, id := range enc.own {
		last = max(last, id)
	}
	text := make([]string, int(last)+1+len(SpecialTokens))
	whole := make(map[string]int32, len(ranks))
	for r, tok := range ranks {
		text[r] = tok
		whole[tok] = int32(r)
	}
	for tok, id := range enc.own {
		if text[id] != "" {
			return nil, fmt.Errorf("tokenize: %s: special token %s has the id %d of an ordinary token", encoding, tok, id)
		}
		text[id] = tok
	}
	t := &BPE{name: encoding, split: enc.split(), special: make(map[string]int32, len(SpecialTokens)), text: text}
	for i, tok := range SpecialTokens {
		id := last + 1 + int32(i)
		t.special[tok] = id
		text[id] = tok
	}
	t.model.whole = whole
	for b := 0; b < 256; b++ {
		id, ok := whole[string([]byte{byte(b)})]
		if !ok {
			return nil, fmt.Errorf("tokenize: %s: no token for byte 0x%02x", encoding, b)
		}
		t.model.byteID[b] = id
	}
	// tiktoken merges two adjacent parts when their concatenation is a token, with that token's
	// rank; every part is a token, so the merges are all splits of a token into two tokens.
	t.model.pairs = newPairTable(2 * len(ranks))
	for r, tok := range ranks {
		for k := 1; k < len(tok); k++ {
			a, ok1 := whole[tok[:k]]
			b, ok2 := whole[tok[k:]]
			if ok1 && ok2 {
				t.model.pairs.put(a, b, int32(r), int32(r))
			}
		}
	}
	t.next = splitFunc(t.split)
	return t, nil
}

// parseTiktoken reads a .tiktoken file: one "BASE64 RANK" line per token. Ranks must be 0..n-1,
// each once.
func parseTiktoken(data []byte) ([]string, error) {
	n := bytes.Count(data, []byte{'\n'}) + 1
	ranks := make([]string, 0, n)
	seen := 0
	for line := 1; len(data) > 0; line++ {
		var l []byte
		l, data, _ = bytes.Cut(data, []byte{'\n'})
		if len(l) == 0 {
			continue
		}
		tok64, rank, ok := bytes.Cut(l, []byte{' '})
		if !ok {
			return nil, fmt.Errorf("line %d: want \"TOKEN RANK\"", line)
		}
		r, err := strconv.Atoi(string(rank))
		if err != nil || r < 0 || r >= n {
			return nil, fmt.Errorf("line %d: bad rank %q", line, rank)
		}
		tok := make([]byte, base64.StdEncoding.DecodedLen(len(tok64)))
		m, err := base64.StdEncoding.Decode(tok, tok64)
		if err != nil || m == 0 {
			return nil, fmt.Errorf("line %d: bad token %q", line, tok64)
		}
		for len(ranks) <= r {
			ranks = append(ranks, "")
		}
		if ranks[r] != "" {
			return nil, fmt.Errorf("line %d: rank %d given twice", line, r)
		}
		ranks[r] = string(tok[:m])
		seen++
	}
	if seen != len(ranks) {
		return nil, fmt.Errorf("ranks are not contiguous: %d tokens, largest rank %d", seen, len(ranks)-1)
	}
	return ranks, nil
}

// splitFunc returns the single-piece matcher of a hand-written splitter, or nil.
func splitFunc(s splitter) func(tab []uint8, s string, i int) int {
	switch p := s.(type) {
	case cl100kSplitter:
		return p.next
	case o200kSplitter:
		return o200kNext
	}
	return nil
}
