package schemas

import (
	"encoding/json"
	"reflect"
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
		{"sources:\n  - kind: examples\nlicense: MIT License\n", "license"},
		{"sources:\n  - kind: repository\n", "sources[0].url"},
		{"sources:\n  - kind: repository\n    url: a\n    list: b\n", "sources[0].url"},
		{"sources:\n  - kind: repository\n    list: b\n    ref: main\n", "sources[0].ref"},
		{"sources:\n  - kind: repository\n    url: a\n    runner: nose\n", "sources[0].runner"},
		{"sources:\n  - kind: repository\n    url: a\n    venv: rel/venv\n", "sources[0].venv"},
		{"sources:\n  - kind: repository\n    url: a\n    python_path: [x]\n", "sources[0].python_path[0]"},
		{"sources:\n  - kind: jsonl\n    path: x\n    url: y\n", "sources[0]: url"},
		{"sources:\n  - kind: jsonl\n    path: x\n    reexecute: false\n", "reexecute"},
		{"sources:\n  - kind: python\n    path: x.py\n    calls: ['f()']\n    frozen_clock: true\n", "frozen_clock"},
		{"sources:\n  - kind: examples\nlimits:\n  checkout_timeout: never\n", "limits.checkout_timeout"},
		{"sources:\n  - kind: examples\ndecontaminate:\n  - name: x\n", "decontaminate[0].path"},
		{"sources:\n  - kind: examples\ndecontaminate:\n  - path: x.jsonl\n    ngram: 2\n", "decontaminate[0].ngram"},
		{"sources:\n  - kind: examples\ndecontaminate:\n  - path: x.jsonl\n    threshold: 1.5\n", "decontaminate[0].threshold"},
		{"sources:\n  - kind: examples\ndecontaminate:\n  - path: x.jsonl\n    threshold: -0.1\n", "decontaminate[0].threshold"},
		{"sources:\n  - kind: examples\ndedup: false\ndedup_against: [x]\n", "dedup_against[0]"},
		{"sources:\n  - kind: examples\ndecontaminate:\n  - path: a/x.jsonl\n  - path: b/x.jsonl\n", "decontaminate[1].name"},
		{"sources:\n  - kind: examples\n    pth: x\n", "pth"},
		{"sources:\n  - kind: examples\n    env: [a]\n", "sources[0]: url"},
		{"sources:\n  - kind: repository\n    url: a\n    env: setup.py\n", "env"},
		{"sources:\n  - kind: repository\n    url: a\n    env: []\n", "sources[0].env"},
		{"sources:\n  - kind: repository\n    url: a\n    env: [x]\nenvironments:\n  index_url: ftp://x\n", "environments.index_url"},
		{"sources:\n  - kind: repository\n    url: a\n    env: [x]\nenvironments:\n  find_links: [rel]\n", "environments.find_links[0]"},
		{"sources:\n  - kind: repository\n    url: a\n    env: [x]\nenvironments:\n  timeout: x\n", "environments.timeout"},
		{"sources:\n  - kind: repository\n    url: a\nenvironments:\n  allow_sdist: true\n", "no repository source has an env"},
	}
	for _, tc := range tests {
		_, err := ParseSpec([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%q: error %v does not name %s", tc.yaml, err, tc.field)
		}
	}
	a, _ := ParseSpec([]byte(good))
	b, err := ParseSpec([]byte(good + "output: s3://elsewhere\nparallelism: 9\nlicense: cc-by-4.0\n"))
	if err != nil || b.License != "cc-by-4.0" {
		t.Fatalf("license: %q, %v", b.License, err)
	}
	c, _ := ParseSpec([]byte(good + "seed: 1\n"))
	if a.Hash() != b.Hash() || a.Hash() == c.Hash() {
		t.Error("Hash ignores the wrong fields")
	}
}

func TestParseSpecEnv(t *testing.T) {
	s, err := ParseSpec([]byte("sources:\n  - kind: repository\n    url: a\n    env: repository\n  - kind: repository\n    url: b\n    env: ['pytest>=7', 'numpy; python_version >= \"3.9\"']\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Sources[0].Env.FromRepository || len(s.Sources[1].Env.Requirements) != 2 {
		t.Errorf("env: %+v %+v", s.Sources[0].Env, s.Sources[1].Env)
	}
	if e := s.Environments; e == nil || e.IndexURL != DefaultIndexURL || e.Timeout.String() != DefaultEnvTimeout || e.MaxBytes != DefaultEnvMaxBytes || e.AllowSdist {
		t.Errorf("environments defaults: %+v", e)
	}
	// A Spec crosses process boundaries as JSON.
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Spec
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) || back.Hash() != s.Hash() {
		t.Errorf("JSON round trip: %+v, want %+v", back, s)
	}
	// Only find_links: no index.
	s, err = ParseSpec([]byte("sources:\n  - kind: repository\n    url: a\n    env: [x]\nenvironments:\n  find_links: [/srv/wheels]\n"))
	if err != nil || s.Environments.IndexURL != "" {
		t.Errorf("find_links only: %+v, %v", s.Environments, err)
	}
	// Specs without env are as before (their hashes do not change).
	s, _ = ParseSpec([]byte("sources:\n  - kind: examples\n"))
	if data, _ := json.Marshal(s); s.Environments != nil || strings.Contains(string(data), "environments") || strings.Contains(string(data), "env") {
		t.Errorf("a spec without env: %s", data)
	}
}

