// Package jsonmembers walks the members of a JSON object without decoding or scanning the values
// a caller reads itself, so that a large value of a known shape (a stored trace's integers) is
// read once instead of validated, skipped and then read by encoding/json.
package jsonmembers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// Walk calls fn for each member of the JSON object data starts with (after white space), in
// order, with the member's name and data from the member's value on. fn returns the length of the
// value it read; it may call ValueLen for a value it does not read itself. Walk returns the length
// of data up to and including the object's closing brace.
func Walk(data []byte, fn func(name string, value []byte) (int, error)) (int, error) {
	p := SkipSpace(data, 0)
	if p >= len(data) || data[p] != '{' {
		return 0, errors.New("want a JSON object")
	}
	p = SkipSpace(data, p+1)
	if p < len(data) && data[p] == '}' {
		return p + 1, nil
	}
	for {
		var name string
		n, err := decodeValue(data[p:], &name)
		if err != nil {
			return 0, fmt.Errorf("member name: %w", err)
		}
		if p = SkipSpace(data, p+n); p >= len(data) || data[p] != ':' {
			return 0, fmt.Errorf("want ':' after member %q", name)
		}
		p = SkipSpace(data, p+1)
		if n, err = fn(name, data[p:]); err != nil {
			return 0, fmt.Errorf("member %q: %w", name, err)
		}
		if n <= 0 || p+n > len(data) {
			return 0, fmt.Errorf("member %q: value of length %d", name, n)
		}
		if p = SkipSpace(data, p+n); p < len(data) && data[p] == ',' {
			p = SkipSpace(data, p+1)
			continue
		}
		if p >= len(data) || data[p] != '}' {
			return 0, errors.New("want ',' or '}' after a member")
		}
		return p + 1, nil
	}
}

// ValueLen returns the length of the JSON value data starts with, checking that it is valid.
func ValueLen(data []byte) (int, error) {
	var raw json.RawMessage
	return decodeValue(data, &raw)
}

// Decode decodes the JSON value data starts with into v, as json.Unmarshal does, and returns its
// length.
func Decode(data []byte, v any) (int, error) { return decodeValue(data, v) }

func decodeValue(data []byte, v any) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return 0, err
	}
	return int(dec.InputOffset()), nil
}

// SkipSpace returns the position of the first byte at or after p that is not JSON white space.
func SkipSpace(data []byte, p int) int {
	for p < len(data) && (data[p] == ' ' || data[p] == '\t' || data[p] == '\r' || data[p] == '\n') {
		p++
	}
	return p
}

// End checks that nothing but white space follows position p of data.
func End(data []byte, p int) error {
	if SkipSpace(data, p) != len(data) {
		return errors.New("data after the JSON value")
	}
	return nil
}

// Strings decodes the JSON array of strings data starts with (after white space) as
// json.Unmarshal into a []string would, and returns its length. The strings are slices of two
// allocations: one copy of the array's text, which holds every string that needs no unescaping
// (what encoding/json writes for most text), and one buffer of the others, unescaped as
// encoding/json does (FuzzStrings holds the two to the same result). Anything that is not an
// array of valid strings (null, another element, a bad escape, a syntax error) goes through
// encoding/json whole, so the result and its errors are encoding/json's.
func Strings(data []byte) ([]string, int, error) {
	p := SkipSpace(data, 0)
	if p >= len(data) || data[p] != '[' {
		return decodeStrings(data)
	}
	// The array's extent and its elements, in one scan: each a span of the text, or (lo < 0) a
	// span of the unescaped buffer.
	type elem struct{ lo, hi int }
	var elems []elem
	var unescaped []byte
	q := SkipSpace(data, p+1)
	if q < len(data) && data[q] == ']' {
		return []string{}, q + 1, nil
	}
	for {
		if q >= len(data) || data[q] != '"' {
			return decodeStrings(data)
		}
		lo := q + 1
		hi := lo
		for hi < len(data) && data[hi] != '"' && data[hi] != '\\' && data[hi] >= 0x20 {
			hi++
		}
		if hi < len(data) && data[hi] == '"' && utf8.Valid(data[lo:hi]) {
			elems = append(elems, elem{lo, hi})
		} else {
			start := len(unescaped)
			var ok bool
			if unescaped, hi, ok = AppendUnescaped(unescaped, data, lo); !ok {
				return decodeStrings(data)
			}
			elems = append(elems, elem{-start - 1, len(unescaped)})
		}
		q = SkipSpace(data, hi+1)
		if q < len(data) && data[q] == ',' {
			q = SkipSpace(data, q+1)
			continue
		}
		if q >= len(data) || data[q] != ']' {
			return decodeStrings(data)
		}
		break
	}
	text, other := string(data[p:q+1]), string(unescaped)
	out := make([]string, len(elems))
	for i, e := range elems {
		if e.lo < 0 {
			out[i] = other[-e.lo-1 : e.hi]
		} else {
			out[i] = text[e.lo-p : e.hi-p]
		}
	}
	return out, q + 1, nil
}

// AppendUnescaped appends the JSON string whose text starts at data[lo] (after its opening quote)
// to b as encoding/json decodes it: escapes replaced, a lone or broken UTF-16 surrogate and each
// byte of invalid UTF-8 made U+FFFD. It returns the index of the closing quote, and false for a
// string JSON does not allow (a control character, an escape it does not define, no end).
func AppendUnescaped(b, data []byte, lo int) ([]byte, int, bool) {
	r := lo
	for r < len(data) {
		switch c := data[r]; {
		case c == '"':
			return b, r, true
		case c < 0x20:
			return b, 0, false
		case c == '\\':
			if r+1 >= len(data) {
				return b, 0, false
			}
			switch data[r+1] {
			case '"', '\\', '/':
				b = append(b, data[r+1])
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := hex4(data[r+2:])
				if rr < 0 {
					return b, 0, false
				}
				r += 6
				if utf16.IsSurrogate(rr) {
					// encoding/json takes a valid pair whole; otherwise U+FFFD, and what follows
					// is read on its own.
					if r+1 < len(data) && data[r] == '\\' && data[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(data[r+2:])); dec != utf8.RuneError {
							b = utf8.AppendRune(b, dec)
							r += 6
							continue
						}
					}
					rr = utf8.RuneError
				}
				b = utf8.AppendRune(b, rr)
				continue
			default:
				return b, 0, false
			}
			r += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(data[r:])
			b = utf8.AppendRune(b, rr) // U+FFFD for each byte of invalid UTF-8
			r += size
		}
	}
	return b, 0, false
}

// hex4 is the value of the four hexadecimal digits b starts with, -1 if it does not.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// decodeStrings is Strings through encoding/json.
func decodeStrings(data []byte) ([]string, int, error) {
	var out []string
	n, err := decodeValue(data, &out)
	if err != nil {
		return nil, 0, err
	}
	return out, n, nil
}
