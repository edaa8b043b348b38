package tokenize

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ndtrace/ndtrace/debugger"
)

// Special tokens of the neural-debugger grammar. docs/grammar.md describes where each one goes.
const (
	// BeginOfText opens every trajectory (CWM reserved token 128000).
	BeginOfText = "<|begin_of_text|>"
	// EndOfText closes every trajectory (CWM reserved token 128001).
	EndOfText = "<|end_of_text|>"

	// FrameSep opens every frame: each state and the exit state.
	FrameSep = "<|frame_sep|>"
	// ActionSep separates a state from the action taken in it.
	ActionSep = "<|action_sep|>"
	// ReturnSep opens a forward return state.
	ReturnSep = "<|return_sep|>"
	// CallSep opens a forward call state.
	CallSep = "<|call_sep|>"
	// LineSep opens a forward line state.
	LineSep = "<|line_sep|>"
	// ExceptionSep opens a forward exception state.
	ExceptionSep = "<|exception_sep|>"
	// ArgSep introduces a state's LOCALS or ARGS.
	ArgSep = "<|arg_sep|>"
	// TraceContextStart introduces the CODE context.
	TraceContextStart = "<|trace_context_start|>"

	// SrcSep introduces a state's source line.
	SrcSep = "<|src_sep|>"
	// TraceEnd follows the exit state.
	TraceEnd = "<|trace_end|>"
	// StepInto is the step_into action.
	StepInto = "<|step_into|>"
	// StepOver is the step_over action.
	StepOver = "<|step_over|>"
	// StepReturn is the step_return action.
	StepReturn = "<|step_return|>"
	// Breakpoint is the breakpoint action; the target source line follows it.
	Breakpoint = "<|breakpoint|>"
	// Continue is the continue action.
	Continue = "<|continue|>"
	// ExitNormal is the exit state of a forward trajectory whose program returned.
	ExitNormal = "<|exit_normal|>"
	// ExitError is the exit state of a forward trajectory left by an uncaught exception.
	ExitError = "<|exit_error|>"
	// ExitNever is the exit state of a forward trajectory cut off by a limit.
	ExitNever = "<|exit_never|>"
	// InvReturnSep opens an inverse return state.
	InvReturnSep = "<|inv_return_sep|>"
	// InvLineSep opens an inverse line state.
	InvLineSep = "<|inv_line_sep|>"
	// InvLineCallSep opens an inverse call-site line state, which inv_step_into enters backwards.
	InvLineCallSep = "<|inv_line_call_sep|>"
	// InvCallSep opens an inverse call state.
	InvCallSep = "<|inv_call_sep|>"
	// InvExceptionSep opens an inverse exception state.
	InvExceptionSep = "<|inv_exception_sep|>"
	// InvStepInto is the inv_step_into action.
	InvStepInto = "<|inv_step_into|>"
	// InvStepOver is the inv_step_over action.
	InvStepOver = "<|inv_step_over|>"
	// InvStepCall is the inv_step_call action.
	InvStepCall = "<|inv_step_call|>"
	// InvExitEntry is the exit state of an inverse trajectory that went back past the entry call.
	InvExitEntry = "<|inv_exit_entry|>"
)

// SpecialTokens lists every special token exactly once, in the order in which a tokenizer gives
// them their reserved ids: the two text markers, CWM's eight trace tokens in CWM's id order, then
// the neural-debugger tokens. Do not reorder or modify it.
var SpecialTokens = []string{
	BeginOfText, EndOfText,
	FrameSep, ActionSep, ReturnSep, CallSep, LineSep, ExceptionSep, ArgSep, TraceContextStart,
	SrcSep, TraceEnd,
	StepInto, StepOver, StepReturn, Breakpoint, Continue,
	ExitNormal, ExitError, ExitNever,
	InvReturnSep, InvLineSep, InvLineCallSep, InvCallSep, InvExceptionSep,
	InvStepInto, InvStepOver, InvStepCall,
	InvExitEntry,
}

