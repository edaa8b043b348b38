package schemas

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Spec describes a dataset: what to trace and how to turn it into rows. It is read from a YAML file
// (docs/spec.md documents every field and its default). A Spec crosses process boundaries (it is a
// Temporal workflow input), so it holds only small values.
type Spec struct {
	// Name names the dataset (default "ndtrace").
	Name string `yaml:"name" json:"name"`
	// License is the dataset card's license (README.md at the dataset root): a Hugging Face Hub
	// license identifier such as apache-2.0, mit, cc-by-4.0 (default "other": the traced code keeps
	// its own licenses).
	License string `yaml:"license" json:"license,omitempty"`
	// Output is the dataset URL: a local folder, file://, s3://, gs:// or azblob:// (default
	// ./ndtrace-data).
	Output string `yaml:"output" json:"output"`
	// Sources lists the code to trace.
	Sources []SourceSpec `yaml:"sources" json:"sources"`
	// Inputs configures generating inputs for functions that come without them (issue 30).
	Inputs InputsSpec `yaml:"inputs" json:"inputs,omitzero"`
	// Directions are the trajectory directions sampled per trace (default [forward, inverse]).
	Directions []string `yaml:"directions" json:"directions"`
	// TrajectoriesPerTrace is the number of trajectories sampled per trace and direction (default 1).
	TrajectoriesPerTrace int `yaml:"trajectories_per_trace" json:"trajectories_per_trace"`
	// ForwardStart is where function-level forward trajectories start: "function" (the call of
	// the function under study, the main() wrapper only in the CODE context; the default, also
	// when empty) or "main" (main's call, two states earlier).
	ForwardStart string `yaml:"forward_start" json:"forward_start,omitempty"`
	// Split assigns rows to dataset splits by function: split names and the share of functions
	// each holds, train taking the rest (SplitSpec; default: every row in train).
	Split SplitSpec `yaml:"split" json:"split,omitempty"`
	// Policy is the action policy: "paper" (default) or "step_into".
	Policy string `yaml:"policy" json:"policy"`
	// Seed seeds every trajectory (each gets its own seed derived from it and the item).
	Seed uint64 `yaml:"seed" json:"seed"`
	// Tokenizer names the tokenizer (default cl100k_base).
	Tokenizer string `yaml:"tokenizer" json:"tokenizer"`
	// Mask is the loss mask: "states" (default) or "all".
	Mask string `yaml:"mask" json:"mask"`
	// MaxTokens caps a trajectory's tokens (default 16384); TooLong is "resample" (default) or
	// "drop".
	MaxTokens int    `yaml:"max_tokens" json:"max_tokens"`
	TooLong   string `yaml:"too_long" json:"too_long"`
	// PackLength, if set, also writes the trajectories packed into sequences of exactly this many
	// tokens (packed shards beside the shards; default 0: no packing). Trajectories longer than it are
	// left out of the packed shards and counted.
	PackLength int `yaml:"pack_length" json:"pack_length,omitempty"`
	// Limits bound each traced run.
	Limits LimitsSpec `yaml:"limits" json:"limits"`
	// BatchSize is the number of items per batch: one batch is one child workflow and one shard
	// (default 64).
	BatchSize int `yaml:"batch_size" json:"batch_size"`
	// Parallelism is the number of batches in flight (default 4).
	Parallelism int `yaml:"parallelism" json:"parallelism"`
	// CreatedAt is recorded in every row. Pin it for byte-identical re-runs; if empty, the run's
	// start time is used.
	CreatedAt string `yaml:"created_at" json:"created_at"`
	// Dedup drops function-level items whose normalized source and input equal an earlier item's
	// (default true).
	Dedup *bool `yaml:"dedup" json:"dedup,omitempty"`
	// DedupAgainst lists earlier datasets (URLs): function-level items already in one of them are
	// duplicates here too (deduplication across runs; each dataset keeps its keys in
	// dedup_keys.json).
	DedupAgainst []string `yaml:"dedup_against" json:"dedup_against,omitempty"`
	// Decontaminate lists evaluation sets: function-level items whose module holds a function of
	// one (exactly, or as a near match by token n-grams) are excluded, and so are repository rows
	// whose CODE context holds one; both are counted per set.
	Decontaminate []EvalSetSpec `yaml:"decontaminate" json:"decontaminate,omitempty"`
	// Environments configures how the environments of repository sources with an env are built:
	// the package index, wheels only or not, limits (schemas/env.go). Filled in with its defaults
	// when a source has an env.
	Environments *EnvironmentsSpec `yaml:"environments" json:"environments,omitempty"`
}

