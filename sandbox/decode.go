package sandbox

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"

	"github.com/ndtrace/ndtrace/schemas"
)

// The events stream is a sequence of sealed chunks (docs/tracer-protocol.md): zero or more event
// lines, each a JSON object and "\n", then one seal line, '#', 64 lowercase hex digits and "\n".
// The seal is HMAC-SHA256(key, previous tag || the chunk's event lines), the previous tag of the
// first chunk being 32 zero bytes. The key is fresh for every item and known only to Go and the
// tracer, so the traced code, which shares the tracer's process and may write to the events
// descriptor, can neither forge, reorder, replay nor drop sealed chunks: whatever it writes ends
// up inside a chunk whose seal then fails. Only sealed chunks are decoded.

const (
	// sealTagLen is the length of a seal's HMAC-SHA256 tag.
	sealTagLen = sha256.Size
	// sealLineLen is the length of a seal line: '#', the hex tag, '\n'.
	sealLineLen = 1 + 2*sealTagLen + 1
	// readBufSize is the size of one read from the stream; the context is checked between reads.
	readBufSize = 128 << 10
	// smallReadBufs of a stream's buffers, its first, are smallReadBufSize: a small item's whole
	// trace fits, without allocating and clearing 256 KiB for it (issue 31).
	smallReadBufs, smallReadBufSize = 2, 16 << 10
	// readBufs is how many read buffers a stream may have in flight: the reading goroutine keeps
	// draining the pipe into them, up to readBufs*readBufSize bytes ahead of the decoder, so that
	// the tracer is not left waiting on a full pipe while a chunk is decoded. They are allocated
	// as the reader gets ahead, so a small item pays for one or two.
	readBufs = 16
	// ctxEveryLines is how many lines of a sealed chunk are decoded between context checks.
	ctxEveryLines = 1024
	// smallList is the largest names list or diff searched linearly; longer ones use a map.
	smallList = 8
	// keptPendingCap is the largest pending buffer kept for the next chunk once one is decoded;
	// a larger one (a chunk far above the tracer's 64 KiB) is released.
	keptPendingCap = 1 << 20

	defaultMaxNames   = 4096
	defaultMaxPending = 16 << 20
)

// decodeLimits bounds what decoding one item's events stream may cost. A zero field takes a
// default (see withDefaults).
type decodeLimits struct {
	// MaxBytes caps the bytes read from the stream, seals included (the caller passes
	// Limits.TraceBytes plus some slack). Default: DefaultLimits.TraceBytes plus 1/8 and 1 MiB.
	MaxBytes int64
	// MaxEvents caps the call, line, return and exception events kept (the caller passes
	// Limits.TraceEvents; the tracer never writes more). Default: DefaultLimits.TraceEvents.
	MaxEvents int
	// MaxNames caps the length of one "names" list: the local names one frame may declare.
	// Default 4096.
	MaxNames int
	// MaxCells caps the sum over the kept events of len(Locals), the size of the rebuilt trace
	// however much of it is shared. An event that rebuilds its frame's locals is counted at the
	// length of the frame's names list, which is len(Locals) for every trace the tracer writes (it
	// sends a value for every name), so the work of a rebuild is always paid for.
	// Default MaxEvents*32, and at least 1<<20.
	MaxCells int64
	// MaxPending caps the bytes of event lines buffered before their seal arrives. The tracer
	// seals every 64 KiB plus one line, so more than this is tampering; it also bounds one line.
	// Default 16 MiB.
	MaxPending int64
	// Drain makes read, once it stops on a cap or on tampering, read and discard the rest of the
	// stream until EOF (or until the context ends) before it returns, so that a writer is never
	// left blocked on a full pipe. Off by default: the caller kills the item and closes the pipe.
	Drain bool
}

// withDefaults returns l with every zero or negative field set to its default.
func (l decodeLimits) withDefaults() decodeLimits {
	if l.MaxBytes <= 0 {
		tb := DefaultLimits.TraceBytes
		l.MaxBytes = tb + tb/8 + 1<<20
	}
	if l.MaxEvents <= 0 {
		l.MaxEvents = DefaultLimits.TraceEvents
	}
	if l.MaxNames <= 0 {
		l.MaxNames = defaultMaxNames
	}
	if l.MaxCells <= 0 {
		l.MaxCells = max(int64(l.MaxEvents)*32, 1<<20)
	}
	if l.MaxPending <= 0 {
		l.MaxPending = defaultMaxPending
	}
	return l
}

