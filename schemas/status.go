package schemas

// Status says how a traced run ended. Every way a run can end has its own status.
type Status string

// The statuses of a traced run.
const (
	// StatusOK: the entry call returned.
	StatusOK Status = "ok"
	// StatusException: an exception escaped the entry call (or the module body).
	StatusException Status = "exception"
	// StatusTimeout: the wall-clock or CPU-time limit was reached.
	StatusTimeout Status = "timeout"
	// StatusMemory: the address-space limit was reached (an uncaught MemoryError).
	StatusMemory Status = "memory"
	// StatusOutputLimit: the code wrote more than the stdout/stderr byte limit.
	StatusOutputLimit Status = "output_limit"
	// StatusEventLimit: the trace reached its event or byte limit; the run was stopped there.
	StatusEventLimit Status = "event_limit"
	// StatusKilled: the run ended by a signal or exit that no limit explains, or was cancelled.
	StatusKilled Status = "killed"
	// StatusSandboxError: the sandbox failed (could not start, or its supervisor died).
	StatusSandboxError Status = "sandbox_error"
	// StatusInvalid: nothing ran because the code or the call expression does not compile.
	StatusInvalid Status = "invalid"
	// StatusTampered: the traced code tried to reach the tracer or its channel (its state, its
	// frames, sys.settrace, gc or ctypes introspection, the events descriptor), or its trace is
	// inconsistent with its source. Nothing of the run is data.
	StatusTampered Status = "tampered"
)

// Statuses lists every status, in documentation order.
var Statuses = []Status{StatusOK, StatusException, StatusTimeout, StatusMemory, StatusOutputLimit,
	StatusEventLimit, StatusKilled, StatusSandboxError, StatusInvalid, StatusTampered}

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	for _, k := range Statuses {
		if s == k {
			return true
		}
	}
	return false
}

// Truncated reports whether the run was cut off by a limit before the program ended on its own,
// which the debugger renders as the exit_never exit state.
func (s Status) Truncated() bool {
	return s == StatusTimeout || s == StatusEventLimit || s == StatusOutputLimit
}
