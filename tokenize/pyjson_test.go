package tokenize

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/schemas"
)

// pyStrings holds strings and what Python's json.dumps writes for them. The expected texts were
// produced with python3 3.11.7, python3 -c 'import json; print(json.dumps(s))', while writing this
// test; the test itself does not run Python. No input contains "<|" (see pyDeviations).
var pyStrings = []struct {
	in, want string
}{
	{"", `""`},
	{"a", `"a"`},
	{"hello world", `"hello world"`},
	{"'berry'", `"'berry'"`},
	{"[1, 2, 3]", `"[1, 2, 3]"`},
	{"\"", `"\""`},
	{"\\", `"\\"`},
	{"/", `"/"`},
	{"a/b", `"a/b"`},
	{"\x0a", `"\n"`},
	{"\x0d\x0a\x09\x08\x0c", `"\r\n\t\b\f"`},
	{"\x00", `"\u0000"`},
	{"\x01\x1f", `"\u0001\u001f"`},
	{"\x7f", `"\u007f"`},
	{"\u0080", `"\u0080"`},
	{"\u00e9", `"\u00e9"`},
	{"na\u00efve caf\u00e9", `"na\u00efve caf\u00e9"`},
	{"\u00ff", `"\u00ff"`},
	{"\u0100", `"\u0100"`},
	{"\u2028\u2029", `"\u2028\u2029"`},
	{"\ufeff", `"\ufeff"`},
	{"\uffff", `"\uffff"`},
	{"\ufffd", `"\ufffd"`},
	{"\U0001f600", `"\ud83d\ude00"`},
	{"\U00010000", `"\ud800\udc00"`},
	{"\U0010ffff", `"\udbff\udfff"`},
	{"\U0001d11e clef", `"\ud834\udd1e clef"`},
	{"\u65e5\u672c\u8a9e", `"\u65e5\u672c\u8a9e"`},
	{"{'a': 1}", `"{'a': 1}"`},
	{"b'\\x00'", `"b'\\x00'"`},
	{"<", `"<"`},
	{">", `">"`},
	{"|", `"|"`},
	{"a < b", `"a < b"`},
	{"|>", `"|>"`},
	{"<>", `"<>"`},
	{"x<y|z", `"x<y|z"`},
	{"'\\n'", `"'\\n'"`},
	{"tab\x09here", `"tab\there"`},
	{"{}", `"{}"`},
	{"..", `".."`},
	{"\"quoted\" \\back\\", `"\"quoted\" \\back\\"`},
	{"mixed \u00e9\x0a\U0001f600\"/", `"mixed \u00e9\n\ud83d\ude00\"/"`},
}

// pyDicts holds dicts (as ordered Locals) and json.dumps of the same dict, produced as above.
var pyDicts = []struct {
	in   schemas.Locals
	want string
}{
	{schemas.Locals{}, `{}`},
	{schemas.Locals{{Name: "x", Value: "3"}}, `{"x": "3"}`},
	{schemas.Locals{{Name: "s", Value: "'berry'"}, {Name: "t", Value: "'r'"}}, `{"s": "'berry'", "t": "'r'"}`},
	{schemas.Locals{{Name: "a", Value: "9"}, {Name: "b", Value: "10"}}, `{"a": "9", "b": "10"}`},
	{schemas.Locals{{Name: "\u00e9", Value: "\U0001f600"}, {Name: "k\x0a", Value: "v\x09"}}, `{"\u00e9": "\ud83d\ude00", "k\n": "v\t"}`},
	{schemas.Locals{{Name: "result", Value: "[1, 2, 3, 4, 6, 7, 8, 9, 10]"}, {Name: "c", Value: "10"}}, `{"result": "[1, 2, 3, 4, 6, 7, 8, 9, 10]", "c": "10"}`},
	{schemas.Locals{{Name: "", Value: ""}}, `{"": ""}`},
}

