package execute

import (
	"strings"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/internal/pylex"
)

// An attacker's review (issue 30): a find run is the module's to forge, and the lines it reports
// for a unit become the item's Func, which deduplication, decontamination and the split
// (crawl.FunctionID) read. A run that reported for "f" the lines of another function, or of the
// whole module, made the row show one function's source beside another's trace, and let a
// function of an evaluation set through decontamination under a harmless one's source. So the
// lines of a unit are checked on this side against the module's own text (unitDefs), and every
// traced run of a generated item must have called that very def (ranUnit).

// unitDefs returns the spans of the defs of module code that can be units, by qualified name:
// "name" for a def at the module's top level, "Class.name" for one in the body of a top-level
// class, either possibly inside if/elif/else, try/except/finally and with blocks (as the
// generator's _gen_defs walks them); a span runs from the def's first decorator to its last
// token. Lines are counted at '\n' only, as funcLines counts them; a module with a lone '\r'
// (a line break to Python) has none. Linear in len(code).
func unitDefs(code string) map[string][]pylex.Span {
	out := map[string][]pylex.Span{}
	if strings.Contains(strings.ReplaceAll(code, "\r\n", ""), "\r") {
		return out
	}
	type open struct {
		indent int
		kind   string // "class", "def", "block" (if, try, with...), "other" (for, while, match...)
		name   string // a class's or a def's
		first  int    // a def's first line (its first decorator's)
	}
	var stack []open
	lastLine := 0  // the last line of the logical line read before the current one
	decoFirst := 0 // the first line of the decorators right before the current line (0: none)
	decoIndent := -1
	closeTo := func(indent int) {
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			o := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if o.kind != "def" || o.name == "" {
				continue
			}
			qual, ok := o.name, true
			classes := 0
			for _, e := range stack {
				switch e.kind {
				case "class":
					classes++
					qual = e.name + "." + o.name
				case "block":
				default:
					ok = false
				}
			}
			if ok && classes <= 1 && len(out) < 4*maxGenLines {
				out[qual] = append(out[qual], pylex.Span{First: o.first, Last: lastLine})
			}
		}
	}
	l := pylex.NewLexerWith(code, pylex.Options{LFOnly: true})
	var toks []pylex.Token // the first tokens of the current logical line (at most 3)
	indent, first, last := 0, 0, 0
	for {
		t := l.Next()
		if t.Kind == pylex.End {
			break
		}
		if t.Kind != pylex.Newline {
			if t.First {
				toks, indent, first = toks[:0], t.Indent, t.Line
			}
			if len(toks) < 3 {
				toks = append(toks, t)
			}
			last = t.EndLine
			continue
		}
		if len(toks) == 0 {
			continue
		}
		closeTo(indent)
		head := toks[0]
		if head.IsName("async") && len(toks) > 1 {
			head = toks[1]
			toks = toks[1:]
		}
		switch {
		case head.Is("@"):
			if decoFirst == 0 || decoIndent != indent {
				decoFirst, decoIndent = first, indent
			}
			lastLine = last
			toks = toks[:0]
			continue
		case head.IsName("def") || head.IsName("class"):
			o := open{indent: indent, kind: head.Text, first: first}
			if decoFirst != 0 && decoIndent == indent {
				o.first = decoFirst
			}
			if len(toks) > 1 && toks[1].Kind == pylex.Name {
				o.name = toks[1].Text
			}
			stack = append(stack, o)
		case head.Kind == pylex.Name && unitBlocks[head.Text]:
			stack = append(stack, open{indent: indent, kind: "block"})
		case head.Kind == pylex.Name && otherBlocks[head.Text]:
			stack = append(stack, open{indent: indent, kind: "other"})
		}
		decoFirst, decoIndent = 0, -1
		lastLine = last
		toks = toks[:0]
	}
	closeTo(0)
	return out
}

// unitBlocks are the compound statements whose bodies the generator searches for defs;
// otherBlocks the others (a def in them is no unit).
var (
	unitBlocks  = map[string]bool{"if": true, "elif": true, "else": true, "try": true, "except": true, "finally": true, "with": true}
	otherBlocks = map[string]bool{"for": true, "while": true, "match": true, "case": true}
)

// isUnitDef reports whether lines first..last are one of the spans defs gives qual.
func isUnitDef(defs map[string][]pylex.Span, qual string, first, last int) bool {
	for _, s := range defs[qual] {
		if s.First == first && s.Last == last {
			return true
		}
	}
	return false
}

// ranUnit reports whether trace tr called unit qual of the item's module, whose events name it
// file (the item's Filename: funcPlace.request renames the traced file so), whose def spans lines
// first..last: a call event of a code object of that qualified name, in that file, starting
// within those lines. A generated item's traced run
// that did not is not the run of the function its row names.
func ranUnit(tr *debugger.Trace, file, qual string, first, last int) bool {
	if tr == nil {
		return false
	}
	for i := 0; i < tr.Len(); i++ {
		if tr.Kind(i) != "call" || tr.Func(i) != qual {
			continue
		}
		if n := tr.Lineno(i); n < first || n > last {
			continue
		}
		if tr.File(i) == file {
			return true
		}
	}
	return false
}
