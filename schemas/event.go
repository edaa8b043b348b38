// Package schemas holds the data types that cross package and process boundaries: trace events,
// run statuses, and (later) dataset rows and manifests.
//
// # Event framing
//
// The tracer inside the sandbox writes JSON Lines to file descriptor 3 of the traced process, never to
// stdout or stderr, which belong to the user code. On that wire an event carries only the locals that
// changed since the same frame's previous event; package sandbox rebuilds the full dictionaries, so an
// [Event] always holds the complete locals in frame order. The wire format, its control socket and the
// value-rendering rules are specified in docs/tracer-protocol.md.
package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Event kinds recorded by the tracer (sys.settrace's event names).
const (
	EventCall      = "call"
	EventLine      = "line"
	EventReturn    = "return"
	EventException = "exception"
)

// Event is one traced frame event with the full local variables of its frame.
type Event struct {
	// Event is one of EventCall, EventLine, EventReturn, EventException.
	Event string `json:"event"`
	// Frame numbers the frames of one trace from 1; a generator keeps its number across resumptions.
	Frame int `json:"frame"`
	// Func is the code object's qualified name (f, Cls.meth, f.<locals>.g, <listcomp>).
	Func string `json:"func"`
	// File is the code object's file name.
	File string `json:"file"`
	// Lineno is the frame's current line; for a call event, the def line.
	Lineno int `json:"lineno"`
	// Depth counts the traced frames below this one on the stack; the entry call has depth 0.
	Depth int `json:"depth"`
	// Src is the text of line Lineno, indentation kept, line ending removed.
	Src string `json:"src"`
	// Locals holds every local variable of the frame at the moment of the event, in f_locals order,
	// each value rendered as a bounded, deterministic repr string.
	Locals Locals `json:"locals"`
	// Value is the rendered return value (return events) or exception instance (exception events).
	Value *string `json:"value,omitempty"`
	// ExcType is the exception type's qualified name on exception events.
	ExcType string `json:"exc_type,omitempty"`
	// Unwind marks a return event caused by an exception leaving the frame (its Value is "None").
	Unwind bool `json:"unwind,omitempty"`
}

// Var is one local variable: its name and rendered value.
type Var struct {
	Name  string
	Value string
}

// Locals is an ordered set of local variables. It marshals to a JSON object whose keys keep their
// order, which plain Go maps cannot do.
type Locals []Var

// Get returns the value of name and whether it is present.
func (l Locals) Get(name string) (string, bool) {
	for _, v := range l {
		if v.Name == name {
			return v.Value, true
		}
	}
	return "", false
}

// MarshalJSON writes l as a JSON object in order.
func (l Locals) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, v := range l {
		if i > 0 {
			b.WriteString(", ")
		}
		k, err := json.Marshal(v.Name)
		if err != nil {
			return nil, err
		}
		val, err := json.Marshal(v.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteString(": ")
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads a JSON object of string values, keeping key order.
func (l *Locals) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		*l = nil
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("locals: want a JSON object, got %v", tok)
	}
	out := Locals{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := kt.(string)
		var val string
		if err := dec.Decode(&val); err != nil {
			return fmt.Errorf("locals: value of %q: %w", name, err)
		}
		out = append(out, Var{Name: name, Value: val})
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	*l = out
	return nil
}

// Block is a top-level statement of a traced source file (a function, a class, an assignment):
// lines Start to End, 1-based and inclusive, decorators included. The debugger's CODE context is
// made of the blocks that contain visited lines.
type Block struct {
	File  string `json:"file"`
	Start int    `json:"start"`
	End   int    `json:"end"`
}

// Consume describes a function-level run whose call returned a generator or another iterator:
// the tracer then took up to Limit values from it, still tracing, as list(islice(CALL, Limit))
// would (docs/tracer-protocol.md). The run's value is the list of the values taken.
type Consume struct {
	// Start is the index of the first event of the consumption: the events before it are the
	// call's own (its arguments, a class's __init__), those from it on were run to take values.
	Start int `json:"start"`
	// Limit is how many values the tracer takes at most.
	Limit int `json:"limit"`
	// Values is how many it took, -1 if the run ended without saying (killed, out of memory).
	Values int `json:"values"`
	// Exhausted is set when the iterator ended before Limit values (the run ended ok with fewer):
	// the list is all it had. Otherwise the iterator may have had more; it was not asked.
	Exhausted bool `json:"exhausted,omitempty"`
	// Value is the rendered list of the values taken (status ok), the run's value.
	Value string `json:"value,omitempty"`
}
