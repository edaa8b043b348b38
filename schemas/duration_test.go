package schemas

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestDurationSpecBytes checks that a spec's JSON and Hash are byte for byte what they were when
// its durations were strings (the JSON and hashes below were written by that code): Duration
// marshals back to the text as written, and an unset one is left out as before.
func TestDurationSpecBytes(t *testing.T) {
	tests := []struct{ yaml, json, hash string }{
		{"sources:\n  - kind: examples\n",
			`{"name":"ndtrace","output":"./ndtrace-data","sources":[{"kind":"examples","path":"","func":"","calls":null,"limit":0}],"directions":["forward","inverse"],"trajectories_per_trace":1,"policy":"paper","seed":0,"tokenizer":"cl100k_base","mask":"states","max_tokens":16384,"too_long":"resample","limits":{"timeout":"10s","max_events":100000,"value_chars":1000,"repo_bytes":268435456,"repo_files":20000,"checkout_timeout":"5m"},"batch_size":64,"parallelism":4,"created_at":""}`,
			"f0be58f63e074938f415b345540805730bdb808d3d8809d1bb7e3d0abf2da7f8"},
		{"sources:\n  - kind: examples\nlimits:\n  timeout: 1m30s\n  checkout_timeout: 90s\n",
			`{"name":"ndtrace","output":"./ndtrace-data","sources":[{"kind":"examples","path":"","func":"","calls":null,"limit":0}],"directions":["forward","inverse"],"trajectories_per_trace":1,"policy":"paper","seed":0,"tokenizer":"cl100k_base","mask":"states","max_tokens":16384,"too_long":"resample","limits":{"timeout":"1m30s","max_events":100000,"value_chars":1000,"repo_bytes":268435456,"repo_files":20000,"checkout_timeout":"90s"},"batch_size":64,"parallelism":4,"created_at":""}`,
			"9ec1d96d9b6ac114f12091f211666dc1f295dbd159d4ea08dc8e0c1ecff74476"},
		{"sources:\n  - kind: repository\n    url: a\n    env: [x]\nenvironments:\n  timeout: 2h\nlimits:\n  timeout: 1.5s\n",
			`{"name":"ndtrace","output":"./ndtrace-data","sources":[{"kind":"repository","path":"","func":"","calls":null,"limit":0,"url":"a","env":["x"],"max_tests":500}],"directions":["forward","inverse"],"trajectories_per_trace":1,"policy":"paper","seed":0,"tokenizer":"cl100k_base","mask":"states","max_tokens":16384,"too_long":"resample","limits":{"timeout":"1.5s","max_events":100000,"value_chars":1000,"repo_bytes":268435456,"repo_files":20000,"checkout_timeout":"5m"},"batch_size":64,"parallelism":4,"created_at":"","environments":{"index_url":"https://pypi.org/simple","timeout":"2h","max_bytes":536870912}}`,
			"fc107e9779a7399750455008cbb46a24a6ffdcf7ee5d4599ed529c890fd56b4e"},
	}
	for _, tc := range tests {
		s, err := ParseSpec([]byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if b, err := json.Marshal(s); err != nil || string(b) != tc.json {
			t.Errorf("%q: JSON\n%s\nwant\n%s", tc.yaml, b, tc.json)
		}
		if h := s.Hash(); h != tc.hash {
			t.Errorf("%q: Hash %s, want %s", tc.yaml, h, tc.hash)
		}
		var back Spec
		if err := json.Unmarshal([]byte(tc.json), &back); err != nil || !reflect.DeepEqual(back, s) {
			t.Errorf("%q: JSON round trip: %+v, %v; want %+v", tc.yaml, back, err, s)
		}
	}
	// A spec as a workflow history holds it, without defaults (no checkout_timeout).
	const raw = `{"limits":{"timeout":"3s"},"environments":{"index_url":"x"}}`
	var s Spec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(s); string(b) != `{"name":"","output":"","sources":null,"directions":null,"trajectories_per_trace":0,"policy":"","seed":0,"tokenizer":"","mask":"","max_tokens":0,"too_long":"","limits":{"timeout":"3s","max_events":0,"value_chars":0},"batch_size":0,"parallelism":0,"created_at":"","environments":{"index_url":"x"}}` || s.Hash() != "9c9d86abd0940dede5821eef374eb130c4b0489e79983bf755ba9605053a6e2a" {
		t.Errorf("a spec without defaults: %s, %s", b, s.Hash())
	}
	if s.Limits.Timeout.Duration() != 3*time.Second || s.Limits.CheckoutTimeout.Duration() != 0 || !s.Limits.CheckoutTimeout.IsZero() {
		t.Errorf("durations: %v, %v", s.Limits.Timeout.Duration(), s.Limits.CheckoutTimeout.Duration())
	}
}

// TestDuration checks parsing, the values and errors (those of time.ParseDuration, as when the
// fields were parsed where they were used) and the YAML and JSON forms.
func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		text string
		want time.Duration
		err  bool
	}{{"10s", 10 * time.Second, false}, {"1h30m", 90 * time.Minute, false}, {"0s", 0, false}, {"-1s", -time.Second, false},
		{"", 0, true}, {"soon", 0, true}, {"10", 0, true}} {
		d, err := ParseDuration(tc.text)
		_, terr := time.ParseDuration(tc.text)
		v, verr := d.Value()
		if d.String() != tc.text || d.Duration() != tc.want || v != tc.want || (err != nil) != tc.err || (verr != nil) != tc.err || d.IsZero() != (tc.text == "") {
			t.Errorf("%q: %+v %v, Value %v %v", tc.text, d, err, v, verr)
		}
		if tc.err && (err == nil || terr == nil || err.Error() != terr.Error() || verr.Error() != terr.Error()) {
			t.Errorf("%q: error %v, want time.ParseDuration's %v", tc.text, err, terr)
		}
		if b, err := json.Marshal(d); err != nil || string(b) != strconvQuote(tc.text) {
			t.Errorf("%q: JSON %s, %v", tc.text, b, err)
		}
		if b, err := yaml.Marshal(struct {
			D Duration `yaml:"d,omitempty"`
		}{d}); err != nil || tc.text != "" && !strings.Contains(string(b), tc.text) || tc.text == "" && string(b) != "{}\n" {
			t.Errorf("%q: YAML %q, %v", tc.text, b, err)
		}
	}
	if _, err := (Duration{}).Value(); err == nil {
		t.Error("the zero Duration has a value")
	}
	// Every bad text is reported by Validate, naming the field, not by the decoder.
	for _, y := range []string{"limits:\n  timeout: soon\n", "limits:\n  timeout: 0s\n", "limits:\n  checkout_timeout: -5m\n", "limits:\n  timeout: 10\n"} {
		_, err := ParseSpec([]byte("sources:\n  - kind: examples\n" + y))
		if err == nil || !strings.Contains(err.Error(), "is not a positive duration") {
			t.Errorf("%q: %v", y, err)
		}
	}
	if _, err := ParseSpec([]byte("sources:\n  - kind: examples\nlimits:\n  timeout: [1]\n")); err == nil {
		t.Error("a list as a duration")
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }
