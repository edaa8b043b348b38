// Package pylex is a small Python lexer and the name analysis built on it: the identifiers a piece
// of source uses (Uses) and the names a module binds at its top level, statement by statement
// (TopLevel). It is a lexer, not a parser: it never fails, malformed source gives what it can, and
// its work and memory are linear in the length of the source.
package pylex

// Kind is the kind of a Token.
type Kind byte

// Token kinds.
const (
	// End is the end of the source.
	End Kind = iota
	// Name is an identifier or keyword (identifier characters and bytes >= 0x80, not starting
	// with a digit).
	Name
	// Number is a numeric literal's run of identifier characters (it starts with a digit; the
	// parts after a dot are numbers of their own).
	Number
	// String is a string literal, prefix letters included (r"", b'', f"""...""").
	String
	// Op is an operator or delimiter: one character, or one of the compound operators
	// (==, !=, <=, >=, :=, ->, **, //, <<, >>, and each augmented assignment such as +=).
	Op
	// Newline ends a logical line (a newline outside brackets, not after a backslash).
	Newline
)

// Token is one token of the source.
type Token struct {
	Kind Kind
	// Text is the token's text (a String's whole literal; "" for Newline and End).
	Text string
	// Offset is the byte offset of the token in the source; Line the 1-based line it starts on
	// and EndLine the line it ends on (they differ for a multi-line string).
	Offset, Line, EndLine int
	// First is set on the first token of a logical line, and Indent is then the number of bytes
	// of whitespace before it on its physical line (0 for a statement at the module's top level).
	First  bool
	Indent int
	// LineStart, on a First token, is the offset of the first byte of the physical line the
	// logical line starts on (Indent counts from after the last backslash join, if any).
	LineStart int
}

// Is reports whether t is the operator op.
func (t Token) Is(op string) bool { return t.Kind == Op && t.Text == op }

// IsName reports whether t is the name s.
func (t Token) IsName(s string) bool { return t.Kind == Name && t.Text == s }

// Lexer splits Python source into Tokens. Comments, blank lines and whitespace give nothing; a
// logical line ends with a Newline token, and the last one with one too when it has tokens.
type Lexer struct {
	src       string
	i         int
	line      int
	lineStart int  // offset of the current physical line's first byte
	depth     int  // open brackets
	first     bool // the next token starts a logical line
	opts      Options
	stmtStart int  // offset of the physical line the current logical line starts on
	atStart   bool // only blanks since a line break at depth 0 (SkipCRLines)
}

// Options change how a Lexer reads a few details, for a reader that must keep the results of
// an older tokenizer. The zero value is NewLexer's reading.
type Options struct {
	// LFOnly: only '\n' breaks a line (in code, comments, strings and backslash joins, which
	// are "\\\n" and "\\\r\n"); a lone '\r', and '\v', are whitespace.
	LFOnly bool
	// Floats: a Number is a whole numeric literal: it starts with a digit, or a dot before a
	// digit, and takes identifier characters, dots, and a sign after e or E (not after a hex
	// literal's e when NoHexSign is set).
	Floats bool
	// NoHexSign: with Floats, a sign after an e or E of a literal starting 0x or 0X ends it.
	NoHexSign bool
	// Ellipsis: "..." is one Op.
	Ellipsis bool
	// StrayOps (with LFOnly): a backslash before '\r' is skipped with it (it joins no lines:
	// "\\\r\n" ends the line), any other backslash not before a '\n' is an Op, and so is '\v'.
	StrayOps bool
	// SkipCRLines: a physical line at bracket depth 0 whose first byte after spaces, tabs and
	// form feeds is a '\r' gives no token, up to its '\n'.
	SkipCRLines bool
}

// NewLexer returns a lexer over src.
func NewLexer(src string) *Lexer { return &Lexer{src: src, line: 1, first: true, atStart: true} }

// NewLexerWith returns a lexer over src reading it as o says.
func NewLexerWith(src string, o Options) *Lexer {
	return &Lexer{src: src, line: 1, first: true, opts: o, atStart: true}
}

// lineBreak reports whether c breaks a line.
func (l *Lexer) lineBreak(c byte) bool { return c == '\n' || c == '\r' && !l.opts.LFOnly }

