package execute

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// llmUnit is a unit whose inputs are asked for.
var llmUnit = genUnit{mod: genModule{rel: "pkg/mod.py", name: "pkg.mod"}, fn: sandbox.FoundFunction{QualName: "C.area", Kind: "method"},
	src: "    def area(self, w, h=1):\n        return w * h"}

// llmServer is a fake OpenAI-compatible endpoint on loopback answering with handle.
func llmServer(t *testing.T, handle http.HandlerFunc) schemas.LLMSpec {
	t.Helper()
	srv := httptest.NewServer(handle)
	t.Cleanup(srv.Close)
	in := schemas.InputsSpec{LLM: &schemas.LLMSpec{URL: srv.URL + "/v1", Model: "m", Proposals: 3}}.WithDefaults()
	return *in.LLM
}

// answer writes a chat completion whose message is content.
func answer(w http.ResponseWriter, content string) {
	json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]string{"role": "assistant", "content": content}}}})
}

func TestLLMProposer(t *testing.T) {
	var got chatRequest
	var path string
	spec := llmServer(t, func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		data, _ := io.ReadAll(r.Body)
		json.Unmarshal(data, &got)
		answer(w, "Here are calls:\n```python\narea(2, 3)\n1. area(w=4)\n- `area(2, 3)`\nC.area(5, h=0.5)\n"+
			"area(__import__('os').system('x'))\narea(open('/etc/passwd'))\narea(1); import os\nexec('x')\narea(7)\n```")
	})
	p := newLLMProposer(spec, 3)
	args, err := p.Propose(context.Background(), llmUnit)
	if err != nil {
		t.Fatal(err)
	}
	// Literal calls only, without repeats, at most 3.
	if want := []string{"2, 3", "w=4", "5, h=0.5"}; !slices.Equal(args, want) {
		t.Errorf("proposals %q, want %q", args, want)
	}
	if path != "/v1/chat/completions" || got.Model != "m" || got.Temperature != 0 || got.Seed != genSeed(3, "llm", "pkg/mod.py", "C.area") ||
		len(got.Messages) != 2 || !strings.Contains(got.Messages[1].Content, llmUnit.src) || !strings.Contains(got.Messages[1].Content, "3 different calls area(") {
		t.Errorf("request to %s: %+v", path, got)
	}
}

// TestLLMProposerHostile: an endpoint that answers too much, too late, not JSON, with an error
// status or a redirect gives an error (counted by the generation), never a proposal.
func TestLLMProposerHostile(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	big := strings.Repeat("area(1)\n", maxLLMResponse/8+1)
	for _, tc := range []struct {
		name   string
		handle http.HandlerFunc
	}{
		{"huge", func(w http.ResponseWriter, r *http.Request) { answer(w, big) }},
		{"slow", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}},
		{"not json", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "area(1)\n") }},
		{"no choices", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"choices": []}`) }},
		{"error", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusInternalServerError) }},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", http.StatusTemporaryRedirect)
		}},
	} {
		spec := llmServer(t, tc.handle)
		if tc.name == "slow" {
			d, _ := schemas.ParseDuration("200ms")
			spec.Timeout = d
		}
		args, err := newLLMProposer(spec, 0).Propose(context.Background(), llmUnit)
		if err == nil || args != nil {
			t.Errorf("%s: %q, %v", tc.name, args, err)
		}
	}
}

// TestProposals: the lines of an answer that are calls of the function with literal arguments.
func TestProposals(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"f(1)\nf(1)\nf( 1 )\n", []string{"1"}},
		{"f()\n", []string{""}},
		{"g(1)\nf(x)\nf(1) + f(2)\nf(1)\\\n", nil},
		{"2. f('a', b=[1])\n", []string{"'a', b=[1]"}},
		{"`f(1)` and more\n", nil},
		{strings.Repeat("f("+strings.Repeat("1", maxCallBytes)+")\n", 3), nil},
	} {
		if got := proposals(tc.text, "f", 8); !slices.Equal(got, tc.want) {
			t.Errorf("proposals(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func FuzzProposals(f *testing.F) {
	for _, s := range []string{"f(1)\nf(x=2)", "1. f('a')", "f(__import__('os'))", "```\nf([1, {2: 3}])\n```"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got := proposals(text, "f", 4)
		if len(got) > 4 {
			t.Fatalf("%d proposals", len(got))
		}
		for _, a := range got {
			if !validCall("f("+a+")", "f") {
				t.Errorf("proposal %q is not a literal argument list", a)
			}
		}
	})
}