// decodeOutcome says why decoder.read stopped.
type decodeOutcome int

const (
	// outcomeOK: the stream ended (EOF or a read error such as the reader being closed). Events
	// holds every sealed chunk; an unsealed tail, left by a run killed mid-chunk, was dropped.
	outcomeOK decodeOutcome = iota
	// outcomeLimit: a cap of decodeLimits other than MaxPending was reached. The caller kills the
	// item and reports event_limit.
	outcomeLimit
	// outcomeTampered: the stream carried bytes the tracer did not write (a seal that does not
	// verify, a line that is neither an event nor a seal, bytes after the end record's chunk, more
	// than MaxPending bytes without a seal). The caller kills the item and reports it tampered.
	outcomeTampered
	// outcomeCancelled: the context ended first.
	outcomeCancelled
)

// String names the outcome.
func (o decodeOutcome) String() string {
	switch o {
	case outcomeOK:
		return "ok"
	case outcomeLimit:
		return "limit"
	case outcomeTampered:
		return "tampered"
	case outcomeCancelled:
		return "cancelled"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// decoder rebuilds full events from the tracer's sealed, diff-encoded events stream, at a cost
// linear in its input and its output and bounded by its decodeLimits. Its fields hold what was
// decoded from the sealed chunks so far, whatever the outcome of read. A decoder reads one stream.
//
// Use (one item): key is the item's fresh 32-byte random key, also given to the tracer;
//
//	d := newDecoder(key, decodeLimits{MaxBytes: lim.TraceBytes + lim.TraceBytes/8 + 1<<20,
//		MaxEvents: lim.TraceEvents})
//	switch o, why := d.read(ctx, eventsPipe); o {
//	case outcomeLimit:    // kill the item; status event_limit, detail why
//	case outcomeTampered: // kill the item; status tampered, detail why
//	case outcomeCancelled: // the caller gave up: kill the item
//	}
//	eventsPipe.Close() // always, once read has returned (see read)
//
// and then d.events, d.blocks, d.functions, d.test, d.collect, d.end and d.bytes as before.
type decoder struct {
	// events are the call, line, return and exception events. An event at which nothing of its
	// frame's locals changed shares the previous event's Locals slice: never modify one in place.
	events []schemas.Event
	// count is the number of events decoded; sink, when set, gets each one instead of events.
	count   int
	sink    func(*schemas.Event)
	scratch schemas.Event
	// blocks are the top-level statement ranges of a call run's blocks record.
	blocks []schemas.Block
	// functions are the function records of a test run, each block once.
	functions []schemas.FuncSource
	// test is the test record of a test run (the first one), or nil.
	test *wireEvent
	// collect is the collection record of a collect run (the first one), or nil.
	collect *wireEvent
	// consume is a call run's consume record (its call returned an iterator, which the tracer
	// consumed), or nil.
	consume *schemas.Consume
	// end is the end record, or nil when the stream ended without one.
	end *endRecord
	// bytes counts the bytes read from the stream, seals and unsealed ones included.
	bytes int64
	// cells is the sum counted against decodeLimits.MaxCells.
	cells int64

	lim      decodeLimits
	mac      hash.Hash
	prev     [sealTagLen]byte // the previous chunk's tag (zeros before the first)
	sum      [sealTagLen]byte // scratch for the computed tag
	frames   map[int]*frameLocals
	funcSeen map[[3]string]bool // file, first, last of the functions kept

	// Reused from one line to the next.
	parser    wireParser
	w         wireEvent     // the line being decoded (its Names and Locals are scratch)
	lastFrame int           // the frame of the previous event, whose state is lastState
	lastState *frameLocals  // nil before the first event
	arena     []schemas.Var // where the events' locals are carved from (see newLocals)

	// The framing state, across reads.
	pend   []byte // the event lines read since the last seal (the last one possibly unfinished)
	state  lineState
	seal   [sealLineLen]byte // the seal line being read
	sealN  int
	ended  bool  // the chunk holding the end record was sealed: nothing may follow
	chunks int64 // sealed chunks decoded
}

// lineState is where the decoder is in the stream's current line.
type lineState uint8

const (
	atLineStart lineState = iota // before a line's first byte
	inEventLine                  // inside an event line (its bytes go to pend)
	inSealLine                   // inside a seal line (its bytes go to seal)
)

// newDecoder returns a decoder for one item's stream, sealed with key.
func newDecoder(key []byte, lim decodeLimits) *decoder {
	return newSinkDecoder(key, lim, nil)
}

// newSinkDecoder is newDecoder whose events go to sink as they are decoded instead of into
// d.events (see Request.Events); sink nil keeps them.
func newSinkDecoder(key []byte, lim decodeLimits, sink func(*schemas.Event)) *decoder {
	return &decoder{
		lim:      lim.withDefaults(),
		mac:      hmac.New(sha256.New, key),
		frames:   map[int]*frameLocals{},
		funcSeen: map[[3]string]bool{},
		sink:     sink,
	}
}

// read consumes r until EOF, a read error, a cap, tampering or the end of ctx, and returns why it
// stopped with a one-line reason. What was decoded from sealed chunks before is kept in d.
//
// r is read by a goroutine of read's own, readBufSize at a time and up to readBufs reads ahead, so read returns promptly when ctx ends
// even while that goroutine is blocked in r.Read; it then checks ctx between reads and every 1024
// lines. Contract: when read returns on anything but EOF or a read error, the goroutine may still
// be blocked in r.Read; the caller must then close r (os.File.Close or io.PipeReader.Close from
// any goroutine makes the blocked Read return), after which the goroutine exits without touching
// d. Closing r while read runs makes read return outcomeOK, as at EOF (or outcomeCancelled when
// ctx ended too). With decodeLimits.Drain, read keeps reading after a cap or tampering and
// discards the rest until EOF or the end of ctx, then returns that cap or tampering. read is
// called once per decoder.
func (d *decoder) read(ctx context.Context, r io.Reader) (decodeOutcome, string) {
	if ctx.Err() != nil {
		return outcomeCancelled, cancelReason(ctx)
	}
	src := startReader(r)
	defer src.stop()
	for {
		var rr readResult
		select {
		case <-ctx.Done():
			return outcomeCancelled, cancelReason(ctx)
		case rr = <-src.out:
		}
		if ctx.Err() != nil { // both were ready: the context wins
			return outcomeCancelled, cancelReason(ctx)
		}
		if rr.n > 0 {
			b := rr.buf[:rr.n]
			room := d.lim.MaxBytes - d.bytes
			d.bytes += int64(rr.n)
			over := int64(len(b)) > room
			if over {
				b = b[:max(room, 0)]
			}
			o, why := d.feed(ctx, b)
			src.release(rr.buf)
			if o == outcomeOK && over {
				o, why = outcomeLimit, fmt.Sprintf("trace exceeded %d bytes", d.lim.MaxBytes)
			}
			if o != outcomeOK {
				if d.lim.Drain && o != outcomeCancelled && rr.err == nil {
					src.drain(ctx) // the outcome stays the cap or the tampering
				}
				return o, why
			}
		} else {
			src.release(rr.buf)
		}
		if rr.err != nil {
			return d.finish(rr.err)
		}
	}
}

// finish reports the end of the stream.
func (d *decoder) finish(err error) (decodeOutcome, string) {
	why := "the stream ended"
	if !errors.Is(err, io.EOF) {
		why = "reading stopped: " + err.Error()
	}
	if unsealed := len(d.pend) + d.sealN; unsealed > 0 {
		why += fmt.Sprintf("; %d unsealed bytes dropped", unsealed)
		d.pend, d.sealN = nil, 0
	}
	if d.end == nil {
		why += "; no end record"
	}
	return outcomeOK, why
}

// cancelReason is the reason given for outcomeCancelled.
func cancelReason(ctx context.Context) string {
	return "cancelled: " + context.Cause(ctx).Error()
}

// tampered is the reason given for outcomeTampered.
func tampered(what string) (decodeOutcome, string) {
	return outcomeTampered, "the events channel carried bytes the tracer did not write (" + what + ")"
}

// feed takes the next bytes of the stream: event lines go to the pending chunk, a seal line
// verifies it and decodes it.
func (d *decoder) feed(ctx context.Context, b []byte) (decodeOutcome, string) {
	for len(b) > 0 {
		if d.ended {
			return tampered("bytes after the end record's chunk")
		}
		switch d.state {
		case atLineStart:
			switch b[0] {
			case '{':
				d.state = inEventLine
			case '#':
				d.state, d.sealN = inSealLine, 0
			default:
				return tampered("a line that is neither an event nor a seal")
			}
		case inEventLine:
			seg := b
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				seg = b[:i+1]
				d.state = atLineStart
			}
			if int64(len(d.pend))+int64(len(seg)) > d.lim.MaxPending {
				return tampered(fmt.Sprintf("more than %d bytes without a seal", d.lim.MaxPending))
			}
			d.pend = d.grow(d.pend, len(seg))
			d.pend = append(d.pend, seg...)
			b = b[len(seg):]
		case inSealLine:
			c := b[0]
			b = b[1:]
			d.seal[d.sealN] = c
			d.sealN++
			switch {
			case d.sealN == 1:
				// the '#'
			case d.sealN < sealLineLen:
				if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
					return tampered("a malformed seal line")
				}
			default:
				if c != '\n' {
					return tampered("a malformed seal line")
				}
				d.state, d.sealN = atLineStart, 0
				if o, why := d.sealChunk(ctx); o != outcomeOK {
					return o, why
				}
			}
		}
	}
	return outcomeOK, ""
}

