package tokenize

import (
	"fmt"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
)

// cwmKindTokens are the event tokens of CWM's trace format: forward kinds only.
var cwmKindTokens = map[debugger.Kind]string{
	debugger.KindCall:      CallSep,
	debugger.KindLine:      LineSep,
	debugger.KindReturn:    ReturnSep,
	debugger.KindException: ExceptionSep,
}

var tokenCWMKinds = invert(cwmKindTokens)

// RenderCWM writes a forward trace in the execution-trace format of Code World Model (CWM), the
// format the neural-debugger grammar extends (docs/grammar.md, "CWM format"):
//
//	<|begin_of_text|><|trace_context_start|>CODE<|frame_sep|>
//	then per state, by kind:
//	  <|call_sep|>LOCALS<|action_sep|>SRC<|frame_sep|>
//	  <|line_sep|>LOCALS<|action_sep|>SRC<|frame_sep|>
//	  <|return_sep|><|action_sep|>SRC<|arg_sep|>VALUE<|frame_sep|>
//	  <|exception_sep|><|action_sep|>SRC<|arg_sep|>VALUE<|frame_sep|>
//	<|end_of_text|>
//
// states are forward states in recorded order; each one's full locals are in State.Locals and
// State.Frame tells its frame. LOCALS keeps every variable of the frame and writes a value that is
// unchanged since the locals last shown in the same frame as "..". The dict is written in full at a
// call state, at the first state, and at the first state after a context change (the previous state
// belonged to another frame); return and exception states show no locals and so are no base for a
// diff. This is the rule by which CWM's own debugger demo resolves "..".
//
// CWM writes <|end_of_text|> when execution leaves the entry scope, so it ends the text for
// ExitNormal and ExitError; a trace cut off by a limit (ExitNever) ends after its last
// <|frame_sep|>. The caller marks the entry in CODE (the "# << START_OF_TRACE" comment).
//
// RenderCWM refuses what Render refuses for CODE, SRC and values, inverse kinds or exits, a Value
// on a call or line state, and a local whose value is ".." (it would read as "unchanged").
func RenderCWM(code string, states []debugger.State, exit debugger.Exit) (string, error) {
	switch exit {
	case debugger.ExitNormal, debugger.ExitError, debugger.ExitNever:
	default:
		return "", fmt.Errorf("tokenize: cwm: exit: %q is not a forward exit", exit)
	}
	if err := checkCode(code); err != nil {
		return "", fmt.Errorf("tokenize: cwm: code: %w", err)
	}
	n := len(BeginOfText) + len(TraceContextStart) + len(code) + 2*len(FrameSep) + len(EndOfText)
	for _, st := range states {
		n += 48 + len(st.Src)
		for _, v := range st.Locals {
			n += len(v.Name) + len(v.Value) + 8
		}
		if st.Value != nil {
			n += len(*st.Value) + 2
		}
	}
	b := make([]byte, 0, n)
	b = append(b, BeginOfText...)
	b = append(b, TraceContextStart...)
	b = append(b, code...)
	b = append(b, FrameSep...)
	var d cwmDiff
	var err error
	for i, st := range states {
		if b, err = d.appendState(b, i, st); err != nil {
			return "", fmt.Errorf("tokenize: cwm: states[%d].%w", i, err)
		}
	}
	if exit != debugger.ExitNever {
		b = append(b, EndOfText...)
	}
	return string(b), nil
}

// cwmDiff tracks the base of CWM's LOCALS diff: the locals last shown in the current frame since
// the last context change.
type cwmDiff struct {
	frame int
	have  bool              // base holds a base for the current frame
	base  map[string]string // the base, by name
	spare map[string]string // the next base, reused to spare allocations
}

// enter moves the tracker to the i-th state, which is in frame: a new frame ends the base.
func (d *cwmDiff) enter(i, frame int) {
	if i == 0 || frame != d.frame {
		d.have = false
	}
	d.frame = frame
}

// shown makes l the base for the states that follow.
func (d *cwmDiff) shown(l schemas.Locals) {
	if d.spare == nil {
		d.spare = make(map[string]string, len(l))
	}
	clear(d.spare)
	for _, v := range l {
		d.spare[v.Name] = v.Value
	}
	d.base, d.spare = d.spare, d.base
	d.have = true
}

