package crawl

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/schemas"
)

// TestRepoItemFunctions: a repository source's functions setting reaches its items' targets;
// functions_all is in an item's JSON only when set (the items of other specs are unchanged).
func TestRepoItemFunctions(t *testing.T) {
	for _, tc := range []struct {
		functions *schemas.FunctionsMode
		on, all   bool
	}{
		{nil, true, false},
		{schemas.Functions(schemas.FunctionsModeOff), false, false},
		{schemas.Functions(schemas.FunctionsModeTests), true, false},
		{schemas.Functions(schemas.FunctionsModeAll), true, true},
	} {
		it := repoItem(Resolved{Repo: Repo{URL: "https://h/r"}, Kind: KindGit, Commit: "c", Key: "git:https://h/r@c"},
			schemas.SourceSpec{Kind: "repository", URL: "https://h/r", Functions: tc.functions})
		if it.Repo.Functions != tc.on || it.Repo.FunctionsAll != tc.all {
			t.Errorf("functions %v: target %+v", tc.functions, it.Repo)
		}
		data, _ := json.Marshal(it)
		if strings.Contains(string(data), "functions_all") != tc.all || strings.Contains(string(data), "no_tests") {
			t.Errorf("functions %v: JSON %s", tc.functions, data)
		}
	}
}
