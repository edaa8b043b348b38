package crawl

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/store"
)

// RepoKind says how a repository reference is materialized.
type RepoKind string

// The kinds of repository reference.
const (
	// KindGit is a git repository (https://, http://, ssh://, git://, file:// or scp-like
	// [user@]host:path), checked out at a commit.
	KindGit RepoKind = "git"
	// KindDir is a local directory (a plain path), copied.
	KindDir RepoKind = "dir"
	// KindTar is a .tar, .tar.gz or .tgz archive (a plain path or a file, mem, s3, gs or azblob URL),
	// extracted.
	KindTar RepoKind = "tar"
	// KindFiles is a group of Python files of a files source (issue 30), carried inline
	// (Resolved.Files): their checkout writes them out, as a repository without tests.
	KindFiles RepoKind = "files"
)

// Repo is a repository reference: what a crawl list names.
//
// URL is one of
//
//	https://host/owner/name(.git)      git over HTTPS (http:// too, for loopback test servers)
//	ssh://[user@]host[:port]/path       git over SSH (git://, git+ssh:// too)
//	[user@]host:path                    git over SSH, scp-like (a ':' before any '/')
//	file:///abs/repo                    a local git repository
//	./dir, /abs/dir                     a local directory (its .git, if any, is ignored)
//	/abs/x.tar.gz, file:///abs/x.tgz    a tarball (.tar, .tar.gz or .tgz) in a local folder
//	s3://bucket/key.tgz?region=…        a tarball in a bucket: mem, s3, gs and azblob URLs, with the
//	                                    query parameters store.Open takes
//
// Ref applies to git only: a branch, a tag, a full ref name (refs/…), HEAD, or a full commit hash.
// Empty means the remote's HEAD.
type Repo struct {
	URL string `json:"url"`
	Ref string `json:"ref,omitempty"`
}

// String is the reference as a crawl list line ("URL" or "URL REF") with any credentials in the
// URL removed.
func (r Repo) String() string {
	if r.Ref == "" {
		return redactURL(r.URL)
	}
	return redactURL(r.URL) + " " + r.Ref
}

// Kind classifies the reference and checks its syntax (URL and ref) without touching the network or
// the file system.
func (r Repo) Kind() (RepoKind, error) {
	kind, err := urlKind(r.URL)
	if err != nil {
		return "", err
	}
	if r.Ref != "" {
		if kind != KindGit {
			return "", fmt.Errorf("ref %q given for a %s source: refs apply to git repositories only", r.Ref, kind)
		}
		if err := checkRef(r.Ref); err != nil {
			return "", err
		}
	}
	return kind, nil
}

// Anonymous reports whether r names a git repository reached over an anonymous transport (an
// https, http or git URL): not a local folder, a file URL or a tarball (which a bucket URL
// names), nor an ssh or scp-like URL, which git reaches with the worker's own ssh identity.
func (r Repo) Anonymous() bool {
	if k, err := urlKind(r.URL); err != nil || k != KindGit {
		return false
	}
	scheme, _, ok := strings.Cut(r.URL, "://")
	if !ok {
		return false // scp-like: ssh
	}
	switch strings.ToLower(scheme) {
	case "https", "http", "git":
		return true
	}
	return false
}

// RepoError is a per-repository failure: the repository cannot be resolved or checked out (not found,
// too large, unsafe, …). The pipeline records it as a reject with Reason and goes on. Failures that
// are not the repository's fault (a cancelled context, a missing git binary, an unreadable scratch
// folder) are ordinary errors, never RepoErrors.
type RepoError struct {
	Repo Repo
	// Reason is short and names the problem, e.g. "ref not found: v9", "too many files: 20001 > 20000",
	// "symlink escapes checkout: a/link -> /etc/passwd".
	Reason string
	// Transient is true when the failure looks like the network's rather than the repository's
	// (a host that does not resolve, a refused or dropped connection, a server error): a later
	// retry may succeed.
	Transient bool
	// Err is the underlying error, if any.
	Err error
}

