package tokenize

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
)

const cwmSqCode = "def sq(x):\n    y = x * x\n    return y\n\ndef main():  # << START_OF_TRACE\n    a = 1\n    b = sq(a)\n    return a + b\n"

// Frame ids are arbitrary; only equality between states matters.
const mainFrame, sqFrame = 140001, 77

var cwmSq = []debugger.State{
	{Kind: debugger.KindCall, Src: "def main():", Frame: mainFrame, Locals: locals()},
	{Kind: debugger.KindLine, Src: "    a = 1", Frame: mainFrame, Locals: locals()},
	{Kind: debugger.KindLine, Src: "    b = sq(a)", Frame: mainFrame, Locals: locals("a", "1")},
	{Kind: debugger.KindCall, Src: "def sq(x):", Frame: sqFrame, Locals: locals("x", "1")},
	{Kind: debugger.KindLine, Src: "    y = x * x", Frame: sqFrame, Locals: locals("x", "1")},
	{Kind: debugger.KindLine, Src: "    return y", Frame: sqFrame, Locals: locals("x", "1", "y", "1")},
	{Kind: debugger.KindReturn, Src: "    return y", Frame: sqFrame, Value: ptr("1"), Locals: locals("x", "1", "y", "1")},
	{Kind: debugger.KindLine, Src: "    return a + b", Frame: mainFrame, Locals: locals("a", "1", "b", "1")},
	{Kind: debugger.KindReturn, Src: "    return a + b", Frame: mainFrame, Value: ptr("2"), Locals: locals("a", "1", "b", "1")},
}

const cwmSqText = "<|begin_of_text|><|trace_context_start|>" + cwmSqCode + "<|frame_sep|>" +
	`<|call_sep|>{}<|action_sep|>def main():<|frame_sep|>` +
	`<|line_sep|>{}<|action_sep|>    a = 1<|frame_sep|>` +
	`<|line_sep|>{"a": "1"}<|action_sep|>    b = sq(a)<|frame_sep|>` +
	`<|call_sep|>{"x": "1"}<|action_sep|>def sq(x):<|frame_sep|>` +
	`<|line_sep|>{"x": ".."}<|action_sep|>    y = x * x<|frame_sep|>` +
	`<|line_sep|>{"x": "..", "y": "1"}<|action_sep|>    return y<|frame_sep|>` +
	`<|return_sep|><|action_sep|>    return y<|arg_sep|>"1"<|frame_sep|>` +
	`<|line_sep|>{"a": "1", "b": "1"}<|action_sep|>    return a + b<|frame_sep|>` +
	`<|return_sep|><|action_sep|>    return a + b<|arg_sep|>"2"<|frame_sep|>` +
	`<|end_of_text|>`

const cwmCaughtCode = "def f():  # << START_OF_TRACE\n    try:\n        x = 1; 1 / 0\n    except ZeroDivisionError:\n        return x\n"

// cwmCaught catches an exception. The exception state's locals differ from the last shown ones, but
// it shows none, so the next line diffs against the last shown dict. Cut off: no end of text.
var cwmCaught = []debugger.State{
	{Kind: debugger.KindCall, Src: "def f():", Locals: locals()},
	{Kind: debugger.KindLine, Src: "    try:", Locals: locals()},
	{Kind: debugger.KindLine, Src: "        x = 1; 1 / 0", Locals: locals()},
	{Kind: debugger.KindException, Src: "        x = 1; 1 / 0", Value: ptr("ZeroDivisionError('division by zero')"), Locals: locals("x", "1")},
	{Kind: debugger.KindLine, Src: "    except ZeroDivisionError:", Locals: locals("x", "1")},
	{Kind: debugger.KindLine, Src: "        return x", Locals: locals("x", "1")},
}

