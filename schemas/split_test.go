package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestSplitSpecValidate checks the split's names and shares, and forward_start, through
// ParseSpec: good ones pass, bad ones give an error naming the field.
func TestSplitSpecValidate(t *testing.T) {
	tests := []struct {
		yaml, err string
	}{
		{"split: {validation: 0.05}", ""},
		{"split: {validation: 0.1, test: 0.1}", ""},
		{"split: {train: 0.9, validation: 0.1}", ""},
		{"split: {validation: 1}", ""},
		{"split: {}", ""},
		{"forward_start: main", ""},
		{"forward_start: function", ""},
		{"split: {validation: 0}", "split.validation: 0 is not a share"},
		{"split: {validation: -0.1}", "split.validation: -0.1 is not a share"},
		{"split: {validation: 1.5}", "split.validation: 1.5 is not a share"},
		{"split: {validation: .nan}", "split.validation: NaN is not a share"},
		{"split: {validation: 0.6, test: 0.6}", "the shares sum to 1.2, more than 1"},
		{"split: {train: 0.5, validation: 0.1}", "with train given they must sum to 1"},
		{`split: {"val idation": 0.1}`, `"val idation" is not a split name`},
		{`split: {"": 0.1}`, `"" is not a split name`},
		{"split: {validation: x}", `split.validation: "x" is not a number`},
		{"split: [validation]", "split: a list is not a mapping"},
		{"forward_start: wrapper", `forward_start: "wrapper" is not function or main`},
	}
	for _, tc := range tests {
		_, err := ParseSpec([]byte("sources: [{kind: examples}]\n" + tc.yaml + "\n"))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.yaml, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one with %q", tc.yaml, err, tc.err)
		}
	}
}

// ids returns n function ids as crawl.FunctionID makes them (hex of 16 bytes).
func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		sum := sha256.Sum256([]byte(fmt.Sprintf("def f%d(x):\n\treturn x", i)))
		out[i] = hex.EncodeToString(sum[:16])
	}
	return out
}

// TestSplitAssign checks that a function's split depends on its id alone (the same every time,
// whatever else is in the spec), that the shares are honoured within a few standard deviations
// over many ids, and that an empty split puts everything in train.
func TestSplitAssign(t *testing.T) {
	all := ids(20000)
	if got := (SplitSpec{}).Assign(all[0]); got != TrainSplit {
		t.Errorf("empty split: %q", got)
	}
	specs := []SplitSpec{
		{"validation": 0.05},
		{"validation": 0.1, "test": 0.2},
		{"train": 0.7, "validation": 0.3},
	}
	for _, s := range specs {
		counts := map[string]int{}
		for _, id := range all {
			a := s.Assign(id)
			if b := s.Assign(id); a != b {
				t.Fatalf("%v: %s assigned %s then %s", s, id, a, b)
			}
			// A spec that differs in what does not matter (a copy, another seed elsewhere) agrees.
			c := SplitSpec{}
			for k, v := range s {
				c[k] = v
			}
			if c.Assign(id) != a {
				t.Fatalf("%v: a copy assigns %s otherwise", s, id)
			}
			counts[a]++
		}
		rest := 1.0
		for name, f := range s {
			if name != TrainSplit {
				rest -= f
			}
		}
		for _, name := range s.Names() {
			want := s[name]
			if name == TrainSplit {
				want = rest
			}
			got := float64(counts[name]) / float64(len(all))
			sd := math.Sqrt(want * (1 - want) / float64(len(all)))
			if math.Abs(got-want) > 5*sd+1e-9 {
				t.Errorf("%v: %s holds %.4f of the functions, want %.4f ± %.4f", s, name, got, want, 5*sd)
			}
		}
		if len(counts) != len(s.Names()) {
			t.Errorf("%v: splits %v, want %v", s, counts, s.Names())
		}
	}
	// The points are pinned: a change of the hash would move functions between splits.
	if p := SplitPoint("00000000000000000000000000000000"); p != 0.060587235554097063 {
		t.Errorf("SplitPoint moved: %.17g", p)
	}
}
