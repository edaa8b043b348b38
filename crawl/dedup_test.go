package crawl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNormalizeSource(t *testing.T) {
	base := "def f(x, y):\n    total = x + y  # add\n    return [total,\n            x]\n"
	tests := []struct {
		name string
		src  string
		same bool // normalizes like base
	}{
		{"identical", base, true},
		{"comments and blank lines", "# header\n\ndef f(x, y):\n\n    # note\n    total = x + y\n    return [total,\n            x]\n", true},
		{"spacing", "def f(x,  y):\n\ttotal   =  x + y\n\treturn [total, x]\n", true},
		{"two-space indent", "def f(x, y):\n  total = x + y\n  return [total, x]\n", true},
		{"CRLF", strings.ReplaceAll(base, "\n", "\r\n"), true},
		{"continuation", "def f(x, y):\n    total = x + \\\n        y\n    return [total, x]\n", true},
		{"renamed", strings.ReplaceAll(base, "total", "s"), false},
		{"literal", strings.ReplaceAll(base, "x]", "1]"), false},
		{"dedented return", "def f(x, y):\n    total = x + y\nreturn [total, x]\n", false},
		{"string kept", "def f(x, y):\n    total = x + y\n    return [total,\n            'x  #']\n", false},
	}
	want := NormalizeSource(base)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := NormalizeSource(tc.src)
			if (got == want) != tc.same {
				t.Errorf("NormalizeSource(%q) =\n%s\nbase =\n%s\nsame = %v, want %v", tc.src, got, want, got == want, tc.same)
			}
		})
	}
	if got := NormalizeSource("s = '''a  # b\n\n  c'''  # x\n"); got != "s = '''a  # b\n\n  c'''" {
		t.Errorf("triple-quoted string: %q", got)
	}
}

func TestDedupKey(t *testing.T) {
	a := DedupKey("def f(x):\n    return x\n", "f(1,  2)")
	if b := DedupKey("def f(x):  # id\n  return x\n", "f(1, 2)"); a != b {
		t.Error("formatting changes the dedup key")
	}
	if c := DedupKey("def f(x):\n    return x\n", "f(1, 3)"); a == c {
		t.Error("another input gives the same dedup key")
	}
}

func TestReadEvalSet(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "eval.jsonl")
	os.WriteFile(good, []byte(`{"id": "a", "code": "def f(x):\n    return x + 1\n", "input": "1"}`+"\n\n"+`{"code": "def g():\n    pass"}`+"\n"), 0o644)
	set, err := ReadEvalSet(context.Background(), "mini", good)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 2 || !set.Contains("def f(x):\n  return x + 1  # same\n") || set.Contains("def f(x):\n    return x + 2\n") {
		t.Errorf("set = %+v", set)
	}
	for name, content := range map[string]string{"no code": `{"id": 1}`, "not json": `{`} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".jsonl")
		os.WriteFile(p, []byte("\n"+content+"\n"), 0o644)
		if _, err := ReadEvalSet(context.Background(), "bad", p); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: err = %v, want one naming line 2", name, err)
		}
	}
	if _, err := ReadEvalSet(context.Background(), "missing", filepath.Join(dir, "nope.jsonl")); err == nil {
		t.Error("missing file: no error")
	}
}

func FuzzNormalizeSource(f *testing.F) {
	for _, s := range []string{"def f(x):\n    return x\n", "s = '''a\n'''", "x = (1,\n 2)  # c\n", "'unterminated", "\\\n", ")))\n\t\t x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		n := NormalizeSource(src)
		// Idempotent up to indentation depth, and never longer than needed.
		if again := NormalizeSource(n); again != NormalizeSource(again) {
			t.Fatalf("not stable: %q -> %q -> %q", src, n, again)
		}
	})
}

func TestEachLine(t *testing.T) {
	var got []string
	err := EachLine(strings.NewReader("a\n\n  b  \r\n\t\nc"), func(line int, text []byte) error {
		got = append(got, fmt.Sprintf("%d:%s", line, text))
		return nil
	})
	if err != nil || strings.Join(got, " ") != "1:a 3:b 5:c" {
		t.Errorf("EachLine = %v, %v", got, err)
	}
	stop := errors.New("stop")
	if err := EachLine(strings.NewReader("a\nb\n"), func(int, []byte) error { return stop }); err != stop {
		t.Errorf("the callback's error is not returned: %v", err)
	}
}

// TestItemDedupKeyDeps: an item without Deps (every corpus item) keeps the key DedupKey gives;
// an item found in a repository keys on its Deps too, and its hash stays what it was (Commit
// fixes Deps).
func TestItemDedupKeyDeps(t *testing.T) {
	corpus := Item{Key: "c.jsonl#0", Code: "def f(x):\n    return x\n", Call: "f(1)"}
	if corpus.DedupKey() != DedupKey(corpus.Code, corpus.Call) {
		t.Errorf("a corpus item's key changed")
	}
	found := Item{Key: "git:u@c#m.py:f:0", Code: "import h\n\ndef f(x):\n    return h.g(x)\n", Func: "def f(x):\n    return h.g(x)",
		Call: "f(1)", RepoURL: "u", Commit: "c"}
	plain := found.DedupKey()
	hash := found.Hash()
	a, b := found, found
	a.Deps, b.Deps = "aa", "bb"
	if a.DedupKey() == plain || a.DedupKey() == b.DedupKey() {
		t.Errorf("Deps does not change the dedup key: %s, %s, %s", plain, a.DedupKey(), b.DedupKey())
	}
	if a.Hash() != hash || b.Hash() != hash {
		t.Errorf("Deps changed the item's hash")
	}
}
