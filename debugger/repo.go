package debugger

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/ndtrace/ndtrace/internal/pylex"
	"github.com/ndtrace/ndtrace/schemas"
)

// RepoItem is one traced test of a repository: what repository-level trajectories are built from
// (paper §4.3). The trace covers only the repository's own files; each trajectory's entry point is
// one function call sampled from it, and the trajectory is truncated to that call's scope.
type RepoItem struct {
	// Events and Status come from the traced test run; Trace, when set, is the run's events in
	// compact form and Events is not read (a tree is built over a Trace: made from Events at
	// every draw otherwise).
	Events []schemas.Event
	Trace  *Trace
	Status schemas.Status
	// Functions are the sources of the functions the run visited (the CODE context is built from
	// them: the functions visited in the entry's scope, not whole files).
	Functions []schemas.FuncSource
	// Modules are the module-level definitions of the functions' files they may need (their
	// imports, constants, class headers: schemas.TestTrace.Modules); nil for traces from before
	// they were collected.
	Modules []schemas.ModuleDef
}

// Entry names the call a repository-level trajectory starts at.
type Entry struct {
	// File is the entry function's file as traced (an absolute path in the checkout); QualName its
	// qualified name; Line its def line.
	File     string
	QualName string
	Line     int
	// Occurrence counts the frames of the same function (File and QualName) called before the
	// entry's in the trace: the entry is that function's first call when 0. A replay finds the
	// entry again by it (sandbox.ReplayEntry).
	Occurrence int
}

// ErrNoEntry is returned for a test trace with no call to sample an entry from.
var ErrNoEntry = errors.New("debugger: no function call in the trace to start from")

// IsTestFile reports whether a file is a test file by the usual conventions (test_*.py, *_test.py,
// conftest.py, or a file under a tests/ or test/ folder). Entry points are sampled among calls of
// functions outside test files when there are any: the code a test exercises, not the test.
func IsTestFile(file string) bool {
	base := path.Base(file)
	if strings.HasPrefix(base, "test_") || strings.HasSuffix(base, "_test.py") || base == "conftest.py" {
		return true
	}
	return strings.Contains("/"+file, "/tests/") || strings.Contains("/"+file, "/test/")
}

// SampleEntry draws the entry call of a trajectory with a generator seeded by seed: uniformly among
// the calls that start a frame in a non-test file, or among all calls if every call is in a test
// file. It returns the forward tree truncated to the entry's scope and the entry.
func (it RepoItem) SampleEntry(seed uint64) (*Tree, Entry, error) {
	exit, err := ExitFor(it.Status)
	if err != nil {
		return nil, Entry{}, err
	}
	var fwd *Tree
	if it.Trace != nil {
		fwd, err = BuildForwardTrace(it.Trace, exit)
	} else {
		fwd, err = BuildForward(it.Events, exit)
	}
	if err != nil {
		return nil, Entry{}, err
	}
	seen := map[int]bool{}
	var calls, code []*Node
	nth := map[*Node]int{}
	perFunc := map[[2]string]int{}
	for _, n := range fwd.Order {
		if n.Kind == KindCall && !seen[n.Frame()] {
			seen[n.Frame()] = true
			k := [2]string{n.File(), n.Func()}
			nth[n] = perFunc[k]
			perFunc[k]++
			calls = append(calls, n)
			if !IsTestFile(n.File()) {
				code = append(code, n)
			}
		}
	}
	if len(code) > 0 {
		calls = code
	}
	if len(calls) == 0 {
		return nil, Entry{}, ErrNoEntry
	}
	// A stream of its own, so that the entry does not shift the policy's draws.
	rng := NewRand(seed ^ 0x9e3779b97f4a7c15)
	c := calls[rng.IntN(len(calls))]
	t, err := Scope(fwd, c)
	if err != nil {
		return nil, Entry{}, err
	}
	// The entry outlives the trace (rows name it): its strings are copied, since a trace's strings
	// may be slices of one string that holds them all (a stored trace read back), which a row
	// would otherwise keep whole.
	return t, Entry{File: strings.Clone(c.File()), QualName: strings.Clone(c.Func()), Line: c.Lineno(), Occurrence: nth[c]}, nil
}

// Tree returns the state tree of a trajectory of the item in direction dir (the entry's scope,
// reversed for inverse), its CODE context and its entry.
func (it RepoItem) Tree(dir Direction, seed uint64) (*Tree, string, Entry, error) {
	fwd, entry, err := it.SampleEntry(seed)
	if err != nil {
		return nil, "", Entry{}, err
	}
	t := fwd
	switch dir {
	case Forward:
	case Inverse:
		if t, err = BuildInverse(fwd); err != nil {
			return nil, "", Entry{}, err
		}
	default:
		return nil, "", Entry{}, fmt.Errorf("debugger: unknown direction %q", dir)
	}
	code, omitted := RepoContext(it.Functions, it.Modules, fwd, DefsBudget)
	t.CodeOmitted = omitted
	return t, code, entry, nil
}

