package workflows

import (
	"errors"
	"reflect"
	"strings"

	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// FailureConverter is the SDK's default failure converter, except that each layer of wrapping is
// said once. The default keeps err.Error() as the message, which already ends with the wrapped
// error's text, and also converts the wrapped error as the cause; the error made back from the
// failure prints message and cause, so every layer repeated the text below it (a checkout error
// reached the user four times in one line). Here a chain of plain Go errors becomes one failure
// (its message the whole chain, its type the outer error's, as before); a chain holding one of the
// SDK's errors keeps its causes, but each message drops the text its cause already says. Types and
// retry semantics are unchanged.
// Clients and workers must both use it (client.Options.FailureConverter).
func FailureConverter() converter.FailureConverter {
	return trimmedFailures{temporal.GetDefaultFailureConverter()}
}

type trimmedFailures struct{ converter.FailureConverter }

func (c trimmedFailures) ErrorToFailure(err error) *failurepb.Failure {
	f := c.FailureConverter.ErrorToFailure(err)
	if f != nil && !hasTemporalError(err) {
		// Plain Go errors all the way down: one failure whose message is the whole chain.
		f.Cause = nil
		return f
	}
	for e, fl := err, f; e != nil && fl != nil; e, fl = errors.Unwrap(e), fl.GetCause() {
		inner := errors.Unwrap(e)
		if inner == nil || fl.GetCause() == nil {
			break
		}
		if rest, ok := strings.CutSuffix(fl.Message, ": "+inner.Error()); ok {
			fl.Message = rest
		}
	}
	return f
}

// hasTemporalError reports whether err or an error it wraps is one of the SDK's.
func hasTemporalError(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		t := reflect.TypeOf(e)
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if strings.HasPrefix(t.PkgPath(), "go.temporal.io/") {
			return true
		}
	}
	return false
}
