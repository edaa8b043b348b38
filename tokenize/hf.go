package tokenize

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"
)

// ErrUnsupported is wrapped by the errors of ReadHF and ReadLlama3 for a tokenizer.json that uses a
// feature this package does not implement; the message names the feature.
var ErrUnsupported = errors.New("unsupported tokenizer.json feature")

// ReadHF reads a Hugging Face tokenizer.json with a byte-level BPE model (Qwen2, Qwen3, Llama 3,
// GPT-2 and the like) or a SentencePiece-style one (Llama 2, CodeLlama, Mistral, Gemma: see below)
// from r and returns its tokenizer, named "hf:LABEL@SHA8" where SHA8 is the first 8 hex digits of
// the file's SHA-256 (see Get).
//
// SentencePiece-style files (model Unigram, model.byte_fallback, or a Metaspace pre-tokenizer)
// support: model BPE with byte_fallback (characters merged by the merges, a character outside the
// vocabulary as its <0xNN> byte tokens) or Unigram with byte_fallback (the segmentation of highest
// score); all 256 byte tokens and "▁" must be in the vocabulary. Normalizers NFC, NFD, NFKC, NFKD,
// Replace " " → "▁", Prepend "▁" and Sequence; pre_tokenizer null or Metaspace (replacement "▁",
// prepend_scheme always, first or never, split true or false); decoders Metaspace, Replace "▁" → " ",
// ByteFallback, Fuse, Strip of one leading space, Sequence. Decode drops the space of the "▁" the
// pipeline put first, at the start of the ids and, unless prepend_scheme is first, after each
// special token.
//
// Byte-level files support: model BPE with vocab and merges ("a b" strings or ["a", "b"] pairs), ignore_merges;
// normalizer null, NFC, NFD, NFKC, NFKD or a Sequence of them; pre_tokenizer Split (Regex or String
// pattern, behavior Isolated) and ByteLevel (add_prefix_space false, with or without use_regex), or
// a Sequence of them with ByteLevel last; decoder ByteLevel; added_tokens. The post_processor,
// truncation and padding are ignored: Encode never adds tokens the text does not name. Anything
// else is an error wrapping ErrUnsupported that names the feature.
//
// EncodeOrdinary ignores added_tokens: text that spells one is encoded as ordinary text. A grammar
// special token that is one of the file's added_tokens keeps its id; the others take the ids after
// the largest id in the file, in SpecialTokens order.
func ReadHF(r io.Reader, label string) (*BPE, error) {
	return readHF(r, "hf", label, hfSpecials)
}

// ReadLlama3 reads a Llama 3 tokenizer.json as ReadHF does, but gives the grammar's special tokens
// Llama 3's reserved ids, as CWM does: <|begin_of_text|> 128000, <|end_of_text|> 128001, CWM's eight
// trace tokens (<|frame_sep|> … <|trace_context_start|>) 128100–128107 and the neural-debugger tokens
// 128108 onwards, in SpecialTokens order. Those ids must hold the same token or a
// <|reserved_special_token_N|> in the file. The tokenizer is named "llama3:LABEL@SHA8".
func ReadLlama3(r io.Reader, label string) (*BPE, error) {
	return readHF(r, "llama3", label, llama3Specials)
}

// Llama 3's reserved ids for the grammar's special tokens.
const (
	llama3BeginOfText = 128000
	llama3EndOfText   = 128001
	llama3Trace       = 128100 // CWM's first trace token; the rest follow in SpecialTokens order
)

// llama3SpecialID returns the Llama 3 id of SpecialTokens[i].
func llama3SpecialID(i int) int32 {
	switch i {
	case 0:
		return llama3BeginOfText
	case 1:
		return llama3EndOfText
	}
	return int32(llama3Trace + i - 2)
}

var labelRE = regexp.MustCompile(`^[A-Za-z0-9._+-]+$`)

