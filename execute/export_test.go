package execute

import (
	"context"

	"github.com/ndtrace/ndtrace/sandbox"
)

// GenSandbox is genSandbox, for the external tests' fakes.
type GenSandbox = genSandbox

// SetGenStart makes trc start the sandbox of generation runs with start (tests).
func SetGenStart(trc *Tracer, start func(ctx context.Context, cfg sandbox.Config) (GenSandbox, error)) {
	trc.genStart = start
}
