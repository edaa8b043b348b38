package rows_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/internal/rowtest"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// placeholderItem is a function-level item whose trace numbers its addresses from 0x7, as the
// trace of a call made after six other objects were rendered would: f keeps two objects, a string
// holding a raw address and a hash.
func placeholderItem() debugger.Item {
	code := "class P:\n    pass\n\ndef f():\n    a = P()\n    b = P()\n    s = hex(id(a))\n    h = hash(s)\n    return a\n"
	ev := func(kind string, line int, src string, locals ...string) schemas.Event {
		e := schemas.Event{Event: kind, Frame: 1, Func: "f", File: "<string>", Lineno: line, Src: src, Locals: schemas.Locals{}}
		for i := 0; i+1 < len(locals); i += 2 {
			e.Locals = append(e.Locals, schemas.Var{Name: locals[i], Value: locals[i+1]})
		}
		return e
	}
	a, b, s, h := "<P object at 0x7>", "<P object at 0x9>", "'0x7feaeae115c0'", "-3074457345618258602"
	ret := ev("return", 9, "    return a", "a", a, "b", b, "s", s, "h", h)
	ret.Value = &a
	events := []schemas.Event{
		ev("call", 4, "def f():"),
		ev("line", 5, "    a = P()"),
		ev("line", 6, "    b = P()", "a", a),
		ev("line", 7, "    s = hex(id(a))", "a", a, "b", b),
		ev("line", 8, "    h = hash(s)", "a", a, "b", b, "s", s),
		ev("line", 9, "    return a", "a", a, "b", b, "s", s, "h", h),
		ret,
	}
	return debugger.Item{Code: code, Call: "f()", Events: events, Status: schemas.StatusOK,
		Blocks: []schemas.Block{{File: "<string>", Start: 1, End: 2}, {File: "<string>", Start: 4, End: 9}}}
}

// TestRowPlaceholdersFrom0x1 builds rows from a trace whose first placeholder is 0x7: every row's
// text numbers its placeholders from 0x1, the raw address in the string is scrubbed, the hash is
// counted as a noisy value, and the same trajectory gives the same bytes.
func TestRowPlaceholdersFrom0x1(t *testing.T) {
	it := placeholderItem()
	opts := rows.Options{Tokenizer: tokenize.Bytes(), CreatedAt: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)}
	src := rows.Source{Level: "function", Path: "test.jsonl", QualName: "f", SourceID: "p"}
	ord := regexp.MustCompile(`0x[0-9a-f]+`)
	for _, dir := range []debugger.Direction{debugger.Forward, debugger.Inverse} {
		tree, code, err := it.Tree(dir)
		if err != nil {
			t.Fatal(err)
		}
		for seed := uint64(0); seed < 4; seed++ {
			row, err := rows.Build(src, tree, code, it.Events, debugger.StepIntoPolicy(), seed, opts)
			if err != nil {
				t.Fatal(err)
			}
			values := row.Text[strings.Index(row.Text, tokenize.FrameSep):]
			if strings.Contains(values, "0x7feaeae115c0") || strings.Contains(values, "at 0x7>") || strings.Contains(values, "at 0x9>") {
				t.Errorf("%s seed %d: per-trace ordinals or a raw address left:\n%s", dir, seed, values)
			}
			if first := ord.FindString(values); first != "0x1" {
				t.Errorf("%s seed %d: first placeholder %q, want 0x1:\n%s", dir, seed, first, values)
			}
			if strings.Contains(values, "<P object at 0x2>") != strings.Contains(values, "b") && dir == debugger.Forward {
				t.Errorf("%s seed %d: b is not 0x2:\n%s", dir, seed, values)
			}
			if row.PlaceholderGap {
				t.Errorf("%s seed %d: placeholder gap", dir, seed)
			}
			wantNoisy := int32(0)
			if strings.Contains(values, "-3074457345618258602") {
				wantNoisy = 1
			}
			if row.NoisyValues != wantNoisy {
				t.Errorf("%s seed %d: %d noisy values, want %d", dir, seed, row.NoisyValues, wantNoisy)
			}
			text, err := tokenize.Bytes().Decode(row.InputIDs)
			if err != nil || text != row.Text || len(row.LossMask) != len(row.InputIDs) {
				t.Fatalf("input_ids do not encode the text (%v)", err)
			}
			again, err := rows.Build(src, tree, code, it.Events, debugger.StepIntoPolicy(), seed, opts)
			if err != nil || again.Text != row.Text || again.ID != row.ID {
				t.Errorf("%s seed %d: not deterministic (%v)", dir, seed, err)
			}
		}
	}
	// The forward row under step_into shows every state: the string's address becomes the marked
	// placeholder of a third address.
	tree, code, _ := it.Tree(debugger.Forward)
	row, err := rows.Build(src, tree, code, it.Events, debugger.StepIntoPolicy(), 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<P object at 0x1>", "<P object at 0x2>", "'<address 0x3>'"} {
		if !strings.Contains(row.Text, want) {
			t.Errorf("no %s in\n%s", want, row.Text)
		}
	}
	if row.NoisyValues != 1 {
		t.Errorf("%d noisy values, want 1 (the hash)", row.NoisyValues)
	}
}

