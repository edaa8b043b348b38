package sandbox

// Trace verification: the last line of defence against traced code that forges its own trace.
//
// Traced code runs in the same process as the tracer, so it may try to write fake event lines or
// to make the tracer miss events (docs/sandbox.md says what stops each). verifyTrace checks a
// decoded trace against the real source text and against how CPython runs code under
// sys.settrace, and rejects whatever an honest run cannot produce. It never rejects an honest
// trace: every check below is an invariant of the tracer on CPython 3.11 (notes on 3.12+ where
// they differ), so a false positive is a bug here. The invariants, and why each holds:
//
// Source (every event, function record and block):
//   - an event's file is one the run may trace (src accepts it);
//   - an event whose line exists in the file carries that line's text as src (the tracer reads
//     the file itself: Python's decoding, lines split on \r\n, \r and \n, terminator removed); a
//     line number outside the file (0 for a module's first events, or code compiled at run time
//     under the file's name, such as a template engine's) carries src "";
//   - a function record lies within its file and its source is exactly the file's text of those
//     lines (line endings kept inside, the last one dropped); the records of a file nest or are
//     disjoint (they are AST blocks of one file);
//   - blocks lie within their file, in order and disjoint (the top-level statements).
//
// Structure (every event): frames are numbered 1, 2, 3 ... in order of their first event, which
// is a call; line, exception and return events belong to the innermost running traced frame;
// a call event's depth is the number of running traced frames (depth counts the traced frames
// below a frame, and those are exactly the running ones: a traced frame that leaves the stack,
// by returning, by an exception or by yielding, always has a return event); every other event
// has its frame's depth; a return ends the frame's run, and only a call event (a generator or
// coroutine resuming, with the same frame number) starts it again; func and file never change
// within a frame; call and line events carry no value, return and exception events do, only
// returns are unwinds, and an unwind returns None right after an exception event of its frame.
//
// Code spans: the line, exception and return events of one frame lie in one top-level statement
// (blocks, function-level runs) and in one function record (test runs) of its file, since a code
// object's lines are those of its own block. Call events are exempt: the tracer moves a call on
// the first line of a code object that starts with "@" to the next def or class line, which for
// a lambda or comprehension on a decorator line (or on a continuation line starting with the @
// operator) may lie elsewhere. Module frames are exempt too (their record is the whole file; a
// module frame in a function-level run is code compiled at run time under the file's name).
//
// End (only when the run ended normally: an end record with status ok or exception, and not the
// tracer's own RecursionError or TracerError, which cut the trace wherever the recursion limit
// was reached): every traced frame has returned. With traceEnd.Entry (function-level runs whose
// call expression is a plain call of a traced function), the entry function's frame is checked
// against the end record's status and exception type too; see traceEnd.
//
// Considered and rejected (honest traces break them): "the last event is the depth-0 frame's
// return" (a __del__ of the entry function's locals runs, traced at depth 0, after that return);
// "the end value is a depth-0 return value" (a call expression such as C(1) or f(1)[0]); "an
// exception end means the depth-0 frame's last events are exception then unwind" (an exception
// leaving through a finally block ends with line events and a plain return; next(g()) raises
// StopIteration in the caller after g returned normally); "the escaping exception is the
// frame's last exception event" (a try/except inside a finally block); "the end exception type
// is the depth-0 frame's" (a generator raising StopIteration ends with RuntimeError); "every
// line number is within the file" (module frames start at line 0; templates compiled under their
// own file name run lines past its end); "a frame's call event lies in its code's block" (the
// decorator-line mapping above); "every function record contains an event" (code compiled at run
// time under a file's name is recorded as the whole module but runs other lines); "the entry
// frame's return value is the end value" (the same object rendered twice: a __repr__ with side
// effects, a weakref to a local that dies with the frame, or another thread changes it in
// between; traceEnd.CompareValue opts in for corpora where it holds).
//
// CPython 3.12 and later (settrace on top of sys.monitoring): an instruction without a line
// reports the frame's previous line, which after a moved call event (above) may lie outside the
// code's block; a StopIteration caught by yield from or await is an exception event followed by
// a normal return (no check relies on either). The line-0 module events are 3.11's.
//
// Deliberately rejected honest runs, whose traces are not faithful records of the run: code that
// switches tracing off itself (sys.settrace, a frame's f_trace), and runs where CPython switches
// it off (a RecursionError raised by the call of the trace function, caught by the program; see
// errTraceCut), leave frames that never return, which is what a forgery that hides lines looks
// like; code that switches stacks inside one thread (greenlet, gevent, eventlet) breaks the stack
// discipline.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/schemas"
)

