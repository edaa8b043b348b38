package execute

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
)

// reexecEvents is a small trace: a call of f with x, two lines, a return of r.
func reexecEvents(x, y, r string) []schemas.Event {
	v := r
	return []schemas.Event{
		{Event: schemas.EventCall, Frame: 1, Func: "f", File: "m.py", Lineno: 1, Src: "def f(x):", Locals: schemas.Locals{{Name: "x", Value: x}}},
		{Event: schemas.EventLine, Frame: 1, Func: "f", File: "m.py", Lineno: 2, Src: "    y = g(x)", Locals: schemas.Locals{{Name: "x", Value: x}}},
		{Event: schemas.EventLine, Frame: 1, Func: "f", File: "m.py", Lineno: 3, Src: "    return y", Locals: schemas.Locals{{Name: "x", Value: x}, {Name: "y", Value: y}}},
		{Event: schemas.EventReturn, Frame: 1, Func: "f", File: "m.py", Lineno: 3, Src: "    return y", Locals: schemas.Locals{{Name: "x", Value: x}, {Name: "y", Value: y}}, Value: &v},
	}
}

// compare runs a reexec of second against first and returns the kept events, the values replaced
// and how the runs differ.
func compare(first, second []schemas.Event) ([]schemas.Event, int, string) {
	var tr *debugger.Trace
	if len(first) > 0 {
		tr = debugger.NewTrace(first)
	}
	r := newReexec(tr)
	for i := range second {
		r.add(&second[i])
	}
	if why := r.differs(); why != "" {
		return nil, 0, why
	}
	kept, n := r.kept()
	return kept.Events(), n, ""
}