func FuzzParseSpec(f *testing.F) {
	f.Add([]byte("sources:\n  - kind: examples\n"))
	f.Add([]byte("sources:\n  - kind: jsonl\n    path: a\nlimits: {timeout: 1s}\n"))
	f.Add([]byte("sources:\n  - kind: jsonl\n    path: a\n    limt: 3\n"))
	f.Add([]byte("x: &d {kind: examples}\nsources:\n  - <<: *d\n    limit: 2\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSpec(b)
		if err != nil && strings.Contains(err.Error(), "schemas.") {
			t.Fatalf("an error names a Go type: %v", err)
		}
		if err == nil {
			if err := s.Validate(); err != nil {
				t.Fatalf("ParseSpec accepted an invalid spec: %v", err)
			}
		}
	})
}

// TestParseSpecReexecute checks the defaults of a repository source's reexecute (on) and
// frozen_clock (off), and that both can be set.
func TestParseSpecReexecute(t *testing.T) {
	for _, tc := range []struct {
		extra             string
		reexecute, frozen bool
	}{
		{"", true, false},
		{"    reexecute: false\n", false, false},
		{"    reexecute: true\n    frozen_clock: true\n", true, true},
	} {
		s, err := ParseSpec([]byte("sources:\n  - kind: repository\n    url: a\n" + tc.extra))
		if err != nil {
			t.Fatalf("%q: %v", tc.extra, err)
		}
		if src := s.Sources[0]; src.ReexecuteOn() != tc.reexecute || src.FrozenClock != tc.frozen {
			t.Errorf("%q: reexecute %v, frozen_clock %v", tc.extra, src.ReexecuteOn(), src.FrozenClock)
		}
	}
}

// TestEvalSetDefaults: an evaluation set without ngram and threshold gets the defaults; given ones
// are kept.
func TestEvalSetDefaults(t *testing.T) {
	s, err := ParseSpec([]byte("sources:\n  - kind: examples\ndecontaminate:\n  - path: a/crux.jsonl\n  - path: b.jsonl\n    ngram: 13\n    threshold: 0.8\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []EvalSetSpec{{Name: "crux", Path: "a/crux.jsonl", Ngram: DefaultEvalNgram, Threshold: DefaultEvalThreshold},
		{Name: "b", Path: "b.jsonl", Ngram: 13, Threshold: 0.8}}
	if !reflect.DeepEqual(s.Decontaminate, want) {
		t.Errorf("decontaminate %+v, want %+v", s.Decontaminate, want)
	}
}

func TestParseSpecFiles(t *testing.T) {
	s, err := ParseSpec([]byte("sources:\n  - kind: files\n    path: s3://corpus/shards\n    repo_column: repo_name\n    env: [attrs]\n    reexecute: false\n    frozen_clock: true\n    python_path: [/sp]\n"))
	if err != nil {
		t.Fatal(err)
	}
	src := s.Sources[0]
	if src.ContentColumn != "content" || src.FilesPerItem != DefaultFilesPerItem || src.RepoColumn != "repo_name" || src.ReexecuteOn() || !src.FrozenClock {
		t.Errorf("defaults: %+v", src)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"  - kind: files\n", "spec: sources[0].path: a files source needs a path"},
		{"  - kind: files\n    path: x\n    url: https://h/r\n", "spec: sources[0].url: not for a files source"},
		{"  - kind: files\n    path: x\n    list: l.txt\n", "spec: sources[0].list: not for a files source"},
		{"  - kind: files\n    path: x\n    ref: main\n", "spec: sources[0].ref: not for a files source"},
		{"  - kind: files\n    path: x\n    runner: pytest\n", "spec: sources[0].runner: not for a files source"},
		{"  - kind: files\n    path: x\n    max_tests: 3\n", "spec: sources[0].max_tests: not for a files source"},
		{"  - kind: files\n    path: x\n    functions: false\n", "spec: sources[0].functions: not for a files source"},
		{"  - kind: files\n    path: x\n    calls: ['f()']\n", "spec: sources[0].calls: not for a files source"},
		{"  - kind: files\n    path: x\n    func: f\n", "spec: sources[0].func: not for a files source"},
		{"  - kind: files\n    path: x\n    format: csv\n", `spec: sources[0].format: "csv" is not folder, parquet or jsonl`},
		{"  - kind: files\n    path: x\n    files_per_item: 1001\n", "spec: sources[0].files_per_item: 1001 is not between 1 and 1000"},
		{"  - kind: files\n    path: x\n    files_per_item: -1\n", "spec: sources[0].files_per_item: -1 is not between 1 and 1000"},
		{"  - kind: files\n    path: x\n    content_column: \"a\\nb\"\n", "spec: sources[0].content_column: \"a\\nb\" is not a column name"},
		{"  - kind: files\n    path: x\n    format: folder\n    repo_column: r\n", "spec: sources[0].repo_column: a folder of .py files has no columns"},
		{"  - kind: files\n    path: x\n    env: repository\n", "spec: sources[0].env: \"repository\" reads a repository's requirements"},
		{"  - kind: files\n    path: x\n    venv: rel\n", "spec: sources[0].venv: \"rel\" is not an absolute path"},
		{"  - kind: files\n    path: x\n    file_per_item: 3\n", `unknown field "file_per_item" (did you mean "files_per_item"?)`},
		{"  - kind: jsonl\n    path: x\n    content_column: text\n", "spec: sources[0]: format, content_column, path_column, repo_column, license_column and files_per_item are for files sources"},
		{"  - kind: repository\n    url: x\n    files_per_item: 3\n", "are for files sources"},
		{"  - kind: filez\n", `unknown kind "filez" (jsonl, python, repository, files or examples)`},
	} {
		_, err := ParseSpec([]byte("sources:\n" + tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error on more than one line: %q", tc.yaml, err)
		}
	}
}
