package pyenv

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ndtrace/ndtrace/crawl/pyreq"
)

// PyInfo is what of the interpreter changes what is installed.
type PyInfo struct {
	// Version is X.Y; Implementation e.g. cpython; Platform sysconfig's platform (linux-x86_64).
	Version        string `json:"version"`
	Implementation string `json:"implementation"`
	Platform       string `json:"platform"`
}

var pyInfos sync.Map // interpreter path -> PyInfo

const pyInfoScript = `import json, sys, sysconfig
print(json.dumps({"version": "%d.%d" % sys.version_info[:2], "implementation": sys.implementation.name, "platform": sysconfig.get_platform()}))`

// pythonInfo asks the interpreter (once per process) for its version and platform.
func pythonInfo(ctx context.Context, python string) (PyInfo, error) {
	if v, ok := pyInfos.Load(python); ok {
		return v.(PyInfo), nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-I", "-c", pyInfoScript)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	out, err := cmd.Output()
	if err != nil {
		return PyInfo{}, fmt.Errorf("pyenv: ask %s its version: %w", python, err)
	}
	var info PyInfo
	if err := json.Unmarshal(out, &info); err != nil || !regexp.MustCompile(`^\d+\.\d+$`).MatchString(info.Version) {
		return PyInfo{}, fmt.Errorf("pyenv: %s gave %q for its version", python, out)
	}
	pyInfos.Store(python, info)
	return info, nil
}

// builder runs pip for one environment, in its work folder.
type builder struct {
	cfg   Config
	py    PyInfo
	work  string
	onPip func([]string)
	venv  string // made by the first pip run
}

// maxReason caps the length of a reason taken from pip's output.
const maxReason = 2000

// pip runs the interpreter's pip install, isolated: no configuration file, no PIP_* variable, no
// user site, a private HOME, cache and temporary folder, no prompt; against the virtualenv of the
// work folder (made first), with the configured index and find-links. A failure of pip itself is
// an *Error with its message.
func (b *builder) pip(ctx context.Context, args ...string) error {
	return b.pipCommand(ctx, "install", true, append([]string{"--root-user-action=ignore", "--no-warn-script-location"}, args...)...)
}

// pipCommand runs pip's command cmd as pip does, with the configured index and find-links when
// index is true, else with none (--no-index).
func (b *builder) pipCommand(ctx context.Context, cmd string, index bool, args ...string) error {
	if b.venv == "" {
		venv := filepath.Join(b.work, "venv")
		// No pip inside the environment: the worker's pip installs into it (--python).
		if _, err := b.run(ctx, b.cfg.Python, "-I", "-m", "venv", "--without-pip", venv); err != nil {
			return fmt.Errorf("pyenv: make a virtualenv with %s: %w (is python3-venv installed?)", b.cfg.Python, err)
		}
		b.venv = venv
	}
	full := []string{"-I", "-m", "pip", "--isolated", "--no-input", "--disable-pip-version-check", "--no-color",
		"--python", filepath.Join(b.venv, "bin", "python"), cmd,
		"--cache-dir", filepath.Join(b.work, "cache"), "--progress-bar", "off"}
	if index && b.cfg.IndexURL != "" {
		full = append(full, "--index-url", b.cfg.IndexURL)
	} else {
		full = append(full, "--no-index")
	}
	if index {
		for _, l := range b.cfg.FindLinks {
			full = append(full, "--find-links", l)
		}
	}
	if !b.cfg.AllowSdist {
		// No package's build code runs outside the sandbox.
		full = append(full, "--only-binary=:all:")
	}
	full = append(full, args...)
	if b.onPip != nil {
		b.onPip(full)
	}
	out, err := b.run(ctx, b.cfg.Python, full...)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ctx.Err() == nil {
			return &Error{Reason: "pip: " + pipMessage(out)}
		}
		return fmt.Errorf("pyenv: pip: %w", err)
	}
	return nil
}

// run runs a command in the work folder with a clean environment; it returns the combined output
// (capped) and kills the whole process group when ctx ends.
func (b *builder) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	home := filepath.Join(b.work, "home")
	tmp := filepath.Join(b.work, "tmp")
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = b.work
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + tmp, "LANG=C.UTF-8",
		"PIP_CONFIG_FILE=/dev/null", "PYTHONNOUSERSITE=1", "PYTHONDONTWRITEBYTECODE=1"}
	// A proxy the worker needs to reach the index; nothing else of the worker's environment.
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out := &capped{max: 1 << 20}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// pip runs on the worker, resolving what a repository declares: its memory and the size of
	// any file it writes (a download, an unpacked file) are bounded like the sandbox's. Set once
	// it runs (Go cannot set a child's limits between fork and exec): a blow-up comes from the
	// resolver or a download, seconds after start, and what pip starts inherits them.
	if err := limitProcess(cmd.Process.Pid, pipAddressSpace, b.cfg.MaxBytes); err != nil {
		_ = cmd.Cancel()
		_ = cmd.Wait()
		return nil, fmt.Errorf("pyenv: limit %s: %w", name, err)
	}
	err := cmd.Wait()
	return out.buf.Bytes(), err
}

