package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/ndtrace/ndtrace/internal/userdirs"
	"github.com/ndtrace/ndtrace/sandbox"
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
		{"namespaces", "the sandbox cannot start: the kernel refused to create its namespaces (fork/exec /proc/self/exe: operation not permitted). ndtrace runs code only in a sandbox",
			explain(fmt.Errorf("sandbox: %w", fmt.Errorf("sandbox: %w", &sandbox.NamespaceError{Backend: "namespaces", Err: &os.PathError{Op: "fork/exec", Path: "/proc/self/exe", Err: syscall.EPERM}})))},
		{"unexplained", "boom", explain(errors.New("boom"))},
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

// TestSDKHandlerStopNoise checks the Temporal SDK's logger: the record of a task cut by an orderly
// stop is a debug record, every other record passes as it was.
func TestSDKHandlerStopNoise(t *testing.T) {
	for _, tc := range []struct {
		name  string
		level slog.Level
		log   func(l *slog.Logger)
		want  string
	}{
		{"stop at info", slog.LevelInfo, func(l *slog.Logger) {
			l.Info("Task processing failed with error", "Error", errors.New("worker stopping"))
		}, ""},
		{"stop at debug", slog.LevelDebug, func(l *slog.Logger) {
			l.Info("Task processing failed with error", "Error", errors.New("worker stopping"))
		}, "level=DEBUG msg=\"Task processing failed with error\" Error=\"worker stopping\"\n"},
		{"other failure", slog.LevelInfo, func(l *slog.Logger) {
			l.Info("Task processing failed with error", "Error", errors.New("boom"))
		}, "level=INFO msg=\"Task processing failed with error\" Error=boom\n"},
		{"other record", slog.LevelInfo, func(l *slog.Logger) { l.With("a", 1).Info("Started Worker") }, "level=INFO msg=\"Started Worker\" a=1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}})
			tc.log(slog.New(sdkHandler{h}))
			if buf.String() != tc.want {
				t.Errorf("logged %q, want %q", buf.String(), tc.want)
			}
		})
	}
}
