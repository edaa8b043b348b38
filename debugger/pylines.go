package debugger

import (
	"strings"

	"github.com/ndtrace/ndtrace/internal/pylex"
)

// ExecutableLines reports, for each line of the Python source src (index 0 for line 1), whether
// Python can stop at it: whether some code object compiled from src has an instruction on that
// line (the line numbers of co_lines()), so that a line event, and a debugger's breakpoint, can
// happen there. It is a tokenizer-level classifier, conservative: a line it reports executable is
// one in the co_lines of CPython 3.11-3.13 (tested against python3 on a corpus); it may miss a
// few that are (continuation lines of a multi-line statement that hold an operand of their own,
// bare constant statements). Not executable:
//
//   - blank and comment lines, and lines inside a multi-line string;
//   - the continuation lines of a statement (after a backslash or inside brackets);
//   - statements that compile to nothing: docstrings and other statements of constants only,
//     global and nonlocal, and the headers else:, try: and finally: (their line holds no
//     instruction, unless a body follows on the same line);
//   - code that cannot run: statements after a return, raise, continue or break in the same
//     block, which the compiler removes.
//
// Unterminated strings and unbalanced brackets are read as far as they go; ExecutableLines never
// fails.
func ExecutableLines(src string) []bool {
	nlines := strings.Count(src, "\n") + 1
	out := make([]bool, nlines)
	deadIndent := -1 // statements at this indentation or deeper are unreachable
	for _, ll := range logicalLines(src) {
		if len(ll.toks) == 0 {
			continue
		}
		if deadIndent >= 0 && ll.indent >= deadIndent {
			continue
		}
		deadIndent = -1
		exec, terminal := classifyLogical(ll.toks)
		if exec && ll.line-1 < nlines {
			out[ll.line-1] = true
		}
		if terminal {
			deadIndent = ll.indent
		}
	}
	return out
}

// pyToken is one token of Python source: its kind and text (a string's text is only its
// quotes' kind, not its contents) and the line it starts on.
type pyToken struct {
	kind byte // 'n' name, '0' number, 's' string, 'o' operator or bracket
	text string
}

// logicalLine is one logical line: the tokens of a statement (or a compound statement's header
// with its body on the same line), the line it starts on, and that line's indentation.
type logicalLine struct {
	line, indent int
	toks         []pyToken
}

// lexOptions read src as logicalLines always has: only '\n' breaks a line, a number is a whole
// literal, "..." is one token.
var lexOptions = pylex.Options{LFOnly: true, Floats: true, Ellipsis: true}

// logicalLines splits src into logical lines.
func logicalLines(src string) []logicalLine {
	var out []logicalLine
	var cur logicalLine
	lx := pylex.NewLexerWith(src, lexOptions)
	for {
		t := lx.Next()
		switch t.Kind {
		case pylex.End:
			return out
		case pylex.Newline:
			out = append(out, cur)
			cur = logicalLine{}
			continue
		}
		if t.First {
			cur.line, cur.indent = t.Line, indentOf(src[t.Offset-t.Indent:t.Offset])
		}
		switch t.Kind {
		case pylex.Name:
			cur.toks = append(cur.toks, pyToken{'n', t.Text})
		case pylex.Number:
			cur.toks = append(cur.toks, pyToken{'0', t.Text})
		case pylex.String:
			if q := strings.IndexAny(t.Text, `'"`); q > 0 && !isStringPrefix(t.Text[:q]) {
				// A prefix pylex knows and CPython 3.11-3.13 does not (t, ur): a name.
				cur.toks = append(cur.toks, pyToken{'n', t.Text[:q]})
			}
			cur.toks = append(cur.toks, pyToken{'s', "str"})
		default:
			if t.Text == "..." {
				cur.toks = append(cur.toks, pyToken{'o', t.Text})
				continue
			}
			for i := range len(t.Text) { // one token per character, as the classifier reads them
				cur.toks = append(cur.toks, pyToken{'o', t.Text[i : i+1]})
			}
		}
	}
}

// isStringPrefix reports whether name is a string literal's prefix (r, b, u, f and their
// combinations).
func isStringPrefix(name string) bool {
	switch strings.ToLower(name) {
	case "r", "u", "b", "f", "br", "rb", "fr", "rf":
		return true
	}
	return false
}

// indentOf is the indentation width of a line's leading whitespace (a tab to the next multiple
// of 8, as Python counts it).
func indentOf(prefix string) int {
	w := 0
	for _, c := range prefix {
		switch c {
		case ' ':
			w++
		case '\t':
			w = w/8*8 + 8
		case '\f':
			w = 0
		default:
			return w
		}
	}
	return w
}

// compoundKeywords start a compound statement's header.
var compoundKeywords = map[string]bool{"def": true, "class": true, "if": true, "elif": true, "else": true,
	"while": true, "for": true, "try": true, "except": true, "finally": true, "with": true, "async": true,
	"match": true, "case": true}

// classifyLogical classifies one logical line: whether its first line holds an instruction, and
// whether it ends its block's control flow (return, raise, continue, break).
func classifyLogical(toks []pyToken) (exec, terminal bool) {
	first := toks[0].text
	if toks[0].kind == 'n' && compoundKeywords[first] && first != "match" && first != "case" {
		colon := headerColon(toks)
		if colon < 0 {
			return true, false // not a header after all (a soft keyword used as a name is not one of these)
		}
		header := first == "else" || first == "try" || first == "finally"
		body := toks[colon+1:]
		if len(body) > 0 {
			bexec, _ := classifySimple(body)
			return !header || bexec, false
		}
		return !header, false
	}
	return classifySimple(toks)
}

// headerColon returns the index of the colon that ends a compound statement's header: the first
// one outside brackets and not in a lambda, or -1.
func headerColon(toks []pyToken) int {
	depth, lambdas := 0, 0
	for i, t := range toks {
		switch {
		case t.kind != 'o' && t.kind != 'n':
		case t.text == "(" || t.text == "[" || t.text == "{":
			depth++
		case t.text == ")" || t.text == "]" || t.text == "}":
			depth--
		case t.text == "lambda" && depth == 0:
			lambdas++
		case t.text == ":" && depth == 0:
			if lambdas > 0 {
				lambdas--
				continue
			}
			return i
		}
	}
	return -1
}

// classifySimple classifies simple statements separated by semicolons: the line is executable if
// one of them compiles to code; the last one decides whether control flow ends.
func classifySimple(toks []pyToken) (exec, terminal bool) {
	start := 0
	for i := 0; i <= len(toks); i++ {
		if i < len(toks) && toks[i].text != ";" {
			continue
		}
		stmt := toks[start:i]
		start = i + 1
		if len(stmt) == 0 {
			continue
		}
		switch f := stmt[0]; {
		case f.kind == 'n' && (f.text == "global" || f.text == "nonlocal"):
			terminal = false
		case constantsOnly(stmt):
			terminal = false
		default:
			exec = true
			terminal = f.kind == 'n' && (f.text == "return" || f.text == "raise" || f.text == "continue" || f.text == "break")
		}
	}
	return exec, terminal
}

// constantsOnly reports whether a statement is an expression of literals only (a docstring,
// `...`, a number), which compiles to no instruction of its line in every version.
func constantsOnly(stmt []pyToken) bool {
	for _, t := range stmt {
		switch {
		case t.kind == 's' || t.kind == '0' || t.text == "...":
		default:
			return false
		}
	}
	return true
}
