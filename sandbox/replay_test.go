package sandbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

func replayStops(res *sandbox.Result) string {
	var b strings.Builder
	for _, e := range res.Events {
		fmt.Fprintf(&b, "%s %s:%d d%d f%d %q %v", e.Event, e.Func, e.Lineno, e.Depth, e.Frame, e.Src, e.Locals)
		if e.Value != nil {
			fmt.Fprintf(&b, " -> %s", *e.Value)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "end %s %s", res.Status, res.Value)
	return b.String()
}

// TestReplayPaperExample replays the grammar page's worked example on bdb: every stop is the
// example's next state.
func TestReplayPaperExample(t *testing.T) {
	sb := shared(t)
	code := "def sq(x):\n    y = x * x\n    return y\n"
	wrapper := "def main():\n    a = sq(3)\n    b = a + 1\n    return b\n"
	res, err := sb.Replay(context.Background(), sandbox.ReplayRequest{Code: code, Call: "sq(3)", Wrapper: wrapper,
		Actions: [][2]string{{"step_into", ""}, {"step_into", ""}, {"step_over", ""}, {"step_return", ""},
			{"step_over", ""}, {"breakpoint", "    return b"}, {"continue", ""}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `call main:1 d0 f1 "def main():" []
line main:2 d0 f1 "    a = sq(3)" []
call sq:1 d1 f2 "def sq(x):" [{x 3}]
line sq:2 d1 f2 "    y = x * x" [{x 3}]
return sq:3 d1 f2 "    return y" [{x 3} {y 9}] -> 9
line main:3 d0 f1 "    b = a + 1" [{a 9}]
line main:4 d0 f1 "    return b" [{a 9} {b 10}]
end ok 10`
	if got := replayStops(res); got != want {
		t.Errorf("replay stops:\n%s\nwant:\n%s", got, want)
	}
	if res.Status != schemas.StatusOK {
		t.Errorf("status %s (%s)", res.Status, res.Detail)
	}
}