// hfFile is the part of tokenizer.json this package reads.
type hfFile struct {
	AddedTokens  []hfAddedToken  `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Decoder      json.RawMessage `json:"decoder"`
	Model        *hfModel        `json:"model"`
}

type hfAddedToken struct {
	ID      *int64 `json:"id"`
	Content string `json:"content"`
}

type hfModel struct {
	Type                    string            `json:"type"`
	Dropout                 *float64          `json:"dropout"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	RawVocab                json.RawMessage   `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
	UnkToken                *string           `json:"unk_token"`
	UnkID                   *int64            `json:"unk_id"`
	// Vocab is RawVocab as token → id, for BPE models.
	Vocab map[string]int64 `json:"-"`
}

// hfComponent is a normalizer, pre-tokenizer or decoder: a type and its settings.
type hfComponent struct {
	Type           string            `json:"type"`
	Normalizers    []json.RawMessage `json:"normalizers"`
	Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	Decoders       []json.RawMessage `json:"decoders"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	Pattern        *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	// Metaspace, Replace, Prepend and Strip settings (sentencepiece.go).
	Replacement   *string `json:"replacement"`
	PrependScheme *string `json:"prepend_scheme"`
	Split         *bool   `json:"split"`
	Content       *string `json:"content"`
	Prepend       *string `json:"prepend"`
	Start         int     `json:"start"`
	Stop          int     `json:"stop"`
}

// specialAssigner gives the grammar's special tokens their ids. added maps the file's added tokens
// to their ids, text is the decoding table so far (one entry per id, so len(text) is the first id
// after the file's largest), and ordinary holds the model's vocabulary ids.
type specialAssigner func(added map[string]int32, text []string, ordinary map[int32]bool) (map[string]int32, error)

func readHF(r io.Reader, kind, label string, assign specialAssigner) (*BPE, error) {
	if !labelRE.MatchString(label) {
		return nil, fmt.Errorf("tokenize: %s: label %q must be letters, digits and . _ + -", kind, label)
	}
	h := sha256.New()
	data, err := io.ReadAll(io.TeeReader(r, h))
	if err != nil {
		return nil, fmt.Errorf("tokenize: %s: reading tokenizer.json: %w", kind, err)
	}
	name := kind + ":" + label + "@" + hex.EncodeToString(h.Sum(nil))[:8]
	t, err := parseHF(data, name, assign)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %s: tokenizer.json: %w", name, err)
	}
	return t, nil
}

// parseHF builds the tokenizer of a tokenizer.json.
func parseHF(data []byte, name string, assign specialAssigner) (*BPE, error) {
	var f hfFile
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if f.Model == nil {
		return nil, errors.New("no model")
	}
	t := &BPE{name: name}
	var err error
	var ordinary map[int32]bool
	if sentencePieceStyle(&f) {
		if ordinary, err = t.buildSentencePiece(&f); err != nil {
			return nil, err
		}
		return t.addTokens(&f, ordinary, assign)
	}
	if t.normalize, err = hfNormalizer(f.Normalizer); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	if t.split, err = hfPreTokenizer(f.PreTokenizer); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	t.next = splitFunc(t.split)
	if err := hfDecoder(f.Decoder); err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	if ordinary, err = t.buildModel(f.Model); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return t.addTokens(&f, ordinary, assign)
}

// addTokens reads the added tokens and gives the grammar's special tokens their ids.
func (t *BPE) addTokens(f *hfFile, ordinary map[int32]bool, assign specialAssigner) (*BPE, error) {
	var err error
	added := make(map[string]int32, len(f.AddedTokens))
	for i, a := range f.AddedTokens {
		if a.ID == nil || *a.ID < 0 || *a.ID >= maxVocab {
			return nil, fmt.Errorf("added_tokens[%d] (%q): missing or bad id", i, a.Content)
		}
		if a.Content == "" {
			return nil, fmt.Errorf("added_tokens[%d]: empty content", i)
		}
		id := int32(*a.ID)
		if prev, ok := added[a.Content]; ok && prev != id {
			return nil, fmt.Errorf("added_tokens[%d]: %q has two ids, %d and %d", i, a.Content, prev, id)
		}
		added[a.Content] = id
		t.text = growText(t.text, int(id)+1)
		t.text[id] = a.Content
	}
	if t.special, err = assign(added, t.text, ordinary); err != nil {
		return nil, err
	}
	for tok, id := range t.special {
		if ordinary[id] {
			return nil, fmt.Errorf("special token %s has id %d, an ordinary vocabulary entry", tok, id)
		}
		t.text = growText(t.text, int(id)+1)
		t.text[id] = tok
	}
	if t.sp != nil {
		t.sp.segStart = make(map[int32]bool, len(t.special))
		for _, id := range t.special {
			t.sp.segStart[id] = true
		}
	}
	return t, nil
}

// maxVocab bounds ids, so that a hostile file cannot make the decoding table huge.
const maxVocab = 1 << 21

func growText(text []string, n int) []string {
	for len(text) < n {
		text = append(text, "")
	}
	return text
}

