package tokenize

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
)

func ptr(s string) *string { return &s }

func locals(kv ...string) schemas.Locals {
	l := schemas.Locals{}
	for i := 0; i+1 < len(kv); i += 2 {
		l = append(l, schemas.Var{Name: kv[i], Value: kv[i+1]})
	}
	return l
}

const sqCode = "def sq(x):\n    y = x * x\n    return y\n\ndef main():\n    a = sq(3)\n    b = a + 1\n    return b\n"

// sqForward is the worked example of the paper notes §4.3.
var sqForward = debugger.Trajectory{
	Direction: debugger.Forward,
	Code:      sqCode,
	Steps: []debugger.Step{
		{State: debugger.State{Kind: debugger.KindCall, Src: "def main():", Shown: locals()}, Action: debugger.StepInto},
		{State: debugger.State{Kind: debugger.KindLine, Src: "    a = sq(3)", Shown: locals()}, Action: debugger.StepInto},
		{State: debugger.State{Kind: debugger.KindCall, Src: "def sq(x):", Shown: locals("x", "3")}, Action: debugger.StepOver},
		{State: debugger.State{Kind: debugger.KindLine, Src: "    y = x * x", Elided: true}, Action: debugger.StepReturn},
		{State: debugger.State{Kind: debugger.KindReturn, Src: "    return y", Value: ptr("9")}, Action: debugger.StepOver},
		{State: debugger.State{Kind: debugger.KindLine, Src: "    b = a + 1", Shown: locals("a", "9")}, Action: debugger.Breakpoint, Arg: "    return b"},
		{State: debugger.State{Kind: debugger.KindLine, Src: "    return b", Shown: locals("a", "9", "b", "10")}, Action: debugger.Continue},
	},
	Exit: debugger.ExitNormal,
}

const sqForwardText = "<|begin_of_text|><|trace_context_start|>def sq(x):\n    y = x * x\n    return y\n\ndef main():\n    a = sq(3)\n    b = a + 1\n    return b\n" +
	`<|frame_sep|><|call_sep|><|src_sep|>def main():<|arg_sep|>{}<|action_sep|><|step_into|><|frame_sep|><|line_sep|><|arg_sep|>{}<|src_sep|>    a = sq(3)<|action_sep|><|step_into|><|frame_sep|><|call_sep|><|src_sep|>def sq(x):<|arg_sep|>{"x": "3"}<|action_sep|><|step_over|><|frame_sep|><|line_sep|><|arg_sep|>{"..": ".."}<|src_sep|>    y = x * x<|action_sep|><|step_return|><|frame_sep|><|return_sep|><|src_sep|>    return y<|arg_sep|>"9"<|action_sep|><|step_over|><|frame_sep|><|line_sep|><|arg_sep|>{"a": "9"}<|src_sep|>    b = a + 1<|action_sep|><|breakpoint|>    return b<|frame_sep|><|line_sep|><|arg_sep|>{"a": "9", "b": "10"}<|src_sep|>    return b<|action_sep|><|continue|><|frame_sep|><|exit_normal|><|trace_end|><|end_of_text|>`

// sqInverse runs main backwards: inv_line_call enters sq from its return, inv_step_call jumps to
// sq's call, and inv_step_over past main's call leaves the entry.
var sqInverse = debugger.Trajectory{
	Direction: debugger.Inverse,
	Code:      sqCode,
	Steps: []debugger.Step{
		{State: debugger.State{Kind: debugger.KindInvReturn, Src: "    return b", Value: ptr("10")}, Action: debugger.InvStepOver},
		{State: debugger.State{Kind: debugger.KindInvLine, Src: "    return b", Elided: true}, Action: debugger.InvStepOver},
		{State: debugger.State{Kind: debugger.KindInvLine, Src: "    b = a + 1", Elided: true}, Action: debugger.InvStepOver},
		{State: debugger.State{Kind: debugger.KindInvLineCall, Src: "    a = sq(3)", Elided: true}, Action: debugger.InvStepInto},
		{State: debugger.State{Kind: debugger.KindInvReturn, Src: "    return y", Value: ptr("9")}, Action: debugger.InvStepCall},
		{State: debugger.State{Kind: debugger.KindInvCall, Src: "def sq(x):", Shown: locals("x", "3")}, Action: debugger.InvStepOver},
		{State: debugger.State{Kind: debugger.KindInvLine, Src: "    a = sq(3)", Elided: true}, Action: debugger.InvStepOver},
		{State: debugger.State{Kind: debugger.KindInvCall, Src: "def main():", Shown: locals()}, Action: debugger.InvStepOver},
	},
	Exit: debugger.InvExitEntry,
}

const sqInverseText = "<|begin_of_text|><|trace_context_start|>" + sqCode +
	`<|frame_sep|><|inv_return_sep|><|src_sep|>    return b<|arg_sep|>"10"<|action_sep|><|inv_step_over|>` +
	`<|frame_sep|><|inv_line_sep|><|src_sep|>    return b<|arg_sep|>{"..": ".."}<|action_sep|><|inv_step_over|>` +
	`<|frame_sep|><|inv_line_sep|><|src_sep|>    b = a + 1<|arg_sep|>{"..": ".."}<|action_sep|><|inv_step_over|>` +
	`<|frame_sep|><|inv_line_call_sep|><|src_sep|>    a = sq(3)<|arg_sep|>{"..": ".."}<|action_sep|><|inv_step_into|>` +
	`<|frame_sep|><|inv_return_sep|><|src_sep|>    return y<|arg_sep|>"9"<|action_sep|><|inv_step_call|>` +
	`<|frame_sep|><|inv_call_sep|><|src_sep|>def sq(x):<|arg_sep|>{"x": "3"}<|action_sep|><|inv_step_over|>` +
	`<|frame_sep|><|inv_line_sep|><|src_sep|>    a = sq(3)<|arg_sep|>{"..": ".."}<|action_sep|><|inv_step_over|>` +
	`<|frame_sep|><|inv_call_sep|><|src_sep|>def main():<|arg_sep|>{}<|action_sep|><|inv_step_over|>` +
	`<|frame_sep|><|inv_exit_entry|><|trace_end|><|end_of_text|>`