// traceSource gives the text of the files a trace may name: file's text as the tracer reads it,
// or ok=false when the file is not one the run may trace (not a target, unreadable, too large).
// The text keeps the raw lines too, so function records (which keep line endings) can be
// compared exactly. It may be called concurrently.
type traceSource func(file string) (text *traceText, ok bool)

// traceText is one source file as the tracer reads it: decoded as Python decodes source files
// (a PEP 263 cookie or a UTF-8 BOM, UTF-8 otherwise) and split on \r\n, \r and \n. Lines are
// sliced from the text on demand: the text plus four bytes a line.
type traceText struct {
	text   string  // the decoded text, BOM removed
	starts []int32 // the byte offset of each line in text
	// unreadable: Python cannot decode the file, so the tracer reads no line of it (every src is
	// "") and writes no function record for it.
	unreadable bool
	// foreignCodec: the file declares an encoding this package does not decode. Lines with
	// non-ASCII bytes are not compared, and any line may read as "" (the codec may not exist).
	foreignCodec bool
}

// maxTraceText bounds a text's size (line offsets are int32); larger texts are unreadable.
const maxTraceText = 1<<31 - 1

// newTraceText splits text into lines the way the tracer does: a text ending in a line
// terminator has no empty line after it.
func newTraceText(text string) *traceText {
	if len(text) > maxTraceText {
		return &traceText{unreadable: true}
	}
	t := &traceText{text: text, starts: make([]int32, 0, strings.Count(text, "\n")+1)}
	start := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c != '\n' && c != '\r' {
			continue
		}
		t.starts = append(t.starts, int32(start))
		if c == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		start = i + 1
	}
	if start < len(text) {
		t.starts = append(t.starts, int32(start))
	}
	return t
}

// numLines is the number of lines.
func (t *traceText) numLines() int { return len(t.starts) }

// lineEnd is the offset just after line n's text (1-based), before its terminator.
func (t *traceText) lineEnd(n int) int {
	e := len(t.text)
	if n < len(t.starts) {
		e = int(t.starts[n])
	}
	s := int(t.starts[n-1])
	if e > s && t.text[e-1] == '\n' {
		e--
	}
	if e > s && t.text[e-1] == '\r' {
		e--
	}
	return e
}

// line returns line n (1-based, 1 <= n <= numLines()) without its terminator.
func (t *traceText) line(n int) string {
	return t.text[t.starts[n-1]:t.lineEnd(n)]
}

// inRange reports whether lineno is a line of the file whose text is known.
func (t *traceText) inRange(lineno int) bool {
	return !t.unreadable && lineno >= 1 && lineno <= len(t.starts)
}

// srcMatches reports whether src is what the tracer writes for line lineno, and what it expected.
func (t *traceText) srcMatches(lineno int, src string) (want string, ok bool) {
	if !t.inRange(lineno) {
		return "", src == ""
	}
	want = t.line(lineno)
	if t.foreignCodec {
		if !isASCII(want) {
			return want, true
		}
		return want, src == want || src == ""
	}
	return want, src == want
}

