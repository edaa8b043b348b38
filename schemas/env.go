package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"

	"gopkg.in/yaml.v3"
)

// EnvFromRepository is the value of a repository source's env that reads the dependencies from
// the checkout (pyproject.toml, requirements files, setup.cfg).
const EnvFromRepository = "repository"

// EnvSpec is a repository source's env: the dependencies its tests need, installed into an
// environment built for it (docs/spec.md). In YAML and JSON it is either a list of requirements
// (PEP 508: name, extras, versions, marker) or the string "repository".
type EnvSpec struct {
	// FromRepository reads the requirements from each checkout.
	FromRepository bool
	// Requirements are the requirements listed in the spec.
	Requirements []string
}

// UnmarshalYAML reads a list of requirements or the string "repository".
func (e *EnvSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var s string
		if err := n.Decode(&s); err != nil {
			return err
		}
		if s != EnvFromRepository {
			return fmt.Errorf("env: %q is neither %q nor a list of requirements", s, EnvFromRepository)
		}
		*e = EnvSpec{FromRepository: true}
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return fmt.Errorf("env: %w", err)
	}
	*e = EnvSpec{Requirements: list}
	return nil
}

// MarshalJSON writes "repository" or the list.
func (e EnvSpec) MarshalJSON() ([]byte, error) {
	if e.FromRepository {
		return json.Marshal(EnvFromRepository)
	}
	if e.Requirements == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(e.Requirements)
}

// UnmarshalJSON reads "repository" or a list.
func (e *EnvSpec) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		if s != EnvFromRepository {
			return fmt.Errorf("env: %q is neither %q nor a list of requirements", s, EnvFromRepository)
		}
		*e = EnvSpec{FromRepository: true}
		return nil
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return fmt.Errorf("env: %w", err)
	}
	*e = EnvSpec{Requirements: list}
	return nil
}

// EnvironmentsSpec configures how repository environments are built (docs/sandbox.md): where
// packages come from, and limits. It applies to every repository source with an env.
type EnvironmentsSpec struct {
	// IndexURL is the package index (PEP 503 simple API) packages are installed from; FindLinks
	// are folders or URLs of wheel files (pip --find-links). With neither set, IndexURL is
	// DefaultIndexURL; with only FindLinks, no index is used.
	IndexURL  string   `yaml:"index_url" json:"index_url,omitempty"`
	FindLinks []string `yaml:"find_links" json:"find_links,omitempty"`
	// AllowSdist lets pip build packages that have no wheel from their source distributions. It
	// is off by default: building runs the package's build code on the worker, outside the
	// sandbox.
	AllowSdist bool `yaml:"allow_sdist" json:"allow_sdist,omitempty"`
	// Timeout bounds one environment's resolution and installation (default 10m); MaxBytes the
	// size of its installed packages (default 512 MiB).
	Timeout  Duration `yaml:"timeout" json:"timeout,omitzero"`
	MaxBytes int64    `yaml:"max_bytes" json:"max_bytes,omitempty"`
}

// Environment defaults.
const (
	DefaultIndexURL    = "https://pypi.org/simple"
	DefaultEnvTimeout  = "10m"
	DefaultEnvMaxBytes = 512 << 20
)

// WithDefaults returns e with its unset fields at their defaults.
func (e EnvironmentsSpec) WithDefaults() EnvironmentsSpec {
	if e.IndexURL == "" && len(e.FindLinks) == 0 {
		e.IndexURL = DefaultIndexURL
	}
	if e.Timeout.IsZero() {
		e.Timeout = parseDuration(DefaultEnvTimeout)
	}
	if e.MaxBytes == 0 {
		e.MaxBytes = DefaultEnvMaxBytes
	}
	e.FindLinks = append([]string(nil), e.FindLinks...)
	return e
}

// validate checks the fields (defaults filled in).
func (e EnvironmentsSpec) validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("spec: environments.%s: %s", field, fmt.Sprintf(format, args...))
	}
	if e.IndexURL != "" {
		if u, err := url.Parse(e.IndexURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return bad("index_url", "%q is not an http(s) URL", e.IndexURL)
		}
	}
	for i, l := range e.FindLinks {
		u, err := url.Parse(l)
		switch {
		case err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "":
		case err == nil && u.Scheme == "" && path.IsAbs(l):
		default:
			return bad(fmt.Sprintf("find_links[%d]", i), "%q is not an http(s) URL or an absolute path", l)
		}
	}
	if d, err := e.Timeout.Value(); err != nil || d <= 0 {
		return bad("timeout", "%q is not a positive duration", e.Timeout.String())
	}
	if e.MaxBytes < 1 {
		return bad("max_bytes", "must be positive")
	}
	return nil
}

// validateEnv checks a repository source's env. The requirements themselves are parsed by
// crawl.CheckRequirements where the spec is loaded (package schemas imports nothing of ndtrace).
func validateEnv(field string, e *EnvSpec) error {
	if e == nil || e.FromRepository {
		return nil
	}
	if len(e.Requirements) == 0 {
		return fmt.Errorf("spec: %s: an empty list (leave env out, or say %q)", field, EnvFromRepository)
	}
	return nil
}

// errNoEnvironments is returned by Validate when environments is set but no source has an env.
var errNoEnvironments = errors.New("spec: environments: no repository source has an env")