const divCode = "def div(a, b):\n    return a / b\n"

// divError raises: forward exception states, an error exit, and a value holding a special token,
// a quote, a backslash and non-ASCII text.
var divError = debugger.Trajectory{
	Direction: debugger.Forward,
	Code:      divCode,
	Steps: []debugger.Step{
		{State: debugger.State{Kind: debugger.KindCall, Src: "def div(a, b):", Shown: locals("a", "'<|frame_sep|>'", "b", `"é\n"`)}, Action: debugger.StepInto},
		{State: debugger.State{Kind: debugger.KindLine, Src: "    return a / b", Elided: true}, Action: debugger.StepInto},
		{State: debugger.State{Kind: debugger.KindException, Src: "    return a / b", Value: ptr("TypeError(\"unsupported operand type(s) for /: 'str' and 'str'\")")}, Action: debugger.StepInto},
		{State: debugger.State{Kind: debugger.KindReturn, Src: "    return a / b", Value: ptr("None")}, Action: debugger.Continue},
	},
	Exit: debugger.ExitError,
}

const divErrorText = "<|begin_of_text|><|trace_context_start|>" + divCode +
	`<|frame_sep|><|call_sep|><|src_sep|>def div(a, b):<|arg_sep|>{"a": "'\u003c|frame_sep|>'", "b": "\"\u00e9\\n\""}<|action_sep|><|step_into|>` +
	`<|frame_sep|><|line_sep|><|arg_sep|>{"..": ".."}<|src_sep|>    return a / b<|action_sep|><|step_into|>` +
	`<|frame_sep|><|exception_sep|><|src_sep|>    return a / b<|arg_sep|>"TypeError(\"unsupported operand type(s) for /: 'str' and 'str'\")"<|action_sep|><|step_into|>` +
	`<|frame_sep|><|return_sep|><|src_sep|>    return a / b<|arg_sep|>"None"<|action_sep|><|continue|>` +
	`<|frame_sep|><|exit_error|><|trace_end|><|end_of_text|>`

// invException shows the inverse exception state and a trajectory with no steps is allowed too.
var invException = debugger.Trajectory{
	Direction: debugger.Inverse,
	Code:      divCode,
	Steps: []debugger.Step{
		{State: debugger.State{Kind: debugger.KindInvException, Src: "    return a / b", Value: ptr("ZeroDivisionError('division by zero')")}, Action: debugger.InvStepCall},
		{State: debugger.State{Kind: debugger.KindInvCall, Src: "def div(a, b):", Shown: locals("a", "1", "b", "0")}, Action: debugger.InvStepInto},
	},
	Exit: debugger.InvExitEntry,
}

const invExceptionText = "<|begin_of_text|><|trace_context_start|>" + divCode +
	`<|frame_sep|><|inv_exception_sep|><|src_sep|>    return a / b<|arg_sep|>"ZeroDivisionError('division by zero')"<|action_sep|><|inv_step_call|>` +
	`<|frame_sep|><|inv_call_sep|><|src_sep|>def div(a, b):<|arg_sep|>{"a": "1", "b": "0"}<|action_sep|><|inv_step_into|>` +
	`<|frame_sep|><|inv_exit_entry|><|trace_end|><|end_of_text|>`

var grammarExamples = []struct {
	name string
	t    debugger.Trajectory
	want string
}{
	{"paper notes 4.3 forward", sqForward, sqForwardText},
	{"inverse with inv_line_call", sqInverse, sqInverseText},
	{"forward exception", divError, divErrorText},
	{"inverse exception", invException, invExceptionText},
	{"no steps forward", debugger.Trajectory{Direction: debugger.Forward, Code: "x = 1\n", Exit: debugger.ExitNever},
		"<|begin_of_text|><|trace_context_start|>x = 1\n<|frame_sep|><|exit_never|><|trace_end|><|end_of_text|>"},
	{"no steps inverse", debugger.Trajectory{Direction: debugger.Inverse, Code: "x = 1\n", Steps: []debugger.Step{}, Exit: debugger.InvExitEntry},
		"<|begin_of_text|><|trace_context_start|>x = 1\n<|frame_sep|><|inv_exit_entry|><|trace_end|><|end_of_text|>"},
	{"raw text keeps near-tokens, indentation and tabs", debugger.Trajectory{
		Direction: debugger.Forward,
		Code:      "def f(a):  # a <| b |> c <|not_a_token|>\n\treturn a <|x\n",
		Steps: []debugger.Step{
			{State: debugger.State{Kind: debugger.KindCall, Src: "def f(a):  # a <| b |> c <|not_a_token|>", Shown: locals("a", "1")}, Action: debugger.Breakpoint, Arg: "\treturn a <|x"},
			{State: debugger.State{Kind: debugger.KindLine, Src: "\treturn a <|x", Elided: true, Shown: locals()}, Action: debugger.StepOver},
		},
		Exit: debugger.ExitNormal,
	}, "<|begin_of_text|><|trace_context_start|>def f(a):  # a <| b |> c <|not_a_token|>\n\treturn a <|x\n" +
		`<|frame_sep|><|call_sep|><|src_sep|>def f(a):  # a <| b |> c <|not_a_token|><|arg_sep|>{"a": "1"}<|action_sep|><|breakpoint|>` + "\treturn a <|x" +
		`<|frame_sep|><|line_sep|><|arg_sep|>{"..": ".."}<|src_sep|>` + "\treturn a <|x" + `<|action_sep|><|step_over|>` +
		`<|frame_sep|><|exit_normal|><|trace_end|><|end_of_text|>`},
}