// Error returns "crawl: repository URL [REF]: reason".
func (e *RepoError) Error() string {
	return fmt.Sprintf("crawl: repository %s: %s", e.Repo, e.Reason)
}

// Unwrap returns the underlying error.
func (e *RepoError) Unwrap() error { return e.Err }

// Resolved is a repository reference pinned to content, found without a checkout: the commit a git
// ref resolves to, or the content hash of a directory or tarball. It is what [Fetcher.Checkout]
// materializes, and its Key tells whether a source changed since a previous run.
type Resolved struct {
	Repo
	Kind RepoKind `json:"kind"`
	// Commit is the full hash of the commit (git only), lowercase hex.
	Commit string `json:"commit,omitempty"`
	// ContentHash is the hex SHA-256 of a directory's contents (see [Fetcher.Resolve]), of a
	// tarball's bytes, or of a group of files (FilesHash) (dir, tar and files only).
	ContentHash string `json:"content_hash,omitempty"`
	// Files are the files of a KindFiles group, inline (ContentHash is their hash).
	Files []InlineFile `json:"files,omitempty"`
	// Key identifies the content for deduplicating work: "KIND:URL@COMMIT" or "KIND:URL@HASH", with
	// credentials removed from the URL. Same key, same checkout.
	Key string `json:"key"`
}

// InlineFile is one file of a KindFiles group: its path in the group's checkout (slash-separated,
// relative, checked), its text, and the repository and license a corpus gave it, if any.
type InlineFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Repo    string `json:"repo,omitempty"`
	License string `json:"license,omitempty"`
}

// String returns the key.
func (r Resolved) String() string { return r.Key }

// Pin returns the commit (git) or the content hash (a directory or tarball) the repository is pinned at.
func (r Resolved) Pin() string {
	if r.Commit != "" {
		return r.Commit
	}
	return r.ContentHash
}

func (r *Resolved) setKey() { r.Key = fmt.Sprintf("%s:%s@%s", r.Kind, redactURL(r.URL), r.Pin()) }

// CheckoutLimits bounds a checkout. Zero fields take the defaults. Limits are enforced while the
// repository is materialized: the checkout stops at the first excess and is removed.
type CheckoutLimits struct {
	// MaxBytes bounds the total size of regular files (default [DefaultMaxBytes]); for git it also
	// bounds the fetched objects.
	MaxBytes int64
	// MaxFiles bounds the number of files and symlinks, and separately of directories (default
	// [DefaultMaxFiles]).
	MaxFiles int
	// Timeout bounds the whole checkout (default [DefaultCheckoutTimeout]).
	Timeout time.Duration
}

// The default checkout limits.
const (
	DefaultMaxBytes        int64 = 256 << 20
	DefaultMaxFiles              = 20000
	DefaultCheckoutTimeout       = 5 * time.Minute
	// DefaultResolveTimeout bounds one Resolve: under the scan's heartbeat timeout (2 minutes),
	// which every repository resolved renews.
	DefaultResolveTimeout = time.Minute
)

func (l CheckoutLimits) withDefaults() CheckoutLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultCheckoutTimeout
	}
	return l
}

// Fetcher resolves and checks out repositories. The zero value is ready to use; a Fetcher is safe for
// concurrent use if its fields are not changed.
type Fetcher struct {
	// Stores are already-open stores to read tarballs from, keyed by the URL each was opened with
	// (e.g. "mem://", "s3://bucket/prefix?region=eu-west-1"). A tarball URL that, ignoring query
	// strings, starts with a key followed by "/" (or with a key ending in "/") is read from that store,
	// the rest of its path being the object key; the longest matching key wins. Other bucket URLs are
	// opened with store.Open for each read. A mem:// tarball can only be read through Stores, as
	// every store.Open("mem://…") is a new, empty bucket.
	Stores map[string]*store.Store
	// Git is the git binary; empty means "git" on the PATH.
	Git string
	// MaxGroupBytes bounds the bytes of the files of one group of a files source (the spec's
	// limits.repo_bytes; default DefaultMaxBytes): a file that would take a group past it starts
	// the next group.
	MaxGroupBytes int64
	// ResolveTimeout bounds one Resolve (default [DefaultResolveTimeout]): a git server that
	// never answers, or a tarball that takes longer to read, is a reject ("resolve timed out
	// after …"), never a wait without end.
	ResolveTimeout time.Duration
}

