package crawl

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// gitPassEnv are the environment variables git gets from ours: what finding git and its helpers,
// SSH agents and keys, proxies and CA certificates need. Everything else is dropped.
var gitPassEnv = []string{
	"PATH", "TMPDIR", "SSH_AUTH_SOCK", "GIT_SSH_COMMAND", "GIT_SSH", "GIT_SSL_CAINFO", "SSL_CERT_FILE", "SSL_CERT_DIR",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
}

// gitRun is one git invocation's set-up: a private HOME and whether file:// is allowed.
type gitRun struct {
	bin  string
	home string
	file bool
}

func (f *Fetcher) newGitRun(home, repoURL string) gitRun {
	bin := f.Git
	if bin == "" {
		bin = "git"
	}
	return gitRun{bin: bin, home: home, file: strings.HasPrefix(strings.ToLower(repoURL), "file:")}
}

// command builds a git command run in dir with a clean environment and hardening configuration.
func (g gitRun) command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	fileAllow := "never"
	if g.file {
		fileAllow = "always"
	}
	full := []string{
		// Only these transports: no remote helper (fd::, ext::, or one installed on the worker)
		// whatever a URL or the repository's configuration names.
		"-c", "protocol.allow=never",
		"-c", "protocol.https.allow=always",
		"-c", "protocol.http.allow=always",
		"-c", "protocol.ssh.allow=always",
		"-c", "protocol.git.allow=always",
		"-c", "protocol.file.allow=" + fileAllow,
		"-c", "protocol.ext.allow=never",
		"-c", "core.hooksPath=" + os.DevNull,
		"-c", "core.symlinks=true",
		"-c", "core.fsmonitor=false",
		"-c", "submodule.recurse=false",
		"-c", "fetch.recurseSubmodules=false",
		"-c", "advice.detachedHead=false",
		"-c", "gc.auto=0",
		"-c", "maintenance.auto=false",
		"-c", "init.defaultBranch=main",
	}
	cmd := exec.CommandContext(ctx, g.bin, append(full, args...)...)
	cmd.Dir = dir
	env := []string{
		"HOME=" + g.home, "XDG_CONFIG_HOME=" + g.home,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(dir),
		"GIT_TERMINAL_PROMPT=0", "GIT_LFS_SKIP_SMUDGE=1", "GIT_NO_REPLACE_OBJECTS=1",
		"LC_ALL=C", "LANG=C",
	}
	for _, k := range gitPassEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if os.Getenv("GIT_SSH_COMMAND") == "" && os.Getenv("GIT_SSH") == "" {
		env = append(env, "GIT_SSH_COMMAND=ssh -o BatchMode=yes")
	}
	cmd.Env = env
	killProcessGroup(cmd)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// gitFailure is a git command that ran and failed.
type gitFailure struct {
	args   string
	err    error
	stderr string
}

func (e *gitFailure) Error() string {
	return fmt.Sprintf("git %s: %v: %s", e.args, e.err, scrubCredentials(strings.TrimSpace(e.stderr)))
}

// credentialsRE matches the user information of URLs in free text.
var credentialsRE = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s'"]*@`)

// scrubCredentials removes the user information (user names, passwords, tokens) of URLs in s.
func scrubCredentials(s string) string { return credentialsRE.ReplaceAllString(s, "$1") }

// argsText is a command line for messages, without credentials.
func argsText(args []string) string { return scrubCredentials(strings.Join(args, " ")) }

func (e *gitFailure) Unwrap() error { return e.err }

// run runs git and returns its standard output. A git that ran and failed gives a *gitFailure; a git
// that could not start, an ordinary error.
// Caps of what is read from git, whose output a remote chooses (refs, paths).
const (
	// maxGitOutput bounds a git command's standard output (ls-remote's refs, rev-parse): more is
	// errGitOutput, which makes the repository a reject.
	maxGitOutput = 4 << 20
	// maxTreeEntry bounds one entry of `git ls-tree -z` (mode, type, object, size and path).
	maxTreeEntry = 64 << 10
)

