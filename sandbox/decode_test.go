package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf16"
	"unsafe"

	"github.com/ndtrace/ndtrace/schemas"
)

// testKey is the key of the tests' streams.
var testKey = bytes.Repeat([]byte{0x5a}, 32)

// sealer writes a sealed events stream as the tracer does: event lines are buffered and sealed
// with HMAC-SHA256(key, previous tag || chunk) whenever the buffer passes 64 KiB, and at end.
type sealer struct {
	mac   hash.Hash
	prev  [32]byte
	chunk bytes.Buffer
	out   bytes.Buffer
	// every is the chunk size that triggers a seal (64 KiB unless set).
	every int
	// bounds are the offsets in out where each chunk (its lines and seal) ends.
	bounds []int
}

// newSealer returns a sealer for key.
func newSealer(key []byte) *sealer {
	return &sealer{mac: hmac.New(sha256.New, key), every: 64 << 10}
}

// add appends one line (which must end in "\n") to the current chunk, sealing the chunk once it
// passes the chunk size.
func (s *sealer) add(line string) {
	s.chunk.WriteString(line)
	if s.chunk.Len() >= s.every {
		s.seal()
	}
}

// seal writes the current chunk and its seal line.
func (s *sealer) seal() {
	s.mac.Reset()
	s.mac.Write(s.prev[:])
	s.mac.Write(s.chunk.Bytes())
	copy(s.prev[:], s.mac.Sum(nil))
	s.out.Write(s.chunk.Bytes())
	s.out.WriteString("#" + hex.EncodeToString(s.prev[:]) + "\n")
	s.chunk.Reset()
	s.bounds = append(s.bounds, s.out.Len())
}

// stream returns the sealed chunks followed by the unsealed rest.
func (s *sealer) stream() []byte {
	return append(slices.Clip(s.out.Bytes()), s.chunk.Bytes()...)
}

// sealAll seals lines the tracer's way, the last chunk right after the last line.
func sealAll(key []byte, lines []string) []byte {
	s := newSealer(key)
	for _, l := range lines {
		s.add(l)
	}
	s.seal()
	return s.stream()
}

// chunksOf splits a stream made only of sealed chunks into its chunks.
func chunksOf(t testing.TB, stream []byte) [][]byte {
	var out [][]byte
	var cur []byte
	for len(stream) > 0 {
		i := bytes.IndexByte(stream, '\n')
		if i < 0 {
			t.Fatalf("unterminated line in %q", stream)
		}
		cur = append(cur, stream[:i+1]...)
		if stream[0] == '#' {
			out = append(out, cur)
			cur = nil
		}
		stream = stream[i+1:]
	}
	if cur != nil {
		t.Fatalf("unsealed tail %q", cur)
	}
	return out
}

// ---------------------------------------------------------------- honest traces

