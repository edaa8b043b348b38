package execute

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/crawl/pyreq"
	"github.com/ndtrace/ndtrace/sandbox/pyenv"
	"github.com/ndtrace/ndtrace/schemas"
)

// envReason starts the detail of a repository whose environment cannot be built (its stage is
// schemas.YieldEnvironment).
const envReason = "environment: "

// envSpec is the spec's configuration of environments, defaults filled in.
func (trc *Tracer) envSpec() schemas.EnvironmentsSpec {
	es := schemas.EnvironmentsSpec{}
	if trc.environments != nil {
		es = *trc.environments
	}
	return es.WithDefaults()
}

// envTimeout is how long building a repository's environment may take (environments.timeout).
func (trc *Tracer) envTimeout() time.Duration {
	d, _ := trc.envSpec().Timeout.Value() // a bad one is the spec's error, found by environment
	return d
}

// forSpec returns the tracer with the spec's configuration of environments.
func (trc *Tracer) forSpec(spec schemas.Spec) *Tracer {
	c := *trc
	c.environments = spec.Environments
	c.inputs, c.seed = spec.Inputs.WithDefaults(), spec.Seed
	return &c
}

// environment makes (or finds in the caches) the environment of a repository item whose source
// declares its dependencies (env), for the checkout in dir, and returns its site-packages folder
// ("" when there is nothing to install). A repository whose environment cannot be made gives a
// reason, starting with envReason: a refused requirement, pip's message. An error is for what a
// retry may fix (the store, the local disk).
func (trc *Tracer) environment(ctx context.Context, it crawl.Item, dir string) (sitePackages, reason string, err error) {
	e := it.Repo.Env
	if e == nil {
		return "", "", nil
	}
	var reqs []pyreq.Requirement
	if e.FromRepository {
		reqs, err = crawl.DeclaredRequirements(ctx, dir)
	} else {
		reqs, err = pyreq.ParseAll("env", e.Requirements)
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		return "", envReason + strings.TrimPrefix(err.Error(), "crawl: "), nil
	}
	if len(reqs) == 0 {
		return "", "", nil
	}
	es := trc.envSpec()
	timeout, err := es.Timeout.Value()
	if err != nil {
		return "", "", BadInput("environments.timeout: %v", err)
	}
	python := ""
	if trc.Sandboxes != nil {
		python = trc.Sandboxes.Config().Python
	}
	cfg := pyenv.Config{Python: python, IndexURL: es.IndexURL, FindLinks: es.FindLinks, AllowSdist: es.AllowSdist,
		Timeout: timeout, MaxBytes: es.MaxBytes}
	cache := &pyenv.Cache{Dir: trc.EnvCache, Store: trc.Store}
	env, err := cache.Ensure(ctx, cfg, reqs)
	var pe *pyenv.Error
	switch {
	case errors.As(err, &pe):
		return "", envReason + pe.Reason, nil
	case err != nil:
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		return "", "", fmt.Errorf("environment of %s: %w", it.Key, err)
	}
	return env.SitePackages, "", nil
}