// errGitOutput is a git command whose standard output exceeded maxGitOutput.
var errGitOutput = fmt.Errorf("output larger than %d bytes", maxGitOutput)

func (g gitRun) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := g.command(ctx, dir, args...)
	var stdout, stderr bytes.Buffer
	out := &limitedBuffer{max: maxGitOutput, buf: &stdout, fail: true}
	cmd.Stdout = out
	cmd.Stderr = &limitedBuffer{max: 64 << 10, buf: &stderr}
	err := cmd.Run()
	if out.over {
		return nil, fmt.Errorf("git %s: %w", argsText(args), errGitOutput)
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ctx.Err() == nil {
			return nil, &gitFailure{args: argsText(args), err: err, stderr: stderr.String()}
		}
		return nil, fmt.Errorf("git %s: %w", argsText(args), err)
	}
	return stdout.Bytes(), nil
}

// limitedBuffer keeps the first max bytes written to it; over reports that more was written, and
// with fail set, such a write fails (the writer gets a broken pipe).
type limitedBuffer struct {
	max  int
	buf  *bytes.Buffer
	fail bool
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	room := b.max - b.buf.Len()
	if room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	if len(p) > room {
		b.over = true
		if b.fail {
			return max(room, 0), errGitOutput
		}
	}
	return len(p), nil
}

// gitReason turns a failed git command into a RepoError with a short reason.
func gitReason(r Repo, op string, err error) error {
	if errors.Is(err, errGitOutput) {
		return &RepoError{Repo: r, Reason: op + ": git's output is larger than " + strconv.Itoa(maxGitOutput) + " bytes", Err: err}
	}
	var gf *gitFailure
	if !errors.As(err, &gf) {
		return err
	}
	reason, transient := classifyGit(scrubCredentials(gf.stderr))
	if op != opLsRemote && unreachable(reason) {
		// The scan reached this host (ls-remote resolved the repository): failing to now, at
		// its checkout, is an outage, not the repository's fault, and a reject here would be
		// kept in the batch's record and reused by every later version.
		transient = true
	}
	return &RepoError{Repo: r, Reason: op + ": " + reason, Transient: transient, Err: err}
}

// opLsRemote is the operation of the scan's resolution: the only one where a host that does not
// resolve or refuses the connection is the repository's reject.
const opLsRemote = "ls-remote failed"

// unreachable reports whether a reason of classifyGit's is a host that did not resolve or refused
// the connection.
func unreachable(reason string) bool {
	return strings.HasPrefix(reason, reasonNoHost) || strings.HasPrefix(reason, reasonRefused)
}

// The reasons of classifyGit for an unreachable host.
const (
	reasonNoHost  = "could not resolve host "
	reasonRefused = "the host refused the connection"
)

// classifyGit reads git's standard error (in the C locale) for the cause of a failure.
func classifyGit(stderr string) (reason string, transient bool) {
	low := strings.ToLower(stderr)
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(low, s) {
				return true
			}
		}
		return false
	}
	switch {
	case has("does not appear to be a git repository", "not a git repository"):
		return "not a git repository", false
	case has("repository not found", "' not found", "returned error: 404", "no such repository"):
		return "repository not found", false
	case has("authentication failed", "could not read username", "could not read password", "terminal prompts disabled",
		"permission denied (publickey", "returned error: 401", "returned error: 403"):
		return "authentication required or access denied", false
	case has("not our ref", "unadvertised object", "no such remote ref", "couldn't find remote ref"):
		return "commit or ref not found on the remote", false
	case has("could not resolve host", "could not resolve hostname", "name or service not known",
		"temporary failure in name resolution", "no address associated with hostname"):
		// At the scan (ls-remote), a host that does not resolve is the repository's reject, not a
		// failure to retry: a list holds many hosts, and one gone (or mistyped) must not stall
		// every other repository while the scan is retried for hours. A scan's rejects are its
		// version's only (the next run scans again); at a checkout it is an outage (gitReason).
		return reasonNoHost + hostOf(stderr) + "(check the URL's host name)", false
	case has("connection refused", "couldn't connect to server", "could not connect to server"):
		// Nothing listens there: a wrong host or port far more often than a server restarting.
		// Like a host that does not resolve, it is the repository's reject, in seconds.
		return reasonRefused + " (check the URL's host and port): " + lastLine(stderr), false
	case has("connection timed out", "operation timed out", "connection reset",
		"network is unreachable", "early eof", "remote end hung up", "rpc failed", "returned error: 5",
		"unexpected disconnect", "gnutls_handshake"):
		return "network error: " + lastLine(stderr), true
	}
	if l := lastLine(stderr); l != "" {
		return l, false
	}
	return "git failed", false
}

