package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
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

// suggest returns the candidate nearest to name when it is close enough to be a typo of it (an
// edit distance of at most 2 and at most half of name's length), else the one candidate that name
// begins (at least 3 characters), else "". Ties go to the first candidate.
func suggest(name string, candidates []string) string {
	best, bestDist := "", 3
	var prefixOf []string
	lower := strings.ToLower(name)
	for _, c := range candidates {
		d := editDistance(lower, strings.ToLower(c))
		if d < bestDist && 2*d <= len(name) {
			best, bestDist = c, d
		}
		if len(name) >= 3 && strings.HasPrefix(strings.ToLower(c), lower) {
			prefixOf = append(prefixOf, c)
		}
	}
	if best == "" && len(prefixOf) == 1 {
		best = prefixOf[0]
	}
	return best
}

// editDistance is the Damerau-Levenshtein distance (optimal string alignment) of a and b in bytes:
// insertions, deletions, substitutions and swaps of two neighbours each count one.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
