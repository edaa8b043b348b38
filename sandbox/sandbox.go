// Package sandbox runs untrusted Python in isolation and traces it.
//
// A Sandbox is one isolated interpreter (the zygote) that forks a fresh, unprivileged, rlimited child
// for every Run, so the cost of building the sandbox and starting Python is paid once per RecycleAfter
// runs rather than per item. The tracer (native/tracer.c, driven by the Python files of tracer/,
// compiled as one module; all embedded) records call, line, return and exception events of the
// target code and streams them, sealed, over a dedicated file descriptor; Run rebuilds them into
// schemas.Event values with full locals.
//
// Isolation is done by a Backend: "namespaces" (default; Linux user, mount, PID, network, IPC, UTS
// and cgroup namespaces built by this binary) or "bwrap" (bubblewrap). Either way the code sees no
// network, a read-only /usr and nothing else of the host but what Config.ReadOnly and
// Config.PythonPath name, a private size-limited /tmp, an empty environment, and runs as an
// unprivileged host uid. If a sandbox cannot be built, New and Run fail: nothing ever runs
// unsandboxed.
//
// Besides function-level runs (Run), a sandbox runs a repository's test suite one test per item:
// CollectTests lists the tests of a checkout mounted with Config.ReadOnly, RunTest runs one of them,
// traced or not, with pytest or unittest (docs/sandbox.md).
package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ndtrace/ndtrace/sandbox/cgroup"
	"github.com/ndtrace/ndtrace/schemas"
)

// Sandbox is one isolated interpreter. Its methods are safe for concurrent use; runs are serialized.
// Use several Sandboxes to trace in parallel.
type Sandbox struct {
	cfg     Config
	in      Config // cfg as the interpreter sees it (its paths below a bind's at the bind's)
	backend Backend

	mu     sync.Mutex
	z      *zygote
	nextID int64
	closed bool
}

// New builds a sandbox and starts its interpreter, so a configuration that cannot work fails here.
func New(ctx context.Context, cfg Config) (*Sandbox, error) {
	cfg = cfg.withDefaults()
	b, err := lookupBackend(cfg.Backend)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(cfg.Python); err != nil {
		return nil, fmt.Errorf("sandbox: python interpreter: %w", err)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Sandbox{cfg: cfg, in: cfg.insideConfig(), backend: b}
	z, err := startZygote(ctx, b, cfg)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	for _, p := range cfg.PythonPath {
		if v := sitePackagesVersion(p); v != "" && v != majorMinor(z.python) {
			z.close()
			return nil, fmt.Errorf("sandbox: python path %s is for Python %s, but the sandbox's interpreter %s is Python %s", p, v, cfg.Python, z.python)
		}
	}
	s.z = z
	return s, nil
}

// Config returns the sandbox's configuration with defaults filled in.
func (s *Sandbox) Config() Config { return s.cfg }

// Python returns the version of the sandbox's interpreter.
func (s *Sandbox) Python() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.z == nil {
		return ""
	}
	return s.z.python
}

// Info describes the isolation a sandbox actually has (it depends on the kernel and on what the
// worker was given).
type Info struct {
	// Python is the version of the sandbox's interpreter.
	Python string
	// Landlock is the Landlock ABI version items are confined with; 0 means the kernel has no
	// Landlock, and items then get no /proc at all (docs/sandbox.md).
	Landlock int
	// Cgroup is the sandbox's cgroup v2 group, or its item group in the cgroup v1 memory
	// hierarchy ("" when items are bounded by rlimits only).
	Cgroup string
	// Memory says how an item's memory is bounded as a whole: MemoryCgroup2, MemoryCgroup1 or
	// MemoryRlimits (processes x address space lowered to within Limits.Memory).
	Memory string
}

// Info returns what isolation the sandbox has.
func (s *Sandbox) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.z == nil {
		return Info{}
	}
	i := Info{Python: s.z.python, Landlock: s.z.landlock, Memory: MemoryRlimits}
	switch s.z.cg.(type) {
	case *cgroup.Sandbox:
		i.Memory = MemoryCgroup2
	case *cgroup.V1Sandbox:
		i.Memory = MemoryCgroup1
	}
	if s.z.cg != nil {
		i.Cgroup = s.z.cg.Dir()
	}
	return i
}

