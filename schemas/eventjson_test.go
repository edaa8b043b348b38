package schemas

import (
	"bytes"
	"encoding/json"
	"testing"
)

// encodeRef is the reference: encoding/json's Encoder with SetEscapeHTML(false), as ndtrace trace
// used to print events.
func encodeRef(t testing.TB, e *Event) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var jsonStrings = []string{"", "x", "a<b>&c", `q"uo\te`, "\x00\x01\b\f\n\r\t\x1f\x7f", "é😀", "\u2028\u2029",
	"bad\xffutf8\xc3", "'<Foo object at 0x1>'", "\xed\xa0\x80", "ok \U0010FFFF end"}

func TestEventAppendJSON(t *testing.T) {
	val := "v<&>\u2028"
	empty := ""
	tests := []struct {
		name string
		e    Event
	}{
		{"zero", Event{}},
		{"nil locals", Event{Event: EventLine, Frame: 1, Func: "f", File: "main.py", Lineno: 2, Src: "    x = 1"}},
		{"empty locals", Event{Event: EventCall, Locals: Locals{}}},
		{"full", Event{Event: EventReturn, Frame: 3, Func: "f.<locals>.g", File: "a&b.py", Lineno: -1, Depth: 12,
			Src: `    return "<a>" & 'b'`, Locals: Locals{{"x", "1"}, {"s", "'<tag>&'"}, {"é", "\xff"}},
			Value: &val, ExcType: "E<1>", Unwind: true}},
		{"empty value", Event{Event: EventReturn, Value: &empty}},
	}
	for _, s := range jsonStrings {
		tests = append(tests, struct {
			name string
			e    Event
		}{"string " + s, Event{Event: s, Func: s, File: s, Src: s, Locals: Locals{{s, s}}, Value: &s, ExcType: s}})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, want := tc.e.AppendJSON(nil), encodeRef(t, &tc.e)
			if !bytes.Equal(got, want) {
				t.Errorf("AppendJSON\n got %s\nwant %s", got, want)
			}
		})
	}
}

func FuzzEventAppendJSON(f *testing.F) {
	for _, s := range jsonStrings {
		f.Add(s, s, s, 1, false)
	}
	f.Fuzz(func(t *testing.T, a, b, c string, n int, unwind bool) {
		e := Event{Event: a, Frame: n, Func: b, File: c, Lineno: -n, Depth: n / 2, Src: a + c,
			Locals: Locals{{a, b}, {c, a}}, ExcType: b, Unwind: unwind}
		if n%2 == 0 {
			e.Value = &c
		}
		if got, want := e.AppendJSON(nil), encodeRef(t, &e); !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON\n got %s\nwant %s", got, want)
		}
	})
}

func BenchmarkEventAppendJSON(b *testing.B) {
	val := "23998199990000"
	e := Event{Event: EventReturn, Frame: 1, Func: "f", File: "w.py", Lineno: 9, Src: "    return total",
		Locals: Locals{{"n", "60000"}, {"total", "23998199990000"}, {"i", "59999"}, {"x", "3599880001"}}, Value: &val}
	ref := encodeRef(b, &e)
	b.Run("encoding-json", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		b.SetBytes(int64(len(ref)))
		for i := 0; i < b.N; i++ {
			buf.Reset()
			_ = enc.Encode(&e)
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		var buf []byte
		b.SetBytes(int64(len(ref)))
		for i := 0; i < b.N; i++ {
			buf = e.AppendJSON(buf[:0])
		}
	})
}
