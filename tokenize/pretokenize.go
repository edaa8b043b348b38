package tokenize

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// The split patterns of the vocabularies this package knows, as tiktoken and tokenizer.json files
// spell them. Each has a hand-written matcher below that splits text exactly as the pattern does
// under the leftmost-first, backtracking semantics of the regex engines these tokenizers use
// (Rust's fancy-regex and regex in tiktoken, Oniguruma in Hugging Face tokenizers).
const (
	// PatternCL100K is the split pattern of tiktoken's cl100k_base, also used by Llama 3.
	PatternCL100K = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternQwen2 is the split pattern of Qwen2 and Qwen3: cl100k's with single digits.
	PatternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternO200K is the split pattern of tiktoken's o200k_base: case-aware words with a trailing
	// contraction, and '/' joins the line breaks after punctuation.
	PatternO200K = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternGPT2 is the split of the ByteLevel pre-tokenizer with use_regex (GPT-2's pattern).
	PatternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// A splitter is a pre-tokenizer: it cuts text into the pieces that BPE encodes separately.
type splitter interface {
	// split appends the end offset of every piece of text to ends, in order, and returns ends.
	// The pieces are non-empty and cover text; the last end is len(text) (none for empty text).
	split(ends []int, text string) []int
}

// Character classes of the split patterns, as bits.
const (
	clsL  uint8 = 1 << iota // \p{L}
	clsN                    // \p{N}
	clsS                    // \s: Unicode White_Space (unicode.IsSpace)
	clsNL                   // \r or \n
	clsU                    // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], o200k's upper-case word start
	clsW                    // [\p{Ll}\p{Lm}\p{Lo}\p{M}], o200k's lower-case word body
)

var (
	bmpClassOnce sync.Once
	bmpClass     []uint8 // the class bits of every rune below 0x10000
)

// computeClass returns the class bits of r from the unicode tables (the ones regexp2 uses too).
func computeClass(r rune) uint8 {
	var c uint8
	if unicode.IsLetter(r) {
		c |= clsL
	}
	if unicode.IsNumber(r) {
		c |= clsN
	}
	if unicode.IsSpace(r) {
		c |= clsS
	}
	if r == '\r' || r == '\n' {
		c |= clsNL
	}
	mark := unicode.IsMark(r)
	if mark || unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo) {
		c |= clsU
	}
	if mark || unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo) {
		c |= clsW
	}
	return c
}

// classes returns the table of class bits of the Basic Multilingual Plane, built on first use.
func classes() []uint8 {
	bmpClassOnce.Do(func() {
		t := make([]uint8, 0x10000)
		for r := range t {
			t[r] = computeClass(rune(r))
		}
		bmpClass = t
	})
	return bmpClass
}