// EvalSetSpec names an evaluation set: a JSONL file whose rows have a "code" field (CruxEval format)
// and optionally an "id" (the name of the item in rejects), and how near a function must be to match.
type EvalSetSpec struct {
	// Name names the set in counts (default: the file's base name without extension).
	Name string `yaml:"name" json:"name"`
	// Path is the file: a local path or bucket URL.
	Path string `yaml:"path" json:"path"`
	// Ngram is the length in tokens of the n-grams near matches compare (default
	// DefaultEvalNgram): a function of a row's CODE matches a function of the set when, on tokens
	// with names anonymised and comments, docstrings and layout dropped, at least Threshold of the
	// n-grams of each are found in the other (crawl/decontam.go).
	Ngram int `yaml:"ngram" json:"ngram,omitempty"`
	// Threshold is the share of n-grams found for a near match, in (0, 1] (default
	// DefaultEvalThreshold).
	Threshold float64 `yaml:"threshold" json:"threshold,omitempty"`
}

// Defaults of an evaluation set's near matches (EvalSetSpec), measured on rewritten CruxEval
// functions against the Python standard library (crawl.TestDecontamRewrites).
const (
	DefaultEvalNgram     = 10
	DefaultEvalThreshold = 0.5
)

// DedupOn reports whether exact deduplication is on (the default).
func (s Spec) DedupOn() bool { return s.Dedup == nil || *s.Dedup }

