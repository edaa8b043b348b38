package schemas

import (
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"
)

// FunctionsMode is a repository source's functions setting (SourceSpec.Functions): which of its
// functions give function-level items. The zero value is off, so that new(FunctionsMode) reads
// as the functions: false it replaced.
type FunctionsMode uint8

// Functions modes.
const (
	// FunctionsModeOff: no function-level items (functions: false).
	FunctionsModeOff FunctionsMode = iota
	// FunctionsModeTests: the functions the repository's tests call, with the arguments they
	// were called with (functions: true, or "tests"; the default).
	FunctionsModeTests
	// FunctionsModeAll: those, and every function and method of the repository's modules, with
	// inputs generated for them (functions: all; issue 30, Spec.Inputs).
	FunctionsModeAll
)

// Functions returns a pointer to m, for a SourceSpec's Functions.
func Functions(m FunctionsMode) *FunctionsMode { return &m }

// String is the mode as a spec writes it: false, true or all.
func (m FunctionsMode) String() string {
	switch m {
	case FunctionsModeOff:
		return "false"
	case FunctionsModeTests:
		return "true"
	case FunctionsModeAll:
		return "all"
	}
	return fmt.Sprintf("FunctionsMode(%d)", uint8(m))
}

// parseFunctionsMode reads a spec's text of the setting: true, false, tests or all.
func parseFunctionsMode(text string) (FunctionsMode, error) {
	switch text {
	case "false":
		return FunctionsModeOff, nil
	case "true", "tests":
		return FunctionsModeTests, nil
	case "all":
		return FunctionsModeAll, nil
	}
	return 0, fmt.Errorf("functions: %q is not true, false, tests or all", text)
}

// MarshalJSON writes off and tests as the JSON booleans false and true, as the field was a bool
// before all existed (a spec's JSON, hence its Hash, is unchanged), and all as "all".
func (m FunctionsMode) MarshalJSON() ([]byte, error) {
	switch m {
	case FunctionsModeOff:
		return []byte("false"), nil
	case FunctionsModeTests:
		return []byte("true"), nil
	case FunctionsModeAll:
		return []byte(`"all"`), nil
	}
	return nil, fmt.Errorf("functions: unknown mode %d", uint8(m))
}

// UnmarshalJSON reads a boolean, "tests" or "all" (and "true", "false").
func (m *FunctionsMode) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil // as for every JSON value: no change
	}
	var b bool
	if err := json.Unmarshal(data, &b); err == nil {
		*m = FunctionsModeOff
		if b {
			*m = FunctionsModeTests
		}
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("functions: %s is not true, false, tests or all", clipText(string(data), 40))
	}
	v, err := parseFunctionsMode(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// MarshalYAML writes the mode as a spec writes it: a boolean, or all.
func (m FunctionsMode) MarshalYAML() (any, error) {
	switch m {
	case FunctionsModeOff:
		return false, nil
	case FunctionsModeTests:
		return true, nil
	}
	return m.String(), nil
}

// UnmarshalYAML reads a boolean (as a bool field reads it), tests or all.
func (m *FunctionsMode) UnmarshalYAML(n *yaml.Node) error {
	var b bool
	if err := n.Decode(&b); err == nil {
		*m = FunctionsModeOff
		if b {
			*m = FunctionsModeTests
		}
		return nil
	}
	var s string
	if n.Kind != yaml.ScalarNode || n.Decode(&s) != nil {
		return fmt.Errorf("line %d: functions: not true, false, tests or all", n.Line)
	}
	v, err := parseFunctionsMode(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*m = v
	return nil
}

// clipText is s cut to at most n bytes, "..." marking a cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
