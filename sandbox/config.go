package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/ndtrace/ndtrace/schemas"
)

// Limits bounds one traced run. A zero field takes its default from DefaultLimits.
type Limits struct {
	// WallTime is the wall-clock limit of one run (status timeout).
	WallTime time.Duration
	// CPUTime is the CPU-time limit of one run, rounded up to whole seconds (status timeout).
	CPUTime time.Duration
	// AddressSpace is RLIMIT_AS in bytes, per process (status memory when the code runs out).
	// Without a cgroup it may be lowered so that the item's processes x AddressSpace fit Memory.
	AddressSpace int64
	// Memory bounds the item as a whole (all its processes, its /tmp and /dev/shm, kernel memory):
	// cgroup v2 memory.max where the worker has a delegated cgroup v2, cgroup v1
	// memory.limit_in_bytes where it may write the v1 memory hierarchy (see Config.Cgroup).
	// Without either, the item's processes x AddressSpace is lowered to within Memory (fewer
	// processes first, then less address space each: docs/sandbox.md, "Resources"), and its
	// tmpfs mounts (TmpBytes + ShmBytes) come on top.
	Memory int64
	// Processes is RLIMIT_NPROC for the run's uid: how many processes (and threads) the item may
	// have at once, its keeper and init included. Without a cgroup it may be lowered to fit
	// Memory (see Memory).
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
	Memory:       2 << 30,
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
	if over.Memory > 0 {
		base.Memory = over.Memory
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
	// Paths must be absolute and outside /tmp (the sandbox's private /tmp would hide them); the
	// sandbox's code uid must be able to read them (world-readable files and directories).
	ReadOnly []string
	// Binds are host folders mounted read-only at fixed paths inside the sandbox (a repository's
	// checkout at the same path on every worker). A ReadOnly or PythonPath entry, a test
	// request's Dir and import roots below a bind's host folder are seen below its path: the
	// sandbox's interpreter never sees the host folder, and the file names of the events it
	// reports are the inside ones.
	Binds []Bind
	// PythonPath lists directories of installed packages (a site-packages directory, such as
	// VenvSitePackages returns) that every run can import. Each is mounted read-only like ReadOnly
	// and added to sys.path with site.addsitedir (so its .pth files count: editable installs
	// work), after the standard library and before the interpreter's own site/dist-packages. A
	// directory of the form .../lib/pythonX.Y/site-packages must match the interpreter's X.Y, or
	// New fails. Test runs never trace code under these directories.
	PythonPath []string
	// TmpBytes is the size of each item's private writable /tmp (a fresh tmpfs per item).
	// Default 64 MiB.
	TmpBytes int64
	// WritableBytes is how much a test run (RunTest, CollectTests) may write into its view of the
	// checkout: every test item sees the checkout writable, through a copy-on-write view private
	// to it (an overlayfs whose upper layer is a fresh tmpfs of this size, or a copy of the
	// checkout in a tmpfs of the checkout's size plus this), so that tests that create files next
	// to the code run as they do natively, while nothing they write reaches the worker's checkout
	// or the next test. Default 64 MiB. ReadOnlyCheckouts turns the views off.
	WritableBytes     int64
	ReadOnlyCheckouts bool
	// FixedAddresses starts the interpreter with address-space randomisation off
	// (personality(ADDR_NO_RANDOMIZE), for this sandbox's processes only), so that a run's object
	// ids (id(), hex(id(x)), default hashes) repeat from one sandbox to the next, as they repeat
	// between two runs in one sandbox (every item is a fork of the same interpreter). It takes
	// away a defence in depth against memory-corruption exploits of the interpreter: the other
	// layers (namespaces, seccomp, landlock, no native modules but the standard library's) stay.
	// Alone it is not enough for ids to repeat between sandboxes (TestFixedAddresses): an item's
	// heap is the zygote's, shaped by what it served before. The pipeline sets it for the
	// sandboxes of a reexecuted repository (docs/spec.md, "Reproducible repository data"), whose
	// two sandboxes then serve the same items in every run of a spec.
	FixedAddresses bool
	// ShmBytes is the size of each item's /dev/shm (a fresh tmpfs per item) and the most System V
	// shared memory an item may hold at a time. Default 16 MiB.
	ShmBytes int64
	// Limits are the default limits of every run; a Request may override them.
	Limits Limits
	// Cgroup selects per-item resource accounting: "auto" (the default) uses cgroup v2 when the
	// worker has a delegated group with the memory and pids controllers (Kubernetes with writable
	// cgroups, a systemd unit with Delegate=yes): every item gets memory.max (Limits.Memory) and
	// pids.max (Limits.Processes plus the item's two supervising processes) as a whole; where
	// there is none but memory is bound to a cgroup v1 hierarchy the worker may write (a root
	// worker on a v1 or hybrid host), cgroup v1 memory.limit_in_bytes and pids.max the same way.
	// "off" uses only the rlimits, their product lowered to Limits.Memory. docs/sandbox.md says
	// what each bounds.
	Cgroup string
	// RecycleAfter restarts the sandbox after this many runs, so state a run could leave in the
	// interpreter never accumulates. Default 5000: items never run in the zygote, whose memory
	// stays the same from its 10th item to its 4000th (TestZygoteMemoryFlat), and a restart costs
	// about 100 ms of CPU (compiling the tracer module), 5% of a small item's at every 500.
	RecycleAfter int
	// StartTimeout bounds the start of the sandbox. Default 20 s.
	StartTimeout time.Duration
}

// VenvSitePackages returns the site-packages directory of the virtualenv venv
// (venv/lib/pythonX.Y/site-packages, X.Y from its pyvenv.cfg), for Config.PythonPath. New fails if
// X.Y is not the version of the sandbox's interpreter: compiled extensions and the standard library
// would not match.
func VenvSitePackages(venv string) (string, error) {
	abs, err := filepath.Abs(venv)
	if err != nil {
		return "", fmt.Errorf("sandbox: virtualenv %s: %w", venv, err)
	}
	cfg, err := os.ReadFile(filepath.Join(abs, "pyvenv.cfg"))
	if err != nil {
		return "", fmt.Errorf("sandbox: %s is not a virtualenv: %w", venv, err)
	}
	var xy string
	for _, line := range strings.Split(string(cfg), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if k = strings.TrimSpace(k); k == "version" || k == "version_info" {
			parts := strings.Split(strings.TrimSpace(v), ".")
			if len(parts) >= 2 {
				xy = parts[0] + "." + parts[1]
			}
		}
	}
	if xy == "" {
		// No version in pyvenv.cfg: the one lib/pythonX.Y there is.
		matches, _ := filepath.Glob(filepath.Join(abs, "lib", "python*", "site-packages"))
		if len(matches) != 1 {
			return "", fmt.Errorf("sandbox: virtualenv %s: no version in pyvenv.cfg and %d lib/python*/site-packages directories", venv, len(matches))
		}
		return matches[0], nil
	}
	sp := filepath.Join(abs, "lib", "python"+xy, "site-packages")
	if fi, err := os.Stat(sp); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("sandbox: virtualenv %s (Python %s) has no %s", venv, xy, sp)
	}
	return sp, nil
}