// TestRowResampledRenumbered: a row re-sampled to fit the token budget is renumbered too.
func TestRowResampledRenumbered(t *testing.T) {
	it := placeholderItem()
	tree, code, err := it.Tree(debugger.Forward)
	if err != nil {
		t.Fatal(err)
	}
	opts := rows.Options{Tokenizer: tokenize.Bytes()}
	src := rows.Source{Level: "function"}
	full, err := rows.Build(src, tree, code, it.Events, debugger.StepIntoPolicy(), 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxTokens = int(full.NumTokens) - 1
	row, err := rows.Build(src, tree, code, it.Events, debugger.StepIntoPolicy(), 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	if row.NumTokens > full.NumTokens-1 || strings.Contains(row.Text, "at 0x7") || row.PlaceholderGap {
		t.Errorf("re-sampled row (%d tokens):\n%s", row.NumTokens, row.Text)
	}
}

// TestRealTraceRowValues traces, in the real sandbox, a function whose trace numbers six objects
// before the one it returns, keeps a raw address in a string and reads the clock: the inverse rows,
// which start at the return, showed `<P object at 0x7>` first; every row now numbers its
// placeholders from 0x1, holds no raw address, and counts the clock reading as noisy.
func TestRealTraceRowValues(t *testing.T) {
	if testing.Short() {
		t.Skip("traces in the sandbox: long integration test; run without -short")
	}
	code := "import time\n\nclass P:\n    def __init__(self, v):\n        self.v = v\n\ndef g():\n    xs = [P(i) for i in range(6)]\n    return len(xs)\n\n" +
		"def f():\n    n = g()\n    a = P(n)\n    s = hex(id(a))\n    t = time.time()\n    return a\n"
	it := rowtest.Item(t, code, "f()")
	raw := regexp.MustCompile(`0x[0-9a-f]{9,16}`)
	ord := regexp.MustCompile(`0x[0-9a-f]+`)
	opts := rows.Options{Tokenizer: tokenize.Bytes()}
	sawLate, scrubbed, noisy := false, 0, 0
	for _, dir := range []debugger.Direction{debugger.Forward, debugger.Inverse} {
		tree, cc, err := it.Tree(dir)
		if err != nil {
			t.Fatal(err)
		}
		for seed := uint64(0); seed < 8; seed++ {
			pol := debugger.PaperPolicy()
			if seed%2 == 1 {
				pol = debugger.StepIntoPolicy()
			}
			before, err := debugger.Sample(tree, cc, pol, seed, nil)
			if err != nil {
				t.Fatal(err)
			}
			old, err := tokenize.Render(before)
			if err != nil {
				t.Fatal(err)
			}
			if first := ord.FindString(old[strings.Index(old, tokenize.FrameSep):]); first != "" && first != "0x1" {
				sawLate = true
			}
			row, err := rows.Build(rows.Source{Level: "function"}, tree, cc, it.Events, pol, seed, opts)
			if err != nil {
				t.Fatal(err)
			}
			values := row.Text[strings.Index(row.Text, tokenize.FrameSep):]
			if first := ord.FindString(values); first != "" && first != "0x1" {
				t.Errorf("%s seed %d: first placeholder %s:\n%s", dir, seed, first, values)
			}
			if raw.MatchString(values) || row.PlaceholderGap {
				t.Errorf("%s seed %d: raw address or gap (%v):\n%s", dir, seed, row.PlaceholderGap, values)
			}
			if strings.Contains(values, `"s": "'<address 0x`) {
				scrubbed++
			}
			if row.NoisyValues > 0 {
				noisy++
			}
			if shows := strings.Contains(values, `"t": "1`); shows != (row.NoisyValues > 0) {
				t.Errorf("%s seed %d: %d noisy values, shows the clock: %v\n%s", dir, seed, row.NoisyValues, shows, values)
			}
		}
	}
	if !sawLate || scrubbed == 0 || noisy == 0 {
		t.Errorf("the fixture does not show every case: a row that started past 0x1 %v, %d with the address scrubbed, %d noisy",
			sawLate, scrubbed, noisy)
	}
}