// hostOf returns the host name of git's "Could not resolve host: NAME" (curl) or "Could not
// resolve hostname NAME:" (ssh), followed by a space, or "" if stderr names none.
func hostOf(stderr string) string {
	m := resolveHostRE.FindStringSubmatch(stderr)
	if m == nil {
		return ""
	}
	h := strings.Trim(m[1], ":'\"")
	if len(h) > 100 {
		h = h[:100] + "…"
	}
	return h + " "
}

var resolveHostRE = regexp.MustCompile(`(?i)could not resolve host(?:name)?:? ([^\s]+)`)

// lastLine is the last non-empty line of s without git's "fatal: " prefix, at most 200 bytes.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	for _, p := range []string{"fatal: ", "error: "} {
		l = strings.TrimPrefix(l, p)
	}
	if len(l) > 200 {
		l = l[:200] + "…"
	}
	return l
}

// resolveGit finds the commit r.Ref names on the remote.
func (f *Fetcher) resolveGit(ctx context.Context, r Repo) (string, error) {
	if isFullHash(r.Ref) {
		return strings.ToLower(r.Ref), nil
	}
	home, err := os.MkdirTemp("", "ndtrace-git-")
	if err != nil {
		return "", fmt.Errorf("git home: %w", err)
	}
	defer os.RemoveAll(home)
	ref := r.Ref
	if ref == "" {
		ref = "HEAD"
	}
	g := f.newGitRun(home, r.URL)
	out, err := g.run(ctx, home, "ls-remote", "--", r.URL, ref, ref+"^{}")
	if err != nil {
		return "", gitReason(r, opLsRemote, err)
	}
	refs := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		oid, name, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if ok && isFullHash(oid) {
			refs[name] = strings.ToLower(oid)
		}
	}
	candidates := []string{ref}
	if ref != "HEAD" && !strings.HasPrefix(ref, "refs/") {
		candidates = []string{"refs/" + ref, "refs/tags/" + ref, "refs/heads/" + ref}
	}
	for _, c := range candidates {
		if oid, ok := refs[c+"^{}"]; ok {
			return oid, nil
		}
		if oid, ok := refs[c]; ok {
			return oid, nil
		}
	}
	reason := "ref not found: " + ref
	switch {
	case r.Ref == "":
		reason = "ref not found: HEAD (an empty repository?)"
	case len(ref) >= 4 && len(ref) < 40 && isHex(ref):
		reason += " (an abbreviated commit hash cannot be resolved remotely: give all 40 hex digits)"
	}
	return "", &RepoError{Repo: r, Reason: reason}
}

