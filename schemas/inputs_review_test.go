package schemas

import (
	"strings"
	"testing"
)

// TestInputsLLMURLSecretNotEchoed (outside review): an llm.url refused for the credentials or the
// query it holds (an API key put where it does not belong) is named in the error without them: the
// error goes to logs, CI output and preflight reports.
func TestInputsLLMURLSecretNotEchoed(t *testing.T) {
	const head = "sources:\n  - kind: repository\n    url: a\n    functions: all\ninputs:\n  llm:\n    model: m\n    url: "
	for _, u := range []string{"https://user:sk-SECRET@api.example/v1", "https://api.example/v1?api_key=sk-SECRET",
		"https://api.example/v1#sk-SECRET", "https://sk-SECRET@api.example/v1"} {
		_, err := ParseSpec([]byte(head + u + "\n"))
		if err == nil || !strings.Contains(err.Error(), "inputs.llm.url") {
			t.Fatalf("%s: error %v", u, err)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: the error shows the secret: %v", u, err)
		}
	}
}
