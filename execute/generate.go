package execute

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/crawl/testcalls"
	"github.com/ndtrace/ndtrace/internal/pylex"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// Generating inputs (issue 30): for a repository item with FunctionsAll, after its tests (and the
// functions they call), traceRepo lists the checkout's modules (listModules), finds the functions
// of each in a sandboxed run of its own (sandbox.Generate, find), generates inputs for each unit in
// another (sandbox.Generate with Function set: the attempts for one function share its run, two
// functions never do), checks every input the run reports on this side (validCall: the run is the
// module's to forge), makes each kept input a function-level item as testcalls makes those of the
// tests' calls, and traces them with traceFunctions. What it gave is the RepoTrace's Gen.

// Limits of generating inputs for one repository that are not in schemas (see the Gen* bounds
// there).
const (
	// maxGenCodeBytes bounds the code the generated items of one repository hold together (each
	// carries its module's text), past which their inputs are counted as code_bytes.
	maxGenCodeBytes = 4 * testcalls.MaxCodeBytes
	// maxCallBytes is the longest call a generated input may be.
	maxCallBytes = 16 << 10
	// maxGenLines bounds the lines a run reports per function or input that are read.
	maxGenLines = 1 << 16
)

// genSandbox is what generating inputs needs of a sandbox: *sandbox.Sandbox (tests give fakes).
type genSandbox interface {
	Generate(ctx context.Context, req sandbox.GenerateRequest) (*sandbox.Generation, error)
	Close() error
}

// proposer proposes argument lists for a unit from outside the sandbox (the language model of
// inputs.llm: llmProposer): each the text between a call's parentheses, already checked.
type proposer interface {
	Propose(ctx context.Context, u genUnit) ([]string, error)
}

// genModule is a module of a checkout whose functions are searched: its file, slash-separated and
// relative to the checkout, and its dotted name (testcalls.ModuleName; "" for a file run
// standalone).
type genModule struct {
	rel, name string
}

// genUnit is a function found in a module that can be run as a unit.
type genUnit struct {
	mod  genModule
	code string // the module's text
	fn   sandbox.FoundFunction
	src  string // the function's own source: its lines, Line to EndLine
}

// generation generates the inputs of the functions of one checkout's modules.
type generation struct {
	it    crawl.Item
	dir   string   // the checkout, on the worker: its files are read here
	roots []string // its import roots (crawl.ImportRoots)
	at    funcPlace
	in    schemas.InputsSpec // with its defaults
	seed  uint64             // the spec's
	lim   sandbox.Limits     // the item's (memory, processes, ...); the runs' times are the generation's
	start func(ctx context.Context) (genSandbox, error)
	llm   proposer                // nil: none
	deps  func(rel string) string // an item's Deps (testcalls.Finder.Deps)
	seen  map[string]bool         // file and call of each item the tests gave
	// counts are the repository's counters; alive is called after every run, begin starts a
	// step of the repository's watchdog; now is the clock, budget bounds the whole generation.
	counts schemas.Counts
	alive  func()
	begin  func(step string, limit time.Duration)
	now    func() time.Time
	budget time.Duration

	y        *schemas.GenYield
	items    []crawl.Item
	spans    map[string]pylex.Span // the def's lines of each item, by its Key
	covs     []unitCov             // the units whose coverage was counted
	code     int                   // the bytes of code the items hold
	maxCode  int                   // what they may hold (0: maxGenCodeBytes)
	nunits   int                   // the units given a generation run (at most MaxGenUnits)
	sb       genSandbox
	broke    int  // runs in a row that broke their sandbox
	dead     bool // the sandbox is given up: the rest is counted as sandbox_error
	deadline time.Time
}

// lose counts n losses of reason (GenReason's vocabulary).
func (g *generation) lose(reason string, n int) {
	if n <= 0 {
		return
	}
	if g.y.Losses == nil {
		g.y.Losses = map[string]int64{}
	}
	g.y.Losses[schemas.GenReason(reason)] += int64(n)
}

// close closes the generation's sandbox, if any.
func (g *generation) close() {
	if g.sb != nil {
		g.sb.Close()
		g.sb = nil
	}
}