// Close stops the sandbox. Every process it started is gone when Close returns.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.z != nil {
		s.z.close()
		s.z = nil
	}
	return nil
}

// ErrClosed is returned by Run on a closed Sandbox.
var ErrClosed = errors.New("sandbox: closed")

// Run traces req in the sandbox. Whatever the traced code does, Run returns a Result whose Status says
// how it ended; the error is non-nil only when the sandbox itself failed (Status is then
// sandbox_error) or the request is unusable.
func (s *Sandbox) Run(ctx context.Context, req Request) (*Result, error) {
	if strings.TrimSpace(req.Call) == "" {
		return nil, errors.New("sandbox: empty call expression")
	}
	if req.Filename == "" {
		req.Filename = "main.py"
	}
	// A module of a bound folder (Config.Binds) runs under the name it has inside.
	if filepath.IsAbs(req.Filename) {
		req.Filename = s.cfg.insideTargets([]string{req.Filename})[0]
	}
	req.Targets = s.cfg.insideTargets(req.Targets)
	if len(req.Targets) == 0 {
		req.Targets = []string{req.Filename}
	}
	if req.Module != "" {
		req.Dir, req.Paths = s.cfg.inside(req.Dir), s.cfg.insideAll(req.Paths)
		if err := checkModuleRequest(req); err != nil {
			return nil, err
		}
		req.Targets = []string{req.Filename}
	}
	msg := runMsg{runBody: runBody{Code: req.Code, Filename: req.Filename, Call: req.Call,
		Targets: req.Targets, Seed: req.Seed, Naive: req.Naive, PythonPath: s.in.PythonPath,
		Module: req.Module, Paths: modulePaths(req.Module, req.Dir, req.Paths)}, sink: req.Events}
	res, _, err := s.exec(ctx, msg, mergeLimits(s.cfg.Limits, req.Limits))
	return res, err
}

// exec runs one item of any kind: it (re)starts the zygote when needed, runs msg and retires the
// zygote when the run left it unusable. It also returns the trace decoder, for the records of the
// other kinds of item.
func (s *Sandbox) exec(ctx context.Context, msg runMsg, lim Limits) (*Result, *decoder, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, ErrClosed
	}
	if s.z == nil || s.z.runs >= s.cfg.RecycleAfter {
		if s.z != nil {
			s.z.close()
			s.z = nil
		}
		z, err := startZygote(ctx, s.backend, s.cfg)
		if err != nil {
			err = fmt.Errorf("sandbox: %w", err)
			return &Result{Status: schemas.StatusSandboxError, Detail: err.Error()}, newDecoder(nil, decodeLimits{}), err
		}
		s.z = z
	}
	s.nextID++
	msg.ID = s.nextID
	res, dec, healthy, err := s.run(ctx, s.z, msg, lim)
	s.z.runs++
	if !healthy {
		s.z.kill()
		s.z.close()
		s.z = nil
	}
	return res, dec, err
}

// runMsg is one item as the Go side describes it: the header the zygote gets (runHeader: id,
// kind, runner, limits) and the request only the item reads, from its own pipe, with the key that
// seals its events (runBody), so the zygote never holds an item's code or inputs
// (docs/tracer-protocol.md).
type runMsg struct {
	ID     int64
	Kind   string // "" (a call), "collect", "test", "replay" or "generate"
	Runner string
	Limits runLimits
	// Writable is the checkout a test run sees writable (a private view per item; see
	// Config.WritableBytes), WritableBytes what it may write there.
	Writable      string
	WritableBytes int64
	// sink gets the events as they are decoded (Request.Events), instead of Result.Events.
	sink func(*schemas.Event)
	// gen, for a generate run, gets the events pipe's bytes as they are (no trace: a result).
	gen *genOutput
	runBody
}

// runHeader is what the zygote receives for an item.
type runHeader struct {
	Op     string    `json:"op"`
	ID     int64     `json:"id"`
	Kind   string    `json:"kind,omitempty"`
	Runner string    `json:"runner,omitempty"`
	Limits runLimits `json:"limits"`
	// Writable and WritableBytes are runMsg's: the item's init mounts the view before the item
	// exists, so they are the zygote's to know.
	Writable      string `json:"writable,omitempty"`
	WritableBytes int64  `json:"writable_bytes,omitempty"`
}

