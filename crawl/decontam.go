package crawl

import (
	"slices"
	"strconv"
	"strings"

	"github.com/ndtrace/ndtrace/internal/pylex"
	"github.com/ndtrace/ndtrace/schemas"
)

// Identifier-anonymised token n-gram decontamination.
//
// An exact hash of the normalized source (SourceKey) misses an evaluation function whose variables
// were renamed, that gained a docstring, was reformatted (ast.unparse) or sits in a module among
// other functions. On top of it, every function of a candidate's code is compared with the
// functions of an evaluation set by the usual LLM-decontamination measure, the overlap of token
// n-grams, on tokens that do not depend on names, layout or comments:
//
//   - Python source is cut into tokens (names, numbers, strings, operators); comments, line breaks,
//     indentation and docstrings (a logical line holding only string literals) are dropped, and so
//     are parentheses right after a keyword (if(x): is if x:);
//   - string literals become their content without prefix or quotes (ast.unparse requotes);
//   - each function's tokens give the set of its n-grams (n consecutive tokens, hashed; a
//     function shorter than n tokens gives one gram of all its tokens), in which a name that is
//     not a keyword, a builtin or an attribute (after ".") is a placeholder: a parameter of the
//     function by its position ("$p0", "$p1"), any other name numbered by its first appearance
//     within the gram. Renaming variables, parameters or the function keeps every gram; a
//     statement added to the function changes only the grams that overlap it; two functions of
//     the same shape but another flow of names, or of parameters, differ.
//
// TestDecontamRewrites measured the choices on 80 CruxEval functions rewritten 8 ways, against the
// 7,187 functions of the standard library and of our test repositories (the table is in its log).
// With n = 10 and threshold 0.5, 96.2% of the rewrites are removed (every one of 7 kinds, and 53
// of 80 functions with a logging statement added at the top) and no unrelated function matches.
// Names numbered per function instead of per gram miss almost every function with a statement
// added (its new name renumbers the rest: 89.3% overall); one generic placeholder for every name,
// or names numbered per gram without parameter positions, match unrelated functions of the same
// shape (2 and 1); 8-grams or a threshold of 0.4 match unrelated functions (3, 2); 13-grams or a
// threshold of 0.7 remove fewer edited functions (95.8%, 90.1%).
//
// A candidate function matches an evaluation function when at least the threshold share of the
// evaluation function's n-grams is found among the candidate's, and of the candidate's among the
// evaluation function's: a short evaluation function made of a common idiom is not found in every
// longer function that uses the idiom. An evaluation function of fewer than n grams (under 2n-1
// tokens) matches only all of them both ways: any two short functions share most of their few
// grams through their signature alone. Work is linear: a function reads at most
// MaxFunctionTokens tokens, and the index maps a gram's hash to the evaluation functions holding
// it, leaving out grams held by more than maxPosting of them (too common to identify one).

const (
	// DefaultNgram is the n-gram length decontamination uses when a spec gives none.
	DefaultNgram = schemas.DefaultEvalNgram
	// DefaultThreshold is the share of n-grams that must be found for a match, when a spec gives
	// none.
	DefaultThreshold = schemas.DefaultEvalThreshold
	// MaxFunctionTokens caps the tokens read per function (candidate or evaluation).
	MaxFunctionTokens = 4096
	// maxPosting is the most evaluation functions an indexed n-gram may belong to.
	maxPosting = 256
)

// pyToken is a token of Python source.
type pyToken struct {
	text   string
	kind   byte // 'n' name, 'd' number, 's' string, 'o' operator
	start  bool // first token of a logical line
	indent int  // the logical line's indentation width
}

// pyKeywords are Python's keywords: they are kept as they are. The soft keywords (match, case,
// type) are names as often as not, and anonymised with the names (type is a builtin too).
var pyKeywords = setOf(`False None True and as assert async await break class continue def del elif else except
finally for from global if import in is lambda nonlocal not or pass raise return try while with yield`)

