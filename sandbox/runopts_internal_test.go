package sandbox

import (
	"strings"
	"testing"
)

func TestCheckNeutralised(t *testing.T) {
	many := make([]string, maxNeutralised+1)
	for i := range many {
		many[i] = "--opt" + strings.Repeat("x", i)
	}
	tests := []struct {
		name  string
		names []string
		ok    bool
	}{
		{"none", nil, true},
		{"empty", []string{}, true},
		{"some", []string{"--cov", "-n", "-p no_such_plugin", "required_plugins", "..."}, true},
		{"full", many[:maxNeutralised], true},
		{"too many", many, false},
		{"empty name", []string{"--cov", ""}, false},
		{"repeated", []string{"--cov", "--cov"}, false},
		{"longest", []string{strings.Repeat("é", maxNeutralisedName)}, true},
		{"too long", []string{strings.Repeat("x", maxNeutralisedName+1)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if why := checkNeutralised(tc.names); (why == "") != tc.ok {
				t.Errorf("checkNeutralised(%q) = %q, want ok %v", tc.names, why, tc.ok)
			}
		})
	}
}

func TestCheckOptions(t *testing.T) {
	for o, ok := range map[RunnerOptions]bool{OptionsNeutralised: true, OptionsOriginal: true, OptionsNone: true,
		"all": false, "Original": false} {
		if err := checkOptions(o); (err == nil) != ok {
			t.Errorf("checkOptions(%q) = %v", o, err)
		}
	}
}