// checkoutGit fetches r.Commit into base/src, checks its size, checks it out and removes .git.
func (f *Fetcher) checkoutGit(ctx context.Context, r Resolved, base string, lim CheckoutLimits) (string, error) {
	home := filepath.Join(base, "home")
	src := filepath.Join(base, "src")
	for _, d := range []string{home, src} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", err
		}
	}
	defer os.RemoveAll(home)
	g := f.newGitRun(home, r.URL)
	if _, err := g.run(ctx, src, "init", "-q", "--template=", "."); err != nil {
		return "", fmt.Errorf("git init: %w", err)
	}
	commit := strings.ToLower(r.Commit)
	err := g.fetch(ctx, src, r.URL, commit, lim.MaxBytes)
	if err != nil && r.Ref != "" && !isFullHash(r.Ref) && !errors.Is(err, errFetchTooLarge) && ctx.Err() == nil {
		// Servers that do not serve unadvertised commits: fetch the ref, then check where it is.
		err = g.fetch(ctx, src, r.URL, r.Ref, lim.MaxBytes)
	}
	switch {
	case errors.Is(err, errFetchTooLarge):
		return "", &RepoError{Repo: r.Repo, Reason: fmt.Sprintf("too large: the fetch exceeded %d bytes", lim.MaxBytes)}
	case err != nil:
		if isFullHash(r.Ref) {
			var gf *gitFailure
			if errors.As(err, &gf) {
				if reason, _ := classifyGit(gf.stderr); reason == "commit or ref not found on the remote" {
					return "", &RepoError{Repo: r.Repo, Reason: "commit not found: " + commit, Err: err}
				}
			}
		}
		return "", gitReason(r.Repo, "clone failed", err)
	}
	out, err := g.run(ctx, src, "rev-parse", "--verify", "-q", "FETCH_HEAD^{commit}")
	if err != nil {
		return "", gitReason(r.Repo, "clone failed: fetched object is not a commit", err)
	}
	if got := strings.TrimSpace(string(out)); got != commit {
		return "", &RepoError{Repo: r.Repo, Reason: fmt.Sprintf("ref moved: %s is now at %s, resolved %s", r.Ref, got, commit)}
	}
	if err := g.checkTree(ctx, r.Repo, src, commit, lim); err != nil {
		return "", err
	}
	// The checkout is the commit's blobs byte for byte: the repository's .gitattributes do not
	// apply (info/attributes takes precedence over them). ident, eol, text and
	// working-tree-encoding make git write other bytes than the blobs ls-tree counted, ten times
	// more for a file of "$Id$" lines.
	info := filepath.Join(src, ".git", "info")
	if err := os.MkdirAll(info, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(info, "attributes"), []byte(neutralAttributes), 0o644); err != nil {
		return "", err
	}
	if _, err := g.run(ctx, src, "checkout", "-q", "--detach", commit); err != nil {
		return "", gitReason(r.Repo, "checkout failed", err)
	}
	if err := os.RemoveAll(filepath.Join(src, ".git")); err != nil {
		return "", fmt.Errorf("remove .git: %w", err)
	}
	return src, nil
}

var errFetchTooLarge = errors.New("fetch too large")

// neutralAttributes unsets, for every path, the attributes that change the bytes git writes at
// checkout (filters have no driver configured; unset anyway).
const neutralAttributes = "* -text -eol -ident -filter -working-tree-encoding\n"

// fetch runs `git fetch --depth 1 URL what` in dir, stopping it if .git grows beyond maxBytes.
func (g gitRun) fetch(ctx context.Context, dir, repoURL, what string, maxBytes int64) error {
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if dirSize(filepath.Join(dir, ".git")) > maxBytes {
					cancel(errFetchTooLarge)
					return
				}
			}
		}
	}()
	_, err := g.run(fctx, dir, "fetch", "-q", "--depth=1", "--no-tags", "--no-recurse-submodules", "--", repoURL, what)
	close(stop)
	wg.Wait()
	if errors.Is(context.Cause(fctx), errFetchTooLarge) || (err == nil && dirSize(filepath.Join(dir, ".git")) > maxBytes) {
		return errFetchTooLarge
	}
	return err
}