// enc quotes s as the tracer's json.encoder.encode_basestring_ascii does.
func enc(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r >= 0x7f:
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// simFrame is a frame of a simulated traced program, with the tracer's diff state.
type simFrame struct {
	ord, depth, lineno int
	fn                 string
	names              []string
	vals               map[string]string
	named              bool              // names were sent once
	sentNames          []string          // the names last sent
	sent               map[string]string // the values last sent
	gen                bool
}

// traceGen simulates a traced program and writes the lines the tracer would.
type traceGen struct {
	rng       *rand.Rand
	lines     []string
	ord       int
	stack     []*simFrame
	suspended []*simFrame
	events    int
	kind      string // call, test or collect
	naive     bool   // every event carries every name and value, as the naive tracer's
	funcsSeen map[string]bool
	nameSeq   int
}

// genOpts shapes a simulated trace.
type genOpts struct {
	seed   int64
	events int
	kind   string
	naive  bool
	// maxLocals bounds the locals of a frame at its call (default 5).
	maxLocals int
	// hot makes most events line events of few frames with few changes (a CruxEval-like loop).
	hot bool
	// status is the end record's status (default ok); none writes no end record.
	status string
}

var simValues = []string{"0", "1", "-7", "3.5", "None", "True", "'abc'", `'a"b'`, `'tab\there'`, "'é'", "'😀'",
	"[1, 2, 3]", "{'k': [1, 2]}", "<Foo object at 0x1>", "''", "b'\\x00'", "(1,)", "set()"}

// value returns a rendered value, as the tracer would write it.
func (g *traceGen) value() string {
	if g.rng.Intn(20) == 0 {
		return "'" + strings.Repeat("x", g.rng.Intn(300)) + "'"
	}
	if g.rng.Intn(3) == 0 {
		return strconv.Itoa(g.rng.Intn(1000))
	}
	return simValues[g.rng.Intn(len(simValues))]
}

// newName returns a local name, fresh more often than not.
func (g *traceGen) newName() string {
	g.nameSeq++
	names := []string{"x", "i", "s", "result", "n", "items", "k", "v", "ch", "acc", "π"}
	n := names[g.rng.Intn(len(names))]
	if g.rng.Intn(2) == 0 {
		n += strconv.Itoa(g.nameSeq)
	}
	return n
}

// emit writes one event of f, diffed like the tracer's trace method.
func (g *traceGen) emit(f *simFrame, event, tail string) {
	namesPart := ""
	if !f.named || !slices.Equal(f.names, f.sentNames) || g.naive {
		parts := make([]string, len(f.names))
		for i, n := range f.names {
			parts[i] = enc(n)
		}
		namesPart = `,"names":[` + strings.Join(parts, ",") + "]"
		for k := range f.sent {
			if !slices.Contains(f.names, k) {
				delete(f.sent, k)
			}
		}
		f.named, f.sentNames = true, slices.Clone(f.names)
	}
	var changed []string
	for _, n := range f.names {
		v := f.vals[n]
		if old, ok := f.sent[n]; g.naive || !ok || old != v {
			f.sent[n] = v
			changed = append(changed, enc(n)+":"+enc(v))
		}
	}
	src := "    " + f.fn + " line " + strconv.Itoa(f.lineno)
	if g.rng.Intn(10) == 0 {
		src = "    s = \"a\\tb\" + 'é'"
	}
	g.lines = append(g.lines, fmt.Sprintf(`{"event":%q,"frame":%d,"func":%s,"file":"main.py","lineno":%d,"depth":%d,"src":%s%s,"locals":{%s%s`,
		event, f.ord, enc(f.fn), f.lineno, f.depth, enc(src), namesPart, strings.Join(changed, ","), tail)+"\n")
	g.events++
}

// call enters a new frame, or resumes a suspended generator, with its call event.
func (g *traceGen) call() {
	if len(g.suspended) > 0 && g.rng.Intn(3) == 0 {
		// resume a generator: same ordinal, diffed against its last event
		i := g.rng.Intn(len(g.suspended))
		f := g.suspended[i]
		g.suspended = slices.Delete(g.suspended, i, i+1)
		f.depth = len(g.stack)
		g.stack = append(g.stack, f)
		if g.rng.Intn(2) == 0 && len(f.names) > 0 {
			f.vals[f.names[g.rng.Intn(len(f.names))]] = g.value()
		}
		g.emit(f, "call", "}}")
		return
	}
	g.ord++
	fns := []string{"f", "g", "Cls.meth", "f.<locals>.h", "<listcomp>", "<genexpr>", "<lambda>", "gen"}
	f := &simFrame{ord: g.ord, depth: len(g.stack), fn: fns[g.rng.Intn(len(fns))], vals: map[string]string{},
		sent: map[string]string{}, lineno: 1 + g.rng.Intn(50)}
	f.gen = f.fn == "gen" || f.fn == "<genexpr>"
	maxLocals := 5
	for n := g.rng.Intn(maxLocals + 1); n > 0; n-- {
		name := g.newName()
		if _, dup := f.vals[name]; dup {
			continue
		}
		f.names = append(f.names, name)
		f.vals[name] = g.value()
	}
	if g.kind == "test" && !g.funcsSeen[f.fn] {
		g.funcsSeen[f.fn] = true
		g.lines = append(g.lines, fmt.Sprintf(`{"event":"function","file":"/r/m.py","qualname":%s,"first":%d,"last":%d,"source":%s}`,
			enc(f.fn), f.lineno, f.lineno+3, enc("def "+f.fn+"():\n    pass"))+"\n")
	}
	g.stack = append(g.stack, f)
	g.emit(f, "call", "}}")
}

// line changes the top frame's locals (values, new names, deleted names, order) and writes a
// line event.
func (g *traceGen) line() {
	f := g.stack[len(g.stack)-1]
	f.lineno++
	r := g.rng.Intn(100)
	switch {
	case r < 40 && len(f.names) > 0:
		f.vals[f.names[g.rng.Intn(len(f.names))]] = g.value()
	case r < 50 && len(f.names) > 1:
		f.vals[f.names[0]] = g.value()
		f.vals[f.names[len(f.names)-1]] = g.value()
	case r < 60:
		name := g.newName()
		if _, dup := f.vals[name]; !dup {
			f.names = append(f.names, name)
		}
		f.vals[name] = g.value()
	case r < 63 && len(f.names) > 0:
		i := g.rng.Intn(len(f.names))
		delete(f.vals, f.names[i])
		f.names = slices.Delete(f.names, i, i+1)
	case r < 65 && len(f.names) > 1:
		n := f.names[0]
		f.names = append(f.names[1:], n)
	case r < 70 && len(f.names) > 0:
		n := f.names[g.rng.Intn(len(f.names))]
		f.vals[n] = f.vals[n] // assigned the same value: no diff
	}
	g.emit(f, "line", "}}")
}

// ret leaves the top frame with a return event; a generator may be suspended, to resume later.
func (g *traceGen) ret(unwind bool) {
	f := g.stack[len(g.stack)-1]
	g.stack = g.stack[:len(g.stack)-1]
	if unwind {
		g.emit(f, "return", `},"value":"None","unwind":true}`)
		return
	}
	g.emit(f, "return", `},"value":`+enc(g.value())+"}")
	if f.gen && g.rng.Intn(4) != 0 {
		g.suspended = append(g.suspended, f) // a yield: the generator comes back later
	}
}

// exception raises in the top frame: exception events up the stack until a frame handles it,
// each frame left on the way with an unwinding return.
func (g *traceGen) exception() {
	exc := []string{"ValueError", "KeyError", "ZeroDivisionError", "StopIteration"}[g.rng.Intn(4)]
	for len(g.stack) > 0 {
		f := g.stack[len(g.stack)-1]
		g.emit(f, "exception", `},"value":`+enc(exc+"('x')")+`,"exc_type":`+enc(exc)+"}")
		if g.rng.Intn(2) == 0 {
			return // handled here
		}
		g.ret(true)
	}
}

// genTrace returns the lines of a simulated trace, each ending in "\n".
func genTrace(o genOpts) []string {
	g := &traceGen{rng: rand.New(rand.NewSource(o.seed)), kind: o.kind, naive: o.naive, funcsSeen: map[string]bool{}}
	if g.kind == "" {
		g.kind = "call"
	}
	if g.kind == "call" {
		g.lines = append(g.lines, `{"event":"blocks","file":"main.py","blocks":[[1,5],[7,12],[0,3],[9,8]]}`+"\n")
	}
	for g.events < o.events {
		if len(g.stack) == 0 {
			g.call()
			continue
		}
		r := g.rng.Intn(100)
		if o.hot {
			r = 20 + g.rng.Intn(80)
			if g.rng.Intn(50) == 0 {
				r = g.rng.Intn(20)
			}
		}
		switch {
		case r < 8 && len(g.stack) < 12:
			g.call()
		case r < 14:
			g.ret(false)
		case r < 16:
			g.exception()
		default:
			g.line()
		}
	}
	for len(g.stack) > 0 {
		g.ret(false)
	}
	switch g.kind {
	case "test":
		g.lines = append(g.lines, `{"event":"test","runner":"pytest","outcome":"failed","missing_module":"","when":"call","exc_type":"AssertionError","exc_message":"assert 1 == 2"}`+"\n")
	case "collect":
		g.lines = append(g.lines, `{"event":"collection","runner":"pytest","tests":["t.py::a","t.py::b"],"errors":[],"missing_module":""}`+"\n")
	}
	switch o.status {
	case "none":
	case "", "ok":
		g.lines = append(g.lines, fmt.Sprintf(`{"event":"end","status":"ok","value":"6","events":%d}`, g.events)+"\n")
	default:
		g.lines = append(g.lines, fmt.Sprintf(`{"event":"end","status":%q,"value":"ValueError('x')","exc_type":"ValueError","exc_message":"x","events":%d}`, o.status, g.events)+"\n")
	}
	return g.lines
}

// ---------------------------------------------------------------- the original decoder

// legacyDecoder is the decoder this file replaces (traceDecoder as of the sealed-stream change),
// kept verbatim as the reference for honest traces and the baseline of the benchmarks.
type legacyDecoder struct {
	events    []schemas.Event
	blocks    []schemas.Block
	functions []schemas.FuncSource
	funcSeen  map[[3]string]bool
	test      *wireEvent
	collect   *wireEvent
	frames    map[int]*legacyFrame
	end       *endRecord
	bytes     int64
}

// legacyFrame is frameState.
type legacyFrame struct {
	names  []string
	locals schemas.Locals
}

// newLegacyDecoder is newTraceDecoder.
func newLegacyDecoder() *legacyDecoder {
	return &legacyDecoder{frames: map[int]*legacyFrame{}, funcSeen: map[[3]string]bool{}}
}

var errLegacyTooLarge = errors.New("trace exceeded its byte limit")

// read is traceDecoder.read.
func (d *legacyDecoder) read(r io.Reader, maxBytes int64) error {
	br := bufio.NewReaderSize(r, 256<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			full := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				full = append(full, line...)
				if int64(len(full))+d.bytes > maxBytes {
					break
				}
			}
			line = full
		}
		d.bytes += int64(len(line))
		if d.bytes > maxBytes {
			_, _ = io.Copy(io.Discard, br)
			return errLegacyTooLarge
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			d.decode(line)
		}
		if err != nil {
			return nil
		}
	}
}

