package testcalls

// importStmt is one module an import statement names: `import a.b` gives {0, "a.b", nil},
// `from ..x import y, z` gives {2, "x", [y z]}, `from . import *` gives {1, "", [*]}.
type importStmt struct {
	// Level is the number of leading dots of a relative import (0 for an absolute one).
	Level int
	// Module is the dotted module name ("" for `from . import x`).
	Module string
	// Names are the names a from-import imports ("*" for a star import); nil for `import`.
	Names []string
}

// dynamicNames are the names whose use makes a module's imports or the files it reads impossible
// to know from its import statements: dynamic imports, code built at run time, the module's own
// file or package path, and the import path itself (sys.path and its hooks, after a "sys.").
// exec, eval and compile count only as bare names (not "re.compile").
var dynamicNames = map[string]bool{
	"__import__": true, "importlib": true, "import_module": true, "runpy": true, "pkgutil": true,
	"pkg_resources": true, "__path__": true, "__file__": true, "__loader__": true, "__spec__": true,
	"__builtins__": true, "builtins": true, "execfile": true,
}

// bareDynamicNames count only when not an attribute (not after a dot).
var bareDynamicNames = map[string]bool{"exec": true, "eval": true, "compile": true}

// sysPathNames are the attributes of sys that change where imports are found.
var sysPathNames = map[string]bool{"path": true, "meta_path": true, "path_hooks": true, "path_importer_cache": true}

// pyToken is one token of scanImports's tokenizer.
type pyToken struct {
	kind byte // 'n' a name or number, 's' a string, 'o' an operator character, '\n' the end of a logical line
	text string
}

// scanImports reads the import statements of Python source src, wherever they are (in function
// bodies, under if or try too), and reports whether src uses a name of dynamicNames (or
// bareDynamicNames bare, or sys.path and its kin): then its imports cannot be known statically.
// It is a tokenizer, not a parser: comments and string literals are skipped, a logical line ends at
// a newline outside brackets and not after a backslash, and a statement starts a logical line or
// follows ";" or ":" outside brackets. Malformed source gives what it can; work and memory are
// linear in len(src).
func scanImports(src []byte) (imps []importStmt, dynamic bool) {
	toks := tokenize(string(src))
	start := true // the next token starts a statement
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind == 'n' {
			afterDot := i > 0 && toks[i-1].kind == 'o' && toks[i-1].text == "."
			switch {
			case dynamicNames[t.text], bareDynamicNames[t.text] && !afterDot:
				dynamic = true
			case afterDot && sysPathNames[t.text] && i > 1 && toks[i-2].kind == 'n' && toks[i-2].text == "sys":
				dynamic = true
			}
		}
		if start && t.kind == 'n' && (t.text == "import" || t.text == "from") {
			var n int
			var got []importStmt
			if t.text == "import" {
				got, n = parseImport(toks[i+1:])
			} else {
				got, n = parseFrom(toks[i+1:])
			}
			imps = append(imps, got...)
			// The names of the statement are checked too (`import importlib`), and a non-ASCII
			// name is not resolved to a file (Python matches its NFKC form): not known statically.
			for _, u := range toks[i+1 : i+1+n] {
				if u.kind == 'n' && (dynamicNames[u.text] || !isASCII(u.text)) {
					dynamic = true
				}
			}
			i += n
			start = false
			continue
		}
		start = t.kind == '\n' || t.kind == 'o' && (t.text == ";" || t.text == ":")
	}
	return imps, dynamic
}

// dotted reads a dotted name (a.b.c) from toks, returning it and the tokens read; "" if none.
func dotted(toks []pyToken) (string, int) {
	name, n := "", 0
	for n < len(toks) && isName(toks[n]) {
		if name != "" {
			name += "."
		}
		name += toks[n].text
		n++
		if n+1 < len(toks) && toks[n].kind == 'o' && toks[n].text == "." && toks[n+1].kind == 'n' {
			n++
			continue
		}
		break
	}
	return name, n
}