// block returns the text of lines first to last as a function record holds it (line endings kept,
// the last one dropped); comparable is false when the text cannot be compared (foreign codec).
func (t *traceText) block(first, last int) (text string, comparable bool) {
	s := t.text[t.starts[first-1]:t.lineEnd(last)]
	if t.foreignCodec && !isASCII(s) {
		return s, false
	}
	return s, true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func isASCIIBytes(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// codeSource is the source of a function-level run: code, traced as filename, is the only file.
func codeSource(filename, code string) traceSource {
	var once sync.Once
	var t *traceText
	return func(file string) (*traceText, bool) {
		if file != filename {
			return nil, false
		}
		once.Do(func() {
			if !utf8.ValidString(code) {
				// The request reaches the tracer as JSON, whose encoder replaces each invalid
				// byte with U+FFFD.
				code = string([]rune(code))
			}
			t = newTraceText(code)
		})
		return t, true
	}
}

// dirSource is the source of a test run of the checkout dir: absolute files inside dir (after
// filepath.Clean, and after resolving symbolic links, which must not leave dir either), regular,
// at most maxFileBytes long, decoded as Python decodes source files. At most maxFiles distinct
// names are looked up (refused or not); each is read once and cached.
func dirSource(dir string, maxFileBytes int64, maxFiles int) traceSource {
	d := &dirFiles{dir: filepath.Clean(dir), max: min(maxFileBytes, maxTraceText), maxFiles: maxFiles,
		cache: map[string]*traceText{}}
	return d.get
}

type dirFiles struct {
	dir      string
	max      int64
	maxFiles int

	mu       sync.Mutex
	resolved bool
	real     string                // dir with its symbolic links resolved ("" when that failed)
	cache    map[string]*traceText // nil: refused
}

func (d *dirFiles) get(file string) (*traceText, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.cache[file]; ok {
		return t, t != nil
	}
	if len(d.cache) >= d.maxFiles {
		return nil, false
	}
	if !d.resolved {
		d.resolved = true
		if real, err := filepath.EvalSymlinks(d.dir); err == nil && filepath.IsAbs(real) {
			d.real = real
		}
	}
	t := d.load(file)
	d.cache[file] = t
	return t, t != nil
}

// load reads file, or returns nil when the run may not trace it.
func (d *dirFiles) load(file string) *traceText {
	if d.real == "" || !filepath.IsAbs(file) || strings.IndexByte(file, 0) >= 0 ||
		!pathWithin(d.dir, filepath.Clean(file)) {
		return nil
	}
	real, err := filepath.EvalSymlinks(file) // resolves ".." after a link as the kernel does
	if err != nil || !pathWithin(d.real, real) {
		return nil
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() > d.max {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, d.max+1))
	if err != nil || int64(len(data)) > d.max {
		return nil
	}
	return pythonSourceText(data)
}

// pathWithin reports whether the clean absolute path p is root or lies under it.
func pathWithin(root, p string) bool {
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == root || strings.HasPrefix(p, root+"/")
}

// The PEP 263 cookie and the blank-line test of Python's tokenize.detect_encoding (re.ASCII).
var (
	pyCookieRE = regexp.MustCompile(`^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)`)
	pyBlankRE  = regexp.MustCompile(`^[ \t\f]*(?:[#\r\n]|$)`)
)

// Codec names (after Python's encodings.normalize_encoding) this package decodes.
var (
	pyUTF8Names   = map[string]bool{"utf_8": true, "utf8": true, "u8": true, "utf": true, "utf8_ucs2": true, "utf8_ucs4": true, "cp65001": true}
	pyLatin1Names = map[string]bool{"latin_1": true, "latin1": true, "latin": true, "l1": true, "iso8859_1": true,
		"iso_8859_1": true, "iso8859": true, "8859": true, "cp819": true, "ibm819": true, "csisolatin1": true,
		"iso_ir_100": true, "iso_8859_1_1987": true}
	pyASCIINames = map[string]bool{"ascii": true, "us_ascii": true, "646": true, "us": true, "cp367": true,
		"ibm367": true, "csascii": true, "iso646_us": true, "iso_ir_6": true, "ansi_x3.4_1968": true,
		"ansi_x3_4_1968": true, "ansi_x3.4_1986": true, "iso_646.irv_1991": true}
)

// pythonSourceText decodes a source file the way the tracer reads it (tokenize.detect_encoding,
// then bytes.decode): a BOM means UTF-8 (and is dropped), else a coding cookie on line 1 (or line
// 2 after a blank or comment line 1), else UTF-8; any error makes the file unreadable.
func pythonSourceText(data []byte) *traceText {
	bad := &traceText{unreadable: true}
	body := data
	bom := len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF
	if bom {
		body = data[3:]
	}
	codec := "utf-8" // the normal name, as _get_normal_name returns it
	rest := body
	for line := 0; line < 2 && len(rest) > 0; line++ {
		l := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 { // readline: up to b"\n"
			l = rest[:i+1]
		}
		rest = rest[len(l):]
		if !utf8.Valid(l) { // find_cookie decodes the line as UTF-8 first
			return bad
		}
		if m := pyCookieRE.FindSubmatch(l); m != nil {
			codec = pyNormalEncoding(string(m[1]))
			if bom && codec != "utf-8" {
				return bad
			}
			break
		}
		if !pyBlankRE.Match(l) {
			break
		}
	}
	name := pyCodecName(codec)
	switch {
	case pyUTF8Names[name]:
		if !utf8.Valid(body) {
			return bad
		}
		return newTraceText(string(body))
	case pyLatin1Names[name]:
		if isASCIIBytes(body) {
			return newTraceText(string(body))
		}
		r := make([]rune, len(body))
		for i, b := range body {
			r[i] = rune(b)
		}
		return newTraceText(string(r))
	case pyASCIINames[name]:
		if !isASCIIBytes(body) {
			return bad
		}
		return newTraceText(string(body))
	}
	t := newTraceText(string(body))
	t.foreignCodec = true
	return t
}

// pyNormalEncoding is tokenize._get_normal_name.
func pyNormalEncoding(orig string) string {
	enc := orig
	if len(enc) > 12 {
		enc = enc[:12]
	}
	enc = strings.ToLower(strings.ReplaceAll(enc, "_", "-"))
	if enc == "utf-8" || strings.HasPrefix(enc, "utf-8-") {
		return "utf-8"
	}
	for _, p := range []string{"latin-1", "iso-8859-1", "iso-latin-1"} {
		if enc == p || strings.HasPrefix(enc, p+"-") {
			return "iso-8859-1"
		}
	}
	return orig
}

// pyCodecName is encodings.normalize_encoding, lower-cased as codecs.lookup does: runs of
// characters other than letters, digits and dots become one "_", none at either end.
func pyCodecName(enc string) string {
	var b strings.Builder
	pending := false
	for _, c := range strings.ToLower(enc) {
		if c == '.' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			if pending && b.Len() > 0 {
				b.WriteByte('_')
			}
			pending = false
			b.WriteRune(c)
		} else {
			pending = true
		}
	}
	return b.String()
}

// traceEnd is what the run's end record said, for the end checks (nil when there is no end record).
type traceEnd struct {
	// Status is the end record's status (the run's status: ok and exception come only from an
	// end record).
	Status schemas.Status
	// Value is the end record's value: the rendered result (ok) or exception (exception).
	Value string
	// ExcType is the end record's exception type (not a test's: a test run's end record is ok
	// whatever the verdict).
	ExcType string
	// Kind is "call" (a function-level run) or "test" (a traced test run).
	Kind string
	// Entry, for a function-level run whose call expression is a plain call NAME(args) of a
	// function of the traced file, with arguments that call no traced code (CruxEval's
	// f(<input>)), is NAME; "" otherwise. When the trace starts with that function's call at
	// depth 0 and its frame is called only once (so NAME is a plain function: neither a class, a
	// generator nor wrapped by traced code), that frame is the entry frame, and:
	//   - status ok: the entry frame's return is not an unwind (the call returned, so the frame
	//     left through RETURN_VALUE);
	//   - status exception: when nothing traced ran after the entry frame's return, one of its
	//     exception events has the end record's exception type (an exception leaves a frame only
	//     after entering it through an exception event, and nothing between that return and the
	//     end record can raise but an asynchronous exception, whose handler is traced code when
	//     it is the program's own; except* may re-raise a derived ExceptionGroup, so those only
	//     need one exception event). KeyboardInterrupt and SystemExit are not checked: they may
	//     come from a signal with a built-in handler just after the entry frame returned.
	Entry string
	// CompareValue, with Entry and status ok, also requires the entry frame's return value to be
	// the end record's value when nothing traced ran after that return. This is NOT an invariant
	// of honest runs, only of programs whose result renders the same twice: a __repr__ with side
	// effects or that reads the clock, an object whose repr changes when the entry frame's locals
	// die (a weakref.ref to one of them, a weakref.finalize whose callback is a built-in that
	// mutates the result) or a result another thread mutates make an honest run differ. Use it
	// for corpora of pure functions of literal inputs such as CruxEval.
	CompareValue bool
}

// completed reports whether the run ended normally, so its trace is whole.
func (e *traceEnd) completed() bool {
	if e == nil {
		return false
	}
	switch e.Status {
	case schemas.StatusOK:
		return true
	case schemas.StatusException:
		// The tracer's own RecursionError (the recursion limit reached) and TracerError end the
		// trace wherever it was.
		return e.ExcType != "RecursionError" && e.ExcType != "TracerError"
	}
	return false
}

var (
	// errTraceInconsistent wraps every verification failure.
	errTraceInconsistent = errors.New("trace inconsistent with its source")
	// errTraceCut (which wraps errTraceInconsistent) is the failure of a run that ended normally
	// with a trace that stops before some traced frame returned. A forgery that switches tracing
	// off looks like this, and so does what CPython does when calling the trace function raises
	// RecursionError (the recursion limit reached in untraced code, say copy.deepcopy of a deeply
	// nested list): it switches tracing off for the rest of the run, and a program that catches
	// that RecursionError ends ok with a trace that stops there. Neither trace is a record of the
	// whole run. (The tracer could tell the second case by checking sys.gettrace() before it
	// writes the end record.)
	errTraceCut = fmt.Errorf("%w: the trace stops before the run ended", errTraceInconsistent)
)

// verifyTrace checks that events, the function records and the blocks of one run are consistent
// with the source and with how CPython executes it (the invariants are listed at the top of this
// file). end is nil when the run has no end record; its status says whether the run ended
// normally (ok or exception, as opposed to a run cut by a limit or a kill, whose trace may stop
// anywhere). It returns nil or an error (wrapping errTraceInconsistent, and errTraceCut when the
// trace of a run that ended normally stops early) describing the first inconsistency found ("event 12: line 7 of main.py is \"x = 1\", the event says \"x = 2\"",
// events numbered from 0). It takes time linear in the size of the trace and memory linear in the
// number of frames, besides the source files.
func verifyTrace(events []schemas.Event, functions []schemas.FuncSource, blocks []schemas.Block, src traceSource, end *traceEnd) error {
	if src == nil {
		src = func(string) (*traceText, bool) { return nil, false }
	}
	v := &verifier{src: src, files: map[string]*verifyFile{}}
	if err := v.checkBlocks(blocks); err != nil {
		return err
	}
	if err := v.checkFunctions(functions); err != nil {
		return err
	}
	if end != nil && end.Kind == "call" && len(events) > 0 && len(blocks) == 0 {
		return v.fail("a function-level run with events has no blocks record (it is written before tracing starts)")
	}
	entry := ""
	if end != nil && end.Kind == "call" && end.Entry != "" && len(events) > 0 && events[0].Event == schemas.EventCall &&
		events[0].Depth == 0 && events[0].Func == end.Entry {
		entry = end.Entry
	}
	var ent entryState
	for i := range events {
		if err := v.event(i, &events[i]); err != nil {
			return err
		}
		if entry != "" && events[i].Frame == 1 {
			ent.note(i, &events[i], end)
		}
	}
	if !end.completed() {
		return nil
	}
	if n := len(v.stack); n > 0 {
		fr := &v.frames[v.stack[n-1]-1]
		return fmt.Errorf("%w: the run ended normally (%s) but frame %d (%s, called at event %d) never returned",
			errTraceCut, end.Status, v.stack[n-1], fr.fn, fr.lastCall)
	}
	if entry != "" {
		return ent.check(v, events, end)
	}
	return nil
}

// verifier is the state of one verifyTrace.
type verifier struct {
	src    traceSource
	files  map[string]*verifyFile
	last   *verifyFile // the file of the previous lookup
	frames []verifyFrame
	stack  []int // the running traced frames, outermost first
}

// verifyFile is what the verifier knows of one file.
type verifyFile struct {
	name    string
	text    *traceText
	blocks  spanSet
	records spanSet
}

// verifyFrame is one traced frame.
type verifyFrame struct {
	fn, file string
	f        *verifyFile
	running  bool
	depth    int
	lastExc  bool // the frame's previous event is an exception event
	module   bool
	lo, hi   int // the span of its in-file line, exception and return events (lo 0: none yet)
	lastCall int // event index of its last call
	lastRet  int // event index of its last return
}

func (v *verifier) fail(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errTraceInconsistent, fmt.Sprintf(format, args...))
}

