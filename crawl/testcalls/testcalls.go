// Package testcalls finds function-level items in a repository's test traces: the calls its
// tests make of the module-level functions of its non-test files, with the arguments observed at
// each call as the item's input.
package testcalls

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
)

// Limits of what one repository gives.
const (
	// MaxInputsPerFunction caps the distinct inputs kept per function found in a repository, and
	// MaxItems the function-level items one repository gives.
	MaxInputsPerFunction = 4
	MaxItems             = 200
	// MaxModuleBytes is the largest module whose functions give items, and MaxCodeBytes bounds
	// the code all the items of one repository hold: each item carries its module's whole text.
	MaxModuleBytes = 1 << 20
	MaxCodeBytes   = 16 << 20
)

// Items lists the function-level items found in a repository's test traces, in order of
// first call, without repeating a function and input. An item is a call of a module-level function
// of a non-test file with the arguments its first call event shows: the values of the def's
// parameters, in order (a call event shows the frame's locals, which at a frame's first call are
// its parameters). Left out, with the reason counted in counts ("functions_skipped:REASON"):
//   - resume: a generator's later call events, one per resumption, which show every current local
//     (the frame was already called; its first call event gave the item);
//   - async: async def functions, whose call returns a coroutine or an asynchronous generator that
//     the tracer does not drive (the trace could only be empty);
//   - context_manager: functions decorated with contextmanager (or asynccontextmanager), whose
//     call returns a context manager that runs none of the body (only `with` would);
//   - params: parameters that cannot be passed back positionally (*args, **kwargs, keyword-only)
//     or that the call event does not show;
//   - arguments: an argument whose rendering is not a Python literal (IsLiteral: names,
//     attribute access, calls and subscripts are refused);
//   - module_too_large: a function of a module larger than MaxModuleBytes (each item carries
//     its module's text);
//   - code_bytes: items past MaxCodeBytes of code in all;
//   - checkout_path: an argument that holds the checkout's folder (the worker's, a random name);
//   - method_instance, method_decorated: a method whose instance cannot be rebuilt, or with a
//     decorator other than staticmethod or classmethod (see methods.go: methods the tests call
//     give items Cls(init args).meth(args), Cls.meth(args)).
//
// Generator functions are kept: the tracer consumes the generator their call returns.
//
// dir is the checkout and roots its import roots (crawl.ImportRoots): each item's Deps is what its
// module runs of the checkout when imported from there, and the requirements of the repository's
// environment if it has one (see depWalker.Deps), so that an item is a duplicate only of one that
// runs the same code.
func Items(ctx context.Context, dir string, roots []string, it crawl.Item, traces []schemas.TestTrace, counts schemas.Counts) []crawl.Item {
	f := NewFinder(ctx, dir, roots, it, counts)
	for _, tt := range traces {
		f.Add(tt)
	}
	return f.Items()
}

// Finder finds the function-level items of a repository's test traces (see Items) one trace at a
// time, so that no more than one trace need be held: what it keeps is bounded by MaxItems and the
// repository's own modules.
type Finder struct {
	dir     string
	roots   []string // the checkout's import roots (crawl.ImportRoots)
	it      crawl.Item
	counts  schemas.Counts
	modules map[string]string // module sources read, by file
	perFunc map[[2]string]int // items per function
	seen    map[string]bool   // file and call of every item
	items   []crawl.Item
	code    int        // the bytes of code the items hold
	deps    *depWalker // the items' Deps
}

// NewFinder returns a Finder of the items of repository it checked out in dir with import roots
// roots (crawl.ImportRoots), counting what it leaves out in counts (may be nil); ctx bounds reading
// the repository's declared requirements.
func NewFinder(ctx context.Context, dir string, roots []string, it crawl.Item, counts schemas.Counts) *Finder {
	deps := newDepWalker(dir, roots, it.Repo.Resolved.Pin())
	if e := it.Repo.Env; e != nil {
		// The packages installed for the repository are on the functions' path too, before the
		// checkout: what they declare is part of what the items run.
		deps.env = []string{}
		if !e.FromRepository {
			deps.env = append(deps.env, e.Requirements...)
		} else if reqs, err := crawl.DeclaredRequirements(ctx, dir); err != nil {
			deps.startup = fmt.Sprintf("its requirements: %v", err)
		} else {
			for _, r := range reqs {
				deps.env = append(deps.env, r.String())
			}
		}
	}
	return &Finder{dir: dir, roots: roots, it: it, counts: counts, modules: map[string]string{}, perFunc: map[[2]string]int{}, seen: map[string]bool{},
		deps: deps}
}

// Items returns the items found so far, in order of first call.
func (f *Finder) Items() []crawl.Item { return f.items }

func (f *Finder) skip(reason string) {
	if f.counts != nil {
		f.counts[schemas.CountFunctionSkipped(reason)]++
	}
}