// Errors that Render, RenderState and RenderCWM wrap when a raw text field (CODE, SRC, a
// breakpoint's line) or a value cannot be written.
var (
	// ErrSpecialToken: the text contains a special token.
	ErrSpecialToken = errors.New("contains a special token")
	// ErrLineBreak: a single-line field contains '\n' or '\r'.
	ErrLineBreak = errors.New("contains a line break")
	// ErrInvalidUTF8: the text is not valid UTF-8.
	ErrInvalidUTF8 = errors.New("is not valid UTF-8")
)

// SyntaxError is returned by the parsers for text that does not follow the grammar.
type SyntaxError struct {
	// Offset is the byte offset in the parsed text where the problem is.
	Offset int
	// Msg says what was expected and what was found.
	Msg string
}

// Error implements error.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("tokenize: syntax error at byte %d: %s", e.Offset, e.Msg)
}

func syntaxErrorf(offset int, format string, args ...any) error {
	return &SyntaxError{Offset: offset, Msg: fmt.Sprintf(format, args...)}
}

// describe names what the text holds at pos, for error messages.
func describe(text string, pos int) string {
	if pos >= len(text) {
		return "end of text"
	}
	if tok := specialAt(text, pos); tok != "" {
		return tok
	}
	const max = 24
	s := text[pos:]
	if len(s) > max {
		return fmt.Sprintf("%q...", s[:max])
	}
	return fmt.Sprintf("%q", s)
}

var (
	kindTokens = map[debugger.Kind]string{
		debugger.KindCall:         CallSep,
		debugger.KindLine:         LineSep,
		debugger.KindReturn:       ReturnSep,
		debugger.KindException:    ExceptionSep,
		debugger.KindInvReturn:    InvReturnSep,
		debugger.KindInvLine:      InvLineSep,
		debugger.KindInvLineCall:  InvLineCallSep,
		debugger.KindInvCall:      InvCallSep,
		debugger.KindInvException: InvExceptionSep,
	}
	actionTokens = map[debugger.Action]string{
		debugger.StepInto:    StepInto,
		debugger.StepOver:    StepOver,
		debugger.StepReturn:  StepReturn,
		debugger.Breakpoint:  Breakpoint,
		debugger.Continue:    Continue,
		debugger.InvStepInto: InvStepInto,
		debugger.InvStepOver: InvStepOver,
		debugger.InvStepCall: InvStepCall,
	}
	exitTokens = map[debugger.Exit]string{
		debugger.ExitNormal:   ExitNormal,
		debugger.ExitError:    ExitError,
		debugger.ExitNever:    ExitNever,
		debugger.InvExitEntry: InvExitEntry,
	}

	tokenKinds   = invert(kindTokens)
	tokenActions = invert(actionTokens)
	tokenExits   = invert(exitTokens)

	specialSet  = make(map[string]bool, len(SpecialTokens))
	maxTokenLen = 0
)

func init() {
	for _, t := range SpecialTokens {
		specialSet[t] = true
		maxTokenLen = max(maxTokenLen, len(t))
	}
}

func invert[K comparable](m map[K]string) map[string]K {
	out := make(map[string]K, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

// inverseAction reports whether a is an inverse action.
func inverseAction(a debugger.Action) bool {
	return a == debugger.InvStepInto || a == debugger.InvStepOver || a == debugger.InvStepCall
}

// specialAt returns the special token that starts at s[i], or "".
func specialAt(s string, i int) string {
	if !hasAt(s, i, "<|") {
		return ""
	}
	window := s[i+2 : min(len(s), i+maxTokenLen)]
	// Token names contain no '|', so a token starting at i ends at the first "|>".
	j := strings.Index(window, "|>")
	if j < 0 {
		return ""
	}
	if tok := s[i : i+2+j+2]; specialSet[tok] {
		return tok
	}
	return ""
}

// findSpecial returns the offset and text of the first special token in s, or -1.
func findSpecial(s string) (int, string) {
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], "<|")
		if j < 0 {
			return -1, ""
		}
		i += j
		if tok := specialAt(s, i); tok != "" {
			return i, tok
		}
		i += 2
	}
	return -1, ""
}

// checkRaw reports why s cannot be written as raw text: invalid UTF-8, a special token, or (for a
// single-line field) a line break.
func checkRaw(s string, singleLine bool) error {
	if err := checkUTF8(s); err != nil {
		return err
	}
	if i, tok := findSpecial(s); i >= 0 {
		return fmt.Errorf("%w %s at byte %d", ErrSpecialToken, tok, i)
	}
	if singleLine {
		if i := strings.IndexAny(s, "\r\n"); i >= 0 {
			return fmt.Errorf("%w %q at byte %d", ErrLineBreak, s[i], i)
		}
	}
	return nil
}