// pyBuiltins are the names of Python's builtins: kept as they are (renaming a variable never
// renames them).
var pyBuiltins = setOf(`ArithmeticError AssertionError AttributeError BaseException Exception IndexError KeyError
LookupError NameError NotImplemented NotImplementedError OSError OverflowError RuntimeError StopIteration TypeError
ValueError ZeroDivisionError Ellipsis abs aiter all anext any ascii bin bool bytearray bytes callable chr
classmethod compile complex delattr dict dir divmod enumerate eval exec filter float format frozenset getattr
globals hasattr hash hex id input int isinstance issubclass iter len list locals map max memoryview min next
object oct open ord pow print property range repr reversed round set setattr slice sorted staticmethod str sum
super tuple type vars zip self cls`)

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// lexOptions read Python source as tokenizePython always has: only '\n' breaks a line, a number
// is a whole literal (a hex one ends before a sign), "..." is one token, a stray backslash or
// vertical tab is an operator, and a line starting with a carriage return is skipped.
var lexOptions = pylex.Options{LFOnly: true, Floats: true, NoHexSign: true, Ellipsis: true, StrayOps: true, SkipCRLines: true}

// tokenizePython calls fn with the tokens of src in order, until fn returns false. It never fails:
// text that is not Python gives some tokens, in time linear in len(src).
func tokenizePython(src string, fn func(pyToken) bool) {
	// Python ends a line at "\n", "\r\n" or a lone "\r" (as NormalizeSource and pylex read it).
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(strings.ReplaceAll(src, "\r\n", "\n"), "\r", "\n")
	}
	lx := pylex.NewLexerWith(src, lexOptions)
	indent := 0
	next := lx.Next()
	for {
		t := next
		next = lx.Next()
		if t.Kind == pylex.End {
			return
		}
		if t.First {
			indent = indentWidth(src[t.LineStart:])
		}
		out := pyToken{text: t.Text, start: t.First, indent: indent}
		switch t.Kind {
		case pylex.Newline:
			continue
		case pylex.Name:
			out.kind = 'n'
			if next.Kind == pylex.String && next.Offset == t.Offset+len(t.Text) && isStringPrefix(t.Text) {
				// A prefix pylex does not take (bb, ub): one string, as it always was.
				out.kind, out.text = 's', stringContent(next.Text)
				next = lx.Next()
			}
		case pylex.Number:
			out.kind = 'd'
		case pylex.String:
			out.kind = 's'
			if q := strings.IndexAny(t.Text, `'"`); q > 0 && !isStringPrefix(t.Text[:q]) {
				// A prefix pylex takes and this reading does not (t): a name, then the string.
				if !fn(pyToken{text: t.Text[:q], kind: 'n', start: t.First, indent: indent}) {
					return
				}
				out.start = false
			}
			out.text = stringContent(t.Text[strings.IndexAny(t.Text, `'"`):])
		default:
			out.kind = 'o'
		}
		if !fn(out) {
			return
		}
	}
}

// indentWidth is the indentation of a line's leading spaces, tabs (to the next multiple of 8)
// and form feeds.
func indentWidth(line string) int {
	w := 0
	for j := 0; j < len(line) && (line[j] == ' ' || line[j] == '\t' || line[j] == '\f'); j++ {
		if line[j] == '\t' {
			w += 8 - w%8
		} else {
			w++
		}
	}
	return w
}

// isStringPrefix reports whether p is a string literal prefix (r, b, u, f, rb, br, fr, rf, ...).
func isStringPrefix(p string) bool {
	if len(p) > 2 {
		return false
	}
	for i := 0; i < len(p); i++ {
		switch p[i] | 0x20 {
		case 'r', 'b', 'u', 'f':
		default:
			return false
		}
	}
	return true
}

// stringContent is a string literal's text between its quotes (without the quotes).
func stringContent(lit string) string {
	q := lit[0]
	n := 1
	if strings.HasPrefix(lit, strings.Repeat(string(q), 3)) {
		n = 3
	}
	body := lit[n:]
	if len(body) >= n && strings.HasSuffix(body, lit[:n]) {
		body = body[:len(body)-n]
	}
	return "'" + body
}

