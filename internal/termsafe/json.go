package termsafe

import "unicode/utf8"

// JSON returns the JSON text data made safe for a terminal while it stays the same JSON value:
// each C1 control, bidi control and line separator (which a JSON text may hold raw only inside a
// string) becomes its \uXXXX escape, and each byte that is not valid UTF-8 becomes \ufffd, the
// character a JSON decoder reads for it. encoding/json escapes C0 controls itself; a raw one
// (which no valid JSON text holds outside whitespace: tab, newline, carriage return), and DEL,
// become \u00XX too. data itself is returned when nothing needs escaping.
//
// It is for JSON that ndtrace prints on a terminal (stats --json, verify --json, trace, render
// --format json); JSON written to a file or a pipe, and stored data, keep their bytes.
func JSON(data []byte) []byte {
	i := firstUnsafeJSON(data)
	if i < 0 {
		return data
	}
	out := make([]byte, 0, len(data)+32)
	out = append(out, data[:i]...)
	for i < len(data) {
		c := data[i]
		if c < utf8.RuneSelf {
			if safeJSONByte(c) {
				out = append(out, c)
			} else {
				out = appendU(out, rune(c))
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = appendU(out, utf8.RuneError)
		case unsafeRune(r):
			out = appendU(out, r)
		default:
			out = append(out, data[i:i+size]...)
		}
		i += size
	}
	return out
}

// firstUnsafeJSON returns the index of the first byte of data JSON must escape, or -1.
func firstUnsafeJSON(data []byte) int {
	for i := 0; i < len(data); {
		c := data[i]
		if c < utf8.RuneSelf {
			if !safeJSONByte(c) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		if (r == utf8.RuneError && size == 1) || unsafeRune(r) {
			return i
		}
		i += size
	}
	return -1
}

// safeJSONByte reports whether the ASCII byte c may stay as it is in JSON printed on a terminal:
// a printable character, or the whitespace JSON text is indented with (tab, newline).
func safeJSONByte(c byte) bool {
	return (c >= 0x20 && c != 0x7f) || c == '\t' || c == '\n'
}

// appendU appends the JSON escape \uXXXX of the BMP rune r.
func appendU(out []byte, r rune) []byte {
	out = append(out, '\\', 'u')
	for shift := 12; shift >= 0; shift -= 4 {
		out = append(out, hexDigits[r>>uint(shift)&0xf])
	}
	return out
}
