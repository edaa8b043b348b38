package crawl

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/internal/costbound"
)

// fuzzTarLimits are small checkout limits, so that the archive's stream cap (MaxBytes plus
// maxEntryOverhead per allowed entry: 960 KiB) is reached by fuzzed inputs.
var fuzzTarLimits = CheckoutLimits{MaxFiles: 20, MaxBytes: 64 << 10, Timeout: time.Minute}

// tarCost bounds what a tar checkout allocates: per byte of the archive, and a fixed part that
// pays for what its limits allow it to expand to (a gzip stream expands up to the stream cap).
var tarCost = costbound.Bound{PerByte: 64, Fixed: 32 << 20}

// FuzzCheckoutTar checks out arbitrary archives (plain or gzip-compressed) under small limits: a
// checkout never panics, fails only with a *RepoError (what a retry cannot fix), leaves nothing
// behind when it fails, and allocates within tarCost however far the archive expands.
func FuzzCheckoutTar(f *testing.F) {
	dir := func(name string) tarEntry { return tarEntry{name: name, typ: tar.TypeDir} }
	f.Add(makeTar(f, false, dir("pkg/"), tarEntry{name: "pkg/a.py", body: "x = 1\n"}, tarEntry{name: "l", typ: tar.TypeSymlink, link: "pkg/a.py"}))
	f.Add(makeTar(f, true, tarEntry{name: "a.py", body: strings.Repeat("x", 1000)}, tarEntry{name: "h", typ: tar.TypeLink, link: "a.py"}))
	f.Add(makeTar(f, false, tarEntry{name: strings.Repeat("d/", 300) + "x"}))
	var bomb bytes.Buffer // a gzip stream of 2 MiB of zeros: the end marker, then more than maxTrailing
	zw := gzip.NewWriter(&bomb)
	zw.Write(make([]byte, 2<<20))
	zw.Close()
	f.Add(bomb.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "x.tar")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		res, err := ResolveRepo(ctx, Repo{URL: p})
		if err != nil {
			t.Fatal(err)
		}
		scratch := t.TempDir()
		var w *Workdir
		costbound.Check(t, "Checkout", len(data), tarCost, func() { w, err = Checkout(ctx, res, scratch, fuzzTarLimits) })
		if err != nil {
			var re *RepoError
			if !errors.As(err, &re) {
				t.Fatalf("a plain error (taken as transient): %v", err)
			}
			checkEmpty(t, scratch)
			return
		}
		if w.Files > fuzzTarLimits.MaxFiles || w.Bytes > fuzzTarLimits.MaxBytes {
			t.Fatalf("checked out %d files, %d bytes: beyond the limits", w.Files, w.Bytes)
		}
		if err := w.Remove(); err != nil {
			t.Fatal(err)
		}
	})
}