// ResolveRepo is [Fetcher.Resolve] with a zero Fetcher.
func ResolveRepo(ctx context.Context, r Repo) (Resolved, error) {
	return (&Fetcher{}).Resolve(ctx, r)
}

// Checkout is [Fetcher.Checkout] with a zero Fetcher.
func Checkout(ctx context.Context, r Resolved, scratch string, lim CheckoutLimits) (*Workdir, error) {
	return (&Fetcher{}).Checkout(ctx, r, scratch, lim)
}

// Resolve pins r to content cheaply, without a checkout, so a planner can skip sources whose Key it
// has already processed:
//
//   - git: the commit the ref resolves to, from `git ls-remote` (tags are peeled to their commit; a
//     branch name is looked up as refs/NAME, refs/tags/NAME, then refs/heads/NAME, as git does; an
//     empty ref is HEAD). A full 40- (or 64-) hex commit hash is taken as is, without the network.
//   - dir: the SHA-256 of its contents: every directory, file and symlink below it (except any
//     entry named .git) in lexical order, by slash-separated path, with files' executable bit (not the
//     rest of their mode), sizes and contents and symlinks' targets. Timestamps and owners do not count.
//   - tar: the SHA-256 of the archive's bytes.
//
// A bad reference or repository (syntax, not found, unknown ref, unsupported file type) gives a
// *[RepoError], and so does a resolution that takes longer than f.ResolveTimeout (a server that
// accepts the connection and never answers).
func (f *Fetcher) Resolve(ctx context.Context, r Repo) (Resolved, error) {
	kind, err := r.Kind()
	if err != nil {
		return Resolved{}, &RepoError{Repo: r, Reason: err.Error(), Err: err}
	}
	timeout := f.ResolveTimeout
	if timeout <= 0 {
		timeout = DefaultResolveTimeout
	}
	rctx, cancel := context.WithTimeoutCause(ctx, timeout, errResolveTimeout)
	defer cancel()
	res := Resolved{Repo: r, Kind: kind}
	switch kind {
	case KindGit:
		res.Commit, err = f.resolveGit(rctx, r)
	case KindDir:
		res.ContentHash, err = resolveDir(rctx, r)
	case KindTar:
		res.ContentHash, err = f.resolveTar(rctx, r)
	}
	if err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(rctx), errResolveTimeout) {
			return Resolved{}, &RepoError{Repo: r, Reason: fmt.Sprintf("resolve timed out after %s", timeout), Err: err}
		}
		return Resolved{}, resolveErr(ctx, r, err)
	}
	res.setKey()
	return res, nil
}

// resolveErr returns RepoErrors as they are and wraps the others with context.
func resolveErr(ctx context.Context, r Repo, err error) error {
	var re *RepoError
	if errors.As(err, &re) && ctx.Err() == nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("crawl: resolve %s: %w", r, context.Cause(ctx))
	}
	return fmt.Errorf("crawl: resolve %s: %w", r, err)
}

// openPath makes dir and every folder between root (included) and it readable and searchable by
// all (os.MkdirTemp makes its folders private).
func openPath(root, dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			return fmt.Errorf("open up the checkout: %w", err)
		}
		if d == root || d == filepath.Dir(d) || !strings.HasPrefix(d, root+"/") {
			return nil
		}
	}
}

