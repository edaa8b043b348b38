package debugger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ndtrace/ndtrace/internal/jsonmembers"

	"github.com/ndtrace/ndtrace/schemas"
)

// KeyframeEvery bounds the work of materialising one event's locals: every frame stores its full
// locals at least once every KeyframeEvery of its events, and the changes in between.
const KeyframeEvery = 16

// Trace is a compact, read-only log of a trace's events. Every string (function, file, source
// line, variable names and values) is interned once, and each frame's locals are stored as the
// changes since the frame's previous event, with the full locals at the frame's first event, at
// every change of its variable names and at least every KeyframeEvery events. An event's locals
// are materialised only when asked for (Locals, Event): a tree over a Trace holds no locals map
// per event. A Trace of n events with c changed values takes about 52n + 8c bytes plus its
// distinct strings.
//
// Build one with NewTrace or a TraceBuilder; it marshals to compact JSON (the pipeline's stored
// chunks) and back.
type Trace struct {
	strs  []string
	evs   []traceEvent
	pairs []uint32 // per event from evs[i].pairs: (name, value) string pairs if full, else (position, value)
}

// traceEvent is one event of a Trace: string fields as indices into strs.
type traceEvent struct {
	kind, fn, file, src, value, exc uint32
	frame, lineno, depth            int32
	prev                            int32 // the same frame's previous event, -1 for none
	pairs, npairs                   uint32
	flags                           uint8
}

// Event flags.
const (
	flagFull      = 1 << iota // pairs are the full locals
	flagValue                 // value is set
	flagUnwind                // Unwind
	flagNilLocals             // Locals was nil
)

// NewTrace compacts events into a Trace.
func NewTrace(events []schemas.Event) *Trace {
	b := NewTraceBuilder()
	for i := range events {
		b.Add(&events[i])
	}
	return b.Trace()
}

// TraceBuilder builds a Trace one event at a time, so that a trace being read never needs all its
// events decoded at once.
type TraceBuilder struct {
	t      *Trace
	intern map[string]uint32
	frames map[int]*builderFrame
}

// builderFrame is what a TraceBuilder knows of a frame: its last event and current locals.
type builderFrame struct {
	last  int32
	since int // events since the last full locals
	names []uint32
	vals  []uint32
}

// NewTraceBuilder returns an empty builder.
func NewTraceBuilder() *TraceBuilder {
	t := &Trace{strs: []string{""}}
	return &TraceBuilder{t: t, intern: map[string]uint32{"": 0}, frames: map[int]*builderFrame{}}
}

// str interns s. Interned strings are copies, so that a Trace never keeps alive a larger buffer
// that s may point into.
func (b *TraceBuilder) str(s string) uint32 {
	if i, ok := b.intern[s]; ok {
		return i
	}
	s = strings.Clone(s)
	i := uint32(len(b.t.strs))
	b.t.strs = append(b.t.strs, s)
	b.intern[s] = i
	return i
}

// Add appends one event. ev is not kept.
func (b *TraceBuilder) Add(ev *schemas.Event) {
	t := b.t
	e := traceEvent{kind: b.str(ev.Event), fn: b.str(ev.Func), file: b.str(ev.File), src: b.str(ev.Src),
		exc: b.str(ev.ExcType), frame: int32(ev.Frame), lineno: int32(ev.Lineno), depth: int32(ev.Depth),
		prev: -1, pairs: uint32(len(t.pairs))}
	if ev.Value != nil {
		e.flags |= flagValue
		e.value = b.str(*ev.Value)
	}
	if ev.Unwind {
		e.flags |= flagUnwind
	}
	if ev.Locals == nil {
		e.flags |= flagNilLocals
	}
	f := b.frames[ev.Frame]
	if f == nil {
		f = &builderFrame{last: -1}
		b.frames[ev.Frame] = f
	}
	e.prev = f.last
	same := f.last >= 0 && f.since+1 < KeyframeEvery && len(f.names) == len(ev.Locals)
	for i := 0; same && i < len(ev.Locals); i++ {
		same = t.strs[f.names[i]] == ev.Locals[i].Name
	}
	if same {
		f.since++
		for i, v := range ev.Locals {
			if t.strs[f.vals[i]] != v.Value {
				f.vals[i] = b.str(v.Value)
				t.pairs = append(t.pairs, uint32(i), f.vals[i])
			}
		}
	} else {
		e.flags |= flagFull
		f.since = 0
		f.names, f.vals = f.names[:0], f.vals[:0]
		for _, v := range ev.Locals {
			n, val := b.str(v.Name), b.str(v.Value)
			f.names, f.vals = append(f.names, n), append(f.vals, val)
			t.pairs = append(t.pairs, n, val)
		}
	}
	e.npairs = (uint32(len(t.pairs)) - e.pairs) / 2
	f.last = int32(len(t.evs))
	t.evs = append(t.evs, e)
}

