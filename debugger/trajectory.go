package debugger

import (
	"github.com/ndtrace/ndtrace/schemas"
)

// Direction is the direction a trajectory runs the program in.
type Direction string

// The two directions of the paper's MDP.
const (
	Forward Direction = "forward"
	Inverse Direction = "inverse"
)

// Kind is the event type of a state (EVT in the paper). Forward states carry the tracer's event
// kinds; inverse states the inv_ kinds.
type Kind string

// State kinds.
const (
	KindCall      Kind = "call"
	KindLine      Kind = "line"
	KindReturn    Kind = "return"
	KindException Kind = "exception"

	KindInvReturn    Kind = "inv_return"
	KindInvLine      Kind = "inv_line"
	KindInvLineCall  Kind = "inv_line_call" // a call-site line, entered backwards into its callees
	KindInvCall      Kind = "inv_call"
	KindInvException Kind = "inv_exception"
)

// HasArgs reports whether a state of kind k shows ARGS (a return or exception value) rather than
// LOCALS.
func (k Kind) HasArgs() bool {
	return k == KindReturn || k == KindException || k == KindInvReturn || k == KindInvException
}

// Inverse reports whether k is an inverse kind.
func (k Kind) Inverse() bool {
	switch k {
	case KindInvReturn, KindInvLine, KindInvLineCall, KindInvCall, KindInvException:
		return true
	}
	return false
}

// Action is a debugger action.
type Action string

// Forward and inverse actions.
const (
	StepInto   Action = "step_into"
	StepOver   Action = "step_over"
	StepReturn Action = "step_return"
	Breakpoint Action = "breakpoint" // takes a source line as its argument
	Continue   Action = "continue"

	InvStepInto Action = "inv_step_into"
	InvStepOver Action = "inv_step_over"
	InvStepCall Action = "inv_step_call"
)

// ForwardActions and InverseActions list the actions of each direction.
var (
	ForwardActions = []Action{StepInto, StepOver, StepReturn, Breakpoint, Continue}
	InverseActions = []Action{InvStepInto, InvStepOver, InvStepCall}
)

// Exit is how a trajectory ends (EXIT_STATE in the paper).
type Exit string

// Exit states.
const (
	ExitNormal   Exit = "exit_normal"    // the program returned
	ExitError    Exit = "exit_error"     // an uncaught exception left the entry scope
	ExitNever    Exit = "exit_never"     // the run was cut off by a time, event or output limit
	InvExitEntry Exit = "inv_exit_entry" // an inverse trajectory went back past the entry call
)

// State is one program state of a trajectory, as the grammar shows it, plus metadata that the
// grammar does not carry.
type State struct {
	// Kind is the state's event type.
	Kind Kind
	// Src is the source line, indentation kept.
	Src string
	// Shown is the LOCALS as rendered: the full dictionary or a diff (for states without ARGS).
	Shown schemas.Locals
	// Elided marks a diff that left unchanged variables out; it renders as a leading `"..": ".."`.
	Elided bool
	// Value is the ARGS of return and exception states: the rendered return value or exception.
	Value *string

	// Metadata, not rendered.

	// Func, Lineno, Depth and Frame describe where the state is (Depth from the entry, 0).
	Func   string
	Lineno int
	Depth  int
	Frame  int
	// Locals is the frame's full locals at this state, whatever Shown displays.
	Locals schemas.Locals
}

// Step is a state and the action taken from it. In a trajectory every step has an action (the last
// one leads to the exit); a prompt built with Replay may end with a step without one.
type Step struct {
	State  State
	Action Action
	// Arg is the breakpoint's source line.
	Arg string
}

// Trajectory is one debugger session: the CODE context, states and actions, and the exit state.
type Trajectory struct {
	Direction Direction
	// Code is the CODE context: the source blocks containing every visited line (and, forward at
	// function level, the main() wrapper holding the call).
	Code  string
	Steps []Step
	Exit  Exit
	// Truncated is set when a cap of the policy (MaxActions, MaxTokens) was reached: the
	// trajectory was finished early (forward by continue, inverse by inv_step_call/inv_step_over)
	// instead of going on as the policy would have. Not rendered.
	Truncated bool
}

// Actions counts the actions taken.
func (t *Trajectory) Actions() int {
	n := 0
	for _, s := range t.Steps {
		if s.Action != "" {
			n++
		}
	}
	return n
}

// Grammar returns t with the metadata the grammar does not carry removed, so that what a parser
// reads back can be compared with it.
func (t Trajectory) Grammar() Trajectory {
	out := Trajectory{Direction: t.Direction, Code: t.Code, Exit: t.Exit, Steps: make([]Step, len(t.Steps))}
	// Truncated is metadata: a parsed trajectory cannot know it.
	for i, s := range t.Steps {
		st := State{Kind: s.State.Kind, Src: s.State.Src, Value: s.State.Value}
		if !st.Kind.HasArgs() {
			st.Shown, st.Elided = s.State.Shown, s.State.Elided
			if st.Shown == nil {
				st.Shown = schemas.Locals{}
			}
		}
		out.Steps[i] = Step{State: st, Action: s.Action, Arg: s.Arg}
	}
	return out
}
