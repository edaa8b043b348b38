package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/internal/termsafe"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// renderedState is one state of `ndtrace render --format json`.
type renderedState struct {
	Event     string         `json:"event"`
	Func      string         `json:"func,omitempty"`
	Lineno    int            `json:"lineno,omitempty"`
	Depth     int            `json:"depth"`
	Src       string         `json:"src,omitempty"`
	Locals    schemas.Locals `json:"locals"`
	Value     *string        `json:"value,omitempty"`
	Action    string         `json:"action"`
	ActionArg string         `json:"action_arg,omitempty"`
}

// renderedTrajectory is the output of `ndtrace render --format json`.
type renderedTrajectory struct {
	Direction debugger.Direction `json:"direction"`
	Policy    string             `json:"policy"`
	Seed      uint64             `json:"seed"`
	Code      string             `json:"code"`
	Exit      debugger.Exit      `json:"exit"`
	States    []renderedState    `json:"states"`
}

func runRender(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("render", "--code FILE.py (--call EXPR | --input ARGS [--func NAME]) [flags]", stderr)
	var (
		cf                  codeFlags
		dir, policy, format string
		seed                uint64
		sf                  sandboxFlags
	)
	cf.register(fs)
	fs.StringVar(&dir, "direction", "forward", "forward or inverse")
	fs.StringVar(&policy, "policy", "paper", "action policy: paper (Table A.1) or step_into")
	fs.Uint64Var(&seed, "seed", 0, "trajectory seed: the same trace, policy and seed give the same trajectory")
	fs.StringVar(&format, "format", "text", "text (the neural-debugger grammar), json, or cwm (CWM's trace format)")
	sf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	direction := debugger.Direction(dir)
	if direction != debugger.Forward && direction != debugger.Inverse {
		return usagef("--direction must be forward or inverse, not %q", dir)
	}
	pol, err := debugger.PolicyByName(policy)
	if err != nil {
		return usageError{err.Error()}
	}
	if format != "text" && format != "json" && format != "cwm" {
		return usagef("--format must be text, json or cwm, not %q", format)
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
	item, err := traceItem(ctx, sb, src, filepath.Base(cf.code), call)
	if err != nil {
		return err
	}
	if format == "cwm" {
		text, err := renderCWM(item)
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, terminalText(stdout, text)+"\n")
		return err
	}
	traj, err := item.Sample(direction, pol, seed, nil)
	if err != nil {
		return fmt.Errorf("%s trajectory: %w", direction, err)
	}
	if format == "text" {
		text, err := tokenize.Render(traj)
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, terminalText(stdout, text)+"\n")
		return err
	}
	out := renderedTrajectory{Direction: traj.Direction, Policy: pol.Name, Seed: seed, Code: traj.Code, Exit: traj.Exit}
	for _, s := range traj.Steps {
		out.States = append(out.States, renderedState{Event: string(s.State.Kind), Func: s.State.Func,
			Lineno: s.State.Lineno, Depth: s.State.Depth, Src: s.State.Src, Locals: nonNil(s.State.Locals),
			Value: s.State.Value, Action: string(s.Action), ActionArg: s.Arg})
	}
	out.States = append(out.States, renderedState{Event: string(traj.Exit), Locals: schemas.Locals{}})
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err = stdout.Write(terminalJSON(stdout, buf.Bytes()))
	return err
}

// terminalJSON is the JSON text data as a command prints it on w: escaped for a terminal
// (termsafe.JSON, the same JSON value) when w is one; exact when w is a file or a pipe.
func terminalJSON(w io.Writer, data []byte) []byte {
	if isTerminal(w) {
		return termsafe.JSON(data)
	}
	return data
}

// terminalText is text as render prints it on w: escaped for a terminal (termsafe.Text) when w is
// one, since the trace's values come from the traced code; exact when w is a file or a pipe, where
// the grammar text is data.
func terminalText(w io.Writer, text string) string {
	if isTerminal(w) {
		return termsafe.Text(text)
	}
	return text
}

func nonNil(l schemas.Locals) schemas.Locals {
	if l == nil {
		return schemas.Locals{}
	}
	return l
}

// codeFlags are the flags that name the code and the call to trace.
type codeFlags struct {
	code, call, input, fn string
}

func (f *codeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.code, "code", "", "Python file whose functions are traced (required)")
	fs.StringVar(&f.call, "call", "", "call expression to trace, such as 'f(5)'")
	fs.StringVar(&f.input, "input", "", "CruxEval-style argument list; traces FUNC(ARGS)")
	fs.StringVar(&f.fn, "func", "f", "function called with --input")
}

// read reads the --code file and resolves --call/--input into a call expression.
func (f *codeFlags) read() (src, call string, err error) {
	if f.code == "" {
		return "", "", usagef("--code is required")
	}
	if f.call != "" && f.input != "" {
		return "", "", usagef("give --call or --input, not both")
	}
	call = f.call
	if f.input != "" {
		call = sandbox.CallFromInput(f.fn, f.input)
	}
	if strings.TrimSpace(call) == "" {
		return "", "", usagef("empty call expression: give --call 'f(...)' or --input")
	}
	b, err := os.ReadFile(f.code)
	if err != nil {
		return "", "", usagef("cannot read code: %v", err)
	}
	return string(b), call, nil
}

// traceItem traces one call and returns it as a debugger item. Input that does not compile is a
// usage error; a run that gives no trajectory (killed, sandbox error) is an error.
func traceItem(ctx context.Context, sb *sandbox.Sandbox, code, filename, call string) (debugger.Item, error) {
	res, err := sb.Run(ctx, sandbox.Request{Code: code, Filename: filename, Call: call})
	if err != nil {
		return debugger.Item{}, err
	}
	if res.Status == schemas.StatusInvalid {
		return debugger.Item{}, usagef("%s: %s", filename, res.Detail)
	}
	if _, err := debugger.ExitFor(res.Status); err != nil {
		return debugger.Item{}, fmt.Errorf("%s: %s", res.Status, res.Detail)
	}
	return debugger.Item{Code: code, Call: call, Events: res.Events, Blocks: res.Blocks, Status: res.Status, Consume: res.Consume}, nil
}

// cwmMarker marks the entry function in a CWM trace's context.
const cwmMarker = "  # << START_OF_TRACE"

// renderCWM renders the item's trace in CWM's format: every recorded state of the entry call, with
// the entry's def line marked in the context.
func renderCWM(item debugger.Item) (string, error) {
	exit, err := debugger.ExitFor(item.Status)
	if err != nil {
		return "", err
	}
	fwd, err := debugger.BuildForward(item.Events, exit)
	if err != nil {
		return "", err
	}
	traj, err := debugger.Sample(fwd, "", debugger.StepIntoPolicy(), 0, nil)
	if err != nil {
		return "", err
	}
	ctx := debugger.CodeContext(item.Code, item.Blocks, fwd, "")
	entry := fwd.Start().Src()
	lines := strings.Split(ctx, "\n")
	for i, l := range lines {
		if l == entry {
			lines[i] = l + cwmMarker
			break
		}
	}
	states := make([]debugger.State, len(traj.Steps))
	for i, s := range traj.Steps {
		states[i] = s.State
	}
	return tokenize.RenderCWM(strings.Join(lines, "\n"), states, traj.Exit)
}