// CheckoutAlias and EnvsAlias are where the sandbox shows a checkout's folder and the worker's
// folder of environments (execute binds them there), and what they read as in any value that
// still holds them: the folders themselves are the worker's (a random name in its scratch folder;
// its environments folder), so values holding them would differ from run to run and from worker
// to worker, and tell the worker's folders.
const (
	CheckoutAlias = "/checkout"
	EnvsAlias     = "/envs"
)

// Workdir is a materialized repository in a worker's scratch space.
type Workdir struct {
	// Dir is the repository's root: the checked-out tree (git, without its .git directory), the
	// copied directory (without .git), or the extracted archive (its single top-level directory, if it
	// has exactly one and nothing beside it, as GitHub's and `git archive --prefix` tarballs have).
	Dir string
	// Resolved is what was checked out; for git, Commit is the commit actually checked out.
	Resolved Resolved
	// Files counts the regular files and symlinks under Dir, Bytes the regular files' total size.
	Files int
	Bytes int64

	base string // the fresh folder inside scratch that holds everything; Remove deletes it
}

// Remove deletes the checkout, first making every directory under it writable (code run in it may
// have made some read-only), so that it always goes. It may be called more than once.
func (w *Workdir) Remove() error {
	if w == nil || w.base == "" {
		return nil
	}
	return removeAll(w.base)
}

// Checkout materializes r in a fresh folder inside scratch (created if missing) and returns it;
// the caller must call [Workdir.Remove]. Dir and every folder from scratch down to it are readable
// and searchable by all users, so that a sandbox's unprivileged uid can read the checkout. The
// content is pinned to what Resolve found:
//
//   - git: `git init` and `git fetch --depth 1` of exactly r.Commit (if the server refuses to serve
//     an unadvertised commit, of r.Ref, checked to still be at r.Commit), then a detached checkout.
//     git runs without system or global configuration, with HOME in a temporary folder, without
//     hooks, submodules, LFS smudging or terminal prompts (PATH, SSH_AUTH_SOCK, GIT_SSH_COMMAND,
//     proxy and CA variables pass through), file:// allowed only for file:// URLs; the tree's size
//     and file count are checked with `git ls-tree` before anything is written. The .git directory
//     is removed after checkout. The files are the commit's blobs byte for byte: the repository's
//     .gitattributes (ident, eol, text, working-tree-encoding, filter) do not apply.
//   - dir: a copy of regular files (mode 0644, or 0755 if executable), directories and symlinks,
//     without .git, hashed while copied and compared with r.ContentHash.
//   - files: the group's inline files written out (0644, in folders 0755), each path checked again
//     as SanitizeFilePath checks it (a path that is not its own sanitised form, a duplicate, or a
//     file where another needs a folder fails the group), within lim, their FilesHash compared with
//     r.ContentHash first.
//   - tar: a safe extraction: absolute paths, ".." components, entries written through a symlink,
//     duplicates, devices and FIFOs are refused; hard links are copied if they name an earlier regular
//     file of the archive; the archive's SHA-256 must equal r.ContentHash.
//
// In every case a symlink whose target resolves (following any chain of links) outside Dir fails the
// whole repository ("symlink escapes checkout: LINK -> TARGET"); links within the tree are kept.
// lim is enforced throughout (a too-large fetch is stopped while it runs) and its Timeout bounds the
// whole checkout. Any failure removes the partial checkout. Repository problems, including the
// timeout, give a *[RepoError]; cancelling ctx kills git and gives ctx's error.
func (f *Fetcher) Checkout(ctx context.Context, r Resolved, scratch string, lim CheckoutLimits) (*Workdir, error) {
	lim = lim.withDefaults()
	if err := checkResolved(r); err != nil {
		return nil, fmt.Errorf("crawl: checkout %s: %w", r.Repo, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("crawl: checkout %s: %w", r.Repo, context.Cause(ctx))
	}
	scratch, err := filepath.Abs(scratch)
	if err != nil {
		return nil, fmt.Errorf("crawl: checkout %s: scratch: %w", r.Repo, err)
	}
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return nil, fmt.Errorf("crawl: checkout %s: scratch: %w", r.Repo, err)
	}
	base, err := mkdirFixedLength(scratch, "repo-", r.Key)
	if err != nil {
		return nil, fmt.Errorf("crawl: checkout %s: scratch: %w", r.Repo, err)
	}
	w := &Workdir{Resolved: r, base: base}
	cctx, cancel := context.WithTimeoutCause(ctx, lim.Timeout, errCheckoutTimeout)
	defer cancel()
	var dir string
	switch r.Kind {
	case KindGit:
		dir, err = f.checkoutGit(cctx, r, base, lim)
	case KindDir:
		dir, err = checkoutDir(cctx, r, base, lim)
	case KindTar:
		dir, err = f.checkoutTar(cctx, r, base, lim)
	case KindFiles:
		dir, err = checkoutFiles(cctx, r, base, lim)
	}
	if err == nil {
		w.Dir = dir
		w.Files, w.Bytes, err = scanTree(cctx, r.Repo, dir, lim)
	}
	if err == nil {
		err = openPath(scratch, dir)
	}
	if err != nil {
		if rmErr := w.Remove(); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("crawl: remove partial checkout: %w", rmErr))
		}
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("crawl: checkout %s: %w", r.Repo, context.Cause(ctx))
		case errors.Is(context.Cause(cctx), errCheckoutTimeout):
			return nil, &RepoError{Repo: r.Repo, Reason: fmt.Sprintf("checkout timed out after %s", lim.Timeout), Err: err}
		}
		var re *RepoError
		if errors.As(err, &re) {
			return nil, err
		}
		return nil, fmt.Errorf("crawl: checkout %s: %w", r.Repo, err)
	}
	return w, nil
}

