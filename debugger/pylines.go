package debugger

import "strings"

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

// logicalLines splits src into logical lines.
func logicalLines(src string) []logicalLine {
	var out []logicalLine
	cur := logicalLine{line: 1}
	line, depth := 1, 0
	lineStart := 0 // byte offset of the current physical line
	end := func() {
		if len(cur.toks) > 0 {
			out = append(out, cur)
		}
		cur = logicalLine{}
	}
	add := func(t pyToken, at, tokLine int) {
		if len(cur.toks) == 0 {
			cur.line, cur.indent = tokLine, indentOf(src[lineStart:at])
		}
		cur.toks = append(cur.toks, t)
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			if depth == 0 {
				end()
			}
			line++
			i++
			lineStart = i
		case c == '\\' && i+1 < len(src) && (src[i+1] == '\n' || src[i+1] == '\r' && i+2 < len(src) && src[i+2] == '\n'):
			// An explicit line join: the logical line goes on.
			i += 2
			if src[i-1] == '\r' {
				i++
			}
			line++
			lineStart = i
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' || c == '\\':
			i++
		case c == '"' || c == '\'':
			start, startLine := i, line
			var nl int
			i, nl = skipString(src, i)
			add(pyToken{'s', "str"}, start, startLine)
			if nl > 0 {
				line += nl
				lineStart = strings.LastIndexByte(src[:i], '\n') + 1
			}
		case isNameByte(c):
			j := i
			for j < len(src) && (isNameByte(src[j]) || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			name := src[i:j]
			if j < len(src) && (src[j] == '"' || src[j] == '\'') && isStringPrefix(name) {
				start, startLine := i, line
				var nl int
				i, nl = skipString(src, j)
				add(pyToken{'s', "str"}, start, startLine)
				if nl > 0 {
					line += nl
					lineStart = strings.LastIndexByte(src[:i], '\n') + 1
				}
				continue
			}
			add(pyToken{'n', name}, i, line)
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			j := i + 1
			for j < len(src) {
				d := src[j]
				if d >= '0' && d <= '9' || d == '.' || d == '_' || isNameByte(d) {
					j++
					if (d == 'e' || d == 'E') && j < len(src) && (src[j] == '+' || src[j] == '-') {
						j++
					}
					continue
				}
				break
			}
			add(pyToken{'0', src[i:j]}, i, line)
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
			if c == '.' && strings.HasPrefix(src[i:], "...") {
				add(pyToken{'o', "..."}, i, line)
				i += 3
				continue
			}
			add(pyToken{'o', src[i : i+1]}, i, line)
			i++
		}
	}
	end()
	return out
}

// skipString skips the string literal whose opening quote is at src[i] and returns the offset
// after it and the line breaks it holds. A backslash escapes the next character (in a raw string
// too, as far as the end of the literal goes). An unterminated single-quoted string ends at the
// line break, an unterminated triple-quoted one at the end of src.
func skipString(src string, i int) (int, int) {
	q := src[i]
	triple := strings.HasPrefix(src[i:], strings.Repeat(string(q), 3))
	nl := 0
	if triple {
		i += 3
	} else {
		i++
	}
	for i < len(src) {
		c := src[i]
		switch {
		case c == '\\':
			if i+1 < len(src) && src[i+1] == '\n' {
				nl++
			}
			i += 2
			continue
		case c == '\n':
			if !triple {
				return i, nl // unterminated: the line break ends the logical line
			}
			nl++
		case c == q:
			if !triple {
				return i + 1, nl
			}
			if strings.HasPrefix(src[i:], strings.Repeat(string(q), 3)) {
				return i + 3, nl
			}
		}
		i++
	}
	return len(src), nl
}

// isNameByte reports whether c may start a Python name (any byte of a non-ASCII character
// counts).
func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
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