// runBody is what the item reads from its request pipe: the item and the key that seals its
// events (set by run).
type runBody struct {
	Key        string   `json:"key"`
	Code       string   `json:"code,omitempty"`
	Filename   string   `json:"filename,omitempty"`
	Call       string   `json:"call,omitempty"`
	Targets    []string `json:"targets"`
	Seed       int64    `json:"seed"`
	Clock      int64    `json:"clock,omitempty"`
	Naive      bool     `json:"naive,omitempty"`
	PythonPath []string `json:"pythonpath,omitempty"`
	Dir        string   `json:"dir,omitempty"`
	Test       string   `json:"test,omitempty"`
	Traced     bool     `json:"traced,omitempty"`
	Exclude    []string `json:"exclude,omitempty"`
	Options    string   `json:"options,omitempty"`
	Paths      []string `json:"paths,omitempty"`
	Ignore     []string `json:"ignore,omitempty"`
	// Wrapper and Actions are a replay's (kind "replay", see Replay).
	Wrapper string      `json:"wrapper,omitempty"`
	Actions [][2]string `json:"actions,omitempty"`
	// Entry is a repository replay's entry call (see ReplayTest).
	Entry *ReplayEntry `json:"entry,omitempty"`
	// Module is a call's module, imported from Dir and Paths (Request.Module).
	Module string `json:"module,omitempty"`
	// Function, PerFunction, Attempts, Seeds and BudgetS are a generate run's (Generate).
	Function    string   `json:"function,omitempty"`
	PerFunction int      `json:"per_function,omitempty"`
	Attempts    int      `json:"attempts,omitempty"`
	Seeds       []string `json:"seeds,omitempty"`
	BudgetS     float64  `json:"budget_s,omitempty"`
}

type runLimits struct {
	WallMS        int64 `json:"wall_ms"`
	CPUS          int64 `json:"cpu_s"`
	ASBytes       int64 `json:"as_bytes"`
	NProc         int   `json:"nproc"`
	FsizeBytes    int64 `json:"fsize_bytes"`
	NoFile        int   `json:"nofile"`
	MaxEvents     int   `json:"max_events"`
	MaxTraceBytes int64 `json:"max_trace_bytes"`
	ValueChars    int   `json:"value_chars"`
	ReprMS        int64 `json:"repr_ms"`
}

// v1OOMPoll is how often Go looks for an OOM kill in an item's cgroup v1 group while it runs.
const v1OOMPoll = 50 * time.Millisecond