// Sample draws one repository-level trajectory in direction dir: the entry from seed (SampleEntry),
// then the actions from policy p with the same seed (see Sample).
func (it RepoItem) Sample(dir Direction, p Policy, seed uint64, cost CostFunc) (Trajectory, Entry, error) {
	t, code, entry, err := it.Tree(dir, seed)
	if err != nil {
		return Trajectory{}, Entry{}, err
	}
	traj, err := Sample(t, code, p, seed, cost)
	return traj, entry, err
}

// RepoCodeContext returns the CODE context of a repository-level tree without module-level
// definitions: RepoContext with none.
func RepoCodeContext(funcs []schemas.FuncSource, t *Tree) string {
	code, _ := RepoContext(funcs, nil, t, DefsBudget)
	return code
}

// RepoContext returns the CODE context of a repository-level tree: the source of every function
// with a state in t, and the module-level definitions of mods they need (chooseDefs: those binding
// a name they use, the class headers of their methods, and the definitions those name in turn),
// within budget bytes of definitions (none when budget < 0), and how many needed definitions it left out. Files come in
// the order of funcs (the order the run first called them), and a file's functions and definitions
// in the file's order, separated by blank lines and ending in a newline. A frame's function is
// found by file and qualified name; a frame without a source of its own (a lambda or
// comprehension) stands for the innermost function of funcs whose lines hold its line. Functions
// nested in another one that is shown are not repeated. Linear in the functions' and definitions'
// text (times the functions shown per file, for overlaps).
func RepoContext(funcs []schemas.FuncSource, mods []schemas.ModuleDef, t *Tree, budget int) (string, int) {
	shown := ShownFunctions(funcs, t)
	rank := map[string]int{}
	need := map[string]map[string]bool{}
	spans := map[string][]pylex.Span{}
	var ps []piece
	for i, f := range funcs {
		if !shown[i] {
			continue
		}
		if _, ok := rank[f.File]; !ok {
			rank[f.File] = len(rank)
			need[f.File] = map[string]bool{}
		}
		// Kept as in the file (a method stays indented by its class), so that the context's lines
		// are the states' source lines, which breakpoints name.
		ps = append(ps, piece{file: rank[f.File], first: f.FirstLine, text: f.Source})
		spans[f.File] = append(spans[f.File], pylex.Span{First: f.FirstLine, Last: f.LastLine})
		pylex.FreeUses(f.Source, func(n string) { need[f.File][n] = true })
		if c := methodClass(f.QualName); c != "" {
			need[f.File][c] = true
		}
	}
	omitted := 0
	if len(mods) > 0 && budget >= 0 {
		// Per file, in the files' order: the budget goes to the first files' needs first.
		files := make([]string, len(rank))
		for f, r := range rank {
			files[r] = f
		}
		defsOf := map[string][]schemas.ModuleDef{}
		for _, d := range mods {
			defsOf[d.File] = append(defsOf[d.File], d)
		}
		for _, file := range files {
			cands := defsOf[file]
			picked, left := chooseDefs(cands, need[file], spans[file], budget)
			omitted += len(left)
			for _, i := range picked {
				budget -= cands[i].Chars
				for _, p := range cands[i].Parts {
					ps = append(ps, piece{file: rank[file], first: p.FirstLine, text: p.Source})
				}
			}
		}
	}
	return joinPieces(ps) + "\n", omitted
}

// ShownFunctions reports, for each of funcs, whether RepoContext shows its source for tree t: a
// function with a state in t (a frame without a source of its own stands for the innermost
// function whose lines hold its line), not nested in another shown function.
func ShownFunctions(funcs []schemas.FuncSource, t *Tree) []bool {
	type key struct{ file, name string }
	byName := map[key]int{}
	byFile := map[string][]int{}
	for i, f := range funcs {
		if _, ok := byName[key{f.File, f.QualName}]; !ok {
			byName[key{f.File, f.QualName}] = i
		}
		byFile[f.File] = append(byFile[f.File], i)
	}
	shown := make([]bool, len(funcs))
	for _, n := range t.Order {
		file, fn, lineno := n.File(), n.Func(), n.Lineno()
		if i, ok := byName[key{file, fn}]; ok {
			shown[i] = true
			continue
		}
		best := -1
		for _, i := range byFile[file] {
			f := funcs[i]
			if f.FirstLine <= lineno && lineno <= f.LastLine &&
				(best < 0 || f.LastLine-f.FirstLine < funcs[best].LastLine-funcs[best].FirstLine) {
				best = i
			}
		}
		if best >= 0 {
			shown[best] = true
		}
	}
	out := make([]bool, len(funcs))
	for i := range funcs {
		out[i] = shown[i] && !nestedInShown(funcs, shown, i)
	}
	return out
}

// nestedInShown reports whether funcs[i] lies within another shown function of the same file.
func nestedInShown(funcs []schemas.FuncSource, shown []bool, i int) bool {
	f := funcs[i]
	for j, g := range funcs {
		if j != i && shown[j] && g.File == f.File && g.FirstLine <= f.FirstLine && f.LastLine <= g.LastLine &&
			(g.FirstLine != f.FirstLine || g.LastLine != f.LastLine || j < i) {
			return true
		}
	}
	return false
}