// file returns the file named name, or nil when src refuses it.
func (v *verifier) file(name string) *verifyFile {
	if v.last != nil && v.last.name == name {
		return v.last
	}
	f, seen := v.files[name]
	if !seen {
		if t, ok := v.src(name); ok && t != nil {
			f = &verifyFile{name: name, text: t}
		}
		v.files[name] = f
	}
	if f != nil {
		v.last = f
	}
	return f
}

func (v *verifier) checkBlocks(blocks []schemas.Block) error {
	for i, b := range blocks {
		f := v.file(b.File)
		if f == nil {
			return v.fail("block %d: %q is not a file this run may trace", i, b.File)
		}
		n := f.text.numLines()
		if f.text.unreadable {
			return v.fail("block %d: %s cannot be decoded as Python source, yet has blocks", i, b.File)
		}
		if b.Start < 1 || b.End < b.Start || b.End > n {
			return v.fail("block %d: lines %d-%d of %s, which has %d lines", i, b.Start, b.End, b.File, n)
		}
		if k := len(f.blocks.spans); k > 0 && b.Start <= f.blocks.spans[k-1].last {
			return v.fail("block %d: lines %d-%d of %s overlap or precede the block before (lines %d-%d)",
				i, b.Start, b.End, b.File, f.blocks.spans[k-1].first, f.blocks.spans[k-1].last)
		}
		f.blocks.spans = append(f.blocks.spans, span{b.Start, b.End})
	}
	for _, f := range v.files {
		if f != nil {
			f.blocks.index()
		}
	}
	return nil
}

