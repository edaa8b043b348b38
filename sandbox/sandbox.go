// Package sandbox runs untrusted Python in isolation and traces it.
//
// A Sandbox is one isolated interpreter (the zygote) that forks a fresh, unprivileged, rlimited child
// for every Run, so the cost of building the sandbox and starting Python is paid once per RecycleAfter
// runs rather than per item. The tracer (tracer.py, embedded) records call, line, return and exception
// events of the target code and streams them over a dedicated file descriptor; Run rebuilds them into
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
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ndtrace/ndtrace/schemas"
)

// Sandbox is one isolated interpreter. Its methods are safe for concurrent use; runs are serialized.
// Use several Sandboxes to trace in parallel.
type Sandbox struct {
	cfg     Config
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
	s := &Sandbox{cfg: cfg, backend: b}
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
	if len(req.Targets) == 0 {
		req.Targets = []string{req.Filename}
	}
	msg := runMsg{Op: "run", Code: req.Code, Filename: req.Filename, Call: req.Call,
		Targets: req.Targets, Seed: req.Seed, Naive: req.Naive, PythonPath: s.cfg.PythonPath}
	res, _, err := s.exec(ctx, msg, mergeLimits(s.cfg.Limits, req.Limits))
	return res, err
}

// exec runs one item of any kind: it (re)starts the zygote when needed, runs msg and retires the
// zygote when the run left it unusable. It also returns the trace decoder, for the records of the
// other kinds of item.
func (s *Sandbox) exec(ctx context.Context, msg runMsg, lim Limits) (*Result, *traceDecoder, error) {
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
			return &Result{Status: schemas.StatusSandboxError, Detail: err.Error()}, newTraceDecoder(), err
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

// runMsg is the zygote's run command (docs/tracer-protocol.md).
type runMsg struct {
	Op       string    `json:"op"`
	ID       int64     `json:"id"`
	Code     string    `json:"code"`
	Filename string    `json:"filename"`
	Call     string    `json:"call"`
	Targets  []string  `json:"targets"`
	Seed     int64     `json:"seed"`
	Naive    bool      `json:"naive"`
	Limits   runLimits `json:"limits"`
	// PythonPath is Config.PythonPath, for every kind of item.
	PythonPath []string `json:"pythonpath,omitempty"`
	// Test runs (kind "collect" or "test"; absent means "call").
	Kind    string   `json:"kind,omitempty"`
	Dir     string   `json:"dir,omitempty"`
	Runner  string   `json:"runner,omitempty"`
	Test    string   `json:"test,omitempty"`
	Traced  bool     `json:"traced,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
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

// run performs one item on z. healthy is false when the zygote must not be used again.
func (s *Sandbox) run(ctx context.Context, z *zygote, msg runMsg, lim Limits) (res *Result, dec *traceDecoder, healthy bool, err error) {
	res = &Result{}
	dec = newTraceDecoder()
	id := msg.ID
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
	}
	msg.Limits = runLimits{
		WallMS: lim.WallTime.Milliseconds(), CPUS: int64(math.Ceil(lim.CPUTime.Seconds())),
		ASBytes: lim.AddressSpace, NProc: lim.Processes, FsizeBytes: lim.FileSize, NoFile: lim.OpenFiles,
		MaxEvents: lim.TraceEvents, MaxTraceBytes: lim.TraceBytes, ValueChars: lim.ValueChars,
		ReprMS: lim.ReprTimeout.Milliseconds(),
	}
	sendErr := z.send(msg, pipes[0][1], pipes[1][1], pipes[2][1])
	for i := range pipes {
		pipes[i][1].Close()
	}
	if sendErr != nil {
		for i := range pipes {
			pipes[i][0].Close()
		}
		err = fmt.Errorf("sandbox: send run: %w: %s", sendErr, z.why())
		res.Status, res.Detail = schemas.StatusSandboxError, err.Error()
		return res, dec, false, err
	}

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
		if derr := dec.read(pipes[0][0], lim.TraceBytes+lim.TraceBytes/8+(1<<20)); derr != nil {
			killItem(schemas.StatusEventLimit, derr.Error())
		}
	}()

	// Wait for the zygote's done message. The zygote enforces the wall-clock limit itself; the
	// grace period only catches a zygote that stopped answering.
	hard := time.NewTimer(lim.WallTime + 5*time.Second)
	defer hard.Stop()
	var done *ctrlMsg
	healthy = true
wait:
	for {
		select {
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
	s.classify(res, dec, done, killStatus, killDetail, lim, z)
	if res.Status == schemas.StatusSandboxError {
		err = errors.New("sandbox: " + res.Detail)
	}
	return res, dec, healthy, err
}

// classify sets res.Status and res.Detail from what Go saw, what the zygote reported and the
// tracer's end record, in that order of trust.
func (s *Sandbox) classify(res *Result, dec *traceDecoder, done *ctrlMsg, killStatus schemas.Status, killDetail string, lim Limits, z *zygote) {
	end := dec.end
	if end != nil {
		res.Value, res.ExcType, res.ExcMessage = end.value, end.excType, end.excMessage
	}
	switch {
	case killStatus != "":
		res.Status, res.Detail = killStatus, killDetail
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
	case done.ExitCode != nil && (*done.ExitCode == exitSetup || *done.ExitCode == exitTracerBug):
		// The tracer failed, not the traced code: that is the sandbox's fault, never data.
		res.Status = schemas.StatusSandboxError
		res.Detail = fmt.Sprintf("tracer failed (exit %d): %s", *done.ExitCode, lastLine(res.Stderr))
		if end != nil && end.excType == "TracerError" {
			res.Detail = "tracer failed: " + end.excMessage
		}
	case end != nil:
		res.Status = end.status
	case done.Signal != nil && (*done.Signal == int(syscall.SIGXCPU) ||
		(*done.Signal == int(syscall.SIGKILL) && time.Duration(done.CPUMS)*time.Millisecond >= lim.CPUTime)):
		res.Status, res.Detail = schemas.StatusTimeout, fmt.Sprintf("CPU-time limit of %v reached", lim.CPUTime)
	case done.ExitCode != nil && *done.ExitCode == exitNoMemory:
		res.Status, res.Detail = schemas.StatusMemory, "the tracer ran out of memory"
	case done.ExitCode != nil && *done.ExitCode == exitPipe:
		res.Status, res.Detail = schemas.StatusKilled, "the traced code closed the events channel"
	case done.Signal != nil:
		res.Status, res.Detail = schemas.StatusKilled, "killed by signal "+syscall.Signal(*done.Signal).String()
	default:
		code := -1
		if done.ExitCode != nil {
			code = *done.ExitCode
		}
		res.Status, res.Detail = schemas.StatusKilled, fmt.Sprintf("the process exited with code %d before the trace ended", code)
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
		}
	}
}

// Exit codes of the item child when it cannot write a normal end record (docs/tracer-protocol.md).
const (
	exitTracerBug = 70
	exitPipe      = 71
	exitSetup     = 97
	exitNoMemory  = 99
)

// lastLine returns the last non-empty line of b, for one-line error details.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// backendDropsPrivileges reports whether traced code runs as a different uid than the zygote.
func (s *Sandbox) backendDropsPrivileges() bool {
	return s.backend.Name() == "namespaces" && os.Geteuid() == 0
}

// traceDecoder rebuilds full events from the tracer's diff-encoded JSON Lines.
type traceDecoder struct {
	events    []schemas.Event
	blocks    []schemas.Block
	functions []schemas.FuncSource
	funcSeen  map[[3]string]bool // file, first, last of the functions kept
	test      *wireEvent         // the test record of a test run
	collect   *wireEvent         // the collection record of a collect run
	frames    map[int]*frameState
	end       *endRecord
	bytes     int64
}

// frameState is what the decoder knows of one frame: its names in order and its current locals.
// locals is shared by every event at which nothing changed, so it is never modified in place.
type frameState struct {
	names  []string
	locals schemas.Locals
}

type endRecord struct {
	status                     schemas.Status
	value, excType, excMessage string
}

func newTraceDecoder() *traceDecoder {
	return &traceDecoder{frames: map[int]*frameState{}, funcSeen: map[[3]string]bool{}}
}

// errTraceTooLarge stops reading a trace beyond its byte budget.
var errTraceTooLarge = errors.New("trace exceeded its byte limit")

// read consumes the stream until EOF. Lines that do not parse (a line cut by a kill, or bytes the
// traced code forged) are skipped; nothing after an end record is taken.
func (d *traceDecoder) read(r io.Reader, maxBytes int64) error {
	br := bufio.NewReaderSize(r, 256<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer: gather it whole (bounded by maxBytes).
			full := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				full = append(full, line...)
				if int64(len(full))+d.bytes > maxBytes {
					break
				}
			}
			line = full
		}
		d.bytes += int64(len(line))
		if d.bytes > maxBytes {
			_, _ = io.Copy(io.Discard, br)
			return errTraceTooLarge
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			d.decode(line)
		}
		if err != nil {
			return nil
		}
	}
}

func (d *traceDecoder) decode(line []byte) {
	if d.end != nil {
		return // nothing after the end record counts
	}
	w, err := parseWire(line)
	if err != nil {
		return
	}
	switch w.Event {
	case "blocks":
		for _, b := range w.Blocks {
			if b[0] > 0 && b[1] >= b[0] {
				d.blocks = append(d.blocks, schemas.Block{File: w.File, Start: b[0], End: b[1]})
			}
		}
		return
	case "function":
		key := [3]string{w.File, strconv.Itoa(w.First), strconv.Itoa(w.Last)}
		if w.First > 0 && w.Last >= w.First && !d.funcSeen[key] {
			d.funcSeen[key] = true
			d.functions = append(d.functions, schemas.FuncSource{File: w.File, QualName: w.QualName,
				FirstLine: w.First, LastLine: w.Last, Source: w.Source})
		}
		return
	case "test":
		if d.test == nil {
			d.test = &w
		}
		return
	case "collection":
		if d.collect == nil {
			d.collect = &w
		}
		return
	case "end":
		e := &endRecord{status: schemas.Status(w.Status), excType: w.ExcType, excMessage: w.ExcMessage}
		if w.Value != nil {
			e.value = *w.Value
		}
		d.end = e
		return
	case schemas.EventCall, schemas.EventLine, schemas.EventReturn, schemas.EventException:
	default:
		return
	}
	st := d.frames[w.Frame]
	if st == nil {
		st = &frameState{}
		d.frames[w.Frame] = st
	}
	if w.HasNames || len(w.Locals) > 0 {
		st.apply(w)
	}
	d.events = append(d.events, schemas.Event{Event: w.Event, Frame: w.Frame, Func: w.Func, File: w.File,
		Lineno: w.Lineno, Depth: w.Depth, Src: w.Src, Locals: st.locals, Value: w.Value, ExcType: w.ExcType,
		Unwind: w.Unwind})
}

// apply builds the frame's new locals from the previous ones and the event's diff, in names order.
// Names without a value (which the tracer never sends) are left out.
func (st *frameState) apply(w wireEvent) {
	if w.HasNames {
		st.names = w.Names
	}
	next := make(schemas.Locals, 0, len(st.names))
	for _, n := range st.names {
		v, ok := lookup(w.Locals, n)
		if !ok {
			v, ok = st.locals.Get(n)
		}
		if ok {
			next = append(next, schemas.Var{Name: n, Value: v})
		}
	}
	st.locals = next
}

// lookup finds name in a diff (searched from the end, so a repeated key's last value wins).
func lookup(diff []schemas.Var, name string) (string, bool) {
	for i := len(diff) - 1; i >= 0; i-- {
		if diff[i].Name == name {
			return diff[i].Value, true
		}
	}
	return "", false
}
