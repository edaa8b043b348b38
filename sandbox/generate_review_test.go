package sandbox_test

import (
	"context"
	"testing"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestGenerateSourceLabels (outside review): an input whose required arguments were generated is
// labelled by how they were made (typed, fuzzed), not "example" because the function has a
// default left as it is: "example" is a call written in the module or the function's defaults
// alone. The data's input_source said example for 17 of 108 rows of the genlibs fixtures, 13 of
// them generated values (variance([1.5, 0.0, -2.25]), Config().get(1, 'abc')).
func TestGenerateSourceLabels(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the sandbox; run without -short")
	}
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	code := "from typing import List\n\n\ndef scale(xs: List[int], k: int = 2) -> List[int]:\n" +
		"    if not xs:\n        return []\n    return [x * k for x in xs]\n\n\n" +
		"def pad(s, width=4):\n    return s.ljust(width)\n\n\n" +
		"def twice(n=3):\n    return n * 2\n\n\n" +
		"def main():\n    return pad('ab', 3)\n"
	for _, tc := range []struct {
		fn      string
		allowed map[string]bool
	}{
		{"scale", map[string]bool{"typed": true}},
		{"pad", map[string]bool{"fuzzed": true, "example": true}}, // example: pad('ab', 3) in main
		{"twice", map[string]bool{"example": true, "typed": true, "fuzzed": true}},
	} {
		g, err := sb.Generate(ctx, sandbox.GenerateRequest{Code: code, Filename: "m.py", Function: tc.fn})
		if err != nil {
			t.Fatal(err)
		}
		if g.Status != schemas.StatusOK || len(g.Inputs) == 0 {
			t.Fatalf("%s: status %s (%s), %d inputs", tc.fn, g.Status, g.Detail, len(g.Inputs))
		}
		for _, in := range g.Inputs {
			if !tc.allowed[in.Source] {
				t.Errorf("%s: input %s labelled %s", tc.fn, in.Call, in.Source)
			}
			if tc.fn == "pad" && in.Source == "example" && in.Call != "pad('ab', 3)" {
				t.Errorf("pad: generated input %s labelled example", in.Call)
			}
		}
	}
}
