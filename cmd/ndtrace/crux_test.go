package main

import (
	"os"
	"path/filepath"
	"testing"
)

// cruxevalPath finds ../shared/corpora/cruxeval.jsonl beside the checkout (or $NDTRACE_CRUXEVAL).
func cruxevalPath(t testing.TB) string {
	t.Helper()
	p := os.Getenv("NDTRACE_CRUXEVAL")
	if p == "" {
		p = filepath.Join("..", "..", "..", "shared", "corpora", "cruxeval.jsonl")
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CruxEval corpus: %v", err)
		}
		t.Skipf("CruxEval corpus not found (%v); set NDTRACE_CRUXEVAL", err)
	}
	return p
}