// grow makes room for n more bytes in the pending buffer, never beyond MaxPending.
func (d *decoder) grow(p []byte, n int) []byte {
	if len(p)+n <= cap(p) {
		return p
	}
	c := max(2*cap(p), len(p)+n, 4096)
	c = int(min(int64(c), d.lim.MaxPending))
	q := make([]byte, len(p), c)
	copy(q, p)
	return q
}

// sealChunk verifies the seal just read against the pending chunk and, when it holds, decodes
// the chunk.
func (d *decoder) sealChunk(ctx context.Context) (decodeOutcome, string) {
	var tag [sealTagLen]byte
	if _, err := hex.Decode(tag[:], d.seal[1:sealLineLen-1]); err != nil {
		return tampered("a malformed seal line")
	}
	d.mac.Reset()
	d.mac.Write(d.prev[:])
	d.mac.Write(d.pend)
	if !hmac.Equal(d.mac.Sum(d.sum[:0]), tag[:]) {
		return tampered(fmt.Sprintf("the seal of chunk %d does not verify", d.chunks+1))
	}
	d.prev = tag
	d.chunks++
	d.reserve(bytes.Count(d.pend, []byte{'\n'}))
	o, why := d.decodeChunk(ctx, d.pend)
	if cap(d.pend) > keptPendingCap {
		d.pend = nil
	} else {
		d.pend = d.pend[:0]
	}
	if d.end != nil {
		d.ended = true
	}
	return o, why
}

