package tokenize

import (
	"fmt"
	"strings"
)

// A Tokenizer maps text to token ids and back. Implementations are safe for concurrent use.
//
// The special tokens of the grammar (SpecialTokens) always map to exactly one id each and are never
// split; EncodeOrdinary never produces them, even if the text contains their spelling, so a special id
// in a sequence is always structure. Every implementation passes the conformance suite in
// tokenize/tokenizertest.
type Tokenizer interface {
	// Name identifies the tokenizer and its vocabulary (for example "cl100k_base"); it is recorded in
	// every dataset row.
	Name() string
	// EncodeOrdinary returns the ids of text, treating every character as ordinary text.
	EncodeOrdinary(text string) []int32
	// SpecialID returns the id of a special token of the grammar.
	SpecialID(token string) (int32, bool)
	// Decode returns the text of ids; special ids decode to their spelling. It fails on ids outside
	// the vocabulary and on sequences that are not valid UTF-8 as a whole.
	Decode(ids []int32) (string, error)
	// VocabSize is one more than the largest id the tokenizer can produce.
	VocabSize() int
}

// Encode tokenizes rendered grammar text: every spelling of a special token is that token's id and
// the text between them is ordinary. Text rendered by this package contains special-token spellings
// only as structure (Render refuses them in code and source lines and escapes them in values).
//
// As in Hugging Face tokenizers, the text after a special token is a new section: a
// SentencePiece-style tokenizer whose Metaspace pre-tokenizer has prepend_scheme first puts its
// "▁" before the first section only.
func Encode(tok Tokenizer, text string) ([]int32, error) {
	ids := make([]int32, 0, len(text)/3+8)
	sec, _ := tok.(sectionEncoder)
	encode := func(s string, first bool) {
		if sec != nil {
			ids = sec.encodeSection(ids, s, first)
		} else {
			ids = append(ids, tok.EncodeOrdinary(s)...)
		}
	}
	for first := true; len(text) > 0; first = false {
		i, special := nextSpecial(text)
		if i < 0 {
			encode(text, first)
			break
		}
		if i > 0 {
			encode(text[:i], first)
		}
		id, ok := tok.SpecialID(special)
		if !ok {
			return nil, fmt.Errorf("tokenize: %s has no id for special token %s", tok.Name(), special)
		}
		ids = append(ids, id)
		text = text[i+len(special):]
	}
	return ids, nil
}

// sectionEncoder is implemented by tokenizers that encode the first section of an input differently
// from the sections after special tokens (BPE with a SentencePiece-style file).
type sectionEncoder interface {
	encodeSection(dst []int32, text string, first bool) []int32
}

// nextSpecial finds the first special-token spelling in text.
func nextSpecial(text string) (int, string) {
	for off := 0; ; {
		i := strings.Index(text[off:], "<|")
		if i < 0 {
			return -1, ""
		}
		i += off
		if tok := specialAt(text, i); tok != "" {
			return i, tok
		}
		off = i + 2
	}
}

// MaskMode chooses which tokens a row's loss mask marks as learned.
type MaskMode string

// Loss-mask modes.
const (
	// MaskStates marks the tokens of every state produced by an action, its closing <|action_sep|>
	// included, and the exit with <|trace_end|><|end_of_text|>. The CODE context, the initial state,
	// the actions and the <|frame_sep|> before each state are given, not learned.
	MaskStates MaskMode = "states"
	// MaskAll marks every token.
	MaskAll MaskMode = "all"
)

// LossMask returns the loss mask of the ids of a rendered trajectory (see MaskMode): 1 for a token the
// model learns to predict, 0 for a token it is given.
func LossMask(tok Tokenizer, ids []int32, mode MaskMode) ([]bool, error) {
	mask := make([]bool, len(ids))
	switch mode {
	case MaskAll:
		for i := range mask {
			mask[i] = true
		}
		return mask, nil
	case MaskStates, "":
	default:
		return nil, fmt.Errorf("tokenize: unknown loss mask mode %q (want states or all)", mode)
	}
	frame, ok1 := tok.SpecialID(FrameSep)
	action, ok2 := tok.SpecialID(ActionSep)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("tokenize: %s lacks the frame and action separators", tok.Name())
	}
	// learned: inside a state that follows an action, up to and including its <|action_sep|>, or in
	// the exit after the last action.
	actions, learned := 0, false
	for i, id := range ids {
		switch {
		case id == frame:
			learned = actions > 0
		case id == action && learned:
			mask[i] = true
			learned = false
			actions++
			continue
		case id == action:
			actions++
		}
		if learned && id != frame {
			mask[i] = true
		}
	}
	return mask, nil
}

// LearnedTokens counts the true entries of a loss mask: the tokens learned.
func LearnedTokens(mask []bool) int64 {
	n := int64(0)
	for _, m := range mask {
		if m {
			n++
		}
	}
	return n
}
