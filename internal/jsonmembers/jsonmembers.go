// Package jsonmembers walks the members of a JSON object without decoding or scanning the values
// a caller reads itself, so that a large value of a known shape (a stored trace's integers) is
// read once instead of validated, skipped and then read by encoding/json.
package jsonmembers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
// json.Unmarshal into a []string would, and returns its length. Strings with no escape, no control
// character and valid UTF-8 (what encoding/json writes for most text) are not copied one by one:
// they are slices of one copy of the array's text. Anything else (an escape, invalid UTF-8, null,
// an element that is not a string, a syntax error) goes through encoding/json, so the result and
// its errors are encoding/json's.
func Strings(data []byte) ([]string, int, error) {
	p := SkipSpace(data, 0)
	if p >= len(data) || data[p] != '[' {
		return decodeStrings(data)
	}
	// The array's extent, and whether every element takes the fast path, in one scan.
	type span struct{ lo, hi int }
	var spans []span
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
		if hi >= len(data) || data[hi] != '"' || !utf8.Valid(data[lo:hi]) {
			return decodeStrings(data) // an escape, a control character, invalid UTF-8 or the end
		}
		spans = append(spans, span{lo, hi})
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
	text := string(data[p : q+1])
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = text[s.lo-p : s.hi-p]
	}
	return out, q + 1, nil
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