// reserve grows the events' capacity, before a chunk of lines is decoded, to hold as many more
// events as the chunk has lines, doubling it at least and never beyond MaxEvents: so the events
// are copied about once as they grow, rather than the ~25 times of append's 1.25 growth.
func (d *decoder) reserve(lines int) {
	if d.sink != nil {
		return
	}
	n, c := len(d.events), cap(d.events)
	if n+lines <= c || c >= d.lim.MaxEvents {
		return
	}
	c = min(max(2*c, n+lines, 64), d.lim.MaxEvents)
	events := make([]schemas.Event, n, c)
	copy(events, d.events)
	d.events = events
}

// decodeChunk decodes the lines of a sealed chunk, each ending in "\n". Nothing after the end
// record counts.
func (d *decoder) decodeChunk(ctx context.Context, chunk []byte) (decodeOutcome, string) {
	for n := 1; len(chunk) > 0 && d.end == nil; n++ {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			break // cannot happen: a seal line starts after a "\n"
		}
		line := chunk[:i+1]
		chunk = chunk[i+1:]
		if n%ctxEveryLines == 0 && ctx.Err() != nil {
			return outcomeCancelled, cancelReason(ctx)
		}
		if o, why := d.decode(line); o != outcomeOK {
			return o, why
		}
	}
	return outcomeOK, ""
}

