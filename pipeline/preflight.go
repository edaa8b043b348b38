package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
	"github.com/ndtrace/ndtrace/tokenize"
)

// Problem is one thing wrong with a spec that a preflight found: the field, by its path in the spec
// (sources[2].path), and what is wrong and what to do, in one line.
type Problem struct {
	Field string
	Msg   string
}

func (p Problem) String() string { return p.Field + ": " + p.Msg }

// PreflightOptions say what a preflight may check.
type PreflightOptions struct {
	// Tokenizers looks tokenizers up by name (tokenize.Get); nil checks only the name's form.
	Tokenizers func(name string) (tokenize.Tokenizer, error)
	// Local checks the local paths the spec names (sources, evaluation sets, tokenizer files,
	// python_path, venv) on this machine: set it where the workers read this machine's files (ndtrace
	// run with its own worker). Bucket URLs are always checked, unless Offline.
	Local bool
	// Offline checks only what reads no file, bucket or output (the tokenizer's and policy's
	// names): for a run that may resume a workflow already running, whose store may be down for a
	// while, until it knows it starts a new one.
	Offline bool
}

// PreflightKeyPrefix is where a preflight writes (and deletes) its probe object in the output: under
// the work area, which readers of the dataset never look at.
const PreflightKeyPrefix = "work/preflight/"

// Preflight checks, before any work, everything in spec that a later stage resolves and that would
// otherwise fail only once items were traced: the tokenizer and policy names, the evaluation sets,
// the earlier datasets of dedup_against, the sources' files and local repositories, and the
// output, which must take a probe object (written under PreflightKeyPrefix, then deleted). It
// returns every problem found, in the spec's order; none means the run can start. Git repositories
// are not checked: one that cannot be had is a reject of its own during the run.
func Preflight(ctx context.Context, spec schemas.Spec, opts PreflightOptions) []Problem {
	var ps []Problem
	add := func(field, format string, args ...any) {
		ps = append(ps, Problem{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if msg := checkTokenizer(spec.Tokenizer, opts); msg != "" {
		add("tokenizer", "%s", msg)
	}
	if _, err := debugger.PolicyByName(spec.Policy); err != nil {
		add("policy", "%v", err)
	}
	if opts.Offline {
		return ps
	}
	for i, src := range spec.Sources {
		f := fmt.Sprintf("sources[%d]", i)
		switch src.Kind {
		case "jsonl", "python":
			if msg := checkFile(ctx, src.Path, opts.Local); msg != "" {
				add(f+".path", "%s", msg)
			}
		case "files":
			if msg := checkFilesSource(ctx, src, opts.Local); msg != "" {
				add(f+".path", "%s", msg)
			}
		case "repository":
			if src.List != "" {
				if msg := checkFile(ctx, src.List, opts.Local); msg != "" {
					add(f+".list", "%s", msg)
				}
				break
			}
			kind, err := crawl.Repo{URL: src.URL, Ref: src.Ref}.Kind()
			switch {
			case err != nil:
				add(f+".url", "%v", err)
			case kind == crawl.KindTar:
				if msg := checkFile(ctx, src.URL, opts.Local); msg != "" {
					add(f+".url", "%s", msg)
				}
			case kind == crawl.KindDir && opts.Local:
				if msg := checkDir(src.URL); msg != "" {
					add(f+".url", "%s", msg)
				}
			}
		}
		if opts.Local && (src.Kind == "repository" || src.Kind == "files") {
			for j, p := range src.PythonPath {
				if msg := checkDir(p); msg != "" {
					add(fmt.Sprintf("%s.python_path[%d]", f, j), "%s", msg)
				}
			}
			if src.Venv != "" {
				if msg := checkDir(src.Venv); msg != "" {
					add(f+".venv", "%s", msg)
				}
			}
		}
	}
	for i, e := range spec.Decontaminate {
		if !opts.Local && !isBucketURL(e.Path) {
			continue
		}
		if _, err := crawl.ReadEvalSet(ctx, e.Name, e.Path); err != nil {
			msg := describeFileErr(e.Path, err)
			if msg == "" {
				msg = strings.TrimPrefix(err.Error(), "evaluation set "+e.Name+": ")
			}
			add(fmt.Sprintf("decontaminate[%d].path", i), "%s", msg)
		}
	}
	for i, u := range spec.DedupAgainst {
		if msg := checkDataset(ctx, u); msg != "" {
			add(fmt.Sprintf("dedup_against[%d]", i), "%s", msg)
		}
	}
	// A local output is the workers' folder: probed here only where local paths are (opening
	// it would make the folder on this machine).
	if opts.Local || isBucketURL(spec.Output) {
		if msg := ProbeOutput(ctx, spec.Output); msg != "" {
			add("output", "%s", msg)
		}
	}
	return ps
}

// checkTokenizer checks the tokenizer's name: loaded with opts.Tokenizers when it is built in or
// its file may be read here, else its form only.
func checkTokenizer(name string, opts PreflightOptions) string {
	kind, file, isFile := strings.Cut(name, ":")
	builtIn := !isFile && (name == "bytes" || name == "cl100k_base" || name == "o200k_base")
	unknown := fmt.Sprintf("unknown tokenizer %q (want one of %s; docs/tokenizers.md)", name, strings.Join(tokenize.Names(), ", "))
	if !builtIn && (!isFile || (kind != "hf" && kind != "llama3") || file == "") {
		return unknown
	}
	if opts.Tokenizers == nil || (!builtIn && (!opts.Local || opts.Offline)) {
		return ""
	}
	if _, err := opts.Tokenizers(name); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fmt.Sprintf("%s: cannot read the tokenizer file %s (%v)", name, pe.Path, pe.Err)
		}
		return strings.TrimPrefix(err.Error(), "tokenize: ")
	}
	return ""
}

// isBucketURL reports whether p is a URL of a bucket (s3://, gs://, azblob://, mem://), not a local
// path or file URL.
func isBucketURL(p string) bool {
	u, err := url.Parse(p)
	return err == nil && len(u.Scheme) > 1 && !strings.EqualFold(u.Scheme, "file")
}

// checkFile checks that the file at p (a local path, a file URL or a bucket URL) can be opened for
// reading; a local one only if local is set.
func checkFile(ctx context.Context, p string, local bool) string {
	if !local && !isBucketURL(p) {
		return ""
	}
	if !isBucketURL(p) {
		name := p
		if u, err := url.Parse(p); err == nil && strings.EqualFold(u.Scheme, "file") {
			name = u.Path
		}
		if fi, err := os.Stat(name); err == nil && fi.IsDir() {
			return fmt.Sprintf("%s is a folder, not a file", p)
		}
	}
	r, err := crawl.OpenAt(ctx, p, 0)
	if err != nil {
		if msg := describeFileErr(p, err); msg != "" {
			return msg
		}
		return OneLine(strings.TrimPrefix(err.Error(), "crawl: "))
	}
	r.Close()
	return ""
}

// checkFilesSource checks that a files source reads (a local one only if local is set): its path
// exists, its format is known, and its first shard has the columns the spec names.
func checkFilesSource(ctx context.Context, src schemas.SourceSpec, local bool) string {
	if !local && !isBucketURL(src.Path) {
		return ""
	}
	if err := (&crawl.Fetcher{}).CheckFilesSource(ctx, src); err != nil {
		if msg := describeFileErr(src.Path, err); msg != "" {
			return msg
		}
		return OneLine(strings.TrimPrefix(strings.TrimPrefix(err.Error(), "crawl: "), "files source "))
	}
	return ""
}

// checkDir checks that the local folder p exists.
func checkDir(p string) string {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		if msg := describeFileErr(p, err); msg != "" {
			return msg
		}
		return OneLine(err.Error())
	case !fi.IsDir():
		return fmt.Sprintf("%s is a file, not a folder", p)
	}
	return ""
}

