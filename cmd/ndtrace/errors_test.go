package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/userdirs"
)

func TestReadableErrors(t *testing.T) {
	root := errors.New("user: unknown userid 12345")
	deep := fmt.Errorf("temporal server: %w", fmt.Errorf("could not build arguments for function X: %w", fmt.Errorf("failed to build Y: %w", root)))
	denied := &userdirs.DirError{Path: "/srv/s", Op: "write in", Err: errors.New("permission denied")}
	tests := []struct {
		name, want string
		err        error
	}{
		{"embedded server", "the embedded Temporal server did not start: user: unknown userid 12345 (NDTRACE_LOG=debug", embeddedError(deep)},
		{"folder", "scratch folder /srv/s is not writable by uid ", folderError("scratch", "--scratch", "NDTRACE_SCRATCH", denied)},
		{"other", "scratch folder: boom", folderError("scratch", "--scratch", "NDTRACE_SCRATCH", errors.New("boom"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); !strings.HasPrefix(got, tc.want) || strings.Contains(got, "\n") {
				t.Errorf("%q, want it to start with %q, on one line", got, tc.want)
			}
		})
	}
	if !errors.Is(embeddedError(deep), root) {
		t.Error("the chain is lost")
	}
}