// decode applies one sealed line. A line that does not parse is skipped, as are records of
// unknown kinds.
func (d *decoder) decode(line []byte) (decodeOutcome, string) {
	w := &d.w
	if err := d.parser.parse(line, w); err != nil {
		return outcomeOK, ""
	}
	switch w.Event {
	case "blocks":
		for _, b := range w.Blocks {
			if b[0] > 0 && b[1] >= b[0] {
				d.blocks = append(d.blocks, schemas.Block{File: w.File, Start: b[0], End: b[1]})
			}
		}
		return outcomeOK, ""
	case "function":
		key := [3]string{w.File, strconv.Itoa(w.First), strconv.Itoa(w.Last)}
		if w.First > 0 && w.Last >= w.First && !d.funcSeen[key] {
			d.funcSeen[key] = true
			d.functions = append(d.functions, schemas.FuncSource{File: w.File, QualName: w.QualName,
				FirstLine: w.First, LastLine: w.Last, Source: w.Source})
		}
		return outcomeOK, ""
	case "test":
		if d.test == nil {
			t := *w
			t.Names, t.Locals = nil, nil // scratch
			d.test = &t
		}
		return outcomeOK, ""
	case "collection":
		if d.collect == nil {
			c := *w
			c.Names, c.Locals = nil, nil // scratch
			d.collect = &c
		}
		return outcomeOK, ""
	case "consume":
		// Written once, by the tracer, between the call's events and the consumption's: a second
		// one or one that does not start at the next event is not the tracer's.
		if d.consume != nil || w.Start != d.count || w.Limit <= 0 {
			return outcomeTampered, "a consume record the tracer did not write"
		}
		d.consume = &schemas.Consume{Start: w.Start, Limit: w.Limit, Values: -1}
		return outcomeOK, ""
	case "end":
		e := &endRecord{status: schemas.Status(w.Status), excType: w.ExcType, excMessage: w.ExcMessage}
		if e.status == schemas.StatusTampered {
			e.files = w.Files
		}
		if w.Value != nil {
			e.value = *w.Value
		}
		if d.consume != nil && w.HasConsumed {
			if w.Consumed < 0 || w.Consumed > d.consume.Limit {
				return outcomeTampered, "an end record that took more values than the consume record allows"
			}
			d.consume.Values = w.Consumed
		}
		d.end = e
		return outcomeOK, ""
	case schemas.EventCall, schemas.EventLine, schemas.EventReturn, schemas.EventException:
	default:
		return outcomeOK, ""
	}
	if d.count >= d.lim.MaxEvents {
		return outcomeLimit, fmt.Sprintf("trace exceeded %d events", d.lim.MaxEvents)
	}
	if w.HasNames && len(w.Names) > d.lim.MaxNames {
		return outcomeLimit, fmt.Sprintf("a frame declared %d local names, more than %d", len(w.Names), d.lim.MaxNames)
	}
	st := d.lastState
	if st == nil || w.Frame != d.lastFrame {
		st = d.frames[w.Frame]
		if st == nil {
			st = &frameLocals{}
			d.frames[w.Frame] = st
		}
		d.lastFrame, d.lastState = w.Frame, st
	}
	rebuild := w.HasNames || len(w.Locals) > 0
	cost := int64(len(st.locals))
	if rebuild {
		cost = int64(len(st.names))
		if w.HasNames {
			cost = int64(len(w.Names))
		}
	}
	if d.cells+cost > d.lim.MaxCells {
		return outcomeLimit, fmt.Sprintf("decoded trace exceeds %d locals", d.lim.MaxCells)
	}
	d.cells += cost
	if rebuild {
		st.apply(w, d.newLocals)
	}
	ev := schemas.Event{Event: w.Event, Frame: w.Frame, Func: w.Func, File: w.File,
		Lineno: w.Lineno, Depth: w.Depth, Src: w.Src, Locals: st.locals, Value: w.Value, ExcType: w.ExcType,
		Unwind: w.Unwind}
	d.count++
	if d.sink != nil {
		// (through a field: a pointer to ev would move every event to the heap)
		d.scratch = ev
		d.sink(&d.scratch)
	} else {
		d.events = append(d.events, ev)
	}
	return outcomeOK, ""
}

