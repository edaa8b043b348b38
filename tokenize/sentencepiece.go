package tokenize

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// SentencePiece-style tokenizer.json files (Llama 2, CodeLlama, Mistral, Gemma, T5-like Unigram
// files) work on characters, not bytes: spaces become the meta symbol "▁" (a Replace normalizer or
// the Metaspace pre-tokenizer, often with a "▁" prepended), a BPE model merges characters, or a
// Unigram model picks the most likely segmentation, and a character outside the vocabulary becomes
// its UTF-8 bytes as the tokens <0x00>…<0xFF> (byte_fallback).

// metaSpace is the replacement of a space in SentencePiece vocabularies (U+2581).
const metaSpace = "▁"

// sentencePiece is the pipeline of a SentencePiece-style file.
type sentencePiece struct {
	// normalizers run in order on the text (NFx, Replace " " → "▁", Prepend "▁").
	normalizers []func(string) string
	// metaspace is the Metaspace pre-tokenizer, if any.
	metaspace *metaspaceStep
	// vocab maps a token to its id.
	vocab map[string]int32
	// byteID is the id of each byte token <0xNN>.
	byteID [256]int32
	// pairs are the BPE merges (nil for Unigram).
	pairs *pairTable
	// ignoreMerges: a BPE piece that is a whole token is that token.
	ignoreMerges bool
	// unigram is the Unigram model (nil for BPE).
	unigram *unigramModel
	// stripLead is set when the pipeline puts a "▁" before the text (Prepend, or Metaspace with
	// prepend_scheme always or first): Decode then drops one leading space at the start of the ids,
	// as the Metaspace and Strip decoders do. stripSection is set when it also puts one before each
	// section after a special token (Prepend, prepend_scheme always; not first): Decode drops one
	// leading space after each grammar special token too.
	stripLead, stripSection bool
	// segStart holds the ids of the grammar's special tokens, after which a new segment starts.
	segStart map[int32]bool
}

// metaspaceStep is the Metaspace pre-tokenizer.
type metaspaceStep struct {
	prepend bool // prepend_scheme always or first: put "▁" first unless the text starts with one
	always  bool // prepend_scheme always: in every section, not only the first
	split   bool // cut the text before every "▁"
}

type unigramModel struct {
	scores   []float64 // by id; the unk id has the lowest score minus 10
	unk      int32
	maxPiece int // longest token, in bytes
}

// sentencePieceStyle reports whether f is a SentencePiece-style file rather than a byte-level BPE.
func sentencePieceStyle(f *hfFile) bool {
	if f.Model != nil && (f.Model.Type == "Unigram" || f.Model.ByteFallback) {
		return true
	}
	var steps []hfComponent
	if flattenPreTokenizers(f.PreTokenizer, &steps, 0) == nil {
		for _, c := range steps {
			if c.Type == "Metaspace" {
				return true
			}
		}
	}
	return false
}

// buildSentencePiece reads the normalizer, pre-tokenizer, decoder and model of a SentencePiece-style
// file into t, and returns the set of ordinary ids.
func (t *BPE) buildSentencePiece(f *hfFile) (map[int32]bool, error) {
	sp := &sentencePiece{}
	if err := sp.readNormalizer(f.Normalizer, 0); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	if err := sp.readPreTokenizer(f.PreTokenizer); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	if err := checkSPDecoder(f.Decoder, 0); err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	ordinary, err := t.readSPModel(sp, f.Model)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if _, ok := sp.vocab[metaSpace]; !ok {
		return nil, fmt.Errorf("model: vocab has no %q token", metaSpace)
	}
	t.sp = sp
	return ordinary, nil
}

func (sp *sentencePiece) readNormalizer(raw json.RawMessage, depth int) error {
	c, ok, err := readComponent(raw, depth)
	if !ok {
		return err
	}
	switch c.Type {
	case "NFC", "NFD", "NFKC", "NFKD":
		form := map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}[c.Type]
		sp.normalizers = append(sp.normalizers, form.String)
	case "Replace":
		if c.Pattern == nil || c.Pattern.String == nil || *c.Pattern.String != " " || c.Content == nil || *c.Content != metaSpace {
			return fmt.Errorf("%w: Replace normalizer other than \" \" → %q", ErrUnsupported, metaSpace)
		}
		sp.normalizers = append(sp.normalizers, func(s string) string { return strings.ReplaceAll(s, " ", metaSpace) })
	case "Prepend":
		if c.Prepend == nil || *c.Prepend != metaSpace {
			return fmt.Errorf("%w: Prepend normalizer other than %q", ErrUnsupported, metaSpace)
		}
		sp.normalizers = append(sp.normalizers, func(s string) string {
			if s == "" {
				return s
			}
			return metaSpace + s
		})
		sp.stripLead, sp.stripSection = true, true
	case "Sequence":
		for i, n := range c.Normalizers {
			if err := sp.readNormalizer(n, depth+1); err != nil {
				return fmt.Errorf("normalizers[%d]: %w", i, err)
			}
		}
	default:
		return fmt.Errorf("%w: normalizer type %q", ErrUnsupported, c.Type)
	}
	return nil
}