const cwmCaughtText = "<|begin_of_text|><|trace_context_start|>" + cwmCaughtCode + "<|frame_sep|>" +
	`<|call_sep|>{}<|action_sep|>def f():<|frame_sep|>` +
	`<|line_sep|>{}<|action_sep|>    try:<|frame_sep|>` +
	`<|line_sep|>{}<|action_sep|>        x = 1; 1 / 0<|frame_sep|>` +
	`<|exception_sep|><|action_sep|>        x = 1; 1 / 0<|arg_sep|>"ZeroDivisionError('division by zero')"<|frame_sep|>` +
	`<|line_sep|>{"x": "1"}<|action_sep|>    except ZeroDivisionError:<|frame_sep|>` +
	`<|line_sep|>{"x": ".."}<|action_sep|>        return x<|frame_sep|>`

const cwmRaiseCode = "def g(s):\n    raise ValueError(s)\n\ndef main():  # << START_OF_TRACE\n    t = '<|é|>'\n    g(t)\n"

// cwmRaise lets an exception escape through two frames, with escaped values.
var cwmRaise = []debugger.State{
	{Kind: debugger.KindCall, Src: "def main():", Frame: 1, Locals: locals()},
	{Kind: debugger.KindLine, Src: "    t = '<|é|>'", Frame: 1, Locals: locals()},
	{Kind: debugger.KindLine, Src: "    g(t)", Frame: 1, Locals: locals("t", "'<|é|>'")},
	{Kind: debugger.KindCall, Src: "def g(s):", Frame: 2, Locals: locals("s", "'<|é|>'")},
	{Kind: debugger.KindLine, Src: "    raise ValueError(s)", Frame: 2, Locals: locals("s", "'<|é|>'")},
	{Kind: debugger.KindException, Src: "    raise ValueError(s)", Frame: 2, Value: ptr("ValueError('<|é|>')")},
	{Kind: debugger.KindReturn, Src: "    raise ValueError(s)", Frame: 2, Value: ptr("None")},
	{Kind: debugger.KindException, Src: "    g(t)", Frame: 1, Value: ptr("ValueError('<|é|>')")},
	{Kind: debugger.KindReturn, Src: "    g(t)", Frame: 1, Value: ptr("None")},
}

const cwmRaiseText = "<|begin_of_text|><|trace_context_start|>" + cwmRaiseCode + "<|frame_sep|>" +
	`<|call_sep|>{}<|action_sep|>def main():<|frame_sep|>` +
	`<|line_sep|>{}<|action_sep|>    t = '<|é|>'<|frame_sep|>` +
	`<|line_sep|>{"t": "'\u003c|\u00e9|>'"}<|action_sep|>    g(t)<|frame_sep|>` +
	`<|call_sep|>{"s": "'\u003c|\u00e9|>'"}<|action_sep|>def g(s):<|frame_sep|>` +
	`<|line_sep|>{"s": ".."}<|action_sep|>    raise ValueError(s)<|frame_sep|>` +
	`<|exception_sep|><|action_sep|>    raise ValueError(s)<|arg_sep|>"ValueError('\u003c|\u00e9|>')"<|frame_sep|>` +
	`<|return_sep|><|action_sep|>    raise ValueError(s)<|arg_sep|>"None"<|frame_sep|>` +
	`<|exception_sep|><|action_sep|>    g(t)<|arg_sep|>"ValueError('\u003c|\u00e9|>')"<|frame_sep|>` +
	`<|return_sep|><|action_sep|>    g(t)<|arg_sep|>"None"<|frame_sep|>` +
	`<|end_of_text|>`

