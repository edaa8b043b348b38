package rows

import (
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// valuesTrajectory is a forward trajectory of line states, one per entry of values, each showing
// its values as locals v0, v1, ...; the last state returns ret (when not empty).
func valuesTrajectory(ret string, values ...[]string) debugger.Trajectory {
	t := debugger.Trajectory{Direction: debugger.Forward, Code: "def f():\n    pass\n", Exit: debugger.ExitNormal}
	for _, vs := range values {
		st := debugger.State{Kind: debugger.KindLine, Src: "    pass", Shown: schemas.Locals{}}
		for i, v := range vs {
			st.Shown = append(st.Shown, schemas.Var{Name: "v" + string(rune('0'+i)), Value: v})
		}
		st.Locals = append(schemas.Locals{}, st.Shown...)
		t.Steps = append(t.Steps, debugger.Step{State: st, Action: debugger.StepOver})
	}
	if ret != "" {
		t.Steps = append(t.Steps, debugger.Step{State: debugger.State{Kind: debugger.KindReturn, Src: "    pass", Value: &ret},
			Action: debugger.StepOver})
	}
	return t
}

// shownValues lists the rendered values of t in order.
func shownValues(t debugger.Trajectory) []string {
	var out []string
	renderedValues(t, func(v string) { out = append(out, v) })
	return out
}

func TestRenumber(t *testing.T) {
	tests := []struct {
		name string
		in   [][]string
		ret  string
		want []string
	}{
		{"hex(3) stays", [][]string{{"'0x3'", "0x3", "Flags(0x3)"}}, "", []string{"'0x3'", "0x3", "Flags(0x3)"}},
		{"a row from the middle of a trace starts at 0x1",
			[][]string{{"<P object at 0x7>"}, {"<P object at 0x7>", "<function g at 0x9>"}}, "<P object at 0x8>",
			[]string{"<P object at 0x1>", "<P object at 0x1>", "<function g at 0x2>", "<P object at 0x3>"}},
		{"a raw address in a string", [][]string{{"'0x7feaeae115c0'"}}, "",
			[]string{"'<address 0x1>'"}},
		{"the same address twice, with other case", [][]string{{"'0x7feaeae115c0'", "['0x7FEAEAE115C0', '0x55d0c0ffee00']"}}, "",
			[]string{"'<address 0x1>'", "['<address 0x1>', '<address 0x2>']"}},
		{"a repr in a string reads like the repr", [][]string{{"<P object at 0x2>", "'<P object at 0x7feaeae115c0>'"}}, "",
			[]string{"<P object at 0x1>", "'<P object at 0x2>'"}},
		{"tracer and raw share the numbering", [][]string{{"'0x55d0c0ffee00'", "<generator object g at 0x5>"}}, "0x55d0c0ffee00",
			[]string{"'<address 0x1>'", "<generator object g at 0x2>", "<address 0x1>"}},
		{"nested reprs", [][]string{{"<bound method P.m of <P object at 0x4>>", "[<P object at 0x4>, <Q object at 0x3>]"}}, "",
			[]string{"<bound method P.m of <P object at 0x1>>", "[<P object at 0x1>, <Q object at 0x2>]"}},
		{"32-bit constants and long numbers stay",
			[][]string{{"'0xdeadbeef'", "'0xffffffff'", "'0x12345678901234567'", "'a0x7feaeae115c0'", "'0x7feaeae115c0g'"}}, "",
			[]string{"'0xdeadbeef'", "'0xffffffff'", "'0x12345678901234567'", "'a0x7feaeae115c0'", "'0x7feaeae115c0g'"}},
		{"not a tracer ordinal", [][]string{{"'meet at 0x03'", "'at 0x3'", "<P at 0xABC>", "' at 0x123456'", "' at 0x3_'"}}, "",
			[]string{"'meet at 0x03'", "'at 0x3'", "<P at 0xABC>", "' at 0x123456'", "' at 0x3_'"}},
		{"ordinals past 0x9 are hex", [][]string{{"<A object at 0x1f>", "<B object at 0xa>"}}, "",
			[]string{"<A object at 0x1>", "<B object at 0x2>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := valuesTrajectory(tc.ret, tc.in...)
			before := shownValues(in)
			got := Renumber(in)
			if g := shownValues(got); strings.Join(g, "|") != strings.Join(tc.want, "|") {
				t.Errorf("renumbered\n%q\nwant\n%q", g, tc.want)
			}
			if b := shownValues(in); strings.Join(b, "|") != strings.Join(before, "|") {
				t.Errorf("the input changed: %q", b)
			}
			again := Renumber(got)
			if a := shownValues(again); strings.Join(a, "|") != strings.Join(shownValues(got), "|") {
				t.Errorf("not idempotent: %q", a)
			}
			if trajectoryGap(got) {
				t.Errorf("gap in %q", shownValues(got))
			}
			text, err := tokenize.Render(got)
			if err != nil {
				t.Fatal(err)
			}
			if gap, err := PlaceholderGap(text); err != nil || gap {
				t.Errorf("PlaceholderGap(text) = %v, %v", gap, err)
			}
		})
	}
}

// TestRenumberLocals checks that the unrendered locals use the rendered values' ordinals and come
// after them, so that LOCALS diffs still compare like with like.
func TestRenumberLocals(t *testing.T) {
	tr := valuesTrajectory("", []string{"<P object at 0x9>"})
	tr.Steps[0].State.Locals = schemas.Locals{{Name: "hidden", Value: "<Q object at 0x4>"}, {Name: "v0", Value: "<P object at 0x9>"}}
	got := Renumber(tr)
	if l := got.Steps[0].State.Locals; l[0].Value != "<Q object at 0x2>" || l[1].Value != "<P object at 0x1>" {
		t.Errorf("locals %v", l)
	}
	if tr.Steps[0].State.Locals[0].Value != "<Q object at 0x4>" {
		t.Error("the input's locals changed")
	}
}

func TestRowsFromOneTraceStartAt0x1(t *testing.T) {
	// Two rows sampled from the same trace: one from its start, one from its middle.
	early := Renumber(valuesTrajectory("", []string{"<P object at 0x1>"}, []string{"<P object at 0x2>"}))
	late := Renumber(valuesTrajectory("", []string{"<P object at 0x2>"}, []string{"<P object at 0x5>"}))
	for _, tr := range []debugger.Trajectory{early, late} {
		if v := shownValues(tr); v[0] != "<P object at 0x1>" || v[1] != "<P object at 0x2>" {
			t.Errorf("values %q", v)
		}
	}
}

func TestPlaceholderGapDetects(t *testing.T) {
	for _, tc := range []struct {
		values []string
		gap    bool
	}{
		{[]string{"<P object at 0x1>", "<P object at 0x2>", "<P object at 0x1>"}, false},
		{[]string{"<P object at 0x2>"}, true},
		{[]string{"<P object at 0x1>", "'<address 0x3>'"}, true},
		{[]string{"'0x7feaeae115c0'"}, true},
		{[]string{"'0x3'", "<P object at 0x1>"}, false},
		{nil, false},
	} {
		tr := valuesTrajectory("", tc.values)
		text, err := tokenize.Render(tr)
		if err != nil {
			t.Fatal(err)
		}
		if gap, err := PlaceholderGap(text); err != nil || gap != tc.gap {
			t.Errorf("%q: gap %v (%v), want %v", tc.values, gap, err, tc.gap)
		}
	}
	// The CODE context and SRC lines are not values.
	tr := valuesTrajectory("", []string{"<P object at 0x1>"})
	tr.Code = "def f():\n    # look at 0x7\n    pass\n"
	tr.Steps[0].State.Src = "    s = 'at 0x7feaeae115c0'"
	text, err := tokenize.Render(Renumber(tr))
	if err != nil {
		t.Fatal(err)
	}
	if gap, err := PlaceholderGap(text); err != nil || gap || !strings.Contains(text, "look at 0x7") ||
		!strings.Contains(text, "'at 0x7feaeae115c0'") {
		t.Errorf("gap %v (%v) in %q", gap, err, text)
	}
}

func TestNoisy(t *testing.T) {
	tests := []struct {
		value string
		noisy bool
	}{
		{"<P object (repr raised ValueError)>", true},
		{"[1, <P object (repr raised KeyError)>]", true},
		{"<P object (repr timed out)>", true},
		{"<P object (repr returned int)>", true},
		{"<E object (str raised TypeError)>", true},
		{"<E object (str timed out)>", true},
		{"'(repr raised'", false},
		{"<nondeterministic>", true},
		{"'<nondeterministic>'", false},
		{"1732780000.123", true},
		{"1732780000", true},
		{"-1732780000.5", false},
		{"1000000000", false},          // 10**9
		{"1000000007", false},          // 10**9+7
		{"2147483647", false},          // 2**31-1
		{"1073741824", false},          // 2**30
		{"1000000000.0", false},        // 1e9
		{"1234567890", false},          // typed in
		{"9876543210", false},          // typed in, above 2.2e9 anyway
		{"1111111111", false},          // typed in
		{"1111111111111111", false},    // typed in, hash-sized
		{"1234567890123", false},       // typed in, hash-sized
		{"999999999.5", false},         // below 2001
		{"2200000000.5", false},        // 2039 on
		{"[1732780000.123]", false},    // not a whole value
		{"-3074457345618258602", true}, // a hash
		{"140234567890123", true},      // an id()
		{"1732780000123456789", true},  // time.time_ns()
		{"1099511627776", false},       // 2**40
		{"1099511627775", false},       // 2**40-1: below the bound too
		{"9223372036854775807", false}, // sys.maxsize
		{"1000000000000", false},       // 10**12: below 2**40
		{"1000000000000000009", false}, // 10**18+9
		{"2305843009213693951", false}, // 2**61-1
		{"1099511627777", true},
		{"18446744073709551617", false}, // above 2**64
		{"12345", false},
		{"'1732780000'", false},
		{"1e+16", false},
		{"", false},
		{"-", false},
		{".5", false},
	}
	for _, tc := range tests {
		if got := Noisy(tc.value); got != tc.noisy {
			t.Errorf("Noisy(%q) = %v, want %v", tc.value, got, tc.noisy)
		}
	}
}

func TestNoisyValuesCountsEachValueOnce(t *testing.T) {
	tr := valuesTrajectory("<P object (repr raised ValueError)>",
		[]string{"<P object (repr raised ValueError)>", "1732780000.5"},
		[]string{"<P object (repr raised ValueError)>", "1732780000.5", "3"},
		[]string{"<nondeterministic>"})
	if n := NoisyValues(tr); n != 3 {
		t.Errorf("NoisyValues = %d, want 3", n)
	}
	if n := NoisyValues(valuesTrajectory("None", []string{"1", "'0x3'"})); n != 0 {
		t.Errorf("NoisyValues of a clean row = %d", n)
	}
}

// FuzzRenumber checks that the recogniser never panics, that renumbering is idempotent and leaves
// no gap, and that a value without "0x" is kept as it is.
func FuzzRenumber(f *testing.F) {
	for _, s := range []string{"<P object at 0x7>", "'0x7feaeae115c0'", "'0x3'", "<address 0x2>", " at 0x", "0x",
		"x", "<bound method P.m of <P object at 0x4>>", "' at 0X7FEAEAE115C0'", "<address <address 0x9>>", "0x0x0x7feaeae115c0"} {
		f.Add(s, "<Q object at 0x2>")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		tr := valuesTrajectory(b, []string{a, b}, []string{b})
		once := Renumber(tr)
		twice := Renumber(once)
		if x, y := shownValues(once), shownValues(twice); strings.Join(x, "\x00") != strings.Join(y, "\x00") {
			t.Fatalf("not idempotent: %q then %q", x, y)
		}
		if trajectoryGap(once) {
			t.Fatalf("gap after renumbering: %q", shownValues(once))
		}
		if !strings.ContainsAny(a, "xX") && shownValues(once)[0] != a {
			t.Fatalf("%q changed to %q", a, shownValues(once)[0])
		}
		_ = Noisy(a)
	})
}
