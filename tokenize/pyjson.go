package tokenize

// JSON as Python's json.dumps writes it.
//
// LOCALS and ARGS are JSON text that must be byte-identical to what Python's json.dumps produces
// with its default settings, so that data from this pipeline and from Python tooling agree token
// for token:
//
//   - objects are written {"k": "v", "k2": "v2"} (separators ", " and ": ", no other whitespace);
//   - ensure_ascii=True: every rune outside printable ASCII (0x20-0x7e) is escaped, control
//     characters as \n \r \t \b \f or \u00xx, the rest as \uxxxx (lower-case hex), runes above
//     U+FFFF as a UTF-16 surrogate pair;
//   - '"' and '\' are escaped as \" and \\, '/' is not escaped.
//
// One deviation keeps the trajectory text unambiguous: a '<' immediately followed by '|' is written
// \u003c, so that no JSON string can contain the opening of a special token.
//
// The decoder accepts exactly the text the encoder writes, plus (in lenient mode) any other valid
// JSON string escape (\/, upper-case hex, escaped printable ASCII). It rejects everything else:
// other whitespace, raw control or non-ASCII bytes, a raw "<|", lone UTF-16 surrogates (a Go
// string cannot hold one), and duplicate keys. In strict mode it also rejects the escapes the
// encoder would not have written, so that whatever it accepts re-encodes to the identical text.

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/schemas"
)

const lowerHex = "0123456789abcdef"

// elidedKey is the key (and value) of the diff marker entry `"..": ".."` that opens a LOCALS diff
// which left unchanged variables out. It is also CWM's per-value "unchanged" marker.
const elidedKey = ".."

// appendPyString appends s to dst as a JSON string, the way json.dumps(s) writes it, with '<'
// written \u003c when '|' follows it. s must be valid UTF-8.
func appendPyString(dst []byte, s string) ([]byte, error) {
	if err := checkUTF8(s); err != nil {
		return dst, err
	}
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				dst = append(dst, '\\', '"')
			case c == '\\':
				dst = append(dst, '\\', '\\')
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c < 0x20 || c == 0x7f:
				dst = appendU4(dst, rune(c))
			case c == '<' && i+1 < len(s) && s[i+1] == '|':
				dst = appendU4(dst, '<')
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r > 0xffff {
			hi, lo := utf16.EncodeRune(r)
			dst = appendU4(appendU4(dst, hi), lo)
		} else {
			dst = appendU4(dst, r)
		}
		i += size
	}
	return append(dst, '"'), nil
}

// appendU4 appends the escape \uxxxx for the UTF-16 code unit r, in lower-case hex.
func appendU4(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u',
		lowerHex[r>>12&0xf], lowerHex[r>>8&0xf], lowerHex[r>>4&0xf], lowerHex[r&0xf])
}

// checkUTF8 reports the first invalid UTF-8 byte of s, wrapping ErrInvalidUTF8.
func checkUTF8(s string) error {
	if i := invalidUTF8At(s); i >= 0 {
		return fmt.Errorf("%w: byte 0x%02x at offset %d", ErrInvalidUTF8, s[i], i)
	}
	return nil
}

