// Package pyenv builds the Python environments that repositories' tests import their dependencies
// from, on the worker and outside the sandbox, and caches them: in the dataset's store for every
// worker (envs/<hash>.tar and envs/<hash>.json), and extracted in a local folder that the sandbox
// mounts read-only.
//
// An environment is made in three steps. Resolution runs pip's install --dry-run --report against
// the configured index only (or find-links folders), wheels only unless sdists are allowed, with
// pip isolated from any configuration; the resolved set (names, versions, wheel hashes) with the
// interpreter's version and platform is the environment's hash. Installation installs exactly that
// set (--no-deps, by hash when every hash is known) into a virtualenv of the sandbox's
// interpreter. Its site-packages is then archived into the store (write-once: a concurrent builder
// of the same hash adopts the stored archive) and extracted into the local cache, world-readable.
//
// Resolutions are cached too (envs/requests/<key>.json): the same requirements with the same
// index, interpreter and options give the same environment again without running pip, so that
// re-runs of a dataset see the same packages.
package pyenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ndtrace/ndtrace/crawl/pyreq"
	"github.com/ndtrace/ndtrace/internal/userdirs"
	"github.com/ndtrace/ndtrace/store"
)

// DefaultPython is the interpreter environments are made for (the sandbox's default).
const DefaultPython = "/usr/bin/python3"

// Format is the version of the layout of environments and of their hash: a change of either makes
// new hashes.
const Format = 1

// Config says how environments are built.
type Config struct {
	// Python is the interpreter (default DefaultPython): the one the sandbox runs.
	Python string
	// IndexURL is the package index; FindLinks are folders or URLs of wheels. At least one must be
	// set; without IndexURL pip uses no index.
	IndexURL  string
	FindLinks []string
	// AllowSdist lets pip build from source distributions (build code runs on the worker).
	AllowSdist bool
	// Timeout bounds the resolution and installation of one environment (default 10 minutes).
	Timeout time.Duration
	// MaxBytes caps the size of an environment's installed files (default 512 MiB).
	MaxBytes int64
}

func (c Config) withDefaults() Config {
	if c.Python == "" {
		c.Python = DefaultPython
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 512 << 20
	}
	return c
}

// Cache finds, builds and stores environments.
type Cache struct {
	// Dir is the local folder of extracted environments (default userdirs.EnvsDir: per user). It
	// must not be under /tmp: the sandbox mounts environments read-only at their host paths, and
	// its private /tmp would hide them. It must also not be
	// under /tmp, and the sandbox's unprivileged uid must be able to reach it.
	Dir string
	// Store is the shared cache: the dataset's store (nil: environments are cached on this worker
	// only).
	Store *store.Store
	// OnPip, if set, is told of every pip run (tests count them).
	OnPip func(args []string)
}

// Env is a ready environment.
type Env struct {
	// Hash identifies it; Dir is its local folder; SitePackages the folder to put on sys.path
	// (empty, like Dir, when the requirements install nothing on this interpreter).
	Hash         string
	Dir          string
	SitePackages string
	Packages     []Package
}

// Package is one installed distribution.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// SHA256 is the hex SHA-256 of the wheel installed, when pip reported it; File its file name.
	SHA256 string `json:"sha256,omitempty"`
	File   string `json:"file,omitempty"`
}

// Error is an environment that cannot be built, and why (pip's message): a reason for a reject,
// not something a retry fixes.
type Error struct {
	Reason string
}

func (e *Error) Error() string { return e.Reason }

// Descriptor is what is stored beside an environment's archive (envs/<hash>.json) and in its local
// folder (ndtrace-env.json).
type Descriptor struct {
	Format   int       `json:"format"`
	Hash     string    `json:"hash"`
	Python   PyInfo    `json:"python"`
	Packages []Package `json:"packages"`
	// Bytes and Files measure the installed files; ArchiveSHA256 is the stored archive's digest.
	Bytes         int64  `json:"bytes"`
	Files         int    `json:"files"`
	ArchiveSHA256 string `json:"archive_sha256,omitempty"`
}

// descriptorFile is the name of the descriptor in an environment's local folder.
const descriptorFile = "ndtrace-env.json"

// Keys in the store.
func archiveKey(hash string) string    { return "envs/" + hash + ".tar" }
func descriptorKey(hash string) string { return "envs/" + hash + ".json" }
func requestKey(key string) string     { return "envs/requests/" + key + ".json" }

// request is a resolution remembered: the requirements and options asked for, and the
// environment they gave.
type request struct {
	Requirements []string `json:"requirements"`
	Env          string   `json:"env"`
	Packages     int      `json:"packages"`
}