func (v *verifier) checkFunctions(functions []schemas.FuncSource) error {
	for i, fs := range functions {
		f := v.file(fs.File)
		if f == nil {
			return v.fail("function record %d (%s): %q is not a file this run may trace", i, fs.QualName, fs.File)
		}
		if f.text.unreadable {
			return v.fail("function record %d (%s): %s cannot be decoded as Python source, yet has a record",
				i, fs.QualName, fs.File)
		}
		n := f.text.numLines()
		if fs.FirstLine < 1 || fs.LastLine < fs.FirstLine || fs.LastLine > n {
			return v.fail("function record %d (%s): lines %d-%d of %s, which has %d lines",
				i, fs.QualName, fs.FirstLine, fs.LastLine, fs.File, n)
		}
		if want, ok := f.text.block(fs.FirstLine, fs.LastLine); ok && want != fs.Source {
			return v.fail("function record %d (%s): lines %d-%d of %s are %s, the record says %s",
				i, fs.QualName, fs.FirstLine, fs.LastLine, fs.File, clip(want), clip(fs.Source))
		}
		f.records.spans = append(f.records.spans, span{fs.FirstLine, fs.LastLine})
	}
	for name, f := range v.files {
		if f == nil || len(f.records.spans) == 0 {
			continue
		}
		if a, b, ok := f.records.laminar(); !ok {
			return v.fail("function records of %s: lines %d-%d and %d-%d overlap without nesting",
				name, a.first, a.last, b.first, b.last)
		}
		f.records.index()
	}
	return nil
}