// run performs one item on z. healthy is false when the zygote must not be used again.
func (s *Sandbox) run(ctx context.Context, z *zygote, msg runMsg, lim Limits) (res *Result, dec *decoder, healthy bool, err error) {
	res = &Result{}
	id := msg.ID
	key := make([]byte, 32)
	_, kerr := rand.Read(key)
	dec = newSinkDecoder(key, decodeLimitsOf(lim), msg.sink)
	if kerr != nil {
		err = fmt.Errorf("sandbox: item key: %w", kerr)
		res.Status, res.Detail = schemas.StatusSandboxError, err.Error()
		return res, dec, true, err
	}
	start := time.Now()
	var pipes [3][2]*os.File // events, stdout, stderr: read, write
	for i := range pipes {
		r, w, perr := os.Pipe()
		if perr != nil {
			for j := 0; j < i; j++ {
				pipes[j][0].Close()
				pipes[j][1].Close()
			}
			err = fmt.Errorf("sandbox: pipe: %w", perr)
			res.Status, res.Detail = schemas.StatusSandboxError, err.Error()
			return res, dec, true, err
		}
		pipes[i] = [2]*os.File{r, w}
		if i == 0 {
			// A larger events pipe lets the tracer write on while Go decodes a chunk. Best effort:
			// the default 64 KiB works, only slower.
			_, _ = unix.FcntlInt(r.Fd(), unix.F_SETPIPE_SZ, eventsPipeSize)
		}
	}
	asBytes, nproc := lim.AddressSpace, lim.Processes
	if z.cg == nil {
		// No cgroup bounds the item as a whole: its processes x address space must fit its
		// memory limit (docs/sandbox.md, "Resources").
		asBytes, nproc = rlimitProduct(lim)
	}
	msg.Limits = runLimits{
		WallMS: lim.WallTime.Milliseconds(), CPUS: int64(math.Ceil(lim.CPUTime.Seconds())),
		ASBytes: asBytes, NProc: nproc, FsizeBytes: lim.FileSize, NoFile: lim.OpenFiles,
		MaxEvents: lim.TraceEvents, MaxTraceBytes: lim.TraceBytes, ValueChars: lim.ValueChars,
		ReprMS: lim.ReprTimeout.Milliseconds(),
	}
	// The request pipe: the item reads its code, inputs and key from it; the zygote only passes
	// the read end along.
	reqR, reqW, perr := os.Pipe()
	if perr != nil {
		for i := range pipes {
			pipes[i][0].Close()
			pipes[i][1].Close()
		}
		err = fmt.Errorf("sandbox: pipe: %w", perr)
		res.Status, res.Detail = schemas.StatusSandboxError, err.Error()
		return res, dec, true, err
	}
	rb := msg.runBody
	rb.Key = hex.EncodeToString(key)
	body, berr := json.Marshal(rb)
	hdr := runHeader{Op: "run", ID: msg.ID, Kind: msg.Kind, Runner: msg.Runner, Limits: msg.Limits,
		Writable: msg.Writable, WritableBytes: msg.WritableBytes}
	oomBefore := int64(-1)
	if z.cg != nil && berr == nil {
		if want := cgroupLimits(lim); want != z.cgLimits {
			if berr = z.cg.SetLimits(want); berr == nil {
				z.cgLimits = want
			}
		}
		_ = z.cg.ResetPeakMemory()
		if n, oerr := z.cg.OOMKills(); oerr == nil {
			oomBefore = n
		}
	}
	sendErr := berr
	if sendErr == nil {
		sendErr = z.send(hdr, reqR, pipes[0][1], pipes[1][1], pipes[2][1])
	}
	reqR.Close()
	for i := range pipes {
		pipes[i][1].Close()
	}
	if sendErr != nil {
		reqW.Close()
		for i := range pipes {
			pipes[i][0].Close()
		}
		err = fmt.Errorf("sandbox: send run: %w: %s", sendErr, z.why())
		res.Status, res.Detail = schemas.StatusSandboxError, err.Error()
		return res, dec, false, err
	}
	go func() {
		// The item reads its request before running anything; if it dies first the write fails
		// and the run's status says why.
		_, _ = reqW.Write(body)
		reqW.Close()
	}()

	// Why Go stopped the item, if it did; the first reason wins.
	var (
		killOnce   sync.Once
		killStatus schemas.Status
		killDetail string
	)
	killItem := func(st schemas.Status, detail string) {
		killOnce.Do(func() {
			killStatus, killDetail = st, detail
			_ = z.send(map[string]any{"op": "kill", "id": id})
		})
	}

	stdout := &capBuffer{max: KeptOutput}
	stderr := &capBuffer{max: KeptOutput}
	var outTotal struct {
		sync.Mutex
		n int64
	}
	countOut := func(n int) {
		outTotal.Lock()
		outTotal.n += int64(n)
		over := outTotal.n > lim.OutputBytes
		outTotal.Unlock()
		if over {
			killItem(schemas.StatusOutputLimit, fmt.Sprintf("stdout and stderr exceeded %d bytes", lim.OutputBytes))
		}
	}
	// The decoder stops when the caller gives up or the run is over, whichever comes first.
	decodeCtx, cancelDecode := context.WithCancel(ctx)
	defer cancelDecode()
	var wg sync.WaitGroup
	wg.Add(3)
	for i, buf := range []*capBuffer{stdout, stderr} {
		go func(r *os.File, buf *capBuffer) {
			defer wg.Done()
			p := make([]byte, 32<<10)
			for {
				n, rerr := r.Read(p)
				if n > 0 {
					buf.Write(p[:n])
					countOut(n)
				}
				if rerr != nil {
					return
				}
			}
		}(pipes[i+1][0], buf)
	}
	go func() {
		defer wg.Done()
		if msg.gen != nil {
			// A generate run writes a result, not a trace: kept as it is, up to its cap.
			if !msg.gen.read(pipes[0][0]) {
				killItem(schemas.StatusInvalid, fmt.Sprintf("the generate run wrote more than %d bytes of result", maxGenResult))
			}
			return
		}
		var events io.Reader = pipes[0][0]
		if recordEvents != nil {
			events = recordEvents(key, events)
		}
		switch outcome, why := dec.read(decodeCtx, events); outcome {
		case outcomeLimit:
			killItem(schemas.StatusEventLimit, why)
		case outcomeTampered:
			killItem(schemas.StatusTampered, why)
		case outcomeCancelled:
			killItem(schemas.StatusKilled, why)
		}
	}()

	// Wait for the zygote's done message. The zygote enforces the wall-clock limit itself; the
	// grace period only catches a zygote that stopped answering.
	hard := time.NewTimer(lim.WallTime + 5*time.Second)
	defer hard.Stop()
	oomDetail := func() string {
		file := "cgroup memory.max"
		if _, v1 := z.cg.(*cgroup.V1Sandbox); v1 {
			file = "cgroup v1 memory.limit_in_bytes"
		}
		return fmt.Sprintf("the item's memory limit of %d bytes (%s) was reached", lim.Memory, file)
	}
	// cgroup v1 has no memory.oom.group: its OOM killer ends one process and leaves the rest of
	// the item running (a pool waiting for a worker it killed would wait until the wall-clock
	// limit). Go watches the group's OOM kills and ends the whole item at the first, as v2 does.
	var oomTick <-chan time.Time
	if _, v1 := z.cg.(*cgroup.V1Sandbox); v1 && oomBefore >= 0 {
		t := time.NewTicker(v1OOMPoll)
		defer t.Stop()
		oomTick = t.C
	}
	var done *ctrlMsg
	healthy = true
wait:
	for {
		select {
		case <-oomTick:
			if n, oerr := z.cg.OOMKills(); oerr == nil && n > oomBefore {
				killItem(schemas.StatusMemory, oomDetail())
				oomTick = nil
			}
		case m, ok := <-z.msgs:
			if !ok {
				healthy = false
				break wait
			}
			if m.Op == "done" && m.ID == id {
				done = &m
				break wait
			}
		case <-ctx.Done():
			killItem(schemas.StatusKilled, "cancelled: "+ctx.Err().Error())
			ctx = context.Background() // keep waiting for the zygote to report
		case <-hard.C:
			healthy = false
			killStatus, killDetail = schemas.StatusTimeout, "sandbox stopped answering after the wall-clock limit"
			break wait
		}
	}
	if !healthy {
		z.kill()
	}
	if oomBefore >= 0 {
		if n, oerr := z.cg.OOMKills(); oerr == nil && n > oomBefore {
			killOnce.Do(func() {
				killStatus, killDetail = schemas.StatusMemory, oomDetail()
			})
		}
	}
	if v1, ok := z.cg.(*cgroup.V1Sandbox); ok && healthy {
		// The zygote reaped every process of the item before it said done; make sure the item's
		// group is empty (cgroup v1 has no cgroup.kill, and its OOM killer takes one process
		// at a time, not the whole item).
		kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if kerr := v1.KillItem(kctx); kerr != nil {
			slog.Warn("sandbox: emptying the item's cgroup v1 group", "err", kerr)
			healthy = false
		}
		cancel()
	}
	// With the item's processes gone the pipes reach EOF; never wait long for a straggler.
	collected := make(chan struct{})
	go func() { wg.Wait(); close(collected) }()
	select {
	case <-collected:
	case <-time.After(2 * time.Second):
		for i := range pipes {
			pipes[i][0].Close()
		}
		<-collected
	}
	for i := range pipes {
		pipes[i][0].Close()
	}

	res.Events = dec.events
	res.Blocks = dec.blocks
	res.Consume = dec.consume
	res.Functions = dec.functions
	res.TraceBytes = dec.bytes
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	res.StdoutBytes, res.StderrBytes = stdout.Total(), stderr.Total()
	res.Wall = time.Since(start)
	if done != nil {
		res.Wall = time.Duration(done.WallMS) * time.Millisecond
		res.CPU = time.Duration(done.CPUMS) * time.Millisecond
		res.MaxRSSKB = done.MaxRSSKB
		if done.Clean != nil && !*done.Clean {
			healthy = false
		}
	}
	if msg.gen != nil {
		s.classifyGenerate(res, msg.gen, done, killStatus, killDetail, lim, z)
	} else {
		s.classify(res, dec, done, killStatus, killDetail, lim, z, msg.Kind == "replay")
		verifyRun(res, dec, msg, s.cfg.host)
	}
	if res.Status == schemas.StatusSandboxError {
		err = errors.New("sandbox: " + res.Detail)
	}
	return res, dec, healthy, err
}

