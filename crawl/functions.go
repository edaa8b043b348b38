package crawl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/ndtrace/ndtrace/schemas"
)

// Item is one function-level call to trace.
type Item struct {
	// Key identifies the item within its source ("corpus.jsonl#sample_0", "f.py#2").
	Key string `json:"key"`
	// Path is the source file; SourceID the corpus row id or call index.
	Path     string `json:"path"`
	SourceID string `json:"source_id"`
	// Code is the module source, Filename what it is compiled as, Call the traced expression.
	Code     string `json:"code"`
	Filename string `json:"filename"`
	Call     string `json:"call"`
	// QualName is the called function's name when known.
	QualName string `json:"qualname"`
	// Func is, for a function-level item found in a repository, the called function's own source
	// (Code is its whole module): what deduplication and decontamination compare. Empty otherwise.
	Func string `json:"func,omitempty"`
	// RepoURL and Commit name the repository a function-level item was found in.
	RepoURL string `json:"repo_url,omitempty"`
	Commit  string `json:"commit,omitempty"`
	// Module is, for a function-level item found in a repository, its module's dotted name
	// relative to the repository's import roots (ImportRoots; "pkg.sub.mod", "pkg" for
	// pkg/__init__.py): the sandbox imports the module as part of its package, from the checkout,
	// and Path (the module's file relative to the checkout) is the file it traces. Empty for an
	// item whose module is run as a standalone file (every corpus item, and a repository's module
	// that has no importable name).
	Module string `json:"module,omitempty"`
	// Deps is, for a function-level item found in a repository, the hex SHA-256 of what its module
	// runs of the repository besides its call: the module and the repository's own modules it
	// imports (and the requirements of its environment, if any), or the checkout's pin where
	// those cannot be determined statically (see testcalls.Items). It is part of the item's dedup key, so that an item is a duplicate only
	// of one that runs the same code (not of its hash: see Hash). Empty for every other item.
	Deps string `json:"deps,omitempty"`
	// InputSource is how the item's input was made (schemas.InputSource*): empty for corpus items
	// (read as "corpus"), test_call for calls seen in a repository's tests, or the generator's.
	InputSource string `json:"input_source,omitempty"`
	// Repo is set instead of Code and Call for a repository-level item: the repository whose test
	// suite is run and traced.
	Repo *RepoTarget `json:"repo,omitempty"`
}

// ItemKind is what an item runs: exactly one of its kinds' fields is set.
type ItemKind uint8

// Item kinds.
const (
	// FunctionCall is one call of a function: Code is its module, Call the expression traced
	// (RepoURL and Commit name the repository it was found in, if any).
	FunctionCall ItemKind = iota
	// RepositoryTests is a repository's test suite, run and traced test by test: Repo.
	RepositoryTests
)

// Level is the level of the rows an item of kind k gives: "function" or "repository".
func (k ItemKind) Level() string {
	if k == RepositoryTests {
		return "repository"
	}
	return "function"
}

// Kind is what the item runs.
func (it Item) Kind() ItemKind {
	if it.Repo != nil {
		return RepositoryTests
	}
	return FunctionCall
}

// RepoTarget is a repository-level item: a pinned repository and how to run its tests.
type RepoTarget struct {
	Resolved Resolved `json:"resolved"`
	// Runner is pytest, unittest, or empty for pytest when available.
	Runner string `json:"runner,omitempty"`
	// PythonPath and Venv provide the tests' dependencies (see schemas.SourceSpec).
	PythonPath []string `json:"python_path,omitempty"`
	Venv       string   `json:"venv,omitempty"`
	// Env declares the dependencies installed into an environment built for the repository (see
	// schemas.SourceSpec.Env; the pipeline builds it with package pyenv).
	Env *schemas.EnvSpec `json:"env,omitempty"`
	// MaxTests caps the tests run; Functions also makes function-level items of the module-level
	// functions the tests call.
	MaxTests  int  `json:"max_tests"`
	Functions bool `json:"functions"`
	// FunctionsAll also generates inputs for every function and method of the repository's
	// modules, beyond those its tests call (functions: all; issue 30). NoTests skips the tests:
	// a group of files of a files source, which has none. Both left out of the JSON when false.
	FunctionsAll bool `json:"functions_all,omitempty"`
	NoTests      bool `json:"no_tests,omitempty"`
	// TraceOnce traces every test once; else each is traced a second time and only what both
	// runs agree on is kept (Reexecutes; see schemas.SourceSpec.Reexecute). FrozenClock freezes
	// time.time in the tests' runs (see schemas.SourceSpec.FrozenClock). Both are left out of the
	// item's JSON (and so of its hash) at their defaults.
	TraceOnce   bool `json:"trace_once,omitempty"`
	FrozenClock bool `json:"frozen_clock,omitempty"`
}

