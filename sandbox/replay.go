package sandbox

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ReplayWrapperFile is the file name the replay compiles a row's main() wrapper under; the
// wrapper's states carry it.
const ReplayWrapperFile = "<ndtrace-main>"

// ReplayActions are the actions a replay takes, in the grammar's spelling, and the pdb command
// each is mapped to.
var ReplayActions = map[string]string{
	"step_into":   "step",
	"step_over":   "next",
	"step_return": "return",
	"breakpoint":  "tbreak on every line whose text is the argument, then continue",
	"continue":    "continue",
}

// ReplayRequest is one forward function-level trajectory to replay on Python's own debugger.
type ReplayRequest struct {
	// Code, Filename and Call are the item's, as for Run (Call is informational: Wrapper calls it).
	Code     string
	Filename string
	Call     string
	// Wrapper is the row's main() wrapper, the tail of its CODE context from `def main():` (with
	// the `from itertools import islice` line that precedes it for a consumed iterator).
	Wrapper string
	// Actions are the row's actions in order: [action, argument] (the argument is the breakpoint's
	// source line, empty otherwise).
	Actions [][2]string
	// Limits overrides the sandbox's limits as for Run.
	Limits Limits
	// Module, Dir and Paths replay a function where it lives, as Request's do for Run (Filename
	// is then the module's file in Dir).
	Module string
	Dir    string
	Paths  []string
}

// Replay runs the module body of req.Code untraced, then req.Wrapper's main() under bdb (the
// engine of pdb), taking req.Actions at the debugger's stops as pdb commands (ReplayActions).
// Result.Events are the stops (the landing states) in order, the first being main's call, each
// with the full locals of its frame rendered as the tracer renders values; Depth counts the
// replayed frames below (main's is 0) and Frame numbers frames in order of first stop. The end
// record's status says how the program ended (ok, exception, or a limit). The stream is sealed
// as a trace is; a replay whose code reached for the debugger's machinery ends tampered
// (docs/debugger.md, "Replay on bdb").
func (s *Sandbox) Replay(ctx context.Context, req ReplayRequest) (*Result, error) {
	if strings.TrimSpace(req.Wrapper) == "" {
		return nil, errors.New("sandbox: replay: empty main() wrapper")
	}
	if req.Filename == "" {
		req.Filename = "main.py"
	}
	if strings.HasPrefix(req.Filename, "<") {
		// The driver picks the frames it replays by file name: "<string>" is the driver's own
		// (the tracer module is compiled under the name -c gives), "<ndtrace-main>" the wrapper's,
		// "<ndtrace-replay>" its helper's.
		return nil, fmt.Errorf("sandbox: replay: the item's file may not be named %q (a pseudo-file name like the driver's own)", req.Filename)
	}
	actions, err := replayActions(req.Actions)
	if err != nil {
		return nil, err
	}
	if req.Module != "" {
		// A module of a bound folder (Config.Binds) runs under the names it has inside.
		req.Filename, req.Dir, req.Paths = s.cfg.inside(req.Filename), s.cfg.inside(req.Dir), s.cfg.insideAll(req.Paths)
		if err := checkModuleRequest(Request{Module: req.Module, Dir: req.Dir, Paths: req.Paths, Filename: req.Filename}); err != nil {
			return nil, err
		}
	}
	msg := runMsg{Kind: "replay", runBody: runBody{Code: req.Code, Filename: req.Filename, Call: req.Call,
		Targets: []string{req.Filename}, Wrapper: req.Wrapper, Actions: actions, PythonPath: s.in.PythonPath,
		Module: req.Module, Paths: modulePaths(req.Module, req.Dir, req.Paths)}}
	res, _, err := s.exec(ctx, msg, mergeLimits(s.cfg.Limits, req.Limits))
	return res, err
}

// ReplayEntry names the call a repository-level trajectory starts at: the Occurrence-th (from 0)
// first call of the function QualName of File (an absolute path in the checkout) in the test's
// phases, counted as the tracer records them (a generator's resumption is not a new call).
type ReplayEntry struct {
	File       string `json:"file"`
	QualName   string `json:"qualname"`
	Occurrence int    `json:"occurrence"`
}

// ReplayTestRequest is one forward repository-level trajectory to replay on Python's own
// debugger: the row's test, run as RunTest runs it, and the row's actions from its entry call.
type ReplayTestRequest struct {
	// Dir, Runner, Test, Paths and Options are the test's, as for RunTest.
	Dir     string
	Runner  string
	Test    string
	Paths   []string
	Options RunnerOptions
	// Entry is the call the trajectory starts at.
	Entry ReplayEntry
	// Actions are as in ReplayRequest.
	Actions [][2]string
	// Seed seeds Python's random module, as the traced run's.
	Seed int64
	// Limits overrides the sandbox's limits as for RunTest.
	Limits Limits
}

// ReplayTest runs req.Test in its runner (the checkout, its import roots and the sandbox's
// PythonPath set up as for RunTest, the checkout seen through a private writable view) with a
// trace function that only watches calls until the entry call, then under bdb as Replay does:
// Result.Events are the stops from the entry's call on, Depth counting the checkout's frames
// below (the entry's is 0). The run ends at the entry's first return event (status ok, or
// exception when the entry raised), and with status invalid when the test never reached it.
// Frames outside the checkout, or under a PythonPath directory, are stepped through.
func (s *Sandbox) ReplayTest(ctx context.Context, req ReplayTestRequest) (*Result, error) {
	dir, paths, err := s.checkTest("sandbox: replay", req.Dir, req.Runner, req.Test, req.Options, req.Paths)
	if err != nil {
		return nil, err
	}
	e := req.Entry
	if filepath.IsAbs(e.File) {
		e.File = s.cfg.inside(e.File)
	}
	if !filepath.IsAbs(e.File) || !within(filepath.Clean(e.File), dir) || e.QualName == "" || e.Occurrence < 0 {
		return nil, fmt.Errorf("sandbox: replay: the entry %s of %s (call %d) is not a function of a file in %s", e.QualName, e.File, e.Occurrence, dir)
	}
	actions, err := replayActions(req.Actions)
	if err != nil {
		return nil, err
	}
	msg := runMsg{Kind: "replay", Runner: req.Runner, runBody: runBody{Dir: dir, Test: req.Test,
		Targets: []string{dir + "/"}, Exclude: s.excluded(), Seed: req.Seed, PythonPath: s.in.PythonPath,
		Options: string(req.Options), Paths: paths, Actions: actions, Entry: &e}}
	msg.Writable, msg.WritableBytes = s.writable(dir)
	res, _, err := s.exec(ctx, msg, mergeLimits(s.cfg.Limits, req.Limits))
	return res, err
}

// replayActions checks a replay's actions (each a forward action of ReplayActions) and returns
// them as the request sends them (never nil: an empty list).
func replayActions(actions [][2]string) ([][2]string, error) {
	for i, a := range actions {
		if _, ok := ReplayActions[a[0]]; !ok {
			return nil, fmt.Errorf("sandbox: replay: action %d: %q is not a forward action", i, a[0])
		}
	}
	if actions == nil {
		actions = [][2]string{}
	}
	return actions, nil
}