// decode is traceDecoder.decode.
func (d *legacyDecoder) decode(line []byte) {
	if d.end != nil {
		return
	}
	w, err := parseWire(line)
	if err != nil {
		return
	}
	switch w.Event {
	case "blocks":
		for _, b := range w.Blocks {
			if b[0] > 0 && b[1] >= b[0] {
				d.blocks = append(d.blocks, schemas.Block{File: w.File, Start: b[0], End: b[1]})
			}
		}
		return
	case "function":
		key := [3]string{w.File, strconv.Itoa(w.First), strconv.Itoa(w.Last)}
		if w.First > 0 && w.Last >= w.First && !d.funcSeen[key] {
			d.funcSeen[key] = true
			d.functions = append(d.functions, schemas.FuncSource{File: w.File, QualName: w.QualName,
				FirstLine: w.First, LastLine: w.Last, Source: w.Source})
		}
		return
	case "test":
		if d.test == nil {
			d.test = &w
		}
		return
	case "collection":
		if d.collect == nil {
			d.collect = &w
		}
		return
	case "end":
		e := &endRecord{status: schemas.Status(w.Status), excType: w.ExcType, excMessage: w.ExcMessage}
		if w.Value != nil {
			e.value = *w.Value
		}
		d.end = e
		return
	case schemas.EventCall, schemas.EventLine, schemas.EventReturn, schemas.EventException:
	default:
		return
	}
	st := d.frames[w.Frame]
	if st == nil {
		st = &legacyFrame{}
		d.frames[w.Frame] = st
	}
	if w.HasNames || len(w.Locals) > 0 {
		st.apply(w)
	}
	d.events = append(d.events, schemas.Event{Event: w.Event, Frame: w.Frame, Func: w.Func, File: w.File,
		Lineno: w.Lineno, Depth: w.Depth, Src: w.Src, Locals: st.locals, Value: w.Value, ExcType: w.ExcType,
		Unwind: w.Unwind})
}

// apply is frameState.apply.
func (st *legacyFrame) apply(w wireEvent) {
	if w.HasNames {
		st.names = w.Names
	}
	next := make(schemas.Locals, 0, len(st.names))
	for _, n := range st.names {
		v, ok := legacyLookup(w.Locals, n)
		if !ok {
			v, ok = st.locals.Get(n)
		}
		if ok {
			next = append(next, schemas.Var{Name: n, Value: v})
		}
	}
	st.locals = next
}

// legacyLookup is lookup.
func legacyLookup(diff []schemas.Var, name string) (string, bool) {
	for i := len(diff) - 1; i >= 0; i-- {
		if diff[i].Name == name {
			return diff[i].Value, true
		}
	}
	return "", false
}

// ---------------------------------------------------------------- helpers

// bigLimits lift every cap the honest tests could meet.
var bigLimits = decodeLimits{MaxBytes: 1 << 40, MaxEvents: 1 << 30, MaxNames: 1 << 30, MaxCells: 1 << 40, MaxPending: 1 << 30}

// decodeStream decodes a whole in-memory stream.
func decodeStream(stream []byte, lim decodeLimits) (*decoder, decodeOutcome, string) {
	d := newDecoder(testKey, lim)
	o, why := d.read(context.Background(), bytes.NewReader(stream))
	return d, o, why
}

// legacyDecode decodes a stream with the original decoder (which skips seal lines as lines that
// do not parse).
func legacyDecode(stream []byte) *legacyDecoder {
	d := newLegacyDecoder()
	_ = d.read(bytes.NewReader(stream), 1<<40)
	return d
}

// sameSlice reports whether two Locals are the same slice (same array, same length).
func sameSlice(a, b schemas.Locals) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	return len(a) == 0 || unsafe.SliceData(a) == unsafe.SliceData(b)
}

// sharing describes which events share their frame's previous Locals slice.
func sharing(events []schemas.Event) []bool {
	last := map[int]int{}
	out := make([]bool, len(events))
	for i, e := range events {
		if j, ok := last[e.Frame]; ok {
			out[i] = sameSlice(e.Locals, events[j].Locals)
		}
		last[e.Frame] = i
	}
	return out
}

// checkSame fails unless the new decoder decoded exactly what the legacy one did.
func checkSame(t *testing.T, old *legacyDecoder, d *decoder) {
	t.Helper()
	if len(old.events) != len(d.events) {
		t.Fatalf("%d events, the legacy decoder has %d", len(d.events), len(old.events))
	}
	for i := range old.events {
		if !reflect.DeepEqual(old.events[i], d.events[i]) {
			t.Fatalf("event %d:\n got %+v\nwant %+v", i, d.events[i], old.events[i])
		}
	}
	if !slices.Equal(sharing(old.events), sharing(d.events)) {
		t.Errorf("Locals sharing differs from the legacy decoder's")
	}
	if !reflect.DeepEqual(old.blocks, d.blocks) || !reflect.DeepEqual(old.functions, d.functions) {
		t.Errorf("blocks %v functions %v, want %v %v", d.blocks, d.functions, old.blocks, old.functions)
	}
	if !reflect.DeepEqual(old.test, d.test) || !reflect.DeepEqual(old.collect, d.collect) || !reflect.DeepEqual(old.end, d.end) {
		t.Errorf("records test %+v collect %+v end %+v, want %+v %+v %+v", d.test, d.collect, d.end, old.test, old.collect, old.end)
	}
}

// cellsOf is the sum of len(Locals) of events.
func cellsOf(events []schemas.Event) int64 {
	var n int64
	for _, e := range events {
		n += int64(len(e.Locals))
	}
	return n
}

// ---------------------------------------------------------------- tests

// TestDecodeHonestSameAsLegacy decodes simulated honest traces of every kind with both decoders.
func TestDecodeHonestSameAsLegacy(t *testing.T) {
	var cases []genOpts
	for seed := int64(1); seed <= 40; seed++ {
		o := genOpts{seed: seed, events: []int{0, 1, 5, 50, 400, 3000}[seed%6]}
		o.kind = []string{"call", "test", "collect"}[seed%3]
		o.naive = seed%7 == 0
		o.hot = seed%5 == 0
		o.status = []string{"ok", "exception", "event_limit", "ok", "none"}[seed%5]
		cases = append(cases, o)
	}
	cases = append(cases, genOpts{seed: 99, events: 60000}, genOpts{seed: 100, events: 20000, naive: true, kind: "test"})
	for _, o := range cases {
		t.Run(fmt.Sprintf("seed%d-%s-%d", o.seed, o.kind, o.events), func(t *testing.T) {
			lines := genTrace(o)
			stream := sealAll(testKey, lines)
			d, outcome, why := decodeStream(stream, bigLimits)
			if outcome != outcomeOK {
				t.Fatalf("outcome %v: %s", outcome, why)
			}
			old := legacyDecode(stream)
			checkSame(t, old, d)
			if len(d.events) < o.events {
				t.Fatalf("%d events decoded, %d generated", len(d.events), o.events)
			}
			if o.status != "none" && d.end == nil {
				t.Errorf("no end record")
			}
			if d.cells != cellsOf(d.events) {
				t.Errorf("cells %d, the events hold %d", d.cells, cellsOf(d.events))
			}
			if d.bytes != int64(len(stream)) {
				t.Errorf("bytes %d, stream %d", d.bytes, len(stream))
			}
			// The same stream cut into small reads decodes the same.
			d2 := newDecoder(testKey, bigLimits)
			if o, why := d2.read(context.Background(), &chunkyReader{b: stream, rng: rand.New(rand.NewSource(o.seed))}); o != outcomeOK {
				t.Fatalf("chunky: %v %s", o, why)
			}
			checkSame(t, old, d2)
		})
	}
}

// chunkyReader returns its bytes in reads of random small sizes.
type chunkyReader struct {
	b   []byte
	rng *rand.Rand
}

// Read returns 1 to 200 bytes, or now and then all it has.
func (r *chunkyReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.b), 1+r.rng.Intn(200))
	if r.rng.Intn(10) == 0 {
		n = min(len(p), len(r.b))
	}
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

