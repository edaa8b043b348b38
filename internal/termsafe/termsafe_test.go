package termsafe

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		name, in, one, block string
	}{
		{"empty", "", "", ""},
		{"plain", "ModuleNotFoundError: no module named 'x'", "ModuleNotFoundError: no module named 'x'", "ModuleNotFoundError: no module named 'x'"},
		{"printable unicode", "café ⟦λ⟧ 日本 👩‍💻 a\u00adb \\x1b", "café ⟦λ⟧ 日本 👩‍💻 a\u00adb \\x1b", "café ⟦λ⟧ 日本 👩‍💻 a\u00adb \\x1b"},
		{"OSC title", "\x1b]0;pwned\x07", `\x1b]0;pwned\x07`, `\x1b]0;pwned\x07`},
		{"OSC 52 clipboard", "\x1b]52;c;cm0gLXJmIH4=\x1b\\", `\x1b]52;c;cm0gLXJmIH4=\x1b\`, `\x1b]52;c;cm0gLXJmIH4=\x1b\`},
		{"CSI clear screen", "\x1b[2J\x1b[H", `\x1b[2J\x1b[H`, `\x1b[2J\x1b[H`},
		{"C1 CSI rune", "a\u009b2Jb", `a\u009b2Jb`, `a\u009b2Jb`},
		{"C1 CSI raw byte", "a\x9b2Jb", `a\x9b2Jb`, `a\x9b2Jb`},
		{"C1 first and last", "\u0080\u009f", `\u0080\u009f`, `\u0080\u009f`},
		{"bidi override", "user\u202etxt.exe", `user\u202etxt.exe`, `user\u202etxt.exe`},
		{"bidi set", "\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200f\u061c", `\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200f\u061c`, `\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200f\u061c`},
		{"line separators", "a\u2028b\u2029c", `a\u2028b\u2029c`, `a\u2028b\u2029c`},
		{"tab newline", "def f():\n\treturn 1\n", `def f():\n\treturn 1\n`, "def f():\n\treturn 1\n"},
		{"carriage return", "ok\rFAILED", `ok\rFAILED`, `ok\rFAILED`},
		{"NUL DEL BS", "a\x00b\x7fc\x08", `a\x00b\x7fc\x08`, `a\x00b\x7fc\x08`},
		{"invalid UTF-8", "a\xff\xc3(\xed\xa0\x80", `a\xff\xc3(\xed\xa0\x80`, `a\xff\xc3(\xed\xa0\x80`},
		{"truncated rune at end", "é\xe2\x80", `é\xe2\x80`, `é\xe2\x80`},
		{"real U+FFFD", "\ufffd", "\ufffd", "\ufffd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := String(tc.in); got != tc.one {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.one)
			}
			if got := Text(tc.in); got != tc.block {
				t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.block)
			}
			if got, want := Safe(tc.in), tc.in == tc.one; got != want {
				t.Errorf("Safe(%q) = %v, want %v", tc.in, got, want)
			}
		})
	}
}

// TestNoAllocation: printable text is returned as it is, without a copy.
func TestNoAllocation(t *testing.T) {
	s := strings.Repeat("def f(x): return x + 1  # café\n", 10)
	if n := testing.AllocsPerRun(100, func() { _ = Text(s) }); n != 0 {
		t.Errorf("Text of printable text: %v allocations, want 0", n)
	}
}

// isBidi reports the bidi controls and separators the package escapes.
func isBidi(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || r == 0x2028 || r == 0x2029 ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// checkSafe fails t if out holds invalid UTF-8, a control character (other than tab and newline
// when block) or a bidi control.
func checkSafe(t *testing.T, in, out string, block bool) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("escape(%q, %v) = %q: invalid UTF-8", in, block, out)
	}
	for _, r := range out {
		if block && (r == '\t' || r == '\n') {
			continue
		}
		if unicode.IsControl(r) || isBidi(r) {
			t.Fatalf("escape(%q, %v) = %q: holds %U", in, block, out, r)
		}
	}
}

func FuzzString(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]0;t\x07", "\x1b]52;c;eA==\x07", "\x1b[2J", "\x9b2J", "\u009b2J",
		"a\u202eb", "\u2066x\u2069", "def f():\n\treturn '\r'\n", "\xed\xa0\x80", "é\xe2\x80", "\\x1b", "👩‍💻"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		one, block := String(s), Text(s)
		checkSafe(t, s, one, false)
		checkSafe(t, s, block, true)
		if strings.ContainsAny(one, "\t\n") {
			t.Fatalf("String(%q) = %q: not one line", s, one)
		}
		printable := utf8.ValidString(s)
		for _, r := range s {
			if !unicode.IsPrint(r) && r != ' ' || isBidi(r) {
				printable = false
			}
		}
		if printable && (one != s || block != s) {
			t.Fatalf("printable %q changed: String %q, Text %q", s, one, block)
		}
		// Escaping is idempotent: the output is printable text.
		if again := String(one); again != one {
			t.Fatalf("String(String(%q)) = %q, not %q", s, again, one)
		}
		if Safe(s) != (one == s) {
			t.Fatalf("Safe(%q) = %v but String gives %q", s, Safe(s), one)
		}
	})
}

func TestHandler(t *testing.T) {
	hostile := "No module named '\x1b]0;pwned\x07\x1b[2J\u009b2J\x9b\u202eexe.txt'"
	type payload struct{ Name string }
	for _, tc := range []struct {
		name string
		log  func(l *slog.Logger)
		// want: a field of the JSON record and its decoded value.
		key, want string
	}{
		{"message", func(l *slog.Logger) { l.Info(hostile) }, "msg", String(hostile)},
		{"string value", func(l *slog.Logger) { l.Info("reject", "reason", hostile) }, "reason", String(hostile)},
		{"error value", func(l *slog.Logger) { l.Info("reject", "error", errString(hostile)) }, "error", String(hostile)},
		{"struct value", func(l *slog.Logger) { l.Info("reject", "item", payload{hostile}) }, "item", String("{Name:" + hostile + "}")},
		{"hostile key", func(l *slog.Logger) { l.Info("reject", hostile, 1) }, String(hostile), "1"},
		{"with attrs", func(l *slog.Logger) { l.With("source", hostile).Info("x") }, "source", String(hostile)},
		{"group", func(l *slog.Logger) { l.Info("x", slog.Group("g", "source", hostile)) }, "g", `{"source":` + jsonString(String(hostile)) + `}`},
		{"safe struct kept", func(l *slog.Logger) { l.Info("x", "item", payload{"ok"}) }, "item", `{"Name":"ok"}`},
		{"number kept", func(l *slog.Logger) { l.Info("x", "n", 3) }, "n", "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.log(slog.New(Handler(slog.NewJSONHandler(&buf, nil))))
			out := buf.String()
			checkSafe(t, hostile, out, true)
			if strings.ContainsRune(strings.TrimSuffix(out, "\n"), '\n') {
				t.Errorf("record on more than one line: %q", out)
			}
			var rec map[string]json.RawMessage
			if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
				t.Fatalf("%q: %v", out, err)
			}
			got := string(rec[tc.key])
			var s string
			if json.Unmarshal(rec[tc.key], &s) == nil {
				got = s
			}
			if got != tc.want {
				t.Errorf("%s = %q, want %q (record %s)", tc.key, got, tc.want, out)
			}
		})
	}
}

// TestTextHandlerQuotes pins what Handler's documentation relies on: slog's text handler escapes
// control and bidi characters itself.
func TestTextHandlerQuotes(t *testing.T) {
	hostile := "\x1b]0;pwned\x07\x1b[2J\u009b2J\x9b\u202e\u2066"
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, nil))
	l.With(hostile, hostile).WithGroup(hostile).Info(hostile, hostile, hostile, "error", errString(hostile))
	checkSafe(t, hostile, buf.String(), true)
}

type errString string

func (e errString) Error() string { return string(e) }

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestJSON(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", `{"a": "café 👩‍💻", "b": [1, 2]}` + "\n", `{"a": "café 👩‍💻", "b": [1, 2]}` + "\n"},
		{"encoded C0 kept", `{"r": "\u001b]0;t\u0007"}`, `{"r": "\u001b]0;t\u0007"}`},
		{"C1 rune", "{\"r\": \"a\u009b2J\"}", `{"r": "a\u009b2J"}`},
		{"bidi", "[\"x\u202ey\u2066\u2069\u200f\u061c\"]", `["x\u202ey\u2066\u2069\u200f\u061c"]`},
		{"line separators", "\"a\u2028b\u2029\"", `"a\u2028b\u2029"`},
		{"invalid byte", "\"a\x9bb\xff\"", `"a\ufffdb\ufffd"`},
		{"raw controls", "\"a\x1b[2J\x7f\r\"", `"a\u001b[2J\u007f\u000d"`},
		{"indent kept", "{\n\t\"a\": 1\n}", "{\n\t\"a\": 1\n}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(JSON([]byte(tc.in))); got != tc.want {
				t.Errorf("JSON(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	in := []byte(`{"a": "plain"}`)
	if out := JSON(in); &out[0] != &in[0] {
		t.Error("safe JSON was copied")
	}
}

func FuzzJSON(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]0;t\x07", "\x9b2J", "\u009b2J", "a\u202eb", "\u2066x\u2069\u2028",
		"\xed\xa0\x80", "é\xe2\x80", "\\u001b", "\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// As ndtrace prints it: s in a JSON value, encoded by encoding/json.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "\t")
		if err := enc.Encode(map[string]any{"s": s, "list": []string{s, "x"}}); err != nil {
			t.Fatal(err)
		}
		out := JSON(buf.Bytes())
		checkSafe(t, s, string(out), true)
		var want, got any
		if err := json.Unmarshal(buf.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("JSON(%q) = %q: %v", buf.Bytes(), out, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("JSON changed the value: %q decodes to %#v, want %#v", out, got, want)
		}
		// Any bytes at all come out safe.
		checkSafe(t, s, string(JSON([]byte(s))), true)
	})
}
