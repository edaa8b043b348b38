package crawl

import (
	"context"
	"fmt"
	"github.com/ndtrace/ndtrace/internal/costbound"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMatchAfterDeepNesting: a module whose first function nests a few defs around a long body
// used to spend pyFunctions' whole work budget on them, so that an evaluation function after it
// was never read (a repository function escaping decontamination). Top-level functions (and
// methods) are read whatever the nested ones cost.
func TestMatchAfterDeepNesting(t *testing.T) {
	eval := "def f(nums):\n    output = []\n    for n in nums:\n        output.append((nums.count(n), n))\n    output.sort(reverse=True)\n    return output\n"
	set, err := ParseEvalSet("e", "e.jsonl", []byte(`{"id":"s0","code":`+jsonString(eval)+`}`), 10, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for d := range 8 {
		b.WriteString(strings.Repeat("    ", d) + "def wrap(a, b):\n")
	}
	for i := range 600 {
		b.WriteString(strings.Repeat("    ", 8) + "a = b + " + strings.Repeat("1", i%5+1) + "\n")
	}
	b.WriteString("\n\n" + eval)
	if item, hit := set.Match(b.String()); !hit || item != "s0" {
		t.Fatalf("Match(nested wrapper, then the evaluation function) = %q, %v; want s0, true", item, hit)
	}
	b.Reset()
	b.WriteString("class C:\n")
	for d := range 8 {
		b.WriteString(strings.Repeat("    ", d+1) + "def wrap(self, b):\n")
	}
	for range 600 {
		b.WriteString(strings.Repeat("    ", 9) + "a = b + 1\n")
	}
	b.WriteString("\n" + indent(eval, "    "))
	if item, hit := set.Match(b.String()); !hit || item != "s0" {
		t.Fatalf("Match(class with a nested method, then the evaluation function as a method) = %q, %v; want s0, true", item, hit)
	}
}

func jsonString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = by + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestMatchAfterLargeData: a module that opens with a large data table (past the tokens
// pyFunctions kept, 64·MaxFunctionTokens) used to hide every function after it from
// decontamination; a table holds no function, and what a module holds after it is read.
func TestMatchAfterLargeData(t *testing.T) {
	eval := "def f(nums):\n    output = []\n    for n in nums:\n        output.append((nums.count(n), n))\n    output.sort(reverse=True)\n    return output\n"
	set, err := ParseEvalSet("e", "e.jsonl", []byte(`{"id":"s0","code":`+jsonString(eval)+`}`), 10, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	src := "TABLE = [\n" + strings.Repeat("    1, 2, 3, 4,\n", 40000) + "]\nLIMIT = 3\n" + strings.Repeat("X = 1\n", 100000) + "\n" + eval
	if item, hit := set.Match(src); !hit || item != "s0" {
		t.Fatalf("Match(a large table, then the evaluation function) = %q, %v; want s0, true", item, hit)
	}
	n := 0
	got := costbound.Check(t, "large data", len(src), decontamCost, func() {
		pyFunctions(src, func(toks []string) { n++ })
	})
	t.Logf("%d bytes, %d functions, %d bytes allocated", len(src), n, got)
}

// TestMatchOldMacLineEndings: Python reads a lone "\r" as a line ending (as NormalizeSource and
// pylex do), but the n-gram tokenizer read a module with "\r" line endings as one logical line, so
// that none of its functions but a first one on its first line were compared: an evaluation
// function saved with such line endings, or after a blank "\r" line, escaped decontamination.
func TestMatchOldMacLineEndings(t *testing.T) {
	eval := "def f(nums):\n    output = []\n    for n in nums:\n        output.append((nums.count(n), n))\n    output.sort(reverse=True)\n    return output\n"
	set, err := ParseEvalSet("e", "e.jsonl", []byte(`{"id":"s0","code":`+jsonString(eval)+`}`), 10, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	renamed := strings.NewReplacer("nums", "xs", "output", "res").Replace(eval) // not the exact source
	for name, src := range map[string]string{
		"cr":             strings.ReplaceAll("import os\n\n"+renamed, "\n", "\r"),
		"crlf":           strings.ReplaceAll("import os\n\n"+renamed, "\n", "\r\n"),
		"blank cr line":  "import os\n  \r\n" + renamed,
		"blank cr first": "X = 1\n\r" + renamed,
	} {
		if item, hit := set.Match(src); !hit || item != "s0" {
			t.Errorf("%s: Match = %q, %v; want s0, true", name, item, hit)
		}
	}
}

// TestEvalSetBounded: an evaluation set's index is bounded: a set with more n-grams than
// MaxEvalGrams (lowered here) is an error naming the line, never an index of unbounded memory nor
// one of part of the set; a file past MaxEvalSetBytes is an error too.
func TestEvalSetBounded(t *testing.T) {
	defer func(n, m int) { evalGramLimit, evalFileLimit = n, m }(evalGramLimit, evalFileLimit)
	evalGramLimit, evalFileLimit = 1000, 1<<16
	var b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&b, `{"code":"def f%d(a):\n    return a + %d * a - %d\n"}`+"\n", i, i, i+1)
	}
	_, err := ParseEvalSet("big", "big.jsonl", []byte(b.String()), 4, 0.5)
	if err == nil || !strings.Contains(err.Error(), "n-grams") || !strings.Contains(err.Error(), "line ") {
		t.Fatalf("ParseEvalSet of a set past the n-gram bound: err = %v", err)
	}
	p := filepath.Join(t.TempDir(), "huge.jsonl")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1<<16 + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := ReadEvalSet(context.Background(), "huge", p); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("ReadEvalSet of a file past MaxEvalSetBytes: err = %v", err)
	}
}
