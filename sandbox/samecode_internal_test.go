package sandbox

import (
	"os/exec"
	"strings"
	"testing"
)

// sameCodeDriver loads the tracer's definitions (its files joined, without main) and runs the
// fake-code check's comparison (the same_code helper the C tracer calls) on pairs of code
// objects, printing one line per case: its name and the verdict.
const sameCodeDriver = `
import sys, types
src = sys.stdin.read()
m = types.ModuleType("tracer")
exec(compile(src.split("\nif __name__")[0], "tracer.py", "exec"), m.__dict__)
same_code = m._helpers({"code": "", "filename": "main.py"})[4]

def fs(order):
    # An equal frozenset iterating in the given order: 1, 9 and 17 collide in a table of 8.
    s = frozenset(order)
    assert list(s) == list(order), (list(s), order)
    return s

def code_with(consts):
    def f():
        return None
    return f.__code__.replace(co_consts=consts)

base = code_with((None, fs((1, 9, 17)), "x"))
cases = {
    "same": code_with((None, fs((1, 9, 17)), "x")),
    "reordered": code_with((None, fs((9, 17, 1)), "x")),
    "nested": code_with((None, (fs((17, 1, 9)), ), "x")),
    "other_element": code_with((None, fs((1, 9, 25)), "x")),
    "other_type": code_with((None, frozenset((1.0, 9, 17)), "x")),
    "fewer": code_with((None, frozenset((1, 9)), "x")),
    "other_const": code_with((None, fs((1, 9, 17)), "y")),
}
nested_base = code_with((None, (fs((1, 9, 17)), ), "x"))
for name, c in cases.items():
    b = nested_base if name == "nested" else base
    print(name, same_code(c, [b]))
# NaNs and signed zeros inside sets: each NaN matches a NaN, -0.0 never 0.0.
nan = float("nan")
a = code_with((frozenset((nan, 0.0, (1, nan))),))
b = code_with((frozenset(((1, float("nan")), 0.0, float("nan"))),))
print("nan", same_code(a, [b]))
print("signed_zero", same_code(code_with((frozenset((-0.0, 2)),)), [code_with((frozenset((2, 0.0)),))]))
# A big set in another order (the check stays linear in its size).
big = ["s%d" % i for i in range(20000)]
print("big", same_code(code_with((frozenset(big),)), [code_with((frozenset(reversed(big)),))]))
`

// TestSameCodeSets (issue 29): the fake-code check compares frozenset (and set) constants as
// sets, recursively inside tuples, so that two compiles of one file whose equal frozensets
// iterate in different orders pass; a code object with another constant is still caught.
func TestSameCodeSets(t *testing.T) {
	cmd := exec.Command("/usr/bin/python3", "-I", "-B", "-c", sameCodeDriver)
	cmd.Stdin = strings.NewReader(tracerSource())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := "same True\nreordered True\nnested True\nother_element False\nother_type False\nfewer False\n" +
		"other_const False\nnan True\nsigned_zero False\nbig True\n"
	if string(out) != want {
		t.Errorf("verdicts:\n%s\nwant:\n%s", out, want)
	}
}