// TestDecodeLocalsSemantics covers the rebuild rules on hand-written traces, including what the
// tracer never writes (duplicate names, names without values, diff keys outside the names,
// repeated diff keys, long lists that take the map paths), always against the legacy decoder.
func TestDecodeLocalsSemantics(t *testing.T) {
	long := func(prefix string, n int) string {
		var p []string
		for i := 0; i < n; i++ {
			p = append(p, fmt.Sprintf(`"%s%d"`, prefix, i))
		}
		return strings.Join(p, ",")
	}
	longDiff := func(prefix string, n int, val string) string {
		var p []string
		for i := 0; i < n; i++ {
			p = append(p, fmt.Sprintf(`"%s%d":"%s%d"`, prefix, i, val, i))
		}
		return strings.Join(p, ",")
	}
	cases := map[string][]string{
		"basic": {
			`{"event":"call","frame":1,"func":"f","lineno":1,"names":["a","b"],"locals":{"a":"1","b":"2"}}`,
			`{"event":"line","frame":1,"func":"f","lineno":2,"locals":{}}`,
			`{"event":"line","frame":1,"func":"f","lineno":3,"names":["a","b","c"],"locals":{"c":"3"}}`,
			`{"event":"line","frame":1,"func":"f","lineno":4,"names":["a","c"],"locals":{"a":"9"}}`,
			`{not json, but sealed}`,
			`{"event":"end","status":"ok","value":"9"}`,
			`{"event":"line","frame":1,"lineno":5,"locals":{"a":"after end, same chunk"}}`,
		},
		"odd": {
			`{"event":"line","frame":1,"locals":{"a":"1"}}`,
			`{"event":"line","frame":1}`,
			`{"event":"line","frame":2,"names":[],"locals":{}}`,
			`{"event":"line","frame":3,"names":["a","a","b"],"locals":{"a":"1","a":"2","zz":"0"}}`,
			`{"event":"line","frame":3,"locals":{"a":"3"}}`,
			`{"event":"line","frame":3,"locals":{"b":"4","b":"5"}}`,
			`{"event":"line","frame":3,"names":["b","a","c"],"locals":{"c":"6"}}`,
			`{"event":"line","frame":3,"names":["x","y"]}`,
			`{"event":"line","frame":3,"locals":{"y":"7"}}`,
			`{"event":"line","frame":3,"locals":{"x":"8"}}`,
			`{"event":"line","frame":3,"names":null,"locals":null}`,
			`{"event":"return","frame":3,"locals":{},"value":"1","unwind":true}`,
			`{"event":"exception","frame":3,"locals":{"x":"9"},"value":"E()","exc_type":"E"}`,
			`{"event":"weird","frame":3,"locals":{"x":"10"}}`,
			`{"event":"line","frame":-5,"names":["q"],"locals":{"q":"1"}}`,
		},
		"long": {
			`{"event":"call","frame":1,"names":[` + long("v", 50) + `],"locals":{` + longDiff("v", 50, "x") + `}}`,
			`{"event":"line","frame":1,"locals":{"v3":"a","v40":"b","nope":"c","v3":"d"}}`,
			`{"event":"line","frame":1,"locals":{` + longDiff("v", 30, "y") + `,"v1":"last"}}`,
			`{"event":"line","frame":1,"names":[` + long("v", 60) + `],"locals":{"v55":"new"}}`,
			`{"event":"line","frame":1,"locals":{"v56":"new"}}`,
			`{"event":"line","frame":1,"locals":{` + longDiff("v", 60, "z") + `}}`,
			`{"event":"line","frame":1,"locals":{"v59":"1"}}`,
			`{"event":"line","frame":1,"names":[` + long("w", 20) + "," + long("v", 20) + `]}`,
			`{"event":"line","frame":1,"locals":{"w3":"3"}}`,
			`{"event":"line","frame":1,"locals":{` + longDiff("w", 20, "q") + `}}`,
			`{"event":"line","frame":2,"names":[` + long("d", 20) + "," + long("d", 20) + `],"locals":{` + longDiff("d", 20, "d") + `}}`,
			`{"event":"line","frame":2,"locals":{"d7":"changed"}}`,
			`{"event":"line","frame":2,"locals":{` + longDiff("d", 15, "e") + `}}`,
			`{"event":"line","frame":2,"names":[` + long("d", 20) + `],"locals":{"d1":"f"}}`,
			`{"event":"line","frame":2,"locals":{"d2":"g"}}`,
			`{"event":"line","frame":4,"names":[` + long("p", 30) + `],"locals":{"p1":"only one"}}`,
			`{"event":"line","frame":4,"locals":{"p2":"two"}}`,
			`{"event":"line","frame":4,"locals":{` + longDiff("p", 12, "r") + `}}`,
			`{"event":"line","frame":4,"names":[` + long("p", 31) + `],"locals":{}}`,
		},
	}
	for name, lines := range cases {
		t.Run(name, func(t *testing.T) {
			for i := range lines {
				lines[i] += "\n"
			}
			stream := sealAll(testKey, lines)
			d, o, why := decodeStream(stream, bigLimits)
			if o != outcomeOK {
				t.Fatalf("%v: %s", o, why)
			}
			checkSame(t, legacyDecode(stream), d)
		})
	}
	// The legacy decoder's own test, on the new one.
	d, _, _ := decodeStream(sealAll(testKey, cases["basic"]), bigLimits)
	want := [][]schemas.Var{
		{{Name: "a", Value: "1"}, {Name: "b", Value: "2"}},
		{{Name: "a", Value: "1"}, {Name: "b", Value: "2"}},
		{{Name: "a", Value: "1"}, {Name: "b", Value: "2"}, {Name: "c", Value: "3"}},
		{{Name: "a", Value: "9"}, {Name: "c", Value: "3"}},
	}
	if len(d.events) != len(want) || d.end == nil || d.end.value != "9" {
		t.Fatalf("%d events, end %+v", len(d.events), d.end)
	}
	for i, w := range want {
		if !reflect.DeepEqual([]schemas.Var(d.events[i].Locals), w) {
			t.Errorf("event %d locals %v, want %v", i, d.events[i].Locals, w)
		}
	}
}

// honestChunks returns a sealed honest trace of several chunks, with its lines.
func honestChunks(t *testing.T, status string) ([]byte, *sealer) {
	lines := genTrace(genOpts{seed: 7, events: 3000, status: status})
	s := newSealer(testKey)
	s.every = 16 << 10
	for _, l := range lines {
		s.add(l)
	}
	s.seal()
	if len(s.bounds) < 5 {
		t.Fatalf("only %d chunks", len(s.bounds))
	}
	return s.stream(), s
}