// Reexecutes reports whether the repository's tests are traced twice and compared.
func (r *RepoTarget) Reexecutes() bool { return !r.TraceOnce }

// Origin is the source the item's rejects are recorded under: the repository a function was found
// in, or else the item's path.
func (it Item) Origin() string {
	if it.RepoURL != "" {
		return it.RepoURL
	}
	return it.Path
}

// Hash is the item's content hash: it changes exactly when what is traced changes (for a
// repository: its commit or content hash, and how its tests are run). Deps and Module are left
// out: an item found in a repository has its repository's commit or content hash (Commit), which
// with the spec (whose hash salts every batch's) fixes what Deps covers and the module's name, so
// every item keeps the hash it had before them.
func (it Item) Hash() string {
	h := sha256.New()
	for _, f := range []string{it.Key, it.Filename, it.Code, it.Call} {
		fmt.Fprintf(h, "%d:%s;", len(f), f)
	}
	if it.Func != "" || it.RepoURL != "" || it.Repo != nil {
		repo, _ := json.Marshal(it.Repo)
		for _, f := range []string{it.Func, it.RepoURL, it.Commit, string(repo)} {
			fmt.Fprintf(h, "%d:%s;", len(f), f)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// DedupKey is the item's key of exact deduplication (see the function DedupKey): its function's
// source (Func, or else Code) and its call, and for an item found in a repository the code its
// module runs of the repository (Deps; see dedupKeyDeps). An item without Deps (every corpus
// item) keeps the key DedupKey gives.
func (it Item) DedupKey() string {
	code := it.Func
	if code == "" {
		code = it.Code
	}
	if it.Deps != "" {
		return dedupKeyDeps(code, it.Call, it.Deps)
	}
	return DedupKey(code, it.Call)
}

// Source is the function source decontamination compares: Func, or else Code.
func (it Item) Source() string {
	if it.Func != "" {
		return it.Func
	}
	return it.Code
}

// repoItem is the repository-level item of a resolved repository.
func repoItem(res Resolved, src schemas.SourceSpec) Item {
	maxTests := src.MaxTests
	if maxTests == 0 {
		maxTests = 500
	}
	return Item{Key: res.Key, Path: redactURL(res.URL), SourceID: res.Pin(), QualName: "",
		Repo: &RepoTarget{Resolved: res, Runner: src.Runner, PythonPath: src.PythonPath, Venv: src.Venv, Env: src.Env,
			MaxTests: maxTests, Functions: src.FunctionsOn(), FunctionsAll: src.FunctionsAll(), TraceOnce: !src.ReexecuteOn(), FrozenClock: src.FrozenClock}}
}

// funcName is the function a call expression calls, if it is a plain name.
func funcName(call string) string {
	if i := strings.IndexByte(call, '('); i > 0 {
		return strings.TrimSpace(call[:i])
	}
	return ""
}

// ReadFile reads a local path or a bucket URL (s3://bucket/key?…, gs://…, azblob://…, file:///…).
func ReadFile(ctx context.Context, p string) ([]byte, error) {
	r, err := OpenAt(ctx, p, 0)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("crawl: read %s: %w", p, err)
	}
	return data, nil
}
