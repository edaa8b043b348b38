package pylex

import "strings"

// keywords are Python's keywords (hard and soft): never a name a module binds or code uses.
var keywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true, "async": true,
	"await": true, "break": true, "class": true, "continue": true, "def": true, "del": true, "elif": true,
	"else": true, "except": true, "finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true, "not": true, "or": true,
	"pass": true, "raise": true, "return": true, "try": true, "while": true, "with": true, "yield": true,
}

// IsKeyword reports whether s is one of Python's hard keywords (soft keywords such as match, case
// and type can be names).
func IsKeyword(s string) bool { return keywords[s] }

// Uses calls use for every identifier src uses as a name: each Name token that is not a keyword,
// not an attribute (after a dot) and not in an import statement (whose names are modules and the
// names it binds), and the names inside the replacement fields of f-strings.
// A name may be reported more than once. Linear in len(src).
func Uses(src string, use func(name string)) {
	l := NewLexer(src)
	var prev Token
	inImport := false
	for {
		t := l.Next()
		switch t.Kind {
		case End:
			return
		case Name:
			start := t.First || prev.Is(";") || prev.Is(":")
			switch {
			case start && (t.Text == "import" || t.Text == "from"):
				inImport = true
			case !inImport && !prev.Is(".") && !keywords[t.Text]:
				use(t.Text)
			}
		case String:
			if !inImport {
				fstringUses(t.Text, use)
			}
		case Newline:
			inImport = false
		case Op:
			if t.Is(";") {
				inImport = false
			}
		}
		prev = t
	}
}

// UsedSet returns the set of names src uses (Uses).
func UsedSet(src string) map[string]bool {
	set := map[string]bool{}
	Uses(src, func(n string) { set[n] = true })
	return set
}