// describeFileErr says in a user's terms why the file p could not be read, or "" for an error it
// does not know.
func describeFileErr(p string, err error) string {
	if reason, ok := store.Unusable(err); ok {
		return fmt.Sprintf("%s: %s", p, reason) // first: a missing bucket is more than a missing object
	}
	switch {
	case errors.Is(err, fs.ErrNotExist) || store.IsNotExist(err):
		return fmt.Sprintf("%s does not exist (fix the path; relative paths are from the folder ndtrace runs in)", p)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("%s cannot be read (permission denied for uid %d)", p, os.Getuid())
	}
	return ""
}

// checkDataset checks that url holds a committed dataset.
func checkDataset(ctx context.Context, u string) string {
	s, err := store.Open(ctx, u)
	if err != nil {
		return OneLine(strings.TrimPrefix(err.Error(), "store: "))
	}
	defer s.Close()
	if _, err := dataset.ReadManifest(ctx, s); err != nil {
		if store.IsNotExist(err) {
			return fmt.Sprintf("%s has no manifest (not an ndtrace dataset, or not committed yet)", u)
		}
		if reason, ok := store.Unusable(err); ok {
			return fmt.Sprintf("%s: %s", u, reason)
		}
		return OneLine(strings.TrimPrefix(err.Error(), "store: "))
	}
	return ""
}

// ProbeOutput checks that the dataset URL u can be opened and written: it writes a small probe
// object under PreflightKeyPrefix and deletes it. It returns "" when both work, or what is wrong, in
// one line.
func ProbeOutput(ctx context.Context, u string) string {
	s, err := store.Open(ctx, u)
	if err != nil {
		if reason, ok := store.Unusable(err); ok {
			return fmt.Sprintf("%s cannot be used: %s", u, reason)
		}
		return OneLine(strings.TrimPrefix(err.Error(), "store: "))
	}
	defer s.Close()
	var nonce [8]byte
	rand.Read(nonce[:])
	key := PreflightKeyPrefix + hex.EncodeToString(nonce[:])
	op := "cannot be written"
	err = s.Put(ctx, key, []byte("ndtrace preflight\n"), nil)
	if err == nil {
		op = "takes writes but not deletes (" + key + " stays)"
		err = s.Delete(ctx, key)
	}
	if err == nil {
		return ""
	}
	if reason, ok := store.Unusable(err); ok {
		return fmt.Sprintf("%s %s: %s", u, op, reason)
	}
	if ctx.Err() != nil {
		return fmt.Sprintf("%s did not answer in time (check the endpoint's host and port, and the network)", u)
	}
	return fmt.Sprintf("%s %s: %s (check the URL's endpoint, host and port)", u, op, reachCause(err))
}

// reachCause says why a store's server could not be reached: the connection refused, a host that
// does not resolve, a timeout, or else the innermost message of the chain.
func reachCause(err error) string {
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dns):
		return fmt.Sprintf("host %s does not resolve", dns.Name)
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return "no answer in time"
	}
	return LastCause(err)
}

// LastCause is the innermost message of an error chain, on one line: the cause, without the layers
// that repeat what and where.
func LastCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return OneLine(err.Error())
		}
		err = next
	}
}

// OneLine joins a message's lines and runs of spaces.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