// invalidUTF8At returns the offset of the first byte of s that is not part of valid UTF-8, or -1.
func invalidUTF8At(s string) int {
	if utf8.ValidString(s) {
		return -1
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1 // unreachable: ValidString and the loop agree
}

// checkLocals reports what json.dumps of a dict could not have written or what the LOCALS diff
// marker would make ambiguous: a duplicate name, or a variable named "..".
func checkLocals(l schemas.Locals) error {
	if i := indexName(l, elidedKey); i >= 0 {
		return fmt.Errorf("[%d].Name: %q is reserved for the diff marker", i, elidedKey)
	}
	return checkDuplicates(l)
}

// checkDuplicates reports the first name that occurs twice in l.
func checkDuplicates(l schemas.Locals) error {
	if len(l) < 2 {
		return nil
	}
	seen := make(map[string]int, len(l))
	for i, v := range l {
		if j, dup := seen[v.Name]; dup {
			return fmt.Errorf("[%d].Name: duplicate name %q (also at [%d])", i, v.Name, j)
		}
		seen[v.Name] = i
	}
	return nil
}

// indexName returns the index of the first variable called name, or -1.
func indexName(l schemas.Locals, name string) int {
	for i, v := range l {
		if v.Name == name {
			return i
		}
	}
	return -1
}

// appendPyObject appends l as the JSON object json.dumps writes for a dict holding l's entries in
// order, opened by the entry `"..": ".."` when elided. It does not check names; see checkLocals.
func appendPyObject(dst []byte, l schemas.Locals, elided bool) ([]byte, error) {
	dst = append(dst, '{')
	if elided {
		dst = append(dst, `"..": ".."`...)
	}
	var err error
	for i, v := range l {
		if i > 0 || elided {
			dst = append(dst, ',', ' ')
		}
		if dst, err = appendPyString(dst, v.Name); err != nil {
			return dst, fmt.Errorf("[%d].Name: %w", i, err)
		}
		dst = append(dst, ':', ' ')
		if dst, err = appendPyString(dst, v.Value); err != nil {
			return dst, fmt.Errorf("[%d].Value: %w", i, err)
		}
	}
	return append(dst, '}'), nil
}

// decodePyString decodes the JSON string that starts at text[pos] and returns its value and the
// offset just after its closing quote. Errors are *SyntaxError with offsets into text. In strict
// mode only the exact encoding appendPyString writes is accepted.
func decodePyString(text string, pos int, strict bool) (string, int, error) {
	if pos >= len(text) || text[pos] != '"' {
		return "", pos, syntaxErrorf(pos, "expected a JSON string, found %s", describe(text, pos))
	}
	// Fast path: a string without escapes is its own value.
	i := pos + 1
	for i < len(text) && text[i] >= 0x20 && text[i] < 0x7f && text[i] != '"' && text[i] != '\\' &&
		(text[i] != '<' || i+1 >= len(text) || text[i+1] != '|') {
		i++
	}
	if i < len(text) && text[i] == '"' {
		return text[pos+1 : i], i + 1, nil
	}
	b := make([]byte, 0, i-pos+16)
	b = append(b, text[pos+1:i]...)
	for {
		if i >= len(text) {
			return "", i, syntaxErrorf(i, "expected the closing '\"' of the JSON string opened at byte %d, found end of text", pos)
		}
		c := text[i]
		switch {
		case c == '"':
			return string(b), i + 1, nil
		case c == '\\':
			r, next, err := decodeEscape(text, i, strict)
			if err != nil {
				return "", i, err
			}
			b = utf8.AppendRune(b, r)
			i = next
		case c < 0x20:
			return "", i, syntaxErrorf(i, "raw control byte 0x%02x in a JSON string; it must be escaped", c)
		case c == 0x7f:
			return "", i, syntaxErrorf(i, `raw DEL byte in a JSON string; json.dumps writes \u007f`)
		case c >= utf8.RuneSelf:
			return "", i, syntaxErrorf(i, `raw non-ASCII byte 0x%02x in a JSON string; json.dumps writes \uxxxx escapes`, c)
		case c == '<' && i+1 < len(text) && text[i+1] == '|':
			return "", i, syntaxErrorf(i, `raw "<|" in a JSON string; '<' before '|' is written \u003c`)
		default:
			b = append(b, c)
			i++
		}
	}
}

// decodeEscape decodes the escape sequence at text[i] ('\\') and returns the rune and the offset
// after the sequence; a surrogate pair is one sequence.
func decodeEscape(text string, i int, strict bool) (rune, int, error) {
	if i+1 >= len(text) {
		return 0, i, syntaxErrorf(i, "expected an escape sequence after '\\', found end of text")
	}
	switch e := text[i+1]; e {
	case '"', '\\':
		return rune(e), i + 2, nil
	case 'b':
		return '\b', i + 2, nil
	case 'f':
		return '\f', i + 2, nil
	case 'n':
		return '\n', i + 2, nil
	case 'r':
		return '\r', i + 2, nil
	case 't':
		return '\t', i + 2, nil
	case '/':
		if strict {
			return 0, i, syntaxErrorf(i, `non-canonical escape \/; json.dumps writes /`)
		}
		return '/', i + 2, nil
	case 'u':
	default:
		return 0, i, syntaxErrorf(i, "expected an escape sequence (one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX), found %s", describe(text, i))
	}
	u, err := hex4(text, i+2, strict)
	if err != nil {
		return 0, i, err
	}
	r, next := rune(u), i+6
	switch {
	case utf16.IsSurrogate(r) && r < 0xdc00:
		if next+1 >= len(text) || text[next] != '\\' || text[next+1] != 'u' {
			return 0, i, syntaxErrorf(i, `lone UTF-16 high surrogate %s: expected a low surrogate escape \udc00-\udfff after it`, text[i:next])
		}
		lo, err := hex4(text, next+2, strict)
		if err != nil {
			return 0, i, err
		}
		if lo < 0xdc00 || lo > 0xdfff {
			return 0, i, syntaxErrorf(next, `expected a low surrogate escape \udc00-\udfff after the high surrogate %s, found %s`, text[i:next], text[next:next+6])
		}
		return utf16.DecodeRune(r, rune(lo)), next + 6, nil
	case utf16.IsSurrogate(r):
		return 0, i, syntaxErrorf(i, "lone UTF-16 low surrogate %s", text[i:next])
	}
	if strict && !canonicalU4(r, text, next) {
		return 0, i, syntaxErrorf(i, "non-canonical escape %s for %q; json.dumps does not escape it this way", text[i:next], r)
	}
	return r, next, nil
}

// canonicalU4 reports whether appendPyString writes the BMP rune r as a \uxxxx escape when the
// encoded text continues at text[next].
func canonicalU4(r rune, text string, next int) bool {
	switch {
	case r >= 0x80, r == 0x7f:
		return true
	case r == '\b', r == '\t', r == '\n', r == '\f', r == '\r':
		return false
	case r < 0x20:
		return true
	case r == '<':
		return next < len(text) && text[next] == '|'
	}
	return false
}

// hex4 reads the four hex digits of a \u escape at text[pos:]; strict mode accepts lower case only.
func hex4(text string, pos int, strict bool) (uint16, error) {
	if pos+4 > len(text) {
		return 0, syntaxErrorf(pos, `expected 4 hex digits after \u, found %s`, describe(text, pos))
	}
	var u uint16
	for k := range 4 {
		c := text[pos+k]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F' && !strict:
			d = c - 'A' + 10
		default:
			want := "hex digit"
			if strict {
				want = "lower-case hex digit (json.dumps writes \\uxxxx in lower case)"
			}
			return 0, syntaxErrorf(pos+k, `expected a %s in a \u escape, found %s`, want, describe(text, pos+k))
		}
		u = u<<4 | uint16(d)
	}
	return u, nil
}