// event checks event i.
func (v *verifier) event(i int, e *schemas.Event) error {
	switch e.Event {
	case schemas.EventCall, schemas.EventLine:
		if e.Value != nil || e.ExcType != "" || e.Unwind {
			return v.fail("event %d: a %s event with a value, an exception type or an unwind", i, e.Event)
		}
	case schemas.EventReturn:
		if e.Value == nil || e.ExcType != "" {
			return v.fail("event %d: a return event without a value or with an exception type", i)
		}
	case schemas.EventException:
		if e.Value == nil || e.Unwind {
			return v.fail("event %d: an exception event without a value or with an unwind", i)
		}
	default:
		return v.fail("event %d: unknown event kind %q", i, e.Event)
	}
	f := v.file(e.File)
	if f == nil {
		return v.fail("event %d: %q is not a file this run may trace", i, e.File)
	}
	if want, ok := f.text.srcMatches(e.Lineno, e.Src); !ok {
		if !f.text.inRange(e.Lineno) {
			return v.fail("event %d: %s has no line %d (it has %d), the event says %s",
				i, e.File, e.Lineno, f.text.numLines(), clip(e.Src))
		}
		return v.fail("event %d: line %d of %s is %s, the event says %s", i, e.Lineno, e.File, clip(want), clip(e.Src))
	}

	n := len(v.frames)
	switch {
	case e.Frame == n+1:
		if e.Event != schemas.EventCall {
			return v.fail("event %d: the first event of frame %d is a %s event, not a call", i, e.Frame, e.Event)
		}
		v.frames = append(v.frames, verifyFrame{fn: e.Func, file: e.File, f: f, module: e.Func == "<module>"})
	case e.Frame < 1 || e.Frame > n+1:
		return v.fail("event %d: frame %d, but the frames so far are 1-%d (a new frame is numbered %d)",
			i, e.Frame, n, n+1)
	}
	fr := &v.frames[e.Frame-1]
	if e.Func != fr.fn || e.File != fr.file {
		return v.fail("event %d: frame %d is %s in %s, the event says %s in %s", i, e.Frame, fr.fn, fr.file, e.Func, e.File)
	}
	if e.Event == schemas.EventCall {
		if fr.running {
			return v.fail("event %d: a call event of frame %d (%s), which is running since event %d", i, e.Frame, fr.fn, fr.lastCall)
		}
		if e.Depth != len(v.stack) {
			return v.fail("event %d: frame %d (%s) is called at depth %d, but %d traced frames are running",
				i, e.Frame, fr.fn, e.Depth, len(v.stack))
		}
		fr.running, fr.depth, fr.lastCall = true, len(v.stack), i
		v.stack = append(v.stack, e.Frame)
		fr.lastExc = false
		return nil
	}
	if !fr.running {
		return v.fail("event %d: a %s event of frame %d (%s), which returned at event %d and was not called again",
			i, e.Event, e.Frame, fr.fn, fr.lastRet)
	}
	if top := v.stack[len(v.stack)-1]; top != e.Frame {
		return v.fail("event %d: a %s event of frame %d (%s), but frame %d (%s) is the innermost running frame",
			i, e.Event, e.Frame, fr.fn, top, v.frames[top-1].fn)
	}
	if e.Depth != fr.depth {
		return v.fail("event %d: frame %d (%s) runs at depth %d, the event says %d", i, e.Frame, fr.fn, fr.depth, e.Depth)
	}
	if e.Unwind && (!fr.lastExc || *e.Value != "None") {
		return v.fail("event %d: an unwind of frame %d (%s) that does not follow its exception event or returns %s",
			i, e.Frame, fr.fn, clip(*e.Value))
	}
	if !fr.module && f.text.inRange(e.Lineno) && (fr.lo == 0 || e.Lineno < fr.lo || e.Lineno > fr.hi) {
		if fr.lo == 0 || e.Lineno < fr.lo {
			fr.lo = e.Lineno
		}
		if e.Lineno > fr.hi {
			fr.hi = e.Lineno
		}
		if !f.blocks.covers(fr.lo, fr.hi) {
			return v.fail("event %d: frame %d (%s) runs lines %d-%d of %s, which no single top-level statement holds",
				i, e.Frame, fr.fn, fr.lo, fr.hi, e.File)
		}
		if !f.records.covers(fr.lo, fr.hi) {
			return v.fail("event %d: frame %d (%s) runs lines %d-%d of %s, which no single function record holds",
				i, e.Frame, fr.fn, fr.lo, fr.hi, e.File)
		}
	}
	fr.lastExc = e.Event == schemas.EventException
	if e.Event == schemas.EventReturn {
		fr.running, fr.lastRet = false, i
		v.stack = v.stack[:len(v.stack)-1]
	}
	return nil
}

