package debugger

import (
	"sort"
	"strings"

	"github.com/ndtrace/ndtrace/internal/pylex"
	"github.com/ndtrace/ndtrace/schemas"
)

// DefsBudget bounds the module-level definitions (imports, constants, class headers) a CODE
// context adds to the code it shows, in bytes of their source: about 1,000 tokens under the usual
// BPE vocabularies (some 4 bytes a token for code). A needed definition that does not fit in what
// is left is not shown and counts in the tree's CodeOmitted (the row's code_omitted).
const DefsBudget = 4096

// MaxDefBytes is the longest definition Module.Defs keeps the text of; a longer one (a table of
// thousands of entries) is kept without it and counts as omitted wherever it is needed.
const MaxDefBytes = DefsBudget

// Module is the top-level analysis of one Python source file: what CODE contexts take module-level
// definitions from. Parse it once per file (ParseModule). Not safe for concurrent use.
type Module struct {
	lines []string // the file's lines, line endings included
	stmts []pylex.Stmt
	// cands and candFile cache candidates(candFile): the definitions' text is made once.
	cands    []schemas.ModuleDef
	candFile string
}

// ParseModule analyses the top-level statements of src. Linear in len(src).
func ParseModule(src string) *Module {
	return &Module{lines: splitLinesKeep(src), stmts: pylex.TopLevel(src)}
}

// splitLinesKeep splits src after each line ending (\n, \r\n or \r), as Python counts lines.
func splitLinesKeep(src string) []string {
	var out []string
	start := 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '\n':
			out = append(out, src[start:i+1])
			start = i + 1
		case '\r':
			if i+1 < len(src) && src[i+1] == '\n' {
				continue
			}
			out = append(out, src[start:i+1])
			start = i + 1
		}
	}
	if start < len(src) {
		out = append(out, src[start:])
	}
	return out
}

// text returns lines first..last of the module as in the file, without the last line's ending.
func (m *Module) text(s pylex.Span) string {
	if s.First < 1 || s.Last > len(m.lines) || s.Last < s.First {
		return ""
	}
	t := strings.Join(m.lines[s.First-1:s.Last], "")
	return strings.TrimRight(t, "\r\n")
}

// candidates returns the module's definitions a CODE context may add, in file order: every
// import, assignment, compound statement that binds names, and class (its header), with file as
// their File. A definition longer than MaxDefBytes has no parts.
func (m *Module) candidates(file string) []schemas.ModuleDef {
	if m.cands != nil && m.candFile == file {
		return m.cands
	}
	out := []schemas.ModuleDef{}
	for _, st := range m.stmts {
		if len(st.Binds) == 0 {
			continue
		}
		spans := []pylex.Span{st.Span}
		switch st.Kind {
		case pylex.KindImport, pylex.KindAssign, pylex.KindCompound:
		case pylex.KindClass:
			spans = st.Header
		default:
			continue
		}
		d := schemas.ModuleDef{File: file, Kind: string(st.Kind), Names: st.Binds}
		for _, s := range spans {
			t := m.text(s)
			d.Parts = append(d.Parts, schemas.DefPart{FirstLine: s.First, LastLine: s.Last, Source: t})
			d.Chars += len(t)
		}
		if d.Chars > MaxDefBytes {
			d.Parts = nil
		}
		out = append(out, d)
	}
	m.cands, m.candFile = out, file
	return out
}

// Defs returns the module's definitions the functions funcs (of this file) may need, in file
// order: those binding a name their sources use free (pylex.FreeUses) or the class of a method
// among them, and, transitively, those binding a name such a definition uses. file names the
// module in the defs. What a given trajectory needs is chosen from these when its CODE context is
// made.
func (m *Module) Defs(file string, funcs []schemas.FuncSource) []schemas.ModuleDef {
	need := map[string]bool{}
	var spans []pylex.Span
	for _, f := range funcs {
		pylex.FreeUses(f.Source, func(n string) { need[n] = true })
		if c := methodClass(f.QualName); c != "" {
			need[c] = true
		}
		spans = append(spans, pylex.Span{First: f.FirstLine, Last: f.LastLine})
	}
	cands := m.candidates(file)
	chosen, left := chooseDefs(cands, need, spans, -1)
	chosen = append(chosen, left...) // those without text too: a context that needs them counts them
	sort.Ints(chosen)
	out := make([]schemas.ModuleDef, 0, len(chosen))
	for _, i := range chosen {
		out = append(out, cands[i])
	}
	return out
}

// methodClass returns the top-level class of a method's qualified name (C of C.m, C.D.m), "" for
// a function or a function's local.
func methodClass(qual string) string {
	c, rest, ok := strings.Cut(qual, ".")
	if !ok || c == "" || strings.HasPrefix(c, "<") || strings.HasPrefix(rest, "<locals>") {
		return ""
	}
	return c
}