// run lists the checkout's modules and generates the inputs of their functions. Only the
// context's error is returned: a sandbox that fails on a module or a function is counted and
// started again (after maxFunctionBreaks in a row the rest is given up, counted).
func (g *generation) run(ctx context.Context) error {
	defer g.close()
	if g.y == nil {
		g.y = &schemas.GenYield{}
	}
	g.deadline = g.now().Add(g.budget)
	mods, capped, err := listModules(ctx, g.dir, g.roots)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The walk itself failed (a folder gone): what it listed is searched.
		slog.Warn("listing a repository's modules", "repo", g.it.Key, "err", err)
	}
	g.lose("repository_cap", capped)
	for i, m := range mods {
		switch {
		case g.dead:
			g.lose("sandbox_error", len(mods)-i)
			return nil
		case !g.now().Before(g.deadline):
			g.lose("repository_budget", len(mods)-i)
			return nil
		}
		if err := g.module(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// module finds the functions of module m and generates the inputs of its units.
func (g *generation) module(ctx context.Context, m genModule) error {
	data, err := readLimited(filepath.Join(g.dir, filepath.FromSlash(m.rel)), testcalls.MaxModuleBytes)
	switch {
	case err != nil:
		g.lose("other", 1)
		return nil
	case len(data) > testcalls.MaxModuleBytes:
		g.lose("module_too_large", 1)
		return nil
	case !utf8.Valid(data):
		g.lose("not_utf8", 1)
		return nil
	}
	code := string(data)
	g.y.Modules++
	req := g.request(m, code)
	req.Limits = g.limits(schemas.GenFindTimeout)
	gen, ok, err := g.call(ctx, req, "finding the functions of "+m.label())
	if err != nil {
		return err
	}
	if !ok {
		g.lose("sandbox_error", 1)
		return nil
	}
	if gen.Status != schemas.StatusOK {
		switch {
		case gen.MissingModule != "":
			g.lose("missing_module", 1)
		case gen.Status == schemas.StatusTimeout:
			g.lose("import_timeout", 1)
		default:
			g.lose("import_failed", 1)
		}
		return nil
	}
	units := g.units(m, code, gen.Functions)
	for i, u := range units {
		switch {
		case g.nunits >= schemas.MaxGenUnits:
			g.lose("repository_cap", 1)
			continue
		case g.dead:
			g.lose("sandbox_error", len(units)-i)
			return nil
		case !g.now().Before(g.deadline):
			g.lose("repository_budget", 1)
			continue
		}
		g.nunits++
		if err := g.unit(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

// label names module m in a step of the watchdog: its dotted name, or its file quoted.
func (m genModule) label() string {
	if m.name != "" {
		return m.name
	}
	return strconv.QuoteToASCII(m.rel)
}

// units checks the functions a find run reported of module m (text code): each is counted in
// Found, those with a skip reason in Losses, the others returned as units (the run is the
// module's to forge: a name that is not "name" or "Class.name", lines outside the file or that
// are not its def, a unit's name repeated, are counted as invalid_report).
func (g *generation) units(m genModule, code string, found []sandbox.FoundFunction) []genUnit {
	if len(found) > schemas.MaxGenUnits {
		g.lose("repository_cap", len(found)-schemas.MaxGenUnits)
		found = found[:schemas.MaxGenUnits]
	}
	var lines []string // the module's lines, split once needed
	var defs map[string][]pylex.Span
	seen := map[string]bool{}
	var out []genUnit
	for _, f := range found {
		g.y.Found++
		if !validQualName(f.QualName) {
			g.lose("invalid_report", 1)
			continue
		}
		if f.Skip != "" {
			// A name defined twice (six's if PY2/else branches) is reported twice, the def the
			// module does not run with its reason (redefined): counted as such, whichever
			// comes first. Only a unit's name may not repeat.
			g.lose(f.Skip, 1)
			continue
		}
		if seen[f.QualName] {
			g.lose("invalid_report", 1)
			continue
		}
		seen[f.QualName] = true
		if lines == nil {
			lines, defs = strings.SplitAfter(code, "\n"), unitDefs(code)
		}
		// Its lines must be a def of that name where a unit's def is (unitDefs): they are the
		// item's Func, what deduplication, decontamination and the split read.
		src, ok := funcLines(lines, f.Line, f.EndLine)
		if !ok || !isUnitDef(defs, f.QualName, f.Line, f.EndLine) {
			g.lose("invalid_report", 1)
			continue
		}
		g.y.Units++
		out = append(out, genUnit{mod: m, code: code, fn: f, src: src})
	}
	return out
}

// funcLines is the text of lines first to last (1-based, inclusive) of a file split after its
// line breaks, as a FuncSource's: line endings included but the last line's; false when they are
// not lines of the file.
func funcLines(lines []string, first, last int) (string, bool) {
	if first < 1 || last < first || last > len(lines) {
		return "", false
	}
	s := strings.Join(lines[first-1:last], "")
	s = strings.TrimSuffix(s, "\n")
	return strings.TrimSuffix(s, "\r"), true
}

// validQualName reports whether q is a unit's name: "name" or "Class.name", ASCII identifiers
// that are not keywords.
func validQualName(q string) bool {
	if len(q) > 200 {
		return false
	}
	parts := strings.Split(q, ".")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if !isIdent(p) || pylex.IsKeyword(p) {
			return false
		}
	}
	return true
}

// isIdent reports whether s is an ASCII Python identifier.
func isIdent(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// unit generates the inputs of u and makes items of those kept.
func (g *generation) unit(ctx context.Context, u genUnit) error {
	req := g.request(u.mod, u.code)
	req.Function = u.fn.QualName
	req.PerFunction, req.Attempts = g.in.PerFunction, g.in.Attempts
	req.Seed = genSeed(g.seed, g.it.Key, u.mod.rel, u.fn.QualName)
	if g.llm != nil {
		timeout := schemas.MaxLLMTimeout
		if g.in.LLM != nil {
			timeout = g.in.LLM.Timeout.Duration()
		}
		g.begin("asking for inputs of "+u.mod.label()+"."+u.fn.QualName, timeout)
		seeds, err := g.llm.Propose(ctx, u)
		g.alive()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			g.counts[schemas.CountGenLLMErrors]++
			g.lose("llm_error", 1)
		}
		req.Seeds = seeds
	}
	wall := g.in.Timeout.Duration()
	if left := g.deadline.Sub(g.now()); left < wall {
		wall = max(left, schemas.MinInputsTimeout)
	}
	req.Limits = g.limits(wall)
	gen, ok, err := g.call(ctx, req, "generating inputs for "+u.mod.label()+"."+u.fn.QualName)
	if err != nil {
		return err
	}
	if !ok {
		g.lose("sandbox_error", 1)
		return nil
	}
	g.y.Attempts += int64(min(max(gen.Attempts, 0), g.in.Attempts+len(req.Seeds)))
	if gen.Status != schemas.StatusOK {
		switch gen.Status {
		case schemas.StatusTimeout, schemas.StatusMemory:
			g.lose(string(gen.Status), 1)
		default:
			g.lose("exception", 1)
		}
		return nil
	}
	exec := unitLines(gen.Lines, u.fn)
	covered := map[int]bool{}
	kept, refused, repeats := 0, 0, 0
	calls := map[string]bool{}
	reason := ""
	for _, in := range gen.Inputs[:min(len(gen.Inputs), g.in.PerFunction)] {
		if !validSource(in.Source) || !sourceClaimable(in.Source, u.code, req.Seeds) || calls[in.Call] || !validCall(in.Call, u.fn.QualName) {
			refused++
			continue
		}
		calls[in.Call] = true
		if g.seen[u.mod.rel+"\x00"+in.Call] {
			// The tests made this very call: their item is there already.
			repeats++
			continue
		}
		if len(g.items) >= schemas.MaxGenItems {
			reason = "repository_cap"
			break
		}
		if g.code+len(u.code) > cmp.Or(g.maxCode, maxGenCodeBytes) {
			reason = "code_bytes"
			break
		}
		g.code += len(u.code)
		g.items = append(g.items, g.item(u, in, kept))
		if g.spans == nil {
			g.spans = map[string]pylex.Span{}
		}
		g.spans[g.items[len(g.items)-1].Key] = pylex.Span{First: u.fn.Line, Last: u.fn.EndLine}
		kept++
		if g.y.BySource == nil {
			g.y.BySource = map[string]int64{}
		}
		g.y.BySource[in.Source]++
		for _, l := range in.Lines[:min(len(in.Lines), maxGenLines)] {
			if exec[l] {
				covered[l] = true
			}
		}
	}
	g.counts[schemas.CountGenInputsRefused] += int64(refused)
	g.counts[schemas.CountGenTestCallRepeat] += int64(repeats)
	if kept == 0 {
		switch {
		case reason != "":
		case refused > 0:
			reason = "input_refused"
		case repeats > 0:
			reason = "duplicate"
		case gen.Reason != "":
			reason = gen.Reason
		default:
			reason = "no_candidates"
		}
		g.lose(reason, 1)
		return nil
	}
	g.y.WithInput++
	g.y.Inputs += int64(kept)
	if len(exec) > 0 {
		b := schemas.CoverageBucket(len(covered), len(exec))
		g.y.Coverage[b]++
		g.covs = append(g.covs, unitCov{exec: exec, bucket: b, first: len(g.items) - kept, n: kept})
	}
	return nil
}

// unitCov is what the coverage of a unit with kept inputs was counted from: its executable lines
// (the run's), its bucket, and its items (g.items[first:first+n]).
type unitCov struct {
	exec     map[int]bool
	bucket   int
	first, n int
}

// recount counts the coverage of each unit again from the lines its items' traced runs reached
// in its own frames (an attacker's review: the lines a generation run reports of its inputs are
// the run's to forge, and they made the yield report's coverage): traced holds the items' traced
// runs, by Key.
func (g *generation) recount(traced map[string]*TracedItem) {
	for _, c := range g.covs {
		covered := map[int]bool{}
		for _, it := range g.items[c.first : c.first+c.n] {
			t := traced[it.Key]
			if t == nil || t.Trace == nil {
				continue
			}
			tr := t.Trace
			for i := 0; i < tr.Len(); i++ {
				if l := tr.Lineno(i); c.exec[l] && tr.Kind(i) == schemas.EventLine && tr.Func(i) == it.QualName && tr.File(i) == it.Filename {
					covered[l] = true
				}
			}
		}
		if b := schemas.CoverageBucket(len(covered), len(c.exec)); b != c.bucket {
			g.y.Coverage[c.bucket]--
			g.y.Coverage[b]++
		}
	}
}

// unitLines are the executable lines a run reported of function f that are f's: within its lines.
func unitLines(lines []int, f sandbox.FoundFunction) map[int]bool {
	out := map[int]bool{}
	for _, l := range lines[:min(len(lines), maxGenLines)] {
		if l >= f.Line && l <= f.EndLine {
			out[l] = true
		}
	}
	return out
}

// validSource reports whether s is an input source a generation run may give.
func validSource(s string) bool {
	switch s {
	case schemas.InputSourceDoctest, schemas.InputSourceExample, schemas.InputSourceTyped,
		schemas.InputSourceFuzzed, schemas.InputSourceLLM:
		return true
	}
	return false
}

// sourceClaimable reports whether an input of a unit of module code may have input source
// source when the run was given seeds (an attacker's review: the source is the run's to forge,
// and it is a column of every row): llm only when a language model proposed seeds, doctest only
// when the module has a doctest (">>>").
func sourceClaimable(source, code string, seeds []string) bool {
	switch source {
	case schemas.InputSourceLLM:
		return len(seeds) > 0
	case schemas.InputSourceDoctest:
		return strings.Contains(code, ">>>")
	}
	return true
}

// item is the function-level item of in, the n-th input kept for u.
func (g *generation) item(u genUnit, in sandbox.GeneratedInput, n int) crawl.Item {
	return crawl.Item{
		Key:         fmt.Sprintf("%s#gen:%s:%s:%d", g.it.Key, u.mod.rel, u.fn.QualName, n),
		Path:        u.mod.rel,
		SourceID:    "gen:" + u.fn.QualName,
		Code:        u.code,
		Filename:    path.Base(u.mod.rel),
		Call:        in.Call,
		QualName:    u.fn.QualName,
		Func:        u.src,
		Module:      u.mod.name,
		RepoURL:     g.it.Path,
		Commit:      g.it.Repo.Resolved.Pin(),
		Deps:        g.deps(u.mod.rel),
		InputSource: in.Source,
	}
}

// request is the generation request of module m (text code), placed as funcPlace.request places
// a function item: imported where it lives when it has a dotted name, else run standalone.
func (g *generation) request(m genModule, code string) sandbox.GenerateRequest {
	req := sandbox.GenerateRequest{Code: code, Filename: path.Base(m.rel)}
	if m.name != "" && g.at.dir != "" {
		req.Module, req.Dir, req.Paths = m.name, g.at.dir, g.at.imports
		req.Filename = g.at.dir + "/" + m.rel
	}
	return req
}

// limits are the item's limits with a run's time.
func (g *generation) limits(wall time.Duration) sandbox.Limits {
	lim := g.lim
	lim.WallTime, lim.CPUTime = wall, wall
	return lim
}

// call makes one generation run in the generation's sandbox (started when there is none), as the
// watchdog's step named step. It reports false when the sandbox failed (it is closed, and given
// up after maxFunctionBreaks failures in a row or when it cannot start); the error is the
// context's only.
func (g *generation) call(ctx context.Context, req sandbox.GenerateRequest, step string) (*sandbox.Generation, bool, error) {
	if g.dead {
		return nil, false, nil
	}
	if g.sb == nil {
		sb, err := g.start(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			slog.Warn("no sandbox for generating a repository's inputs", "repo", g.it.Key, "err", err)
			g.dead = true
			return nil, false, nil
		}
		g.sb = sb
	}
	g.begin(step, req.Limits.WallTime+schemas.GenSlack)
	gen, err := g.sb.Generate(ctx, req)
	g.alive()
	if err == nil && gen == nil {
		err = errors.New("no generation")
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		g.close()
		if g.broke++; g.broke >= maxFunctionBreaks {
			g.dead = true
		}
		return nil, false, nil
	}
	g.broke = 0
	return gen, true, nil
}

// genSeed is the seed of the generation of function qual of the module in file rel of the item
// key, under the spec's seed: the same for every run of the spec, another for every function.
func genSeed(seed uint64, key, rel, qual string) int64 {
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	for _, s := range []string{key, rel, qual} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return int64(binary.BigEndian.Uint64(h.Sum(nil)[:8]) >> 1)
}

// readLimited reads file name, at most limit+1 bytes of it.
func readLimited(name string, limit int) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(limit)+1))
}

// genSkipDirs are the folders whose modules are not searched (besides hidden ones).
var genSkipDirs = map[string]bool{"tests": true, "test": true, "docs": true, "doc": true, "examples": true,
	"__pycache__": true, "site-packages": true}

// listModules lists the modules of the checkout dir whose functions are searched, in path order:
// its .py files (regular files, never links) but tests (test_*.py, *_test.py, conftest.py, and
// the files under tests/ and test/), setup.py, and the files under docs/, examples/ and hidden
// folders; each with its dotted name under the import roots (testcalls.ModuleName). At most
// MaxGenModules: the number of the others is returned too.
func listModules(ctx context.Context, dir string, roots []string) ([]genModule, int, error) {
	var out []genModule
	more := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // an unreadable folder: left out
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != dir && (strings.HasPrefix(name, ".") || genSkipDirs[name]) {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(name, ".py") || strings.HasPrefix(name, ".") ||
			strings.HasPrefix(name, "test_") || strings.HasSuffix(name, "_test.py") || name == "conftest.py" || name == "setup.py" {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if !plainPath(rel) {
			return nil
		}
		if len(out) >= schemas.MaxGenModules {
			more++
			return nil
		}
		out = append(out, genModule{rel: rel, name: testcalls.ModuleName(rel, roots)})
		return nil
	})
	return out, more, err
}

// plainPath reports whether a file's relative path is printable UTF-8 without control
// characters (a name with a line break or an escape would reach logs and requests).
func plainPath(rel string) bool {
	if !utf8.ValidString(rel) || len(rel) > 1024 {
		return false
	}
	return !strings.ContainsFunc(rel, func(r rune) bool { return r < 0x20 || r == 0x7f || r == utf8.RuneError })
}

// validCall reports whether call is a call of unit qual ("name" or "Class.name") whose arguments
// are Python literals: "name(ARGS)" for a function, "Class(ARGS).name(ARGS)" or
// "Class.name(ARGS)" for a method. Anything else (another callee, an attribute, a call or a name
// among the arguments, a comment, a second statement, a line break) is refused: the call is
// made by a run the module controls.
func validCall(call, qual string) bool {
	if len(call) > maxCallBytes || strings.ContainsAny(call, "\n\r\x00") || !utf8.ValidString(call) {
		return false
	}
	class, name, method := strings.Cut(qual, ".")
	if !method {
		rest, ok := strings.CutPrefix(call, qual+"(")
		return ok && argsThenEnd(rest)
	}
	if rest, ok := strings.CutPrefix(call, class+"."+name+"("); ok {
		return argsThenEnd(rest)
	}
	rest, ok := strings.CutPrefix(call, class+"(")
	if !ok {
		return false
	}
	args, rest, ok := scanArgs(rest)
	if !ok || !validArgs(args) {
		return false
	}
	rest, ok = strings.CutPrefix(rest, "."+name+"(")
	return ok && argsThenEnd(rest)
}

// argsThenEnd reports whether s, what follows a call's "(", is a literal argument list, its ")"
// and nothing more.
func argsThenEnd(s string) bool {
	args, rest, ok := scanArgs(s)
	return ok && rest == "" && validArgs(args)
}

// validArgList reports whether args, the text between a call's parentheses, is a list of literal
// arguments (testcalls.IsLiteral), positional ones first, then keyword ones (name=literal, each
// name once); empty for none, a trailing comma allowed.
func validArgList(args string) bool {
	if len(args) > maxCallBytes || strings.ContainsAny(args, "\n\r\x00") || !utf8.ValidString(args) {
		return false
	}
	inner, rest, ok := scanArgs(args + ")")
	return ok && rest == "" && inner == args && validArgs(args)
}

// validArgs is validArgList for args already scanned (its brackets balanced, its strings closed).
func validArgs(args string) bool {
	parts, ok := splitArgs(args)
	if !ok {
		return false
	}
	keywords := map[string]bool{}
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			if i == len(parts)-1 && i > 0 || len(parts) == 1 {
				continue // a trailing comma, or no argument
			}
			return false
		}
		if k, v, ok := keywordArg(p); ok {
			if keywords[k] {
				return false
			}
			keywords[k] = true
			p = v
		} else if len(keywords) > 0 {
			return false // a positional argument after a keyword one
		}
		if !testcalls.IsLiteral(p) {
			return false
		}
	}
	return true
}