// entryState follows the entry frame (frame 1) for the Entry checks.
type entryState struct {
	lastEvent int  // index of its last event
	calls     int  // its call events
	excType   bool // an exception event of the end's type since its last call
	exc       bool // any exception event since its last call
}

func (s *entryState) note(i int, e *schemas.Event, end *traceEnd) {
	s.lastEvent = i
	switch e.Event {
	case schemas.EventCall:
		s.calls++
		s.excType, s.exc = false, false
	case schemas.EventException:
		s.exc = true
		if e.ExcType == end.ExcType {
			s.excType = true
		}
	}
}

// check runs the Entry checks once the trace has passed every other check (so the entry frame
// has returned and its last event is a return).
func (s *entryState) check(v *verifier, events []schemas.Event, end *traceEnd) error {
	if s.calls != 1 {
		return nil // a generator or coroutine: not the plain function Entry promises
	}
	ret := &events[s.lastEvent]
	last := s.lastEvent == len(events)-1
	switch end.Status {
	case schemas.StatusOK:
		if ret.Unwind {
			return v.fail("the run ended ok but the entry frame (%s) was left by an exception (event %d)", end.Entry, s.lastEvent)
		}
		if end.CompareValue && last && *ret.Value != end.Value &&
			!strings.Contains(*ret.Value, " timed out)>") && !strings.Contains(end.Value, " timed out)>") {
			return v.fail("event %d: the entry frame (%s) returns %s, the end record says %s",
				s.lastEvent, end.Entry, clip(*ret.Value), clip(end.Value))
		}
	case schemas.StatusException:
		if !last || end.ExcType == "KeyboardInterrupt" || end.ExcType == "SystemExit" {
			return nil
		}
		group := strings.HasSuffix(end.ExcType, "ExceptionGroup")
		if !s.excType && !(group && s.exc) {
			return v.fail("the run ended with %s but the entry frame (%s, last event %d) saw no such exception",
				end.ExcType, end.Entry, s.lastEvent)
		}
	}
	return nil
}