// pyFunctions calls fn with the anonymised tokens of every function (def) of src, nested ones on
// their own as well, at most MaxFunctionTokens tokens each. A function's docstrings and other
// string-only statements are left out.
func pyFunctions(src string, fn func(toks []string)) {
	// The source is read in chunks that start at a line of no indentation (every function ends
	// there), each kept up to maxChunkTokens tokens: memory is bounded, and a large chunk (a data
	// table, a huge statement) hides only the functions it holds itself, not those after it.
	var lines [][]pyToken // the chunk's logical lines
	var cur []pyToken
	chunk, total, work := 0, 0, 0
	skip := false // the chunk went past maxChunkTokens: skip to the next one
	tokenizePython(src, func(t pyToken) bool {
		total++
		if t.start {
			if len(cur) > 0 {
				lines = append(lines, cur)
			}
			cur = nil
			if t.indent == 0 {
				chunkFunctions(lines, 4*total+MaxFunctionTokens, &work, fn)
				lines, chunk, skip = lines[:0], 0, false
			}
		}
		if skip {
			return true
		}
		cur = append(cur, t)
		if chunk++; chunk >= maxChunkTokens {
			lines, cur, skip = append(lines, cur), nil, true
			chunkFunctions(lines, 4*total+MaxFunctionTokens, &work, fn)
			lines = lines[:0]
		}
		return true
	})
	if len(cur) > 0 {
		lines = append(lines, cur)
	}
	chunkFunctions(lines, 4*total+MaxFunctionTokens, &work, fn)
}

// maxChunkTokens bounds the tokens pyFunctions keeps of a chunk of source (a top-level statement
// with what it holds).
const maxChunkTokens = 64 * MaxFunctionTokens

// chunkFunctions calls fn with the anonymised tokens of every function of lines (pyFunctions).
// A nested function is read with each function around it: the work on nested functions, added
// up in *work, stops at budget (a few times the source's tokens), so that deep nesting cannot make
// it quadratic. A function no def encloses (a top-level function, a method) is always read: their
// bodies are disjoint, so together they read each token once, and nesting placed early in a
// module cannot use up the budget and hide the functions after it.
func chunkFunctions(lines [][]pyToken, budget int, work *int, fn func(toks []string)) {
	var defs []int // the indentation of the defs enclosing the current line
	for i, l := range lines {
		ind := l[0].indent
		for len(defs) > 0 && defs[len(defs)-1] >= ind {
			defs = defs[:len(defs)-1]
		}
		first := 0
		if l[0].text == "async" && len(l) > 1 {
			first = 1
		}
		if l[first].kind != 'n' || l[first].text != "def" {
			continue
		}
		nested := len(defs) > 0
		defs = append(defs, ind)
		if nested && *work >= budget {
			continue
		}
		var a anonymiser
		a.addDef(l[first:])
		read := len(l)
		for _, m := range lines[i+1:] {
			if m[0].indent <= ind || read >= MaxFunctionTokens {
				break
			}
			read += len(m) // docstrings count too: the work per function is bounded
			if stringOnly(m) {
				continue
			}
			a.add(m)
		}
		if nested {
			*work += read
		}
		if len(a.out) > MaxFunctionTokens {
			a.out = a.out[:MaxFunctionTokens]
		}
		fn(a.out)
	}
}

// stringOnly reports whether a logical line holds string literals only (a docstring).
func stringOnly(l []pyToken) bool {
	for _, t := range l {
		if t.kind != 's' {
			return false
		}
	}
	return true
}

// anonymiser renders a function's tokens for n-grams: a name to anonymise as nameMark and the name
// (gramHashes numbers it), anything else as it is. A pair of parentheses right after a keyword
// (if(x):, return (a, b), while (n > 0):) is dropped: ast.unparse drops or adds such redundant
// ones.
type anonymiser struct {
	out    []string
	prev   pyToken
	parens []bool         // open parentheses and brackets of the line: dropped or not
	params map[string]int // the function's parameters, by position
}

// addDef appends the tokens of the function's def line, whose names after the function's own
// are its parameters (and the names of default values): in the body, a parameter is a
// placeholder of its position ("$p0", "$p1", ...), the same in every gram.
func (a *anonymiser) addDef(l []pyToken) {
	a.params = map[string]int{}
	named := false
	for _, t := range l {
		if t.kind != 'n' || pyKeywords[t.text] || pyBuiltins[t.text] {
			continue
		}
		if !named {
			named = true // the function's name
			continue
		}
		if _, ok := a.params[t.text]; !ok && paramNames {
			a.params[t.text] = len(a.params)
		}
	}
	a.add(l)
}

