package main

import (
	"errors"
	"testing"
)

// TestLoadSpecErrors checks that a bad spec is a usage error naming the spec's file and the field,
// whether schemas.ParseSpec finds it or crawl.CheckRequirements (an env's requirements) does.
func TestLoadSpecErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, msg string }{
		{"sources:\n  - kind: examples\nlimits:\n  timeout: soon\n", `limits.timeout: "soon" is not a positive duration`},
		{"sources:\n  - kind: repository\n    url: a\n    env: ['-e .']\n", `sources[0].env[0]: requirement "-e .": `},
		{"sources:\n  - kind: repository\n    url: a\n    env: ['x @ https://evil.example/x.whl']\n",
			`sources[0].env[0]: requirement "x @ https://evil.example/x.whl": direct references (name @ url) are refused`},
		{"sources:\n  - kind: jsonl\n    path: a.jsonl\n    limt: 3\n", `sources[0]: unknown field "limt" (did you mean "limit"?)`},
	} {
		p := writeSpec(t, t.TempDir(), tc.yaml)
		tc.msg = p + ": " + tc.msg
		_, err := loadSpec(p, "")
		var ue usageError
		if !errors.As(err, &ue) || len(ue.msg) < len(tc.msg) || ue.msg[:len(tc.msg)] != tc.msg {
			t.Errorf("%q: %v; want a usage error starting %q", tc.yaml, err, tc.msg)
		}
	}
}