// checkCode reports why code cannot be the CODE context.
func checkCode(code string) error {
	if err := checkRaw(code, false); err != nil {
		return err
	}
	if !strings.HasSuffix(code, "\n") {
		return errors.New("must end with a line break")
	}
	return nil
}

// Render writes t in the neural-debugger grammar (docs/grammar.md):
//
//	<|begin_of_text|><|trace_context_start|>CODE {<|frame_sep|>STATE<|action_sep|>ACTION}
//	<|frame_sep|>EXIT<|trace_end|><|end_of_text|>
//
// with no whitespace between the parts. Every step must have an action; the exit follows the last
// one. Only the fields t.Grammar() keeps are written.
//
// Render refuses, with an error naming the field, a trajectory the grammar cannot carry exactly:
// an unknown direction, kind, action or exit, or one of the other direction; a breakpoint without
// a source line or an argument on another action; a Value on a state without ARGS or none on a
// state with ARGS; a variable named ".." or named twice; CODE, SRC or a breakpoint line that holds
// a special token or is not valid UTF-8; SRC or a breakpoint line with a line break; CODE that
// does not end with a line break; or a value that is not valid UTF-8.
func Render(t debugger.Trajectory) (string, error) {
	b, err := appendPrompt(t, len(ExitNormal)+len(TraceEnd)+len(EndOfText))
	if err != nil {
		return "", err
	}
	tok, err := exitToken(t.Exit, t.Direction == debugger.Inverse)
	if err != nil {
		return "", fmt.Errorf("tokenize: Exit: %w", err)
	}
	b = append(b, tok...)
	b = append(b, TraceEnd...)
	b = append(b, EndOfText...)
	return string(b), nil
}