// fstringUses calls use for the names of the replacement fields of the f-string literal lit (none
// if lit is not an f-string). Each field is lexed as code once: linear in len(lit).
func fstringUses(lit string, use func(string)) {
	p := 0
	for p < len(lit) && lit[p] != '\'' && lit[p] != '"' {
		p++
	}
	if !strings.ContainsAny(lit[:p], "fF") {
		return
	}
	body := lit[p:]
	for i := 0; i < len(body); i++ {
		if body[i] != '{' {
			continue
		}
		if i+1 < len(body) && body[i+1] == '{' {
			i++
			continue
		}
		depth, j := 1, i+1
		for ; j < len(body) && depth > 0; j++ {
			switch body[j] {
			case '{':
				depth++
			case '}':
				depth--
			}
		}
		Uses(body[i+1:j-1+boolInt(depth > 0)], use)
		i = j - 1
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// StmtKind is the kind of a top-level statement.
type StmtKind string

// Statement kinds.
const (
	KindImport   StmtKind = "import"   // import or from-import
	KindAssign   StmtKind = "assign"   // an assignment (plain, annotated or augmented)
	KindClass    StmtKind = "class"    // a class statement, decorators included
	KindDef      StmtKind = "def"      // a def or async def statement, decorators included
	KindCompound StmtKind = "compound" // if, try, with, for, while or match that binds names
	KindOther    StmtKind = "other"    // anything else (an expression, a docstring)
)

// Span is a range of lines, 1-based and inclusive.
type Span struct{ First, Last int }

// Stmt is one top-level statement of a module.
type Stmt struct {
	Kind StmtKind
	// Span is the statement's lines, from its first decorator to its last token (trailing
	// comments and blank lines not included).
	Span Span
	// Binds are the names the statement binds at module level: an import's names (the "as" name,
	// or a plain import's first component), an assignment's targets, the class or def name, and
	// for a compound statement the names those statements inside it bind.
	Binds []string
	// Header is, for a class, the lines that make its header: the class line (decorators and a
	// multi-line base list included) and each class-level statement that is not a def, a
	// decorated def or a docstring (its attributes), in order. nil for other kinds.
	Header []Span
}

// line is one logical line: its tokens (the Newline left out), and its indent.
type line struct {
	toks   []Token
	indent int
}

// TopLevel returns the top-level statements of module source src in source order. Statements
// sharing a line (a; b) are one statement. Linear in len(src).
func TopLevel(src string) []Stmt {
	var stmts []Stmt
	var cur []line // the logical lines of the statement being read
	flush := func() {
		if len(cur) > 0 {
			stmts = append(stmts, statement(cur))
			cur = cur[:0]
		}
	}
	l := NewLexer(src)
	var ln line
	for {
		t := l.Next()
		if t.Kind == End {
			break
		}
		if t.Kind != Newline {
			if t.First {
				ln.indent = t.Indent
			}
			ln.toks = append(ln.toks, t)
			continue
		}
		if len(ln.toks) == 0 {
			continue
		}
		// A line at indent 0 starts a statement, unless it continues a compound one (else,
		// except, ...) or follows decorators.
		if ln.indent == 0 && len(cur) > 0 {
			head := ln.toks[0]
			cont := head.Kind == Name && (head.Text == "else" || head.Text == "elif" || head.Text == "except" || head.Text == "finally")
			decorated := true
			for _, c := range cur {
				if c.indent != 0 || !c.toks[0].Is("@") {
					decorated = false
				}
			}
			if !cont && !decorated {
				flush()
			}
		}
		cur = append(cur, ln)
		ln = line{}
	}
	flush()
	return stmts
}

// statement analyses the logical lines of one top-level statement.
func statement(lines []line) Stmt {
	first, last := lines[0].toks[0], lines[len(lines)-1].toks
	st := Stmt{Span: Span{first.Line, last[len(last)-1].EndLine}, Kind: KindOther}
	// Past the decorators.
	k := 0
	for k < len(lines)-1 && lines[k].toks[0].Is("@") {
		k++
	}
	head := lines[k].toks
	switch {
	case head[0].IsName("class") || head[0].IsName("def") || head[0].IsName("async") && len(head) > 1 && head[1].IsName("def"):
		n := 1
		if head[0].IsName("async") {
			n = 2
		}
		st.Kind = KindDef
		if head[0].IsName("class") {
			st.Kind = KindClass
			st.Header = classHeader(lines, k)
		}
		if len(head) > n && head[n].Kind == Name {
			st.Binds = []string{head[n].Text}
		}
	case len(lines) == 1:
		st.Kind, st.Binds = simple(head)
	default:
		// A compound statement: what its inner statements bind (not those inside a def or class
		// within it).
		skip := -1 // the indent of the def or class whose body is being skipped
		for _, ln := range lines {
			if skip >= 0 && ln.indent > skip {
				continue
			}
			skip = -1
			toks := ln.toks
			// Past a clause's header on the same line: `if x: import y`, `else: Y = 1`.
			if toks[0].Kind == Name && compoundHead[toks[0].Text] {
				c := colonAt(toks)
				if c < 0 || c == len(toks)-1 {
					continue
				}
				toks = toks[c+1:]
			}
			if len(toks) > 0 && (toks[0].IsName("class") || toks[0].IsName("def")) {
				if len(toks) > 1 && toks[1].Kind == Name {
					st.Binds = append(st.Binds, toks[1].Text)
				}
				skip = ln.indent
				continue
			}
			_, b := simple(toks)
			st.Binds = append(st.Binds, b...)
		}
		if len(st.Binds) > 0 {
			st.Kind = KindCompound
		}
	}
	return st
}

// compoundHead are the keywords that start a compound statement's clause.
var compoundHead = map[string]bool{"if": true, "elif": true, "else": true, "try": true, "except": true,
	"finally": true, "with": true, "for": true, "while": true, "match": true, "case": true, "async": true}

// colonAt returns the index of the first ":" outside brackets in toks, -1 if none.
func colonAt(toks []Token) int {
	depth := 0
	for i, t := range toks {
		switch {
		case t.Is("(") || t.Is("[") || t.Is("{"):
			depth++
		case t.Is(")") || t.Is("]") || t.Is("}"):
			depth--
		case t.Is(":") && depth <= 0:
			return i
		case t.IsName("lambda"):
			return -1 // a lambda's colon is not a clause's
		}
	}
	return -1
}

// classHeader returns the header spans of the class statement whose lines are lines, its class
// line at index k: from the first decorator to the class line's end, then each statement of the
// class body at the body's indent that is not a def, a decorator or a string (with the lines
// under it).
func classHeader(lines []line, k int) []Span {
	cl := lines[k].toks
	spans := []Span{{lines[0].toks[0].Line, cl[len(cl)-1].EndLine}}
	if k+1 >= len(lines) {
		return spans
	}
	body := lines[k+1].indent
	for i := k + 1; i < len(lines); i++ {
		ln := lines[i]
		if ln.indent != body {
			continue
		}
		h := ln.toks[0]
		if h.Is("@") || h.IsName("def") || h.IsName("async") || h.Kind == String && len(ln.toks) == 1 {
			continue
		}
		end := i
		for end+1 < len(lines) && lines[end+1].indent > body {
			end++
		}
		et := lines[end].toks
		spans = append(spans, Span{h.Line, et[len(et)-1].EndLine})
	}
	return spans
}

// simple returns the kind of the simple statement toks (statements joined by ";" included) and
// the names it binds.
func simple(toks []Token) (StmtKind, []string) {
	kind := KindOther
	var binds []string
	for len(toks) > 0 {
		end := 0
		depth := 0
		for end < len(toks) && !(depth <= 0 && toks[end].Is(";")) {
			switch {
			case toks[end].Is("(") || toks[end].Is("[") || toks[end].Is("{"):
				depth++
			case toks[end].Is(")") || toks[end].Is("]") || toks[end].Is("}"):
				depth--
			}
			end++
		}
		k, b := simpleOne(toks[:end])
		if k != KindOther && (kind == KindOther || kind == KindAssign) {
			kind = k
		}
		binds = append(binds, b...)
		if end < len(toks) {
			end++
		}
		toks = toks[end:]
	}
	return kind, binds
}

// simpleOne returns the kind and bound names of one simple statement.
func simpleOne(toks []Token) (StmtKind, []string) {
	if len(toks) == 0 {
		return KindOther, nil
	}
	switch {
	case toks[0].IsName("import"):
		return KindImport, importBinds(toks[1:])
	case toks[0].IsName("from"):
		i := 1
		for i < len(toks) && !toks[i].IsName("import") {
			i++
		}
		if i >= len(toks) {
			return KindOther, nil
		}
		return KindImport, importBinds(toks[i+1:])
	case toks[0].Kind == Name && keywords[toks[0].Text]:
		return KindOther, nil
	}
	// Assignment targets: the segments before the last "=" outside brackets, or what an annotation
	// or augmented assignment names.
	depth := 0
	lastEq := -1
	for i, t := range toks {
		switch {
		case t.Is("(") || t.Is("[") || t.Is("{"):
			depth++
		case t.Is(")") || t.Is("]") || t.Is("}"):
			depth--
		case depth <= 0 && t.Is("="):
			lastEq = i
		case depth <= 0 && lastEq < 0 && t.Kind == Op && len(t.Text) >= 2 && t.Text[len(t.Text)-1] == '=' &&
			t.Text != "==" && t.Text != "!=" && t.Text != "<=" && t.Text != ">=":
			// augmented assignment (+=, :=, ...): the target is what precedes
			return KindAssign, targets(toks[:i])
		case depth <= 0 && lastEq < 0 && t.Is(":") && i == 1 && toks[0].Kind == Name:
			return KindAssign, []string{toks[0].Text}
		case t.IsName("lambda") && lastEq < 0:
			return KindOther, nil
		}
	}
	if lastEq < 0 {
		return KindOther, nil
	}
	return KindAssign, targets(toks[:lastEq])
}

// targets returns the names an assignment's target tokens bind: names not after a dot, not
// followed by a dot, a call or a subscript, and not inside a subscript.
func targets(toks []Token) []string {
	var out []string
	sub := 0 // depth inside subscripts
	var stack []bool
	for i, t := range toks {
		switch {
		case t.Is("(") || t.Is("[") || t.Is("{"):
			isSub := i > 0 && (toks[i-1].Kind == Name && !keywords[toks[i-1].Text] || toks[i-1].Is(")") || toks[i-1].Is("]"))
			stack = append(stack, isSub)
			if isSub {
				sub++
			}
		case t.Is(")") || t.Is("]") || t.Is("}"):
			if n := len(stack); n > 0 {
				if stack[n-1] {
					sub--
				}
				stack = stack[:n-1]
			}
		case t.Kind == Name && sub == 0 && !keywords[t.Text]:
			if i > 0 && toks[i-1].Is(".") {
				continue
			}
			if i+1 < len(toks) && (toks[i+1].Is(".") || toks[i+1].Is("[") || toks[i+1].Is("(")) {
				continue
			}
			out = append(out, t.Text)
		}
	}
	return out
}

// importBinds returns the names an import's name list binds (after `import`): each "as" name,
// else the first component of a dotted name; "*" binds nothing known.
func importBinds(toks []Token) []string {
	var out []string
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.Kind != Name || keywords[t.Text] {
			continue
		}
		if i > 0 && toks[i-1].Is(".") {
			continue
		}
		// The dotted name's end.
		j := i
		for j+2 < len(toks) && toks[j+1].Is(".") && toks[j+2].Kind == Name {
			j += 2
		}
		if j+2 < len(toks) && toks[j+1].IsName("as") && toks[j+2].Kind == Name {
			out = append(out, toks[j+2].Text)
			i = j + 2
			continue
		}
		out = append(out, t.Text)
		i = j
	}
	return out
}

// FreeUses calls use for every name a function's source src uses (Uses) that it does not bind
// itself: a name counts as bound when it is a parameter (of a def or lambda in src), a target of
// an assignment, augmented or annotated assignment, walrus, for clause (comprehensions too),
// `as` clause or import, or a def or class name in src, unless a global or nonlocal statement
// names it. Scopes are not told apart (a name a nested function binds counts as bound throughout).
// A name may be reported more than once. Linear in len(src).
func FreeUses(src string, use func(name string)) {
	bound := map[string]bool{}
	global := map[string]bool{}
	l := NewLexer(src)
	var ln []Token
	for {
		t := l.Next()
		if t.Kind != Newline && t.Kind != End {
			ln = append(ln, t)
			continue
		}
		bindLine(ln, bound, global)
		ln = ln[:0]
		if t.Kind == End {
			break
		}
	}
	Uses(src, func(n string) {
		if !bound[n] || global[n] {
			use(n)
		}
	})
}

// bindLine adds the names the logical line toks binds to bound, and those it declares global or
// nonlocal to global.
func bindLine(toks []Token, bound, global map[string]bool) {
	if len(toks) == 0 {
		return
	}
	if toks[0].IsName("global") || toks[0].IsName("nonlocal") {
		for _, t := range toks[1:] {
			if t.Kind == Name {
				global[t.Text] = true
			}
		}
		return
	}
	// The simple statements of the line: past a clause's header (`if x: y = 1`, `else: return`).
	body := toks
	for len(body) > 0 && body[0].Kind == Name && compoundHead[body[0].Text] {
		c := colonAt(body)
		if c < 0 {
			break
		}
		body = body[c+1:]
	}
	if len(body) > 0 && !(body[0].Kind == Name && compoundHead[body[0].Text]) {
		_, b := simple(body)
		for _, n := range b {
			bound[n] = true
		}
	}
	params := 0 // > 0 while a def's or lambda's parameters are read: the bracket depth they are at
	depth := 0
	for i, t := range toks {
		prev := Token{}
		if i > 0 {
			prev = toks[i-1]
		}
		switch {
		case t.Is("(") || t.Is("[") || t.Is("{"):
			depth++
		case t.Is(")") || t.Is("]") || t.Is("}"):
			if params > 0 && depth == params && t.Is(")") {
				params = 0
			}
			depth--
		case (t.IsName("def") || t.IsName("class")) && i+1 < len(toks) && toks[i+1].Kind == Name:
			bound[toks[i+1].Text] = true
			if t.IsName("def") && i+2 < len(toks) && toks[i+2].Is("(") {
				params = depth + 1
			}
		case t.IsName("lambda"):
			params = -1 - depth // up to the lambda's colon at this depth
		case t.Is(":") && params < 0 && depth == -1-params:
			params = 0
		case t.Is(":=") && prev.Kind == Name:
			bound[prev.Text] = true
		case t.IsName("as") && i+1 < len(toks) && toks[i+1].Kind == Name:
			bound[toks[i+1].Text] = true
		case t.IsName("for"):
			for j := i + 1; j < len(toks) && !toks[j].IsName("in"); j++ {
				if toks[j].Kind == Name && !keywords[toks[j].Text] {
					bound[toks[j].Text] = true
				}
			}
		case t.Kind == Name && params != 0 && !keywords[t.Text]:
			at := depth == params || params < 0 && depth == -1-params
			if at && (prev.Is("(") || prev.Is(",") || prev.Is("*") || prev.Is("**") || prev.IsName("lambda")) {
				bound[t.Text] = true
			}
		}
	}
}
