package rows

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/internal/addrs"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// Learnable values (issue 28, part 2): what build does to a trajectory's values before it is
// rendered, so that a row holds no memory address a model could not predict and numbers its
// address placeholders from 0x1 whatever part of the trace it was sampled from.
//
// # Address placeholders
//
// The tracer replaces the object addresses inside a rendered value by per-trace ordinals 0x1, 0x2,
// ... (docs/tracer-protocol.md, "Value rendering"), but only inside the reprs it guards (objects
// of user and library types): a string that holds an address (s = hex(id(x)) shows
// '0x7feaeae115c0', s = repr(obj) '<P object at 0x7feaeae115c0>') keeps it, and a row sampled
// from the middle of a trace starts at whatever ordinal the trace had reached (0x17). Within the
// values of a row's states (never its CODE context, SRC lines or breakpoint lines), Renumber
// recognises three forms, scanning each value left to right:
//
//   - a raw address: "0x" (or "0X") followed by 9 to 16 hex digits, neither preceded nor followed by
//     a letter, digit or underscore. CPython's heap and mmap addresses on 64-bit Linux are 0x55...
//     and 0x7f... with 12 digits; 16 digits are a whole 64-bit word. Nine digits or more leaves
//     32-bit constants (0xdeadbeef, 0xffffffff, CRCs, colours 0xff0000) alone: they are not
//     addresses of a 64-bit process's heap, and hex literals of that size are common in code;
//   - a tracer placeholder: "0x" and 1 to 5 lowercase hex digits without a leading zero (as the
//     tracer writes its ordinals, "0x%zx"), right after " at " (`<P object at 0x3>`, `<function f
//     at 0x2>`, `<generator object g at 0x5>`, `<bound method P.m of <P object at 0x1>>`) and not
//     followed by a letter, digit or underscore. Only there: a genuine small hex elsewhere (hex(3)
//     is '0x3', a user repr `Flags(0x3)`) is a value like any other and is never renumbered. Five
//     digits allow a million distinct addresses in one trace, far more than a trace's event limit
//     leaves room for. (An ordinal the tracer put elsewhere, because a user repr printed an address
//     without " at " before it, keeps its per-trace number: it is not told apart from a small hex);
//   - a marked placeholder: "<address 0xN>", N as for a tracer placeholder: what a raw address
//     that does not follow " at " becomes.
//
// Every placeholder and raw address gets a row ordinal in order of first appearance in the rendered
// row (state by state, within a state in the order tokenize.Render writes its values: the return
// or exception value, or LOCALS in order); the same tracer ordinal, and the same raw address
// (whatever the case of its digits), always gets the same row ordinal within the row. A tracer
// placeholder and a marked one share their numbers (both are ordinals; a renumbered row reads
// back the same), a raw address has its own key. A placeholder keeps its form with the row
// ordinal; a raw address becomes "0xN" after " at " (so the string repr(obj) reads like obj's
// shown value) and "<address 0xN>" elsewhere (so that it is told apart from hex(3) in the row's
// text). The frame's full locals (State.Locals, not rendered) are renumbered with the same map
// after the rendered values, so that LOCALS diffs still compare like with like. Distinct
// ordinals and addresses get distinct row ordinals, so a value that differed from the previous
// state's still differs (the diffs the sampler computed stay right; the one exception, two raw
// addresses that differ only in the case of their digits, is the same address), and renumbering
// a renumbered row changes nothing.
//
// # Noisy values
//
// NoisyValues counts the values a model cannot learn from the code, each distinct rendered value
// string once per row (a value shown again in a later state, or by two variables, counts once):
//
//   - a repr or str that failed: a value containing "(repr raised ", "(repr timed out)", "(repr
//     returned ", "(str raised " or "(str timed out)" (the tracer's guarded() forms, anywhere in the
//     value: an element of a list counts);
//   - "<nondeterministic>", the whole value: the placeholder of a value that differed between two
//     runs of the same test (issue 28, part 1);
//   - an epoch time: a whole value that is an int or float in [1e9, 2.2e9) (September 2001 to
//     2039), unless it is near a round number, a power of two or one less, or typed in (see
//     roundish): 10**9+7, 2**31-1 and 1234567890 are constants, 1732780000.123 is time.time();
//   - a hash-sized integer: a whole int value n with 2**40 <= |n| < 2**64, unless n is a power of
//     two, 2**k-1 or near a round number. hash() of a str or bytes is spread over 61 bits (below
//     2**40 with probability 2**-21), id() is an address (0x55..., 0x7f...: above 2**46),
//     time.time_ns() is about 2**61, random 64-bit draws are mostly above 2**40; computed
//     quantities of that size are rarely anything but powers of two, masks (2**k-1, sys.maxsize)
//     or round constants (10**12, 10**18+9). Above 2**64 an int is a bignum computation, not a
//     hash.

