package workflows

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"go.temporal.io/sdk/temporal"
)

func TestFailureConverterSaysEachLayerOnce(t *testing.T) {
	perm := &fs.PathError{Op: "mkdir", Path: "/var/tmp/s/repo-1", Err: syscall.EACCES}
	checkout := fmt.Errorf("check out tar:x@1: %w", fmt.Errorf("crawl: checkout x: scratch: %w", perm))
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"wrapped path error", checkout, checkout.Error() + " (type: wrapError, retryable: true)"},
		{"application error with its cause in the message",
			temporal.NewNonRetryableApplicationError("tokenizer: "+perm.Error(), "BadInput", perm),
			"tokenizer (type: BadInput, retryable: false): mkdir /var/tmp/s/repo-1 (type: PathError, retryable: true): permission denied (type: Errno, retryable: true)"},
		{"plain", errors.New("boom"), "boom"},
		{"not a suffix", fmt.Errorf("%w (and recording the failure: %v)", perm, errors.New("x")),
			""},
	}
	fc := FailureConverter()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := fc.FailureToError(fc.ErrorToFailure(tc.err)).Error()
			if tc.want != "" && got != tc.want {
				t.Errorf("after a round trip: %q, want %q", got, tc.want)
			}
			if n := strings.Count(got, "permission denied"); n > 1 || (n == 0 && strings.Contains(tc.err.Error(), "permission denied")) {
				t.Errorf("%q says the cause %d times", got, n)
			}
		})
	}
	// The default repeats every layer: the reason for FailureConverter.
	dfc := temporal.GetDefaultFailureConverter()
	if got := dfc.FailureToError(dfc.ErrorToFailure(checkout)).Error(); strings.Count(got, "permission denied") < 3 {
		t.Logf("the default converter no longer repeats layers: %q", got)
	}
	var ae *temporal.ApplicationError
	if err := fc.FailureToError(fc.ErrorToFailure(tests[1].err)); !errors.As(err, &ae) || ae.Type() != "BadInput" || !ae.NonRetryable() {
		t.Errorf("type or retry lost: %v", err)
	}
}