// chooseDefs picks among cands (in file order) the definitions needed by the names of need: first
// those binding a needed name, then those binding a name the ones picked use, and so on. A
// definition that overlaps a span of shown code is left out (its lines are shown already). Within
// budget bytes (no bound when budget < 0): a needed definition without its text, or that does not
// fit in what is left, is omitted and counted (and the names it uses are not followed). It returns
// the indices picked in file order, and those omitted. Linear in the candidates' names and text
// (times the logarithm of the shown spans).
func chooseDefs(cands []schemas.ModuleDef, need map[string]bool, shown []pylex.Span, budget int) (picked, omitted []int) {
	covered := disjoint(shown)
	byName := map[string][]int{}
	for i, d := range cands {
		overlap := false
		for _, p := range d.Parts {
			overlap = overlap || covered.overlaps(p.FirstLine, p.LastLine)
		}
		if overlap {
			continue
		}
		for _, n := range d.Names {
			byName[n] = append(byName[n], i)
		}
	}
	done := make([]bool, len(cands))
	var level []string // the names to resolve at this level, sorted for determinism
	for n := range need {
		level = append(level, n)
	}
	sort.Strings(level)
	seenName := map[string]bool{}
	for len(level) > 0 {
		var idx []int
		for _, n := range level {
			if seenName[n] {
				continue
			}
			seenName[n] = true
			for _, i := range byName[n] {
				if !done[i] {
					done[i] = true
					idx = append(idx, i)
				}
			}
		}
		sort.Ints(idx) // file order within a level
		next := map[string]bool{}
		for _, i := range idx {
			d := cands[i]
			if d.Parts == nil || budget >= 0 && d.Chars > budget {
				omitted = append(omitted, i)
				continue
			}
			if budget >= 0 {
				budget -= d.Chars
			}
			picked = append(picked, i)
			for _, p := range d.Parts {
				pylex.Uses(p.Source, func(n string) {
					if !seenName[n] {
						next[n] = true
					}
				})
			}
		}
		level = level[:0]
		for n := range next {
			level = append(level, n)
		}
		sort.Strings(level)
	}
	sort.Ints(picked)
	return picked, omitted
}

// moduleContext is the CODE context of a function-level trace of the file code (codeContext):
// the top-level blocks holding a visited line (visited, of the file named file) in source order,
// with the module-level definitions they and the wrapper name (within budget bytes; chooseDefs)
// placed by line among them (none when budget < 0: the context as it was before definitions
// were added), separated by blank lines, then the wrapper (if any). It returns the
// context and how many needed definitions it left out.
func moduleContext(code string, blocks []schemas.Block, visited map[int]bool, file, wrapper string, budget int) (string, int) {
	// Lines as Python counts them (the blocks' numbers): "\r\n" and a lone "\r" end a line too.
	norm := strings.ReplaceAll(strings.ReplaceAll(code, "\r\n", "\n"), "\r", "\n")
	lines := strings.Split(norm, "\n")
	var ps []piece
	var shown []pylex.Span
	need := map[string]bool{}
	sorted := append([]schemas.Block(nil), blocks...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Start < sorted[j].Start })
	for _, b := range sorted {
		if file != "" && b.File != "" && b.File != file {
			continue
		}
		hit := false
		for l := b.Start; l <= b.End && !hit; l++ {
			hit = visited[l]
		}
		if hit && b.Start >= 1 && b.End <= len(lines) {
			text := strings.Join(lines[b.Start-1:b.End], "\n")
			ps = append(ps, piece{first: b.Start, text: text})
			shown = append(shown, pylex.Span{First: b.Start, Last: b.End})
			pylex.FreeUses(text, func(n string) { need[n] = true })
		}
	}
	if len(blocks) == 0 {
		ctx := strings.TrimRight(norm, "\n")
		if wrapper != "" {
			return ctx + "\n\n" + wrapper, 0
		}
		return ctx + "\n", 0
	}
	omitted := 0
	if budget >= 0 && len(ps) > 0 {
		pylex.Uses(wrapper, func(n string) { need[n] = true })
		cands := ParseModule(norm).candidates("")
		picked, left := chooseDefs(cands, need, shown, budget)
		omitted = len(left)
		for _, i := range picked {
			for _, p := range cands[i].Parts {
				ps = append(ps, piece{first: p.FirstLine, text: p.Source})
			}
		}
	}
	ctx := joinPieces(ps)
	if wrapper != "" {
		if ctx != "" {
			ctx += "\n\n"
		}
		return ctx + wrapper, omitted
	}
	return ctx + "\n", omitted
}

// spans is a sorted list of disjoint line spans.
type spans []pylex.Span

// disjoint returns the union of ss as sorted disjoint spans.
func disjoint(ss []pylex.Span) spans {
	sorted := append([]pylex.Span(nil), ss...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].First < sorted[j].First })
	var out spans
	for _, s := range sorted {
		if n := len(out); n > 0 && s.First <= out[n-1].Last {
			out[n-1].Last = max(out[n-1].Last, s.Last)
			continue
		}
		out = append(out, s)
	}
	return out
}

// overlaps reports whether lines first..last meet a span of ss (a binary search).
func (ss spans) overlaps(first, last int) bool {
	i := sort.Search(len(ss), func(i int) bool { return ss[i].Last >= first })
	return i < len(ss) && ss[i].First <= last
}

// piece is one part of a CODE context: lines of a file, placed by file order then line.
type piece struct {
	file  int // the file's rank (the order its first shown function was called in)
	first int
	text  string
}

// joinPieces sorts pieces by file rank and line (stably) and joins their text with blank lines.
func joinPieces(ps []piece) string {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].file != ps[j].file {
			return ps[i].file < ps[j].file
		}
		return ps[i].first < ps[j].first
	})
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = strings.TrimRight(p.text, "\n")
	}
	return strings.Join(parts, "\n\n")
}