// frameLocals is what the decoder knows of one frame: its names in order and its current locals,
// which are those of the names that have a value, in names order, each name with the value of
// its last diff entry. locals is shared by every event at which nothing changed, so it is never
// modified in place. Every entry of one name has the same value, even in a names list with
// duplicates (which the tracer never writes).
type frameLocals struct {
	names  []string // the frame's own copy
	locals schemas.Locals
	// partial is set when some name has no value (which the tracer never lets happen); otherwise
	// locals[i] is names[i]'s entry.
	partial bool
	// checked is set once dupNames (and index, for a names list longer than smallList) describe
	// names: dupNames when the list holds a name twice; index maps each name to its position.
	checked  bool
	dupNames bool
	index    map[string]int32
}

// apply builds the frame's new locals from the previous ones and an event's names and diff, with
// the semantics of the original decoder: the names in order (the event's list if it has one),
// each with its value in the diff (the last entry of a repeated key) or else its previous value;
// names without either are left out. The cost is O(len(names) + len(diff) + len(previous locals)).
// alloc gives the new locals' memory.
func (st *frameLocals) apply(w *wireEvent, alloc func(int) schemas.Locals) {
	diff := w.Locals
	if !w.HasNames && !st.partial && st.patch(diff, alloc) {
		return
	}
	names := st.names
	if w.HasNames {
		names = w.Names
	}
	// Where the previous value of a name comes from: its position, when the names did not change
	// and every name has a value; else its first entry in the previous locals, found by a map
	// beyond smallList entries.
	positional := !w.HasNames && !st.partial
	var prev map[string]string
	if !positional && len(st.locals) > smallList {
		prev = make(map[string]string, len(st.locals))
		for _, v := range st.locals {
			if _, seen := prev[v.Name]; !seen {
				prev[v.Name] = v.Value
			}
		}
	}
	var dm map[string]string
	if len(diff) > smallList {
		dm = make(map[string]string, len(diff))
		for _, v := range diff {
			dm[v.Name] = v.Value // the last entry of a repeated key wins
		}
	}
	next := alloc(len(names))[:0]
	for i, n := range names {
		var v string
		var ok bool
		if dm != nil {
			v, ok = dm[n]
		} else {
			v, ok = diffValue(diff, n)
		}
		if !ok {
			switch {
			case positional:
				v, ok = st.locals[i].Value, true
			case prev != nil:
				v, ok = prev[n]
			default:
				v, ok = st.locals.Get(n)
			}
		}
		if ok {
			next = append(next, schemas.Var{Name: n, Value: v})
		}
	}
	if w.HasNames {
		st.names = append(st.names[:0:0], names...) // names is the parser's scratch
		st.checked, st.dupNames, st.index = false, false, nil
	}
	st.locals = next
	st.partial = len(next) != len(names)
}

// check sets checked, dupNames and index for the current names.
func (st *frameLocals) check() {
	st.checked = true
	names := st.names
	if len(names) <= smallList {
		for i := range names {
			for j := range i {
				if names[i] == names[j] {
					st.dupNames = true
					return
				}
			}
		}
		return
	}
	st.index = make(map[string]int32, len(names))
	for i, n := range names {
		if _, dup := st.index[n]; dup {
			st.index, st.dupNames = nil, true
			return
		}
		st.index[n] = int32(i)
	}
}