// TestDecodeTampering: whatever the traced code writes to the events descriptor makes the item
// tampered, and what was sealed before still decodes.
func TestDecodeTampering(t *testing.T) {
	stream, s := honestChunks(t, "ok")
	chunks := chunksOf(t, stream)
	join := func(cs ...[]byte) []byte { return bytes.Join(cs, nil) }
	// prefix is what the first k chunks decode to.
	prefix := func(k int) *legacyDecoder { return legacyDecode(stream[:s.bounds[k-1]]) }
	forged := `{"event":"end","status":"ok","value":"42"}` + "\n"
	second := chunks[1]
	insideSecond := join(second[:bytes.IndexByte(second, '\n')+1], []byte(forged), second[bytes.IndexByte(second, '\n')+1:])
	otherKey := newSealer(bytes.Repeat([]byte{1}, 32))
	otherKey.add(forged)
	otherKey.seal()
	// a chunk sealed with the right key but out of the chain: as if it came first
	restarted := newSealer(testKey)
	restarted.add(forged)
	restarted.seal()
	noEnd := join(chunks[:len(chunks)-1]...)
	afterEnd := newSealer(testKey)
	afterEnd.prev = s.prev // continues the chain: a genuine seal, but after the end record
	afterEnd.add(`{"event":"line","frame":1,"locals":{}}` + "\n")
	afterEnd.seal()
	fakeSeal := "#" + strings.Repeat("0", 64) + "\n"

	cases := []struct {
		name   string
		stream []byte
		keep   int // sealed chunks whose content must be kept
	}{
		{"line inserted in a chunk", join(chunks[0], insideSecond, join(chunks[2:]...)), 1},
		{"forged end in the last chunk", join(noEnd, []byte(forged), chunks[len(chunks)-1]), len(chunks) - 1},
		{"chunk sealed with another key", join(noEnd, otherKey.stream()), len(chunks) - 1},
		{"chunk sealed out of the chain", join(noEnd, restarted.stream()), len(chunks) - 1},
		{"chunks swapped", join(chunks[0], chunks[2], chunks[1], join(chunks[3:]...)), 1},
		{"chunk dropped", join(chunks[0], join(chunks[2:]...)), 1},
		{"chunk replayed", join(chunks[0], chunks[0], join(chunks[1:]...)), 1},
		{"first chunk dropped", join(chunks[1:]...), 0},
		{"sealed chunk after the end", join(stream, afterEnd.stream()[:]), len(chunks)},
		{"unsealed line after the end", join(stream, []byte(`{"event":"line"}`+"\n")), len(chunks)},
		{"cut line after the end", join(stream, []byte(`{"ev`)), len(chunks)},
		{"newline after the end", join(stream, []byte("\n")), len(chunks)},
		{"garbage line", join(chunks[0], []byte("Traceback (most recent call last):\n"), chunks[1]), 1},
		{"garbage line without newline at EOF", join(chunks[0], []byte("Traceback")), 1},
		{"empty line", join(chunks[0], []byte("\n"), chunks[1]), 1},
		{"seal of zeros", join(chunks[0], []byte(fakeSeal)), 1},
		{"upper-case seal", join(chunks[0], []byte(strings.ToUpper(string(chunks[1])))), 1},
		{"seal too short", join(chunks[0], []byte("#abc\n")), 1},
		{"seal too long", join(chunks[0], bytes.TrimSuffix(chunks[1], []byte("\n")), []byte("0\n")), 1},
		{"seal with spaces", join(chunks[0], []byte("# "+strings.Repeat("0", 63)+"\n")), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, o, why := decodeStream(c.stream, bigLimits)
			if o != outcomeTampered {
				t.Fatalf("outcome %v (%s), want tampered", o, why)
			}
			if !strings.Contains(why, "the tracer did not write") {
				t.Errorf("reason %q", why)
			}
			want := newLegacyDecoder()
			if c.keep > 0 {
				want = prefix(c.keep)
			}
			checkSame(t, want, d)
			t.Logf("%s", why)
		})
	}
}

// TestDecodeKilledMidChunk: a run killed mid-chunk leaves an unsealed tail, which is dropped.
func TestDecodeKilledMidChunk(t *testing.T) {
	stream, s := honestChunks(t, "none")
	last := s.bounds[len(s.bounds)-2] // the end of the next-to-last chunk
	rest := stream[last:]
	for _, cut := range []int{0, 1, 10, bytes.IndexByte(rest, '\n'), bytes.IndexByte(rest, '\n') + 1, len(rest) - 66, len(rest) - 30, len(rest) - 1} {
		t.Run(strconv.Itoa(cut), func(t *testing.T) {
			in := stream[:last+cut]
			d, o, why := decodeStream(in, bigLimits)
			if o != outcomeOK {
				t.Fatalf("%v: %s", o, why)
			}
			checkSame(t, legacyDecode(stream[:last]), d)
			if cut > 0 && !strings.Contains(why, "unsealed bytes dropped") {
				t.Errorf("reason %q", why)
			}
		})
	}
	// The complete stream, for reference, holds more.
	d, o, _ := decodeStream(stream, bigLimits)
	if o != outcomeOK || d.end != nil || len(d.events) <= len(legacyDecode(stream[:last]).events) {
		t.Errorf("whole stream: %v, end %v, %d events", o, d.end, len(d.events))
	}
}

// TestDecodeLimits: every cap stops decoding with outcomeLimit (MaxPending with tampered), keeps
// what came before, and a trace just within the caps decodes whole.
func TestDecodeLimits(t *testing.T) {
	ev := func(frame int, extra string) string {
		return fmt.Sprintf(`{"event":"line","frame":%d,"func":"f","lineno":1%s}`, frame, extra) + "\n"
	}
	names := func(n int) string {
		var p, v []string
		for i := 0; i < n; i++ {
			p = append(p, fmt.Sprintf(`"n%d"`, i))
			v = append(v, fmt.Sprintf(`"n%d":"%d"`, i, i))
		}
		return `,"names":[` + strings.Join(p, ",") + `],"locals":{` + strings.Join(v, ",") + "}"
	}
	repeat := func(n int, line string) []string { return slices.Repeat([]string{line}, n) }
	end := `{"event":"end","status":"ok","value":"1"}` + "\n"

	cases := []struct {
		name    string
		lines   []string
		lim     decodeLimits
		outcome decodeOutcome
		reason  string
		events  int
	}{
		{"events within", append(repeat(100, ev(1, "")), end), decodeLimits{MaxEvents: 100}, outcomeOK, "", 100},
		{"events over", append(repeat(101, ev(1, "")), end), decodeLimits{MaxEvents: 100}, outcomeLimit, "trace exceeded 100 events", 100},
		{"names within", []string{ev(1, names(4)), end}, decodeLimits{MaxNames: 4}, outcomeOK, "", 1},
		{"names over", []string{ev(1, ""), ev(2, names(5)), end}, decodeLimits{MaxNames: 4}, outcomeLimit, "5 local names, more than 4", 1},
		{"cells within", append([]string{ev(1, names(10))}, append(repeat(9, ev(1, `,"locals":{"n1":"x"}`)), end)...), decodeLimits{MaxCells: 100}, outcomeOK, "", 10},
		{"cells over", append([]string{ev(1, names(10))}, repeat(10, ev(1, `,"locals":{"n1":"x"}`))...), decodeLimits{MaxCells: 100}, outcomeLimit, "exceeds 100 locals", 10},
		{"cells over unchanged", append([]string{ev(1, names(10))}, repeat(10, ev(1, ""))...), decodeLimits{MaxCells: 100}, outcomeLimit, "exceeds 100 locals", 10},
		{"cells charge names without values", []string{ev(1, `,"names":["a","b","c","d","e","f"]`), ev(1, `,"locals":{"a":"1"}`), ev(1, `,"locals":{"a":"2"}`)}, decodeLimits{MaxCells: 12}, outcomeLimit, "exceeds 12 locals", 2},
		{"bytes over", repeat(2000, ev(1, "")), decodeLimits{MaxBytes: 50_000}, outcomeLimit, "trace exceeded 50000 bytes", -1},
		{"pending over", repeat(2000, ev(1, "")), decodeLimits{MaxPending: 10_000}, outcomeTampered, "more than 10000 bytes without a seal", 0},
		{"line over pending", []string{ev(1, `,"src":"`+strings.Repeat("x", 20_000)+`"`)}, decodeLimits{MaxPending: 10_000}, outcomeTampered, "without a seal", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSealer(testKey)
			s.every = 1 << 40
			if c.name == "bytes over" {
				s.every = 4 << 10
			}
			for _, l := range c.lines {
				s.add(l)
			}
			s.seal()
			d, o, why := decodeStream(s.stream(), c.lim)
			if o != c.outcome || !strings.Contains(why, c.reason) {
				t.Fatalf("outcome %v %q, want %v %q", o, why, c.outcome, c.reason)
			}
			if c.events >= 0 && len(d.events) != c.events {
				t.Errorf("%d events kept, want %d", len(d.events), c.events)
			}
			lim := c.lim.withDefaults()
			if len(d.events) > lim.MaxEvents || d.cells > lim.MaxCells || cellsOf(d.events) > d.cells || int64(cap(d.pend)) > lim.MaxPending {
				t.Errorf("beyond the limits: %d events, %d cells (%d counted), pending cap %d", len(d.events), cellsOf(d.events), d.cells, cap(d.pend))
			}
			if c.name == "bytes over" && (len(d.events) == 0 || len(d.events) >= 2000) {
				t.Errorf("%d events kept", len(d.events))
			}
		})
	}
}