func TestRender(t *testing.T) {
	for _, tc := range grammarExamples {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Render(tc.t)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != tc.want {
				t.Fatalf("Render:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	for _, tc := range grammarExamples {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.want)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if want := tc.t.Grammar(); !reflect.DeepEqual(got, want) {
				t.Fatalf("Parse:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestRenderPrompt(t *testing.T) {
	for _, tc := range grammarExamples {
		t.Run(tc.name, func(t *testing.T) {
			// Cut after every action: the prompt is the text up to the next <|frame_sep|>, inclusive.
			for k := 0; k <= len(tc.t.Steps); k++ {
				prefix := tc.t
				prefix.Steps = tc.t.Steps[:k]
				got, err := RenderPrompt(prefix)
				if err != nil {
					t.Fatalf("RenderPrompt(%d steps): %v", k, err)
				}
				if !strings.HasPrefix(tc.want, got) || !strings.HasSuffix(got, FrameSep) || strings.Count(got, FrameSep) != k+1 {
					t.Fatalf("RenderPrompt(%d steps) = %q, not the text up to frame %d", k, got, k+1)
				}
				var target string
				if k < len(tc.t.Steps) {
					target, err = RenderState(tc.t.Steps[k].State)
					target += ActionSep
				} else {
					target, err = RenderExit(tc.t.Exit)
					target += TraceEnd + EndOfText
				}
				if err != nil || !strings.HasPrefix(tc.want[len(got):], target) {
					t.Fatalf("after prompt %d the text is %q, want target %q (%v)", k, tc.want[len(got):], target, err)
				}
			}
		})
	}
	if _, err := RenderExit("done"); err == nil || err.Error() != `tokenize: Exit: unknown exit "done"` {
		t.Errorf("RenderExit(unknown) = %v", err)
	}
	// The prompt ignores the exit: a forward prefix may carry any exit, even none.
	prefix := sqForward
	prefix.Exit = ""
	if _, err := RenderPrompt(prefix); err != nil {
		t.Errorf("RenderPrompt(no exit) = %v", err)
	}
}

// TestRenderIgnoresMetadata checks that only what Grammar keeps is rendered.
func TestRenderIgnoresMetadata(t *testing.T) {
	tr := debugger.Trajectory{Direction: debugger.Forward, Code: sqCode, Exit: debugger.ExitNormal}
	for _, s := range sqForward.Steps {
		s.State.Func, s.State.Lineno, s.State.Depth, s.State.Frame = "f", 7, 2, 3
		s.State.Locals = locals("secret", "1")
		if s.State.Kind.HasArgs() {
			s.State.Shown, s.State.Elided = locals("ignored", "x"), true
		}
		tr.Steps = append(tr.Steps, s)
	}
	got, err := Render(tr)
	if err != nil || got != sqForwardText {
		t.Fatalf("Render with metadata = %q, %v; want the text without it", got, err)
	}
}

func TestRenderErrors(t *testing.T) {
	step := func(k debugger.Kind, a debugger.Action) debugger.Step {
		s := debugger.Step{State: debugger.State{Kind: k, Src: "x = 1"}, Action: a}
		if k.HasArgs() {
			s.State.Value = ptr("1")
		}
		return s
	}
	fwd := func(steps ...debugger.Step) debugger.Trajectory {
		return debugger.Trajectory{Direction: debugger.Forward, Code: "x = 1\n", Steps: steps, Exit: debugger.ExitNormal}
	}
	with := func(t debugger.Trajectory, f func(*debugger.Trajectory)) debugger.Trajectory { f(&t); return t }
	line := step(debugger.KindLine, debugger.StepOver)

	tests := []struct {
		name string
		t    debugger.Trajectory
		want string
		is   error
	}{
		{"direction", with(fwd(), func(t *debugger.Trajectory) { t.Direction = "" }), `tokenize: Direction: unknown direction ""`, nil},
		{"code without newline", with(fwd(), func(t *debugger.Trajectory) { t.Code = "x = 1" }), "tokenize: Code: must end with a line break", nil},
		{"empty code", with(fwd(), func(t *debugger.Trajectory) { t.Code = "" }), "tokenize: Code: must end with a line break", nil},
		{"code with token", with(fwd(), func(t *debugger.Trajectory) { t.Code = "x = '<|frame_sep|>'\n" }), "tokenize: Code: contains a special token <|frame_sep|> at byte 5", ErrSpecialToken},
		{"code invalid utf8", with(fwd(), func(t *debugger.Trajectory) { t.Code = "x = '\xff'\n" }), "tokenize: Code: is not valid UTF-8: byte 0xff at offset 5", ErrInvalidUTF8},
		{"src with token", fwd(line, with(fwd(line), func(t *debugger.Trajectory) { t.Steps[0].State.Src = "a<|end_of_text|>" }).Steps[0]), "tokenize: Steps[1].State.Src: contains a special token <|end_of_text|> at byte 1", ErrSpecialToken},
		{"src with newline", with(fwd(line), func(t *debugger.Trajectory) { t.Steps[0].State.Src = "x = 1\n" }), `tokenize: Steps[0].State.Src: contains a line break '\n' at byte 5`, ErrLineBreak},
		{"src with CR", with(fwd(line), func(t *debugger.Trajectory) { t.Steps[0].State.Src = "x\r" }), `tokenize: Steps[0].State.Src: contains a line break '\r' at byte 1`, ErrLineBreak},
		{"unknown kind", fwd(step("jump", debugger.StepOver)), `tokenize: Steps[0].State.Kind: unknown kind "jump"`, nil},
		{"inverse kind forward", fwd(step(debugger.KindInvLine, debugger.StepOver)), "tokenize: Steps[0].State.Kind: inv_line state in a forward trajectory", nil},
		{"forward kind inverse", with(fwd(line), func(t *debugger.Trajectory) { t.Direction, t.Exit = debugger.Inverse, debugger.InvExitEntry }), "tokenize: Steps[0].State.Kind: line state in an inverse trajectory", nil},
		{"missing value", with(fwd(step(debugger.KindReturn, debugger.StepOver)), func(t *debugger.Trajectory) { t.Steps[0].State.Value = nil }), "tokenize: Steps[0].State.Value: missing; return states carry a value (ARGS)", nil},
		{"value on line", with(fwd(line), func(t *debugger.Trajectory) { t.Steps[0].State.Value = ptr("1") }), "tokenize: Steps[0].State.Value: must be nil; line states show LOCALS, not a value", nil},
		{"value invalid utf8", with(fwd(step(debugger.KindException, debugger.StepOver)), func(t *debugger.Trajectory) { t.Steps[0].State.Value = ptr("\xc3") }), "tokenize: Steps[0].State.Value: is not valid UTF-8", ErrInvalidUTF8},
		{"marker name", with(fwd(line), func(t *debugger.Trajectory) { t.Steps[0].State.Shown = locals("..", "..") }), `tokenize: Steps[0].State.Shown[0].Name: ".." is reserved for the diff marker`, nil},
		{"duplicate name", with(fwd(line), func(t *debugger.Trajectory) { t.Steps[0].State.Shown = locals("a", "1", "a", "1") }), `tokenize: Steps[0].State.Shown[1].Name: duplicate name "a" (also at [0])`, nil},
		{"local invalid utf8", with(fwd(line), func(t *debugger.Trajectory) { t.Steps[0].State.Shown = locals("a", "1", "b", "\x80") }), "tokenize: Steps[0].State.Shown[1].Value: is not valid UTF-8", ErrInvalidUTF8},
		{"missing action", fwd(step(debugger.KindLine, "")), "tokenize: Steps[0].Action: missing", nil},
		{"unknown action", fwd(step(debugger.KindLine, "jump")), `tokenize: Steps[0].Action: unknown action "jump"`, nil},
		{"inverse action forward", fwd(step(debugger.KindLine, debugger.InvStepOver)), "tokenize: Steps[0].Action: inv_step_over is not allowed in a forward trajectory", nil},
		{"forward action inverse", with(fwd(step(debugger.KindInvLine, debugger.Continue)), func(t *debugger.Trajectory) { t.Direction, t.Exit = debugger.Inverse, debugger.InvExitEntry }), "tokenize: Steps[0].Action: continue is not allowed in an inverse trajectory", nil},
		{"breakpoint without arg", fwd(step(debugger.KindLine, debugger.Breakpoint)), "tokenize: Steps[0].Arg: a breakpoint needs its target source line", nil},
		{"arg on step", with(fwd(line), func(t *debugger.Trajectory) { t.Steps[0].Arg = "x = 1" }), `tokenize: Steps[0].Arg: only a breakpoint takes an argument, step_over has "x = 1"`, nil},
		{"breakpoint arg newline", with(fwd(step(debugger.KindLine, debugger.Breakpoint)), func(t *debugger.Trajectory) { t.Steps[0].Arg = "a\nb" }), `tokenize: Steps[0].Arg: contains a line break '\n' at byte 1`, ErrLineBreak},
		{"breakpoint arg token", with(fwd(step(debugger.KindLine, debugger.Breakpoint)), func(t *debugger.Trajectory) { t.Steps[0].Arg = "<|step_into|>" }), "tokenize: Steps[0].Arg: contains a special token <|step_into|> at byte 0", ErrSpecialToken},
		{"unknown exit", with(fwd(), func(t *debugger.Trajectory) { t.Exit = "" }), `tokenize: Exit: unknown exit ""`, nil},
		{"inverse exit forward", with(fwd(), func(t *debugger.Trajectory) { t.Exit = debugger.InvExitEntry }), "tokenize: Exit: inv_exit_entry cannot end a forward trajectory", nil},
		{"forward exit inverse", with(fwd(), func(t *debugger.Trajectory) { t.Direction = debugger.Inverse }), "tokenize: Exit: exit_normal cannot end an inverse trajectory", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Render(tc.t)
			if err == nil {
				t.Fatalf("Render = %q, want error %q", got, tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("Render error = %q, want prefix %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("Render error %q does not wrap %v", err, tc.is)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	const head = "<|begin_of_text|><|trace_context_start|>x\n<|frame_sep|>"
	const tail = "<|frame_sep|><|exit_normal|><|trace_end|><|end_of_text|>"
	line := `<|line_sep|><|arg_sep|>{}<|src_sep|>x<|action_sep|><|step_over|>`
	tests := []struct {
		name, text string
		offset     int
		want       string
	}{
		{"empty", "", 0, "expected <|begin_of_text|>, found end of text"},
		{"leading space", " " + sqForwardText, 0, `expected <|begin_of_text|>, found " <|begin_of_text|><|trac"...`},
		{"no context start", "<|begin_of_text|>x\n", 17, "expected <|trace_context_start|>"},
		{"code no newline", "<|begin_of_text|><|trace_context_start|>x<|frame_sep|>" + line + tail, 41, "expected CODE to end with a line break before <|frame_sep|>, found <|frame_sep|>"},
		{"code runs to end", "<|begin_of_text|><|trace_context_start|>x\n", 42, "expected <|frame_sep|>, found end of text"},
		{"code invalid utf8", "<|begin_of_text|><|trace_context_start|>a\xffb\n" + tail, 41, "CODE is not valid UTF-8 (byte 0xff)"},
		{"code ends at other token", "<|begin_of_text|><|trace_context_start|>x\n<|src_sep|>", 42, "expected <|frame_sep|>, found <|src_sep|>"},
		{"no state or exit", head + "<|step_into|>", len(head), "expected a state's event token or an exit token, found <|step_into|>"},
		{"whitespace between tokens", head + "\n" + line + tail, len(head), `expected a state's event token or an exit token, found "\n<|line_sep|><|arg_sep|>"...`},
		{"line layout swapped", head + `<|line_sep|><|src_sep|>x<|arg_sep|>{}` + tail, len(head) + 12, "expected <|arg_sep|>, found <|src_sep|>"},
		{"call layout swapped", head + `<|call_sep|><|arg_sep|>{}<|src_sep|>x` + tail, len(head) + 12, "expected <|src_sep|>, found <|arg_sep|>"},
		{"src newline", head + `<|line_sep|><|arg_sep|>{}<|src_sep|>x` + "\n" + `<|action_sep|><|step_over|>` + tail, len(head) + 37, `expected SRC to be one line, found a line break '\n'`},
		{"locals not canonical", head + `<|line_sep|><|arg_sep|>{"a":"1"}<|src_sep|>x<|action_sep|><|step_over|>` + tail, len(head) + 27, `expected ": " after the key "a"`},
		{"locals escape not canonical", head + `<|line_sep|><|arg_sep|>{"a": "\u0041"}<|src_sep|>x<|action_sep|><|step_over|>` + tail, len(head) + 30, `non-canonical escape \u0041`},
		{"locals upper hex", head + `<|line_sep|><|arg_sep|>{"a": "\u00E9"}<|src_sep|>x<|action_sep|><|step_over|>` + tail, len(head) + 34, `lower-case hex digit`},
		{"value not a string", head + `<|return_sep|><|src_sep|>x<|arg_sep|>9<|action_sep|><|step_over|>` + tail, len(head) + 37, "expected a JSON string, found \"9<|action_sep|>"},
		{"args on line state", head + `<|line_sep|><|arg_sep|>"9"<|src_sep|>x<|action_sep|><|step_over|>` + tail, len(head) + 23, "expected a JSON object '{'"},
		{"missing action", head + `<|line_sep|><|arg_sep|>{}<|src_sep|>x<|frame_sep|>` + tail[len("<|frame_sep|>"):], len(head) + 37, "expected <|action_sep|>, found <|frame_sep|>"},
		{"inverse action forward", head + `<|line_sep|><|arg_sep|>{}<|src_sep|>x<|action_sep|><|inv_step_over|>` + tail, len(head) + 51, "expected an action of a forward trajectory (<|step_into|>, <|step_over|>, <|step_return|>, <|breakpoint|>, <|continue|>), found <|inv_step_over|>"},
		{"breakpoint without line", head + `<|line_sep|><|arg_sep|>{}<|src_sep|>x<|action_sep|><|breakpoint|>` + tail, len(head) + 65, "expected the breakpoint's source line after <|breakpoint|>, found <|frame_sep|>"},
		{"mixed directions", head + line + `<|frame_sep|><|inv_line_sep|><|src_sep|>x<|arg_sep|>{}<|action_sep|><|inv_step_over|>` + tail, len(head) + len(line) + 13, "expected a state of a forward trajectory, found <|inv_line_sep|>"},
		{"inverse exit forward", head + line + "<|frame_sep|><|inv_exit_entry|><|trace_end|><|end_of_text|>", len(head) + len(line) + 13, "expected an exit of a forward trajectory (<|exit_normal|>, <|exit_error|>, <|exit_never|>), found <|inv_exit_entry|>"},
		{"no trace end", head + line + "<|frame_sep|><|exit_normal|><|end_of_text|>", len(head) + len(line) + 28, "expected <|trace_end|>, found <|end_of_text|>"},
		{"trailing newline", sqForwardText + "\n", len(sqForwardText), "expected end of text after <|end_of_text|>, found \"\\n\""},
		{"truncated", sqForwardText[:len(sqForwardText)-20], len(sqForwardText) - 28, "expected <|trace_end|>, found \"<|trace_\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.text)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse = %+v, %v; want a *SyntaxError", got, err)
			}
			if se.Offset != tc.offset || !strings.Contains(se.Msg, tc.want) {
				t.Fatalf("Parse error = %v\nwant at byte %d: %q", err, tc.offset, tc.want)
			}
		})
	}
}

func TestRenderParseState(t *testing.T) {
	tests := []struct {
		s    debugger.State
		want string
	}{
		{debugger.State{Kind: debugger.KindCall, Src: "def f(s, t):", Shown: locals("s", "'berry'", "t", "'r'")}, `<|call_sep|><|src_sep|>def f(s, t):<|arg_sep|>{"s": "'berry'", "t": "'r'"}`},
		{debugger.State{Kind: debugger.KindLine, Src: "    n = 0", Elided: true, Shown: locals("n", "0")}, `<|line_sep|><|arg_sep|>{"..": "..", "n": "0"}<|src_sep|>    n = 0`},
		{debugger.State{Kind: debugger.KindLine, Src: ""}, `<|line_sep|><|arg_sep|>{}<|src_sep|>`},
		{debugger.State{Kind: debugger.KindReturn, Src: "    return result", Value: ptr("[1, 2, 3]")}, `<|return_sep|><|src_sep|>    return result<|arg_sep|>"[1, 2, 3]"`},
		{debugger.State{Kind: debugger.KindException, Src: "    raise E", Value: ptr("E('<|x|>')")}, `<|exception_sep|><|src_sep|>    raise E<|arg_sep|>"E('\u003c|x|>')"`},
		{debugger.State{Kind: debugger.KindInvReturn, Src: "    return n", Value: ptr("2")}, `<|inv_return_sep|><|src_sep|>    return n<|arg_sep|>"2"`},
		{debugger.State{Kind: debugger.KindInvLine, Src: "        n += 1", Elided: true, Shown: locals("c", "'r'")}, `<|inv_line_sep|><|src_sep|>        n += 1<|arg_sep|>{"..": "..", "c": "'r'"}`},
		{debugger.State{Kind: debugger.KindInvLineCall, Src: "    a = f(1)", Shown: locals()}, `<|inv_line_call_sep|><|src_sep|>    a = f(1)<|arg_sep|>{}`},
		{debugger.State{Kind: debugger.KindInvCall, Src: "def f(x):", Shown: locals("x", "1")}, `<|inv_call_sep|><|src_sep|>def f(x):<|arg_sep|>{"x": "1"}`},
		{debugger.State{Kind: debugger.KindInvException, Src: "    1/0", Value: ptr("ZeroDivisionError()")}, `<|inv_exception_sep|><|src_sep|>    1/0<|arg_sep|>"ZeroDivisionError()"`},
	}
	for _, tc := range tests {
		got, err := RenderState(tc.s)
		if err != nil || got != tc.want {
			t.Errorf("RenderState(%+v) = %q, %v; want %q", tc.s, got, err, tc.want)
			continue
		}
		back, err := ParseState(got)
		want := debugger.Trajectory{Steps: []debugger.Step{{State: tc.s}}}.Grammar().Steps[0].State
		if err != nil || !reflect.DeepEqual(back, want) {
			t.Errorf("ParseState(%q) = %+v, %v; want %+v", got, back, err, want)
		}
	}
}

func TestParseStateErrors(t *testing.T) {
	tests := []struct {
		text   string
		offset int
		want   string
	}{
		{"", 0, "expected a state's event token (<|call_sep|>, <|line_sep|>"},
		{"<|frame_sep|><|line_sep|>", 0, "found <|frame_sep|>"},
		{`<|line_sep|><|arg_sep|>{}<|src_sep|>x<|action_sep|>`, 37, "expected the end of the state, found <|action_sep|>"},
		{`<|call_sep|><|src_sep|>def f():<|arg_sep|>{} `, 44, `expected the end of the state, found " "`},
		{`<|return_sep|><|src_sep|>x<|arg_sep|>"1`, 39, "closing"},
		{`<|return_sep|><|src_sep|>x<|arg_sep|>"\ud83d"`, 38, "lone UTF-16 high surrogate"},
	}
	for _, tc := range tests {
		_, err := ParseState(tc.text)
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset != tc.offset || !strings.Contains(se.Msg, tc.want) {
			t.Errorf("ParseState(%q) = %v; want at byte %d: %q", tc.text, err, tc.offset, tc.want)
		}
	}
}

func TestRenderStateErrors(t *testing.T) {
	_, err := RenderState(debugger.State{Kind: debugger.KindLine, Src: "a<|src_sep|>"})
	if !errors.Is(err, ErrSpecialToken) || !strings.HasPrefix(err.Error(), "tokenize: State.Src: ") {
		t.Errorf("RenderState(src with token) = %v", err)
	}
	_, err = RenderState(debugger.State{Kind: debugger.KindInvReturn})
	if err == nil || err.Error() != "tokenize: State.Value: missing; inv_return states carry a value (ARGS)" {
		t.Errorf("RenderState(inv_return without value) = %v", err)
	}
}

func TestSpecialTokens(t *testing.T) {
	if len(SpecialTokens) != 29 {
		t.Errorf("len(SpecialTokens) = %d, want 29", len(SpecialTokens))
	}
	seen := map[string]bool{}
	for i, tok := range SpecialTokens {
		if seen[tok] {
			t.Errorf("SpecialTokens[%d] = %s is listed twice", i, tok)
		}
		seen[tok] = true
		name := strings.TrimSuffix(strings.TrimPrefix(tok, "<|"), "|>")
		if len(name)+4 != len(tok) || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz_") != "" {
			t.Errorf("SpecialTokens[%d] = %q is not <|name|> with name in [a-z_]", i, tok)
		}
	}
	// CWM's ids 128100-128107 follow the two text markers in this order.
	cwm := []string{"<|frame_sep|>", "<|action_sep|>", "<|return_sep|>", "<|call_sep|>", "<|line_sep|>", "<|exception_sep|>", "<|arg_sep|>", "<|trace_context_start|>"}
	if !reflect.DeepEqual(SpecialTokens[2:10], cwm) || SpecialTokens[0] != "<|begin_of_text|>" || SpecialTokens[1] != "<|end_of_text|>" {
		t.Errorf("SpecialTokens[:10] = %q, want the text markers then CWM's tokens in id order", SpecialTokens[:10])
	}
	for _, m := range []map[string]bool{keys(tokenKinds), keys(tokenActions), keys(tokenExits)} {
		for tok := range m {
			if !seen[tok] {
				t.Errorf("%s is used but not in SpecialTokens", tok)
			}
		}
	}
	if len(kindTokens) != 9 || len(actionTokens) != len(debugger.ForwardActions)+len(debugger.InverseActions) || len(exitTokens) != 4 {
		t.Errorf("token maps cover %d kinds, %d actions, %d exits", len(kindTokens), len(actionTokens), len(exitTokens))
	}
	for _, tok := range SpecialTokens {
		if i, got := findSpecial("ab" + tok + "cd"); i != 2 || got != tok {
			t.Errorf("findSpecial(ab%scd) = %d, %q", tok, i, got)
		}
	}
}

func keys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

func TestFindSpecial(t *testing.T) {
	tests := []struct {
		in  string
		at  int
		tok string
	}{
		{"", -1, ""},
		{"<|", -1, ""},
		{"<|frame_sep|", -1, ""},
		{"<|frame_sep|>", 0, FrameSep},
		{"<|<|frame_sep|>", 2, FrameSep},
		{"<||frame_sep|>", -1, ""},
		{"a <| b |> <|step_over|>", 10, StepOver},
		{"<|pad|><|eot_id|>", -1, ""},
		{"x<|inv_exit_entry|>", 1, InvExitEntry},
	}
	for _, tc := range tests {
		if at, tok := findSpecial(tc.in); at != tc.at || tok != tc.tok {
			t.Errorf("findSpecial(%q) = %d, %q; want %d, %q", tc.in, at, tok, tc.at, tc.tok)
		}
	}
}

// randomText draws text from pieces that stress the encoders: quotes, backslashes, control
// characters, non-ASCII and astral runes, and fragments and whole copies of special tokens.
var textPieces = []string{
	"a", "x", "0", " ", "    ", "\t", "'", `"`, `\`, "/", "<", "|", ">", "<|", "|>", "..", "{", "}", ": ", ", ",
	"\n", "\r", "\x00", "\x1f", "\x7f", "é", "€", "\u2028", "\ufeff", "😀", "𝄞", "\\u003c", "<|frame_sep|>",
	"<|trace_end|>", "<|not_special|>", "<|action_sep", "def f(a):", "return", "[1, 2]",
}

func randomText(r *rand.Rand, maxPieces int) string {
	var b strings.Builder
	for range r.IntN(maxPieces + 1) {
		b.WriteString(textPieces[r.IntN(len(textPieces))])
	}
	return b.String()
}

// randomRaw draws text that checkRaw accepts.
func randomRaw(r *rand.Rand, singleLine bool) string {
	for {
		s := randomText(r, 6)
		if singleLine {
			s = strings.NewReplacer("\n", "", "\r", "").Replace(s)
		}
		if checkRaw(s, singleLine) == nil {
			return s
		}
	}
}

func randomLocals(r *rand.Rand) schemas.Locals {
	n := r.IntN(5)
	if n == 0 && r.IntN(2) == 0 {
		return nil
	}
	l := schemas.Locals{}
	for i := range n {
		name := fmt.Sprintf("v%d%s", i, randomText(r, 2))
		if name == elidedKey {
			continue
		}
		l = append(l, schemas.Var{Name: name, Value: randomText(r, 5)})
	}
	return l
}

func randomTrajectory(r *rand.Rand) debugger.Trajectory {
	inverse := r.IntN(2) == 0
	t := debugger.Trajectory{Direction: debugger.Forward, Code: randomRaw(r, false) + "\n"}
	kinds := []debugger.Kind{debugger.KindCall, debugger.KindLine, debugger.KindReturn, debugger.KindException}
	actions := debugger.ForwardActions
	exits := []debugger.Exit{debugger.ExitNormal, debugger.ExitError, debugger.ExitNever}
	if inverse {
		t.Direction = debugger.Inverse
		kinds = []debugger.Kind{debugger.KindInvReturn, debugger.KindInvLine, debugger.KindInvLineCall, debugger.KindInvCall, debugger.KindInvException}
		actions = debugger.InverseActions
		exits = []debugger.Exit{debugger.InvExitEntry}
	}
	for range r.IntN(8) {
		st := debugger.State{Kind: kinds[r.IntN(len(kinds))], Src: randomRaw(r, true), Frame: r.IntN(3), Locals: randomLocals(r)}
		if st.Kind.HasArgs() {
			st.Value = ptr(randomText(r, 6))
		} else {
			st.Shown, st.Elided = randomLocals(r), r.IntN(2) == 0
		}
		step := debugger.Step{State: st, Action: actions[r.IntN(len(actions))]}
		if step.Action == debugger.Breakpoint {
			for step.Arg == "" {
				step.Arg = randomRaw(r, true)
			}
		}
		t.Steps = append(t.Steps, step)
	}
	t.Exit = exits[r.IntN(len(exits))]
	return t
}

// TestRoundTripRandom checks Parse(Render(t)) == t.Grammar() and Render(Parse(text)) == text on
// random trajectories.
func TestRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for i := range n {
		tr := randomTrajectory(r)
		text, err := Render(tr)
		if err != nil {
			t.Fatalf("#%d: Render(%+v): %v", i, tr, err)
		}
		got, err := Parse(text)
		if err != nil {
			t.Fatalf("#%d: Parse(%q): %v", i, text, err)
		}
		if want := tr.Grammar(); !reflect.DeepEqual(got, want) {
			t.Fatalf("#%d: Parse(Render(t)) != t.Grammar()\ntext %q\n got %+v\nwant %+v", i, text, got, want)
		}
		for j, s := range tr.Steps {
			st, err := RenderState(s.State)
			if err != nil || !strings.Contains(text, FrameSep+st+ActionSep) {
				t.Fatalf("#%d: RenderState(Steps[%d]) = %q, %v; not in %q", i, j, st, err, text)
			}
			back, err := ParseState(st)
			if err != nil || !reflect.DeepEqual(back, got.Steps[j].State) {
				t.Fatalf("#%d: ParseState(%q) = %+v, %v; want %+v", i, st, back, err, got.Steps[j].State)
			}
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, tc := range grammarExamples {
		f.Add(tc.want)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		if text, err := Render(randomTrajectory(r)); err == nil {
			f.Add(text)
		}
	}
	f.Add(sqForwardText[:200])
	f.Fuzz(func(t *testing.T, text string) {
		tr, err := Parse(text)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(text) {
				t.Fatalf("Parse(%q) error %v is not a SyntaxError within the text", text, err)
			}
			return
		}
		if !reflect.DeepEqual(tr, tr.Grammar()) {
			t.Fatalf("Parse(%q) = %+v, not in Grammar form", text, tr)
		}
		again, err := Render(tr)
		if err != nil {
			t.Fatalf("Render(Parse(%q)): %v", text, err)
		}
		if again != text {
			t.Fatalf("Render(Parse(x)) != x\n   x %q\ngot %q", text, again)
		}
	})
}

func FuzzParseState(f *testing.F) {
	for _, tc := range grammarExamples {
		for _, s := range tc.t.Steps {
			if st, err := RenderState(s.State); err == nil {
				f.Add(st)
			}
		}
	}
	f.Add(`<|line_sep|><|arg_sep|>{"..": "..", "n": "0"}<|src_sep|>    n = 0`)
	f.Add(`<|return_sep|><|src_sep|>x<|arg_sep|>"\ud83d\ude00\u003c|"`)
	f.Fuzz(func(t *testing.T, text string) {
		st, err := ParseState(text)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(text) {
				t.Fatalf("ParseState(%q) error %v is not a SyntaxError within the text", text, err)
			}
			return
		}
		again, err := RenderState(st)
		if err != nil {
			t.Fatalf("RenderState(ParseState(%q)): %v", text, err)
		}
		if again != text {
			t.Fatalf("RenderState(ParseState(x)) != x\n   x %q\ngot %q", text, again)
		}
	})
}

func ExampleRender() {
	tr := debugger.Trajectory{
		Direction: debugger.Forward,
		Code:      "def inc(n):\n    return n + 1\n",
		Steps: []debugger.Step{
			{State: debugger.State{Kind: debugger.KindCall, Src: "def inc(n):", Shown: schemas.Locals{{Name: "n", Value: "1"}}}, Action: debugger.StepReturn},
			{State: debugger.State{Kind: debugger.KindReturn, Src: "    return n + 1", Value: ptr("2")}, Action: debugger.Continue},
		},
		Exit: debugger.ExitNormal,
	}
	text, err := Render(tr)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.ReplaceAll(text, FrameSep, "\n"+FrameSep))
	// Output:
	// <|begin_of_text|><|trace_context_start|>def inc(n):
	//     return n + 1
	//
	// <|frame_sep|><|call_sep|><|src_sep|>def inc(n):<|arg_sep|>{"n": "1"}<|action_sep|><|step_return|>
	// <|frame_sep|><|return_sep|><|src_sep|>    return n + 1<|arg_sep|>"2"<|action_sep|><|continue|>
	// <|frame_sep|><|exit_normal|><|trace_end|><|end_of_text|>
}

func ExampleParseState() {
	st, err := ParseState(`<|line_sep|><|arg_sep|>{"..": "..", "n": "0"}<|src_sep|>    n = 0`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.Kind, st.Elided, st.Shown, st.Src)
	// Output: line true [{n 0}]     n = 0
}

// benchTrajectory is a mid-sized forward trajectory: 200 steps with a few locals each.
func benchTrajectory() debugger.Trajectory {
	r := rand.New(rand.NewPCG(7, 8))
	tr := debugger.Trajectory{Direction: debugger.Forward, Code: strings.Repeat("    x = compute(x, 'é')\n", 40), Exit: debugger.ExitNormal}
	for i := range 200 {
		st := debugger.State{Kind: debugger.KindLine, Src: "    x = compute(x, 'é')", Elided: i%2 == 1}
		for j := range 1 + r.IntN(6) {
			st.Shown = append(st.Shown, schemas.Var{Name: fmt.Sprintf("var%d", j), Value: fmt.Sprintf("[%d, 'ab\"c', %q]", i*j, "é")})
		}
		tr.Steps = append(tr.Steps, debugger.Step{State: st, Action: debugger.StepOver})
	}
	return tr
}

func BenchmarkRender(b *testing.B) {
	tr := benchTrajectory()
	text, _ := Render(tr)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(tr); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	text, err := Render(benchTrajectory())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(text); err != nil {
			b.Fatal(err)
		}
	}
}