// SourceSpec is one source of code.
type SourceSpec struct {
	// Kind is "jsonl" (a CruxEval-format corpus: id, code, input), "python" (a Python file and call
	// expressions) or "examples" (ndtrace's built-in examples).
	Kind string `yaml:"kind" json:"kind"`
	// Path is the file (local path or bucket URL) of a jsonl or python source.
	Path string `yaml:"path" json:"path"`
	// Func is the function a jsonl row's input is passed to (default f).
	Func string `yaml:"func" json:"func"`
	// Calls are the call expressions traced in a python source.
	Calls []string `yaml:"calls" json:"calls"`
	// Limit keeps only the first Limit items (0: all).
	Limit int `yaml:"limit" json:"limit"`

	// URL is a repository source's repository: a git URL (https://, ssh://, git@host:path,
	// file://), a local directory, or a tarball (.tar, .tar.gz, .tgz) as a path or bucket URL. Ref
	// is the git ref (default HEAD). List is instead a crawl list: a file of repository URLs, one
	// per line, each optionally followed by a ref.
	URL  string `yaml:"url" json:"url,omitempty"`
	Ref  string `yaml:"ref" json:"ref,omitempty"`
	List string `yaml:"list" json:"list,omitempty"`
	// TrustList lets the lines of List name local folders, file URLs, tarballs in buckets and ssh
	// repositories, read with the worker's own access. Off by default: a crawl list is data (made
	// by a crawl, or by someone else), and its lines may name only git repositories over
	// anonymous transports (https, http, git), never the worker's own files, buckets or ssh
	// identity.
	TrustList bool `yaml:"trust_list" json:"trust_list,omitempty"`
	// Runner is the test runner: pytest, unittest, or empty for pytest when it is available. A
	// runner that finds no test falls back to the other one (counted as runner_fallback:RUNNER).
	Runner string `yaml:"runner" json:"runner,omitempty"`
	// PythonPath lists directories of site-packages that the repositories' tests import from, and
	// Venv a virtualenv whose site-packages is added (docs/sandbox.md). They are mounted read-only
	// in the sandbox; nothing is installed.
	PythonPath []string `yaml:"python_path" json:"python_path,omitempty"`
	Venv       string   `yaml:"venv" json:"venv,omitempty"`
	// Env declares the tests' dependencies, installed into an environment built for the
	// repository from the package index of Spec.Environments: a list of requirements, or
	// "repository" to read them from the checkout (see EnvSpec).
	Env *EnvSpec `yaml:"env" json:"env,omitempty"`
	// MaxTests caps the tests run per repository (default 500), in collection order.
	MaxTests int `yaml:"max_tests" json:"max_tests,omitempty"`
	// Functions makes the repository's module-level functions called by its tests function-level
	// items too, with the arguments observed in the traces as inputs (true or "tests", the
	// default); "all" also every function and method of its modules, with inputs generated for
	// them (Inputs; issue 30); false none.
	Functions *FunctionsMode `yaml:"functions" json:"functions,omitempty"`
	// Reexecute traces each test of a repository twice, in the same order, and compares the two
	// traces (default true): a test whose runs differ in their events (kinds, files, lines,
	// functions, depths) is quarantined (counted as tests_nondeterministic), and a value that
	// differs between them (ids, hashes, times) reads "<nondeterministic>" (counted as
	// values_nondeterministic), so that the same spec gives the same rows. It doubles the time
	// of the traced runs. The function-level items found in the tests are traced twice likewise.
	Reexecute *bool `yaml:"reexecute" json:"reexecute,omitempty"`
	// FrozenClock makes time.time and time.time_ns return one fixed instant
	// (2000-01-01T00:00:00Z) in the repository's test runs, traced or not (default false):
	// timestamps then repeat from run to run. Clocks that measure durations (time.monotonic,
	// time.perf_counter) and datetime.now keep running.
	FrozenClock bool `yaml:"frozen_clock" json:"frozen_clock,omitempty"`
	// Files sources (kind files, issue 30): Python files whose functions come without inputs.
	// Path is a local folder, a bucket prefix, or a Parquet or JSONL file (or a folder or prefix
	// of such shards); Format says which when the name does not (folder, parquet, jsonl).
	Format string `yaml:"format" json:"format,omitempty"`
	// ContentColumn names the column holding a file's text (default "content"); PathColumn,
	// RepoColumn and LicenseColumn optional columns with its path, repository and license.
	ContentColumn string `yaml:"content_column" json:"content_column,omitempty"`
	PathColumn    string `yaml:"path_column" json:"path_column,omitempty"`
	RepoColumn    string `yaml:"repo_column" json:"repo_column,omitempty"`
	LicenseColumn string `yaml:"license_column" json:"license_column,omitempty"`
	// FilesPerItem bounds the files grouped into one item (default 16): files of one repository
	// (RepoColumn) are grouped together, so that their imports of each other work.
	FilesPerItem int `yaml:"files_per_item" json:"files_per_item,omitempty"`
}

// Defaults and bounds of a files source.
const (
	DefaultFilesPerItem  = 16
	MaxFilesPerItem      = 1000
	DefaultContentColumn = "content"
)

// FunctionsOn reports whether a repository source also yields function-level items (the default).
func (s SourceSpec) FunctionsOn() bool { return s.Functions == nil || *s.Functions != FunctionsModeOff }

// FunctionsAll reports whether a repository source also yields items of every function and
// method of its modules, with generated inputs (functions: all).
func (s SourceSpec) FunctionsAll() bool {
	return s.Functions != nil && *s.Functions == FunctionsModeAll
}

// ReexecuteOn reports whether a repository source's tests are traced twice and compared (the
// default).
func (s SourceSpec) ReexecuteOn() bool { return s.Reexecute == nil || *s.Reexecute }