// Trace returns the trace built. The builder must not be used after.
func (b *TraceBuilder) Trace() *Trace {
	t := b.t
	b.t, b.intern, b.frames = nil, nil, nil
	return t
}

// Len is the number of events.
func (t *Trace) Len() int { return len(t.evs) }

// Kind returns event i's type (schemas.EventCall, ...).
func (t *Trace) Kind(i int) string { return t.strs[t.evs[i].kind] }

// Src returns event i's source line.
func (t *Trace) Src(i int) string { return t.strs[t.evs[i].src] }

// Func returns event i's function.
func (t *Trace) Func(i int) string { return t.strs[t.evs[i].fn] }

// File returns event i's file.
func (t *Trace) File(i int) string { return t.strs[t.evs[i].file] }

// Frame returns event i's frame number.
func (t *Trace) Frame(i int) int { return int(t.evs[i].frame) }

// Lineno returns event i's line.
func (t *Trace) Lineno(i int) int { return int(t.evs[i].lineno) }

// Unwind reports event i's Unwind.
func (t *Trace) Unwind(i int) bool { return t.evs[i].flags&flagUnwind != 0 }

// Value returns event i's Value (a fresh pointer), nil if it has none.
func (t *Trace) Value(i int) *string {
	if t.evs[i].flags&flagValue == 0 {
		return nil
	}
	v := t.strs[t.evs[i].value]
	return &v
}

// Locals materialises event i's locals: a new slice, in the frame's order. It costs at most
// KeyframeEvery events' changes.
func (t *Trace) Locals(i int) schemas.Locals {
	e := &t.evs[i]
	if e.flags&flagNilLocals != 0 {
		return nil
	}
	var chain [KeyframeEvery]int32
	n := 0
	j := int32(i)
	for t.evs[j].flags&flagFull == 0 {
		chain[n] = j
		n++
		j = t.evs[j].prev
	}
	full := &t.evs[j]
	out := make(schemas.Locals, full.npairs)
	for k := range out {
		p := t.pairs[full.pairs+2*uint32(k):]
		out[k] = schemas.Var{Name: t.strs[p[0]], Value: t.strs[p[1]]}
	}
	for n--; n >= 0; n-- {
		d := &t.evs[chain[n]]
		for k := uint32(0); k < d.npairs; k++ {
			p := t.pairs[d.pairs+2*k:]
			out[p[0]].Value = t.strs[p[1]]
		}
	}
	return out
}

// Event materialises event i whole.
func (t *Trace) Event(i int) schemas.Event {
	e := &t.evs[i]
	return schemas.Event{Event: t.strs[e.kind], Frame: int(e.frame), Func: t.strs[e.fn], File: t.strs[e.file],
		Lineno: int(e.lineno), Depth: int(e.depth), Src: t.strs[e.src], Locals: t.Locals(i), Value: t.Value(i),
		ExcType: t.strs[e.exc], Unwind: e.flags&flagUnwind != 0}
}

// Events materialises every event (tests, tools; the pipeline never needs them all at once).
func (t *Trace) Events() []schemas.Event {
	out := make([]schemas.Event, t.Len())
	for i := range out {
		out[i] = t.Event(i)
	}
	return out
}