// classAt decodes the rune at s[i] and returns its class bits and width. An invalid byte is one
// rune of width 1 with the class of U+FFFD, as regexp2 sees it.
func classAt(tab []uint8, s string, i int) (uint8, int) {
	if b := s[i]; b < utf8.RuneSelf {
		return tab[b], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if r < 0x10000 {
		return tab[r], w
	}
	return computeClass(r), w
}

// contraction returns the length of the contraction (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[i], or 0.
// Case-insensitivity is Unicode simple case folding, as in Rust's regex and Oniguruma: 's' also
// matches U+017F LATIN SMALL LETTER LONG S (no other rune folds to these letters).
func contraction(s string, i int) int {
	if i >= len(s) || s[i] != '\'' {
		return 0
	}
	rest := s[i+1:]
	if len(rest) == 0 {
		return 0
	}
	switch rest[0] {
	case 's', 'S', 't', 'T', 'm', 'M', 'd', 'D':
		return 2
	}
	if len(rest) >= 2 {
		a, b := rest[0], rest[1]
		if (a == 'r' || a == 'R' || a == 'v' || a == 'V') && (b == 'e' || b == 'E') {
			return 3
		}
		if (a == 'l' || a == 'L') && (b == 'l' || b == 'L') {
			return 3
		}
	}
	if strings.HasPrefix(rest, "ſ") {
		return 1 + len("ſ")
	}
	return 0
}

// cl100kSplitter is the hand-written matcher of PatternCL100K (digits 3) and PatternQwen2 (digits 1).
type cl100kSplitter struct{ digits int }

func (p cl100kSplitter) split(ends []int, text string) []int {
	tab := classes()
	for i := 0; i < len(text); {
		i = p.next(tab, text, i)
		ends = append(ends, i)
	}
	return ends
}

// next returns the end of the piece that starts at s[i], trying the pattern's alternatives in order.
func (p cl100kSplitter) next(tab []uint8, s string, i int) int {
	n := len(s)
	c, w := classAt(tab, s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if s[i] == '\'' {
		if k := contraction(s, i); k > 0 {
			return i + k
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c&clsL != 0 {
		return run(tab, s, i+w, clsL)
	}
	if c&(clsN|clsNL) == 0 && i+w < n {
		if c2, w2 := classAt(tab, s, i+w); c2&clsL != 0 {
			return run(tab, s, i+w+w2, clsL)
		}
	}
	// \p{N}{1,p.digits}
	if c&clsN != 0 {
		j := i + w
		for k := 1; k < p.digits && j < n; k++ {
			c2, w2 := classAt(tab, s, j)
			if c2&clsN == 0 {
				break
			}
			j += w2
		}
		return j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	if e := punct(tab, s, i, c, w, false); e > 0 {
		return e
	}
	return whitespace(tab, s, i)
}

// o200kSplitter is the hand-written matcher of PatternO200K.
type o200kSplitter struct{}

func (o200kSplitter) split(ends []int, text string) []int {
	tab := classes()
	for i := 0; i < len(text); {
		i = o200kNext(tab, text, i)
		ends = append(ends, i)
	}
	return ends
}

// o200kNext returns the end of the o200k piece that starts at s[i].
func o200kNext(tab []uint8, s string, i int) int {
	n := len(s)
	c, w := classAt(tab, s, i)
	prefix := c&(clsL|clsN|clsNL) == 0 // [^\r\n\p{L}\p{N}]
	// [^\r\n\p{L}\p{N}]?[U]*[W]+(?i:'s|...)?
	if prefix {
		if e := upperLower(tab, s, i+w); e > 0 {
			return e + contraction(s, e)
		}
	}
	if e := upperLower(tab, s, i); e > 0 {
		return e + contraction(s, e)
	}
	// [^\r\n\p{L}\p{N}]?[U]+[W]*(?i:'s|...)?
	if prefix && i+w < n {
		if c2, _ := classAt(tab, s, i+w); c2&clsU != 0 {
			e := run(tab, s, run(tab, s, i+w, clsU), clsW)
			return e + contraction(s, e)
		}
	}
	if c&clsU != 0 {
		e := run(tab, s, run(tab, s, i, clsU), clsW)
		return e + contraction(s, e)
	}
	// \p{N}{1,3}
	if c&clsN != 0 {
		j := i + w
		for k := 1; k < 3 && j < n; k++ {
			c2, w2 := classAt(tab, s, j)
			if c2&clsN == 0 {
				break
			}
			j += w2
		}
		return j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
	if e := punct(tab, s, i, c, w, true); e > 0 {
		return e
	}
	return whitespace(tab, s, i)
}

// upperLower matches [U]*[W]+ at s[p] and returns its end, or 0. Backtracking [U]* (greedy) until
// [W]+ matches gives: the lower-case run after the maximal upper run if there is one, else the end
// of the last W-class rune inside the upper run.
func upperLower(tab []uint8, s string, p int) int {
	n := len(s)
	q, lastW := p, 0
	for q < n {
		c, w := classAt(tab, s, q)
		if c&clsU == 0 {
			if c&clsW != 0 {
				return run(tab, s, q, clsW)
			}
			break
		}
		q += w
		if c&clsW != 0 {
			lastW = q
		}
	}
	return lastW
}

// run returns the end of the run of runes with any of the class bits cls that starts at s[i].
func run(tab []uint8, s string, i int, cls uint8) int {
	for i < len(s) {
		c, w := classAt(tab, s, i)
		if c&cls == 0 {
			break
		}
		i += w
	}
	return i
}

// punct matches ' ?[^\s\p{L}\p{N}]+[\r\n]*' at s[i] (with '/' in the tail if slash) and returns its
// end, or 0. c and w are the class and width of the rune at s[i].
func punct(tab []uint8, s string, i int, c uint8, w int, slash bool) int {
	const other = clsS | clsL | clsN
	j := i
	switch {
	case c&other == 0:
		j = i + w
	case s[i] == ' ' && i+1 < len(s):
		c2, w2 := classAt(tab, s, i+1)
		if c2&other != 0 {
			return 0
		}
		j = i + 1 + w2
	default:
		return 0
	}
	for j < len(s) {
		c2, w2 := classAt(tab, s, j)
		if c2&other != 0 {
			break
		}
		j += w2
	}
	for j < len(s) && (s[j] == '\r' || s[j] == '\n' || slash && s[j] == '/') {
		j++
	}
	return j
}

// whitespace matches \s*[\r\n]+|\s+(?!\S)|\s+ at s[i], where a white-space rune starts.
func whitespace(tab []uint8, s string, i int) int {
	j, lastNL, last := i, 0, i
	for j < len(s) {
		c, w := classAt(tab, s, j)
		if c&clsS == 0 {
			break
		}
		last = j
		j += w
		if c&clsNL != 0 {
			lastNL = j
		}
	}
	switch {
	case lastNL > 0: // \s*[\r\n]+: up to the last line break of the run
		return lastNL
	case j == len(s): // \s+(?!\S) at the end of the text
		return j
	case last > i: // \s+(?!\S): all but the space before the next non-space
		return last
	}
	return j // \s+
}

// regexSplitter splits text with a regular expression, as the Split pre-tokenizer of Hugging Face
// tokenizers does with behavior "Isolated": every match is a piece, and so is the text between two
// matches.
type regexSplitter struct {
	re *regexp2.Regexp
}

// newRegexSplitter compiles pattern for the generic split. The case-insensitive contraction group
// of the known patterns is spelled out with Unicode simple case folding, which regexp2's (?i)
// lacks (it does not match 'ſ' for 's').
func newRegexSplitter(pattern string) (*regexSplitter, error) {
	re, err := regexp2.Compile(foldContractions(pattern), regexp2.None)
	if err != nil {
		return nil, err
	}
	return &regexSplitter{re: re}, nil
}

// foldContractions rewrites (?i:'s|'t|'re|'ve|'m|'ll|'d) with explicit case-fold classes.
func foldContractions(pattern string) string {
	return strings.ReplaceAll(pattern, `(?i:'s|'t|'re|'ve|'m|'ll|'d)`,
		`(?:'[sS\u017F]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`)
}

func (p *regexSplitter) split(ends []int, text string) []int {
	if text == "" {
		return ends
	}
	// regexp2 reports rune offsets; map them to byte offsets (an invalid byte is one rune).
	offs := make([]int, 0, len(text)+1)
	for i := 0; i < len(text); {
		offs = append(offs, i)
		_, w := utf8.DecodeRuneInString(text[i:])
		i += w
	}
	offs = append(offs, len(text))
	prev := 0
	m, err := p.re.FindStringMatch(text)
	for err == nil && m != nil {
		if m.Length > 0 {
			start, end := offs[m.Index], offs[m.Index+m.Length]
			if start > prev {
				ends = append(ends, start)
			}
			ends = append(ends, end)
			prev = end
		}
		m, err = p.re.FindNextMatch(m)
	}
	// After a matcher error (there is no time limit, so only an internal failure) the rest of the
	// text is one piece.
	if prev < len(text) {
		ends = append(ends, len(text))
	}
	return ends
}

// seqSplitter applies its splitters in turn, each to every piece of the one before (a Sequence
// pre-tokenizer).
type seqSplitter []splitter

func (q seqSplitter) split(ends []int, text string) []int {
	if len(q) == 0 {
		if text != "" {
			ends = append(ends, len(text))
		}
		return ends
	}
	base0 := len(ends)
	ends = q[0].split(ends, text)
	for _, next := range q[1:] {
		outer := append([]int(nil), ends[base0:]...)
		ends = ends[:base0]
		prev := 0
		for _, e := range outer {
			base := len(ends)
			ends = next.split(ends, text[prev:e])
			for k := base; k < len(ends); k++ {
				ends[k] += prev
			}
			prev = e
		}
	}
	return ends
}