func TestReexec(t *testing.T) {
	nd := Nondeterministic
	tests := []struct {
		name          string
		first, second []schemas.Event
		want          []schemas.Event // nil: quarantined
		replaced      int
		why           string // part of the reason of a quarantine
	}{
		{name: "equal", first: reexecEvents("1", "2", "2"), second: reexecEvents("1", "2", "2"),
			want: reexecEvents("1", "2", "2")},
		{name: "empty", first: nil, second: nil, want: []schemas.Event{}},
		{name: "an argument differs everywhere", first: reexecEvents("'0x7f01'", "2", "2"), second: reexecEvents("'0x7f99'", "2", "2"),
			want: reexecEvents(nd, "2", "2"), replaced: 1},
		{name: "addresses placed elsewhere in the same order agree", first: reexecEvents("'0x7f0100000010'", "'<P at 0x7f0100000020>'", "'0x7f0100000010'"),
			second: reexecEvents("'0x7f9900000aa0'", "'<P at 0x7f9900000bb0>'", "'0x7f9900000aa0'"),
			want:   reexecEvents("'0x7f0100000010'", "'<P at 0x7f0100000020>'", "'0x7f0100000010'")},
		{name: "addresses in another order differ", first: reexecEvents("'0x7f0100000010'", "'0x7f0100000020'", "'0x7f0100000010'"),
			second: reexecEvents("'0x7f9900000aa0'", "'0x7f9900000aa0'", "'0x7f9900000aa0'"),
			want:   reexecEvents("'0x7f0100000010'", nd, "'0x7f0100000010'"), replaced: 1},
		{name: "a local and the return value differ", first: reexecEvents("1", "140001", "140001"), second: reexecEvents("1", "150001", "150001"),
			want: reexecEvents("1", nd, nd), replaced: 2},
		{name: "a line differs", first: reexecEvents("1", "2", "2"), why: "event 1 differs",
			second: func() []schemas.Event { e := reexecEvents("1", "2", "2"); e[1].Lineno = 5; return e }()},
		{name: "a function differs", first: reexecEvents("1", "2", "2"), why: "event 0 differs",
			second: func() []schemas.Event { e := reexecEvents("1", "2", "2"); e[0].Func = "h"; return e }()},
		{name: "a depth differs", first: reexecEvents("1", "2", "2"), why: "event 3 differs",
			second: func() []schemas.Event { e := reexecEvents("1", "2", "2"); e[3].Depth = 1; return e }()},
		{name: "a kind differs", first: reexecEvents("1", "2", "2"), why: "event 3 differs",
			second: func() []schemas.Event {
				e := reexecEvents("1", "2", "2")
				e[3].Event, e[3].ExcType = schemas.EventException, "ValueError"
				return e
			}()},
		{name: "a local's name differs", first: reexecEvents("1", "2", "2"), why: "local 1",
			second: func() []schemas.Event { e := reexecEvents("1", "2", "2"); e[2].Locals[1].Name = "z"; return e }()},
		{name: "fewer events", first: reexecEvents("1", "2", "2"), second: reexecEvents("1", "2", "2")[:3], why: "3 events, the first 4"},
		{name: "more events", first: reexecEvents("1", "2", "2")[:2], second: reexecEvents("1", "2", "2"), why: "more than the first's 2"},
		{name: "events where the first had none", first: nil, second: reexecEvents("1", "2", "2"), why: "more than the first's 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, n, why := compare(tc.first, tc.second)
			if tc.want == nil {
				if why == "" || !strings.Contains(why, tc.why) {
					t.Fatalf("why %q, want one with %q", why, tc.why)
				}
				return
			}
			if why != "" {
				t.Fatalf("quarantined: %s", why)
			}
			if n != tc.replaced {
				t.Errorf("replaced %d values, want %d", n, tc.replaced)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("kept %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestReexecUnchangedIsSame checks that two runs that agree keep the first trace itself.
func TestReexecUnchangedIsSame(t *testing.T) {
	tr := debugger.NewTrace(reexecEvents("1", "2", "2"))
	r := newReexec(tr)
	for _, e := range reexecEvents("1", "2", "2") {
		r.add(&e)
	}
	if kept, n := r.kept(); kept != tr || n != 0 {
		t.Errorf("kept a new trace (%d values replaced)", n)
	}
}

// TestReexecCountsOnce checks that a value that stays the same over its frame's events is counted
// once, and a new value of the same local once more.
func TestReexecCountsOnce(t *testing.T) {
	first := reexecEvents("1", "2", "2")
	second := reexecEvents("1", "3", "2")
	// x differs at every event: one value. y differs at events 2 and 3: one value.
	for i := range second {
		second[i].Locals[0].Value = "9"
	}
	_, n, why := compare(first, second)
	if why != "" || n != 2 {
		t.Errorf("replaced %d (%q), want 2", n, why)
	}
}

// TestReexecAttack feeds a second run of many more, and of wholly different, events than the
// first: the comparison quarantines it at once, keeps nothing of it, and takes time linear in
// the events. A run whose every value differs holds one entry per variable.
func TestReexecAttack(t *testing.T) {
	first := debugger.NewTrace(reexecEvents("1", "2", "2"))
	r := newReexec(first)
	ev := schemas.Event{Event: schemas.EventLine, Frame: 7, Func: "spin", File: "m.py", Lineno: 9,
		Locals: schemas.Locals{{Name: "i", Value: strings.Repeat("x", 1000)}}}
	for range 1_000_000 {
		r.add(&ev)
	}
	if why := r.differs(); why == "" || len(r.taint) != 0 {
		t.Errorf("why %q, %d variables tainted", why, len(r.taint))
	}
	// Every value of a long trace differing: what is held is the few variables, not the values.
	var many []schemas.Event
	for i := range 3000 {
		many = append(many, schemas.Event{Event: schemas.EventLine, Frame: 1, Func: "f", File: "m.py", Lineno: 2,
			Locals: make(schemas.Locals, 400)})
		for k := range many[i].Locals {
			many[i].Locals[k] = schemas.Var{Name: "v" + string(rune('a'+k%26)) + string(rune('a'+k/26)), Value: "a"}
		}
	}
	r = newReexec(debugger.NewTrace(many))
	for i := range many {
		e := many[i]
		e.Locals = append(schemas.Locals(nil), e.Locals...)
		for k := range e.Locals {
			e.Locals[k].Value = "b"
		}
		r.add(&e)
	}
	if why := r.differs(); why != "" || len(r.taint) != 400 {
		t.Fatalf("why %q, %d variables tainted", why, len(r.taint))
	}
	if _, n := r.kept(); n != 400 {
		t.Errorf("replaced %d values, want 400", n)
	}
}

// TestReexecTaintsVariables checks that a variable that differs at one event reads
// Nondeterministic at all its events, before and after, in every frame of its function, and that
// a value that agrees by chance is replaced too.
func TestReexecTaintsVariables(t *testing.T) {
	nd := Nondeterministic
	call := func(frame int, x, y string) []schemas.Event {
		e := reexecEvents(x, y, "0")
		for i := range e {
			e[i].Frame = frame
		}
		return e
	}
	first := append(call(1, "1", "a"), call(2, "2", "b")...)
	second := append(call(1, "1", "a"), call(2, "2", "c")...) // y differs in the second call only
	got, n, why := compare(first, second)
	if why != "" {
		t.Fatal(why)
	}
	want := append(call(1, "1", nd), call(2, "2", nd)...)
	if !reflect.DeepEqual(got, want) || n != 2 {
		t.Errorf("replaced %d, kept %+v\nwant %+v", n, got, want)
	}
}
