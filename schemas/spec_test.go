package schemas

import (
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	good := "name: demo\nsources:\n  - kind: jsonl\n    path: corpus.jsonl\n  - kind: python\n    path: f.py\n    calls: ['f(1)']\n  - kind: examples\n"
	s, err := ParseSpec([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if s.Output != DefaultOutput || s.Tokenizer != "cl100k_base" || len(s.Directions) != 2 || s.Sources[0].Func != "f" || s.BatchSize != 64 {
		t.Fatalf("defaults: %+v", s)
	}
	tests := []struct{ yaml, field string }{
		{"sources: []\n", "sources"},
		{"sources:\n  - kind: jsonl\n", "sources[0].path"},
		{"sources:\n  - kind: python\n    path: x.py\n", "sources[0].calls"},
		{"sources:\n  - kind: nope\n", "sources[0].kind"},
		{"sources:\n  - kind: examples\ndirections: [sideways]\n", "directions[0]"},
		{"sources:\n  - kind: examples\npolicy: random\n", "policy"},
		{"sources:\n  - kind: examples\nlimits:\n  timeout: soon\n", "limits.timeout"},
		{"sources:\n  - kind: examples\nbatch_size: -1\n", "batch_size"},
		{"sources:\n  - kind: examples\ncreated_at: yesterday\n", "created_at"},
		{"sources:\n  - kind: examples\nmax_tokens: 10\n", "max_tokens"},
		{"sources:\n  - kind: examples\npack_length: 10\n", "pack_length"},
		{"sources:\n  - kind: examples\npack_length: 99999999\n", "pack_length"},
		{"sources:\n  - kind: examples\nbogus_field: 1\n", "bogus_field"},
		{"sources:\n  - kind: repository\n", "sources[0].url"},
		{"sources:\n  - kind: repository\n    url: a\n    list: b\n", "sources[0].url"},
		{"sources:\n  - kind: repository\n    list: b\n    ref: main\n", "sources[0].ref"},
		{"sources:\n  - kind: repository\n    url: a\n    runner: nose\n", "sources[0].runner"},
		{"sources:\n  - kind: repository\n    url: a\n    venv: rel/venv\n", "sources[0].venv"},
		{"sources:\n  - kind: repository\n    url: a\n    python_path: [x]\n", "sources[0].python_path[0]"},
		{"sources:\n  - kind: jsonl\n    path: x\n    url: y\n", "sources[0]: url"},
		{"sources:\n  - kind: examples\nlimits:\n  checkout_timeout: never\n", "limits.checkout_timeout"},
		{"sources:\n  - kind: examples\ndecontaminate:\n  - name: x\n", "decontaminate[0].path"},
		{"sources:\n  - kind: examples\ndedup: false\ndedup_against: [x]\n", "dedup_against[0]"},
		{"sources:\n  - kind: examples\ndecontaminate:\n  - path: a/x.jsonl\n  - path: b/x.jsonl\n", "decontaminate[1].name"},
		{"sources:\n  - kind: examples\n    pth: x\n", "pth"},
	}
	for _, tc := range tests {
		_, err := ParseSpec([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%q: error %v does not name %s", tc.yaml, err, tc.field)
		}
	}
	a, _ := ParseSpec([]byte(good))
	b, _ := ParseSpec([]byte(good + "output: s3://elsewhere\nparallelism: 9\n"))
	c, _ := ParseSpec([]byte(good + "seed: 1\n"))
	if a.Hash() != b.Hash() || a.Hash() == c.Hash() {
		t.Error("Hash ignores the wrong fields")
	}
}

func FuzzParseSpec(f *testing.F) {
	f.Add([]byte("sources:\n  - kind: examples\n"))
	f.Add([]byte("sources:\n  - kind: jsonl\n    path: a\nlimits: {timeout: 1s}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSpec(b)
		if err == nil {
			if err := s.Validate(); err != nil {
				t.Fatalf("ParseSpec accepted an invalid spec: %v", err)
			}
		}
	})
}
