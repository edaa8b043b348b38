package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/ndtrace/ndtrace/internal/termsafe"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// sandboxFlags are the flags of every command that runs code in the sandbox.
type sandboxFlags struct {
	backend    string
	python     string
	timeout    time.Duration
	maxEvents  int
	valueChars int
}

func (f *sandboxFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.backend, "backend", "namespaces", "sandbox backend: "+strings.Join(sandbox.Backends(), " or "))
	fs.StringVar(&f.python, "python", "/usr/bin/python3", "Python interpreter run inside the sandbox")
	fs.DurationVar(&f.timeout, "timeout", sandbox.DefaultLimits.WallTime, "wall-clock limit of one run")
	fs.IntVar(&f.maxEvents, "max-events", sandbox.DefaultLimits.TraceEvents, "stop the run after this many trace events")
	fs.IntVar(&f.valueChars, "value-chars", sandbox.DefaultLimits.ValueChars, "longest rendered value; longer ones are cut")
}

func (f *sandboxFlags) config() (sandbox.Config, error) {
	if f.timeout <= 0 {
		return sandbox.Config{}, usagef("--timeout must be positive")
	}
	if f.maxEvents <= 0 {
		return sandbox.Config{}, usagef("--max-events must be positive")
	}
	if f.valueChars <= 0 {
		return sandbox.Config{}, usagef("--value-chars must be positive")
	}
	return sandbox.Config{Backend: f.backend, Python: f.python, Limits: sandbox.Limits{
		WallTime: f.timeout, CPUTime: f.timeout, TraceEvents: f.maxEvents, ValueChars: f.valueChars,
	}}, nil
}

// open builds the sandbox the flags describe.
func (f *sandboxFlags) open(ctx context.Context) (*sandbox.Sandbox, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	return sandbox.New(ctx, cfg)
}

// traceSummary is the last line ndtrace trace prints.
type traceSummary struct {
	Status      schemas.Status `json:"status"`
	Detail      string         `json:"detail,omitempty"`
	Value       string         `json:"value,omitempty"`
	ExcType     string         `json:"exc_type,omitempty"`
	ExcMessage  string         `json:"exc_message,omitempty"`
	Events      int            `json:"events"`
	TraceBytes  int64          `json:"trace_bytes"`
	StdoutBytes int64          `json:"stdout_bytes"`
	StderrBytes int64          `json:"stderr_bytes"`
	WallMS      int64          `json:"wall_ms"`
	CPUMS       int64          `json:"cpu_ms"`
}

func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("trace", "--code FILE.py (--call EXPR | --input ARGS [--func NAME]) [flags]", stderr)
	var (
		cf   codeFlags
		seed int64
		sf   sandboxFlags
	)
	cf.register(fs)
	fs.Int64Var(&seed, "seed", 0, "seed of Python's random module")
	sf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	src, call, err := cf.read()
	if err != nil {
		return err
	}
	sb, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer sb.Close()
	// The events are written as they are decoded, while the code still runs: encoded by hand into
	// one reused buffer (the bytes of encoding/json, see schemas.Event.AppendJSON) and written in
	// large writes (one write per event made the kernel, not the encoder, the cost of a long
	// trace). The decoder calls Events from its own goroutine; Run returns after its last call.
	// On a terminal, each line is escaped (termsafe.JSON: the same JSON, no C1 or bidi control raw).
	w, tty := bufio.NewWriterSize(stdout, traceWriteBuf), isTerminal(stdout)
	var (
		line   []byte
		werr   error
		events int
	)
	res, err := sb.Run(ctx, sandbox.Request{Code: src, Filename: filepath.Base(cf.code), Call: call, Seed: seed,
		Events: func(ev *schemas.Event) {
			events++
			if werr == nil {
				line = ev.AppendJSON(line[:0])
				if tty {
					_, werr = w.Write(termsafe.JSON(line))
				} else {
					_, werr = w.Write(line)
				}
			}
		}})
	if err != nil {
		return err
	}
	if werr != nil {
		return fmt.Errorf("write: %w", werr)
	}
	if res.Status == schemas.StatusInvalid {
		// (Code that does not compile has no events; a call refused after it ran, such as one
		// that returns a coroutine, has printed its events.)
		w.Flush()
		return usagef("%s: %s", cf.code, res.Detail)
	}
	var summary bytes.Buffer
	enc := json.NewEncoder(&summary)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(traceSummary{Status: res.Status, Detail: res.Detail, Value: res.Value, ExcType: res.ExcType,
		ExcMessage: res.ExcMessage, Events: events, TraceBytes: res.TraceBytes,
		StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes, WallMS: res.Wall.Milliseconds(),
		CPUMS: res.CPU.Milliseconds()}); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if _, err := w.Write(terminalJSON(stdout, summary.Bytes())); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// traceWriteBuf is the size of ndtrace trace's output buffer.
const traceWriteBuf = 256 << 10