// pipAddressSpace bounds the address space of pip (and of what it starts) on the worker: pip
// resolving and installing a few hundred packages stays far below it.
const pipAddressSpace = 3 << 30

// limitProcess sets the address-space limit of process pid to as bytes and the limit of the size
// of any file it writes to fsize bytes (a write past it fails, or the process gets SIGXFSZ); a
// limit of 0 or less is left as it is.
func limitProcess(pid int, as, fsize int64) error {
	for _, l := range []struct {
		res int
		max int64
	}{{unix.RLIMIT_AS, as}, {unix.RLIMIT_FSIZE, fsize}} {
		if l.max <= 0 {
			continue
		}
		lim := unix.Rlimit{Cur: uint64(l.max), Max: uint64(l.max)}
		if err := unix.Prlimit(pid, l.res, &lim, nil); err != nil {
			return err
		}
	}
	return nil
}

// capped keeps the first max bytes written to it.
type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// pipMessage is the reason pip's output gives: its ERROR lines, else its last line.
func pipMessage(out []byte) string {
	var errs []string
	var last string
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		last = l
		if strings.HasPrefix(l, "ERROR:") {
			errs = append(errs, l)
		}
	}
	msg := strings.Join(errs, " ")
	if msg == "" {
		msg = last
	}
	if msg == "" {
		msg = "failed with no message"
	}
	if len(msg) > maxReason {
		msg = msg[:maxReason] + "..."
	}
	return msg
}