// keywordArg splits a keyword argument "name=value"; false when p is not one.
func keywordArg(p string) (string, string, bool) {
	i := strings.IndexByte(p, '=')
	if i <= 0 || strings.HasPrefix(p[i:], "==") {
		return "", "", false
	}
	k := strings.TrimSpace(p[:i])
	if !isIdent(k) || pylex.IsKeyword(k) {
		return "", "", false
	}
	return k, p[i+1:], true
}

// scanArgs reads s, what follows a call's "(", up to its matching ")": the text between, what
// follows, and false when brackets do not match or a string is not closed. Strings are skipped
// whole (their quotes, escapes and triple quotes), so brackets and commas in them do not count.
// Linear in s.
func scanArgs(s string) (string, string, bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'', '"':
			end, ok := stringEnd(s, i)
			if !ok {
				return "", "", false
			}
			i = end - 1
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth == 0 {
				if c != ')' {
					return "", "", false
				}
				return s[:i], s[i+1:], true
			}
			depth--
		}
	}
	return "", "", false
}

// stringEnd is the offset just past the string whose opening quote is at s[i] (triple-quoted or
// not; a backslash escapes the next byte, as in raw strings too for finding the end).
func stringEnd(s string, i int) (int, bool) {
	q := s[i]
	if strings.HasPrefix(s[i:], string([]byte{q, q, q})) {
		for j := i + 3; j < len(s); j++ {
			if s[j] == '\\' {
				j++
				continue
			}
			if strings.HasPrefix(s[j:], string([]byte{q, q, q})) {
				return j + 3, true
			}
		}
		return 0, false
	}
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			return j + 1, true
		}
	}
	return 0, false
}

