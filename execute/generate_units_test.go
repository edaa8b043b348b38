package execute

import (
	"reflect"
	"testing"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestUnitsRedefined: a name defined twice (if/else branches, as six's PY2/PY3 functions) is
// reported twice, the def the module does not run with skip "redefined": that def is counted as
// redefined whether it comes first or second, the other is the unit; a unit's name reported
// twice is still a forged report.
func TestUnitsRedefined(t *testing.T) {
	code := "def b(s):\n    return s\n\ndef b(s):\n    return s.encode()\n\ndef u(s):\n    return s\n\ndef u(s):\n    return s\n\ndef w(s):\n    return s\n"
	g := newTestGeneration(t.TempDir(), &fakeGen{}, schemas.InputsSpec{})
	g.y = &schemas.GenYield{}
	units := g.units(genModule{rel: "m.py", name: "m"}, code, []sandbox.FoundFunction{
		{QualName: "b", Kind: "function", Line: 1, EndLine: 2, Skip: "redefined"}, // the dead def first
		{QualName: "b", Kind: "function", Line: 4, EndLine: 5},
		{QualName: "u", Kind: "function", Line: 7, EndLine: 8},
		{QualName: "u", Kind: "function", Line: 10, EndLine: 11, Skip: "redefined"}, // the dead def second
		{QualName: "w", Kind: "function", Line: 13, EndLine: 14},
		{QualName: "w", Kind: "function", Line: 13, EndLine: 14}, // a unit twice: forged
	})
	var got []string
	for _, u := range units {
		got = append(got, u.fn.QualName)
	}
	if want := []string{"b", "u", "w"}; !reflect.DeepEqual(got, want) {
		t.Errorf("units %v, want %v", got, want)
	}
	if want := map[string]int64{"redefined": 2, "invalid_report": 1}; g.y.Found != 6 || g.y.Units != 3 || !reflect.DeepEqual(g.y.Losses, want) {
		t.Errorf("found %d, units %d, losses %v; want 6, 3, %v", g.y.Found, g.y.Units, g.y.Losses, want)
	}
}
