package rows_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// studied measures forward rows: how many never show a state of the function under study
// (every state is the main() wrapper's: its call, its line `return CALL`, its return), how many
// show none of the function's lines, and the median number of states.
type studied struct {
	rows, stayInMain, noFunctionLine int
	states                           []int
}

func (s *studied) add(t *testing.T, r schemas.Row, call string) {
	traj, err := tokenize.Parse(r.Text)
	if err != nil {
		t.Fatalf("row %s: %v", r.ID, err)
	}
	wrapper := map[string]bool{"def main():": true, "    return " + call: true}
	inFunc, lines := false, false
	for _, s := range traj.Steps {
		if !wrapper[s.State.Src] {
			inFunc = true
			lines = lines || s.State.Kind == debugger.KindLine
		}
	}
	s.rows++
	if !inFunc {
		s.stayInMain++
	}
	if !lines {
		s.noFunctionLine++
	}
	s.states = append(s.states, int(r.NumStates))
}

func (s *studied) String() string {
	slices.Sort(s.states)
	med := 0
	if len(s.states) > 0 {
		med = s.states[len(s.states)/2]
	}
	return fmt.Sprintf("%d forward rows: %d (%.1f%%) never enter the function, %d (%.1f%%) show none of its lines; median %d states",
		s.rows, s.stayInMain, 100*float64(s.stayInMain)/float64(s.rows), s.noFunctionLine,
		100*float64(s.noFunctionLine)/float64(s.rows), med)
}

// TestForwardStartCruxEval traces every CruxEval function and builds its forward rows (two per
// trace, the paper's policy) starting at main's call (forward_start: main) and at the function's
// (the default): it measures the rows that never enter the function under study before and after
// (issue 28, part 6), and checks the function ids and splits over the whole run: every row's
// function id is its function's, the same function is in one split only whatever the seed, and
// the validation share is near the spec's.
//
//	go test -run TestForwardStartCruxEval -v ./rows
func TestForwardStartCruxEval(t *testing.T) {
	if testing.Short() {
		t.Skip("traces the CruxEval corpus: long integration test; run without -short")
	}
	crux := cruxeval.Rows(t)
	pool := execute.NewSandboxPool(sandbox.Config{}, 2)
	defer pool.Close()
	trc := &execute.Tracer{Sandboxes: pool}
	base := schemas.Spec{Directions: []string{"forward"}, TrajectoriesPerTrace: 2, Split: schemas.SplitSpec{"validation": 0.2}}.WithDefaults()
	opts := rows.Options{Tokenizer: tokenize.Bytes(), CreatedAt: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), TracerVersion: sandbox.TracerVersion}
	stats := map[string]*studied{schemas.ForwardStartMain: {}, schemas.ForwardStartFunction: {}}
	splitOf := map[string]string{} // function id -> split
	idOf := map[string]string{}    // normalized source -> function id
	perSplit := map[string]int{}   // functions per split
	for i, c := range crux {
		it := crawl.Item{Key: "cruxeval.jsonl#" + c.ID, Path: "cruxeval.jsonl", SourceID: c.ID, Code: c.Code, Filename: "main.py",
			Call: sandbox.CallFromInput("f", c.Input), QualName: "f"}
		traced, err := trc.Trace(context.Background(), it, base, func() {})
		if err != nil {
			t.Fatalf("%s: %v", it.Key, err)
		}
		for _, start := range []string{schemas.ForwardStartMain, schemas.ForwardStartFunction} {
			for _, seed := range []uint64{0, 7} {
				spec := base
				spec.ForwardStart, spec.Seed = start, seed
				rs, rej, err := rows.Of(traced, spec, debugger.PaperPolicy(), opts, schemas.Counts{})
				if err != nil || rej != nil {
					t.Fatalf("%s: %v %+v", it.Key, err, rej)
				}
				for _, r := range rs {
					if seed == 0 {
						stats[start].add(t, r, it.Call)
					}
					if want := crawl.FunctionID(c.Code); r.FunctionID != want {
						t.Fatalf("%s: function id %q, want %q", it.Key, r.FunctionID, want)
					}
					if s, ok := splitOf[r.FunctionID]; ok && s != r.Split {
						t.Fatalf("%s: function %s in %s and %s", it.Key, r.FunctionID, s, r.Split)
					} else if !ok {
						splitOf[r.FunctionID] = r.Split
						perSplit[r.Split]++
					}
					idOf[crawl.NormalizeSource(c.Code)] = r.FunctionID
				}
			}
		}
		if i%200 == 199 {
			t.Logf("%d items", i+1)
		}
	}
	for _, start := range []string{schemas.ForwardStartMain, schemas.ForwardStartFunction} {
		t.Logf("forward_start %s: %s", start, stats[start])
	}
	t.Logf("%d functions: %v", len(splitOf), perSplit)
	if len(idOf) != len(splitOf) {
		t.Errorf("%d distinct sources, %d function ids", len(idOf), len(splitOf))
	}
	if f := stats[schemas.ForwardStartFunction]; f.stayInMain != 0 {
		t.Errorf("forward_start function: %d rows never enter the function", f.stayInMain)
	}
	if m := stats[schemas.ForwardStartMain]; m.stayInMain*5 < m.rows {
		t.Errorf("forward_start main: only %d of %d rows stay in main (the issue measured about half)", m.stayInMain, m.rows)
	}
	if v := float64(perSplit["validation"]) / float64(len(splitOf)); v < 0.15 || v > 0.25 || perSplit["train"]+perSplit["validation"] != len(splitOf) {
		t.Errorf("splits %v: validation share %.3f, want about 0.2", perSplit, v)
	}
}