var (
	errCheckoutTimeout = errors.New("checkout timed out")
	errResolveTimeout  = errors.New("resolve timed out")
)

// checkResolved checks that r came from Resolve.
func checkResolved(r Resolved) error {
	if r.Kind == KindFiles {
		if !strings.HasPrefix(r.URL, "files:") {
			return fmt.Errorf("a group of files named %q, not files:…", clip(r.URL, 200))
		}
		if len(r.ContentHash) != 64 || !isHex(r.ContentHash) {
			return fmt.Errorf("not resolved: content hash %q is not a SHA-256", r.ContentHash)
		}
		return nil
	}
	if len(r.Files) > 0 {
		return fmt.Errorf("a %s repository with inline files", r.Kind)
	}
	kind, err := r.Repo.Kind()
	if err != nil {
		return err
	}
	if kind != r.Kind {
		return fmt.Errorf("resolved as %q but the URL is a %s source", r.Kind, kind)
	}
	switch {
	case kind == KindGit && !isFullHash(r.Commit):
		return fmt.Errorf("not resolved: commit %q is not a full hash", r.Commit)
	case kind != KindGit && (len(r.ContentHash) != 64 || !isHex(r.ContentHash)):
		return fmt.Errorf("not resolved: content hash %q is not a SHA-256", r.ContentHash)
	}
	return nil
}

// ParseRepoList parses a crawl list: one repository per line, its URL optionally followed by
// whitespace and a ref. Blank lines are skipped, and a field starting with '#' starts a comment that
// runs to the end of the line. Each reference's syntax is checked as [Repo.Kind] does; the first bad
// line gives an error naming it ("line 3: …"). Each line is read as ParseRepoLine reads it; Scan
// reads lists line by line, a bad line there being a reject.
func ParseRepoList(data []byte) ([]Repo, error) {
	var repos []Repo
	for i, line := range strings.Split(string(data), "\n") {
		r, ok, err := ParseRepoLine(line)
		if err != nil {
			return nil, fmt.Errorf("crawl: repository list line %d: %w", i+1, err)
		}
		if ok {
			repos = append(repos, r)
		}
	}
	return repos, nil
}