// locks serializes the work on one request within this process.
var locks sync.Map // string -> *sync.Mutex

func lock(name string) func() {
	m, _ := locks.LoadOrStore(name, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Ensure returns the environment of reqs: from the local cache, from the store, or built. An
// environment that cannot be built is an *Error with pip's reason; other errors (the store, the
// local disk, ctx) may be retried.
func (c *Cache) Ensure(ctx context.Context, cfg Config, reqs []pyreq.Requirement) (Env, error) {
	cfg = cfg.withDefaults()
	if cfg.IndexURL == "" && len(cfg.FindLinks) == 0 {
		return Env{}, errors.New("pyenv: no package index and no find-links")
	}
	if len(reqs) == 0 {
		return Env{}, nil
	}
	dir := c.Dir
	if dir == "" {
		var err error
		if dir, err = userdirs.EnvsDir(); err != nil {
			return Env{}, fmt.Errorf("pyenv: %w", err)
		}
	}
	if err := makeDir(dir); err != nil {
		return Env{}, err
	}
	py, err := pythonInfo(ctx, cfg.Python)
	if err != nil {
		return Env{}, err
	}
	texts := make([]string, len(reqs))
	for i, r := range reqs {
		texts[i] = r.String()
	}
	rkey := requestHash(cfg, py, texts)
	defer lock(dir + "\x00" + rkey)()

	// A request resolved before, by this worker or another.
	if rq, ok, err := c.readRequest(ctx, dir, rkey); err != nil {
		return Env{}, err
	} else if ok {
		if rq.Packages == 0 {
			return Env{Hash: rq.Env}, nil
		}
		env, ok, err := c.find(ctx, dir, rq.Env, cfg.MaxBytes)
		if err != nil || ok {
			return env, err
		}
	}

	ctx, cancel := context.WithTimeoutCause(ctx, cfg.Timeout, errTimeout)
	defer cancel()
	work, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return Env{}, fmt.Errorf("pyenv: %w", err)
	}
	defer os.RemoveAll(work)
	b := &builder{cfg: cfg, py: py, work: work, onPip: c.OnPip}
	pkgs, err := b.resolve(ctx, texts)
	if err != nil {
		return Env{}, timeoutReason(ctx, cfg, err)
	}
	hash := envHash(py, pkgs)
	rq := request{Requirements: texts, Env: hash, Packages: len(pkgs)}
	if len(pkgs) == 0 {
		return Env{Hash: hash}, c.writeRequest(ctx, dir, rkey, rq)
	}
	env, ok, err := c.find(ctx, dir, hash, cfg.MaxBytes)
	if err != nil {
		return Env{}, err
	}
	if !ok {
		if env, err = c.build(ctx, b, dir, hash, pkgs); err != nil {
			return Env{}, timeoutReason(ctx, cfg, err)
		}
	}
	return env, c.writeRequest(ctx, dir, rkey, rq)
}

// errTimeout is the cause of the end of a build that took longer than Config.Timeout.
var errTimeout = errors.New("environment timeout")

// timeoutReason turns the error of a build cut off by Config.Timeout into an *Error.
func timeoutReason(ctx context.Context, cfg Config, err error) error {
	if errors.Is(context.Cause(ctx), errTimeout) {
		return &Error{Reason: fmt.Sprintf("not built within %s", cfg.Timeout)}
	}
	return err
}

// find returns the environment hash from the local cache or, extracted from the store, if either
// has it.
func (c *Cache) find(ctx context.Context, dir, hash string, maxBytes int64) (Env, bool, error) {
	local := filepath.Join(dir, hash)
	if d, err := readDescriptor(local); err == nil {
		return envOf(local, d), true, nil
	}
	if c.Store == nil {
		return Env{}, false, nil
	}
	switch ok, err := c.Store.Exists(ctx, archiveKey(hash)); {
	case err != nil:
		return Env{}, false, err
	case !ok:
		return Env{}, false, nil
	}
	env, err := c.fetch(ctx, dir, hash, maxBytes)
	return env, err == nil, err
}

// fetch extracts the stored environment hash into the local cache, checking the archive against
// its stored descriptor when there is one.
func (c *Cache) fetch(ctx context.Context, dir, hash string, maxBytes int64) (Env, error) {
	var want string
	switch data, err := c.Store.ReadLimit(ctx, descriptorKey(hash), 16<<20); {
	case err == nil:
		var d Descriptor
		if err := json.Unmarshal(data, &d); err != nil {
			return Env{}, fmt.Errorf("pyenv: stored descriptor of %s: %w", hash, err)
		}
		want = d.ArchiveSHA256
	case !store.IsNotExist(err):
		return Env{}, err
	}
	r, err := c.Store.NewRangeReader(ctx, archiveKey(hash), 0, -1)
	if err != nil {
		return Env{}, err
	}
	defer r.Close()
	tmp, err := os.MkdirTemp(dir, ".fetch-")
	if err != nil {
		return Env{}, fmt.Errorf("pyenv: %w", err)
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "env")
	sum := sha256.New()
	if err := Extract(io.TeeReader(r, sum), root, maxBytes+descriptorMax); err != nil {
		return Env{}, fmt.Errorf("pyenv: extract %s: %w", archiveKey(hash), err)
	}
	if _, err := io.Copy(sum, r); err != nil { // the tar's end padding
		return Env{}, fmt.Errorf("pyenv: read %s: %w", archiveKey(hash), err)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); want != "" && got != want {
		return Env{}, fmt.Errorf("pyenv: %s has sha256 %s, its descriptor says %s", archiveKey(hash), got, want)
	}
	d, err := readDescriptor(root)
	if err != nil || d.Hash != hash {
		return Env{}, fmt.Errorf("pyenv: %s does not describe environment %s (%v)", archiveKey(hash), hash, err)
	}
	return install(root, filepath.Join(dir, hash))
}

// descriptorMax bounds the descriptor inside an archive, beyond the environment's files.
const descriptorMax = 16 << 20

// build installs the resolved set, stores its archive (unless a concurrent builder stored one
// first: that one is adopted) and extracts it into the local cache.
func (c *Cache) build(ctx context.Context, b *builder, dir, hash string, pkgs []Package) (Env, error) {
	sp, err := b.install(ctx, pkgs)
	if err != nil {
		return Env{}, err
	}
	if err := stripBytecode(sp); err != nil {
		return Env{}, err
	}
	size, files, err := measure(sp, b.cfg.MaxBytes)
	if err != nil {
		return Env{}, err
	}
	d := Descriptor{Format: Format, Hash: hash, Python: b.py, Packages: pkgs, Bytes: size, Files: files}
	inner, _ := json.MarshalIndent(d, "", "  ")
	prefix := "lib/python" + b.py.Version + "/site-packages"
	archive, _, _, err := Archive(sp, prefix, b.cfg.MaxBytes, map[string][]byte{descriptorFile: inner})
	if err != nil {
		var big *TooLargeError
		var refused *RefusedError
		switch {
		case errors.As(err, &big):
			return Env{}, &Error{Reason: big.Error()}
		case errors.As(err, &refused):
			return Env{}, &Error{Reason: refused.Error()}
		}
		return Env{}, err
	}
	if c.Store != nil {
		created, err := c.Store.PutFirst(ctx, archiveKey(hash), archive, "application/x-tar")
		if err != nil {
			return Env{}, err
		}
		if !created {
			// Another worker stored this environment first: use its archive, as every worker will.
			return c.fetch(ctx, dir, hash, b.cfg.MaxBytes)
		}
		sum := sha256.Sum256(archive)
		d.ArchiveSHA256 = hex.EncodeToString(sum[:])
		meta, _ := json.MarshalIndent(d, "", "  ")
		if _, err := c.Store.PutFirst(ctx, descriptorKey(hash), meta, "application/json"); err != nil {
			return Env{}, err
		}
	}
	root := filepath.Join(b.work, "extract")
	if err := Extract(bytes.NewReader(archive), root, size+descriptorMax); err != nil {
		return Env{}, fmt.Errorf("pyenv: extract the archive just made: %w", err)
	}
	return install(root, filepath.Join(dir, hash))
}

// stripBytecode removes every .pyc file and __pycache__ folder under dir. The sandbox loads
// bytecode from its PythonPath, and CPython does not verify bytecode: a wheel that ships crafted
// .pyc files could hand the traced code raw memory access (and so the tracer's key). Without
// them the interpreter compiles the sources it imports itself.
func stripBytecode(dir string) error {
	var caches []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == "__pycache__":
			caches = append(caches, p)
			return fs.SkipDir
		case !d.IsDir() && (strings.HasSuffix(d.Name(), ".pyc") || strings.HasSuffix(d.Name(), ".pyo")):
			return os.Remove(p)
		}
		return nil
	})
	for _, c := range caches {
		if err == nil {
			err = os.RemoveAll(c)
		}
	}
	if err != nil {
		return fmt.Errorf("pyenv: remove bytecode from %s: %w", dir, err)
	}
	return nil
}