var cwmExamples = []struct {
	name   string
	code   string
	states []debugger.State
	exit   debugger.Exit
	want   string
}{
	{"nested call", cwmSqCode, cwmSq, debugger.ExitNormal, cwmSqText},
	{"caught exception, cut off", cwmCaughtCode, cwmCaught, debugger.ExitNever, cwmCaughtText},
	{"uncaught exception", cwmRaiseCode, cwmRaise, debugger.ExitError, cwmRaiseText},
	{"no states", "pass\n", nil, debugger.ExitNormal, "<|begin_of_text|><|trace_context_start|>pass\n<|frame_sep|><|end_of_text|>"},
	{"first state not a call", "x = 1\n", []debugger.State{
		{Kind: debugger.KindLine, Src: "x = 1", Locals: locals("a", "1")},
		{Kind: debugger.KindLine, Src: "x = 1", Locals: locals("a", "1", "x", "1")},
	}, debugger.ExitNever, "<|begin_of_text|><|trace_context_start|>x = 1\n<|frame_sep|>" +
		`<|line_sep|>{"a": "1"}<|action_sep|>x = 1<|frame_sep|><|line_sep|>{"a": "..", "x": "1"}<|action_sep|>x = 1<|frame_sep|>`},
}

func TestRenderCWM(t *testing.T) {
	for _, tc := range cwmExamples {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RenderCWM(tc.code, tc.states, tc.exit)
			if err != nil {
				t.Fatalf("RenderCWM: %v", err)
			}
			if got != tc.want {
				t.Fatalf("RenderCWM:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// cwmGrammar keeps what the CWM text carries: Kind, Src, Value, the full Locals of states that
// show them, and frames renumbered in order of appearance.
func cwmGrammar(states []debugger.State) []debugger.State {
	ids := map[int]int{}
	out := make([]debugger.State, len(states))
	for i, s := range states {
		id, ok := ids[s.Frame]
		if !ok {
			id = len(ids)
			ids[s.Frame] = id
		}
		out[i] = debugger.State{Kind: s.Kind, Src: s.Src, Value: s.Value, Frame: id}
		if !s.Kind.HasArgs() {
			out[i].Locals = s.Locals
			if out[i].Locals == nil {
				out[i].Locals = schemas.Locals{}
			}
		}
	}
	return out
}

func TestParseCWM(t *testing.T) {
	for _, tc := range cwmExamples {
		t.Run(tc.name, func(t *testing.T) {
			code, states, ended, err := ParseCWM(tc.want)
			if err != nil {
				t.Fatalf("ParseCWM: %v", err)
			}
			if code != tc.code || ended != (tc.exit != debugger.ExitNever) {
				t.Fatalf("ParseCWM: code %q, ended %v", code, ended)
			}
			if want := cwmGrammar(tc.states); !reflect.DeepEqual(states, want) {
				t.Fatalf("ParseCWM:\n got %+v\nwant %+v", states, want)
			}
		})
	}
}

func TestRenderCWMErrors(t *testing.T) {
	line := debugger.State{Kind: debugger.KindLine, Src: "x = 1"}
	ret := debugger.State{Kind: debugger.KindReturn, Src: "return", Value: ptr("1")}
	with := func(s debugger.State, f func(*debugger.State)) []debugger.State {
		f(&s)
		return []debugger.State{line, s}
	}
	tests := []struct {
		name   string
		code   string
		states []debugger.State
		exit   debugger.Exit
		want   string
		is     error
	}{
		{"inverse exit", "x\n", nil, debugger.InvExitEntry, `tokenize: cwm: exit: "inv_exit_entry" is not a forward exit`, nil},
		{"code", "x", nil, debugger.ExitNormal, "tokenize: cwm: code: must end with a line break", nil},
		{"code token", "<|call_sep|>\n", nil, debugger.ExitNormal, "tokenize: cwm: code: contains a special token <|call_sep|>", ErrSpecialToken},
		{"inverse kind", "x\n", with(line, func(s *debugger.State) { s.Kind = debugger.KindInvLine }), debugger.ExitNormal, `tokenize: cwm: states[1].Kind: "inv_line" is not a forward event kind`, nil},
		{"src newline", "x\n", with(line, func(s *debugger.State) { s.Src = "a\nb" }), debugger.ExitNormal, "tokenize: cwm: states[1].Src: contains a line break", ErrLineBreak},
		{"value on line", "x\n", with(line, func(s *debugger.State) { s.Value = ptr("1") }), debugger.ExitNormal, "tokenize: cwm: states[1].Value: must be nil", nil},
		{"no value on return", "x\n", with(ret, func(s *debugger.State) { s.Value = nil }), debugger.ExitNormal, "tokenize: cwm: states[1].Value: missing", nil},
		{"bad value", "x\n", with(ret, func(s *debugger.State) { s.Value = ptr("\xff") }), debugger.ExitNormal, "tokenize: cwm: states[1].Value: is not valid UTF-8", ErrInvalidUTF8},
		{"duplicate local", "x\n", with(line, func(s *debugger.State) { s.Locals = locals("a", "1", "a", "2") }), debugger.ExitNormal, `tokenize: cwm: states[1].Locals[1].Name: duplicate name "a"`, nil},
		{"marker value", "x\n", with(line, func(s *debugger.State) { s.Locals = locals("a", "..") }), debugger.ExitNormal, `tokenize: cwm: states[1].Locals[0].Value: ".." is CWM's unchanged marker`, nil},
		{"bad name", "x\n", with(line, func(s *debugger.State) { s.Locals = locals("\xff", "1") }), debugger.ExitNormal, "tokenize: cwm: states[1].Locals[0].Name: is not valid UTF-8", ErrInvalidUTF8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RenderCWM(tc.code, tc.states, tc.exit)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("RenderCWM = %q, %v; want error %q", got, err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("RenderCWM error %q does not wrap %v", err, tc.is)
			}
		})
	}
}

func TestParseCWMErrors(t *testing.T) {
	const head = "<|begin_of_text|><|trace_context_start|>x\n<|frame_sep|>"
	tests := []struct {
		name, text string
		offset     int
		want       string
	}{
		{"neural-debugger token", head + "<|src_sep|>", len(head), "expected an event token (<|call_sep|>, <|line_sep|>, <|return_sep|>, <|exception_sep|>), <|end_of_text|> or the end of the text, found <|src_sep|>"},
		{"marker in full dict", head + `<|call_sep|>{"a": ".."}<|action_sep|>def f():<|frame_sep|>`, len(head) + 12, `LOCALS "a": unchanged marker ".." in a full dict`},
		{"marker without base", head + `<|call_sep|>{}<|action_sep|>def f():<|frame_sep|><|line_sep|>{"a": ".."}<|action_sep|>x<|frame_sep|>`, len(head) + 61, `LOCALS "a": unchanged marker ".." but the frame showed no "a" before`},
		{"unchanged written out", head + `<|call_sep|>{"a": "1"}<|action_sep|>def f():<|frame_sep|><|line_sep|>{"a": "1"}<|action_sep|>x<|frame_sep|>`, len(head) + 69, `LOCALS "a": value "1" is unchanged and must be written ".."`},
		{"marker after return", head + `<|call_sep|>{"a": "1"}<|action_sep|>def f():<|frame_sep|><|return_sep|><|action_sep|>x<|arg_sep|>"1"<|frame_sep|><|line_sep|>{"a": ".."}<|action_sep|>x<|frame_sep|>`, len(head) + 125, `in a full dict`},
		{"return layout", head + `<|return_sep|><|src_sep|>x`, len(head) + 14, "expected <|action_sep|>, found <|src_sep|>"},
		{"after end", head + "<|end_of_text|>x", len(head) + 15, `expected end of text after <|end_of_text|>, found "x"`},
		{"no frame end", head + `<|line_sep|>{}<|action_sep|>x`, len(head) + 29, "expected <|frame_sep|>, found end of text"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := ParseCWM(tc.text)
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset != tc.offset || !strings.Contains(se.Msg, tc.want) {
				t.Fatalf("ParseCWM error = %v\nwant at byte %d: %q", err, tc.offset, tc.want)
			}
		})
	}
}

// randomValue draws a value that CWM can carry (not the marker "..").
func randomValue(r *rand.Rand) string {
	for {
		if v := randomText(r, 4); v != elidedKey {
			return v
		}
	}
}

// traceGen simulates a traced program: nested calls whose locals change line by line.
type traceGen struct {
	r      *rand.Rand
	states []debugger.State
	ids    map[int]bool
}

func (g *traceGen) frame(depth int) {
	id := g.r.IntN(1 << 20)
	for g.ids[id] {
		id = g.r.IntN(1 << 20)
	}
	g.ids[id] = true
	names := []string{"a", "b", "c", "d", "é", "<|x", "k\"\\"}
	loc := schemas.Locals{}
	for range g.r.IntN(3) {
		if n := names[g.r.IntN(len(names))]; indexName(loc, n) < 0 {
			loc = append(loc, schemas.Var{Name: n, Value: randomValue(g.r)})
		}
	}
	emit := func(k debugger.Kind, v *string) {
		st := debugger.State{Kind: k, Src: randomRaw(g.r, true), Frame: id, Locals: append(schemas.Locals(nil), loc...), Value: v}
		g.states = append(g.states, st)
	}
	emit(debugger.KindCall, nil)
	for range g.r.IntN(6) {
		emit(debugger.KindLine, nil)
		if depth < 3 && g.r.IntN(4) == 0 {
			g.frame(depth + 1)
		}
		// The line changes, adds or deletes variables.
		for range g.r.IntN(3) {
			switch n := names[g.r.IntN(len(names))]; {
			case g.r.IntN(5) == 0:
				if i := indexName(loc, n); i >= 0 {
					loc = append(loc[:i:i], loc[i+1:]...)
				}
			case indexName(loc, n) >= 0:
				loc[indexName(loc, n)].Value = randomValue(g.r)
			default:
				loc = append(loc, schemas.Var{Name: n, Value: randomValue(g.r)})
			}
		}
		if g.r.IntN(8) == 0 {
			emit(debugger.KindException, ptr(randomValue(g.r)))
		}
	}
	emit(debugger.KindReturn, ptr(randomValue(g.r)))
}

// TestCWMRoundTripRandom renders random nested traces, parses them back and renders again.
func TestCWMRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 3000 {
		g := &traceGen{r: r, ids: map[int]bool{}}
		g.frame(0)
		states, exit := g.states, debugger.ExitNormal
		if r.IntN(3) == 0 {
			states, exit = states[:r.IntN(len(states)+1)], debugger.ExitNever
		}
		code := randomRaw(r, false) + "\n"
		text, err := RenderCWM(code, states, exit)
		if err != nil {
			t.Fatalf("#%d: RenderCWM: %v", i, err)
		}
		gotCode, got, ended, err := ParseCWM(text)
		if err != nil {
			t.Fatalf("#%d: ParseCWM(%q): %v", i, text, err)
		}
		if want := cwmGrammar(states); gotCode != code || ended != (exit != debugger.ExitNever) || !reflect.DeepEqual(got, want) {
			t.Fatalf("#%d: ParseCWM(RenderCWM(states)) differs\ntext %q\n got %+v\nwant %+v", i, text, got, want)
		}
		if again, err := RenderCWM(gotCode, got, exit); err != nil || again != text {
			t.Fatalf("#%d: RenderCWM(ParseCWM(text)) = %q, %v\nwant %q", i, again, err, text)
		}
	}
}

func FuzzParseCWM(f *testing.F) {
	for _, tc := range cwmExamples {
		f.Add(tc.want)
	}
	f.Fuzz(func(t *testing.T, text string) {
		code, states, ended, err := ParseCWM(text)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(text) {
				t.Fatalf("ParseCWM(%q) error %v is not a SyntaxError within the text", text, err)
			}
			return
		}
		exit := debugger.ExitNever
		if ended {
			exit = debugger.ExitNormal
		}
		again, err := RenderCWM(code, states, exit)
		if err != nil || again != text {
			t.Fatalf("RenderCWM(ParseCWM(x)) = %q, %v\nwant %q", again, err, text)
		}
	})
}