// Longest URL and ref taken: git gets them as arguments, and the kernel refuses one over 128 KiB
// (git would not start: no reason of the repository's, which the scan would retry).
const (
	maxURLBytes = 4096
	maxRefBytes = 1024
)

// urlKind classifies a repository URL (see Repo) and checks its syntax.
func urlKind(s string) (RepoKind, error) {
	if s == "" {
		return "", errors.New("empty URL")
	}
	if len(s) > maxURLBytes {
		return "", fmt.Errorf("URL longer than %d bytes", maxURLBytes)
	}
	if !utf8.ValidString(s) {
		return "", errors.New("URL is not valid UTF-8")
	}
	for _, c := range s {
		if unicode.IsSpace(c) || unicode.IsControl(c) {
			return "", errors.New("URL contains whitespace or control characters")
		}
	}
	if strings.HasPrefix(s, "-") {
		return "", errors.New("URL starts with '-'")
	}
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // url.Error repeats the URL, credentials and all
			}
			return "", fmt.Errorf("bad URL: %w", err)
		}
		scheme := strings.ToLower(u.Scheme)
		tar := isTarName(u.Path)
		switch scheme {
		case "https", "http", "ssh", "git", "git+ssh", "ssh+git":
			if u.Host == "" {
				return "", fmt.Errorf("%s URL without a host", scheme)
			}
			if strings.HasPrefix(u.Host, "-") || strings.HasPrefix(u.Hostname(), "-") {
				return "", errors.New("host starts with '-'")
			}
			if tar {
				return "", fmt.Errorf("tarballs are read from buckets (a path or a file, mem, s3, gs or azblob URL), not over %s", scheme)
			}
			if strings.Trim(u.Path, "/") == "" {
				return "", errors.New("URL without a repository path")
			}
			return KindGit, nil
		case "file":
			if u.Host != "" && u.Host != "localhost" {
				return "", fmt.Errorf("a file URL needs an absolute path (file:///abs/path), not host %q", u.Host)
			}
			if strings.Trim(u.Path, "/") == "" {
				return "", errors.New("file URL without a path")
			}
			if tar {
				return KindTar, nil
			}
			return KindGit, nil
		case "mem", "s3", "gs", "azblob":
			if !tar {
				return "", fmt.Errorf("a %s URL must name a .tar, .tar.gz or .tgz archive", scheme)
			}
			if scheme != "mem" && u.Host == "" {
				return "", fmt.Errorf("%s URL without a bucket name", scheme)
			}
			return KindTar, nil
		default:
			return "", fmt.Errorf("unsupported scheme %q (want https, http, ssh, git, file, mem, s3, gs or azblob)", scheme)
		}
	}
	if i := strings.Index(s, "::"); i > 0 && !strings.HasPrefix(s, "[") && !strings.Contains(s[:i], "/") {
		// transport::address: git runs the remote helper git-remote-<transport> (fd talks over
		// one of git's own file descriptors)
		return "", fmt.Errorf("git remote-helper syntax (%s::...) is not allowed", clip(s[:i], 40))
	}
	if host, p, ok := scpLike(s); ok {
		if host == "" {
			return "", errors.New("scp-like URL without a host")
		}
		if strings.HasPrefix(host, "-") {
			return "", errors.New("host starts with '-'")
		}
		if strings.Trim(p, "/") == "" {
			return "", errors.New("scp-like URL without a repository path")
		}
		return KindGit, nil
	}
	if isTarName(s) {
		return KindTar, nil
	}
	return KindDir, nil
}

// scpLike splits an scp-like git URL, [user@]host:path: git's rule is a ':' before any '/'.
func scpLike(s string) (host, p string, ok bool) {
	from := 0
	if open := strings.IndexByte(s, '['); open >= 0 {
		if end := strings.IndexByte(s[open:], ']'); end >= 0 {
			from = open + end // an IPv6 host: [::1]:path
		}
	}
	colon := strings.IndexByte(s[from:], ':')
	if colon < 0 {
		return "", "", false
	}
	colon += from
	if slash := strings.IndexByte(s, '/'); slash >= 0 && slash < colon {
		return "", "", false
	}
	host = s[:colon]
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		host = host[at+1:]
	}
	return strings.TrimPrefix(strings.TrimSuffix(host, "]"), "["), s[colon+1:], true
}

