package sandbox_test

import (
	"context"
	"testing"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestRunCalledFromUntracedCode (outside review, NOT FIXED: skipped until the native tracer's
// depth-0 check is changed): a function item whose call expression runs the module's code through
// code that is not traced (a dataclass's generated __init__, compiled from "<string>", calling the
// module's __post_init__; likewise enum's __call__ calling a _missing_) is a "tampered" reject:
// tracer.c's call_event sees a frame at depth 0 whose caller is not the item's call expression.
// (use(2), a @contextmanager resumed by contextlib under a traced frame, is fine: a control.) Every method item of a dataclass with __post_init__ is lost so: the genlibs
// fixtures' Interval lost all 6 of its generated items (Interval.clamp, .contains, .length,
// .overlaps), counted as tampering, a class that means an attack.
func TestRunCalledFromUntracedCode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the sandbox; run without -short")
	}
	t.Skip("known (outside review): tracer.c rejects module frames called from untraced library code as tampering")
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	code := `import contextlib
from dataclasses import dataclass


@dataclass
class Interval:
    lo: int
    hi: int

    def __post_init__(self):
        if self.lo > self.hi:
            raise ValueError("lo > hi")

    def length(self):
        return self.hi - self.lo


@contextlib.contextmanager
def opened(n):
    yield n + 1


def use(n):
    with opened(n) as m:
        return m * 2
`
	for _, call := range []string{"Interval(1, 3).length()", "use(2)"} {
		res, err := sb.Run(ctx, sandbox.Request{Code: code, Filename: "m.py", Call: call})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != schemas.StatusOK {
			t.Errorf("%s: status %s (%s), want ok", call, res.Status, res.Detail)
		}
	}
}