// cpuLimitHit reports whether the item whose end m reports was stopped by its CPU-time limit
// (lim.CPUTime): SIGXCPU at the soft limit, or SIGKILL at the hard one once that much CPU was used.
func (m *ctrlMsg) cpuLimitHit(lim Limits) bool {
	return m.Signal != nil && (*m.Signal == int(syscall.SIGXCPU) ||
		(*m.Signal == int(syscall.SIGKILL) && time.Duration(m.CPUMS)*time.Millisecond >= lim.CPUTime))
}

// endedBefore says how the item whose end m reports ended, before what it owed (its trace's end,
// its result): killed by a signal, or exited with a code.
func (m *ctrlMsg) endedBefore(what string) string {
	if m.Signal != nil {
		return "killed by signal " + syscall.Signal(*m.Signal).String()
	}
	code := -1
	if m.ExitCode != nil {
		code = *m.ExitCode
	}
	return fmt.Sprintf("the process exited with code %d before %s", code, what)
}

// classify sets res.Status and res.Detail from what Go saw, what the zygote reported and the
// tracer's end record, in that order of trust. A replay (whose driver never writes a
// TracerError, and whose seal the item's code can reach: docs/debugger.md, "Replay on bdb") is
// never a tracer failure once its driver sealed its first chunk.
func (s *Sandbox) classify(res *Result, dec *decoder, done *ctrlMsg, killStatus schemas.Status, killDetail string, lim Limits, z *zygote, replay bool) {
	end := dec.end
	if end != nil {
		res.Value, res.ExcType, res.ExcMessage = end.value, end.excType, end.excMessage
	}
	// Neither tracer ever seals these: only Go gives them. An end record that claims one was
	// written by the item's code (a replay's: an attacker's review sealed sandbox_error, which
	// would have ended `ndtrace verify` without a verdict).
	// A replay's end record of no known status is the code's too (its driver writes known ones).
	forgedEnd := end != nil && (end.status == schemas.StatusSandboxError || end.status == schemas.StatusKilled ||
		end.status == schemas.StatusTimeout || end.status == schemas.StatusOutputLimit || (replay && !end.status.Valid()))
	if c := res.Consume; c != nil && end != nil && end.status == schemas.StatusOK {
		c.Value = end.value
		c.Exhausted = c.Values >= 0 && c.Values < c.Limit
	}
	switch {
	case killStatus != "":
		res.Status, res.Detail = killStatus, killDetail
	case forgedEnd:
		res.Status, res.Detail = schemas.StatusTampered, fmt.Sprintf("tampering: the end record claims %q, a status only the sandbox gives", end.status)
	case done == nil:
		res.Status = schemas.StatusSandboxError
		res.Detail = "sandbox died during the run: " + z.why()
		if end != nil {
			// The end record arrived: the run itself finished, the sandbox died afterwards.
			res.Status, res.Detail = end.status, ""
		} else if !s.backendDropsPrivileges() {
			// Without a uid of its own the code can kill the zygote; that ends the run, not the
			// service.
			res.Status, res.Detail = schemas.StatusKilled, "the sandbox's supervisor was killed during the run"
		}
	case done.Reason == "timeout":
		res.Status, res.Detail = schemas.StatusTimeout, fmt.Sprintf("wall-clock limit of %v reached", lim.WallTime)
	case done.Reason == "killed":
		res.Status, res.Detail = schemas.StatusKilled, "killed on request"
	case done.ExitCode != nil && (*done.ExitCode == exitSetup || *done.ExitCode == exitTracerBug) &&
		(dec.chunks == 0 || (!replay && end != nil && end.excType == "TracerError")):
		// The tracer failed, not the traced code: that is the sandbox's fault, never data. (The
		// tracer seals a first chunk before any of the item's code runs; past that, only its own
		// sealed TracerError says the exit is the tracer's and not the code's os._exit.)
		res.Status = schemas.StatusSandboxError
		res.Detail = fmt.Sprintf("tracer failed (exit %d): %s", *done.ExitCode, lastLine(res.Stderr))
		if end != nil && end.excType == "TracerError" {
			res.Detail = "tracer failed: " + end.excMessage
		}
	case end != nil:
		res.Status = end.status
	case done.cpuLimitHit(lim):
		res.Status, res.Detail = schemas.StatusTimeout, fmt.Sprintf("CPU-time limit of %v reached", lim.CPUTime)
	case done.ExitCode != nil && *done.ExitCode == exitNoMemory:
		res.Status, res.Detail = schemas.StatusMemory, "the tracer ran out of memory"
	case done.ExitCode != nil && *done.ExitCode == exitTampered:
		res.Status, res.Detail = schemas.StatusTampered, "tampering: the traced code tried to reach the tracer where no record could be written"
	case done.ExitCode != nil && *done.ExitCode == exitPipe:
		res.Status, res.Detail = schemas.StatusKilled, "the traced code closed the events channel"
	default:
		res.Status, res.Detail = schemas.StatusKilled, done.endedBefore("the trace ended")
	}
	if res.Status == "" || !res.Status.Valid() {
		res.Status, res.Detail = schemas.StatusSandboxError, "the tracer reported an unknown status"
	}
	if res.Detail == "" {
		switch res.Status {
		case schemas.StatusException, schemas.StatusMemory, schemas.StatusInvalid:
			res.Detail = strings.TrimSpace(res.ExcType + ": " + res.ExcMessage)
		case schemas.StatusEventLimit:
			res.Detail = fmt.Sprintf("trace limit reached (%d events or %d bytes)", lim.TraceEvents, lim.TraceBytes)
			if res.ExcMessage != "" {
				res.Detail = res.ExcMessage
			}
		case schemas.StatusTampered:
			res.Detail = "tampering: " + res.ExcMessage
		}
	}
	res.Detail = cut(res.Detail, MaxDetail)
}