// appendState appends the frame of the i-th state st. Errors name the field of st first.
func (d *cwmDiff) appendState(b []byte, i int, st debugger.State) ([]byte, error) {
	tok, ok := cwmKindTokens[st.Kind]
	if !ok {
		return b, fmt.Errorf("Kind: %q is not a forward event kind", st.Kind)
	}
	if err := checkRaw(st.Src, true); err != nil {
		return b, fmt.Errorf("Src: %w", err)
	}
	d.enter(i, st.Frame)
	b = append(b, tok...)
	if st.Kind.HasArgs() {
		if st.Value == nil {
			return b, fmt.Errorf("Value: missing; %s states carry a value", st.Kind)
		}
		b = append(b, ActionSep...)
		b = append(b, st.Src...)
		b = append(b, ArgSep...)
		var err error
		if b, err = appendPyString(b, *st.Value); err != nil {
			return b, fmt.Errorf("Value: %w", err)
		}
		return append(b, FrameSep...), nil
	}

	if st.Value != nil {
		return b, fmt.Errorf("Value: must be nil; %s states show locals, not a value", st.Kind)
	}
	if err := checkDuplicates(st.Locals); err != nil {
		return b, fmt.Errorf("Locals%w", err)
	}
	diff := d.have && st.Kind != debugger.KindCall
	b = append(b, '{')
	var err error
	for j, v := range st.Locals {
		if v.Value == elidedKey {
			return b, fmt.Errorf("Locals[%d].Value: %q is CWM's unchanged marker and cannot be a value", j, elidedKey)
		}
		if j > 0 {
			b = append(b, ',', ' ')
		}
		if b, err = appendPyString(b, v.Name); err != nil {
			return b, fmt.Errorf("Locals[%d].Name: %w", j, err)
		}
		b = append(b, ':', ' ')
		if prev, ok := d.base[v.Name]; diff && ok && prev == v.Value {
			b = append(b, `".."`...)
		} else if b, err = appendPyString(b, v.Value); err != nil {
			return b, fmt.Errorf("Locals[%d].Value: %w", j, err)
		}
	}
	b = append(b, '}')
	d.shown(st.Locals)
	b = append(b, ActionSep...)
	b = append(b, st.Src...)
	return append(b, FrameSep...), nil
}

// ParseCWM reads a trace written by RenderCWM and returns CODE, the states and whether the text
// ends with <|end_of_text|> (ExitNormal or ExitError; RenderCWM writes none for ExitNever).
// RenderCWM(code, states, exit) == text whenever ParseCWM succeeds, with exit ExitNormal when ended
// and ExitNever otherwise.
//
// Each state has Kind, Src and, for return and exception states, Value. Call and line states get
// their full Locals, with every ".." resolved. Frame is rebuilt from the call stack, numbering frames
// from 0 in order of appearance: a call opens a frame, a return closes it, and a state with no open
// frame opens one. This agrees with the recorded frames for any trace of nested calls, which is
// what sys.settrace produces; text whose diffs do not follow from that stack is refused. Errors are
// *SyntaxError.
func ParseCWM(text string) (code string, states []debugger.State, ended bool, err error) {
	p := &parser{text: text}
	if code, err = p.code(); err != nil {
		return "", nil, false, err
	}
	states = []debugger.State{}
	var d cwmDiff
	var stack []int // open frames, innermost last
	frames := 0
	for i := 0; ; i++ {
		off := p.pos
		if off == len(text) {
			return code, states, false, nil
		}
		tok := specialAt(text, off)
		if tok == EndOfText {
			if p.pos += len(tok); p.pos != len(text) {
				return "", nil, false, syntaxErrorf(p.pos, "expected end of text after %s, found %s", EndOfText, describe(text, p.pos))
			}
			return code, states, true, nil
		}
		kind, ok := tokenCWMKinds[tok]
		if !ok {
			return "", nil, false, syntaxErrorf(off, "expected an event token (%s, %s, %s, %s), %s or the end of the text, found %s",
				CallSep, LineSep, ReturnSep, ExceptionSep, EndOfText, describe(text, off))
		}
		p.pos += len(tok)
		if kind == debugger.KindCall || len(stack) == 0 {
			stack = append(stack, frames)
			frames++
		}
		st := debugger.State{Kind: kind, Frame: stack[len(stack)-1]}
		d.enter(i, st.Frame)
		if err := p.cwmState(&st, &d); err != nil {
			return "", nil, false, err
		}
		if kind == debugger.KindReturn {
			stack = stack[:len(stack)-1]
		}
		states = append(states, st)
	}
}

// cwmState parses the rest of a CWM frame after its event token into st.
func (p *parser) cwmState(st *debugger.State, d *cwmDiff) error {
	var err error
	if st.Kind.HasArgs() {
		if err = p.expect(ActionSep); err != nil {
			return err
		}
		if st.Src, err = p.raw("SOURCE", true); err != nil {
			return err
		}
		if err = p.expect(ArgSep); err != nil {
			return err
		}
		v, next, err := decodePyString(p.text, p.pos, true)
		if err != nil {
			return err
		}
		st.Value, p.pos = &v, next
		return p.expect(FrameSep)
	}
	off := p.pos
	shown, _, next, err := decodePyObject(p.text, off, true, false)
	if err != nil {
		return err
	}
	diff := d.have && st.Kind != debugger.KindCall
	for j, v := range shown {
		prev, ok := d.base[v.Name]
		switch {
		case v.Value == elidedKey && !diff:
			return syntaxErrorf(off, `LOCALS %q: unchanged marker ".." in a full dict (a call, or the first state of a frame)`, v.Name)
		case v.Value == elidedKey && !ok:
			return syntaxErrorf(off, `LOCALS %q: unchanged marker ".." but the frame showed no %q before`, v.Name, v.Name)
		case v.Value == elidedKey:
			shown[j].Value = prev
		case diff && ok && v.Value == prev:
			return syntaxErrorf(off, `LOCALS %q: value %q is unchanged and must be written ".."`, v.Name, v.Value)
		}
	}
	st.Locals, p.pos = shown, next
	d.shown(shown)
	if err = p.expect(ActionSep); err != nil {
		return err
	}
	if st.Src, err = p.raw("SOURCE", true); err != nil {
		return err
	}
	return p.expect(FrameSep)
}
