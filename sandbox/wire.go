package sandbox

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/schemas"
)

// wireEvent is one line of the tracer's events stream (docs/tracer-protocol.md).
type wireEvent struct {
	Event, Func, File, Src string
	Frame, Lineno, Depth   int
	Names                  []string
	HasNames               bool
	Locals                 []schemas.Var // the diff, in wire order
	Value                  *string
	ExcType, ExcMessage    string
	Unwind                 bool
	Status                 string
	Blocks                 [][2]int
	// function records
	QualName, Source string
	First, Last      int
	// test and collection records
	Runner, Outcome, MissingModule, When, Writable string
	Tests, Errors, Neutralised                     []string
	OriginalRunnable, Fallback                     bool
	// consume records (Start, Limit) and end records (Consumed, HasConsumed)
	Start, Limit, Consumed int
	HasConsumed            bool
}

var errWire = errors.New("malformed trace line")

// parseWire decodes one events line. It is a dedicated decoder for the tracer's flat JSON objects,
// several times faster than encoding/json's reflection, and it accepts any valid JSON: unknown keys
// and values of unexpected types are skipped. The input is untrusted; parseWire never panics.
func parseWire(b []byte) (wireEvent, error) {
	var w wireEvent
	s := scanner{b: b}
	if !s.byte('{') {
		return w, errWire
	}
	if s.byte('}') {
		if s.ws(); s.i != len(s.b) {
			return w, errWire
		}
		return w, nil
	}
	for {
		key, ok := s.str()
		if !ok || !s.byte(':') {
			return w, errWire
		}
		switch key {
		case "event":
			w.Event, ok = s.strOrSkip()
		case "func":
			w.Func, ok = s.strOrSkip()
		case "file":
			w.File, ok = s.strOrSkip()
		case "src":
			w.Src, ok = s.strOrSkip()
		case "exc_type":
			w.ExcType, ok = s.strOrSkip()
		case "exc_message":
			w.ExcMessage, ok = s.strOrSkip()
		case "status":
			w.Status, ok = s.strOrSkip()
		case "frame":
			w.Frame, ok = s.intOrSkip()
		case "lineno":
			w.Lineno, ok = s.intOrSkip()
		case "depth":
			w.Depth, ok = s.intOrSkip()
		case "unwind":
			w.Unwind, ok = s.boolOrSkip()
		case "value":
			s.ws()
			if s.peek() == '"' {
				var v string
				if v, ok = s.str(); ok {
					w.Value = &v
				}
			} else {
				ok = s.skip(0)
			}
		case "names":
			w.Names, ok = s.strList()
			w.HasNames = ok && w.Names != nil
		case "locals":
			w.Locals, ok = s.strMap()
		case "blocks":
			w.Blocks, ok = s.pairs()
		case "qualname":
			w.QualName, ok = s.strOrSkip()
		case "source":
			w.Source, ok = s.strOrSkip()
		case "first":
			w.First, ok = s.intOrSkip()
		case "last":
			w.Last, ok = s.intOrSkip()
		case "runner":
			w.Runner, ok = s.strOrSkip()
		case "outcome":
			w.Outcome, ok = s.strOrSkip()
		case "missing_module":
			w.MissingModule, ok = s.strOrSkip()
		case "when":
			w.When, ok = s.strOrSkip()
		case "writable":
			w.Writable, ok = s.strOrSkip()
		case "tests":
			w.Tests, ok = s.strList()
		case "errors":
			w.Errors, ok = s.strList()
		case "neutralised":
			w.Neutralised, ok = s.strList()
		case "original_runnable":
			w.OriginalRunnable, ok = s.boolOrSkip()
		case "fallback":
			w.Fallback, ok = s.boolOrSkip()
		case "start":
			w.Start, ok = s.intOrSkip()
		case "limit":
			w.Limit, ok = s.intOrSkip()
		case "consumed":
			w.Consumed, ok = s.intOrSkip()
			w.HasConsumed = ok
		default:
			ok = s.skip(0)
		}
		if !ok {
			return w, errWire
		}
		if s.byte(',') {
			continue
		}
		if s.byte('}') {
			if s.ws(); s.i != len(s.b) {
				return w, errWire // trailing bytes after the object
			}
			return w, nil
		}
		return w, errWire
	}
}

// scanner walks a JSON text.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// byte consumes c (after white space) if it is next.
func (s *scanner) byte(c byte) bool {
	s.ws()
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// str reads a JSON string.
func (s *scanner) str() (string, bool) {
	s.ws()
	if s.peek() != '"' {
		return "", false
	}
	s.i++
	start := s.i
	ascii := true
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			raw := s.b[start:s.i]
			s.i++
			if !ascii && !utf8.Valid(raw) {
				return string([]rune(string(raw))), true // invalid bytes become U+FFFD
			}
			return string(raw), true
		}
		if c >= 0x80 {
			ascii = false
		}
		if c == '\\' {
			return s.strEscaped(start)
		}
		if c < 0x20 {
			return "", false
		}
		s.i++
	}
	return "", false
}

