package schemas

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestFunctionsMode: a repository source's functions accepts true, false, tests and all; true,
// false and omitted marshal as the bool field did (a spec's JSON and Hash unchanged), all as "all".
func TestFunctionsMode(t *testing.T) {
	for _, tc := range []struct {
		value    string // "" omits the field
		on, all  bool
		wantJSON string // the source's functions member, "" none
	}{
		{"", true, false, ""},
		{"true", true, false, `"functions":true`},
		{"false", false, false, `"functions":false`},
		{"tests", true, false, `"functions":true`},
		{"all", true, true, `"functions":"all"`},
		{"'all'", true, true, `"functions":"all"`},
		{"no", false, false, `"functions":false`}, // YAML 1.1's booleans, as the bool field read them
		{"yes", true, false, `"functions":true`},
	} {
		y := "sources:\n  - kind: repository\n    url: a\n"
		if tc.value != "" {
			y += "    functions: " + tc.value + "\n"
		}
		s, err := ParseSpec([]byte(y))
		if err != nil {
			t.Fatalf("%q: %v", tc.value, err)
		}
		src := s.Sources[0]
		if src.FunctionsOn() != tc.on || src.FunctionsAll() != tc.all {
			t.Errorf("%q: FunctionsOn %v, FunctionsAll %v", tc.value, src.FunctionsOn(), src.FunctionsAll())
		}
		data, err := json.Marshal(src)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(data), `"functions"`); got != (tc.wantJSON != "") || tc.wantJSON != "" && !strings.Contains(string(data), tc.wantJSON) {
			t.Errorf("%q: JSON %s, want %s", tc.value, data, tc.wantJSON)
		}
		var back SourceSpec
		if err := json.Unmarshal(data, &back); err != nil || back.FunctionsOn() != tc.on || back.FunctionsAll() != tc.all {
			t.Errorf("%q: round trip %+v, %v", tc.value, back, err)
		}
		// The JSON of a source as the bool field wrote it.
		if tc.value == "true" || tc.value == "false" {
			b := tc.value == "true"
			old, _ := json.Marshal(struct {
				Functions *bool `json:"functions,omitempty"`
			}{&b})
			now, _ := json.Marshal(struct {
				Functions *FunctionsMode `json:"functions,omitempty"`
			}{src.Functions})
			if string(old) != string(now) {
				t.Errorf("%q: JSON %s, the bool field's %s", tc.value, now, old)
			}
		}
	}
	for _, bad := range []string{"some", "[all]", "2", "{a: b}"} {
		_, err := ParseSpec([]byte("sources:\n  - kind: repository\n    url: a\n    functions: " + bad + "\n"))
		if err == nil || !strings.Contains(err.Error(), "functions") {
			t.Errorf("functions: %s: error %v does not name the field", bad, err)
		}
	}
	var m FunctionsMode
	for _, bad := range []string{`"some"`, `3`, `null1`, `{}`} {
		if err := json.Unmarshal([]byte(bad), &m); err == nil {
			t.Errorf("JSON functions %s accepted", bad)
		}
	}
	if _, err := ParseSpec([]byte("sources:\n  - kind: examples\n    functions: all\n")); err == nil {
		t.Error("functions: all accepted on an examples source")
	}
}

// TestInputsDefaults: a spec that generates nothing has no inputs (its JSON and Hash as before);
// one with functions: all gets the defaults; given values are kept.
func TestInputsDefaults(t *testing.T) {
	plain, err := ParseSpec([]byte("sources:\n  - kind: repository\n    url: a\n"))
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := json.Marshal(plain); strings.Contains(string(data), `"inputs"`) {
		t.Errorf("a spec without generation has inputs in its JSON: %s", data)
	}
	all, err := ParseSpec([]byte("sources:\n  - kind: repository\n    url: a\n    functions: all\n"))
	if err != nil {
		t.Fatal(err)
	}
	if in := all.Inputs; in.PerFunction != 4 || in.Attempts != 200 || in.Timeout.Duration() != 5*time.Second || in.LLM != nil {
		t.Errorf("defaults %+v", in)
	}
	set, err := ParseSpec([]byte("sources:\n  - kind: repository\n    url: a\n    functions: all\ninputs:\n  per_function: 2\n  llm:\n    url: http://127.0.0.1:8080/v1\n    model: m\n"))
	if err != nil {
		t.Fatal(err)
	}
	if in := set.Inputs; in.PerFunction != 2 || in.Attempts != 200 || in.LLM == nil || in.LLM.Proposals != 8 || in.LLM.Timeout.Duration() != 30*time.Second {
		t.Errorf("inputs %+v (llm %+v)", in, in.LLM)
	}
	if all.Hash() == plain.Hash() || set.Hash() == all.Hash() {
		t.Error("Hash ignores functions or inputs")
	}
}

