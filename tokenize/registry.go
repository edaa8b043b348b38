package tokenize

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Normalizer is implemented by tokenizers that normalize text before encoding it (a tokenizer.json
// normalizer such as Qwen's NFC). For them Decode(EncodeOrdinary(x)) == Normalize(x); for the
// others it is x.
type Normalizer interface {
	Normalize(text string) string
}

// Names lists what Get accepts: the built-in tokenizers "bytes", "cl100k_base" and "o200k_base",
// then the two forms that load a tokenizer.json file, "hf:PATH" and "llama3:PATH".
func Names() []string {
	return []string{"bytes", "cl100k_base", "o200k_base", "hf:PATH", "llama3:PATH"}
}

var registry = struct {
	sync.Mutex
	m map[string]*registryEntry
}{m: map[string]*registryEntry{}}

type registryEntry struct {
	once sync.Once
	tok  Tokenizer
	err  error
}

// Get returns the tokenizer called name, loading it on first use; later calls with the same name
// return the same tokenizer (a failed load is retried). Names:
//
//   - "bytes": one id per byte (Bytes);
//   - "cl100k_base", "o200k_base": OpenAI's tiktoken encodings (Tiktoken);
//   - "hf:PATH": the tokenizer.json at PATH (byte-level BPE or SentencePiece-style), with the
//     grammar's special tokens after its largest id (ReadHF);
//   - "llama3:PATH": a Llama 3 tokenizer.json at PATH, with the grammar's special tokens at Llama 3's
//     reserved ids, as CWM (ReadLlama3).
//
// A tokenizer loaded from a file is named "hf:LABEL@SHA8" or "llama3:LABEL@SHA8", not by its path:
// SHA8 is the first 8 hex digits of the file's SHA-256 and LABEL the file name without ".json"
// ("hf:/models/qwen3.json" gives "hf:qwen3@1a2b3c4d"). Write "hf:LABEL=PATH" to choose the label,
// e.g. "hf:qwen3=/models/Qwen3-8B/tokenizer.json". The same file thus gives the same name on every
// machine, and a changed file a different one.
func Get(name string) (Tokenizer, error) {
	registry.Lock()
	e := registry.m[name]
	if e == nil {
		e = &registryEntry{}
		registry.m[name] = e
	}
	registry.Unlock()
	e.once.Do(func() { e.tok, e.err = load(name) })
	if e.err != nil {
		registry.Lock()
		if registry.m[name] == e {
			delete(registry.m, name)
		}
		registry.Unlock()
		return nil, e.err
	}
	return e.tok, nil
}

func load(name string) (Tokenizer, error) {
	switch name {
	case "bytes":
		return Bytes(), nil
	case "cl100k_base", "o200k_base":
		return Tiktoken(name)
	}
	kind, spec, ok := strings.Cut(name, ":")
	if !ok || (kind != "hf" && kind != "llama3") || spec == "" {
		return nil, fmt.Errorf("tokenize: unknown tokenizer %q (want one of %s)", name, strings.Join(Names(), ", "))
	}
	label, path := fileLabel(spec)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %s: %w", name, err)
	}
	defer f.Close()
	if kind == "llama3" {
		return ReadLlama3(f, label)
	}
	return ReadHF(f, label)
}

// fileLabel splits "LABEL=PATH" or derives the label from PATH's file name.
func fileLabel(spec string) (label, path string) {
	if l, p, ok := strings.Cut(spec, "="); ok && labelRE.MatchString(l) && p != "" {
		return l, p
	}
	base := strings.TrimSuffix(filepath.Base(spec), ".json")
	b := []byte(base)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '+' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		b = []byte("tokenizer")
	}
	return string(b), spec
}