// measure returns the size and number of the regular files under dir, or an *Error when they are
// more than maxBytes.
func measure(dir string, maxBytes int64) (int64, int, error) {
	var size int64
	var files int
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files++
		if size += info.Size(); size > maxBytes {
			return &Error{Reason: (&TooLargeError{Limit: maxBytes}).Error()}
		}
		return nil
	})
	if err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			return 0, 0, pe
		}
		return 0, 0, fmt.Errorf("pyenv: measure %s: %w", dir, err)
	}
	return size, files, nil
}

// install renames an extracted environment (its descriptor inside) to final; if final exists
// (another process got there first) that one is used instead.
func install(root, final string) (Env, error) {
	d, err := readDescriptor(root)
	if err != nil {
		return Env{}, err
	}
	if err := os.Chmod(root, 0o755); err != nil {
		return Env{}, fmt.Errorf("pyenv: %w", err)
	}
	if err := os.Rename(root, final); err != nil {
		if got, rerr := readDescriptor(final); rerr == nil {
			return envOf(final, got), nil
		}
		return Env{}, fmt.Errorf("pyenv: %w", err)
	}
	return envOf(final, d), nil
}

func envOf(dir string, d Descriptor) Env {
	return Env{Hash: d.Hash, Dir: dir, SitePackages: filepath.Join(dir, "lib", "python"+d.Python.Version, "site-packages"),
		Packages: d.Packages}
}