func (sp *sentencePiece) readPreTokenizer(raw json.RawMessage) error {
	var steps []hfComponent
	if err := flattenPreTokenizers(raw, &steps, 0); err != nil {
		return err
	}
	for _, c := range steps {
		if c.Type != "Metaspace" {
			return fmt.Errorf("%w: pre_tokenizer type %q in a SentencePiece-style file (only Metaspace)", ErrUnsupported, c.Type)
		}
		if sp.metaspace != nil {
			return fmt.Errorf("%w: two Metaspace pre-tokenizers", ErrUnsupported)
		}
		if c.Replacement != nil && *c.Replacement != metaSpace {
			return fmt.Errorf("%w: Metaspace replacement %q (only %q)", ErrUnsupported, *c.Replacement, metaSpace)
		}
		m := &metaspaceStep{prepend: true, always: true, split: true}
		switch {
		case c.PrependScheme != nil:
			switch *c.PrependScheme {
			case "always":
			case "first":
				m.always = false
			case "never":
				m.prepend = false
			default:
				return fmt.Errorf("Metaspace prepend_scheme %q (want always, first or never)", *c.PrependScheme)
			}
		default: // older files: add_prefix_space
			m.prepend = c.AddPrefixSpace
		}
		if c.Split != nil {
			m.split = *c.Split
		}
		sp.metaspace = m
		if m.prepend {
			sp.stripLead = true
			sp.stripSection = sp.stripSection || m.always
		}
	}
	return nil
}

// checkSPDecoder accepts the decoders of SentencePiece-style files: Metaspace, or a Sequence of
// Replace "▁" → " ", ByteFallback, Fuse and Strip. Decode always turns "▁" into a space and byte
// tokens into their bytes, and drops the space it put first (stripLead).
func checkSPDecoder(raw json.RawMessage, depth int) error {
	c, ok, err := readComponent(raw, depth)
	if !ok {
		return err
	}
	switch c.Type {
	case "Metaspace", "ByteFallback", "Fuse":
		return nil
	case "Replace":
		if c.Pattern == nil || c.Pattern.String == nil || *c.Pattern.String != metaSpace || c.Content == nil || *c.Content != " " {
			return fmt.Errorf("%w: Replace decoder other than %q → \" \"", ErrUnsupported, metaSpace)
		}
		return nil
	case "Strip":
		if c.Content == nil || *c.Content != " " || c.Start > 1 || c.Stop != 0 {
			return fmt.Errorf("%w: Strip decoder other than one leading space", ErrUnsupported)
		}
		return nil
	case "Sequence":
		for i, d := range c.Decoders {
			if err := checkSPDecoder(d, depth+1); err != nil {
				return fmt.Errorf("decoders[%d]: %w", i, err)
			}
		}
		return nil
	}
	return fmt.Errorf("%w: decoder type %q in a SentencePiece-style file", ErrUnsupported, c.Type)
}

// byteToken is the spelling of byte b's token, as SentencePiece writes it.
func byteToken(b int) string { return fmt.Sprintf("<0x%02X>", b) }

