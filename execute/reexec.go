package execute

import (
	"context"
	"fmt"
	"strings"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/internal/addrs"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// Nondeterministic is the value a kept trace shows in place of a value (a local, a return value or
// an exception) that differed between two traced runs of the same test (docs/spec.md,
// "reexecute"): exactly this string, which statistics count as a noisy value.
const Nondeterministic = schemas.NondeterministicValue

// reexec compares a second traced run of a test, one event at a time as it streams, with the first
// run's trace (compact form), so that neither the second run's trace nor both runs' full events
// are ever held: its memory is the first trace plus the set of variables found to differ.
//
// Two runs differ in structure when their events differ in anything but values: number, kind,
// frame, function, file, line, source, depth, unwinding, exception type, the names of their locals
// or whether a value is there. A test whose runs differ in structure is quarantined. Otherwise a
// value that differs taints its variable: the local of that name in that function (file and
// qualified name), or the function's return or exception value. Every value of a tainted variable
// reads Nondeterministic in the kept trace (kept), at every event of the test, before and after
// the events where the runs differed: a value drawn from a few possibilities (the order of a set
// of objects, an iteration over it) agrees between two runs now and then, and kept where it
// happened to agree it would differ from one run of the spec to the next.
//
// Values are compared with their memory addresses numbered per run (addrs.Normalise): a value
// that differs only in where the interpreter put an object (hex(id(obj)) in a string, an address
// in a repr the tracer did not guard) agrees if each run shows its objects in the same order, and
// is kept, for rows to number per row, rather than read as nondeterministic.
type reexec struct {
	first *debugger.Trace
	n     int               // events of the second run seen
	why   string            // how the runs differ in structure; "" while they agree
	taint map[variable]bool // the variables whose values differ
	// ordsA and ordsB number the addresses of the first and second run's values.
	ordsA, ordsB map[string]int
}

// same reports whether a (first run) and b (second run) agree once their addresses are numbered
// per run. Both are numbered whenever either may hold one, so that the two maps see every
// address of both runs in the same order.
func (r *reexec) same(a, b string) bool {
	if !strings.Contains(a, "0x") && !strings.Contains(b, "0x") && !strings.Contains(a, "0X") && !strings.Contains(b, "0X") {
		return a == b
	}
	return addrs.Normalise(a, r.ordsA) == addrs.Normalise(b, r.ordsB)
}

// variable names a function's local (Name), or its return value or exception (Name "" with Kind
// the event's kind).
type variable struct{ File, Func, Kind, Name string }

// localOf and valueOf are the variables of an event's local name and of its Value.
func localOf(ev *schemas.Event, name string) variable {
	return variable{File: ev.File, Func: ev.Func, Name: name}
}

func valueOf(ev *schemas.Event) variable {
	return variable{File: ev.File, Func: ev.Func, Kind: ev.Event}
}

// newReexec compares with first, the first run's events (nil for none).
func newReexec(first *debugger.Trace) *reexec {
	if first == nil {
		first = debugger.NewTraceBuilder().Trace()
	}
	return &reexec{first: first, taint: map[variable]bool{}, ordsA: map[string]int{}, ordsB: map[string]int{}}
}

// add compares the second run's next event with the first run's event at the same place.
func (r *reexec) add(ev *schemas.Event) {
	i := r.n
	r.n++
	if r.why != "" {
		return
	}
	if i >= r.first.Len() {
		r.why = fmt.Sprintf("the second run has more than the first's %d events", r.first.Len())
		return
	}
	a := r.first.Event(i)
	switch {
	case a.Event != ev.Event || a.Frame != ev.Frame || a.Func != ev.Func || a.File != ev.File ||
		a.Lineno != ev.Lineno || a.Depth != ev.Depth || a.Src != ev.Src || a.Unwind != ev.Unwind ||
		a.ExcType != ev.ExcType || (a.Value == nil) != (ev.Value == nil) ||
		len(a.Locals) != len(ev.Locals) || (a.Locals == nil) != (ev.Locals == nil):
		r.why = fmt.Sprintf("event %d differs: %s %s:%d %s (depth %d) against %s %s:%d %s (depth %d)", i,
			a.Event, a.File, a.Lineno, a.Func, a.Depth, ev.Event, ev.File, ev.Lineno, ev.Func, ev.Depth)
		return
	}
	for k := range a.Locals {
		if a.Locals[k].Name != ev.Locals[k].Name {
			r.why = fmt.Sprintf("event %d differs: local %d is %q against %q", i, k, a.Locals[k].Name, ev.Locals[k].Name)
			return
		}
		if !r.same(a.Locals[k].Value, ev.Locals[k].Value) {
			r.taint[localOf(&a, a.Locals[k].Name)] = true
		}
	}
	if a.Value != nil && !r.same(*a.Value, *ev.Value) {
		r.taint[valueOf(&a)] = true
	}
}

// differs says how the two runs differ in structure ("" when they agree), once the second run has
// ended.
func (r *reexec) differs() string {
	if r.why == "" && r.n != r.first.Len() {
		r.why = fmt.Sprintf("the second run has %d events, the first %d", r.n, r.first.Len())
	}
	return r.why
}

// kept is the first run's trace with every value of a tainted variable replaced by
// Nondeterministic (the trace itself when no variable is), and the number of values replaced: a
// value that stays the same over consecutive events of its frame is counted once. Call it only
// when differs is "".
func (r *reexec) kept() (*debugger.Trace, int) {
	if len(r.taint) == 0 {
		return r.first, 0
	}
	b := debugger.NewTraceBuilder()
	// Per frame, the first run's locals at its previous event: what counts a value once while it
	// stays. A frame is forgotten at its return.
	last := map[int]schemas.Locals{}
	replaced := 0
	for i := 0; i < r.first.Len(); i++ {
		ev := r.first.Event(i)
		raw := ev.Locals
		prev := last[ev.Frame]
		for k, l := range raw {
			if !r.taint[localOf(&ev, l.Name)] {
				continue
			}
			if len(ev.Locals) > 0 && &ev.Locals[0] == &raw[0] {
				ev.Locals = append(schemas.Locals(nil), raw...)
			}
			ev.Locals[k].Value = Nondeterministic
			if k >= len(prev) || prev[k] != l {
				replaced++
			}
		}
		if ev.Value != nil && r.taint[valueOf(&ev)] {
			v := Nondeterministic
			ev.Value = &v
			replaced++
		}
		b.Add(&ev)
		if ev.Event == schemas.EventReturn {
			delete(last, ev.Frame)
		} else {
			last[ev.Frame] = raw
		}
	}
	return b.Trace(), replaced
}

// FrozenInstant is the instant a repository's tests see as time.time with frozen_clock:
// 2000-01-01T00:00:00Z.
const FrozenInstant = 946684800

// reexecuteTest runs the traced test req once more in sb and compares it with its first traced
// run (first, its compact trace, nil for none; tr, its result), the second run's events made the
// checkout's by hider as they stream. It returns the trace to keep (first with the values that
// differed replaced, see reexec.kept) and the number of values replaced, or why the two runs
// differ in structure or outcome (the test is then quarantined). An error is the sandbox's.
func reexecuteTest(ctx context.Context, sb *sandbox.Sandbox, req sandbox.TestRequest, first *debugger.Trace,
	tr *sandbox.TestResult, hider *pathHider) (*debugger.Trace, int, string, error) {
	cmp := newReexec(first)
	req.Traced = true
	req.Events = func(ev *schemas.Event) {
		e, _ := hider.event(ev)
		cmp.add(e)
	}
	again, err := sb.RunTest(ctx, req)
	if err != nil {
		return nil, 0, "", err
	}
	if why := cmp.differs(); why != "" {
		return nil, 0, why, nil
	}
	if a, b := outcomeKey(tr), outcomeKey(again); a != b {
		return nil, 0, fmt.Sprintf("outcome %s, then %s", a, b), nil
	}
	if first == nil {
		return nil, 0, "", nil
	}
	kept, n := cmp.kept()
	return kept, n, "", nil
}

// reexecuteFunction is reexecuteTest for a function-level item c found in a repository's tests:
// its second run in sb, compared with the first (first, its trace; res, its result). The
// function's return value (Result.Value, addresses numbered per run) and its value as consumed
// (Result.Consume) must be the same too, else the function is dropped.
func reexecuteFunction(ctx context.Context, sb *sandbox.Sandbox, at funcPlace, c crawl.Item, lim sandbox.Limits, first *debugger.Trace,
	res *sandbox.Result, hidden workerPaths) (*debugger.Trace, int, string, error) {
	cmp := newReexec(first)
	hider := newPathHider(hidden, "")
	req := at.request(c, lim, func(ev *schemas.Event) { e, _ := hider.event(ev); cmp.add(e) })
	again, err := sb.Run(ctx, req)
	at.result(c, req, again)
	if err != nil {
		return nil, 0, "", err
	}
	if why := cmp.differs(); why != "" {
		return nil, 0, why, nil
	}
	if again.Status != res.Status {
		return nil, 0, fmt.Sprintf("status %s, then %s", res.Status, again.Status), nil
	}
	if a, b := hidden.hideConsume(res.Consume), hidden.hideConsume(again.Consume); (a == nil) != (b == nil) || a != nil && *a != *b {
		return nil, 0, "the consumed return value differs", nil
	}
	if !cmp.same(hidden.hide(okValue(res)), hidden.hide(okValue(again))) {
		// main's return shows it (TracedItem.Value): it must not be one run's.
		return nil, 0, "the return value differs", nil
	}
	if first == nil {
		return nil, 0, "", nil
	}
	kept, n := cmp.kept()
	return kept, n, "", nil
}
