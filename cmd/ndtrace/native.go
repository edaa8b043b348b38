package main

import (
	"context"
	"fmt"
	"io"

	"github.com/ndtrace/ndtrace/sandbox"
)

// runNativeHelper builds the sandbox's native helper ahead of time, for images without a C
// compiler at run time: build it in the image's build stage and point NDTRACE_NATIVE at it.
func runNativeHelper(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("native-helper", "-o PATH", stderr)
	out := fs.String("o", "", "where to write the helper (a shared object); required")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usagef("-o PATH is required")
	}
	if err := sandbox.BuildNative(ctx, *out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s (set %s=%s on workers)\n", *out, sandbox.NativeEnv, *out)
	return nil
}