// hfSpecials gives each grammar token its added-token id, or the next id after the largest.
func hfSpecials(added map[string]int32, text []string, ordinary map[int32]bool) (map[string]int32, error) {
	special := make(map[string]int32, len(SpecialTokens))
	next := int32(len(text))
	for _, tok := range SpecialTokens {
		if id, ok := added[tok]; ok {
			special[tok] = id
			continue
		}
		special[tok] = next
		next++
	}
	return special, nil
}

var reservedRE = regexp.MustCompile(`^<\|reserved_special_token_\d+\|>$`)

// llama3Specials gives the grammar tokens Llama 3's reserved ids (see ReadLlama3).
func llama3Specials(added map[string]int32, text []string, ordinary map[int32]bool) (map[string]int32, error) {
	special := make(map[string]int32, len(SpecialTokens))
	for i, tok := range SpecialTokens {
		id := llama3SpecialID(i)
		if int(id) >= len(text) || text[id] == "" {
			return nil, fmt.Errorf("not a Llama 3 vocabulary: id %d (for %s) is not an added token", id, tok)
		}
		if have := text[id]; have != tok && !reservedRE.MatchString(have) {
			return nil, fmt.Errorf("not a Llama 3 vocabulary: id %d (for %s) is %q, not %s or a reserved special token", id, tok, have, tok)
		}
		if other, ok := added[tok]; ok && other != id {
			return nil, fmt.Errorf("%s is added token %d, but Llama 3 reserves %d for it", tok, other, id)
		}
		special[tok] = id
	}
	return special, nil
}

