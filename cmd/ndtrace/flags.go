package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ndtrace/ndtrace/schemas"
)

// helpRequest is what a command returns for -h or --help: run prints usage on stdout and exits 0.
// It wraps flag.ErrHelp.
type helpRequest struct{ usage func(w io.Writer) }

func (helpRequest) Error() string { return flag.ErrHelp.Error() }
func (helpRequest) Unwrap() error { return flag.ErrHelp }

// flagSetHelp is the helpRequest that prints fs's usage.
func flagSetHelp(fs *flag.FlagSet) helpRequest {
	return helpRequest{usage: func(w io.Writer) {
		fs.SetOutput(w)
		fs.Usage()
	}}
}

// isHelpArg reports whether arg asks for help the way the flag package understands it.
func isHelpArg(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}

// parseQuietly parses args with fs printing nothing: -h gives a helpRequest, a bad flag a one-line
// usage error that names it (with the nearest defined flag when one is close) and says how to get
// help, instead of the flag package's message followed by the whole usage.
func parseQuietly(fs *flag.FlagSet, args []string) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return flagSetHelp(fs)
	default:
		return usageError{flagErrorLine(fs, err)}
	}
}

// flagErrorLine rewrites a flag package error in one line: "unknown flag -spce (did you mean
// -spec?); see ndtrace run -h".
func flagErrorLine(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		msg = "unknown flag -" + name // run makes the whole line safe for a terminal
		if s := suggest(name, names); s != "" {
			msg += fmt.Sprintf(" (did you mean -%s?)", s)
		}
	}
	return fmt.Sprintf("%s; see %s -h", msg, fs.Name())
}

// suggest is schemas.Nearest: the candidate name is likely a typo of, or "".
func suggest(name string, candidates []string) string { return schemas.Nearest(name, candidates) }
