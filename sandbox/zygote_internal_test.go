package sandbox

import (
	"context"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/schemas"
)

// TestTracerSourceNotAnArgument checks that the tracer's size is not bounded by the kernel's bound
// on one argument (MAX_ARG_STRLEN, 128 KiB): a tracer 200 KiB longer than ours starts its
// sandboxes and traces, on each backend.
func TestTracerSourceNotAnArgument(t *testing.T) {
	if len(tracerBootstrap) > 1024 || strings.Contains(tracerBootstrap, "def ") {
		t.Fatalf("the -c program is the tracer itself: %.80q", tracerBootstrap)
	}
	saved := tracerSource
	tracerSource += "\n" + strings.Repeat("# padding: a tracer past MAX_ARG_STRLEN\n", 200<<10/40)
	t.Cleanup(func() { tracerSource = saved })
	for _, backend := range Backends() {
		t.Run(backend, func(t *testing.T) {
			sb, err := New(context.Background(), Config{Backend: backend})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			res, err := sb.Run(context.Background(), Request{Code: "def f(x):\n    return x + 1\n", Call: "f(1)"})
			if err != nil || res.Status != schemas.StatusOK || res.Value != "2" {
				t.Fatalf("run: %v %+v", err, res)
			}
		})
	}
}