// Add finds the items of one test's trace (its file names as the tracer wrote them, absolute, or
// relative to the checkout). The source of a function called in a trace is among that trace's own
// functions: the tracer writes one for every code object it saw called.
func (f *Finder) Add(tt schemas.TestTrace) {
	f.add(tt.Test, tt.Functions, len(tt.Events), func(i int) string { return tt.Events[i].Event },
		func(i int) schemas.Event { return tt.Events[i] }, nil)
}

// AddTrace is Add for one test's trace in compact form (its events read one at a time, only the
// call events' locals materialised), with the functions the tracer wrote of it. Its values name
// the worker's folders by aliases: workerPath(i) reports whether call event i held one before
// (an item with such an argument is left out, counted as checkout_path, as Add leaves out one
// that holds the checkout's folder).
func (f *Finder) AddTrace(test string, functions []schemas.FuncSource, tr *debugger.Trace, workerPath func(i int) bool) {
	if tr == nil {
		return
	}
	f.add(test, functions, tr.Len(), tr.Kind, tr.Event, workerPath)
}

// add is Add over n events, each read by kind and event; workerPath (nil: none) is as in
// AddTrace.
func (f *Finder) add(test string, functions []schemas.FuncSource, n int, kind func(int) string, event func(int) schemas.Event, workerPath func(int) bool) {
	sources := map[[2]string]schemas.FuncSource{}
	for _, fs := range functions {
		sources[[2]string{fs.File, fs.QualName}] = fs
	}
	called := map[int]bool{} // the frames of this trace whose first call event was seen
	ms := newMethodState()   // the constructor calls seen, for the methods' items
	for i := 0; i < n; i++ {
		if kind(i) == schemas.EventReturn && ms.pending(i, kind, event) {
			continue
		}
		if kind(i) != schemas.EventCall {
			continue
		}
		ev := event(i)
		if called[ev.Frame] {
			if !strings.ContainsAny(ev.Func, ".<>") && !debugger.IsTestFile(ev.File) {
				f.skip("resume")
			}
			continue
		}
		called[ev.Frame] = true
		if debugger.IsTestFile(ev.File) {
			continue
		}
		if strings.ContainsAny(ev.Func, ".<>") {
			if call, src, ok := f.method(ms, ev, sources); ok {
				f.emit(test, ev, src, call, workerPath != nil && workerPath(i))
			}
			continue
		}
		k := [2]string{ev.File, ev.Func}
		src, ok := sources[k]
		if !ok || f.perFunc[k] >= MaxInputsPerFunction || len(f.items) >= MaxItems {
			continue
		}
		d, ok := parseDef(src.Source, ev.Func)
		switch {
		case !ok:
			f.skip("params")
			continue
		case d.async:
			f.skip("async")
			continue
		case d.contextManager:
			f.skip("context_manager")
			continue
		}
		args, ok := paramArgs(d.params, ev.Locals)
		if !ok {
			f.skip("arguments")
			continue
		}
		f.emit(test, ev, src, ev.Func+"("+args+")", workerPath != nil && workerPath(i))
	}
}

// emit adds the item of call, a call of ev's function (source src) seen in test, unless it holds
// the worker's folders (worker: the call event held one before its values were made the
// checkout's), repeats an item, or its module cannot be read or is past the limits.
func (f *Finder) emit(test string, ev schemas.Event, src schemas.FuncSource, call string, worker bool) {
	if strings.Contains(call, f.dir) || worker {
		// The worker's checkout folder (a random name), or another of its folders (which a
		// trace shows by an alias): the item would differ on every run and worker, or name
		// a folder its run does not have.
		f.skip("checkout_path")
		return
	}
	rel, ok := f.relative(ev.File)
	if !ok {
		return
	}
	if f.seen[rel+"\x00"+call] {
		return
	}
	code, ok := f.modules[rel]
	if !ok {
		data, err := readModule(filepath.Join(f.dir, rel))
		if err != nil {
			return
		}
		code = string(data)
		f.modules[rel] = code
	}
	switch {
	case len(code) > MaxModuleBytes:
		f.skip("module_too_large")
		return
	case f.code+len(code) > MaxCodeBytes:
		f.skip("code_bytes")
		return
	}
	f.code += len(code)
	f.seen[rel+"\x00"+call] = true
	f.perFunc[[2]string{ev.File, ev.Func}]++
	sum := sha256.Sum256([]byte(call))
	f.items = append(f.items, crawl.Item{
		Key:      fmt.Sprintf("%s#%s:%s:%s", f.it.Key, rel, ev.Func, hex.EncodeToString(sum[:6])),
		Path:     rel,
		SourceID: test,
		Code:     code,
		Filename: filepath.Base(rel),
		Module:   ModuleName(filepath.ToSlash(rel), f.roots),
		Call:     call,
		QualName: ev.Func,
		Func:     src.Source,
		RepoURL:  f.it.Path,
		Commit:   f.it.Repo.Resolved.Pin(),
		Deps:     f.deps.Deps(filepath.ToSlash(rel)),
		// A call the tests made (a method's too): the rows' input_source.
		InputSource: schemas.InputSourceTestCall,
	})
}