// patch is apply's fast path for a diff on unchanged names that all have a value: copy the
// locals and overwrite the changed values. The tracer writes a diff in names order, so each entry
// is found by walking the names on from the previous one: O(len(names) + len(diff)) in all, no
// lookup per name. An entry out of that order (never the tracer's) is found by a map lookup (or a
// scan of at most smallList names). patch reports false, doing nothing, when the names hold a
// duplicate.
func (st *frameLocals) patch(diff []schemas.Var, alloc func(int) schemas.Locals) bool {
	if !st.checked {
		st.check()
	}
	if st.dupNames {
		return false
	}
	names := st.names
	next := alloc(len(st.locals))
	copy(next, st.locals)
	j := 0
	inOrder := true
	for _, v := range diff {
		if inOrder {
			k := j
			for k < len(names) && names[k] != v.Name {
				k++
			}
			if k < len(names) {
				next[k].Value = v.Value
				j = k // a repeated key may follow
				continue
			}
			inOrder = false // from here on, look each name up
		}
		if st.index != nil {
			if i, ok := st.index[v.Name]; ok {
				next[i].Value = v.Value
			}
			continue
		}
		for i := range names {
			if names[i] == v.Name {
				next[i].Value = v.Value
			}
		}
	}
	st.locals = next
	return true
}

// localsChunk is how many locals newLocals carves from one allocation.
const localsChunk = 4096

// newLocals returns n locals, all zero, from the decoder's arena: one allocation serves many
// events, and the events' locals lie side by side in memory. The result's capacity is n, so an
// append to it never reaches the next event's.
func (d *decoder) newLocals(n int) schemas.Locals {
	if n == 0 {
		return schemas.Locals{} // empty, not nil: no allocation
	}
	if n > 64 {
		return make(schemas.Locals, n)
	}
	if cap(d.arena)-len(d.arena) < n {
		// The chunks grow from 256 locals, so that a small item does not pay for a large one.
		d.arena = make([]schemas.Var, 0, min(max(2*cap(d.arena), 256), localsChunk))
	}
	l := len(d.arena)
	d.arena = d.arena[:l+n]
	return d.arena[l : l+n : l+n]
}

// diffValue finds name in a short diff, searched from the end so that a repeated key's last value
// wins.
func diffValue(diff []schemas.Var, name string) (string, bool) {
	for i := len(diff) - 1; i >= 0; i-- {
		if diff[i].Name == name {
			return diff[i].Value, true
		}
	}
	return "", false
}

// readResult is one read of the stream.
type readResult struct {
	buf []byte // the whole buffer; buf[:n] was read
	n   int
	err error
}

// streamReader reads a stream in a goroutine of its own, through up to readBufs buffers, so that
// its consumer can stop waiting at any time and the writer is not held up by the decoding.
type streamReader struct {
	out  chan readResult
	free chan []byte
	quit chan struct{}
}

// startReader starts reading r.
func startReader(r io.Reader) *streamReader {
	s := &streamReader{out: make(chan readResult, readBufs), free: make(chan []byte, readBufs), quit: make(chan struct{})}
	go func() {
		allocated := 0
		for {
			var buf []byte
			select {
			case buf = <-s.free:
			case <-s.quit:
				return
			default:
				if allocated < readBufs {
					allocated++
					size := readBufSize
					if allocated <= smallReadBufs {
						size = smallReadBufSize
					}
					buf = make([]byte, size)
					break
				}
				select {
				case buf = <-s.free:
				case <-s.quit:
					return
				}
			}
			n, err := r.Read(buf)
			for empty := 1; n == 0 && err == nil; empty++ {
				// io.Reader allows a Read that returns nothing; too many in a row is a broken reader.
				if empty == 100 {
					err = io.ErrNoProgress
					break
				}
				select {
				case <-s.quit:
					return
				default:
				}
				n, err = r.Read(buf)
			}
			select {
			case s.out <- readResult{buf: buf, n: n, err: err}:
			case <-s.quit:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return s
}

// release hands a buffer back for the next read.
func (s *streamReader) release(buf []byte) { s.free <- buf }

// stop tells the goroutine to exit once its current Read returns.
func (s *streamReader) stop() { close(s.quit) }

// drain discards the rest of the stream, until EOF, a read error or the end of ctx.
func (s *streamReader) drain(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case rr := <-s.out:
			if rr.err != nil {
				return
			}
			s.release(rr.buf)
		}
	}
}