// readSPModel reads a BPE (byte_fallback) or Unigram model into sp and t.text.
func (t *BPE) readSPModel(sp *sentencePiece, m *hfModel) (map[int32]bool, error) {
	if m == nil {
		return nil, errors.New("no model")
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return nil, fmt.Errorf("%w: model.dropout %v", ErrUnsupported, *m.Dropout)
	}
	if (m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "") || (m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "") {
		return nil, fmt.Errorf("%w: model.continuing_subword_prefix or end_of_word_suffix", ErrUnsupported)
	}
	if !m.ByteFallback {
		return nil, fmt.Errorf("%w: a SentencePiece-style model without byte_fallback (characters outside the vocabulary would become the unknown token and not decode)", ErrUnsupported)
	}
	var tokens []string // by id
	switch m.Type {
	case "BPE", "":
		if err := m.bpeVocab(); err != nil {
			return nil, err
		}
		keys, size, err := m.vocabOrder()
		if err != nil {
			return nil, err
		}
		tokens = make([]string, size)
		for _, s := range keys {
			id := m.Vocab[s]
			if s == "" {
				return nil, errors.New("vocab: empty token")
			}
			if tokens[id] != "" {
				return nil, fmt.Errorf("vocab: id %d is given twice", id)
			}
			tokens[id] = s
		}
	case "Unigram":
		var vocab []json.RawMessage
		if err := json.Unmarshal(m.RawVocab, &vocab); err != nil {
			return nil, fmt.Errorf("vocab: %w", err)
		}
		if len(vocab) > maxVocab {
			return nil, fmt.Errorf("vocab has %d entries, more than %d", len(vocab), maxVocab)
		}
		u := &unigramModel{scores: make([]float64, len(vocab))}
		tokens = make([]string, len(vocab))
		minScore := math.Inf(1)
		for i, raw := range vocab {
			var e []any
			var s string
			var score float64
			if json.Unmarshal(raw, &e) != nil || len(e) != 2 {
				return nil, fmt.Errorf("vocab[%d]: not [piece, score]", i)
			}
			var ok1, ok2 bool
			s, ok1 = e[0].(string)
			score, ok2 = e[1].(float64)
			if !ok1 || !ok2 || s == "" {
				return nil, fmt.Errorf("vocab[%d]: not [piece, score]", i)
			}
			tokens[i], u.scores[i] = s, score
			minScore = min(minScore, score)
			u.maxPiece = max(u.maxPiece, len(s))
		}
		if m.UnkID == nil || *m.UnkID < 0 || *m.UnkID >= int64(len(vocab)) {
			return nil, errors.New("Unigram model without a valid unk_id")
		}
		u.unk = int32(*m.UnkID)
		u.scores[u.unk] = minScore - 10 // kUnkPenalty, as SentencePiece and Hugging Face
		sp.unigram = u
	default:
		return nil, fmt.Errorf("%w: model type %q (only BPE and Unigram)", ErrUnsupported, m.Type)
	}
	sp.vocab = make(map[string]int32, len(tokens))
	ordinary := make(map[int32]bool, len(tokens))
	t.text = make([]string, len(tokens))
	for id, s := range tokens {
		if s == "" {
			continue
		}
		// Unigram: of two equal pieces the later one is the one produced, as in Hugging Face.
		sp.vocab[s] = int32(id)
		ordinary[int32(id)] = true
		t.text[id] = strings.ReplaceAll(s, metaSpace, " ")
	}
	for b := 0; b < 256; b++ {
		id, ok := sp.vocab[byteToken(b)]
		if !ok {
			return nil, fmt.Errorf("byte_fallback without the byte token %s; all 256 are needed", byteToken(b))
		}
		sp.byteID[b] = id
		t.text[id] = string([]byte{byte(b)})
	}
	if sp.unigram != nil {
		return ordinary, nil
	}
	pairs, err := mergeTable(m.Merges, func(s string) (int32, bool) {
		id, ok := sp.vocab[s]
		return id, ok
	})
	if err != nil {
		return nil, err
	}
	sp.pairs = &pairs
	sp.ignoreMerges = m.IgnoreMerges
	return ordinary, nil
}

