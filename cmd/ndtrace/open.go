package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/store"
)

// openCommitted opens the store at url for a command that reads a committed dataset (stats,
// validate, inspect, verify, dashboard) and checks that it holds one. Every way this fails is one
// line for a person (the whole chain is logged at debug level), and each says which it is:
//
//   - a local folder that does not exist ("folder ... does not exist"; nothing is created);
//   - a bucket or container that does not exist;
//   - a store that cannot be read (access denied, an endpoint that does not answer), with the cause;
//   - a store that can be read but holds no manifest: "no committed dataset".
//
// The caller closes the store.
func openCommitted(ctx context.Context, url string) (*store.Store, error) {
	if dir, ok := localFolder(url); ok {
		// Opening a local store creates its folder: look first, so that a mistyped path is said to
		// be one, and is not left behind as an empty folder.
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return nil, &hintError{msg: fmt.Sprintf("%s: no dataset: folder %s does not exist (check the path)", url, dir), err: err}
		}
	}
	st, err := store.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	ok, err := st.Exists(ctx, dataset.ManifestKey)
	if err == nil && ok {
		return st, nil
	}
	defer st.Close()
	if err != nil && isNetError(err) {
		return nil, rootError(st.URL(), err) // listing would only wait for the same retries again
	}
	rootErr := st.CheckRoot(ctx)
	switch {
	case errors.Is(rootErr, store.ErrNoRoot):
		return nil, rootError(st.URL(), rootErr)
	case err != nil: // the manifest's own error says most (a listing may fail differently)
		return nil, rootError(st.URL(), err)
	case rootErr != nil:
		return nil, rootError(st.URL(), rootErr)
	}
	return nil, &hintError{
		msg: fmt.Sprintf("%s: no committed dataset (no %s): check the URL, or make one with 'ndtrace run --out URL'", st.URL(), dataset.ManifestKey),
		err: fmt.Errorf("%s: %s is missing", st.URL(), dataset.ManifestKey),
	}
}

// rootError explains, in one line, a store that cannot be read at all.
func rootError(url string, err error) error {
	if errors.Is(err, store.ErrNoRoot) {
		what := "the bucket"
		if b := bucketName(url); b != "" {
			what = fmt.Sprintf("bucket %q", b)
		}
		if _, local := localFolder(url); local {
			what = "its folder"
		}
		return &hintError{msg: fmt.Sprintf("%s: %s does not exist (check the URL: the bucket's name, endpoint and region)", url, what), err: err}
	}
	return &hintError{msg: fmt.Sprintf("%s: cannot read the store: %s", url, storeCause(err)), err: err}
}

// isNetError reports whether err is a network error: a host that does not resolve, a port nobody
// listens on.
func isNetError(err error) bool {
	var dns *net.DNSError
	var op *net.OpError
	return errors.As(err, &dns) || errors.As(err, &op)
}

// storeCause is the part of a storage error a person acts on: the network error (a host that does
// not resolve, a port nobody listens on), or that access was denied; else the whole error.
func storeCause(err error) string {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.Error()
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Error()
	}
	if store.IsPermissionDenied(err) {
		return "access denied (check the credentials and the bucket's permissions)"
	}
	return oneLine(err.Error())
}

// localFolder returns the folder a plain path or a file:// URL names.
func localFolder(url string) (string, bool) {
	if !strings.Contains(url, "://") {
		dir, err := filepath.Abs(url)
		return dir, err == nil
	}
	u, err := neturl.Parse(url)
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return "", false
	}
	return filepath.Clean(u.Path), true
}

// bucketName returns the bucket (container) of an s3, gs or azblob URL, else "".
func bucketName(url string) string {
	u, err := neturl.Parse(url)
	if err != nil || (u.Scheme != "s3" && u.Scheme != "gs" && u.Scheme != "azblob") {
		return ""
	}
	return u.Host
}