// TestDecodeDefaults checks the defaults of decodeLimits.
func TestDecodeDefaults(t *testing.T) {
	l := decodeLimits{MaxEvents: 1000}.withDefaults()
	if l.MaxNames != 4096 || l.MaxCells != 1<<20 || l.MaxPending != 16<<20 || l.MaxBytes <= DefaultLimits.TraceBytes {
		t.Errorf("defaults %+v", l)
	}
	if l := (decodeLimits{MaxEvents: 100_000}).withDefaults(); l.MaxCells != 3_200_000 {
		t.Errorf("MaxCells %d", l.MaxCells)
	}
}

// blockingReader returns data, then blocks in Read until it is closed.
func blockingReader(data []byte) (*io.PipeReader, *io.PipeWriter) {
	pr, pw := io.Pipe()
	go func() { _, _ = pw.Write(data) }()
	return pr, pw
}

// caughtUpCtx is a context whose Done method, which read calls from its own goroutine each time
// it waits for the next buffer, closes caughtUp once the decoder d holds n events: the test then
// knows that read decoded all it was given and waits for more, without sleeping for it.
type caughtUpCtx struct {
	context.Context
	d        *decoder
	n        int
	caughtUp chan struct{}
	once     sync.Once
}

func newCaughtUpCtx(ctx context.Context, d *decoder, n int) *caughtUpCtx {
	return &caughtUpCtx{Context: ctx, d: d, n: n, caughtUp: make(chan struct{})}
}

// Done is the context's Done, closing caughtUp first once d holds n events.
func (c *caughtUpCtx) Done() <-chan struct{} {
	if len(c.d.events) >= c.n {
		c.once.Do(func() { close(c.caughtUp) })
	}
	return c.Context.Done()
}

// waitCaughtUp waits until read decoded all it was given (a hang detector: read needs
// milliseconds).
func waitCaughtUp(t *testing.T, c *caughtUpCtx) {
	t.Helper()
	select {
	case <-c.caughtUp:
	case <-time.After(time.Minute):
		t.Fatalf("read did not decode the %d events it was given", c.n)
	}
}

// TestDecodeCancel: read returns when the context ends, even while its reader blocks.
func TestDecodeCancel(t *testing.T) {
	stream, s := honestChunks(t, "none")
	pr, pw := blockingReader(stream[:s.bounds[2]])
	defer pw.Close()
	defer pr.Close()
	want := legacyDecode(stream[:s.bounds[2]])
	ctx, cancel := context.WithCancel(context.Background())
	d := newDecoder(testKey, decodeLimits{})
	cctx := newCaughtUpCtx(ctx, d, len(want.events))
	done := make(chan time.Time, 1)
	var o decodeOutcome
	var why string
	go func() {
		o, why = d.read(cctx, pr)
		done <- time.Now()
	}()
	waitCaughtUp(t, cctx) // the three chunks are decoded; read now waits for the blocked Read
	cancelled := time.Now()
	cancel()
	// The reader never returns, so read returning at all is the property; how soon depends on
	// the machine's load (it takes microseconds), so it is logged, not asserted.
	select {
	case at := <-done:
		t.Logf("returned %v after the cancel", at.Sub(cancelled))
	case <-time.After(time.Minute):
		t.Fatal("read did not return after the cancel")
	}
	if o != outcomeCancelled || !strings.Contains(why, "context canceled") {
		t.Errorf("outcome %v %q", o, why)
	}
	checkSame(t, want, d)

	// read's goroutine is still blocked in Read; closing the reader lets it go.
	before := runtime.NumGoroutine()
	pr.Close()
	for deadline := time.Now().Add(time.Minute); runtime.NumGoroutine() >= before; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines before the close, %d after", before, runtime.NumGoroutine())
		}
		time.Sleep(time.Millisecond)
	}

	// A context already done reads nothing.
	d = newDecoder(testKey, decodeLimits{})
	if o, _ := d.read(ctx, bytes.NewReader(stream)); o != outcomeCancelled || len(d.events) != 0 {
		t.Errorf("done context: %v, %d events", o, len(d.events))
	}
}

// lateCtx is a context that is never done, but whose Err turns to context.Canceled once the
// decoder d has decoded an event: it ends between the checks read makes (Err is only called
// from read's own goroutine).
type lateCtx struct {
	context.Context
	d *decoder
}

// Done never closes.
func (c *lateCtx) Done() <-chan struct{} { return nil }

// Err is context.Canceled once the decoder holds an event.
func (c *lateCtx) Err() error {
	if len(c.d.events) > 0 {
		return context.Canceled
	}
	return nil
}

// TestDecodeCancelInChunk: the context is checked while one large sealed chunk is decoded.
func TestDecodeCancelInChunk(t *testing.T) {
	lines := genTrace(genOpts{seed: 3, events: 20000, hot: true})
	s := newSealer(testKey)
	s.every = 1 << 40
	for _, l := range lines {
		s.add(l)
	}
	s.seal()
	d := newDecoder(testKey, bigLimits)
	o, why := d.read(&lateCtx{Context: context.Background(), d: d}, bytes.NewReader(s.stream()))
	if o != outcomeCancelled {
		t.Fatalf("outcome %v %q", o, why)
	}
	if len(d.events) == 0 || len(d.events) >= ctxEveryLines {
		t.Errorf("%d events decoded, want the chunk's first lines only", len(d.events))
	}
}

// TestDecodeCloseUnblocks: closing the reader makes a read blocked in it return, for io.Pipe and
// for an os.Pipe as the sandbox uses.
func TestDecodeCloseUnblocks(t *testing.T) {
	stream, s := honestChunks(t, "none")
	data := stream[:s.bounds[1]]
	check := func(t *testing.T, r io.Reader, closeIt func()) {
		d := newDecoder(testKey, decodeLimits{})
		want := legacyDecode(data)
		ctx := newCaughtUpCtx(context.Background(), d, len(want.events))
		done := make(chan struct{})
		var o decodeOutcome
		var why string
		go func() {
			o, why = d.read(ctx, r)
			close(done)
		}()
		waitCaughtUp(t, ctx) // all of data is decoded; read waits for a Read that blocks
		closeIt()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("read did not return after the close")
		}
		if o != outcomeOK || !strings.Contains(why, "reading stopped") {
			t.Errorf("outcome %v %q", o, why)
		}
		checkSame(t, want, d)
	}
	t.Run("io.Pipe", func(t *testing.T) {
		pr, pw := blockingReader(data)
		defer pw.Close()
		check(t, pr, func() { pr.Close() })
	})
	t.Run("os.Pipe", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		go func() { _, _ = w.Write(data) }()
		check(t, r, func() { r.Close() })
	})
}