// relative is a traced file's name relative to the checkout, false for a file outside it.
func (f *Finder) relative(file string) (string, bool) {
	rel := file
	if filepath.IsAbs(file) {
		var err error
		if rel, err = filepath.Rel(f.dir, file); err != nil {
			return "", false
		}
	}
	rel = filepath.Clean(rel)
	if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

// readModule reads a module's text, at most MaxModuleBytes+1 bytes of it.
func readModule(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxModuleBytes+1))
}

// funcDef is what Items reads of a function's def.
type funcDef struct {
	params         []string // the parameter names, in order
	async          bool     // async def
	contextManager bool     // decorated with contextmanager or asynccontextmanager
}

// parseDef reads the def of name in src (the function's source, decorators included): its
// parameter names, and whether it is async or a context manager. It reports false when there is no
// such def or a parameter cannot be passed back positionally (*args, **kwargs, keyword-only ones).
func parseDef(src, name string) (funcDef, bool) {
	var d funcDef
	head := "def " + name + "("
	i := strings.Index(src, head)
	if i < 0 {
		return d, false
	}
	before := src[:i]
	d.async = strings.HasSuffix(strings.TrimRight(before, " \t"), "async")
	for _, l := range strings.Split(before, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "@") && strings.Contains(l, "contextmanager") {
			d.contextManager = true
		}
	}
	rest := src[i+len(head):]
	depth := 1
	var cur strings.Builder
	var parts []string
	for j := 0; j < len(rest) && depth > 0; j++ {
		c := rest[j]
		switch {
		case c == '#':
			for j < len(rest) && rest[j] != '\n' {
				j++
			}
			continue
		case c == '\'' || c == '"':
			// a string in a default value: copied whole, escapes included
			k := j + 1
			for k < len(rest) && rest[k] != c {
				if rest[k] == '\\' {
					k++
				}
				k++
			}
			if k >= len(rest) {
				return d, false
			}
			cur.WriteString(rest[j : k+1])
			j = k
			continue
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case c == ',' && depth == 1:
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		if depth > 0 {
			cur.WriteByte(c)
		}
	}
	if depth != 0 {
		return d, false
	}
	parts = append(parts, cur.String())
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" || p == "/" {
			continue
		}
		if strings.HasPrefix(p, "*") {
			return d, false
		}
		if k := strings.IndexAny(p, ":="); k >= 0 {
			p = strings.TrimSpace(p[:k])
		}
		if !isIdentifier(p) {
			return d, false
		}
		d.params = append(d.params, p)
	}
	return d, true
}

// isIdentifier reports whether s is an ASCII Python identifier (a non-ASCII one is refused: the
// call is rebuilt from it).
func isIdentifier(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// paramArgs renders the values of params in a call event's locals as a positional argument list,
// or reports false if a parameter is missing or a value is not a plain literal rendering.
func paramArgs(params []string, locals schemas.Locals) (string, bool) {
	vals := make(schemas.Locals, 0, len(params))
	for _, p := range params {
		v, ok := locals.Get(p)
		if !ok {
			return "", false
		}
		vals = append(vals, schemas.Var{Name: p, Value: v})
	}
	return literalArgs(vals)
}

// literalArgs renders the locals of a call event (the arguments, in order) as a positional
// argument list, or reports false if a value is not a Python literal (IsLiteral): only a value
// that evaluates again to what the call was given is an input. An object shown by its
// attributes (P(x=1)) or a user repr of constructor form (PosixPath('x'), typing.Optional[int])
// names code the call expression would run, and a rendering with parts left out (P(...), a value
// cut at the width, [1, 2, ...]) cannot be rebuilt. A literal naming an object's address (a repr
// kept as a string) would differ at every run.
func literalArgs(locals schemas.Locals) (string, bool) {
	parts := make([]string, 0, len(locals))
	for _, v := range locals {
		s := v.Value
		if !IsLiteral(s) || strings.Contains(s, " object at 0x") {
			return "", false
		}
		parts = append(parts, strings.TrimSpace(s))
	}
	return strings.Join(parts, ", "), true
}

// Deps is the Deps of an item of the module in file rel (slash-separated, relative to the
// checkout), as the items Items finds have it: for the items of functions found otherwise (inputs
// generated for them, issue 30), which deduplicate like these.
func (f *Finder) Deps(rel string) string { return f.deps.Deps(rel) }
