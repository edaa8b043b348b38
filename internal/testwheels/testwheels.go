// Package testwheels writes Python wheels for ndtrace's tests (small pure-Python packages made
// here, nothing downloaded) and serves them as a package index (PEP 503 simple API) from an
// httptest server on the loopback address, or lays them out as a find-links folder.
package testwheels

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Wheel is one wheel file.
type Wheel struct {
	Name, Version string
	// Requires are its Requires-Dist lines; Files its files (path -> content) besides the
	// .dist-info folder.
	Requires []string
	Files    map[string]string
}

// Filename is the wheel's file name (pure Python, any platform).
func (w Wheel) Filename() string {
	return fmt.Sprintf("%s-%s-py3-none-any.whl", strings.ReplaceAll(w.Name, "-", "_"), w.Version)
}

// Bytes returns the wheel: a zip with the files and NAME-VERSION.dist-info/{METADATA,WHEEL,RECORD}.
// It is deterministic (fixed times, sorted entries).
func (w Wheel) Bytes() []byte {
	di := fmt.Sprintf("%s-%s.dist-info", strings.ReplaceAll(w.Name, "-", "_"), w.Version)
	files := map[string]string{}
	for k, v := range w.Files {
		files[k] = v
	}
	var meta strings.Builder
	fmt.Fprintf(&meta, "Metadata-Version: 2.1\nName: %s\nVersion: %s\n", w.Name, w.Version)
	for _, r := range w.Requires {
		fmt.Fprintf(&meta, "Requires-Dist: %s\n", r)
	}
	files[di+"/METADATA"] = meta.String()
	files[di+"/WHEEL"] = "Wheel-Version: 1.0\nGenerator: ndtrace-testwheels\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	names := make([]string, 0, len(files))
	for k := range files {
		names = append(names, k)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	var record strings.Builder
	for _, n := range names {
		fw, err := z.CreateHeader(&zip.FileHeader{Name: n, Method: zip.Deflate, Modified: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)})
		if err != nil {
			panic(err)
		}
		fw.Write([]byte(files[n]))
		sum := sha256.Sum256([]byte(files[n]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", n, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[n]))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", di)
	fw, _ := z.CreateHeader(&zip.FileHeader{Name: di + "/RECORD", Method: zip.Deflate, Modified: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)})
	fw.Write([]byte(record.String()))
	if err := z.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// Fixtures are two packages, the first depending on the second (to prove resolution):
// ndtrace-fixture-a 1.0 (module fixture_a: answer() returns fixture_b.base() + 1) requires
// ndtrace-fixture-b>=1.0; ndtrace-fixture-b 1.2 (module fixture_b: base() returns 41). An older
// ndtrace-fixture-b 0.9 is there too, which the requirement excludes.
func Fixtures() []Wheel {
	return []Wheel{
		{Name: "ndtrace-fixture-a", Version: "1.0", Requires: []string{"ndtrace-fixture-b>=1.0"},
			Files: map[string]string{"fixture_a/__init__.py": "from fixture_b import base\n\n\ndef answer():\n    return base() + 1\n",
				// Bytecode shipped in the wheel (a stand-in for crafted bytecode): environments drop it.
				"fixture_a/__pycache__/__init__.cpython-311.pyc": "not bytecode"}},
		{Name: "ndtrace-fixture-b", Version: "1.2", Files: map[string]string{"fixture_b/__init__.py": "def base():\n    return 41\n"}},
		{Name: "ndtrace-fixture-b", Version: "0.9", Files: map[string]string{"fixture_b/__init__.py": "def base():\n    return 0\n"}},
	}
}

// Folder writes the wheels into a new folder under parent (t.TempDir() if empty) and returns it.
func Folder(t testing.TB, parent string, wheels []Wheel) string {
	t.Helper()
	if parent == "" {
		parent = t.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "wheels-")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wheels {
		if err := os.WriteFile(filepath.Join(dir, w.Filename()), w.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Index is a package index serving wheels.
type Index struct {
	*httptest.Server
	// Requests counts the requests served.
	Requests atomic.Int64
}

// SimpleURL is the index's simple API root, for pip --index-url.
func (ix *Index) SimpleURL() string { return ix.URL + "/simple/" }

var sep = regexp.MustCompile(`[-_.]+`)

// Serve serves the wheels as a PEP 503 simple index on 127.0.0.1 (closed when the test ends):
// /simple/ lists the projects, /simple/<name>/ links each file with its #sha256=, /files/<file> is
// the wheel.
func Serve(t testing.TB, wheels []Wheel) *Index {
	t.Helper()
	byName := map[string][]Wheel{}
	files := map[string][]byte{}
	for _, w := range wheels {
		n := strings.ToLower(sep.ReplaceAllString(w.Name, "-"))
		byName[n] = append(byName[n], w)
		files[w.Filename()] = w.Bytes()
	}
	ix := &Index{}
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/", func(rw http.ResponseWriter, r *http.Request) {
		ix.Requests.Add(1)
		name := strings.Trim(strings.TrimPrefix(r.URL.Path, "/simple/"), "/")
		rw.Header().Set("Content-Type", "text/html")
		var b strings.Builder
		b.WriteString("<!DOCTYPE html><html><body>\n")
		if name == "" {
			for n := range byName {
				fmt.Fprintf(&b, "<a href=\"%s/\">%s</a>\n", n, n)
			}
		} else {
			ws, ok := byName[name]
			if !ok {
				http.NotFound(rw, r)
				return
			}
			for _, w := range ws {
				sum := sha256.Sum256(files[w.Filename()])
				fmt.Fprintf(&b, "<a href=\"../../files/%s#sha256=%s\">%s</a>\n", w.Filename(), hex.EncodeToString(sum[:]), html.EscapeString(w.Filename()))
			}
		}
		b.WriteString("</body></html>\n")
		rw.Write([]byte(b.String()))
	})
	mux.HandleFunc("/files/", func(rw http.ResponseWriter, r *http.Request) {
		ix.Requests.Add(1)
		data, ok := files[strings.TrimPrefix(r.URL.Path, "/files/")]
		if !ok {
			http.NotFound(rw, r)
			return
		}
		rw.Header().Set("Content-Type", "application/octet-stream")
		rw.Write(data)
	})
	ix.Server = httptest.NewServer(mux) // listens on 127.0.0.1
	t.Cleanup(ix.Close)
	return ix
}