// dirSize is the total size of the regular files under dir (errors count as nothing).
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// checkTree counts the files and bytes of commit with `git ls-tree` and fails on the first excess.
func (g gitRun) checkTree(ctx context.Context, r Repo, dir, commit string, lim CheckoutLimits) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := g.command(lctx, dir, "ls-tree", "-r", "-l", "-z", "--full-tree", commit)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{max: 64 << 10, buf: &stderr}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git ls-tree: %w", err)
	}
	files, total, limitErr := 0, int64(0), error(nil)
	var dirs folderCounter
	br := bufio.NewReader(stdout)
	for limitErr == nil {
		entry, err := readEntry(br, maxTreeEntry)
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, errEntryTooLong) {
			limitErr = &RepoError{Repo: r, Reason: fmt.Sprintf("git ls-tree: an entry longer than %d bytes", maxTreeEntry)}
			break
		}
		if err != nil {
			limitErr = fmt.Errorf("git ls-tree: %w", err)
			break
		}
		// "<mode> SP <type> SP <object> SP <size, space-padded> TAB <path> NUL"
		meta, name, _ := strings.Cut(entry, "\t")
		f := strings.Fields(meta)
		if len(f) != 4 || f[1] != "blob" && f[1] != "commit" {
			continue // trees are not listed with -r
		}
		// A commit is a submodule, checked out as an empty folder: an entry all the same. The
		// folders the paths name are made too, and counted as a tar's or a folder's are.
		files++
		if files > lim.MaxFiles {
			limitErr = &RepoError{Repo: r, Reason: fmt.Sprintf("too many files: %d > %d", files, lim.MaxFiles)}
			break
		}
		if n := dirs.add(strings.TrimSuffix(name, "\x00")); n > lim.MaxFiles {
			limitErr = &RepoError{Repo: r, Reason: fmt.Sprintf("too many directories: %d > %d", n, lim.MaxFiles)}
			break
		}
		if f[1] == "commit" {
			continue
		}
		if f[0] != "120000" {
			size, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil {
				limitErr = fmt.Errorf("git ls-tree: bad size in %q", meta)
				break
			}
			total += size
			if total > lim.MaxBytes {
				limitErr = &RepoError{Repo: r, Reason: fmt.Sprintf("too large: %d > %d bytes", total, lim.MaxBytes)}
			}
		}
	}
	if limitErr != nil {
		cancel()
		cmd.Wait()
		return limitErr
	}
	if err := cmd.Wait(); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return gitReason(r, "ls-tree failed", &gitFailure{args: "ls-tree", err: err, stderr: stderr.String()})
	}
	return nil
}

var errEntryTooLong = errors.New("entry too long")

// folderCounter counts the folders the paths of a depth-first listing (git ls-tree -r: every
// entry below a folder comes together) name, in time linear in the paths' length.
type folderCounter struct {
	prev string // the previous path's folder, "" for the top
	n    int
}

// add counts the folders of path p that the previous paths did not name, and returns the count.
func (c *folderCounter) add(p string) int {
	dir := ""
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dir = p[:i]
	}
	var now, before []string
	if dir != "" {
		now = strings.Split(dir, "/")
	}
	if c.prev != "" {
		before = strings.Split(c.prev, "/")
	}
	k := 0
	for k < len(now) && k < len(before) && now[k] == before[k] {
		k++
	}
	c.n += len(now) - k
	c.prev = dir
	return c.n
}

// readEntry reads br up to the next NUL (included) as bufio.Reader.ReadString(0) does, but at most
// maxBytes: a longer entry is errEntryTooLong, found without holding more than maxBytes of it.
func readEntry(br *bufio.Reader, maxBytes int) (string, error) {
	var entry []byte
	for {
		chunk, err := br.ReadSlice(0)
		if len(entry)+len(chunk) > maxBytes {
			return "", errEntryTooLong
		}
		entry = append(entry, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return string(entry), err // as bufio.Reader.ReadString(0)
		}
	}
}