// LimitsSpec bounds traced runs (see sandbox.Limits).
type LimitsSpec struct {
	Timeout    Duration `yaml:"timeout" json:"timeout"`         // default 10s
	MaxEvents  int      `yaml:"max_events" json:"max_events"`   // default 100000
	ValueChars int      `yaml:"value_chars" json:"value_chars"` // default 1000
	// Repository checkouts: the largest repository in bytes and files, and the longest checkout.
	RepoBytes       int64    `yaml:"repo_bytes" json:"repo_bytes,omitempty"`            // default 256 MiB
	RepoFiles       int      `yaml:"repo_files" json:"repo_files,omitempty"`            // default 20000
	CheckoutTimeout Duration `yaml:"checkout_timeout" json:"checkout_timeout,omitzero"` // default 5m
}

// Spec defaults.
const (
	DefaultOutput      = "./ndtrace-data"
	DefaultBatchSize   = 64
	DefaultParallelism = 4
	// MaxPackLength is the longest pack_length.
	MaxPackLength = 1 << 20
	// DefaultTimeout is limits.timeout's default; DefaultCheckoutTimeout limits.checkout_timeout's.
	DefaultTimeout         = "10s"
	DefaultCheckoutTimeout = "5m"
)

// ParseSpec reads a YAML spec, rejecting unknown fields, fills in defaults and validates it. Errors
// name the field. The requirements of an env list are parsed above schemas, by
// crawl.CheckRequirements, which a spec's loader calls next.
func ParseSpec(data []byte) (Spec, error) {
	var s Spec
	// Fields are checked on the document first, for errors that name them by their path in the
	// spec (sources[0]: unknown field "limt" (did you mean "limit"?)), not by Go type.
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err == nil {
		if err := checkFields(&doc, reflect.TypeFor[Spec]()); err != nil {
			return Spec{}, fmt.Errorf("spec: %w", err)
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("spec: %w", err)
	}
	s = s.WithDefaults()
	return s, s.Validate()
}

// WithDefaults returns s with every unset field at its default.
func (s Spec) WithDefaults() Spec {
	if s.Name == "" {
		s.Name = "ndtrace"
	}
	if s.Output == "" {
		s.Output = DefaultOutput
	}
	if len(s.Directions) == 0 {
		s.Directions = []string{"forward", "inverse"}
	}
	if s.TrajectoriesPerTrace == 0 {
		s.TrajectoriesPerTrace = 1
	}
	if s.Policy == "" {
		s.Policy = "paper"
	}
	if s.Tokenizer == "" {
		s.Tokenizer = "cl100k_base"
	}
	if s.Mask == "" {
		s.Mask = "states"
	}
	if s.MaxTokens == 0 {
		s.MaxTokens = 16384
	}
	if s.TooLong == "" {
		s.TooLong = "resample"
	}
	if s.Limits.Timeout.IsZero() {
		s.Limits.Timeout = parseDuration(DefaultTimeout)
	}
	if s.Limits.MaxEvents == 0 {
		s.Limits.MaxEvents = 100000
	}
	if s.Limits.ValueChars == 0 {
		s.Limits.ValueChars = 1000
	}
	if s.BatchSize == 0 {
		s.BatchSize = DefaultBatchSize
	}
	if s.Parallelism == 0 {
		s.Parallelism = DefaultParallelism
	}
	if s.Limits.RepoBytes == 0 {
		s.Limits.RepoBytes = 256 << 20
	}
	if s.Limits.RepoFiles == 0 {
		s.Limits.RepoFiles = 20000
	}
	if s.Limits.CheckoutTimeout.IsZero() {
		s.Limits.CheckoutTimeout = parseDuration(DefaultCheckoutTimeout)
	}
	s.Sources = append([]SourceSpec(nil), s.Sources...)
	for i := range s.Sources {
		if s.Sources[i].Kind == "jsonl" && s.Sources[i].Func == "" {
			s.Sources[i].Func = "f"
		}
		if s.Sources[i].Kind == "repository" && s.Sources[i].MaxTests == 0 {
			s.Sources[i].MaxTests = 500
		}
		if s.Sources[i].Kind == "files" {
			if s.Sources[i].ContentColumn == "" {
				s.Sources[i].ContentColumn = DefaultContentColumn
			}
			if s.Sources[i].FilesPerItem == 0 {
				s.Sources[i].FilesPerItem = DefaultFilesPerItem
			}
		}
		if s.Sources[i].Env != nil && s.Environments == nil {
			s.Environments = &EnvironmentsSpec{}
		}
	}
	if s.Environments != nil {
		e := s.Environments.WithDefaults()
		s.Environments = &e
	}
	if s.Inputs != (InputsSpec{}) || s.generates() {
		s.Inputs = s.Inputs.WithDefaults()
	}
	s.Decontaminate = append([]EvalSetSpec(nil), s.Decontaminate...)
	for i, e := range s.Decontaminate {
		if e.Name == "" {
			base := path.Base(e.Path)
			s.Decontaminate[i].Name = strings.TrimSuffix(base, path.Ext(base))
		}
		if e.Ngram == 0 {
			s.Decontaminate[i].Ngram = DefaultEvalNgram
		}
		if e.Threshold == 0 {
			s.Decontaminate[i].Threshold = DefaultEvalThreshold
		}
	}
	return s
}

// Validate checks every field and names the first bad one.
// licenseRE matches a Hugging Face Hub license identifier.
var licenseRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.+-]{0,63}$`)

func (s Spec) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("spec: %s: %s", field, fmt.Sprintf(format, args...))
	}
	if len(s.Sources) == 0 {
		return bad("sources", "at least one source is required")
	}
	if s.License != "" && !licenseRE.MatchString(s.License) {
		return bad("license", "%q is not a license identifier (lowercase letters, digits, '.', '-', '+', as the Hugging Face Hub lists them: apache-2.0, mit, cc-by-4.0, other)", s.License)
	}
	for i, src := range s.Sources {
		f := fmt.Sprintf("sources[%d]", i)
		switch src.Kind {
		case "jsonl":
			if src.Path == "" {
				return bad(f+".path", "a jsonl source needs a path")
			}
		case "python":
			if src.Path == "" {
				return bad(f+".path", "a python source needs a path")
			}
			if len(src.Calls) == 0 {
				return bad(f+".calls", "a python source needs at least one call expression")
			}
			for j, c := range src.Calls {
				if strings.TrimSpace(c) == "" {
					return bad(fmt.Sprintf("%s.calls[%d]", f, j), "empty call expression")
				}
			}
		case "examples":
		case "repository":
			if (src.URL == "") == (src.List == "") {
				return bad(f+".url", "a repository source needs exactly one of url and list")
			}
			if src.Ref != "" && src.URL == "" {
				return bad(f+".ref", "a ref goes with url (a crawl list gives refs per line)")
			}
			if src.TrustList && src.List == "" {
				return bad(f+".trust_list", "goes with list")
			}
			if src.Runner != "" && src.Runner != "pytest" && src.Runner != "unittest" {
				return bad(f+".runner", "%q is not pytest or unittest", src.Runner)
			}
			if src.MaxTests < 0 {
				return bad(f+".max_tests", "must not be negative")
			}
			if err := validateRepoEnv(f, src); err != nil {
				return err
			}
		case "files":
			if err := validateFiles(f, src); err != nil {
				return err
			}
		case "":
			return bad(f+".kind", "missing (jsonl, python, repository, files or examples)")
		default:
			return bad(f+".kind", "unknown kind %q (jsonl, python, repository, files or examples)", src.Kind)
		}
		if src.Kind != "repository" && src.Kind != "files" && (src.URL != "" || src.List != "" || src.Ref != "" || src.Runner != "" || len(src.PythonPath) > 0 || src.Venv != "" || src.Env != nil || src.MaxTests != 0 || src.Functions != nil || src.Reexecute != nil || src.FrozenClock) {
			return bad(f, "url, ref, list, runner, python_path, venv, env, max_tests, functions, reexecute and frozen_clock are for repository sources")
		}
		if src.Kind != "files" && (src.Format != "" || src.ContentColumn != "" || src.PathColumn != "" || src.RepoColumn != "" || src.LicenseColumn != "" || src.FilesPerItem != 0) {
			return bad(f, "format, content_column, path_column, repo_column, license_column and files_per_item are for files sources")
		}
		if src.Limit < 0 {
			return bad(f+".limit", "must not be negative")
		}
	}
	if s.Environments != nil {
		if err := s.Environments.validate(); err != nil {
			return err
		}
		if !slices.ContainsFunc(s.Sources, func(src SourceSpec) bool { return src.Env != nil }) {
			return errNoEnvironments
		}
	}
	if err := s.Inputs.validate(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, d := range s.Directions {
		if d != "forward" && d != "inverse" {
			return bad(fmt.Sprintf("directions[%d]", i), "%q is not forward or inverse", d)
		}
		if seen[d] {
			return bad(fmt.Sprintf("directions[%d]", i), "%q given twice", d)
		}
		seen[d] = true
	}
	if s.TrajectoriesPerTrace < 1 || s.TrajectoriesPerTrace > 1000 {
		return bad("trajectories_per_trace", "%d is not between 1 and 1000", s.TrajectoriesPerTrace)
	}
	if s.ForwardStart != "" && s.ForwardStart != ForwardStartFunction && s.ForwardStart != ForwardStartMain {
		return bad("forward_start", "%q is not function or main", s.ForwardStart)
	}
	if err := s.Split.Validate(); err != nil {
		return err
	}
	if s.Policy != "paper" && s.Policy != "step_into" {
		return bad("policy", "%q is not paper or step_into", s.Policy)
	}
	if s.Mask != "states" && s.Mask != "all" {
		return bad("mask", "%q is not states or all", s.Mask)
	}
	if s.MaxTokens < 64 {
		return bad("max_tokens", "%d is below 64", s.MaxTokens)
	}
	if s.PackLength != 0 && (s.PackLength < 64 || s.PackLength > MaxPackLength) {
		return bad("pack_length", "%d is not 0 (no packing) or between 64 and %d", s.PackLength, MaxPackLength)
	}
	if s.TooLong != "resample" && s.TooLong != "drop" {
		return bad("too_long", "%q is not resample or drop", s.TooLong)
	}
	if d, err := s.Limits.Timeout.Value(); err != nil || d <= 0 {
		return bad("limits.timeout", "%q is not a positive duration", s.Limits.Timeout.String())
	}
	if s.Limits.MaxEvents < 1 {
		return bad("limits.max_events", "must be positive")
	}
	if s.Limits.ValueChars < 1 {
		return bad("limits.value_chars", "must be positive")
	}
	if s.Limits.RepoBytes < 1 {
		return bad("limits.repo_bytes", "must be positive")
	}
	if s.Limits.RepoFiles < 1 {
		return bad("limits.repo_files", "must be positive")
	}
	if d, err := s.Limits.CheckoutTimeout.Value(); err != nil || d <= 0 {
		return bad("limits.checkout_timeout", "%q is not a positive duration", s.Limits.CheckoutTimeout.String())
	}
	for i, u := range s.DedupAgainst {
		if strings.TrimSpace(u) == "" {
			return bad(fmt.Sprintf("dedup_against[%d]", i), "empty dataset URL")
		}
		if !s.DedupOn() {
			return bad(fmt.Sprintf("dedup_against[%d]", i), "dedup is off")
		}
	}
	for i, e := range s.Decontaminate {
		if e.Path == "" {
			return bad(fmt.Sprintf("decontaminate[%d].path", i), "an evaluation set needs a path")
		}
		if e.Ngram != 0 && (e.Ngram < 4 || e.Ngram > 64) {
			return bad(fmt.Sprintf("decontaminate[%d].ngram", i), "%d is not between 4 and 64", e.Ngram)
		}
		if e.Threshold != 0 && !(e.Threshold > 0 && e.Threshold <= 1) {
			return bad(fmt.Sprintf("decontaminate[%d].threshold", i), "%g is not in (0, 1]", e.Threshold)
		}
		for j := range i {
			if s.Decontaminate[j].Name == e.Name {
				return bad(fmt.Sprintf("decontaminate[%d].name", i), "%q given twice", e.Name)
			}
		}
	}
	if s.BatchSize < 1 || s.BatchSize > 100000 {
		return bad("batch_size", "%d is not between 1 and 100000", s.BatchSize)
	}
	if s.Parallelism < 1 || s.Parallelism > 1000 {
		return bad("parallelism", "%d is not between 1 and 1000", s.Parallelism)
	}
	if s.CreatedAt != "" {
		if _, err := time.Parse(time.RFC3339, s.CreatedAt); err != nil {
			return bad("created_at", "%q is not an RFC 3339 time", s.CreatedAt)
		}
	}
	return nil
}

// validateRepoEnv checks the fields a repository and a files source share: python_path, venv
// (absolute paths) and env.
func validateRepoEnv(f string, src SourceSpec) error {
	for j, p := range append(append([]string(nil), src.PythonPath...), src.Venv) {
		field := fmt.Sprintf("%s.python_path[%d]", f, j)
		if j == len(src.PythonPath) {
			field = f + ".venv"
		}
		if p != "" && !path.IsAbs(p) {
			return fmt.Errorf("spec: %s: %q is not an absolute path", field, p)
		}
	}
	return validateEnv(f+".env", src.Env)
}

// filesColumnRE matches a column name of a files source.
var filesColumnRE = regexp.MustCompile(`^[^\x00-\x1f\x7f]{1,128}$`)

// validateFiles checks a files source (f its field): a path, a known format, column names,
// files_per_item, and none of the fields of the other kinds.
func validateFiles(f string, src SourceSpec) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("spec: %s.%s: %s", f, field, fmt.Sprintf(format, args...))
	}
	if src.Path == "" {
		return bad("path", "a files source needs a path (a folder, a bucket prefix, or Parquet or JSONL shards)")
	}
	for _, x := range []struct {
		field string
		set   bool
	}{
		{"url", src.URL != ""}, {"list", src.List != ""}, {"ref", src.Ref != ""}, {"trust_list", src.TrustList},
		{"runner", src.Runner != ""}, {"max_tests", src.MaxTests != 0}, {"functions", src.Functions != nil},
		{"calls", len(src.Calls) > 0}, {"func", src.Func != ""},
	} {
		if x.set {
			return bad(x.field, "not for a files source (its files come from path; their functions all get generated inputs)")
		}
	}
	switch src.Format {
	case "", "folder", "parquet", "jsonl":
	default:
		return bad("format", "%q is not folder, parquet or jsonl", src.Format)
	}
	for _, c := range []struct{ field, v string }{
		{"content_column", src.ContentColumn}, {"path_column", src.PathColumn}, {"repo_column", src.RepoColumn}, {"license_column", src.LicenseColumn},
	} {
		if c.v != "" && !filesColumnRE.MatchString(c.v) {
			return bad(c.field, "%q is not a column name (1 to 128 bytes, no control characters)", c.v)
		}
		if c.v != "" && src.Format == "folder" && (c.field != "content_column" || c.v != DefaultContentColumn) {
			return bad(c.field, "a folder of .py files has no columns (format folder)")
		}
	}
	if src.FilesPerItem < 0 || src.FilesPerItem > MaxFilesPerItem {
		return bad("files_per_item", "%d is not between 1 and %d", src.FilesPerItem, MaxFilesPerItem)
	}
	if src.Env != nil && src.Env.FromRepository {
		return bad("env", "%q reads a repository's requirements: a files source has none; list the requirements", EnvFromRepository)
	}
	return validateRepoEnv(f, src)
}

// Hash is a stable hash of everything in s that changes the rows produced (not Output, Name,
// License, Parallelism or CreatedAt).
func (s Spec) Hash() string {
	c := s
	c.Output, c.Name, c.License, c.Parallelism, c.CreatedAt = "", "", "", 0, ""
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
