package testcalls

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// maxLiteralDepth bounds the nesting of the containers of a literal (IsLiteral): deeper values
// are refused, as CPython's parser and ast.literal_eval refuse very deep ones.
const maxLiteralDepth = 100

// IsLiteral reports whether s is one Python expression that ast.literal_eval accepts (and so
// evaluates to the same value wherever it runs): numbers (int, float, imaginary, with a unary +
// or -, and a real plus or minus an imaginary one), strings and bytes (implicitly concatenated,
// never f-strings), True, False, None, tuples, lists, dicts, sets and set(), nested at most
// maxLiteralDepth deep, with a dict's keys and a set's elements hashable. Names, attribute access,
// calls (PosixPath('x'), P(x=1)), subscripts (typing.Optional[int]), comments, backslash
// continuations and anything else are refused. It is conservative where literal_eval is lax:
// a string with a \N{...} escape, or a parenthesised operand of a sign, is refused too.
func IsLiteral(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	p := &litParser{s: s}
	p.space(0)
	if _, ok := p.expr(0); !ok {
		return false
	}
	p.space(0)
	return p.i == len(p.s)
}

// litParser reads one literal of s from offset i.
type litParser struct {
	s string
	i int
}

// space skips blanks: spaces and tabs, and line breaks inside brackets (depth > 0).
func (p *litParser) space(depth int) {
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == ' ' || c == '\t':
		case (c == '\n' || c == '\r') && depth > 0:
		default:
			return
		}
		p.i++
	}
}