// traceJSON is the stored form of a Trace, the object {"v", "n", "np", "strs", "evs"}: its
// strings, and per event the integers kind, flags, frame, lineno, depth, func, file, src, value,
// exc_type, the number of pairs and the pairs. N and NP, the number of events and of pair
// integers, let a reader allocate each slice once; they are hints (absent in traces written before
// them, checked against what is read). AppendJSON writes it and decodeTraceJSON reads it.
type traceJSON struct {
	V, N, NP int
	Strs     []string
	// Evs is the events' array as a slice of the input, not copied: it is read only while that
	// input is alive (inside DecodeJSON), and it is most of a trace's stored bytes.
	Evs []byte
}

// decodeTraceJSON fills j from the JSON object data starts with, as json.Unmarshal would (members
// in any order, unknown ones ignored, the last of a repeated one kept), except that member names
// match exactly and evs, which must be an array of integers, is not scanned: its extent is up to
// the first ']', which no integer holds, and DecodeJSON reads its integers once. The events are
// most of a trace's bytes; json.Unmarshal would validate and then skip them, two more passes. It
// returns the object's length.
func decodeTraceJSON(data []byte, j *traceJSON) (int, error) {
	return jsonmembers.Walk(data, func(name string, v []byte) (int, error) {
		switch name {
		case "evs":
			end := bytes.IndexByte(v, ']')
			if len(v) == 0 || v[0] != '[' || end < 0 {
				return 0, errors.New("events: want an array of integers")
			}
			j.Evs = v[:end+1]
			return end + 1, nil
		case "v":
			return jsonmembers.Decode(v, &j.V)
		case "n":
			return jsonmembers.Decode(v, &j.N)
		case "np":
			return jsonmembers.Decode(v, &j.NP)
		case "strs":
			strs, n, err := jsonmembers.Strings(v)
			j.Strs = strs
			return n, err
		}
		return jsonmembers.ValueLen(v)
	})
}

// traceFormat is the version of the stored form.
const traceFormat = 1

// MarshalJSON writes t compactly (see traceJSON).
func (t *Trace) MarshalJSON() ([]byte, error) {
	return t.AppendJSON(nil)
}

// AppendJSON appends what MarshalJSON writes to b, so that a caller writing many traces into one
// buffer (a stored chunk of traces) copies each trace's form once.
func (t *Trace) AppendJSON(b []byte) ([]byte, error) {
	size := 64 + len(t.evs)*32 + len(t.pairs)*5
	for _, s := range t.strs {
		size += len(s) + 2 // escapes aside
	}
	return t.encode(slices.Grow(b, size), nil)
}

// WriteJSON writes what MarshalJSON writes to w, a piece at a time: a trace of any size is written
// through a buffer of writeJSONPiece bytes, never whole in memory a second time.
func (t *Trace) WriteJSON(w io.Writer) error {
	b, err := t.encode(make([]byte, 0, 2*writeJSONPiece), func(b []byte) ([]byte, error) {
		if len(b) < writeJSONPiece {
			return b, nil
		}
		_, err := w.Write(b)
		return b[:0], err
	})
	if err == nil {
		_, err = w.Write(b)
	}
	return err
}

// writeJSONPiece is how many bytes WriteJSON gathers before a write.
const writeJSONPiece = 64 << 10

