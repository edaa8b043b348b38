package sandbox

import (
	"fmt"
	"time"

	"github.com/ndtrace/ndtrace/schemas"
)

// Limits bounds one traced run. A zero field takes its default from DefaultLimits.
type Limits struct {
	// WallTime is the wall-clock limit of one run (status timeout).
	WallTime time.Duration
	// CPUTime is the CPU-time limit of one run, rounded up to whole seconds (status timeout).
	CPUTime time.Duration
	// AddressSpace is RLIMIT_AS in bytes (status memory when the code runs out).
	AddressSpace int64
	// Processes is RLIMIT_NPROC for the run's uid: how many processes the code may have at once.
	Processes int
	// FileSize is RLIMIT_FSIZE: the largest file the code may write, in bytes.
	FileSize int64
	// OpenFiles is RLIMIT_NOFILE.
	OpenFiles int
	// OutputBytes caps stdout plus stderr (status output_limit).
	OutputBytes int64
	// TraceEvents caps the number of trace events (status event_limit).
	TraceEvents int
	// TraceBytes caps the trace's size on the wire (status event_limit).
	TraceBytes int64
	// ValueChars caps every rendered value; longer ones are cut and end in "...".
	ValueChars int
	// ReprTimeout bounds one call of a user-defined __repr__; a slower one renders as a placeholder.
	ReprTimeout time.Duration
}

// DefaultLimits are the limits used for every zero field of a Limits.
var DefaultLimits = Limits{
	WallTime:     10 * time.Second,
	CPUTime:      10 * time.Second,
	AddressSpace: 1 << 30,
	Processes:    64,
	FileSize:     64 << 20,
	OpenFiles:    256,
	OutputBytes:  1 << 20,
	TraceEvents:  100_000,
	TraceBytes:   64 << 20,
	ValueChars:   1000,
	ReprTimeout:  100 * time.Millisecond,
}

// withDefaults returns l with every zero (or negative) field set from DefaultLimits.
func (l Limits) withDefaults() Limits { return mergeLimits(DefaultLimits, l) }

// mergeLimits returns base with every positive field of over taking its place.
func mergeLimits(base, over Limits) Limits {
	if over.WallTime > 0 {
		base.WallTime = over.WallTime
	}
	if over.CPUTime > 0 {
		base.CPUTime = over.CPUTime
	}
	if over.AddressSpace > 0 {
		base.AddressSpace = over.AddressSpace
	}
	if over.Processes > 0 {
		base.Processes = over.Processes
	}
	if over.FileSize > 0 {
		base.FileSize = over.FileSize
	}
	if over.OpenFiles > 0 {
		base.OpenFiles = over.OpenFiles
	}
	if over.OutputBytes > 0 {
		base.OutputBytes = over.OutputBytes
	}
	if over.TraceEvents > 0 {
		base.TraceEvents = over.TraceEvents
	}
	if over.TraceBytes > 0 {
		base.TraceBytes = over.TraceBytes
	}
	if over.ValueChars > 0 {
		base.ValueChars = over.ValueChars
	}
	if over.ReprTimeout > 0 {
		base.ReprTimeout = over.ReprTimeout
	}
	return base
}

// Config configures a Sandbox.
type Config struct {
	// Backend isolates the interpreter: "namespaces" (the default: Linux namespaces set up by this
	// binary, no dependency) or "bwrap" (bubblewrap). See Backends.
	Backend string
	// Python is the interpreter's path on the host; it must be readable by an unprivileged uid
	// (Debian's /usr/bin/python3 is; a pyenv build under /root is not). Default /usr/bin/python3.
	Python string
	// ReadOnly lists extra host paths mounted read-only at the same path inside the sandbox (a
	// virtualenv, a repository checkout). /usr and the interpreter's installation are always there.
	ReadOnly []string
	// TmpBytes is the size of the private writable /tmp. Default 64 MiB.
	TmpBytes int64
	// Limits are the default limits of every run; a Request may override them.
	Limits Limits
	// RecycleAfter restarts the sandbox after this many runs, so state a run could leave in the
	// interpreter never accumulates. Default 500.
	RecycleAfter int
	// StartTimeout bounds the start of the sandbox. Default 20 s.
	StartTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Backend == "" {
		c.Backend = "namespaces"
	}
	if c.Python == "" {
		c.Python = "/usr/bin/python3"
	}
	if c.TmpBytes <= 0 {
		c.TmpBytes = 64 << 20
	}
	c.Limits = c.Limits.withDefaults()
	if c.RecycleAfter <= 0 {
		c.RecycleAfter = 500
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 20 * time.Second
	}
	return c
}

// Request is one function-level run: execute Code as a module, then trace the evaluation of Call.
type Request struct {
	// Code is the module source.
	Code string
	// Filename is the name Code is compiled under (and what events report as their file).
	// Default "main.py".
	Filename string
	// Call is the expression to trace, evaluated in the module's namespace, such as "f(5)".
	Call string
	// Targets selects the code that is traced: an entry ending in "/" is a path prefix, any other
	// must equal the code object's file name. Default: just Filename.
	Targets []string
	// Seed seeds Python's random module.
	Seed int64
	// Limits overrides the sandbox's limits field by field (zero fields keep the sandbox's).
	Limits Limits
	// Naive makes the tracer render every local at every event with plain repr: the benchmark
	// baseline, never used for data.
	Naive bool
}

// CallFromInput returns the call expression for a CruxEval-style row: fn applied to input, the
// argument list as written (for example "[1, 2], 3").
func CallFromInput(fn, input string) string {
	return fmt.Sprintf("%s(%s)", fn, input)
}

// Result is the outcome of one run.
type Result struct {
	// Status says how the run ended.
	Status schemas.Status
	// Detail explains a status other than ok in one line.
	Detail string
	// Events is the trace, with full locals at every event.
	Events []schemas.Event
	// Blocks are the top-level statements of the traced file (for the CODE context).
	Blocks []schemas.Block
	// Value is the rendered return value of the call (status ok) or the rendered exception.
	Value string
	// ExcType and ExcMessage describe the exception of status exception, memory or invalid.
	ExcType    string
	ExcMessage string
	// Stdout and Stderr keep the first KeptOutput bytes of each stream; the counts are the totals.
	Stdout, Stderr           []byte
	StdoutBytes, StderrBytes int64
	// TraceBytes is the size of the trace on the wire.
	TraceBytes int64
	// Wall, CPU and MaxRSSKB measure the run's process.
	Wall     time.Duration
	CPU      time.Duration
	MaxRSSKB int64
}

// KeptOutput is how many bytes of stdout and of stderr a Result keeps.
const KeptOutput = 64 << 10