// TestDecodeDrain: with Drain, a read stopped by a cap consumes the rest of the stream so the
// writer is not left blocked; without it, read returns at once.
func TestDecodeDrain(t *testing.T) {
	lines := genTrace(genOpts{seed: 5, events: 20000})
	stream := sealAll(testKey, lines)
	for _, drain := range []bool{false, true} {
		t.Run(strconv.FormatBool(drain), func(t *testing.T) {
			pr, pw := io.Pipe()
			wrote := make(chan error, 1)
			go func() {
				_, err := pw.Write(stream)
				pw.Close()
				wrote <- err
			}()
			d := newDecoder(testKey, decodeLimits{MaxEvents: 10, Drain: drain})
			o, _ := d.read(context.Background(), pr)
			if o != outcomeLimit {
				t.Fatalf("outcome %v", o)
			}
			if drain {
				if err := <-wrote; err != nil {
					t.Errorf("writer: %v", err)
				}
			} else {
				pr.Close() // the caller's part of the contract
				if err := <-wrote; err == nil {
					t.Errorf("the writer finished: the stream was drained")
				}
			}
		})
	}
}

// hostileLines is the issue's hostile trace: one frame with many locals, then events that each
// change one of them. The tracer writes exactly this for code that assigns its locals in turn.
func hostileLines(names, events int) []string {
	var p, v []string
	for i := 0; i < names; i++ {
		p = append(p, fmt.Sprintf(`"v%d"`, i))
		v = append(v, fmt.Sprintf(`"v%d":"0"`, i))
	}
	lines := []string{`{"event":"call","frame":1,"func":"f","file":"main.py","lineno":1,"depth":0,"src":"def f():","names":[` +
		strings.Join(p, ",") + `],"locals":{` + strings.Join(v, ",") + "}}\n"}
	for i := 1; i < events; i++ {
		lines = append(lines, fmt.Sprintf(`{"event":"line","frame":1,"func":"f","file":"main.py","lineno":%d,"depth":0,"src":"    v%d += 1","locals":{"v%d":"%d"}}`,
			2+i%names, i%names, i%names, i/names+1)+"\n")
	}
	return append(lines, `{"event":"end","status":"ok","value":"None","events":0}`+"\n")
}

// TestDecodeHostile is the issue's regression test: ~8 MB of events of a frame with 4,000 names
// cost the default limits' worth of work and memory, not tens of seconds and gigabytes.
func TestDecodeHostile(t *testing.T) {
	stream := sealAll(testKey, hostileLines(4000, 100_000))
	t.Logf("input %.1f MB", float64(len(stream))/1e6)
	lim := decodeLimits{MaxBytes: DefaultLimits.TraceBytes * 2, MaxEvents: DefaultLimits.TraceEvents}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	d, o, why := decodeStream(stream, lim)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%v %q in %v, %d events, %d cells, %.1f MB allocated", o, why, elapsed, len(d.events), d.cells, float64(alloc)/1e6)
	if o != outcomeLimit || !strings.Contains(why, "locals") {
		t.Fatalf("outcome %v %q", o, why)
	}
	if max := lim.withDefaults().MaxCells; d.cells > max || cellsOf(d.events) > max {
		t.Errorf("%d cells", d.cells)
	}
	if alloc > 512<<20 {
		t.Errorf("%d bytes allocated", alloc)
	}
	// The cells and allocation bounds above are the property at any speed; this one catches a
	// decoder that is superlinear in time only (the legacy decoder needs about 20 minutes, this one
	// about a second on a loaded 2-core machine), with a margin for any machine.
	if elapsed > 5*time.Minute {
		t.Errorf("took %v", elapsed)
	}

	// With the cells cap lifted, a smaller hostile trace decodes whole and like the legacy one.
	small := sealAll(testKey, hostileLines(2000, 300))
	d, o, why = decodeStream(small, decodeLimits{MaxCells: 1 << 30})
	if o != outcomeOK {
		t.Fatalf("%v %s", o, why)
	}
	checkSame(t, legacyDecode(small), d)

	// 5,000 names are beyond the default MaxNames.
	d, o, why = decodeStream(sealAll(testKey, hostileLines(5000, 10)), decodeLimits{})
	if o != outcomeLimit || !strings.Contains(why, "5000 local names") || len(d.events) != 0 {
		t.Errorf("5000 names: %v %q, %d events", o, why, len(d.events))
	}
}

// TestDecodeLinear checks that decoding cost grows linearly: doubling the hostile events doubles
// the work (counted as allocations and cells, which unlike time do not depend on the machine's
// load).
func TestDecodeLinear(t *testing.T) {
	measure := func(events int) (uint64, int64) {
		stream := sealAll(testKey, hostileLines(1000, events))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		d, o, why := decodeStream(stream, decodeLimits{MaxCells: 1 << 40, MaxEvents: 1 << 30})
		runtime.ReadMemStats(&after)
		if o != outcomeOK {
			t.Fatalf("%v %s", o, why)
		}
		return after.Mallocs - before.Mallocs, d.cells
	}
	m1, c1 := measure(2000)
	m2, c2 := measure(4000)
	t.Logf("2000 events: %d allocs %d cells; 4000 events: %d allocs %d cells", m1, c1, m2, c2)
	if float64(m2) > 2.3*float64(m1) || float64(c2) > 2.1*float64(c1) {
		t.Errorf("not linear")
	}
}

// ---------------------------------------------------------------- fuzzing

// fuzzLimits are small caps, so that the fuzzer meets them.
var fuzzLimits = decodeLimits{MaxBytes: 1 << 20, MaxEvents: 200, MaxNames: 16, MaxCells: 2000, MaxPending: 4096}

// sealMarked turns fuzz data into a stream: lines that start with '{' are event lines and any
// other line marks where a (valid) seal goes; data after the last mark stays unsealed. It also
// returns the sealed event lines.
func sealMarked(data []byte) ([]byte, []byte) {
	s := newSealer(testKey)
	s.every = 1 << 40
	var sealed []byte
	var pending []byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			s.chunk.Write(data) // a cut last line
			break
		}
		line := data[:i+1]
		data = data[i+1:]
		if line[0] == '{' {
			s.add(string(line))
			pending = append(pending, line...)
		} else {
			s.seal()
			sealed = append(sealed, pending...)
			pending = nil
		}
	}
	return s.stream(), sealed
}