// Exit codes of the item child when it cannot write a normal end record (docs/tracer-protocol.md).
const (
	exitTracerBug = 70
	exitPipe      = 71
	exitTampered  = 72
	exitSetup     = 97
	exitNoMemory  = 99
)

// lastLine returns the last non-empty line of b, for one-line error details, cut to MaxDetail
// bytes.
func lastLine(b []byte) string {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return cut(string(bytes.TrimSpace(b)), MaxDetail)
}

// backendDropsPrivileges reports whether traced code runs as a different uid than the zygote.
func (s *Sandbox) backendDropsPrivileges() bool {
	return s.backend.Name() == "namespaces" && os.Geteuid() == 0
}

type endRecord struct {
	status                     schemas.Status
	value, excType, excMessage string
	// files are the traced files on the stack when the run ended tampered, outermost first.
	files []string
}

// Caps of the Go side's decoding, beyond the run's own TraceEvents and TraceBytes: how many local
// names one frame may declare, and how many locals the decoded trace may hold in all (each event
// holds its frame's locals, so a frame of many locals costs that much at every event).
const (
	maxNamesPerFrame = 4096
	cellsPerEvent    = 64
)

// decodeLimitsOf returns the decoder's caps for a run with limits lim.
func decodeLimitsOf(lim Limits) decodeLimits {
	return decodeLimits{MaxBytes: lim.TraceBytes + lim.TraceBytes/8 + (1 << 20), MaxEvents: lim.TraceEvents,
		MaxNames: maxNamesPerFrame, MaxCells: max(int64(lim.TraceEvents)*cellsPerEvent, 1<<20)}
}