// RenderPrompt writes the prompt for predicting what follows t's last action: Render's text up to
// and including the <|frame_sep|> that opens the next frame, without the exit (t.Exit is ignored).
// RenderPrompt(t) + RenderExit(t.Exit) + <|trace_end|><|end_of_text|> == Render(t). With no steps,
// the prompt asks for the first state. It refuses what Render refuses, except for the exit.
func RenderPrompt(t debugger.Trajectory) (string, error) {
	b, err := appendPrompt(t, 0)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// RenderExit writes the EXIT token of exit, as it follows the last <|frame_sep|>: the target of a
// prompt cut after a trajectory's last action.
func RenderExit(exit debugger.Exit) (string, error) {
	tok := exitTokens[exit]
	if tok == "" {
		return "", fmt.Errorf("tokenize: Exit: unknown exit %q", exit)
	}
	return tok, nil
}

// exitToken returns the token of exit after checking that it ends a trajectory of this direction.
func exitToken(exit debugger.Exit, inverse bool) (string, error) {
	tok := exitTokens[exit]
	if tok == "" {
		return "", fmt.Errorf("unknown exit %q", exit)
	}
	if (exit == debugger.InvExitEntry) != inverse {
		return "", fmt.Errorf("%s cannot end %s trajectory", exit, dirName(inverse))
	}
	return tok, nil
}

// appendPrompt writes <|begin_of_text|><|trace_context_start|>CODE, t's steps and the final
// <|frame_sep|>, into a buffer with room for extra more bytes.
func appendPrompt(t debugger.Trajectory, extra int) ([]byte, error) {
	var inverse bool
	switch t.Direction {
	case debugger.Forward:
	case debugger.Inverse:
		inverse = true
	default:
		return nil, fmt.Errorf("tokenize: Direction: unknown direction %q", t.Direction)
	}
	if err := checkCode(t.Code); err != nil {
		return nil, fmt.Errorf("tokenize: Code: %w", err)
	}

	n := len(BeginOfText) + len(TraceContextStart) + len(t.Code) + len(FrameSep) + extra
	for _, s := range t.Steps {
		n += 2*len(FrameSep) + 3*len(SrcSep) + 32 + len(s.State.Src) + len(s.Arg)
		for _, v := range s.State.Shown {
			n += len(v.Name) + len(v.Value) + 8
		}
		if s.State.Value != nil {
			n += len(*s.State.Value) + 2
		}
	}
	b := make([]byte, 0, n)
	b = append(b, BeginOfText...)
	b = append(b, TraceContextStart...)
	b = append(b, t.Code...)
	var err error
	for i, s := range t.Steps {
		if k := s.State.Kind; kindTokens[k] != "" && k.Inverse() != inverse {
			return nil, fmt.Errorf("tokenize: Steps[%d].State.Kind: %s state in %s trajectory", i, k, dirName(inverse))
		}
		b = append(b, FrameSep...)
		if b, err = appendState(b, s.State); err != nil {
			return nil, fmt.Errorf("tokenize: Steps[%d].State.%w", i, err)
		}
		b = append(b, ActionSep...)
		if b, err = appendAction(b, s, inverse); err != nil {
			return nil, fmt.Errorf("tokenize: Steps[%d].%w", i, err)
		}
	}
	return append(b, FrameSep...), nil
}

// RenderState writes one STATE in the layout of its kind, as it appears between <|frame_sep|> and
// <|action_sep|> in Render's output. It refuses what Render refuses for a state.
func RenderState(s debugger.State) (string, error) {
	b, err := appendState(make([]byte, 0, 64+len(s.Src)), s)
	if err != nil {
		return "", fmt.Errorf("tokenize: State.%w", err)
	}
	return string(b), nil
}

// appendState appends the STATE layout of s. Errors name the field of s first, without a dot.
func appendState(b []byte, s debugger.State) ([]byte, error) {
	tok, ok := kindTokens[s.Kind]
	if !ok {
		return b, fmt.Errorf("Kind: unknown kind %q", s.Kind)
	}
	if err := checkRaw(s.Src, true); err != nil {
		return b, fmt.Errorf("Src: %w", err)
	}
	if s.Kind.HasArgs() {
		if s.Value == nil {
			return b, fmt.Errorf("Value: missing; %s states carry a value (ARGS)", s.Kind)
		}
	} else {
		if s.Value != nil {
			return b, fmt.Errorf("Value: must be nil; %s states show LOCALS, not a value", s.Kind)
		}
		if err := checkLocals(s.Shown); err != nil {
			return b, fmt.Errorf("Shown%w", err)
		}
	}

	var err error
	b = append(b, tok...)
	if s.Kind == debugger.KindLine {
		b = append(b, ArgSep...)
		if b, err = appendPyObject(b, s.Shown, s.Elided); err != nil {
			return b, fmt.Errorf("Shown%w", err)
		}
		b = append(b, SrcSep...)
		return append(b, s.Src...), nil
	}
	b = append(b, SrcSep...)
	b = append(b, s.Src...)
	b = append(b, ArgSep...)
	if s.Kind.HasArgs() {
		if b, err = appendPyString(b, *s.Value); err != nil {
			return b, fmt.Errorf("Value: %w", err)
		}
		return b, nil
	}
	if b, err = appendPyObject(b, s.Shown, s.Elided); err != nil {
		return b, fmt.Errorf("Shown%w", err)
	}
	return b, nil
}

// appendAction appends the ACTION of s. Errors name the field of s first, without a dot.
func appendAction(b []byte, s debugger.Step, inverse bool) ([]byte, error) {
	tok, ok := actionTokens[s.Action]
	switch {
	case s.Action == "":
		return b, errors.New("Action: missing; every step needs an action (the exit follows the last one)")
	case !ok:
		return b, fmt.Errorf("Action: unknown action %q", s.Action)
	case inverseAction(s.Action) != inverse:
		return b, fmt.Errorf("Action: %s is not allowed in %s trajectory", s.Action, dirName(inverse))
	}
	b = append(b, tok...)
	if s.Action != debugger.Breakpoint {
		if s.Arg != "" {
			return b, fmt.Errorf("Arg: only a breakpoint takes an argument, %s has %q", s.Action, s.Arg)
		}
		return b, nil
	}
	if s.Arg == "" {
		return b, errors.New("Arg: a breakpoint needs its target source line")
	}
	if err := checkRaw(s.Arg, true); err != nil {
		return b, fmt.Errorf("Arg: %w", err)
	}
	return append(b, s.Arg...), nil
}

// parser reads grammar text left to right.
type parser struct {
	text string
	pos  int
}

// expect consumes the special token tok.
func (p *parser) expect(tok string) error {
	if !hasAt(p.text, p.pos, tok) {
		return syntaxErrorf(p.pos, "expected %s, found %s", tok, describe(p.text, p.pos))
	}
	p.pos += len(tok)
	return nil
}

// raw consumes raw text up to the next special token or the end of the text, and checks it as
// checkRaw does. what names the field in errors.
func (p *parser) raw(what string, singleLine bool) (string, error) {
	start, end := p.pos, len(p.text)
	if i, _ := findSpecial(p.text[start:]); i >= 0 {
		end = start + i
	}
	s := p.text[start:end]
	if i := invalidUTF8At(s); i >= 0 {
		return "", syntaxErrorf(start+i, "%s is not valid UTF-8 (byte 0x%02x)", what, s[i])
	}
	if singleLine {
		if i := strings.IndexAny(s, "\r\n"); i >= 0 {
			return "", syntaxErrorf(start+i, "expected %s to be one line, found a line break %q", what, s[i])
		}
	}
	p.pos = end
	return s, nil
}

// state parses one STATE at p.pos.
func (p *parser) state() (debugger.State, error) {
	tok := specialAt(p.text, p.pos)
	kind, ok := tokenKinds[tok]
	if !ok {
		return debugger.State{}, syntaxErrorf(p.pos, "expected a state's event token (%s), found %s",
			kindList, describe(p.text, p.pos))
	}
	p.pos += len(tok)
	st := debugger.State{Kind: kind}
	var err error
	if kind == debugger.KindLine {
		if err = p.expect(ArgSep); err != nil {
			return st, err
		}
		if err = p.locals(&st); err != nil {
			return st, err
		}
		if err = p.expect(SrcSep); err != nil {
			return st, err
		}
		st.Src, err = p.raw("SRC", true)
		return st, err
	}
	if err = p.expect(SrcSep); err != nil {
		return st, err
	}
	if st.Src, err = p.raw("SRC", true); err != nil {
		return st, err
	}
	if err = p.expect(ArgSep); err != nil {
		return st, err
	}
	if kind.HasArgs() {
		v, next, err := decodePyString(p.text, p.pos, true)
		if err != nil {
			return st, err
		}
		st.Value, p.pos = &v, next
		return st, nil
	}
	return st, p.locals(&st)
}

// locals parses LOCALS into st.
func (p *parser) locals(st *debugger.State) error {
	l, elided, next, err := decodePyObject(p.text, p.pos, true, true)
	if err != nil {
		return err
	}
	st.Shown, st.Elided, p.pos = l, elided, next
	return nil
}

// code parses <|begin_of_text|><|trace_context_start|>CODE<|frame_sep|>.
func (p *parser) code() (string, error) {
	if err := p.expect(BeginOfText); err != nil {
		return "", err
	}
	if err := p.expect(TraceContextStart); err != nil {
		return "", err
	}
	code, err := p.raw("CODE", false)
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(code, "\n") {
		return "", syntaxErrorf(p.pos, "expected CODE to end with a line break before %s, found %s", FrameSep, describe(p.text, p.pos))
	}
	return code, p.expect(FrameSep)
}

// Parse reads a trajectory written by Render. It is Render's exact inverse: Parse(Render(t))
// deep-equals t.Grammar(), and Render(Parse(text)) == text whenever Parse succeeds, so it accepts
// only the canonical text (no whitespace between tokens, json.dumps escaping). The direction is the
// one of the state and exit tokens. Errors are *SyntaxError, giving what was expected and the byte
// offset.
func Parse(text string) (debugger.Trajectory, error) {
	p := &parser{text: text}
	code, err := p.code()
	if err != nil {
		return debugger.Trajectory{}, err
	}
	t := debugger.Trajectory{Code: code, Steps: []debugger.Step{}}
	known, inverse := false, false
	for {
		off := p.pos
		tok := specialAt(text, off)
		if exit, ok := tokenExits[tok]; ok {
			if known && (exit == debugger.InvExitEntry) != inverse {
				return debugger.Trajectory{}, syntaxErrorf(off, "expected an exit of %s trajectory (%s), found %s",
					dirName(inverse), exitList(inverse), tok)
			}
			inverse = exit == debugger.InvExitEntry
			t.Exit = exit
			p.pos += len(tok)
			break
		}
		if _, ok := tokenKinds[tok]; !ok {
			return debugger.Trajectory{}, syntaxErrorf(off, "expected a state's event token or an exit token, found %s", describe(text, off))
		}
		st, err := p.state()
		if err != nil {
			return debugger.Trajectory{}, err
		}
		if !known {
			known, inverse = true, st.Kind.Inverse()
		} else if st.Kind.Inverse() != inverse {
			return debugger.Trajectory{}, syntaxErrorf(off, "expected a state of %s trajectory, found %s", dirName(inverse), tok)
		}
		if err := p.expect(ActionSep); err != nil {
			return debugger.Trajectory{}, err
		}
		step, err := p.action(st, inverse)
		if err != nil {
			return debugger.Trajectory{}, err
		}
		t.Steps = append(t.Steps, step)
		if err := p.expect(FrameSep); err != nil {
			return debugger.Trajectory{}, err
		}
	}
	if err := p.expect(TraceEnd); err != nil {
		return debugger.Trajectory{}, err
	}
	if err := p.expect(EndOfText); err != nil {
		return debugger.Trajectory{}, err
	}
	if p.pos != len(text) {
		return debugger.Trajectory{}, syntaxErrorf(p.pos, "expected end of text after %s, found %s", EndOfText, describe(text, p.pos))
	}
	t.Direction = debugger.Forward
	if inverse {
		t.Direction = debugger.Inverse
	}
	return t, nil
}

// action parses an ACTION of the given direction and returns the step it completes.
func (p *parser) action(st debugger.State, inverse bool) (debugger.Step, error) {
	off := p.pos
	tok := specialAt(p.text, off)
	a, ok := tokenActions[tok]
	if !ok || inverseAction(a) != inverse {
		list := forwardActionList
		if inverse {
			list = inverseActionList
		}
		return debugger.Step{}, syntaxErrorf(off, "expected an action of %s trajectory (%s), found %s", dirName(inverse), list, describe(p.text, off))
	}
	p.pos += len(tok)
	step := debugger.Step{State: st, Action: a}
	if a == debugger.Breakpoint {
		arg, err := p.raw("the breakpoint's source line", true)
		if err != nil {
			return step, err
		}
		if arg == "" {
			return step, syntaxErrorf(p.pos, "expected the breakpoint's source line after %s, found %s", Breakpoint, describe(p.text, p.pos))
		}
		step.Arg = arg
	}
	return step, nil
}

// ParseState reads one STATE as RenderState writes it: the text is the state alone, with no
// <|frame_sep|> before it and nothing after it. Use it to score a model's predicted next state.
// RenderState(ParseState(text)) == text whenever ParseState succeeds; for LOCALS states Shown is
// non-nil, for ARGS states Value is set.
func ParseState(text string) (debugger.State, error) {
	p := &parser{text: text}
	st, err := p.state()
	if err != nil {
		return debugger.State{}, err
	}
	if p.pos != len(text) {
		return debugger.State{}, syntaxErrorf(p.pos, "expected the end of the state, found %s", describe(text, p.pos))
	}
	return st, nil
}

func dirName(inverse bool) string {
	if inverse {
		return "an inverse"
	}
	return "a forward"
}

func exitList(inverse bool) string {
	if inverse {
		return InvExitEntry
	}
	return forwardExitList
}

// Token lists for error messages.
var (
	kindList = strings.Join([]string{CallSep, LineSep, ReturnSep, ExceptionSep,
		InvReturnSep, InvLineSep, InvLineCallSep, InvCallSep, InvExceptionSep}, ", ")
	forwardActionList = strings.Join([]string{StepInto, StepOver, StepReturn, Breakpoint, Continue}, ", ")
	inverseActionList = strings.Join([]string{InvStepInto, InvStepOver, InvStepCall}, ", ")
	forwardExitList   = strings.Join([]string{ExitNormal, ExitError, ExitNever}, ", ")
)