const (
	// markOpen and markClose wrap a marked placeholder (addrs.MarkOpen, addrs.MarkClose).
	markOpen  = addrs.MarkOpen
	markClose = addrs.MarkClose
	// Nondeterministic is the whole value of a value that differed between two runs of the
	// same test (execute's re-execution writes it).
	Nondeterministic = schemas.NondeterministicValue
)

// reprFailures are the parts of a value that say its repr or str failed (tracer.c guarded()).
var reprFailures = []string{"(repr raised ", "(repr timed out)", "(repr returned ", "(str raised ", "(str timed out)"}

// renumberer maps the addresses and placeholders of one row to row ordinals.
type renumberer struct {
	ords map[string]int
}

// value returns s with its addresses and placeholders replaced by row ordinals (see the notes
// above).
func (r *renumberer) value(s string) string {
	found := addrs.Find(s)
	if len(found) == 0 {
		return s
	}
	if r.ords == nil {
		r.ords = map[string]int{}
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, p := range found {
		n, ok := r.ords[p.Key]
		if !ok {
			n = len(r.ords) + 1
			r.ords[p.Key] = n
		}
		b.WriteString(s[last:p.Start])
		if !p.AfterAt {
			b.WriteString(markOpen)
		}
		b.WriteString("0x")
		b.WriteString(strconv.FormatInt(int64(n), 16))
		if !p.AfterAt {
			b.WriteString(markClose)
		}
		last = p.End
	}
	b.WriteString(s[last:])
	return b.String()
}

// Renumber returns t with the addresses in its states' values scrubbed and every address
// placeholder numbered from 0x1 in order of first appearance in the rendered row (see the notes
// above). t itself, which may share its locals with the tree it was sampled from, is not changed
// (a state's locals are copied when a value changes, shared otherwise);
// the CODE context, SRC lines and actions are kept as they are. The same t always gives the same
// result.
func Renumber(t debugger.Trajectory) debugger.Trajectory {
	var r renumberer
	out := t
	out.Steps = make([]debugger.Step, len(t.Steps))
	copy(out.Steps, t.Steps)
	for i := range out.Steps {
		st := &out.Steps[i].State
		if st.Value != nil {
			v := r.value(*st.Value)
			st.Value = &v
		}
		st.Shown = renumberLocals(&r, st.Shown)
	}
	// The locals not rendered, after every rendered value: they never take a rendered ordinal.
	for i := range out.Steps {
		st := &out.Steps[i].State
		st.Locals = renumberLocals(&r, st.Locals)
	}
	return out
}

// renumberLocals returns l with its values renumbered by r: l itself when no value changes (it
// is never written to: it may be the tree's), else a copy.
func renumberLocals(r *renumberer, l schemas.Locals) schemas.Locals {
	var out schemas.Locals
	for i, v := range l {
		nv := r.value(v.Value)
		if nv == v.Value && out == nil {
			continue
		}
		if out == nil {
			out = append(make(schemas.Locals, 0, len(l)), l[:i]...)
		}
		out = append(out, schemas.Var{Name: v.Name, Value: nv})
	}
	if out == nil {
		return l
	}
	return out
}

// renderedValues calls fn with every value t renders, in the order tokenize.Render writes them.
func renderedValues(t debugger.Trajectory, fn func(string)) {
	for _, s := range t.Steps {
		if s.State.Kind.HasArgs() {
			if s.State.Value != nil {
				fn(*s.State.Value)
			}
			continue
		}
		for _, v := range s.State.Shown {
			fn(v.Value)
		}
	}
}

// NoisyValues counts the distinct rendered values of t that a model cannot learn from the code
// (see the notes above).
func NoisyValues(t debugger.Trajectory) int {
	var seen map[string]bool
	renderedValues(t, func(v string) {
		if !seen[v] && Noisy(v) {
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[v] = true
		}
	})
	return len(seen)
}

// Noisy reports whether the rendered value v is one a model cannot learn from the code: a failed
// repr or str, a value that differed between two runs, an epoch time or a hash-sized integer
// (see the notes above).
func Noisy(v string) bool {
	if v == Nondeterministic {
		return true
	}
	if strings.Contains(v, "(repr ") || strings.Contains(v, "(str ") {
		for _, f := range reprFailures {
			if strings.Contains(v, f) {
				return true
			}
		}
	}
	return epochTime(v) || hashSized(v)
}

// plainNumber reports whether v is an int or float literal as repr writes one below 1e16: an
// optional minus, digits, optionally a point and digits.
func plainNumber(v string) (isInt, ok bool) {
	s := strings.TrimPrefix(v, "-")
	point := strings.IndexByte(s, '.')
	digits := func(d string) bool {
		for i := 0; i < len(d); i++ {
			if d[i] < '0' || d[i] > '9' {
				return false
			}
		}
		return d != ""
	}
	if point < 0 {
		return true, digits(s)
	}
	return false, digits(s[:point]) && digits(s[point+1:])
}

// roundish reports whether n is within 100 of a multiple of 10**6 (10**9+7, 2*10**9, 10**18+9), a
// power of two or one less, or typed in (its decimal digits all the same, or counting up or down
// by one: 1111111111, 1234567890, 9876543210): constants of code, not readings of a clock or a
// hash.
func roundish(n uint64) bool {
	if m := n % 1_000_000; m <= 100 || m >= 1_000_000-100 {
		return true
	}
	if n&(n-1) == 0 || (n+1)&n == 0 {
		return true
	}
	d := strconv.FormatUint(n, 10)
	same, up, down := true, true, true
	for i := 1; i < len(d); i++ {
		a, b := int(d[i-1]-'0'), int(d[i]-'0')
		same = same && a == b
		up = up && b == (a+1)%10
		down = down && b == (a+9)%10
	}
	return same || up || down
}

// epochTime reports whether v is a whole int or float value in [1e9, 2.2e9) that is not roundish:
// seconds since 1970 between 2001 and 2039.
func epochTime(v string) bool {
	isInt, ok := plainNumber(v)
	if !ok || strings.HasPrefix(v, "-") || len(v) < 10 {
		return false
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || x < 1e9 || x >= 2.2e9 {
		return false
	}
	if isInt || x == float64(uint64(x)) {
		return !roundish(uint64(x))
	}
	return true
}

// hashSized reports whether v is a whole int value n with 2**40 <= |n| < 2**64 that is not
// roundish.
func hashSized(v string) bool {
	isInt, ok := plainNumber(v)
	if !ok || !isInt {
		return false
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(v, "-"), 10, 64)
	if err != nil || n < 1<<40 {
		return false
	}
	return !roundish(n)
}

// PlaceholderGap reports whether the address placeholders of a row's text, read from its values
// (never its CODE context, SRC lines or breakpoint lines) with the recogniser Renumber uses, do not
// run 0x1, 0x2, ... in order of first appearance. A row Renumber built never has a gap: this is a
// check. The error is one of parsing the text.
func PlaceholderGap(text string) (bool, error) {
	t, err := tokenize.Parse(text)
	if err != nil {
		return false, fmt.Errorf("rows: placeholder check: %w", err)
	}
	return trajectoryGap(t), nil
}

// trajectoryGap is PlaceholderGap for a trajectory's rendered values. A raw address left in a
// value is a gap too.
func trajectoryGap(t debugger.Trajectory) bool {
	var seen map[string]bool
	gap := false
	renderedValues(t, func(v string) {
		for _, p := range addrs.Find(v) {
			if seen[p.Key] {
				continue
			}
			if p.Key != "o"+strconv.FormatInt(int64(len(seen)+1), 16) {
				gap = true
			}
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[p.Key] = true
		}
	})
	return gap
}
