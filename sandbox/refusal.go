package sandbox

import "strings"

// RefusalPrefix starts the message of every exception the sandbox raises when it refuses what the
// traced code asked for (the audit hook of sandbox/native/ndtrace_native.c, and the replay's hook in
// sandbox/tracer/replay.py): a .pyc opened outside the read-only roots ("ndtrace: bytecode (.pyc)
// is loaded only from read-only directories"), a module or extension module the sandbox does not
// provide, an audit hook or a SQLite extension.
const RefusalPrefix = "ndtrace: "

// SandboxRefused reports whether the test run failed (outcome failed or error) on a refusal of the
// sandbox: its first exception's message starts with RefusalPrefix, or holds it after a wrapper's
// text (pytest's "ImportError while importing test module ...", an exception re-raised with the
// original's message in its own). Such a test may pass outside the sandbox: the failure is the
// sandbox's, not the code's. The message is the run's to write, so this only ever decides how a
// failure is counted, never what is trusted.
func (r *TestResult) SandboxRefused() bool {
	if r == nil || r.Result == nil || (r.Outcome != OutcomeFailed && r.Outcome != OutcomeError) {
		return false
	}
	return strings.Contains(r.Result.ExcMessage, RefusalPrefix)
}