// pieces returns the model's input: text normalized and pre-tokenized, in pieces. first is set
// when text is the first section of the input (not after a special token).
func (sp *sentencePiece) pieces(text string, first bool) []string {
	if text == "" {
		return nil
	}
	for _, n := range sp.normalizers {
		text = n(text)
	}
	if text == "" {
		return nil
	}
	m := sp.metaspace
	if m == nil {
		return []string{text}
	}
	text = strings.ReplaceAll(text, " ", metaSpace)
	if m.prepend && (m.always || first) && !strings.HasPrefix(text, metaSpace) {
		text = metaSpace + text
	}
	if !m.split {
		return []string{text}
	}
	// Split before every "▁" (Hugging Face's MergedWithNext).
	var out []string
	for len(text) > 0 {
		i := strings.Index(text[1:], metaSpace)
		if i < 0 {
			out = append(out, text)
			break
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}

// normalizeText returns what Decode(Encode(text)) gives: each segment between special tokens
// normalized and pre-tokenized, "▁" as a space, and the leading space dropped where the pipeline
// prepends one.
func (sp *sentencePiece) normalizeText(text string) string {
	var b strings.Builder
	for first := true; len(text) > 0; first = false {
		i, special := nextSpecial(text)
		seg := text
		if i >= 0 {
			seg = text[:i]
		}
		s := strings.ReplaceAll(strings.Join(sp.pieces(seg, first), ""), metaSpace, " ")
		if first && sp.stripLead || !first && sp.stripSection {
			s = strings.TrimPrefix(s, " ")
		}
		b.WriteString(s)
		if i < 0 {
			break
		}
		b.WriteString(special)
		text = text[i+len(special):]
	}
	return b.String()
}

// appendSentencePiece is AppendOrdinary for SentencePiece-style files; first is set when text is
// the first section of the input.
func (t *BPE) appendSentencePiece(dst []int32, text string, first bool) []int32 {
	sp := t.sp
	for _, piece := range sp.pieces(text, first) {
		if len(piece) > maxCachedPiece {
			dst = sp.encodePiece(dst, piece)
			continue
		}
		h := t.cache.hash(piece)
		if ids, ok := t.cache.get(h, piece); ok {
			dst = append(dst, ids...)
			continue
		}
		n := len(dst)
		dst = sp.encodePiece(dst, piece)
		t.cache.put(h, piece, dst[n:])
	}
	return dst
}

// encodePiece appends the ids of one piece.
func (sp *sentencePiece) encodePiece(dst []int32, piece string) []int32 {
	if sp.unigram != nil {
		return sp.viterbi(dst, piece)
	}
	if sp.ignoreMerges {
		if id, ok := sp.vocab[piece]; ok {
			return append(dst, id)
		}
	}
	// Symbols are characters (an invalid byte is a symbol of its own); -1 marks one outside the
	// vocabulary, which never merges and falls back to its bytes.
	var syms []string
	var ids []int32
	for i := 0; i < len(piece); {
		_, n := utf8.DecodeRuneInString(piece[i:])
		s := piece[i : i+n]
		id, ok := sp.vocab[s]
		if !ok {
			id = -1
		}
		syms = append(syms, s)
		ids = append(ids, id)
		i += n
	}
	ids, keep := mergeIDs(sp.pairs, ids)
	for k, id := range ids {
		if id >= 0 {
			dst = append(dst, id)
			continue
		}
		for _, c := range []byte(syms[keep[k]]) {
			dst = append(dst, sp.byteID[c])
		}
	}
	return dst
}

// mergeIDs merges adjacent ids by rank, the lowest first and the leftmost on ties, as
// bpeModel.mergeHeap does, and returns the ids left and, for each, the index of its first symbol.
// A negative id (a character outside the vocabulary) never merges.
func mergeIDs(table *pairTable, ids []int32) ([]int32, []int) {
	if len(ids) == 0 {
		return nil, nil
	}
	next := heapMerge(table, ids)
	var out []int32
	var first []int
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, ids[i])
		first = append(first, int(i))
	}
	return out, first
}

// viterbi appends the Unigram segmentation of piece of highest total score. Every character starts
// the tokens of the vocabulary that are prefixes of the rest, and the unknown token when no token is
// that one character; of the paths ending at a character boundary the best wins, the one whose
// last token starts earliest on ties (Hugging Face's order). An unknown character falls back to its
// bytes.
func (sp *sentencePiece) viterbi(dst []int32, piece string) []int32 {
	u := sp.unigram
	type best struct {
		score float64
		start int   // byte offset where the last token starts; -1: not reached
		id    int32 // the last token
	}
	n := len(piece)
	bests := make([]best, n+1)
	for i := range bests {
		bests[i].start = -1
	}
	bests[0] = best{start: 0}
	for i := 0; i < n; {
		_, w := utf8.DecodeRuneInString(piece[i:])
		base := bests[i].score
		single := false
		for j := i + w; j <= n && j-i <= u.maxPiece; {
			if id, ok := sp.vocab[piece[i:j]]; ok {
				s := base + u.scores[id]
				if bests[j].start < 0 || s > bests[j].score {
					bests[j] = best{score: s, start: i, id: id}
				}
				if j == i+w {
					single = true
				}
			}
			if j == n {
				break
			}
			_, w2 := utf8.DecodeRuneInString(piece[j:])
			j += w2
		}
		if !single {
			s := base + u.scores[u.unk]
			if bests[i+w].start < 0 || s > bests[i+w].score {
				bests[i+w] = best{score: s, start: i, id: u.unk}
			}
		}
		i += w
	}
	// Walk back from the end.
	var rev []int // token end offsets, last first
	for e := n; e > 0; e = bests[e].start {
		rev = append(rev, e)
	}
	for k := len(rev) - 1; k >= 0; k-- {
		e := rev[k]
		b := bests[e]
		if b.id == u.unk {
			for _, c := range []byte(piece[b.start:e]) {
				dst = append(dst, sp.byteID[c])
			}
			continue
		}
		dst = append(dst, b.id)
	}
	return dst
}
