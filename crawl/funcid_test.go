package crawl

import (
	"strings"
	"testing"
)

// TestFunctionID checks that a function's id is SourceKey's prefix, stable under formatting
// (comments, blank lines, spacing) and different for another function.
func TestFunctionID(t *testing.T) {
	f := "def f(x):\n    # double it\n    return x * 2\n"
	id := FunctionID(f)
	if len(id) != 32 || !strings.HasPrefix(SourceKey(f), id) {
		t.Fatalf("FunctionID %q is not SourceKey's first 16 bytes (%s)", id, SourceKey(f))
	}
	for _, same := range []string{
		"def f(x):\n    return x * 2",
		"def f(x):\n\n        return x  *  2   # twice\n",
	} {
		if got := FunctionID(same); got != id {
			t.Errorf("FunctionID(%q) = %s, want %s", same, got, id)
		}
	}
	for _, other := range []string{"def f(y):\n    return y * 2\n", "def f(x):\n    return x * 3\n"} {
		if FunctionID(other) == id {
			t.Errorf("FunctionID(%q) is f's", other)
		}
	}
}
