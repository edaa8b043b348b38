package rows_test

import (
	"errors"
	"fmt"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/internal/rowtest"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// countingTokenizer is a tokenizer that counts the bytes of text it encodes: the work of
// rendering and tokenizing trajectories.
type countingTokenizer struct {
	tokenize.Tokenizer
	bytes int
}

func (c *countingTokenizer) EncodeOrdinary(text string) []int32 {
	c.bytes += len(text)
	return c.Tokenizer.EncodeOrdinary(text)
}

// capped returns n events of `while True: i += 1` in f, a run cut off by the event cap.
func capped(n int) []schemas.Event {
	evs := []schemas.Event{{Event: "call", Func: "f", File: "m.py", Src: "def f():", Lineno: 1, Frame: 1, Locals: schemas.Locals{}}}
	srcs := []string{"    i = 0", "    while True:", "        i += 1"}
	for k := 1; len(evs) < n; k++ {
		l := 2
		if k > 1 {
			l = 3 + k%2
		}
		evs = append(evs, schemas.Event{Event: "line", Func: "f", File: "m.py", Src: srcs[l-2], Lineno: l, Frame: 1,
			Locals: schemas.Locals{{Name: "i", Value: fmt.Sprint(k / 2)}, {Name: "pad", Value: "'padding to make every state longer'"}}})
	}
	return evs
}

const cappedCode = "def f():\n    i = 0\n    while True:\n        i += 1\n\ndef main():\n    return f()\n"

// customPolicy is a policy of its own, read from YAML as a spec would give it: breakpoints and
// step_return most, no token cap to speak of.
func customPolicy(t *testing.T) debugger.Policy {
	var p debugger.Policy
	err := yaml.Unmarshal([]byte(`
name: custom
forward:
  - weight: 1
    actions: {step_into: 1, step_over: 1, step_return: 2, breakpoint: 3, continue: 0.01}
inverse:
  - weight: 1
    actions: {inv_step_into: 1}
breakpoint_reachable: 0.5
max_actions: 1000000
max_tokens: 1000000000
`), &p)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBuildEventCapped builds rows of a trace cut off at the event cap (100,000 events) under
// every policy: the work (the text rendered and tokenized) is bounded by the token limit, not by
// the trace, and a row cut to fit says so.
func TestBuildEventCapped(t *testing.T) {
	const events, maxTokens = 100000, 4096
	evs := capped(events)
	for _, p := range []debugger.Policy{debugger.PaperPolicy(), debugger.StepIntoPolicy(), customPolicy(t)} {
		for seed := uint64(0); seed < 3; seed++ {
			tree, err := debugger.BuildForward(evs, debugger.ExitNever)
			if err != nil {
				t.Fatal(err)
			}
			tree = debugger.WrapMain(tree, "f()")
			tok := &countingTokenizer{Tokenizer: tokenize.Bytes()}
			o := rows.Options{Tokenizer: tok, MaxTokens: maxTokens}
			row, err := rows.Build(rows.Source{Level: "function"}, tree, cappedCode, evs, p, seed, o)
			if err != nil && !errors.Is(err, rows.ErrTooLong) {
				t.Fatalf("%s seed %d: %v", p.Name, seed, err)
			}
			// The whole step_into trajectory would be about 60 bytes a state, 6 MB: the work
			// stays within a few times the limit per attempt.
			if limit := 4 * 4 * maxTokens; tok.bytes > limit {
				t.Errorf("%s seed %d: %d bytes tokenized for a row of at most %d tokens (limit %d)", p.Name, seed, tok.bytes, maxTokens, limit)
			}
			if err != nil {
				continue
			}
			if row.NumTokens > maxTokens || row.Exit != string(debugger.ExitNever) || row.ActContinue != 1 {
				t.Errorf("%s seed %d: %d tokens, exit %s, %d continue", p.Name, seed, row.NumTokens, row.Exit, row.ActContinue)
			}
			if p.Name == "step_into" && !row.Truncated {
				t.Errorf("step_into seed %d: a row cut to fit is not marked truncated (%d states)", seed, row.NumStates)
			}
		}
	}
}

// TestBuildTruncated checks the truncated column: set on a row re-sampled under the token budget
// (finished by a forced continue), not on a row that ran its course.
func TestBuildTruncated(t *testing.T) {
	it := rowtest.Item(t, rowtest.LoopCode, "f(200)")
	tree, code, err := it.Tree(debugger.Forward)
	if err != nil {
		t.Fatal(err)
	}
	src := rows.Source{Level: "function"}
	whole, err := rows.Build(src, tree, code, it.Events, debugger.StepIntoPolicy(), 0, rows.Options{Tokenizer: tokenize.Bytes(), MaxTokens: 1 << 20})
	if err != nil || whole.Truncated || whole.Exit != string(debugger.ExitNormal) {
		t.Fatalf("whole: %v, truncated %v, exit %s", err, whole.Truncated, whole.Exit)
	}
	cut, err := rows.Build(src, tree, code, it.Events, debugger.StepIntoPolicy(), 0, rows.Options{Tokenizer: tokenize.Bytes(), MaxTokens: 1200})
	if err != nil || !cut.Truncated || cut.NumStates >= whole.NumStates {
		t.Fatalf("cut: %v, truncated %v, %d of %d states", err, cut.Truncated, cut.NumStates, whole.NumStates)
	}
}

// BenchmarkBuildEventCapped builds one row of a trace cut off at the event cap (100,000 events)
// per policy, with the default token limit.
func BenchmarkBuildEventCapped(b *testing.B) {
	evs := capped(100000)
	for _, p := range []debugger.Policy{debugger.PaperPolicy(), debugger.StepIntoPolicy()} {
		b.Run(p.Name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				tree, err := debugger.BuildForward(evs, debugger.ExitNever)
				if err != nil {
					b.Fatal(err)
				}
				tree = debugger.WrapMain(tree, "f()")
				_, err = rows.Build(rows.Source{Level: "function"}, tree, cappedCode, evs, p, uint64(i), rows.Options{Tokenizer: tokenize.Bytes()})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