// peek is the next byte, 0 at the end.
func (p *litParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

// expr reads one literal at nesting depth and reports whether its value is hashable.
func (p *litParser) expr(depth int) (hashable, ok bool) {
	if depth > maxLiteralDepth {
		return false, false
	}
	switch c := p.peek(); {
	case c == '(':
		return p.tuple(depth)
	case c == '[':
		return false, p.seq(depth, ']')
	case c == '{':
		return false, p.brace(depth)
	case c == '-' || c == '+':
		// A signed number: a sign applies to a number only (not to True, a tuple, a sign).
		p.i++
		p.space(depth)
		imag, ok := p.number()
		if !ok {
			return false, false
		}
		return true, imag || p.complexTail(depth)
	case c >= '0' && c <= '9' || c == '.':
		imag, ok := p.number()
		if !ok {
			return false, false
		}
		return true, imag || p.complexTail(depth)
	case c == '"' || c == '\'':
		return true, p.strings(depth)
	}
	name := p.name()
	switch name {
	case "True", "False", "None":
		return true, true
	case "set":
		// set(): the rendering of an empty set.
		p.space(depth)
		if !strings.HasPrefix(p.s[p.i:], "(") {
			return false, false
		}
		p.i++
		p.space(depth + 1)
		if p.peek() != ')' {
			return false, false
		}
		p.i++
		return false, true
	case "":
		return false, false
	}
	// A string prefix: the name runs up to the quote.
	if q := p.peek(); (q == '"' || q == '\'') && stringPrefix(name) {
		p.i -= len(name)
		return true, p.strings(depth)
	}
	return false, false
}

// complexTail reads what may follow a (signed) real number: + or - and an imaginary number
// (1+2j), which literal_eval accepts as one complex value (never after an imaginary one).
func (p *litParser) complexTail(depth int) bool {
	save := p.i
	p.space(depth)
	if c := p.peek(); c != '+' && c != '-' {
		p.i = save
		return true
	}
	p.i++
	p.space(depth)
	imag, ok := p.number()
	return ok && imag
}

// numberRE matches a Python numeric literal: an integer (decimal, hex, octal, binary), a float
// or an imaginary number, with underscores between digits.
var numberRE = regexp.MustCompile(`^(?:` +
	`(?:[1-9](?:_?[0-9])*|0(?:_?0)*|0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+)` +
	`|(?:(?:[0-9](?:_?[0-9])*)?\.[0-9](?:_?[0-9])*|[0-9](?:_?[0-9])*\.)(?:[eE][+-]?[0-9](?:_?[0-9])*)?[jJ]?` +
	`|[0-9](?:_?[0-9])*[eE][+-]?[0-9](?:_?[0-9])*[jJ]?` +
	`|[0-9](?:_?[0-9])*[jJ]` +
	`)$`)

// number reads a numeric literal and reports whether it is imaginary.
func (p *litParser) number() (imag, ok bool) {
	j := p.i
	for j < len(p.s) {
		c := p.s[j]
		switch {
		case c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j++
		case (c == '+' || c == '-') && j > p.i && p.s[j-1]|0x20 == 'e' && !strings.HasPrefix(strings.ToLower(p.s[p.i:j]), "0x"):
			j++
		default:
			goto done
		}
	}
done:
	tok := p.s[p.i:j]
	if !numberRE.MatchString(tok) {
		return false, false
	}
	p.i = j
	last := tok[len(tok)-1]
	return last == 'j' || last == 'J', true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// name reads an identifier (ASCII letters, digits, underscores), "" if none.
func (p *litParser) name() string {
	j := p.i
	for j < len(p.s) {
		c := p.s[j]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > p.i && isDigit(c) {
			j++
			continue
		}
		break
	}
	n := p.s[p.i:j]
	p.i = j
	return n
}

// stringPrefix reports whether s is a prefix of a string or bytes literal literal_eval takes: r,
// u, b, br, rb in any case (never f or t, whose literals are expressions).
func stringPrefix(s string) bool {
	switch strings.ToLower(s) {
	case "r", "u", "b", "br", "rb":
		return true
	}
	return false
}

// strings reads one or more adjacent string literals, all str or all bytes.
func (p *litParser) strings(depth int) bool {
	kind := 0 // 1 str, 2 bytes
	for n := 0; ; n++ {
		save := p.i
		if n > 0 {
			p.space(depth)
		}
		j := p.i
		for j < len(p.s) && (p.s[j]|0x20 >= 'a' && p.s[j]|0x20 <= 'z') {
			j++
		}
		if j >= len(p.s) || p.s[j] != '"' && p.s[j] != '\'' {
			if n == 0 {
				return false
			}
			p.i = save
			return true
		}
		prefix := strings.ToLower(p.s[p.i:j])
		if prefix != "" && !stringPrefix(prefix) {
			return false
		}
		isBytes := strings.Contains(prefix, "b")
		k := 1
		if isBytes {
			k = 2
		}
		if kind != 0 && kind != k {
			return false
		}
		kind = k
		end, ok := stringBody(p.s[j:], isBytes, strings.Contains(prefix, "r"))
		if !ok {
			return false
		}
		p.i = j + end
	}
}

// stringBody is the length of the quoted literal at the start of s (its quotes included) and
// whether it is a whole, valid one: closed, a single-quoted one on one line, no NUL byte, bytes
// ASCII only, and a non-raw one's escapes valid (\x with two hex digits, \u four and \U eight in
// a str, \N refused).
func stringBody(s string, isBytes, raw bool) (int, bool) {
	q := s[0]
	triple := len(s) >= 3 && s[1] == q && s[2] == q
	i := 1
	if triple {
		i = 3
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == 0 || isBytes && c >= 0x80:
			return 0, false
		case c == '\\':
			if i+1 >= len(s) {
				return 0, false
			}
			if !raw {
				n, ok := escapeLen(s[i+1:], isBytes)
				if !ok {
					return 0, false
				}
				i += 1 + n
				continue
			}
			if s[i+1] == 0 || isBytes && s[i+1] >= 0x80 {
				return 0, false
			}
			i += 2
			if s[i-1] == '\r' && i < len(s) && s[i] == '\n' {
				i++
			}
			continue
		case (c == '\n' || c == '\r') && !triple:
			return 0, false
		case c == q && !triple:
			return i + 1, true
		case c == q && triple && i+2 < len(s) && s[i+1] == q && s[i+2] == q:
			return i + 3, true
		}
		i++
	}
	return 0, false
}

// escapeLen is the length of the escape after a backslash at the start of s (a non-raw literal),
// false for an invalid (or \N) one.
func escapeLen(s string, isBytes bool) (int, bool) {
	hex := func(n int) bool {
		if len(s) < 1+n {
			return false
		}
		for _, c := range []byte(s[1 : 1+n]) {
			if !(isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'f') {
				return false
			}
		}
		return true
	}
	switch c := s[0]; {
	case c == 0 || isBytes && c >= 0x80:
		return 0, false
	case c == 'x':
		return 3, hex(2)
	case c == 'u' && !isBytes:
		return 5, hex(4)
	case c == 'U' && !isBytes:
		return 9, hex(8) && strings.ToLower(s[1:9]) <= "0010ffff"
	case c == 'N' && !isBytes:
		return 0, false
	case c == '\r' && len(s) > 1 && s[1] == '\n':
		return 2, true
	case c >= 0x80:
		// A non-ASCII character after a backslash (an invalid escape, kept as is): its bytes.
		n := 1
		for n < len(s) && s[n]&0xC0 == 0x80 {
			n++
		}
		return n, true
	}
	return 1, true
}

// tuple reads a parenthesised literal: a tuple, or one value in parentheses.
func (p *litParser) tuple(depth int) (hashable, ok bool) {
	p.i++ // (
	p.space(depth + 1)
	if p.peek() == ')' {
		p.i++
		return true, true
	}
	hashable = true
	for n := 0; ; n++ {
		h, ok := p.expr(depth + 1)
		if !ok {
			return false, false
		}
		hashable = hashable && h
		p.space(depth + 1)
		switch p.peek() {
		case ')':
			p.i++
			return hashable, true
		case ',':
			p.i++
			p.space(depth + 1)
			if p.peek() == ')' {
				p.i++
				return hashable, true
			}
		default:
			return false, false
		}
	}
}

// seq reads the items of a list up to close.
func (p *litParser) seq(depth int, close byte) bool {
	p.i++
	p.space(depth + 1)
	if p.peek() == close {
		p.i++
		return true
	}
	for {
		if _, ok := p.expr(depth + 1); !ok {
			return false
		}
		p.space(depth + 1)
		switch p.peek() {
		case close:
			p.i++
			return true
		case ',':
			p.i++
			p.space(depth + 1)
			if p.peek() == close {
				p.i++
				return true
			}
		default:
			return false
		}
	}
}

// brace reads a dict ({} or {k: v, ...}, hashable keys) or a set ({a, ...}, hashable elements).
func (p *litParser) brace(depth int) bool {
	p.i++
	p.space(depth + 1)
	if p.peek() == '}' {
		p.i++
		return true
	}
	dict := -1 // unknown until the first item
	for {
		h, ok := p.expr(depth + 1)
		if !ok || !h {
			return false
		}
		p.space(depth + 1)
		colon := p.peek() == ':'
		if dict == -1 {
			dict = 0
			if colon {
				dict = 1
			}
		}
		if colon != (dict == 1) {
			return false
		}
		if colon {
			p.i++
			p.space(depth + 1)
			if _, ok := p.expr(depth + 1); !ok {
				return false
			}
			p.space(depth + 1)
		}
		switch p.peek() {
		case '}':
			p.i++
			return true
		case ',':
			p.i++
			p.space(depth + 1)
			if p.peek() == '}' {
				p.i++
				return true
			}
		default:
			return false
		}
	}
}
