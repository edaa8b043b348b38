package schemas

import (
	"encoding/json"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a spec's duration field ("10s", "5m", "1h30m", time.ParseDuration's syntax): the text
// as written and its value, parsed once when the spec is decoded (from YAML or JSON) or its default
// set, so that no later package parses it again. It marshals back to the exact text, so a spec's
// JSON (its Hash, workflow inputs and histories) is what it was when the field was a string. A text
// that is not a duration decodes without error: Spec.Validate reports it, naming the field, and
// Value returns its parse error. The zero Duration is the empty text (the field unset).
type Duration struct {
	text string
	d    time.Duration
	err  error // the parse error of a non-empty text that is not a duration
}

// errNoDuration is the error of the empty text: time.ParseDuration's, as when the field was parsed
// where it was used.
var _, errNoDuration = time.ParseDuration("")

// ParseDuration returns the Duration of text and, if text is not a duration, the parse error (the
// Duration then keeps the text, and Value returns the error).
func ParseDuration(text string) (Duration, error) {
	d := parseDuration(text)
	_, err := d.Value()
	return d, err
}

// parseDuration parses text, keeping a parse error in the Duration.
func parseDuration(text string) Duration {
	if text == "" {
		return Duration{}
	}
	d, err := time.ParseDuration(text)
	return Duration{text: text, d: d, err: err}
}

// Duration returns the value: 0 if the text is empty or not a duration.
func (d Duration) Duration() time.Duration { return d.d }

// Value returns the value, or the error of parsing the text if it is empty or not a duration.
func (d Duration) Value() (time.Duration, error) {
	switch {
	case d.err != nil:
		return 0, d.err
	case d.text == "":
		return 0, errNoDuration
	}
	return d.d, nil
}

// String returns the text as written.
func (d Duration) String() string { return d.text }

// IsZero reports whether the text is empty (the field unset): omitted by omitzero and omitempty.
func (d Duration) IsZero() bool { return d.text == "" }

// MarshalJSON writes the text as a JSON string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.text) }

// UnmarshalJSON reads a JSON string and parses it.
func (d *Duration) UnmarshalJSON(data []byte) error {
	var text string
	if err := json.Unmarshal(data, &text); err != nil {
		return err
	}
	*d = parseDuration(text)
	return nil
}

// MarshalYAML writes the text.
func (d Duration) MarshalYAML() (any, error) { return d.text, nil }

// UnmarshalYAML reads a scalar and parses it.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var text string
	if err := n.Decode(&text); err != nil {
		return err
	}
	*d = parseDuration(text)
	return nil
}