func readDescriptor(dir string) (Descriptor, error) {
	data, err := os.ReadFile(filepath.Join(dir, descriptorFile))
	if err != nil {
		return Descriptor{}, err
	}
	var d Descriptor
	if err := json.Unmarshal(data, &d); err != nil {
		return Descriptor{}, fmt.Errorf("pyenv: %s: %w", dir, err)
	}
	return d, nil
}

// readRequest finds a remembered resolution: locally, else in the store.
func (c *Cache) readRequest(ctx context.Context, dir, rkey string) (request, bool, error) {
	var rq request
	data, err := os.ReadFile(filepath.Join(dir, "requests", rkey+".json"))
	if err != nil && c.Store != nil {
		data, err = c.Store.ReadLimit(ctx, requestKey(rkey), 16<<20)
		if err != nil && !store.IsNotExist(err) {
			return rq, false, err
		}
	}
	if err != nil {
		return rq, false, nil
	}
	if err := json.Unmarshal(data, &rq); err != nil || rq.Env == "" {
		return rq, false, nil // unreadable: resolve again
	}
	return rq, true, nil
}

// writeRequest remembers a resolution, locally and in the store.
func (c *Cache) writeRequest(ctx context.Context, dir, rkey string, rq request) error {
	data, _ := json.MarshalIndent(rq, "", "  ")
	if c.Store != nil {
		if _, err := c.Store.PutFirst(ctx, requestKey(rkey), data, "application/json"); err != nil {
			return err
		}
	}
	rdir := filepath.Join(dir, "requests")
	if err := makeDir(rdir); err != nil {
		return err
	}
	f, err := os.CreateTemp(rdir, ".req-")
	if err != nil {
		return fmt.Errorf("pyenv: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("pyenv: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("pyenv: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(rdir, rkey+".json")); err != nil {
		return fmt.Errorf("pyenv: %w", err)
	}
	return nil
}

// makeDir makes dir (and its parents) reachable by every uid.
func makeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pyenv: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("pyenv: %w", err)
	}
	return nil
}

// requestHash identifies a request: the requirements, where packages come from, the interpreter.
func requestHash(cfg Config, py PyInfo, texts []string) string {
	b, _ := json.Marshal(struct {
		Format       int      `json:"format"`
		Python       PyInfo   `json:"python"`
		Requirements []string `json:"requirements"`
		IndexURL     string   `json:"index_url"`
		FindLinks    []string `json:"find_links"`
		AllowSdist   bool     `json:"allow_sdist"`
	}{Format, py, texts, cfg.IndexURL, cfg.FindLinks, cfg.AllowSdist})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// envHash identifies an environment: the resolved set and the interpreter it is installed for.
func envHash(py PyInfo, pkgs []Package) string {
	pkgs = slices.Clone(pkgs)
	slices.SortFunc(pkgs, func(a, b Package) int { return strings.Compare(a.Name, b.Name) })
	b, _ := json.Marshal(struct {
		Format   int       `json:"format"`
		Python   PyInfo    `json:"python"`
		Packages []Package `json:"packages"`
	}{Format, py, pkgs})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
