package sandbox

import (
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/schemas"
)

func TestCheckRefused(t *testing.T) {
	many := make([]string, maxRefused+1)
	for i := range many {
		many[i] = RefusedTestpaths
	}
	tests := []struct {
		name  string
		kinds []string
		ok    bool
	}{
		{"none", nil, true},
		{"every kind", []string{RefusedArgs, RefusedTestpaths, "--ignore", "--ignore-glob", "--deselect"}, true},
		{"repeats", []string{RefusedTestpaths, RefusedTestpaths}, true},
		{"full", many[:maxRefused], true},
		{"too many", many, false},
		{"unknown kind", []string{"--cov"}, false},
		{"empty", []string{""}, false},
		{"a path", []string{"../outside"}, false},
		{"long", []string{strings.Repeat("x", 1<<20)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			why := checkRefused(tc.kinds)
			if (why == "") != tc.ok || len(why) > 200 {
				t.Errorf("checkRefused(%.40q) = %q, want ok %v", tc.kinds, why, tc.ok)
			}
		})
	}
}

func TestFindsNothing(t *testing.T) {
	tests := []struct {
		status schemas.Status
		tests  []string
		want   bool
	}{
		{schemas.StatusOK, nil, true},
		{schemas.StatusOK, []string{}, true},
		{schemas.StatusException, []string{}, true},
		{schemas.StatusOK, []string{"tests/test_a.py::test_x"}, false},
		{schemas.StatusTampered, []string{}, false},
		{schemas.StatusTimeout, []string{}, false},
		{schemas.StatusOutputLimit, []string{}, false},
	}
	for _, tc := range tests {
		if got := findsNothing(&Collection{Status: tc.status, Tests: tc.tests}); got != tc.want {
			t.Errorf("findsNothing(%s, %q) = %v, want %v", tc.status, tc.tests, got, tc.want)
		}
	}
	for runner, want := range map[string]string{"": RunnerUnittest, RunnerPytest: RunnerUnittest, RunnerUnittest: RunnerPytest} {
		if got := otherRunner(runner); got != want {
			t.Errorf("otherRunner(%q) = %q, want %q", runner, got, want)
		}
	}
}
