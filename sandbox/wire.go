package sandbox

import (
	"errors"
	"hash/maphash"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/ndtrace/ndtrace/internal/jsonmembers"
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
	Refused                                        []string // test selection refused (collection)
	// end records of a tampered run: the traced files on the stack, outermost first
	Files []string
	// consume records (Start, Limit) and end records (Consumed, HasConsumed)
	Start, Limit, Consumed int
	HasConsumed            bool
}

var errWire = errors.New("malformed trace line")

// parseWire decodes one events line. It is a dedicated decoder for the tracer's flat JSON objects,
// several times faster than encoding/json's reflection, and it accepts any valid JSON: unknown keys
// and values of unexpected types are skipped. The input is untrusted; parseWire never panics.
// Every slice and string of the result is freshly allocated; the decoder uses a wireParser, which
// reuses them.
func parseWire(b []byte) (wireEvent, error) {
	var s scanner
	var w wireEvent
	err := parseInto(&s, b, &w)
	return w, err
}

// wireParser is parseWire with memory reused from one line to the next: the strings it returns
// come from a bounded cache of recent strings (so that the func, file, src, names and repeated
// values of a trace share their bytes), and w.Names and w.Locals reuse the previous line's
// backing arrays, which the caller must therefore copy to keep past the next parse.
type wireParser struct {
	s     scanner
	cache internCache
}

// parse decodes line b into w, overwriting every field of w but reusing the backing arrays of
// w.Names and w.Locals.
func (p *wireParser) parse(b []byte, w *wireEvent) error {
	p.s.b, p.s.i, p.s.cache = b, 0, &p.cache
	err := parseInto(&p.s, b, w)
	p.s.b = nil // do not keep the line alive
	return err
}

// parseInto is parse on a scanner: a nil s.cache allocates every string.
func parseInto(s *scanner, b []byte, w *wireEvent) error {
	names, locals := w.Names[:0], w.Locals[:0]
	*w = wireEvent{}
	s.b, s.i = b, 0
	if !s.byte('{') {
		return errWire
	}
	if s.byte('}') {
		if s.ws(); s.i != len(s.b) {
			return errWire
		}
		return nil
	}
	for {
		key, ok := s.key()
		if !ok || !s.byte(':') {
			return errWire
		}
		switch key {
		case "event":
			w.Event, ok = s.eventOrSkip()
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
			w.Names, ok = s.strList(names)
			w.HasNames = ok && w.Names != nil
			if w.Names != nil {
				names = w.Names[:0]
			}
		case "locals":
			w.Locals, ok = s.strMap(locals)
			if w.Locals != nil {
				locals = w.Locals[:0]
			}
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
			w.Tests, ok = s.strList(nil)
		case "errors":
			w.Errors, ok = s.strList(nil)
		case "neutralised":
			w.Neutralised, ok = s.strList(nil)
		case "files":
			w.Files, ok = s.strList(nil)
		case "original_runnable":
			w.OriginalRunnable, ok = s.boolOrSkip()
		case "fallback":
			w.Fallback, ok = s.boolOrSkip()
		case "refused":
			w.Refused, ok = s.strList(nil)
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
			return errWire
		}
		if s.byte(',') {
			continue
		}
		if s.byte('}') {
			if s.ws(); s.i != len(s.b) {
				return errWire // trailing bytes after the object
			}
			return nil
		}
		return errWire
	}
}

// scanner walks a JSON text.
type scanner struct {
	b []byte
	i int
	// cache, when set, supplies the strings read (see internCache).
	cache *internCache
	// esc is scratch for unescaping a string.
	esc []byte
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
	raw, ok := s.rawStr()
	if !ok {
		return "", false
	}
	return s.intern(raw), true
}

// key reads an object's key. The result may alias the scanner's buffers: it is valid until the
// next read.
func (s *scanner) key() (string, bool) {
	raw, ok := s.rawStr()
	if !ok {
		return "", false
	}
	return unsafe.String(unsafe.SliceData(raw), len(raw)), true
}

// eventOrSkip reads the event kind: the tracer's kinds are constants, others strings.
func (s *scanner) eventOrSkip() (string, bool) {
	s.ws()
	if s.peek() != '"' {
		return "", s.skip(0)
	}
	raw, ok := s.rawStr()
	if !ok {
		return "", false
	}
	switch string(raw) {
	case schemas.EventLine:
		return schemas.EventLine, true
	case schemas.EventCall:
		return schemas.EventCall, true
	case schemas.EventReturn:
		return schemas.EventReturn, true
	case schemas.EventException:
		return schemas.EventException, true
	}
	return s.intern(raw), true
}

