package schemas

import (
	"strings"
	"testing"
)

// TestParseSpecFieldErrors checks that a field the spec cannot take is named by its path in the
// spec, in one line, with a near known field suggested for a typo, never by a Go type.
func TestParseSpecFieldErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"valid merge", "sources:\n  - &d {kind: jsonl, path: a.jsonl}\n  - <<: *d\n    limit: 2\n", ""},
		{"typo in a source", "sources:\n  - kind: jsonl\n    path: a.jsonl\n    limt: 3\n",
			`spec: sources[0]: unknown field "limt" (did you mean "limit"?)`},
		{"typo at the top", "sources:\n  - kind: examples\ntokeniser: cl100k_base\n",
			`spec: unknown field "tokeniser" (did you mean "tokenizer"?)`},
		{"typo in limits", "sources:\n  - kind: examples\nlimits:\n  max_event: 5\n",
			`spec: limits: unknown field "max_event" (did you mean "max_events"?)`},
		{"second source", "sources:\n  - kind: examples\n  - kind: python\n    path: a.py\n    calls: ['f()']\n    colls: ['g()']\n",
			`spec: sources[1]: unknown field "colls" (did you mean "calls"?)`},
		{"nothing near", "sources:\n  - kind: examples\nzzzzzzzzzz: 1\n",
			`spec: unknown field "zzzzzzzzzz" (docs/spec.md lists the fields)`},
		{"evaluation set", "sources:\n  - kind: examples\ndecontaminate:\n  - pth: x.jsonl\n",
			`spec: decontaminate[0]: unknown field "pth" (did you mean "path"?)`},
		{"wrong kind of value", "sources:\n  - kind: jsonl\n    path: a.jsonl\n    limit: ten\n",
			`spec: sources[0].limit: "ten" is not a whole number`},
		{"list expected", "sources:\n  kind: examples\n", `spec: sources: a mapping is not a list`},
		{"boolean", "sources:\n  - kind: examples\ndedup: maybe\n", `spec: dedup: "maybe" is not true or false`},
		{"env", "sources:\n  - kind: repository\n    url: a\n    env: everything\n",
			`spec: sources[0].env: "everything" is neither "repository" nor a list of requirements`},
		{"merged field", "defaults: &d {kind: examples}\n", `spec: unknown field "defaults" (docs/spec.md lists the fields)`},
		{"merge key", "sources:\n  - &d {kind: jsonl, path: a.jsonl}\n  - <<: *d\n    limt: 2\n",
			`spec: sources[1]: unknown field "limt" (did you mean "limit"?)`},
		{"typo in a merged mapping", "sources:\n  - &d {kind: jsonl, pth: a.jsonl}\n",
			`spec: sources[0]: unknown field "pth" (did you mean "path"?)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpec([]byte(tc.yaml))
			if (err == nil) != (tc.want == "") || (err != nil && err.Error() != tc.want) {
				t.Errorf("ParseSpec: %v\nwant %s", err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), "schemas.") || strings.Contains(err.Error(), "\n")) {
				t.Errorf("error names a Go type or spans lines: %q", err)
			}
		})
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"limt", "limit", 1}, {"kitten", "sitting", 3}, {"abc", "", 3}, {"", "abc", 3}, {"ab", "ba", 1},
		{"spec", "spce", 1}, {"ca", "abc", 3}} {
		if d := editDistance(tc.a, tc.b); d != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.d)
		}
	}
}