// FuzzDecoder feeds the decoder arbitrary streams (mode bit 0 clear) and arbitrary sealed
// content (bit 0 set: see sealMarked), in one read or in small ones (bit 1): it must never panic
// nor exceed its limits, and whatever it accepts sealed must decode as the legacy decoder does.
func FuzzDecoder(f *testing.F) {
	for seed := int64(0); seed < 6; seed++ {
		lines := genTrace(genOpts{seed: seed, events: int(seed) * 7, kind: []string{"call", "test"}[seed%2], naive: seed == 5})
		var b []byte
		for i, l := range lines {
			b = append(b, l...)
			if i%5 == 4 {
				b = append(b, "#\n"...)
			}
		}
		f.Add(append(b, "#\n"...), uint8(1))
		f.Add(sealAll(testKey, lines), uint8(0))
	}
	for _, s := range wireSeeds {
		f.Add([]byte(s+"\n#\n"), uint8(1))
	}
	f.Add([]byte(`{"event":"line","frame":3,"names":["a","a","b"],"locals":{"a":"1","a":"2","zz":"0"}}`+"\n"+
		`{"event":"line","frame":3,"locals":{"b":"4","b":"5"}}`+"\n#\n"), uint8(1))
	f.Add([]byte("{\n#\n\n"), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		stream, sealed := data, []byte(nil)
		if mode%2 == 1 {
			stream, sealed = sealMarked(data)
		}
		d := newDecoder(testKey, fuzzLimits)
		r := io.Reader(bytes.NewReader(stream))
		if mode&2 != 0 {
			r = &chunkyReader{b: stream, rng: rand.New(rand.NewSource(int64(len(data))))}
		}
		o, why := d.read(context.Background(), r)
		if why == "" && o != outcomeOK {
			t.Errorf("outcome %v without a reason", o)
		}
		lim := fuzzLimits.withDefaults()
		if len(d.events) > lim.MaxEvents || d.cells > lim.MaxCells || cellsOf(d.events) > d.cells ||
			int64(cap(d.pend)) > lim.MaxPending || d.bytes > int64(len(stream)) {
			t.Fatalf("beyond the limits: %d events, %d cells (%d counted), pending cap %d, %d bytes",
				len(d.events), cellsOf(d.events), d.cells, cap(d.pend), d.bytes)
		}
		if mode%2 == 1 && o == outcomeOK {
			// Everything sealed decodes as the legacy decoder decodes it.
			old := newLegacyDecoder()
			for len(sealed) > 0 {
				i := bytes.IndexByte(sealed, '\n')
				old.decode(sealed[:i+1])
				sealed = sealed[i+1:]
			}
			checkSame(t, old, d)
		}
	})
}

// ---------------------------------------------------------------- benchmarks

// benchDecode runs one decoder over stream per iteration.
func benchDecode(b *testing.B, stream []byte, old bool, lim decodeLimits, want decodeOutcome) {
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	var events int
	runtime.GC()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		if old {
			d := newLegacyDecoder()
			if err := d.read(bytes.NewReader(stream), 1<<40); err != nil {
				b.Fatal(err)
			}
			events = len(d.events)
			continue
		}
		d := newDecoder(testKey, lim)
		if o, why := d.read(context.Background(), bytes.NewReader(stream)); o != want {
			b.Fatalf("%v %s", o, why)
		}
		events = len(d.events)
	}
	b.ReportMetric(float64(events), "events")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time so far, in nanoseconds: unlike ns/op it
// counts the decoder's goroutines and the garbage collector and not the other processes of a
// busy machine.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkDecodeHostile compares the decoders on the issue's hostile trace: /old and /new-nocap
// decode 3,000 events of a 2,000-name frame whole (/new-nocap with MaxCells lifted), /new with
// the default limits of an item (it stops at MaxCells), /new-issue is the issue's 8 MB input
// (4,000 names, 100k events) with the default limits.
func BenchmarkDecodeHostile(b *testing.B) {
	stream := sealAll(testKey, hostileLines(2000, 3000))
	def := decodeLimits{MaxEvents: DefaultLimits.TraceEvents}
	b.Run("old", func(b *testing.B) { benchDecode(b, stream, true, decodeLimits{}, outcomeOK) })
	b.Run("new", func(b *testing.B) { benchDecode(b, stream, false, def, outcomeLimit) })
	b.Run("new-nocap", func(b *testing.B) {
		benchDecode(b, stream, false, decodeLimits{MaxEvents: def.MaxEvents, MaxCells: 1 << 40}, outcomeOK)
	})
	issue := sealAll(testKey, hostileLines(4000, 100_000))
	b.Run("new-issue", func(b *testing.B) { benchDecode(b, issue, false, def, outcomeLimit) })
}

// BenchmarkDecodeHonest compares the decoders on a CruxEval-like trace: a few small frames, most
// events line events of a loop that change one or two of a handful of locals (/old, /new); on a
// trace of many short calls, generators and exceptions (/mixed-*); and on one small item
// (/small-*).
func BenchmarkDecodeHonest(b *testing.B) {
	stream := sealAll(testKey, genTrace(genOpts{seed: 11, events: 95_000, hot: true}))
	lim := decodeLimits{MaxEvents: DefaultLimits.TraceEvents}
	b.Run("old", func(b *testing.B) { benchDecode(b, stream, true, lim, outcomeOK) })
	b.Run("new", func(b *testing.B) { benchDecode(b, stream, false, lim, outcomeOK) })
	mixed := sealAll(testKey, genTrace(genOpts{seed: 12, events: 95_000}))
	b.Run("mixed-old", func(b *testing.B) { benchDecode(b, mixed, true, lim, outcomeOK) })
	b.Run("mixed-new", func(b *testing.B) { benchDecode(b, mixed, false, lim, outcomeOK) })
	// One small item, as most CruxEval items are: the per-item overhead.
	small := sealAll(testKey, genTrace(genOpts{seed: 13, events: 300, hot: true}))
	b.Run("small-old", func(b *testing.B) { benchDecode(b, small, true, lim, outcomeOK) })
	b.Run("small-new", func(b *testing.B) { benchDecode(b, small, false, lim, outcomeOK) })
}

// TestDecodeConsume: the consume record of a call whose iterator the tracer consumed, and the
// records the tracer never writes (a second one, one that does not start at the next event, an
// end record that took more values than the limit).
func TestDecodeConsume(t *testing.T) {
	call := `{"event":"call","frame":1,"func":"g","file":"main.py","lineno":1,"depth":0,"src":"def g():","names":[],"locals":{}}` + "\n"
	ret := `{"event":"return","frame":1,"func":"g","file":"main.py","lineno":2,"depth":0,"src":"    yield 1","locals":{},"value":"1"}` + "\n"
	consume := func(start, limit int) string {
		return fmt.Sprintf(`{"event":"consume","start":%d,"limit":%d}`+"\n", start, limit)
	}
	end := func(consumed int) string {
		return fmt.Sprintf(`{"event":"end","status":"ok","value":"[1]","consumed":%d,"events":2}`+"\n", consumed)
	}
	tests := []struct {
		name    string
		lines   []string
		outcome decodeOutcome
		want    *schemas.Consume
	}{
		{"honest", []string{consume(0, 8), call, ret, end(1)}, outcomeOK, &schemas.Consume{Start: 0, Limit: 8, Values: 1}},
		{"after the call's events", []string{call, ret, consume(2, 8), call, ret, end(1)}, outcomeOK, &schemas.Consume{Start: 2, Limit: 8, Values: 1}},
		{"no end record", []string{consume(0, 8), call}, outcomeOK, &schemas.Consume{Start: 0, Limit: 8, Values: -1}},
		{"none", []string{call, ret, `{"event":"end","status":"ok","value":"1","events":2}` + "\n"}, outcomeOK, nil},
		{"twice", []string{consume(0, 8), call, ret, consume(2, 8), end(1)}, outcomeTampered, nil},
		{"wrong start", []string{call, consume(0, 8), ret, end(1)}, outcomeTampered, nil},
		{"no limit", []string{consume(0, 0), call, ret, end(1)}, outcomeTampered, nil},
		{"more values than the limit", []string{consume(0, 1), call, ret, end(2)}, outcomeTampered, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, o, why := decodeStream(sealAll(testKey, tc.lines), bigLimits)
			if o != tc.outcome {
				t.Fatalf("outcome %v (%s), want %v", o, why, tc.outcome)
			}
			if o == outcomeOK && !reflect.DeepEqual(d.consume, tc.want) {
				t.Errorf("consume %+v, want %+v", d.consume, tc.want)
			}
		})
	}
}