// parseImport reads what follows `import`: dotted names, each with an optional `as name`, comma
// separated, up to the end of the statement. It returns the modules and the tokens read.
func parseImport(toks []pyToken) ([]importStmt, int) {
	var out []importStmt
	n := 0
	for {
		name, k := dotted(toks[n:])
		if k == 0 {
			return out, n
		}
		n += k
		out = append(out, importStmt{Module: name})
		if n+1 < len(toks) && toks[n].kind == 'n' && toks[n].text == "as" && toks[n+1].kind == 'n' {
			n += 2
		}
		if n < len(toks) && toks[n].kind == 'o' && toks[n].text == "," {
			n++
			continue
		}
		return out, n
	}
}

// parseFrom reads what follows `from`: dots, a dotted name, `import`, then names (each with an
// optional `as name`, in parentheses or not) or "*". It returns the statement (none if malformed)
// and the tokens read.
func parseFrom(toks []pyToken) ([]importStmt, int) {
	var st importStmt
	n := 0
	for n < len(toks) && toks[n].kind == 'o' && toks[n].text == "." {
		st.Level++
		n++
	}
	name, k := dotted(toks[n:])
	n += k
	st.Module = name
	if st.Level == 0 && name == "" || n >= len(toks) || toks[n].kind != 'n' || toks[n].text != "import" {
		return nil, n
	}
	n++
	paren := n < len(toks) && toks[n].kind == 'o' && toks[n].text == "("
	if paren {
		n++
	}
	for n < len(toks) {
		t := toks[n]
		switch {
		case t.kind == 'o' && t.text == "*":
			st.Names = append(st.Names, "*")
			n++
		case isName(t):
			st.Names = append(st.Names, t.text)
			n++
			if n+1 < len(toks) && toks[n].kind == 'n' && toks[n].text == "as" && toks[n+1].kind == 'n' {
				n += 2
			}
		case paren && t.kind == '\n':
			n++ // not produced inside brackets; kept for safety
			continue
		default:
			return []importStmt{st}, n
		}
		if n < len(toks) && toks[n].kind == 'o' && toks[n].text == "," {
			n++
			continue
		}
		if paren && n < len(toks) && toks[n].kind == 'o' && toks[n].text == ")" {
			n++
		}
		return []importStmt{st}, n
	}
	return []importStmt{st}, n
}

// tokenize splits Python source into pyTokens: names (identifier characters, bytes >= 0x80 and
// digits), strings (skipped whole, any prefix letters being a name token before them), operator
// characters one by one (the dot included), and '\n' at the end of each logical line. Comments,
// blank lines and whitespace give nothing. Linear in len(src).
func tokenize(src string) []pyToken {
	var toks []pyToken
	depth := 0
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '\\' && i+1 < len(src) && (src[i+1] == '\n' || src[i+1] == '\r'):
			i += 2
			if src[i-1] == '\r' && i < len(src) && src[i] == '\n' {
				i++
			}
		case c == '\n' || c == '\r':
			i++
			if depth == 0 && len(toks) > 0 && toks[len(toks)-1].kind != '\n' {
				toks = append(toks, pyToken{kind: '\n'})
			}
		case c == ' ' || c == '\t' || c == '\f' || c == '\\':
			i++
		case c == '\'' || c == '"':
			i += stringEnd(src[i:])
			toks = append(toks, pyToken{kind: 's'})
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80:
			j := i
			for j < len(src) {
				d := src[j]
				if !(d == '_' || d >= 'a' && d <= 'z' || d >= 'A' && d <= 'Z' || d >= '0' && d <= '9' || d >= 0x80) {
					break
				}
				j++
			}
			toks = append(toks, pyToken{kind: 'n', text: src[i:j]})
			i = j
		default:
			switch c {
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				if depth > 0 {
					depth--
				}
			}
			toks = append(toks, pyToken{kind: 'o', text: src[i : i+1]})
			i++
		}
	}
	return toks
}

// stringEnd returns the length of the string literal at the start of s (single, double or triple
// quoted, with backslash escapes); an unterminated literal runs to the end of s, or of the line
// for a single-quoted one. Linear in the length returned.
func stringEnd(s string) int {
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
		case '\n', '\r':
			return i
		}
	}
	return len(s)
}

// isName reports whether t is a name token that can name a module (not a number).
func isName(t pyToken) bool {
	return t.kind == 'n' && t.text != "" && !(t.text[0] >= '0' && t.text[0] <= '9')
}

// isASCII reports whether s is all ASCII.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