// intern returns raw as a string, from the cache when there is one.
func (s *scanner) intern(raw []byte) string {
	if s.cache != nil {
		return s.cache.get(raw)
	}
	return string(raw)
}

// rawStr reads a JSON string and returns its value as valid UTF-8 (invalid bytes become U+FFFD,
// as encoding/json has it). The result aliases the input, or s.esc when the string holds escapes
// or invalid bytes: it is valid until the next read.
func (s *scanner) rawStr() ([]byte, bool) {
	s.ws()
	if s.peek() != '"' {
		return nil, false
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
				s.esc = fixUTF8(s.esc[:0], raw)
				return s.esc, true
			}
			return raw, true
		}
		if c >= 0x80 {
			ascii = false
		}
		if c == '\\' {
			return s.strEscaped(start)
		}
		if c < 0x20 {
			return nil, false
		}
		s.i++
	}
	return nil, false
}

// fixUTF8 appends b to dst with every invalid byte replaced by U+FFFD.
func fixUTF8(dst, b []byte) []byte {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			dst = append(dst, b[:n]...)
		}
		b = b[n:]
	}
	return dst
}

// strEscaped finishes a string that contains escapes, from its first byte at start, into s.esc.
func (s *scanner) strEscaped(start int) ([]byte, bool) {
	out, end, ok := jsonmembers.AppendUnescaped(s.esc[:0], s.b, start)
	s.esc = out[:0]
	if !ok {
		return nil, false
	}
	s.i = end + 1
	return out, true
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

// strList reads an array of strings (null gives nil) into dst[:0], or a new slice when dst is nil.
func (s *scanner) strList(dst []string) ([]string, bool) {
	s.ws()
	if s.lit("null") {
		return nil, true
	}
	if !s.byte('[') {
		return nil, s.skip(0)
	}
	out := dst[:0]
	if out == nil {
		out = []string{}
	}
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

// strMap reads an object of string values, in order (null gives nil), into dst[:0], or a new
// slice when dst is nil.
func (s *scanner) strMap(dst []schemas.Var) ([]schemas.Var, bool) {
	s.ws()
	if s.lit("null") {
		return nil, true
	}
	if !s.byte('{') {
		return nil, s.skip(0)
	}
	out := dst[:0]
	if out == nil {
		out = []schemas.Var{}
	}
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

const (
	// internSlots is the number of strings an internCache holds at most; it starts with
	// internFirstSlots and grows (by 4) once it has missed twice as often as it has slots, so that
	// a small item's decoder does not allocate and clear 128 KiB (issue 31: a third of the Go
	// side's allocation per item).
	internSlots      = 1 << 13
	internFirstSlots = 1 << 9
	// internMaxLen is the longest string an internCache keeps; longer ones are allocated.
	internMaxLen = 256
)

// internCache turns byte strings into strings, handing out the same string for equal bytes
// while it is cached: a direct-mapped cache of internSlots recent strings, each slot chosen by a
// hash of the bytes. Its memory is bounded (internSlots strings of at most internMaxLen bytes)
// and a lookup is one hash and one comparison, with no map to grow; a trace's func, file and src
// strings, its local names and its repeated values then share their bytes, and most strings of a
// long trace are never allocated.
type internCache struct {
	seed   maphash.Seed
	slots  []string
	misses int
}

// get returns b as a string.
func (c *internCache) get(b []byte) string {
	if len(b) > internMaxLen {
		return string(b)
	}
	if len(b) == 0 {
		return ""
	}
	if c.slots == nil {
		c.seed = maphash.MakeSeed()
		c.slots = make([]string, internFirstSlots)
	}
	slot := &c.slots[maphash.Bytes(c.seed, b)&uint64(len(c.slots)-1)]
	if *slot == string(b) {
		return *slot
	}
	v := string(b)
	*slot = v
	if c.misses++; c.misses > 2*len(c.slots) && len(c.slots) < internSlots {
		c.grow()
	}
	return v
}

// grow makes the cache 4 times larger (at most internSlots), keeping what it holds.
func (c *internCache) grow() {
	slots := make([]string, min(4*len(c.slots), internSlots))
	for _, v := range c.slots {
		if v != "" {
			slots[maphash.String(c.seed, v)&uint64(len(slots)-1)] = v
		}
	}
	c.slots, c.misses = slots, 0
}