// paramNames numbers parameters by position (measured in tests only when off).
var paramNames = true

// nameMark starts an anonymised name's token.
const nameMark = "\x00"

// add appends the tokens of a logical line.
func (a *anonymiser) add(l []pyToken) {
	a.parens = a.parens[:0]
	a.prev = pyToken{}
	for _, t := range l {
		text := t.text
		if t.kind == 'o' {
			switch text {
			case "(", "[", "{":
				drop := text == "(" && a.prev.kind == 'n' && pyKeywords[a.prev.text]
				a.parens = append(a.parens, drop)
				if drop {
					a.prev = t
					continue
				}
			case ")", "]", "}":
				if n := len(a.parens); n > 0 {
					drop := a.parens[n-1]
					a.parens = a.parens[:n-1]
					if drop {
						a.prev = t
						continue
					}
				}
			}
		}
		if t.kind == 'n' && !pyKeywords[text] && !pyBuiltins[text] && a.prev.text != "." {
			if k, ok := a.params[text]; ok {
				text = "$p" + strconv.Itoa(k)
			} else {
				text = nameMark + text
			}
		}
		a.out = append(a.out, text)
		a.prev = t
	}
}

// How names become placeholders in n-grams (nameMode).
const (
	// namesPerGram numbers the names of each n-gram by first appearance within the gram: renaming
	// keeps every gram, and a statement added to a function changes only the grams that overlap
	// it (the default).
	namesPerGram = iota
	// namesPerFunction numbers names by first appearance within the function: a name added before
	// the others renumbers every gram after it.
	namesPerFunction
	// namesGeneric makes every name one placeholder: blind to how names flow, it matches
	// unrelated functions of the same shape.
	namesGeneric
)

// nameMode is how names become placeholders (namesPerGram; the others are measured in tests).
var nameMode = namesPerGram

// placeholderHash is the hash of placeholder k (-1: the generic one).
func placeholderHash(k int) uint64 {
	return (uint64(k+2) * 0x9e3779b97f4a7c15) ^ 0x5bd1e9955bd1e995
}

