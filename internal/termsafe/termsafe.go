// Package termsafe makes untrusted text safe to print on a terminal or in a log line.
//
// Text that came from traced code, a repository or a corpus (a reject reason, a source name, a
// row's code) may hold bytes a terminal obeys rather than shows: ESC and C1 sequences retitle the
// window, clear the screen, move the cursor to fake a report or write the clipboard (OSC 52);
// bidi controls reorder what is shown. [String] and [Text] render every such character as a
// visible escape, so a person sees what the text holds and the terminal obeys none of it. They are
// for display only: stored data (shards, rejects, stats.json) keeps the real text.
//
// The rules, for each character of the input:
//
//   - C0 controls (U+0000–U+001F) and DEL (U+007F) become \xNN (ESC is \x1b, BEL \x07), except
//     tab, newline and carriage return, which become \t, \n and \r; [Text] keeps tab and newline
//     as they are (a multi-line block);
//   - C1 controls (U+0080–U+009F, encoded as UTF-8) become \u0080 … \u009f;
//   - the bidi controls U+061C, U+200E, U+200F, U+202A–U+202E and U+2066–U+2069, and the line and
//     paragraph separators U+2028 and U+2029, become \uXXXX;
//   - each byte that is not part of valid UTF-8 (a raw C1 byte 0x9b, a stray continuation byte, an
//     encoded surrogate) becomes \xNN;
//   - everything else, backslashes included, is copied unchanged, so printable text passes as it
//     is (and costs no allocation).
//
// strconv.Quote would also be safe, but it escapes every rune unicode.IsPrint rejects (the zero
// width joiner inside an emoji, a soft hyphen), doubles backslashes and adds quotes: printable text
// would not pass unchanged.
package termsafe

import (
	"strings"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// String returns s with every control character, bidi control and invalid UTF-8 byte escaped
// (see the package documentation), on one line: tab, newline and carriage return are escaped too.
func String(s string) string { return escape(s, false) }

// Text is [String] for a multi-line block (a row's code and trajectory): tab and newline stay as
// they are; carriage return and every other control character are escaped.
func Text(s string) string { return escape(s, true) }

// Safe reports whether s prints as it is: [String] would return it unchanged.
func Safe(s string) bool { return firstUnsafe(s, false) < 0 }

// escape implements String (block false) and Text (block true).
func escape(s string, block bool) string {
	i := firstUnsafe(s, block)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if safeASCII(c, block) {
				b.WriteByte(c)
			} else {
				writeASCII(&b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			writeHex(&b, 'x', uint32(c), 2)
		case unsafeRune(r):
			writeHex(&b, 'u', uint32(r), 4)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// firstUnsafe returns the index of the first byte of s that must be escaped, or -1.
func firstUnsafe(s string, block bool) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !safeASCII(c, block) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || unsafeRune(r) {
			return i
		}
		i += size
	}
	return -1
}

// safeASCII reports whether the ASCII byte c prints as it is (in a block, tab and newline too).
func safeASCII(c byte, block bool) bool {
	if c >= 0x20 && c != 0x7f {
		return true
	}
	return block && (c == '\t' || c == '\n')
}

// unsafeRune reports whether the non-ASCII rune r must be escaped: a C1 control, a bidi control,
// or a line or paragraph separator.
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// writeASCII writes the escape of the ASCII control c.
func writeASCII(b *strings.Builder, c byte) {
	switch c {
	case '\t':
		b.WriteString(`\t`)
	case '\n':
		b.WriteString(`\n`)
	case '\r':
		b.WriteString(`\r`)
	default:
		writeHex(b, 'x', uint32(c), 2)
	}
}

// writeHex writes \<kind> and v in n lower-case hex digits.
func writeHex(b *strings.Builder, kind byte, v uint32, n int) {
	b.WriteByte('\\')
	b.WriteByte(kind)
	for shift := 4 * (n - 1); shift >= 0; shift -= 4 {
		b.WriteByte(hexDigits[v>>uint(shift)&0xf])
	}
}