// span is lines first to last, inclusive.
type span struct{ first, last int }

// spanSet answers "does one span hold lines a to b" in O(log n).
type spanSet struct {
	spans   []span // sorted by first once indexed
	maxLast []int  // maxLast[i]: the largest last among spans[:i+1]
}

func (s *spanSet) index() {
	sort.Slice(s.spans, func(i, j int) bool {
		if s.spans[i].first != s.spans[j].first {
			return s.spans[i].first < s.spans[j].first
		}
		return s.spans[i].last > s.spans[j].last
	})
	s.maxLast = make([]int, len(s.spans))
	m := 0
	for i, sp := range s.spans {
		m = max(m, sp.last)
		s.maxLast[i] = m
	}
}

// covers reports whether a span holds lines a to b; true when the set is empty (nothing to check).
func (s *spanSet) covers(a, b int) bool {
	if len(s.spans) == 0 {
		return true
	}
	k := sort.Search(len(s.spans), func(i int) bool { return s.spans[i].first > a }) // spans[:k] start at or before a
	return k > 0 && s.maxLast[k-1] >= b
}

// laminar reports whether every two spans nest or are disjoint, and a pair that does not.
func (s *spanSet) laminar() (span, span, bool) {
	sorted := append([]span(nil), s.spans...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].first != sorted[j].first {
			return sorted[i].first < sorted[j].first
		}
		return sorted[i].last > sorted[j].last
	})
	var open []span
	for _, sp := range sorted {
		for len(open) > 0 && open[len(open)-1].last < sp.first {
			open = open[:len(open)-1]
		}
		if len(open) > 0 && open[len(open)-1].last < sp.last {
			return open[len(open)-1], sp, false
		}
		open = append(open, sp)
	}
	return span{}, span{}, true
}

// clip quotes s for an error message, shortened.
func clip(s string) string {
	const max = 120
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q...", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}