// splitArgs splits args (scanned: brackets balanced, strings closed) at its top-level commas.
func splitArgs(args string) ([]string, bool) {
	var parts []string
	depth, from := 0, 0
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case '\'', '"':
			end, ok := stringEnd(args, i)
			if !ok {
				return nil, false
			}
			i = end - 1
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth--; depth < 0 {
				return nil, false
			}
		case ',':
			if depth == 0 {
				parts = append(parts, args[from:i])
				from = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, false
	}
	return append(parts, args[from:]), true
}

// generateInputs generates the inputs of the functions of the modules of repository it, checked
// out in w with import roots roots (imports, absolute), and traces the items made of those kept
// with traceFunctions (cfg is the functions' sandbox configuration, as traceRepo makes it): their
// TracedItems join rt.Functions, and what generation gave is rt.Gen. found is the Finder of the
// functions its tests call (nil when none were looked for): an input its tests gave already is
// not made twice. Only the context's error is returned.
func (trc *Tracer) generateInputs(ctx context.Context, wd *watchdog, cfg sandbox.Config, w *crawl.Workdir, roots, imports []string, it crawl.Item,
	rt *RepoTrace, found *testcalls.Finder, lim sandbox.Limits, hidden workerPaths, alive func()) error {
	in := trc.inputs.WithDefaults()
	seen := map[string]bool{}
	if found == nil {
		found = testcalls.NewFinder(ctx, w.Dir, roots, it, nil)
	} else {
		for _, c := range found.Items() {
			seen[c.Path+"\x00"+c.Call] = true
		}
	}
	gcfg := functionConfig(cfg, w.Dir)
	start := func(ctx context.Context) (genSandbox, error) {
		if trc.genStart != nil {
			return trc.genStart(ctx, gcfg)
		}
		sb, err := sandbox.New(ctx, gcfg)
		if err != nil {
			return nil, err
		}
		return sb, nil
	}
	began := time.Now()
	g := &generation{it: it, dir: w.Dir, roots: roots, at: placeOf(w.Dir, imports), in: in, seed: trc.seed, lim: lim,
		start: start, llm: trc.llm, deps: found.Deps, seen: seen, counts: rt.Counts, alive: alive, begin: wd.begin,
		now: time.Now, budget: in.GenerationBudget(), y: &schemas.GenYield{}}
	if g.llm == nil && in.LLM != nil {
		g.llm = newLLMProposer(*in.LLM, trc.seed)
	}
	if err := g.run(ctx); err != nil {
		return err
	}
	rt.Gen, rt.GenWall = g.y, time.Since(began)
	if len(g.items) == 0 {
		return nil
	}
	step := lim.WallTime
	if it.Repo.Reexecutes() {
		step *= 2
	}
	wd.begin("a function of its generated inputs", step)
	traced, err := trc.traceFunctions(ctx, cfg, w, imports, it, g.items, rt.Counts, lim, hidden, func() {
		alive()
		wd.begin("a function of its generated inputs", step)
	})
	if err != nil {
		return err
	}
	for i := range traced {
		t := &traced[i]
		if t.Trace == nil {
			continue
		}
		// The traced run must have called the def its item names (the module may rebind the
		// name, or the class, between the generator's run and this one): else the row would show
		// one function's source beside another's trace.
		if s, ok := g.spans[t.Item.Key]; ok && !ranUnit(t.Trace, t.Item.Filename, t.Item.QualName, s.First, s.Last) {
			t.Trace, t.Status = nil, schemas.StatusInvalid
			t.Detail = "the traced run did not call " + t.Item.QualName + " of " + t.Item.Path
			rt.Counts[schemas.CountGenInputsRefused]++
			continue
		}
		g.y.Traced++
	}
	byKey := make(map[string]*TracedItem, len(traced))
	for i := range traced {
		byKey[traced[i].Item.Key] = &traced[i]
	}
	g.recount(byKey)
	rt.Functions = append(rt.Functions, traced...)
	return nil
}