// sitePackagesVersion returns X.Y when dir is a .../pythonX.Y/site-packages (or dist-packages)
// directory, else "".
func sitePackagesVersion(dir string) string {
	base := filepath.Base(dir)
	if base != "site-packages" && base != "dist-packages" {
		return ""
	}
	m := pythonDirRE.FindStringSubmatch(filepath.Base(filepath.Dir(dir)))
	if m == nil {
		return ""
	}
	return m[1]
}

var pythonDirRE = regexp.MustCompile(`^python(\d+\.\d+)$`)

// Values of Config.Cgroup.
const (
	CgroupAuto = "auto"
	CgroupOff  = "off"
)

// validate checks the paths of a configuration (defaults filled in).
func (c Config) validate() error {
	if c.Cgroup != CgroupAuto && c.Cgroup != CgroupOff {
		return fmt.Errorf("sandbox: cgroup %q: want %q or %q", c.Cgroup, CgroupAuto, CgroupOff)
	}
	if err := c.checkBinds(); err != nil {
		return err
	}
	for _, p := range c.ReadOnly {
		if err := checkHostPath("read-only path", p); err != nil {
			return err
		}
	}
	for _, p := range c.PythonPath {
		if err := checkHostPath("python path", p); err != nil {
			return err
		}
		if fi, err := os.Stat(p); err != nil {
			return fmt.Errorf("sandbox: python path: %w", err)
		} else if !fi.IsDir() {
			return fmt.Errorf("sandbox: python path %s is not a directory", p)
		}
	}
	return nil
}

