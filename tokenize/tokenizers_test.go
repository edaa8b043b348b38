package tokenize_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/tokenize"
	"github.com/ndtrace/ndtrace/tokenize/tokenizertest"
)

func get(t testing.TB, name string) tokenize.Tokenizer {
	t.Helper()
	tok, err := tokenize.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// writeSynthetic writes a synthetic tokenizer.json into a temporary directory.
func writeSynthetic(t testing.TB, o tokenize.SyntheticOptions) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "synthetic.json")
	if err := os.WriteFile(p, tokenize.SyntheticTokenizerJSON(o), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeSP writes a synthetic SentencePiece-style tokenizer.json into a temporary directory.
func writeSP(t testing.TB, o tokenize.SPOptions) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sp-"+o.Style+".json")
	if err := os.WriteFile(p, tokenize.SentencePieceTokenizerJSON(o), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConformance runs the conformance suite on every tokenizer that needs no download: the byte
// tokenizer, both tiktoken encodings, and tokenizer.json files built by the test (the hand-written
// Qwen2 pre-tokenizer with NFC, a pattern only regexp2 runs, and SentencePiece-style files of the
// Llama 2, Mistral and Gemma kinds). TestJSReference runs it on the real Qwen3 and Llama 3 files.
func TestConformance(t *testing.T) {
	names := []string{"bytes", "cl100k_base", "o200k_base",
		"hf:" + writeSynthetic(t, tokenize.SyntheticOptions{}),
		"hf:" + writeSynthetic(t, tokenize.SyntheticOptions{Pattern: `'s|\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`, NoNormalizer: true}),
		"hf:" + writeSP(t, tokenize.SPOptions{Style: "llama2"}),
		"hf:" + writeSP(t, tokenize.SPOptions{Style: "mistral"}),
		"hf:" + writeSP(t, tokenize.SPOptions{Style: "gemma"})}
	for _, name := range names {
		tok := get(t, name)
		t.Run(tok.Name(), func(t *testing.T) { tokenizertest.Run(t, tok) })
	}
}

// TestConformanceRace reruns TestConformance under the race detector, so that the suite's
// concurrency case checks the shared piece caches for data races.
func TestConformanceRace(t *testing.T) {
	if raceEnabled {
		t.Skip("already running with -race")
	}
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to rebuild the test with -race")
	}
	// -race needs cgo and a C compiler.
	env, err := exec.Command(goTool, "env", "CGO_ENABLED", "CC").Output()
	if f := strings.Fields(string(env)); err != nil || len(f) < 2 || f[0] != "1" {
		t.Skipf("cgo is off, so -race is unavailable (go env: %q, %v)", env, err)
	} else if _, err := exec.LookPath(f[1]); err != nil {
		t.Skipf("no C compiler %q for -race: %v", f[1], err)
	}
	cmd := exec.Command(goTool, "test", "-race", "-count=1", "-run", "^TestConformance$", ".")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test -race: %v\n%s", err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}

// TestSpecialIDTables pins the documented special-token ids (docs/tokenizers.md).
func TestSpecialIDTables(t *testing.T) {
	for _, tt := range []struct {
		name  string
		first int32
		own   map[int32]string
		gaps  []int32
	}{
		{"cl100k_base", 100277, map[int32]string{100257: "<|endoftext|>", 100258: "<|fim_prefix|>", 100260: "<|fim_suffix|>", 100276: "<|endofprompt|>"}, []int32{100256, 100261, 100275}},
		{"o200k_base", 200019, map[int32]string{199999: "<|endoftext|>", 200018: "<|endofprompt|>"}, []int32{199998, 200000, 200017}},
	} {
		tok := get(t, tt.name)
		for i, s := range tokenize.SpecialTokens {
			if id, _ := tok.SpecialID(s); id != tt.first+int32(i) {
				t.Errorf("%s %s: id %d, want %d", tt.name, s, id, tt.first+int32(i))
			}
		}
		if want := int(tt.first) + len(tokenize.SpecialTokens); tok.VocabSize() != want {
			t.Errorf("%s VocabSize %d, want %d", tt.name, tok.VocabSize(), want)
		}
		for id, s := range tt.own {
			if got, err := tok.Decode([]int32{id}); err != nil || got != s {
				t.Errorf("%s Decode(%d) = %q, %v; want %s", tt.name, id, got, err, s)
			}
		}
		for _, id := range tt.gaps {
			if got, err := tok.Decode([]int32{id}); err == nil {
				t.Errorf("%s Decode(unused id %d) = %q", tt.name, id, got)
			}
		}
	}
}

// TestTiktokenIDs compares with ids from the official tiktoken (npm tiktoken 1.0.22).
func TestTiktokenIDs(t *testing.T) {
	tests := []struct {
		name, text string
		want       []int32
	}{
		{"cl100k_base", "hello world", []int32{15339, 1917}},
		{"cl100k_base", "x = 1\n", []int32{87, 284, 220, 16, 198}},
		{"cl100k_base", "  hello\n\n  world  ", []int32{220, 24748, 271, 220, 1917, 256}},
		{"cl100k_base", "ABCdef'S", []int32{26484, 755, 13575}},
		{"cl100k_base", "a'ſx", []int32{64, 6, 129, 123, 87}},
		{"o200k_base", "hello world", []int32{24912, 2375}},
		{"o200k_base", "x = 1\n", []int32{87, 314, 220, 16, 198}},
		{"o200k_base", "  hello\n\n  world  ", []int32{220, 40617, 279, 220, 2375, 256}},
		{"o200k_base", "ABCdef'S", []int32{44197, 1314, 31233}},
		{"o200k_base", "a'ſx", []int32{64, 6, 70067, 87}},
	}
	for _, tt := range tests {
		if got := get(t, tt.name).EncodeOrdinary(tt.text); !slices.Equal(got, tt.want) {
			t.Errorf("%s %q: %v, want %v", tt.name, tt.text, got, tt.want)
		}
	}
}

func TestGet(t *testing.T) {
	a, b := get(t, "cl100k_base"), get(t, "cl100k_base")
	if a != b {
		t.Error("Get loaded cl100k_base twice")
	}
	if a.Name() != "cl100k_base" || get(t, "bytes").Name() != "bytes" {
		t.Errorf("names %q", a.Name())
	}
	path := writeSynthetic(t, tokenize.SyntheticOptions{})
	hf := get(t, "hf:"+path)
	if ok, _ := regexp.MatchString(`^hf:synthetic@[0-9a-f]{8}$`, hf.Name()); !ok {
		t.Errorf("hf name %q", hf.Name())
	}
	named := get(t, "hf:qwen-mini="+path)
	if want := "hf:qwen-mini@" + strings.TrimPrefix(hf.Name(), "hf:synthetic@"); named.Name() != want {
		t.Errorf("labelled name %q, want %q", named.Name(), want)
	}
	for _, bad := range []string{"", "gpt2", "hf:", "hf:/no/such/tokenizer.json", "llama3:" + path, "p50k_base"} {
		if _, err := tokenize.Get(bad); err == nil {
			t.Errorf("Get(%q) succeeded", bad)
		}
	}
	if got := tokenize.Names(); !slices.Equal(got, []string{"bytes", "cl100k_base", "o200k_base", "hf:PATH", "llama3:PATH"}) {
		t.Errorf("Names() = %q", got)
	}
}

func ExampleGet() {
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		panic(err)
	}
	ids, err := tokenize.Encode(tok, "<|begin_of_text|><|trace_context_start|>x = 1\n<|frame_sep|>")
	if err != nil {
		panic(err)
	}
	fmt.Println(ids)
	text, _ := tok.Decode(ids)
	fmt.Printf("%q\n", text)
	// Output:
	// [100277 100286 87 284 220 16 198 100279]
	// "<|begin_of_text|><|trace_context_start|>x = 1\n<|frame_sep|>"
}