// installEntry is the part of one entry of the "install" list of pip's installation report
// (pip install --report) read here; the rest of the report is skipped.
type installEntry struct {
	DownloadInfo struct {
		URL         string `json:"url"`
		ArchiveInfo *struct {
			Hash   string            `json:"hash"`
			Hashes map[string]string `json:"hashes"`
		} `json:"archive_info"`
	} `json:"download_info"`
	Metadata struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"metadata"`
}

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// resolve resolves the requirements with pip (install --dry-run --ignore-installed --report) and
// returns the set pip would install, sorted by name.
func (b *builder) resolve(ctx context.Context, reqs []string) ([]Package, error) {
	rep := filepath.Join(b.work, "report.json")
	args := append([]string{"--dry-run", "--ignore-installed", "--quiet", "--report", rep, "--"}, reqs...)
	if err := b.pip(ctx, args...); err != nil {
		return nil, err
	}
	data, err := readReport(rep)
	if err != nil {
		return nil, err
	}
	return parseReport(data)
}

// Caps of pip's installation report, which the packages of the index shape (their names,
// versions, URLs, and sdists' metadata, built by their own code).
const (
	// MaxReportBytes is the largest report read: a larger one is an *Error naming the cap.
	MaxReportBytes = 16 << 20
	// MaxResolved is the most packages a resolution may hold.
	MaxResolved = 5000
)

// readReport reads pip's report at p, at most MaxReportBytes: a larger one is an *Error, found
// before reading it (and never by reading more than the cap).
func readReport(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("pyenv: pip's report: %w", err)
	}
	defer f.Close()
	tooLarge := &Error{Reason: fmt.Sprintf("pip's report is larger than %d bytes (pyenv.MaxReportBytes)", MaxReportBytes)}
	if info, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("pyenv: pip's report: %w", err)
	} else if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("pyenv: pip's report is not a regular file")
	} else if info.Size() > MaxReportBytes {
		return nil, tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxReportBytes+1))
	if err != nil {
		return nil, fmt.Errorf("pyenv: pip's report: %w", err)
	}
	if len(data) > MaxReportBytes {
		return nil, tooLarge
	}
	return data, nil
}

// parseReport reads the resolved set of a pip report, checking every name and version (they are
// handed to pip again). It reads as json.Unmarshal would into {"install": [...]} (keys matched
// without regard to case, the last "install" kept), but entry by entry: more than MaxResolved
// entries are an *Error found after decoding MaxResolved+1 of them, so that a report of millions
// of tiny entries costs no more than its bytes. A report larger than MaxReportBytes is an *Error.
func parseReport(data []byte) ([]Package, error) {
	if len(data) > MaxReportBytes {
		return nil, &Error{Reason: fmt.Sprintf("pip's report is larger than %d bytes (pyenv.MaxReportBytes)", MaxReportBytes)}
	}
	bad := func(err error) ([]Package, error) { return nil, fmt.Errorf("pyenv: pip's report: %w", err) }
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil {
		return bad(err)
	} else if tok != json.Delim('{') {
		return bad(fmt.Errorf("not an object"))
	}
	var entries []installEntry
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		if key, _ := tok.(string); !strings.EqualFold(key, "install") {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return bad(err)
			}
			continue
		}
		if entries, err = installEntries(dec); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return bad(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad(fmt.Errorf("data after the report"))
	}
	var pkgs []Package
	for _, in := range entries {
		p := Package{Name: pyreq.Normalize(in.Metadata.Name), Version: in.Metadata.Version}
		if !pyreq.ValidName(p.Name) || !pyreq.ValidVersion(p.Version) {
			return nil, &Error{Reason: fmt.Sprintf("pip resolved a package named %q version %q, which is not valid", in.Metadata.Name, in.Metadata.Version)}
		}
		if ai := in.DownloadInfo.ArchiveInfo; ai != nil {
			h := ai.Hashes["sha256"]
			if v, ok := strings.CutPrefix(ai.Hash, "sha256="); ok && h == "" {
				h = v
			}
			if hexSHA256.MatchString(h) {
				p.SHA256 = h
			}
		}
		if u, err := url.Parse(in.DownloadInfo.URL); err == nil {
			p.File = path.Base(u.Path)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// installEntries decodes the value of a report's "install" key (null, or a list of at most
// MaxResolved entries).
func installEntries(dec *json.Decoder) ([]installEntry, error) {
	tok, err := dec.Token()
	switch {
	case err != nil:
		return nil, fmt.Errorf("pyenv: pip's report: install: %w", err)
	case tok == nil:
		return nil, nil
	case tok != json.Delim('['):
		return nil, fmt.Errorf("pyenv: pip's report: install is not a list")
	}
	var out []installEntry
	for dec.More() {
		if len(out) == MaxResolved {
			return nil, &Error{Reason: fmt.Sprintf("pip resolved more than %d packages (pyenv.MaxResolved)", MaxResolved)}
		}
		var e installEntry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("pyenv: pip's report: install[%d]: %w", len(out), err)
		}
		out = append(out, e)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("pyenv: pip's report: install: %w", err)
	}
	return out, nil
}

// install installs exactly the resolved set (no dependencies of its own, by hash when every hash
// is known) and returns the virtualenv's site-packages.
func (b *builder) install(ctx context.Context, pkgs []Package) (string, error) {
	var lines []string
	hashed := true
	for _, p := range pkgs {
		hashed = hashed && p.SHA256 != ""
	}
	for _, p := range pkgs {
		l := p.Name + "==" + p.Version
		if hashed {
			l += " --hash=sha256:" + p.SHA256
		}
		lines = append(lines, l)
	}
	pinned := filepath.Join(b.work, "pinned.txt")
	if err := os.WriteFile(pinned, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("pyenv: %w", err)
	}
	// The wheels are downloaded first and looked into: pip would unpack them on the worker's
	// disk whatever their size.
	wheels := filepath.Join(b.work, "wheels")
	args := []string{"--no-deps", "--quiet", "-d", wheels, "-r", pinned}
	if hashed {
		args = append(args, "--require-hashes")
	}
	if err := b.pipCommand(ctx, "download", true, args...); err != nil {
		return "", err
	}
	if err := checkWheels(wheels, b.cfg.MaxBytes); err != nil {
		return "", err
	}
	// --no-compile: the environment holds no bytecode (see stripBytecode).
	args = []string{"--no-deps", "--ignore-installed", "--no-compile", "--quiet", "--find-links", wheels, "-r", pinned}
	if hashed {
		args = append(args, "--require-hashes")
	}
	if err := b.pipCommand(ctx, "install", false, append([]string{"--root-user-action=ignore", "--no-warn-script-location"}, args...)...); err != nil {
		return "", err
	}
	return filepath.Join(b.venv, "lib", "python"+b.py.Version, "site-packages"), nil
}

// checkWheels sums what the wheels in dir unpack to, from their zip directories (Python's zipfile
// never writes more than an entry's declared size): more than maxBytes, or more than MaxEntries
// files, is an *Error, found before anything is unpacked. Source distributions (allow_sdist)
// cannot be measured before they are built.
func checkWheels(dir string, maxBytes int64) error {
	names, err := filepath.Glob(filepath.Join(dir, "*.whl"))
	if err != nil {
		return fmt.Errorf("pyenv: %w", err)
	}
	var total uint64
	files := 0
	for _, name := range names {
		z, err := zip.OpenReader(name)
		if err != nil {
			return &Error{Reason: fmt.Sprintf("wheel %s: %v", filepath.Base(name), err)}
		}
		for _, f := range z.File {
			files++
			total += f.UncompressedSize64
		}
		z.Close()
		switch {
		case total > uint64(maxBytes):
			return &Error{Reason: (&TooLargeError{Limit: maxBytes}).Error()}
		case files > MaxEntries:
			return &Error{Reason: (&RefusedError{What: fmt.Sprintf("more than %d entries", MaxEntries)}).Error()}
		}
	}
	return nil
}
