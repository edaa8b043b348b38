package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ndtrace/ndtrace/activities"
	"github.com/ndtrace/ndtrace/pipeline"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// preflightTimeout bounds a preflight: a store that does not answer within it is reported, not
// waited for.
const preflightTimeout = time.Minute

// preflight checks a spec before a workflow is started for it (pipeline.Preflight): every name a
// later stage resolves, the sources' files, and the output's write access with a probe object.
// local says whether the workers read this machine's files (ndtrace run with its own worker, or
// submit and schedule unless --no-local-check): then local paths are checked too. Problems are
// one usage error of one line, each naming its field in the spec, after specPath (the spec's
// file, "" for the built-in examples' or a retried run's).
func preflight(ctx context.Context, spec schemas.Spec, specPath string, local bool) error {
	return preflightWith(ctx, spec, specPath, pipeline.PreflightOptions{Tokenizers: tokenize.Get, Local: local})
}

// preflightWith is preflight with the options given.
func preflightWith(ctx context.Context, spec schemas.Spec, specPath string, opts pipeline.PreflightOptions) error {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	start := time.Now()
	ps := pipeline.Preflight(ctx, spec, opts)
	slog.Debug("preflight", "problems", len(ps), "took", time.Since(start))
	if len(ps) == 0 {
		return nil
	}
	msgs := make([]string, len(ps))
	for i, p := range ps {
		msgs[i] = p.String()
	}
	if specPath == "" {
		specPath = "spec"
	}
	return usageError{specPath + ": " + strings.Join(msgs, "; ")}
}

// registerNoLocalCheck adds --no-local-check, for specs whose local paths exist only where the
// workers run.
func registerNoLocalCheck(fs *flag.FlagSet) *bool {
	return fs.Bool("no-local-check", false, "do not check the spec's local paths (sources, evaluation sets, tokenizer files) on this machine: they are read where the workers run")
}

// specError is a spec's error as a usage error naming the spec's file in place of "spec".
func specError(specPath string, err error) error {
	return usageError{specPath + ": " + strings.TrimPrefix(err.Error(), "spec: ")}
}

// badInput returns the one line of a failure that no retry could fix (an activity's ErrBadInput
// application error: a store that cannot be used, a missing object, bad input), as the activity
// phrased it, or "" if err has none.
func badInput(err error) string {
	var ae *temporal.ApplicationError
	for e := err; errors.As(e, &ae); e = ae.Unwrap() {
		if ae.Type() == activities.ErrBadInput {
			return oneLine(ae.Message())
		}
		if ae.Unwrap() == nil {
			break
		}
	}
	return ""
}

// explainRun turns the failure of a dataset workflow into one line when an activity failed for
// good: what was wrong, not the chain of workflow, child and activity errors around it.
func explainRun(dataset string, err error) error {
	if msg := badInput(err); msg != "" {
		return &hintError{msg: fmt.Sprintf("dataset %s: %s", dataset, msg), err: err}
	}
	return fmt.Errorf("dataset %s: %w", dataset, err)
}