// buildModel reads the BPE model and fills t.model and t.text. It returns the set of ordinary ids.
func (t *BPE) buildModel(m *hfModel) (map[int32]bool, error) {
	switch {
	case m.Type != "BPE" && m.Type != "":
		return nil, fmt.Errorf("%w: model type %q (only BPE)", ErrUnsupported, m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf("%w: model.dropout %v", ErrUnsupported, *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf("%w: model.continuing_subword_prefix %q", ErrUnsupported, *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fmt.Errorf("%w: model.end_of_word_suffix %q", ErrUnsupported, *m.EndOfWordSuffix)
	case m.ByteFallback:
		return nil, fmt.Errorf("%w: model.byte_fallback (SentencePiece-style BPE)", ErrUnsupported)
	}
	if err := m.bpeVocab(); err != nil {
		return nil, err
	}
	switch {
	case len(m.Vocab) == 0:
		return nil, errors.New("empty vocab")
	}
	// Byte-level tokens: each byte is one printable character; map them back to bytes.
	raw := make(map[string]int32, len(m.Vocab)) // raw bytes of byte-level tokens → id
	ordinary := make(map[int32]bool, len(m.Vocab))
	keys, size, err := m.vocabOrder()
	if err != nil {
		return nil, err
	}
	t.text = make([]string, size)
	for _, s := range keys {
		id := int32(m.Vocab[s])
		if ordinary[id] {
			return nil, fmt.Errorf("vocab: id %d is given twice", id)
		}
		ordinary[id] = true
		b, ok := fromByteLevel(s)
		if !ok {
			// Not byte-level text: no merge can make it; it decodes to its UTF-8 (as the ByteLevel
			// decoder does).
			t.text[id] = s
			continue
		}
		if b == "" {
			return nil, errors.New("vocab: empty token")
		}
		t.text[id] = b
		raw[b] = id
	}
	for c := 0; c < 256; c++ {
		id, ok := raw[string([]byte{byte(c)})]
		if !ok {
			return nil, fmt.Errorf("vocab has no token for byte 0x%02x (%q); byte-level BPE needs all 256", c, byteLevel[c])
		}
		t.model.byteID[c] = id
	}
	pairs, err := mergeTable(m.Merges, func(s string) (int32, bool) {
		id, ok := m.Vocab[s]
		return int32(id), ok
	})
	if err != nil {
		return nil, err
	}
	t.model.pairs = pairs
	if m.IgnoreMerges {
		t.model.whole = raw
	}
	return ordinary, nil
}

// bpeVocab decodes the vocab of a BPE model, token → id.
func (m *hfModel) bpeVocab() error {
	if isNull(m.RawVocab) {
		return errors.New("no vocab")
	}
	if err := json.Unmarshal(m.RawVocab, &m.Vocab); err != nil {
		return fmt.Errorf("vocab: %w", err)
	}
	return nil
}

// vocabOrder checks the ids of the BPE vocab (after bpeVocab) and returns its tokens sorted, an
// order to go through them in so that errors do not depend on map order, and one more than the
// largest id (the size of a table by id).
func (m *hfModel) vocabOrder() ([]string, int, error) {
	largest := int64(-1)
	for s, id := range m.Vocab {
		if id < 0 || id >= maxVocab {
			return nil, 0, fmt.Errorf("vocab %q: bad id %d", s, id)
		}
		largest = max(largest, id)
	}
	return slices.Sorted(maps.Keys(m.Vocab)), int(largest + 1), nil
}

// parseMerge reads a merge: "a b" or ["a", "b"].
func parseMerge(raw json.RawMessage) (string, string, error) {
	var s string
	if raw = bytes.TrimSpace(raw); len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		a, b, ok := strings.Cut(s, " ")
		if !ok || a == "" || b == "" || strings.Contains(b, " ") {
			return "", "", fmt.Errorf("%q is not two tokens separated by a space", s)
		}
		return a, b, nil
	}
	var pair []string
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 || pair[0] == "" || pair[1] == "" {
		return "", "", fmt.Errorf("%s is neither \"a b\" nor [\"a\", \"b\"]", truncate(string(raw), 60))
	}
	return pair[0], pair[1], nil
}

// mergeTable reads merges into a pair table, each token's id looked up with id; a merge's rank is
// its index. A later duplicate replaces an earlier one, as in Hugging Face tokenizers.
func mergeTable(merges []json.RawMessage, id func(string) (int32, bool)) (pairTable, error) {
	pairs := newPairTable(len(merges))
	for i, mr := range merges {
		a, b, err := parseMerge(mr)
		if err != nil {
			return pairTable{}, fmt.Errorf("merges[%d]: %w", i, err)
		}
		ida, ok1 := id(a)
		idb, ok2 := id(b)
		idm, ok3 := id(a + b)
		switch {
		case !ok1:
			return pairTable{}, fmt.Errorf("merges[%d]: %q is not in the vocab", i, a)
		case !ok2:
			return pairTable{}, fmt.Errorf("merges[%d]: %q is not in the vocab", i, b)
		case !ok3:
			return pairTable{}, fmt.Errorf("merges[%d]: the merge %q is not in the vocab", i, a+b)
		}
		pairs.put(ida, idb, int32(i), idm)
	}
	return pairs, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// hfNormalizer returns the normalizer function, or nil for none.
func hfNormalizer(raw json.RawMessage) (func(string) string, error) {
	forms, err := normForms(raw, 0)
	if err != nil || len(forms) == 0 {
		return nil, err
	}
	return func(s string) string {
		for _, f := range forms {
			s = f.String(s) // returns s itself when it is already normal
		}
		return s
	}, nil
}

// readComponent decodes a pipeline component (normalizer, pre-tokenizer, decoder) nested depth
// deep. ok is false, with a nil error, for a JSON null (no component), and false with the error
// for a component too deeply nested or not an object.
func readComponent(raw json.RawMessage, depth int) (c hfComponent, ok bool, err error) {
	if isNull(raw) {
		return c, false, nil
	}
	if depth > 8 {
		return c, false, errors.New("nested too deeply")
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, false, err
	}
	return c, true, nil
}

func normForms(raw json.RawMessage, depth int) ([]norm.Form, error) {
	c, ok, err := readComponent(raw, depth)
	if !ok {
		return nil, err
	}
	switch c.Type {
	case "NFC":
		return []norm.Form{norm.NFC}, nil
	case "NFD":
		return []norm.Form{norm.NFD}, nil
	case "NFKC":
		return []norm.Form{norm.NFKC}, nil
	case "NFKD":
		return []norm.Form{norm.NFKD}, nil
	case "Sequence":
		var out []norm.Form
		for i, n := range c.Normalizers {
			f, err := normForms(n, depth+1)
			if err != nil {
				return nil, fmt.Errorf("normalizers[%d]: %w", i, err)
			}
			out = append(out, f...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: normalizer type %q", ErrUnsupported, c.Type)
}

// hfPreTokenizer returns the splitter of a pre_tokenizer, which must end with ByteLevel.
func hfPreTokenizer(raw json.RawMessage) (splitter, error) {
	var steps []hfComponent
	if err := flattenPreTokenizers(raw, &steps, 0); err != nil {
		return nil, err
	}
	if len(steps) == 0 || steps[len(steps)-1].Type != "ByteLevel" {
		return nil, fmt.Errorf("%w: a pre_tokenizer that does not end with ByteLevel (not a byte-level BPE)", ErrUnsupported)
	}
	var seq seqSplitter
	for i, c := range steps {
		switch c.Type {
		case "ByteLevel":
			if i != len(steps)-1 {
				return nil, fmt.Errorf("%w: ByteLevel before another pre-tokenizer", ErrUnsupported)
			}
			if c.AddPrefixSpace {
				return nil, fmt.Errorf("%w: ByteLevel add_prefix_space", ErrUnsupported)
			}
			if c.UseRegex == nil || *c.UseRegex {
				s, err := newRegexSplitter(PatternGPT2)
				if err != nil {
					return nil, err
				}
				seq = append(seq, s)
			}
		case "Split":
			s, err := splitStep(c)
			if err != nil {
				return nil, err
			}
			seq = append(seq, s)
		default:
			return nil, fmt.Errorf("%w: pre_tokenizer type %q", ErrUnsupported, c.Type)
		}
	}
	if len(seq) == 1 {
		return seq[0], nil
	}
	return seq, nil
}

func flattenPreTokenizers(raw json.RawMessage, out *[]hfComponent, depth int) error {
	c, ok, err := readComponent(raw, depth)
	if !ok {
		return err
	}
	if c.Type != "Sequence" {
		*out = append(*out, c)
		return nil
	}
	for i, p := range c.Pretokenizers {
		if err := flattenPreTokenizers(p, out, depth+1); err != nil {
			return fmt.Errorf("pretokenizers[%d]: %w", i, err)
		}
	}
	return nil
}

// splitStep returns the splitter of a Split pre-tokenizer: a hand-written one for the known
// patterns, else regexp2.
func splitStep(c hfComponent) (splitter, error) {
	if c.Behavior != "Isolated" {
		return nil, fmt.Errorf("%w: Split behavior %q (only Isolated)", ErrUnsupported, c.Behavior)
	}
	// With Isolated, invert does not change the pieces: matches and the text between them are both kept.
	switch {
	case c.Pattern == nil:
		return nil, errors.New("Split without a pattern")
	case c.Pattern.Regex != nil:
		switch *c.Pattern.Regex {
		case PatternCL100K:
			return cl100kSplitter{digits: 3}, nil
		case PatternQwen2:
			return cl100kSplitter{digits: 1}, nil
		case PatternO200K:
			return o200kSplitter{}, nil
		}
		s, err := newRegexSplitter(*c.Pattern.Regex)
		if err != nil {
			return nil, fmt.Errorf("Split pattern %q: %w", truncate(*c.Pattern.Regex, 60), err)
		}
		return s, nil
	case c.Pattern.String != nil && *c.Pattern.String != "":
		re, err := regexp2.Compile(regexp2.Escape(*c.Pattern.String), regexp2.None)
		if err != nil {
			return nil, fmt.Errorf("Split pattern %q: %w", *c.Pattern.String, err)
		}
		return &regexSplitter{re: re}, nil
	}
	return nil, errors.New("Split with an empty pattern")
}

// hfDecoder checks that the decoder is ByteLevel (alone or in a Sequence).
func hfDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return fmt.Errorf("%w: no decoder (byte-level BPE needs ByteLevel)", ErrUnsupported)
	}
	var c hfComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	switch c.Type {
	case "ByteLevel":
		return nil
	case "Sequence":
		if len(c.Decoders) == 1 {
			return hfDecoder(c.Decoders[0])
		}
	}
	return fmt.Errorf("%w: decoder type %q (only ByteLevel)", ErrUnsupported, c.Type)
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// byteLevel maps each byte to the printable character that stands for it in byte-level BPE
// vocabularies (GPT-2's bytes_to_unicode); byteOfLevel is its inverse.
var (
	byteLevel   [256]rune
	byteOfLevel = map[rune]byte{}
)

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF {
			byteLevel[b] = rune(b)
		} else {
			byteLevel[b] = rune(256 + n)
			n++
		}
		byteOfLevel[byteLevel[b]] = byte(b)
	}
}

// fromByteLevel returns the bytes a byte-level token stands for, or false if s has a character
// outside the byte-level alphabet.
func fromByteLevel(s string) (string, bool) {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		c, ok := byteOfLevel[r]
		if !ok {
			return "", false
		}
		b = append(b, c)
	}
	return string(b), true
}
