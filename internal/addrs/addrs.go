// Package addrs recognises memory addresses inside rendered Python values: raw addresses (what
// hex(id(x)) or a repr the tracer did not guard shows) and address placeholders (the tracer's
// per-trace ordinals after " at ", and the "<address 0xN>" form rows give a raw address). Rows
// renumber both per row (rows/values.go, where the forms are explained), and a repository test's
// second traced run compares values with them numbered per run (execute/reexec.go), so that two
// runs whose values differ only in where the interpreter put an object agree.
package addrs

import (
	"strconv"
	"strings"
)

const (
	// RawMinDigits and RawMaxDigits bound the hex digits of a raw address: CPython's heap and
	// mmap addresses on 64-bit Linux have 12 (0x55..., 0x7f...), a 64-bit word 16; nine or more
	// leaves 32-bit constants (0xdeadbeef, colours, CRCs) alone.
	RawMinDigits, RawMaxDigits = 9, 16
	// OrdMaxDigits bounds the hex digits of a placeholder's ordinal.
	OrdMaxDigits = 5
	// AtBefore is what precedes a tracer placeholder; MarkOpen and MarkClose wrap a marked one.
	AtBefore  = " at "
	MarkOpen  = "<address "
	MarkClose = ">"
)

// Found is one address (raw) or placeholder (tracer ordinal, marked) found in a value.
type Found struct {
	Start, End int    // s[Start:End] is the text replaced: "0x..." or "<address 0x...>"
	Key        string // "o" + ordinal (lowercase hex) or "r" + raw digits (lowercase)
	AfterAt    bool   // preceded by " at "
}

func isWord(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// Find returns the raw addresses and placeholders of value s in order (see the package doc for
// the forms).
func Find(s string) []Found {
	var out []Found
	for i := 0; ; {
		k := strings.IndexAny(s[i:], "xX")
		if k < 0 {
			return out
		}
		x := i + k // s[x] is 'x' or 'X'
		i = x + 1
		if x == 0 || s[x-1] != '0' || (x >= 2 && isWord(s[x-2])) {
			continue
		}
		start, j := x-1, x+1
		for j < len(s) && isHex(s[j]) {
			j++
		}
		digits := s[x+1 : j]
		if j < len(s) && isWord(s[j]) {
			i = j
			continue
		}
		afterAt := strings.HasSuffix(s[:start], AtBefore)
		switch n := len(digits); {
		case n >= RawMinDigits && n <= RawMaxDigits:
			out = append(out, Found{start, j, "r" + strings.ToLower(digits), afterAt})
		case n < 1 || n > OrdMaxDigits || digits[0] == '0' || s[x] != 'x' || !isLowerHex(digits):
		case afterAt:
			out = append(out, Found{start, j, "o" + digits, true})
		case strings.HasSuffix(s[:start], MarkOpen) && strings.HasPrefix(s[j:], MarkClose):
			out = append(out, Found{start - len(MarkOpen), j + len(MarkClose), "o" + digits, false})
		}
		i = j
	}
}

// Normalise returns s with every raw address and placeholder replaced by "0x" and its ordinal in
// ords (keys as Found.Key), which it extends in order of first appearance: two values that differ
// only in where objects were placed, numbered by one map each, normalise alike.
func Normalise(s string, ords map[string]int) string {
	found := Find(s)
	if len(found) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, p := range found {
		n, ok := ords[p.Key]
		if !ok {
			n = len(ords) + 1
			ords[p.Key] = n
		}
		b.WriteString(s[last:p.Start])
		b.WriteString("0x")
		b.WriteString(strconv.FormatInt(int64(n), 16))
		last = p.End
	}
	b.WriteString(s[last:])
	return b.String()
}
