package schemas

import "testing"

func TestInputSources(t *testing.T) {
	for _, tc := range []struct {
		s                string
		known, generated bool
	}{
		{InputSourceCorpus, true, false}, {InputSourceTestCall, true, false}, {InputSourceDoctest, true, true},
		{InputSourceExample, true, true}, {InputSourceTyped, true, true}, {InputSourceFuzzed, true, true},
		{InputSourceLLM, true, true}, {"", false, false}, {"other", false, false}, {"Typed", false, false},
	} {
		if got := IsInputSource(tc.s); got != tc.known {
			t.Errorf("IsInputSource(%q) = %v", tc.s, got)
		}
		if got := GeneratedInputSource(tc.s); got != tc.generated {
			t.Errorf("GeneratedInputSource(%q) = %v", tc.s, got)
		}
	}
}