// Caps of the source the verifier reads for a test run's trace (files of the checkout).
const (
	verifyFileBytes = 16 << 20
	verifyFiles     = 10000
)

// entryCall matches a call expression that is a plain call of a name, f(...): its function is
// the run's entry frame (traceEnd.Entry).
var entryCall = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(`)

// eventsPipeSize is the capacity asked for the events pipe (the unprivileged maximum,
// /proc/sys/fs/pipe-max-size, is 1 MiB by default).
const eventsPipeSize = 1 << 20

// recordEvents, when set (by tests only), wraps each run's events stream, given the key that
// seals it: the benchmarks record real streams with it.
var recordEvents func(key []byte, r io.Reader) io.Reader

// verifyRun checks the decoded trace of a run against the source it claims to come from
// (verifyTrace); a trace that disagrees is the traced code's doing, and the run is tampered.
func verifyRun(res *Result, dec *decoder, msg runMsg, host func(string) string) {
	if msg.Kind == "replay" {
		// A replay's events are bdb's stops, not a trace: Replay's caller compares them with
		// the row they replay.
		return
	}
	switch res.Status {
	case schemas.StatusTampered, schemas.StatusSandboxError, schemas.StatusInvalid:
		return
	}
	if len(dec.events) == 0 && len(dec.functions) == 0 && len(dec.blocks) == 0 {
		return
	}
	kind := msg.Kind
	if kind == "" {
		kind = "call"
	}
	var end *traceEnd
	if dec.end != nil {
		end = &traceEnd{Status: res.Status, Value: res.Value, ExcType: res.ExcType, Kind: kind}
		// A consumed iterator's run ends with the values taken, not with the entry frame's
		// return: the entry checks do not apply.
		if kind == "call" && dec.consume == nil {
			if m := entryCall.FindStringSubmatch(msg.Call); m != nil {
				end.Entry = m[1]
			}
		}
	}
	if err := verifyTrace(dec.events, dec.functions, dec.blocks, runSource(msg, host), end); err != nil {
		res.Status = schemas.StatusTampered
		res.Detail = "tampering: " + err.Error()
	}
}

// moduleName matches a dotted module name (Request.Module).
var moduleName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// checkModuleRequest checks a call of a function where it lives (Request.Module): a dotted
// name, an absolute checkout and roots, and the module's file inside the checkout.
func checkModuleRequest(req Request) error {
	switch {
	case !moduleName.MatchString(req.Module):
		return fmt.Errorf("sandbox: module %q is not a dotted name", req.Module)
	case !filepath.IsAbs(req.Dir) || filepath.Clean(req.Dir) != req.Dir:
		return fmt.Errorf("sandbox: module %s: dir %q is not a clean absolute path", req.Module, req.Dir)
	case !filepath.IsAbs(req.Filename) || filepath.Clean(req.Filename) != req.Filename || !pathWithin(req.Dir, req.Filename):
		return fmt.Errorf("sandbox: module %s: its file %q is not a clean absolute path inside %s", req.Module, req.Filename, req.Dir)
	}
	for _, p := range req.Paths {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("sandbox: module %s: path %q is not absolute", req.Module, p)
		}
	}
	return nil
}

// modulePaths is what a call of a function where it lives (module set) puts first on sys.path:
// the checkout dir, then its import roots paths (as a test run has them); nil without a module.
func modulePaths(module, dir string, paths []string) []string {
	if module == "" {
		return nil
	}
	return append([]string{dir}, paths...)
}

// runSource is the source a run may trace: the item's own code, and the files under its
// directory targets, read from the host folders host gives for them (Config.Binds; nil: the same).
func runSource(msg runMsg, host func(string) string) traceSource {
	var sources []traceSource
	for _, t := range msg.Targets {
		switch {
		case msg.Kind == "" && t == msg.Filename && msg.Module == "":
			sources = append(sources, codeSource(msg.Filename, msg.Code))
		case strings.HasSuffix(t, "/"):
			sources = append(sources, boundSource(strings.TrimSuffix(t, "/"), host))
		default:
			// One file (a module run where it lives), read from the host folder it is bound
			// from when it is below a bind (Config.Binds).
			file := filepath.Clean(t)
			dir := boundSource(filepath.Dir(file), host)
			sources = append(sources, func(name string) (*traceText, bool) {
				if name != file {
					return nil, false
				}
				return dir(name)
			})
		}
	}
	return func(file string) (*traceText, bool) {
		for _, src := range sources {
			if t, ok := src(file); ok {
				return t, true
			}
		}
		return nil, false
	}
}