// pyDeviations are the strings where we deliberately differ from json.dumps: '<' directly followed by
// '|' is written \u003c, so that a value can never contain a special token.
var pyDeviations = []struct {
	in, want string
}{
	{"<|", `"\u003c|"`},
	{"<|frame_sep|>", `"\u003c|frame_sep|>"`},
	{"a<|b<c|d<<|", `"a\u003c|b<c|d<\u003c|"`},
	{"<|<|", `"\u003c|\u003c|"`},
	{"<", `"<"`},
	{"|<", `"|<"`},
}

func TestAppendPyString(t *testing.T) {
	for _, tc := range append(pyStrings, pyDeviations...) {
		got, err := appendPyString(nil, tc.in)
		if err != nil {
			t.Errorf("appendPyString(%q): %v", tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("appendPyString(%q) = %s, want %s", tc.in, got, tc.want)
		}
		for _, strict := range []bool{true, false} {
			v, end, err := decodePyString(tc.want, 0, strict)
			if err != nil || v != tc.in || end != len(tc.want) {
				t.Errorf("decodePyString(%s, strict=%v) = %q, %d, %v; want %q, %d, nil", tc.want, strict, v, end, err, tc.in, len(tc.want))
			}
		}
	}
}

func TestAppendPyObject(t *testing.T) {
	for _, tc := range pyDicts {
		got, err := appendPyObject(nil, tc.in, false)
		if err != nil {
			t.Errorf("appendPyObject(%q): %v", tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("appendPyObject(%q) = %s, want %s", tc.in, got, tc.want)
		}
		l, elided, end, err := decodePyObject(tc.want, 0, true, true)
		if err != nil || elided || end != len(tc.want) || !reflect.DeepEqual(l, tc.in) {
			t.Errorf("decodePyObject(%s) = %q, %v, %d, %v; want %q", tc.want, l, elided, end, err, tc.in)
		}
	}
}

func TestPyObjectElided(t *testing.T) {
	tests := []struct {
		in   schemas.Locals
		want string
	}{
		{schemas.Locals{}, `{"..": ".."}`},
		{schemas.Locals{{Name: "n", Value: "0"}}, `{"..": "..", "n": "0"}`},
		{schemas.Locals{{Name: "c", Value: "'r'"}, {Name: "d", Value: ".."}}, `{"..": "..", "c": "'r'", "d": ".."}`},
	}
	for _, tc := range tests {
		got, err := appendPyObject(nil, tc.in, true)
		if err != nil || string(got) != tc.want {
			t.Errorf("appendPyObject(%q, elided) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
		l, elided, _, err := decodePyObject(tc.want, 0, true, true)
		if err != nil || !elided || !reflect.DeepEqual(l, tc.in) {
			t.Errorf("decodePyObject(%s) = %q, %v, %v; want %q, elided", tc.want, l, elided, err, tc.in)
		}
	}
}

func TestCheckLocals(t *testing.T) {
	tests := []struct {
		in   schemas.Locals
		want string // error substring, "" for none
	}{
		{nil, ""},
		{schemas.Locals{{Name: "a", Value: ".."}}, ""},
		{schemas.Locals{{Name: "..", Value: ".."}}, `[0].Name: ".." is reserved`},
		{schemas.Locals{{Name: "a", Value: "1"}, {Name: "a", Value: "2"}}, `[1].Name: duplicate name "a" (also at [0])`},
	}
	for _, tc := range tests {
		err := checkLocals(tc.in)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("checkLocals(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestAppendPyStringInvalidUTF8(t *testing.T) {
	_, err := appendPyString(nil, "ab\xffc")
	if !errors.Is(err, ErrInvalidUTF8) || !strings.Contains(err.Error(), "offset 2") {
		t.Errorf("appendPyString(invalid UTF-8) = %v, want ErrInvalidUTF8 at offset 2", err)
	}
	_, err = appendPyObject(nil, schemas.Locals{{Name: "x", Value: "\xc3"}}, false)
	if !errors.Is(err, ErrInvalidUTF8) || !strings.HasPrefix(err.Error(), "[0].Value: ") {
		t.Errorf("appendPyObject(invalid UTF-8 value) = %v, want [0].Value: ErrInvalidUTF8", err)
	}
}

// TestDecodePyLenient checks the valid JSON escapes json.dumps does not write: the lenient decoder
// accepts them, the strict one (used by the grammar parsers) refuses them.
func TestDecodePyLenient(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{`"\/"`, "/"},
		{`"\u0041"`, "A"},
		{`"\u00E9"`, "\u00e9"},
		{`"\uD83D\uDE00"`, "\U0001f600"},
		{`"\u000a"`, "\n"},
		{`"\u0022"`, `"`},
		{`"\u003c"`, "<"},
		{`"\u003c\u007c"`, "<|"},
		{`"<\u007c"`, "<|"},
	}
	for _, tc := range tests {
		v, end, err := decodePyString(tc.in, 0, false)
		if err != nil || v != tc.want || end != len(tc.in) {
			t.Errorf("lenient decodePyString(%s) = %q, %d, %v; want %q", tc.in, v, end, err, tc.want)
		}
		if _, _, err := decodePyString(tc.in, 0, true); err == nil {
			t.Errorf("strict decodePyString(%s) accepted a non-canonical escape", tc.in)
		}
	}
}

func TestDecodePyErrors(t *testing.T) {
	tests := []struct {
		in     string
		object bool
		offset int
		want   string
	}{
		{``, false, 0, "expected a JSON string, found end of text"},
		{`'a'`, false, 0, "expected a JSON string"},
		{`"abc`, false, 4, "closing"},
		{`"a\`, false, 2, "escape sequence after"},
		{`"\x41"`, false, 1, "expected an escape sequence"},
		{`"\u12"`, false, 3, "4 hex digits"},
		{`"\u12g4"`, false, 5, "hex digit"},
		{`"\ud800"`, false, 1, "lone UTF-16 high surrogate"},
		{`"\ud800\u0041"`, false, 7, "low surrogate"},
		{`"\udc00"`, false, 1, "lone UTF-16 low surrogate"},
		{"\"a\tb\"", false, 2, "raw control byte 0x09"},
		{"\"\x7f\"", false, 1, "raw DEL"},
		{"\"\u00e9\"", false, 1, "raw non-ASCII byte 0xc3"},
		{`"a<|b"`, false, 2, `raw "<|"`},
		{`x`, true, 0, "expected a JSON object"},
		{`{`, true, 1, "expected a JSON string, found end of text"},
		{`{"a":"b"}`, true, 4, `expected ": "`},
		{`{"a": "b",  "c": "d"}`, true, 11, `expected a JSON string`},
		{`{"a": "b" }`, true, 9, `expected ", " or '}'`},
		{`{"a": 1}`, true, 6, "expected a JSON string"},
		{`{"a": "1", "a": "2"}`, true, 11, `duplicate key "a"`},
		{`{"a": "1", "..": ".."}`, true, 11, `key ".." may only open`},
		{`{"..": "x"}`, true, 1, `key ".." may only open`},
		{`{"..": "..", "..": ".."}`, true, 13, `key ".." may only open`},
		{` {}`, true, 0, "expected a JSON object"},
	}
	for _, tc := range tests {
		var err error
		if tc.object {
			_, _, _, err = decodePyObject(tc.in, 0, false, true)
		} else {
			_, _, err = decodePyString(tc.in, 0, false)
		}
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset != tc.offset || !strings.Contains(se.Msg, tc.want) {
			t.Errorf("decode(%s) = %v, want a SyntaxError at byte %d containing %q", tc.in, err, tc.offset, tc.want)
		}
	}
}

func TestDecodePyObjectManyKeys(t *testing.T) {
	var l schemas.Locals
	for i := range 40 {
		l = append(l, schemas.Var{Name: strings.Repeat("k", i+1), Value: "v"})
	}
	text, err := appendPyObject(nil, l, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _, err := decodePyObject(string(text), 0, true, true); err != nil || !reflect.DeepEqual(got, l) {
		t.Fatalf("decodePyObject(40 keys) = %v, %v", got, err)
	}
	dup := strings.TrimSuffix(string(text), "}") + `, "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk": "w"}`
	if _, _, _, err := decodePyObject(dup, 0, true, true); err == nil || !strings.Contains(err.Error(), "duplicate key") {
		t.Fatalf("decodePyObject(duplicate among 41 keys) = %v, want duplicate key", err)
	}
}

// FuzzPyJSON checks that the decoders never panic, that the strict decoders accept exactly the
// encoder's output (decode then encode gives the input back), that whatever the lenient decoders
// accept re-encodes to text the strict decoders read back to the same value, and that the encoder's
// output is ASCII without "<|".
func FuzzPyJSON(f *testing.F) {
	for _, tc := range append(pyStrings, pyDeviations...) {
		f.Add(tc.want)
		f.Add(tc.in)
	}
	for _, tc := range pyDicts {
		f.Add(tc.want)
	}
	f.Add(`{"..": "..", "n": "0"}`)
	f.Add(`"\/\u0041\uD83D\uDE00"`)
	f.Fuzz(func(t *testing.T, x string) {
		if utf8.ValidString(x) {
			enc, err := appendPyString(nil, x)
			if err != nil {
				t.Fatalf("appendPyString(%q): %v", x, err)
			}
			if strings.Contains(string(enc), "<|") {
				t.Fatalf("appendPyString(%q) = %s contains <|", x, enc)
			}
			for _, c := range enc {
				if c < 0x20 || c >= 0x7f {
					t.Fatalf("appendPyString(%q) = %q is not printable ASCII", x, enc)
				}
			}
			if v, end, err := decodePyString(string(enc), 0, true); err != nil || v != x || end != len(enc) {
				t.Fatalf("decodePyString(appendPyString(%q)) = %q, %d, %v", x, v, end, err)
			}
		}

		if v, end, err := decodePyString(x, 0, false); err == nil {
			enc, err := appendPyString(nil, v)
			if err != nil {
				t.Fatalf("appendPyString(%q) of a decoded string: %v", v, err)
			}
			if v2, _, err := decodePyString(string(enc), 0, true); err != nil || v2 != v {
				t.Fatalf("strict decode of re-encoded %q = %q, %v", v, v2, err)
			}
			if v2, end2, err := decodePyString(x, 0, true); err == nil {
				if v2 != v || end2 != end || string(enc) != x[:end] {
					t.Fatalf("strict decode of %q = %q (end %d) but re-encodes to %s", x, v2, end2, enc)
				}
			}
		}

		if l, elided, end, err := decodePyObject(x, 0, false, true); err == nil {
			if err := checkLocals(l); err != nil {
				t.Fatalf("decodePyObject(%q) returned locals that checkLocals refuses: %v", x, err)
			}
			enc, err := appendPyObject(nil, l, elided)
			if err != nil {
				t.Fatalf("appendPyObject of decoded %q: %v", x, err)
			}
			l2, elided2, _, err := decodePyObject(string(enc), 0, true, true)
			if err != nil || elided2 != elided || !reflect.DeepEqual(l2, l) {
				t.Fatalf("strict decode of re-encoded %q = %q, %v, %v", enc, l2, elided2, err)
			}
			if _, _, end2, err := decodePyObject(x, 0, true, true); err == nil && (end2 != end || string(enc) != x[:end]) {
				t.Fatalf("strict decode of %q succeeded but re-encodes to %s", x, enc)
			}
		}
	})
}