// strEscaped finishes a string that contains escapes, from its first byte at start.
func (s *scanner) strEscaped(start int) (string, bool) {
	out := make([]byte, 0, s.i-start+16)
	out = append(out, s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if !utf8.Valid(out) {
				out = []byte(string([]rune(string(out))))
			}
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			return "", false
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				// A high surrogate followed by a low one is one rune; a lone one is U+FFFD.
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					save := s.i
					s.i += 2
					r2, ok := s.hex4()
					if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
						r = dec
					} else {
						s.i = save
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return "", false
}

func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s.b[s.i:s.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	s.i += 4
	return rune(v), true
}

// strOrSkip reads a string, or skips a value of another type and returns "".
func (s *scanner) strOrSkip() (string, bool) {
	s.ws()
	if s.peek() == '"' {
		return s.str()
	}
	return "", s.skip(0)
}

// number scans a JSON number (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?) and reports whether
// it was one and whether it is an integer.
func (s *scanner) number() (ok, integer bool) {
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		digits()
	default:
		return false, false
	}
	integer = true
	if s.peek() == '.' {
		s.i++
		if digits() == 0 {
			return false, false
		}
		integer = false
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if digits() == 0 {
			return false, false
		}
		integer = false
	}
	return true, integer
}

// intOrSkip reads an integer, or skips a value of another type and returns 0. An integer too large
// for int reads as 0.
func (s *scanner) intOrSkip() (int, bool) {
	s.ws()
	start := s.i
	ok, integer := s.number()
	if ok && integer {
		n, _ := strconv.Atoi(string(s.b[start:s.i]))
		return n, true
	}
	s.i = start
	return 0, s.skip(0)
}

func (s *scanner) boolOrSkip() (bool, bool) {
	s.ws()
	if s.lit("true") {
		return true, true
	}
	return false, s.skip(0)
}

func (s *scanner) lit(word string) bool {
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return false
}

// strList reads an array of strings (null gives nil).
func (s *scanner) strList() ([]string, bool) {
	s.ws()
	if s.lit("null") {
		return nil, true
	}
	if !s.byte('[') {
		return nil, s.skip(0)
	}
	out := []string{}
	if s.byte(']') {
		return out, true
	}
	for {
		v, ok := s.str()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if s.byte(',') {
			continue
		}
		return out, s.byte(']')
	}
}

// strMap reads an object of string values, in order.
func (s *scanner) strMap() ([]schemas.Var, bool) {
	s.ws()
	if s.lit("null") {
		return nil, true
	}
	if !s.byte('{') {
		return nil, s.skip(0)
	}
	out := []schemas.Var{}
	if s.byte('}') {
		return out, true
	}
	for {
		k, ok := s.str()
		if !ok || !s.byte(':') {
			return nil, false
		}
		v, ok := s.str()
		if !ok {
			return nil, false
		}
		out = append(out, schemas.Var{Name: k, Value: v})
		if s.byte(',') {
			continue
		}
		return out, s.byte('}')
	}
}

// pairs reads an array of two-integer arrays ([[1,5],[7,9]]); anything else is skipped.
func (s *scanner) pairs() ([][2]int, bool) {
	s.ws()
	start := s.i
	if !s.byte('[') {
		return nil, s.skip(0)
	}
	out := [][2]int{}
	if s.byte(']') {
		return out, true
	}
	for {
		var p [2]int
		ok := s.byte('[')
		if ok {
			p[0], ok = s.intOnly()
		}
		if ok {
			ok = s.byte(',')
		}
		if ok {
			p[1], ok = s.intOnly()
		}
		if ok {
			ok = s.byte(']')
		}
		if !ok {
			s.i = start
			return nil, s.skip(0)
		}
		out = append(out, p)
		if s.byte(',') {
			continue
		}
		if s.byte(']') {
			return out, true
		}
		s.i = start
		return nil, s.skip(0)
	}
}

// intOnly reads an integer and fails on anything else.
func (s *scanner) intOnly() (int, bool) {
	s.ws()
	start := s.i
	if ok, integer := s.number(); !ok || !integer {
		return 0, false
	}
	n, err := strconv.Atoi(string(s.b[start:s.i]))
	return n, err == nil
}

// maxNesting bounds skip's recursion on hostile input.
const maxNesting = 64

// skip passes over any JSON value.
func (s *scanner) skip(depth int) bool {
	if depth > maxNesting {
		return false
	}
	s.ws()
	switch c := s.peek(); {
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '{' || c == '[':
		close := byte('}')
		if c == '[' {
			close = ']'
		}
		s.i++
		if s.byte(close) {
			return true
		}
		for {
			if c == '{' {
				if _, ok := s.str(); !ok || !s.byte(':') {
					return false
				}
			}
			if !s.skip(depth + 1) {
				return false
			}
			if s.byte(',') {
				continue
			}
			return s.byte(close)
		}
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		ok, _ := s.number()
		return ok
	}
	return false
}
