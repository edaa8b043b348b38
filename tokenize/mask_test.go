package tokenize

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
)

var byteTok = func() Tokenizer { return Bytes() }

func TestEncodeSplitsOnSpecials(t *testing.T) {
	ids, err := Encode(byteTok(), "a<|frame_sep|><|not_special|>b<|end_of_text|>")
	if err != nil {
		t.Fatal(err)
	}
	frame, _ := byteTok().SpecialID(FrameSep)
	eot, _ := byteTok().SpecialID(EndOfText)
	want := append(append([]int32{'a', frame}, byteTok().EncodeOrdinary("<|not_special|>b")...), eot)
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
}

// TestLossMask checks the states convention on the §4.3 example: exactly the states produced by
// actions (with their <|action_sep|>) and the exit are learned.
func TestLossMask(t *testing.T) {
	v := func(s string) *string { return &s }
	traj := debugger.Trajectory{Direction: debugger.Forward, Code: "def f(x):\n    return x\n", Exit: debugger.ExitNormal,
		Steps: []debugger.Step{
			{State: debugger.State{Kind: debugger.KindCall, Src: "def f(x):", Shown: schemas.Locals{{Name: "x", Value: "1"}}}, Action: debugger.StepInto},
			{State: debugger.State{Kind: debugger.KindLine, Src: "    return x", Shown: schemas.Locals{}, Elided: true}, Action: debugger.StepOver},
			{State: debugger.State{Kind: debugger.KindReturn, Src: "    return x", Value: v("1")}, Action: debugger.Continue},
		}}
	text, err := Render(traj)
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := Encode(byteTok(), text)
	mask, err := LossMask(byteTok(), ids, MaskStates)
	if err != nil {
		t.Fatal(err)
	}
	var learned, given strings.Builder
	for i, id := range ids {
		s, _ := byteTok().Decode([]int32{id})
		if mask[i] {
			learned.WriteString(s)
		} else {
			given.WriteString(s)
		}
	}
	wantLearned := `<|line_sep|><|arg_sep|>{"..": ".."}<|src_sep|>    return x<|action_sep|>` +
		`<|return_sep|><|src_sep|>    return x<|arg_sep|>"1"<|action_sep|>` + `<|exit_normal|><|trace_end|><|end_of_text|>`
	if learned.String() != wantLearned {
		t.Errorf("learned %q\nwant    %q", learned.String(), wantLearned)
	}
	if !strings.Contains(given.String(), "def f(x):\n    return x\n") || !strings.Contains(given.String(), "<|step_over|>") {
		t.Errorf("given %q", given.String())
	}
	all, _ := LossMask(byteTok(), ids, MaskAll)
	for _, m := range all {
		if !m {
			t.Fatal("mask all has a false")
		}
	}
	if _, err := LossMask(byteTok(), ids, "weird"); err == nil {
		t.Error("unknown mode accepted")
	}
}
