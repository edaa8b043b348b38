package crawl

import (
	"archive/tar"
	"bytes"
	"context"
	"embed"
	"fmt"
	_ "gocloud.dev/blob/memblob" // the built-in example repository is served from a mem:// store
	"io/fs"
	"sync"
	"time"

	"github.com/ndtrace/ndtrace/store"
)

// examplesCode is ndtrace's built-in function-level examples (written for the project).
//
//go:embed examples/functions.py
var examplesCode string

// exampleCalls are the calls traced in the built-in examples; the last one raises on purpose.
var exampleCalls = []string{
	"running_max([3, 1, 4, 1, 5, 9, 2, 6])",
	"word_lengths('the quick brown fox jumps over the lazy dog')",
	"collatz_steps(27)",
	"gcd(1071, 462)",
	"caesar('Hello, World', 3)",
	"safe_ratio(7, 0)",
	"first_fibs(12)",
	"parse_pairs('a=1, b=2, c=x')",
}

// examplesRepo is ndtrace's built-in example repository (written for the project): a small module
// with a pytest suite.
//
//go:embed all:examples/repo
var examplesRepo embed.FS

// ExamplesRepoURL is the URL of the built-in example repository: a tarball that every Fetcher made
// by NewFetcher serves from memory.
const ExamplesRepoURL = "mem://ndtrace-examples/textstats.tar"

// examplesStoreURL is the store ExamplesRepoURL is read from.
const examplesStoreURL = "mem://ndtrace-examples"

// ExamplesRepoTar returns the built-in example repository as a tarball with a top-level folder
// textstats/. It is deterministic: fixed times, owners and modes, entries in lexical order.
var ExamplesRepoTar = sync.OnceValue(func() []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	err := fs.WalkDir(examplesRepo, "examples/repo", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := "textstats" + p[len("examples/repo"):]
		if d.IsDir() {
			if d.Name() == "__pycache__" {
				return fs.SkipDir
			}
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX})
		}
		data, err := examplesRepo.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		panic("crawl: build the example repository's tarball: " + err.Error())
	}
	return buf.Bytes()
})

// NewFetcher returns a Fetcher that also serves the built-in example repository (ExamplesRepoURL).
// Close the returned store when done.
func NewFetcher(ctx context.Context) (*Fetcher, func() error, error) {
	st, err := store.Open(ctx, examplesStoreURL)
	if err != nil {
		return nil, nil, fmt.Errorf("crawl: example repository store: %w", err)
	}
	if err := st.Put(ctx, "textstats.tar", ExamplesRepoTar(), nil); err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("crawl: example repository store: %w", err)
	}
	return &Fetcher{Stores: map[string]*store.Store{examplesStoreURL: st}}, st.Close, nil
}