// gramHashes returns the distinct hashes of the n-grams of a function's tokens (one of all of them
// when there are fewer than n), in order of first appearance, names numbered as nameMode says.
// Its time is O(len(toks)·n).
func gramHashes(toks []string, n int) []uint64 {
	if len(toks) == 0 {
		return nil
	}
	th := make([]uint64, len(toks))
	name := make([]int32, len(toks)) // per token: -1, or the name's number in the function
	ids := map[string]int32{}
	for i, t := range toks {
		name[i] = -1
		if rest, ok := strings.CutPrefix(t, nameMark); ok {
			id, seen := ids[rest]
			if !seen {
				id = int32(len(ids))
				ids[rest] = id
			}
			name[i] = id
			switch nameMode {
			case namesPerFunction:
				th[i] = placeholderHash(int(id))
			case namesGeneric:
				th[i] = placeholderHash(-1)
			}
			continue
		}
		th[i] = fnv64(t)
	}
	if len(toks) < n {
		n = len(toks)
	}
	seen := make(map[uint64]bool, len(toks)-n+1)
	out := make([]uint64, 0, len(toks)-n+1)
	local := make([]int32, 0, n) // the names of the window, in order of first appearance
	for i := 0; i+n <= len(toks); i++ {
		h := uint64(n)
		local = local[:0]
		for j := i; j < i+n; j++ {
			x := th[j]
			if name[j] >= 0 && nameMode == namesPerGram {
				k := slices.Index(local, name[j])
				if k < 0 {
					k = len(local)
					local = append(local, name[j])
				}
				x = placeholderHash(k)
			}
			h = (h ^ x) * 0x100000001b3
			h ^= h >> 29
		}
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

func fnv64(s string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	return h
}

// ngramIndex maps n-gram hashes to the evaluation functions holding them.
type ngramIndex struct {
	n         int
	threshold float64
	post      map[uint64][]int32
	grams     []int32 // per evaluation function: its indexed grams
	item      []int32 // per evaluation function: the index of its item in the set
	postings  int     // the entries of post, added up (bounded by MaxEvalGrams)
}

// newNgramIndex returns an empty index of n-grams with a match threshold.
func newNgramIndex(n int, threshold float64) *ngramIndex {
	if n <= 0 {
		n = DefaultNgram
	}
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	return &ngramIndex{n: n, threshold: threshold, post: map[uint64][]int32{}}
}

// addItem indexes the functions of evaluation item item.
func (x *ngramIndex) addItem(item int, code string) {
	pyFunctions(code, func(toks []string) {
		f := int32(len(x.grams))
		x.grams = append(x.grams, 0)
		x.item = append(x.item, int32(item))
		grams := gramHashes(toks, x.n)
		for _, h := range grams {
			x.post[h] = append(x.post[h], f)
		}
		x.postings += len(grams)
	})
}

// finish drops the grams too common to identify a function and counts each function's grams.
func (x *ngramIndex) finish() {
	for h, fs := range x.post {
		if len(fs) > maxPosting {
			delete(x.post, h)
			continue
		}
		for _, f := range fs {
			x.grams[f]++
		}
	}
}

// match returns the item of the evaluation function a function of code matches best, with its
// share of grams found, if one reaches the threshold.
func (x *ngramIndex) match(code string) (item int, share float64, ok bool) {
	best, bestItem := 0.0, -1
	pyFunctions(code, func(toks []string) {
		if i, s, ok := x.matchTokens(toks); ok && (s > best || s == best && i < bestItem) {
			best, bestItem = s, i
		}
	})
	return bestItem, best, bestItem >= 0
}

// scores calls fn with every evaluation function sharing grams with the function toks and its
// score: the smaller of the share of its grams found in toks and the share of toks' grams found
// in it. Both must be high: a short evaluation function made of a common idiom (a loop appending
// to a list) is not matched by every longer function that starts with the idiom, nor a short
// candidate by every evaluation function that holds it.
func (x *ngramIndex) scores(toks []string, fn func(f int32, share float64)) {
	hits := map[int32]int32{}
	grams := gramHashes(toks, x.n)
	for _, h := range grams {
		for _, f := range x.post[h] {
			hits[f]++
		}
	}
	for f, k := range hits {
		s := float64(k) / float64(x.grams[f])
		if !evalShareOnly {
			s = min(s, float64(k)/float64(len(grams)))
		}
		fn(f, s)
	}
}

// evalShareOnly scores by the share of the evaluation function's grams alone (measured in tests
// only).
var evalShareOnly = false

// matchTokens is match for the anonymised tokens of one function (-1 for no item).
func (x *ngramIndex) matchTokens(toks []string) (item int, share float64, ok bool) {
	best, bestItem := 0.0, -1
	x.scores(toks, func(f int32, s float64) {
		if !x.passes(f, s) {
			return
		}
		if i := int(x.item[f]); s > best || s == best && i < bestItem {
			best, bestItem = s, i
		}
	})
	return bestItem, best, bestItem >= 0
}

// passes reports whether score s matches evaluation function f: at least the threshold, or, for
// a function of fewer than n grams (under 2n-1 tokens), all of them both ways. Any two short
// functions share most of their few grams through the signature alone (def $0 ( $1 , $2 ) :),
// so a short one matches only the same tokens.
func (x *ngramIndex) passes(f int32, s float64) bool {
	if int(x.grams[f]) < x.n {
		return s >= 1
	}
	return s >= x.threshold
}

// matchAll returns the items of every evaluation function the function toks matches, sorted.
func (x *ngramIndex) matchAll(toks []string) []int {
	var out []int
	x.scores(toks, func(f int32, s float64) {
		if x.passes(f, s) && !slices.Contains(out, int(x.item[f])) {
			out = append(out, int(x.item[f]))
		}
	})
	slices.Sort(out)
	return out
}

// Match reports whether code (a module, a function, a CODE context) holds a function of the set:
// code normalizes to an item's source (SourceKey), or one of its functions has at least the
// threshold share of the n-grams of a function of an item. item names the evaluation item
// matched: its id, or "line N".
func (e *EvalSet) Match(code string) (item string, hit bool) {
	if k, ok := e.byKey[SourceKey(code)]; ok {
		return e.Items[k], true
	}
	if e.index == nil {
		return "", false
	}
	if i, _, ok := e.index.match(code); ok {
		return e.Items[i], true
	}
	return "", false
}
