package sandbox

import (
	"context"
	"fmt"

	"github.com/ndtrace/ndtrace/schemas"
)

// Kinds of refused test selection (Collection.Refused) besides the options themselves.
const (
	// RefusedArgs: a test path named in addopts.
	RefusedArgs = "args"
	// RefusedTestpaths: an entry of the ini's testpaths (or of -o testpaths= in addopts).
	RefusedTestpaths = "testpaths"
)

// refusedKinds are the entries a collection record's refused list may hold.
var refusedKinds = map[string]bool{RefusedArgs: true, RefusedTestpaths: true,
	"--ignore": true, "--ignore-glob": true, "--deselect": true}

// maxRefused bounds a collection's list of refused selections (the tracer lists no more).
const maxRefused = 50

// checkRefused says what is wrong with a collection's list of refused selections ("" if
// nothing): at most maxRefused entries, each one of refusedKinds. The list is written by the
// tracer after the repository's code ran; anything else is tampering.
func checkRefused(kinds []string) string {
	if len(kinds) > maxRefused {
		return fmt.Sprintf("%d refused selections listed, more than %d", len(kinds), maxRefused)
	}
	for _, k := range kinds {
		if !refusedKinds[k] {
			return fmt.Sprintf("unknown refused selection %q", cut(k, 100))
		}
	}
	return ""
}

// findsNothing reports whether a collection gives no test to run while its runner finished or
// failed as a whole (status ok or exception): the case for the other runner. A collection that
// ended otherwise (a timeout, a resource limit, tampering) is final.
func findsNothing(c *Collection) bool {
	return len(c.Tests) == 0 && (c.Status == schemas.StatusOK || c.Status == schemas.StatusException)
}

// otherRunner is the runner a collection by runner falls back to.
func otherRunner(runner string) string {
	if runner == RunnerUnittest {
		return RunnerPytest
	}
	return RunnerUnittest
}

// runnerFallback collects once more with the runner first did not use (first found no test):
// unittest discovery after pytest (a unittest suite in a tests.py module, or in test*.py files
// pytest's own patterns miss), pytest after unittest (test folders without __init__.py, plain
// test functions). The fallback's collection is kept when it finds tests, with RunnerFallback
// naming the first runner; else the first collection stands, whose reason is the one to report.
func (s *Sandbox) runnerFallback(ctx context.Context, req CollectRequest, dir string, first *Collection) (*Collection, error) {
	tried := first.Runner
	if tried == "" {
		tried = req.Runner
	}
	if tried == "" {
		tried = RunnerPytest
	}
	req.Runner = otherRunner(tried)
	c, err := s.collectOptions(ctx, req, dir)
	if err != nil {
		return nil, fmt.Errorf("collect with %s after %s found no test: %w", req.Runner, tried, err)
	}
	if c.Status != schemas.StatusOK || len(c.Tests) == 0 {
		return first, nil
	}
	c.RunnerFallback = tried
	return c, nil
}