// isTarName reports whether a path names a tarball (.tar, .tar.gz or .tgz, in any case).
func isTarName(p string) bool {
	p = strings.ToLower(p)
	return strings.HasSuffix(p, ".tar") || strings.HasSuffix(p, ".tar.gz") || strings.HasSuffix(p, ".tgz")
}

// checkRef checks a git ref's syntax: a subset of git check-ref-format's rules, plus no leading '-'.
func checkRef(ref string) error {
	bad := func(why string) error { return fmt.Errorf("bad ref %q: %s", ref, why) }
	if len(ref) > maxRefBytes {
		return fmt.Errorf("bad ref %q: longer than %d bytes", clip(ref, 100), maxRefBytes)
	}
	switch {
	case strings.HasPrefix(ref, "-"):
		return bad("starts with '-'")
	case !utf8.ValidString(ref):
		return bad("not valid UTF-8")
	case ref == "@":
		return bad("is '@'")
	case strings.Contains(ref, ".."), strings.Contains(ref, "@{"), strings.Contains(ref, "//"):
		return bad("contains '..', '@{' or '//'")
	case strings.HasSuffix(ref, "/"), strings.HasSuffix(ref, "."), strings.HasSuffix(ref, ".lock"), strings.HasPrefix(ref, "/"):
		return bad("starts with '/' or ends with '/', '.' or '.lock'")
	}
	for _, c := range ref {
		if c < 0x20 || c == 0x7f || unicode.IsSpace(c) || strings.ContainsRune("~^:?*[\\", c) {
			return bad(fmt.Sprintf("contains %q", c))
		}
	}
	for _, part := range strings.Split(ref, "/") {
		if strings.HasPrefix(part, ".") {
			return bad("a component starts with '.'")
		}
	}
	return nil
}

// isFullHash reports whether s is a full SHA-1 (40) or SHA-256 (64) commit hash in hex.
func isFullHash(s string) bool { return (len(s) == 40 || len(s) == 64) && isHex(s) }

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return s != ""
}

// redactURL removes credentials from a URL for messages and keys: the whole user info of http(s)
// URLs (a token is often the user name), the password of others.
func redactURL(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		if err != nil && strings.Contains(s, "@") {
			return "(unparsable URL)"
		}
		return s
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		u.User = nil
		return u.String()
	}
	return u.Redacted()
}

// mkdirFixedLength makes a new private folder in dir named prefix and 16 hex digits: as
// os.MkdirTemp, but the name's length is always the same (os.MkdirTemp's random part is a decimal
// number of 1 to 10 digits), and the name is the same for the same key (the content checked out)
// whenever that folder is free. The checkout's path is in every test's interpreter (sys.path,
// __file__, the arguments): a path of another length shifts what the interpreter allocates
// (object ids, and what is computed from them), and a test that hashes a path (hash(__file__), a
// set of paths, a cache key) computes something else for another name. Both traced runs of a
// reexecuted test share one checkout, so neither would be seen there, and both would change
// from one run of a spec to the next. The digits are the first 8 bytes of SHA-256(key, n) for
// the first free n below fixedNames, then random.
func mkdirFixedLength(dir, prefix, key string) (string, error) {
	for n := range 100 {
		var b [8]byte
		if n < fixedNames {
			h := sha256.Sum256([]byte(key + "\x00" + strconv.Itoa(n)))
			copy(b[:], h[:])
		} else if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		p := filepath.Join(dir, prefix+hex.EncodeToString(b[:]))
		err := os.Mkdir(p, 0o700)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("mkdir in %s: too many names taken", dir)
}

// fixedNames is how many names of a key mkdirFixedLength tries before random ones.
const fixedNames = 16
