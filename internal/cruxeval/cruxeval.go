// Package cruxeval finds and reads the CruxEval corpus (../shared/corpora/cruxeval.jsonl beside the
// checkout) for tests and benchmarks. The project never copies the corpus.
package cruxeval

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Row is one CruxEval function with its input and expected output.
type Row struct {
	ID     string `json:"id"`
	Code   string `json:"code"`
	Input  string `json:"input"`
	Output string `json:"output"`
}

// Path returns the corpus path: $NDTRACE_CRUXEVAL, or shared/corpora/cruxeval.jsonl in the directory
// that holds the checkout. Without it the test fails under CI and is skipped elsewhere.
func Path(t testing.TB) string {
	t.Helper()
	p := os.Getenv("NDTRACE_CRUXEVAL")
	if p == "" {
		p = find()
	}
	if _, err := os.Stat(p); err != nil || p == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("CruxEval corpus not found (set NDTRACE_CRUXEVAL): %v", err)
		}
		t.Skipf("CruxEval corpus not found (set NDTRACE_CRUXEVAL): %v", err)
	}
	return p
}

// find walks up from the working directory to the module root and looks beside it.
func find() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(filepath.Dir(dir), "shared", "corpora", "cruxeval.jsonl")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Rows reads every row of the corpus.
func Rows(t testing.TB) []Row {
	t.Helper()
	rows, err := Read(Path(t))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// Read reads a CruxEval-format JSONL file.
func Read(path string) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []Row
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s row %d: %w", path, len(rows)+1, err)
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}
