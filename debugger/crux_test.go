package debugger_test

import (
	"sort"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/tokenize"
)

// TestCruxEvalTrajectoryStats samples one forward and one inverse trajectory with the paper policy for
// each of the 800 CruxEval functions, checks that each renders and parses back, and reports the mean,
// 25th and 90th percentile of tokens, actions and states per trajectory (the paper's Figure 5
// statistics; tokens are estimated at 3.5 bytes a token until exact tokenizers are plugged in).
func TestCruxEvalTrajectoryStats(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	rows := cruxeval.Rows(t)
	type stats struct{ tokens, actions, states, chars []float64 }
	all := map[debugger.Direction]*stats{debugger.Forward: {}, debugger.Inverse: {}}
	for i, r := range rows {
		call := sandbox.CallFromInput("f", r.Input)
		res := traceCode(t, r.Code, call)
		item := debugger.Item{Code: r.Code, Call: call, Events: res.Events, Blocks: res.Blocks, Status: res.Status}
		for dir, st := range all {
			traj, err := item.Sample(dir, debugger.PaperPolicy(), uint64(i), nil)
			if err != nil {
				t.Fatalf("row %d %s: %v", i, dir, err)
			}
			text, err := tokenize.Render(traj)
			if err != nil {
				t.Fatalf("row %d %s: %v", i, dir, err)
			}
			back, err := tokenize.Parse(text)
			if err != nil {
				t.Fatalf("row %d %s: rendered text does not parse: %v", i, dir, err)
			}
			if len(back.Steps) != len(traj.Steps) {
				t.Fatalf("row %d %s: round trip lost steps", i, dir)
			}
			tokens := len(traj.Code) * 2 / 7
			for _, s := range traj.Steps {
				tokens += debugger.EstimateTokens(s)
			}
			st.tokens = append(st.tokens, float64(tokens))
			st.actions = append(st.actions, float64(traj.Actions()))
			st.states = append(st.states, float64(len(traj.Steps)))
			st.chars = append(st.chars, float64(len(text)))
		}
	}
	for _, dir := range []debugger.Direction{debugger.Forward, debugger.Inverse} {
		st := all[dir]
		for _, m := range []struct {
			name string
			v    []float64
		}{{"tokens (est.)", st.tokens}, {"actions", st.actions}, {"states", st.states}, {"characters", st.chars}} {
			mean, p25, p90 := summary(m.v)
			t.Logf("CruxEval %s %-13s mean %7.1f  p25 %6.0f  p90 %6.0f", dir, m.name, mean, p25, p90)
		}
	}
}

// summary returns the mean, 25th and 90th percentile of v.
func summary(v []float64) (mean, p25, p90 float64) {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	for _, x := range s {
		mean += x
	}
	return mean / float64(len(s)), s[len(s)/4], s[len(s)*9/10]
}