// encode appends the trace's JSON form to b, calling flush (when not nil) after every string and
// event with what has been appended so far, and going on with the buffer flush returns.
func (t *Trace) encode(b []byte, flush func([]byte) ([]byte, error)) ([]byte, error) {
	var err error
	step := func() bool {
		if flush != nil {
			b, err = flush(b)
		}
		return err == nil
	}
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, traceFormat, 10)
	b = append(b, `,"n":`...)
	b = strconv.AppendInt(b, int64(len(t.evs)), 10)
	b = append(b, `,"np":`...)
	b = strconv.AppendInt(b, int64(len(t.pairs)), 10)
	b = append(b, `,"strs":`...)
	if t.strs == nil {
		b = append(b, "null"...) // as json.Marshal writes a nil slice
	} else {
		b = append(b, '[')
	}
	for i, s := range t.strs {
		if i > 0 {
			b = append(b, ',')
		}
		if b = schemas.AppendJSONString(b, s, true); !step() { // as json.Marshal writes it
			return nil, err
		}
	}
	if t.strs != nil {
		b = append(b, ']')
	}
	b = append(b, `,"evs":[`...)
	for i := range t.evs {
		e := &t.evs[i]
		if i > 0 {
			b = append(b, ',')
		}
		for k, v := range [...]int64{int64(e.kind), int64(e.flags), int64(e.frame), int64(e.lineno), int64(e.depth),
			int64(e.fn), int64(e.file), int64(e.src), int64(e.value), int64(e.exc), int64(e.npairs)} {
			if k > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, v, 10)
		}
		for _, p := range t.pairs[e.pairs : e.pairs+2*e.npairs] {
			b = append(b, ',')
			b = strconv.AppendUint(b, uint64(p), 10)
		}
		if !step() {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

// UnmarshalJSON reads what MarshalJSON writes, checking every index.
func (t *Trace) UnmarshalJSON(data []byte) error {
	n, err := t.DecodeJSON(data)
	if err == nil {
		err = jsonmembers.End(data, n)
	}
	return err
}

// DecodeJSON reads the stored trace (what MarshalJSON writes) data starts with, checking every
// index, and returns its length: a caller reading a larger document hands the trace its bytes
// without encoding/json scanning them first.
func (t *Trace) DecodeJSON(data []byte) (int, error) {
	var j traceJSON
	length, err := decodeTraceJSON(data, &j)
	if err != nil {
		return 0, fmt.Errorf("trace: %w", err)
	}
	if j.V != traceFormat {
		return 0, fmt.Errorf("trace: format %d, want %d", j.V, traceFormat)
	}
	out := Trace{strs: j.Strs}
	if len(out.strs) == 0 {
		out.strs = []string{""}
	}
	ns := uint32(len(out.strs))
	bad := errors.New("trace: malformed events")
	ints := intReader{data: j.Evs} // from its '[' to the first ']' (decodeTraceJSON)
	if len(ints.data) < 2 || ints.data[0] != '[' || ints.data[len(ints.data)-1] != ']' {
		return 0, errors.New("trace: events: want an array of integers")
	}
	ints.data = ints.data[1 : len(ints.data)-1]
	// The hints are trusted only as far as the array can hold: 11 integers per event, the pairs
	// among the rest.
	// (Compared by division: a hint near the int range must not overflow into a small product.)
	if ceiling := len(ints.data)/2 + 1; j.N > 0 && j.N <= ceiling/11 && j.NP >= 0 && j.NP <= ceiling-11*j.N {
		out.evs, out.pairs = make([]traceEvent, 0, j.N), make([]uint32, 0, j.NP)
	}
	// Per frame: its last event, its number of names and the events since its last keyframe; the
	// previous event's frame is kept at hand (most events are a frame's next line).
	type frameState struct {
		last  int32
		names uint32
		run   int
	}
	frames := map[int32]*frameState{}
	var cur *frameState
	curFrame := int32(0)
	longChain := false
	var f [11]int64
	for ints.more() {
		for k := range f {
			if f[k], err = ints.next(); err != nil {
				return 0, err
			}
		}
		e := traceEvent{kind: uint32(f[0]), flags: uint8(f[1]), frame: int32(f[2]), lineno: int32(f[3]), depth: int32(f[4]),
			fn: uint32(f[5]), file: uint32(f[6]), src: uint32(f[7]), value: uint32(f[8]), exc: uint32(f[9]),
			npairs: uint32(f[10]), pairs: uint32(len(out.pairs))}
		for _, s := range []int64{f[0], f[5], f[6], f[7], f[8], f[9]} {
			if s < 0 || s >= int64(ns) {
				return 0, bad
			}
		}
		if f[10] < 0 || f[10] > int64(len(ints.data)) {
			return 0, bad
		}
		if cur == nil || e.frame != curFrame {
			if cur = frames[e.frame]; cur == nil {
				cur = &frameState{last: -1}
				frames[e.frame] = cur
			}
			curFrame = e.frame
		}
		e.prev = cur.last
		if e.flags&flagFull == 0 && e.prev < 0 {
			return 0, bad
		}
		for k := 0; k < int(e.npairs); k++ {
			a, err := ints.next()
			if err != nil {
				return 0, err
			}
			v, err := ints.next()
			if err != nil {
				return 0, err
			}
			if a < 0 || v < 0 || v >= int64(ns) || (e.flags&flagFull != 0 && a >= int64(ns)) || (e.flags&flagFull == 0 && a >= int64(cur.names)) {
				return 0, bad
			}
			out.pairs = append(out.pairs, uint32(a), uint32(v))
		}
		if e.flags&flagFull != 0 {
			cur.names, cur.run = e.npairs, 0
		} else if cur.run++; cur.run >= KeyframeEvery {
			longChain = true // a diff chain longer than KeyframeEvery would overflow Locals' chain
		}
		cur.last = int32(len(out.evs))
		out.evs = append(out.evs, e)
	}
	if longChain {
		return 0, bad
	}
	*t = out
	return length, nil
}

// intReader reads the integers of a JSON array's body one at a time.
type intReader struct{ data []byte }

// more reports whether an integer is left.
func (r *intReader) more() bool {
	r.skipSpace()
	return len(r.data) > 0
}

// skipSpace drops the JSON white space at the front.
func (r *intReader) skipSpace() { r.data = trimJSONSpace(r.data) }

// trimJSONSpace returns b without its leading JSON white space.
func trimJSONSpace(b []byte) []byte { return b[jsonmembers.SkipSpace(b, 0):] }

// jsonSpace is JSON's white space (not Unicode's, nor ASCII's \v and \f).
const jsonSpace = " \t\r\n"

// next returns the next integer and skips the comma after it. It reads the digits itself (the
// trace's integers are most of a stored chunk) and falls back to strconv for what it does not
// take (a sign other than minus, an exponent, 19 digits or more) so that errors read the same.
func (r *intReader) next() (int64, error) {
	// What AppendJSON writes: digits, then a comma and the next integer, or the end.
	d := r.data
	i := 0
	if len(d) > 0 && d[0] == '-' {
		i = 1
	}
	var v int64
	k := i
	for ; k < len(d) && k-i < 18 && d[k]-'0' <= 9; k++ {
		v = v*10 + int64(d[k]-'0')
	}
	if digits := k - i; digits > 0 && (digits == 1 || d[i] != '0') &&
		(k == len(d) || (d[k] == ',' && k+1 < len(d) && (d[k+1]-'0' <= 9 || d[k+1] == '-'))) {
		if k < len(d) {
			k++
		}
		r.data = d[k:]
		if i == 1 {
			v = -v
		}
		return v, nil
	}
	return r.spacedNext()
}

// spacedNext is next for integers with white space around them (valid JSON that AppendJSON
// does not write).
func (r *intReader) spacedNext() (int64, error) {
	r.skipSpace()
	d := r.data
	neg := len(d) > 0 && d[0] == '-'
	if neg {
		d = d[1:]
	}
	var v int64
	k := 0
	for ; k < len(d) && k < 18 && d[k] >= '0' && d[k] <= '9'; k++ {
		v = v*10 + int64(d[k]-'0')
	}
	rest := trimJSONSpace(d[k:])
	if k > 0 && (k == 1 || d[0] != '0') && (len(rest) == 0 || rest[0] == ',') {
		if len(rest) > 0 {
			if rest = rest[1:]; len(trimJSONSpace(rest)) == 0 {
				return 0, errors.New("trace: events: a comma ends the array")
			}
		}
		r.data = rest
		if neg {
			v = -v
		}
		return v, nil
	}
	return r.slowNext()
}

// jsonInt is the syntax of a JSON integer.
var jsonInt = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// slowNext is next through strconv, for what next does not read itself.
func (r *intReader) slowNext() (int64, error) {
	i := bytes.IndexByte(r.data, ',')
	tok := r.data
	if i >= 0 {
		tok, r.data = r.data[:i], r.data[i+1:]
	} else {
		r.data = nil
	}
	tok = bytes.Trim(tok, jsonSpace)
	if !jsonInt.Match(tok) || (i >= 0 && len(trimJSONSpace(r.data)) == 0) {
		return 0, fmt.Errorf("trace: events: %.20q is not a JSON integer followed by a comma or the end", tok)
	}
	v, err := strconv.ParseInt(string(tok), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("trace: events: %w", err)
	}
	return v, nil
}