// TestInputsValidate: a bad inputs field is one line naming it.
func TestInputsValidate(t *testing.T) {
	const head = "sources:\n  - kind: repository\n    url: a\n    functions: all\ninputs:\n"
	for _, tc := range []struct{ yaml, field string }{
		{"  per_function: 65\n", "inputs.per_function"},
		{"  per_function: -1\n", "inputs.per_function"},
		{"  attempts: 10001\n", "inputs.attempts"},
		{"  timeout: 10ms\n", "inputs.timeout"},
		{"  timeout: 11m\n", "inputs.timeout"},
		{"  timeout: soon\n", "inputs.timeout"},
		{"  llm:\n    model: m\n", "inputs.llm.url"},
		{"  llm:\n    url: ftp://h/v1\n    model: m\n", "inputs.llm.url"},
		{"  llm:\n    url: /v1\n    model: m\n", "inputs.llm.url"},
		{"  llm:\n    url: http://u:p@h/v1\n    model: m\n", "inputs.llm.url"},
		{"  llm:\n    url: http://h/v1\n", "inputs.llm.model"},
		{"  llm:\n    url: http://h/v1\n    model: m\n    proposals: 65\n", "inputs.llm.proposals"},
		{"  llm:\n    url: http://h/v1\n    model: m\n    timeout: -1s\n", "inputs.llm.timeout"},
		{"  llm:\n    url: http://h/v1\n    model: m\n    bogus: 1\n", "bogus"},
		{"  perfunction: 1\n", "perfunction"},
	} {
		_, err := ParseSpec([]byte(head + tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.field) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v does not name %s in a line", tc.yaml, err, tc.field)
		}
	}
	for _, ok := range []string{"  per_function: 64\n  attempts: 1\n  timeout: 100ms\n", "  timeout: 10m\n",
		"  llm:\n    url: https://api.example/v1\n    model: m\n    proposals: 1\n"} {
		if _, err := ParseSpec([]byte(head + ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// TestGenerationTime: the bound of one repository's generation and items, by inputs.
func TestGenerationTime(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    InputsSpec
		time  time.Duration
		items int
	}{
		// 500 finds of 35 s and 2000 units of 10 s: 29,167 s, past the 2 h cap.
		{"defaults", InputsSpec{}, MaxGenTime, 2000},
		// 500 finds of 35 s and 2000 units of 5.1 s: 27,700 s, past the cap too.
		{"short", InputsSpec{Timeout: parseDuration("100ms"), PerFunction: 1}, MaxGenTime, 2000},
		{"long", InputsSpec{Timeout: parseDuration("10m"), PerFunction: 64}, MaxGenTime, MaxGenItems},
		{"llm", InputsSpec{LLM: &LLMSpec{URL: "http://h", Model: "m", Timeout: parseDuration("1m")}}, MaxGenTime, 2000},
	} {
		if got := tc.in.GenerationBudget(); got != tc.time {
			t.Errorf("%s: GenerationBudget %v, want %v", tc.name, got, tc.time)
		}
		// The last runs begun within the budget: a find, or a request and a run.
		last := GenFindTimeout + GenSlack
		if tc.in.LLM != nil {
			last = max(last, MinInputsTimeout+2*GenSlack+tc.in.LLM.Timeout.Duration())
		}
		if got := tc.in.GenerationTime(); got != tc.time+last {
			t.Errorf("%s: GenerationTime %v, want %v", tc.name, got, tc.time+last)
		}
		if got := tc.in.GenerationItems(); got != tc.items {
			t.Errorf("%s: GenerationItems %d, want %d", tc.name, got, tc.items)
		}
	}
}

func FuzzFunctionsModeJSON(f *testing.F) {
	for _, s := range []string{`true`, `false`, `"all"`, `"tests"`, `"some"`, `null`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		var m FunctionsMode
		if json.Unmarshal([]byte(data), &m) != nil {
			return
		}
		out, err := json.Marshal(m)
		var back FunctionsMode
		if err != nil || json.Unmarshal(out, &back) != nil || back != m {
			t.Errorf("%s: round trip %s, %v", data, out, err)
		}
	})
}
