package debugger

import (
	"fmt"

	"github.com/ndtrace/ndtrace/schemas"
)

// Item is one traced function-level call: what a trajectory is built from.
type Item struct {
	// Code is the module source and Call the traced call expression.
	Code, Call string
	// Events, Blocks and Status come from the trace (sandbox.Result). Trace, if set, is the
	// compact form of the events and is used instead of Events.
	Events []schemas.Event
	Trace  *Trace
	Blocks []schemas.Block
	Status schemas.Status
	// Consume is set when the call returned an iterator the tracer consumed (sandbox.Result):
	// the forward wrapper is then `return list(islice(CALL, N))` and the inverse trajectory runs
	// over the consumption (WrapConsumed, BuildInverseConsumed).
	Consume *schemas.Consume
	// Value is the call's value as the run rendered it (sandbox.Result.Value), main's return in
	// the forward tree of a run that ended normally; empty for a trace stored without it (main
	// then returns the entry's own return value).
	Value string
	// Start is where forward trajectories start (schemas.ForwardStartFunction or
	// ForwardStartMain); empty is main's call, the wrapper's first state.
	Start string
}

// Tree returns the item's state tree in direction dir with its CODE context: forward trees are
// wrapped in main() and their context ends with the wrapper (they start at main's call, or at the
// function's with Start set to function: StartAtFunction); inverse trees are the entry call's
// reversed states with the function's source only.
func (it Item) Tree(dir Direction) (*Tree, string, error) {
	exit, err := ExitFor(it.Status)
	if err != nil {
		return nil, "", err
	}
	fwd, err := it.forward(exit)
	if err != nil {
		return nil, "", err
	}
	switch dir {
	case Forward:
		if it.Consume != nil {
			t := WrapConsumed(fwd, it.Call, it.Consume)
			return it.started(t), codeContext(it.Code, it.Blocks, t, ConsumeWrapper(it.Call, it.Consume.Limit)), nil
		}
		t := WrapMainValue(fwd, it.Call, it.Value)
		return it.started(t), CodeContext(it.Code, it.Blocks, t, it.Call), nil
	case Inverse:
		t, err := BuildInverseConsumed(fwd, it.Consume)
		if err != nil {
			return nil, "", err
		}
		return t, CodeContext(it.Code, it.Blocks, t, ""), nil
	}
	return nil, "", fmt.Errorf("debugger: unknown direction %q", dir)
}

// Sample draws one trajectory of the item in direction dir (see Sample).
func (it Item) Sample(dir Direction, p Policy, seed uint64, cost CostFunc) (Trajectory, error) {
	t, code, err := it.Tree(dir)
	if err != nil {
		return Trajectory{}, err
	}
	return Sample(t, code, p, seed, cost)
}

// forward builds the item's forward tree from its Trace, or else its Events, without the cleanup
// after the entry's return (dropCleanup).
func (it Item) forward(exit Exit) (*Tree, error) {
	var fwd *Tree
	var err error
	if it.Trace != nil {
		fwd, err = BuildForwardTrace(it.Trace, exit)
	} else {
		fwd, err = BuildForward(it.Events, exit)
	}
	if err != nil {
		return nil, err
	}
	return dropCleanup(fwd, it.Consume, it.Call), nil
}