// decodePyObject decodes the JSON object of string values that starts at text[pos], as
// appendPyObject writes it, and returns its entries (non-nil, in order), whether it opened with the
// diff marker `"..": ".."` (only when marker is set; otherwise ".." is an ordinary key), and the
// offset just after the closing brace.
func decodePyObject(text string, pos int, strict, marker bool) (schemas.Locals, bool, int, error) {
	if pos >= len(text) || text[pos] != '{' {
		return nil, false, pos, syntaxErrorf(pos, "expected a JSON object '{', found %s", describe(text, pos))
	}
	out := schemas.Locals{}
	elided := false
	var seen map[string]int // offsets of the keys, built once the object grows
	i := pos + 1
	if i < len(text) && text[i] == '}' {
		return out, false, i + 1, nil
	}
	for {
		kpos := i
		k, next, err := decodePyString(text, i, strict)
		if err != nil {
			return nil, false, i, err
		}
		if !hasAt(text, next, ": ") {
			return nil, false, next, syntaxErrorf(next, `expected ": " after the key %q, found %s`, k, describe(text, next))
		}
		v, next, err := decodePyString(text, next+2, strict)
		if err != nil {
			return nil, false, i, err
		}
		switch {
		case marker && k == elidedKey:
			if len(out) > 0 || elided || v != elidedKey {
				return nil, false, kpos, syntaxErrorf(kpos, `key ".." may only open the object as the diff marker "..": ".."`)
			}
			elided = true
		default:
			if dup := duplicateKey(out, seen, k); dup {
				return nil, false, kpos, syntaxErrorf(kpos, "duplicate key %q", k)
			}
			if len(out) == 8 {
				seen = make(map[string]int, 16)
				for j, e := range out {
					seen[e.Name] = j
				}
			}
			if seen != nil {
				seen[k] = len(out)
			}
			out = append(out, schemas.Var{Name: k, Value: v})
		}
		i = next
		if i < len(text) && text[i] == '}' {
			return out, elided, i + 1, nil
		}
		if !hasAt(text, i, ", ") {
			return nil, false, i, syntaxErrorf(i, `expected ", " or '}' after the value of %q, found %s`, k, describe(text, i))
		}
		i += 2
	}
}

// duplicateKey reports whether k is already a key of out, using seen when it is built.
func duplicateKey(out schemas.Locals, seen map[string]int, k string) bool {
	if seen != nil {
		_, dup := seen[k]
		return dup
	}
	return indexName(out, k) >= 0
}

// hasAt reports whether text continues with s at pos.
func hasAt(text string, pos int, s string) bool {
	return pos <= len(text) && len(text)-pos >= len(s) && text[pos:pos+len(s)] == s
}