// Next returns the next token (End at the end of the source, and at every call after).
func (l *Lexer) Next() Token {
	src := l.src
	for l.i < len(src) {
		i := l.i
		c := src[i]
		if l.atStart && c != ' ' && c != '\t' && c != '\f' {
			l.atStart = false
			if c == '\r' && l.opts.SkipCRLines {
				for l.i < len(src) && src[l.i] != '\n' {
					l.i++
				}
				continue
			}
		}
		switch {
		case c == '#':
			for l.i < len(src) && !l.lineBreak(src[l.i]) {
				l.i++
			}
		case c == '\\' && l.opts.StrayOps && i+1 < len(src) && src[i+1] == '\r':
			l.i += 2
		case c == '\\' && i+1 < len(src) && l.opts.LFOnly && (src[i+1] == '\n' || src[i+1] == '\r' && i+2 < len(src) && src[i+2] == '\n'):
			l.i += 2
			if src[i+1] == '\r' {
				l.i++
			}
			l.newline()
		case c == '\\' && i+1 < len(src) && !l.opts.LFOnly && (src[i+1] == '\n' || src[i+1] == '\r'):
			l.i += 2
			if src[i+1] == '\r' && l.i < len(src) && src[l.i] == '\n' {
				l.i++
			}
			l.newline()
		case l.lineBreak(c):
			l.i++
			if c == '\r' && l.i < len(src) && src[l.i] == '\n' {
				l.i++
			}
			line := l.line
			l.newline()
			if l.depth == 0 {
				l.atStart = true
				l.stmtStart = l.i
			}
			if l.depth == 0 && !l.first {
				l.first = true
				return Token{Kind: Newline, Offset: i, Line: line, EndLine: line}
			}
		case c == ' ' || c == '\t' || c == '\f' || c == '\\' && !l.opts.StrayOps || l.opts.LFOnly && (c == '\r' || c == '\v' && !l.opts.StrayOps):
			l.i++
		case c == '\'' || c == '"':
			return l.emit(String, i, i+StringEnd(src[i:], l.opts.LFOnly))
		case l.opts.Floats && (c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9'):
			return l.emit(Number, i, i+l.numberEnd(src[i:]))
		case l.opts.Ellipsis && c == '.' && i+2 < len(src) && src[i+1] == '.' && src[i+2] == '.':
			return l.emit(Op, i, i+3)
		case nameByte(c):
			j := i
			for j < len(src) && nameByte(src[j]) {
				j++
			}
			if j < len(src) && (src[j] == '\'' || src[j] == '"') && isStringPrefix(src[i:j]) {
				return l.emit(String, i, j+StringEnd(src[j:], l.opts.LFOnly))
			}
			if c >= '0' && c <= '9' {
				return l.emit(Number, i, j)
			}
			return l.emit(Name, i, j)
		default:
			switch c {
			case '(', '[', '{':
				l.depth++
			case ')', ']', '}':
				if l.depth > 0 {
					l.depth--
				}
			}
			return l.emit(Op, i, i+opLen(src[i:]))
		}
	}
	if !l.first {
		l.first = true
		return Token{Kind: Newline, Offset: len(src), Line: l.line, EndLine: l.line}
	}
	return Token{Kind: End, Offset: len(src), Line: l.line, EndLine: l.line}
}

// newline notes that l.i starts a new physical line.
func (l *Lexer) newline() {
	l.line++
	l.lineStart = l.i
}

// emit returns the token src[i:j] of kind k and moves past it, counting the lines it spans.
func (l *Lexer) emit(k Kind, i, j int) Token {
	t := Token{Kind: k, Text: l.src[i:j], Offset: i, Line: l.line, First: l.first}
	if l.first {
		t.Indent = i - l.lineStart
		t.LineStart = l.stmtStart
		l.first = false
	}
	if k == String {
		for p := i; p < j; p++ {
			switch l.src[p] {
			case '\n':
				l.line++
				l.lineStart = p + 1
			case '\r':
				if !l.opts.LFOnly && (p+1 >= j || l.src[p+1] != '\n') {
					l.line++
					l.lineStart = p + 1
				}
			}
		}
	}
	t.EndLine = l.line
	l.i = j
	return t
}

// opLen is the length of the operator at the start of s (at least 1).
func opLen(s string) int {
	n := 1
	if len(s) >= 2 {
		switch {
		case (s[0] == '*' || s[0] == '/' || s[0] == '<' || s[0] == '>') && s[1] == s[0]:
			n = 2
		case s[0] == '-' && s[1] == '>':
			return 2
		}
	}
	if n < len(s) && s[n] == '=' {
		switch s[:n] {
		case "=", "!", "<", ">", ":", "+", "-", "*", "/", "%", "&", "|", "^", "@", "**", "//", "<<", ">>":
			n++
		}
	}
	return n
}

// nameByte reports whether c can be part of a name (or number) token.
func nameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// isStringPrefix reports whether s is a string literal's prefix (r, b, u, f, t, and rb, br, fr, rf,
// tr, rt in any case).
func isStringPrefix(s string) bool {
	if len(s) == 0 || len(s) > 2 {
		return false
	}
	seen := 0
	for i := 0; i < len(s); i++ {
		switch s[i] | 0x20 {
		case 'r':
			seen |= 1
		case 'b', 'u', 'f', 't':
			if seen&2 != 0 {
				return false
			}
			seen |= 2
		default:
			return false
		}
	}
	return len(s) == 1 || s[0]|0x20 != s[1]|0x20
}

// numberEnd returns the length of the numeric literal at the start of s (Options.Floats).
func (l *Lexer) numberEnd(s string) int {
	hex := l.opts.NoHexSign && len(s) > 1 && s[0] == '0' && s[1]|0x20 == 'x'
	j := 1
	for j < len(s) {
		b := s[j]
		switch {
		case nameByte(b) || b == '.':
			j++
		case (b == '+' || b == '-') && s[j-1]|0x20 == 'e' && !hex:
			j++
		default:
			return j
		}
	}
	return j
}

// StringEnd returns the length of the string literal at the start of s (single, double or triple
// quoted, with backslash escapes); an unterminated literal runs to the end of s, or of the line
// for a single-quoted one (a '\n', or a '\r' too unless lfOnly). Linear in the length returned.
func StringEnd(s string, lfOnly bool) int {
	q := s[0]
	if len(s) >= 3 && s[1] == q && s[2] == q {
		for i := 3; i < len(s); i++ {
			switch {
			case s[i] == '\\':
				i++
			case s[i] == q && i+2 < len(s) && s[i+1] == q && s[i+2] == q:
				return i + 3
			}
		}
		return len(s)
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case q:
			return i + 1
		case '\n':
			return i
		case '\r':
			if !lfOnly {
				return i
			}
		}
	}
	return len(s)
}
