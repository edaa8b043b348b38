package tokenize

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bytes returns the byte-level tokenizer "bytes": one id per byte (0–255) and the grammar's special
// tokens from 256 in SpecialTokens order. It needs no vocabulary, so it suits tests and debugging; its
// sequences are about three times longer than a BPE tokenizer's.
func Bytes() Tokenizer { return bytesTokenizer{} }

type bytesTokenizer struct{}

func (bytesTokenizer) Name() string { return "bytes" }

func (bytesTokenizer) EncodeOrdinary(s string) []int32 {
	ids := make([]int32, len(s))
	for i := 0; i < len(s); i++ {
		ids[i] = int32(s[i])
	}
	return ids
}

func (bytesTokenizer) SpecialID(tok string) (int32, bool) {
	for i, s := range SpecialTokens {
		if s == tok {
			return int32(256 + i), true
		}
	}
	return 0, false
}

func (bytesTokenizer) Decode(ids []int32) (string, error) {
	var b strings.Builder
	b.Grow(len(ids))
	for i, id := range ids {
		switch {
		case id >= 0 && id < 256:
			b.WriteByte(byte(id))
		case id >= 256 && int(id) < 256+len(SpecialTokens):
			b.WriteString(SpecialTokens[id-256])
		default:
			return "", fmt.Errorf("tokenize: bytes: id %d at %d is outside the vocabulary", id, i)
		}
	}
	if !utf8.ValidString(b.String()) {
		return "", fmt.Errorf("tokenize: bytes: the ids do not decode to valid UTF-8")
	}
	return b.String(), nil
}

func (bytesTokenizer) VocabSize() int { return 256 + len(SpecialTokens) }