// checkHostPath rejects a path that cannot be mounted at the same place in the sandbox.
func checkHostPath(what, p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("sandbox: %s %q is not absolute", what, p)
	}
	if c := filepath.Clean(p); c == "/tmp" || strings.HasPrefix(c, "/tmp/") {
		return fmt.Errorf("sandbox: %s %s is under /tmp, which the sandbox replaces with its private tmpfs: put checkouts and environments elsewhere", what, p)
	}
	return nil
}

// mounts is every extra path the sandbox mounts: ReadOnly and PythonPath, without duplicates and
// without paths inside another one (already visible).
func (c Config) mounts() []string {
	var all []string
	for _, p := range append(append([]string{}, c.ReadOnly...), c.PythonPath...) {
		all = append(all, filepath.Clean(p))
	}
	var out []string
	for i, p := range all {
		covered := false
		for j, q := range all {
			if (q == p && j < i) || (q != p && within(p, q)) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	return out
}

// pycPythonPath is the PythonPath directories bytecode may load from: those that are not inside
// a ReadOnly path (a checkout, whose files the repository wrote).
func (c Config) pycPythonPath() []string {
	var out []string
	for _, p := range c.PythonPath {
		p = filepath.Clean(p)
		inside := false
		for _, r := range c.ReadOnly {
			inside = inside || within(p, filepath.Clean(r))
		}
		if !inside {
			out = append(out, p)
		}
	}
	return out
}

// within reports whether path p is dir or inside it (both clean and absolute).
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

func (c Config) withDefaults() Config {
	if c.Backend == "" {
		c.Backend = "namespaces"
	}
	if c.Cgroup == "" {
		c.Cgroup = CgroupAuto
	}
	if c.Python == "" {
		c.Python = "/usr/bin/python3"
	}
	if c.TmpBytes <= 0 {
		c.TmpBytes = 64 << 20
	}
	if c.ShmBytes <= 0 {
		c.ShmBytes = 16 << 20
	}
	if c.WritableBytes <= 0 {
		c.WritableBytes = 64 << 20
	}
	c.Limits = c.Limits.withDefaults()
	if c.RecycleAfter <= 0 {
		c.RecycleAfter = 5000
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
	// Module, when set, runs a function of a repository where it lives: the module of that dotted
	// name is imported (importlib.import_module, its package's relative imports working and its
	// __spec__ set) with Dir (the checkout, absolute) and Paths (its import roots, absolute) first
	// on sys.path as a test run has them, and Call is evaluated in a namespace holding the
	// module's names. Filename is then the module's file (absolute, inside Dir), the one file
	// traced (Targets is ignored), and Code its text; its events are checked against the file
	// itself. The module must be that file: another one of the name is an ImportError.
	Module string
	Dir    string
	Paths  []string
	// Events, when set, is given each event as it is decoded, in order, and Result.Events stays
	// empty, so the caller never holds the whole decoded trace (a long one can be kept in a
	// compact form as it arrives). ev is valid during the call only (its Locals slice may be
	// shared with later events: copy what you keep, never modify it). The events it gets are the
	// ones Result.Events would hold: from sealed chunks only, so a run that ends as tampered or
	// past a limit has given some events; the Result's Status says what they are worth.
	Events func(ev *schemas.Event)
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
	// Functions holds the source of every function with a traced call event, in first-call
	// order (test runs only; see schemas.FuncSource). The CODE context of repository-level
	// trajectories is built from it.
	Functions []schemas.FuncSource
	// Value is the rendered return value of the call (status ok) or the rendered exception. When
	// the call returned an iterator (Consume), it is the rendered list of the values taken.
	Value string
	// Consume is set when a function-level call returned a generator or another iterator and the
	// tracer consumed it (schemas.Consume); the events from Consume.Start on are the consumption.
	Consume *schemas.Consume
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

// ConsumeValues is how many values the tracer takes from a generator or another iterator that a
// function-level call returned (CONSUME_VALUES in sandbox/native/tracer.c; every consume record
// says it again as its limit).
const ConsumeValues = 8

// KeptOutput is how many bytes of stdout and of stderr a Result keeps.
const KeptOutput = 64 << 10

// majorMinor returns "X.Y" of a version "X.Y.Z".
func majorMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}
