package debugger_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
)

// loopEvents returns the events of a loop of n iterations in frame 1 that calls frame 2 (whose
// locals are nil) every third iteration and adds a name at iteration 5.
func loopEvents(n int) []schemas.Event {
	v := "None"
	evs := []schemas.Event{{Event: "call", Frame: 1, Func: "f", File: "a.py", Lineno: 1, Src: "def f(n):",
		Locals: schemas.Locals{{Name: "n", Value: fmt.Sprint(n)}}}}
	for i := 0; i < n; i++ {
		l := schemas.Locals{{Name: "n", Value: fmt.Sprint(n)}, {Name: "i", Value: fmt.Sprint(i)}}
		if i >= 5 {
			l = append(l, schemas.Var{Name: "x", Value: fmt.Sprint(i * i)})
		}
		evs = append(evs, schemas.Event{Event: "line", Frame: 1, Func: "f", File: "a.py", Lineno: 3, Src: "    x = i * i", Locals: l})
		if i%3 == 0 {
			evs = append(evs, schemas.Event{Event: "call", Frame: 2, Func: "g", File: "a.py", Lineno: 9, Depth: 1, Src: "def g():"},
				schemas.Event{Event: "return", Frame: 2, Func: "g", File: "a.py", Lineno: 10, Depth: 1, Src: "    return", Value: &v, Unwind: i == 6})
		}
	}
	return append(evs, schemas.Event{Event: "exception", Frame: 1, Func: "f", File: "a.py", Lineno: 4, Src: "    raise E",
		Locals: schemas.Locals{}, Value: &v, ExcType: "E"})
}

// TestTraceRoundTrip checks that a Trace gives back every event as it was, and so does its JSON.
func TestTraceRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []schemas.Event
	}{
		{"empty", nil},
		{"one", loopEvents(0)},
		{"short", loopEvents(4)},
		{"past keyframes", loopEvents(3 * debugger.KeyframeEvery)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := debugger.NewTrace(tc.events)
			data, err := json.Marshal(tr)
			if err != nil {
				t.Fatal(err)
			}
			var back debugger.Trace
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatalf("%v: %s", err, data)
			}
			for name, got := range map[string]*debugger.Trace{"trace": tr, "json": &back} {
				if got.Len() != len(tc.events) {
					t.Fatalf("%s: %d events, want %d", name, got.Len(), len(tc.events))
				}
				for i, want := range tc.events {
					if ev := got.Event(i); !reflect.DeepEqual(ev, want) {
						t.Fatalf("%s: event %d: %+v, want %+v", name, i, ev, want)
					}
				}
			}
		})
	}
}

// TestTraceWriteJSON checks that WriteJSON writes, in pieces, the bytes AppendJSON appends, and
// that these are what encoding/json makes of them (a valid document, strings escaped as
// json.Marshal escapes them), for strings that need every kind of escape and a trace larger than
// one piece.
func TestTraceWriteJSON(t *testing.T) {
	odd := "<a href='x'>&</a> \"\\ \x00\x1f\b\f\n\r\t \u2028\u2029 \xff\xfe é 日本"
	var evs []schemas.Event
	for i := 0; i < 3000; i++ { // about 300 KB: several pieces
		v := fmt.Sprintf("%q %d %s", odd, i, strings.Repeat("x", i%97))
		evs = append(evs, schemas.Event{Event: "line", Frame: 1, Func: "f" + odd, File: "a.py", Lineno: i, Src: odd,
			Locals: schemas.Locals{{Name: "s", Value: v}}, Value: &v})
	}
	for _, events := range [][]schemas.Event{nil, evs[:1], evs} {
		tr := debugger.NewTrace(events)
		want, err := json.Marshal(tr) // encoding/json checks and compacts what AppendJSON wrote
		if err != nil {
			t.Fatal(err)
		}
		checkWriteJSON(t, tr, want)
		for _, ev := range events {
			for _, str := range []string{ev.Func, ev.Src, ev.Locals[0].Value} {
				if esc, _ := json.Marshal(str); !bytes.Contains(want, esc) {
					t.Fatalf("%q is not written as json.Marshal writes it (%s): %.200s", str, esc, want)
				}
			}
		}
	}
}

// checkWriteJSON checks that tr's AppendJSON and WriteJSON (through a writer that takes odd
// pieces) both give want.
func checkWriteJSON(t *testing.T, tr *debugger.Trace, want []byte) {
	t.Helper()
	got, err := tr.AppendJSON([]byte("prefix"))
	if err != nil || string(got) != "prefix"+string(want) {
		t.Fatalf("AppendJSON: %v, %.200q, want %.200q", err, got, want)
	}
	var w bytes.Buffer
	if err := tr.WriteJSON(&w); err != nil || !bytes.Equal(w.Bytes(), want) {
		t.Fatalf("WriteJSON: %v, %d bytes, want the %d of AppendJSON", err, w.Len(), len(want))
	}
	if err := tr.WriteJSON(failWriter{}); err == nil {
		t.Fatal("WriteJSON did not return its writer's error")
	}
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestTraceRejectsMalformed checks that stored traces with bad indices are refused, not trusted.
func TestTraceRejectsMalformed(t *testing.T) {
	for _, tc := range []struct{ name, data string }{
		{"version", `{"v":9,"strs":[""],"evs":[]}`},
		{"string index", `{"v":1,"strs":[""],"evs":[5,1,1,1,0,0,0,0,0,0,0]}`},
		{"short", `{"v":1,"strs":[""],"evs":[0,1,1]}`},
		{"diff first", `{"v":1,"strs":["","a"],"evs":[0,0,1,1,0,0,0,0,0,0,1,0,1]}`},
		{"diff position", `{"v":1,"strs":["","a"],"evs":[0,1,1,1,0,0,0,0,0,0,1,1,1,0,0,1,1,0,0,0,0,0,0,1,3,1]}`},
		{"pairs past end", `{"v":1,"strs":["","a"],"evs":[0,1,1,1,0,0,0,0,0,0,9]}`},
		{"not ints", `{"v":1,"strs":[""],"evs":["x"]}`},
		{"trailing comma", `{"v":1,"strs":[""],"evs":[0,1,1,1,0,0,0,0,0,0,0,]}`},
		{"plus sign", `{"v":1,"strs":[""],"evs":[0,1,1,+1,0,0,0,0,0,0,0]}`},
		{"leading zero", `{"v":1,"strs":[""],"evs":[0,1,1,01,0,0,0,0,0,0,0]}`},
		{"no comma", `{"v":1,"strs":[""],"evs":[0,1,1,1 0,0,0,0,0,0,0]}`},
		{"fraction", `{"v":1,"strs":[""],"evs":[0,1,1,1.0,0,0,0,0,0,0,0]}`},
		{"vertical tab", "{\"v\":1,\"strs\":[\"\"],\"evs\":[0,1,1,\v1,0,0,0,0,0,0,0]}"},
		{"after", `{"v":1,"strs":[""],"evs":[]} x`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr debugger.Trace
			if err := json.Unmarshal([]byte(tc.data), &tr); err == nil {
				t.Fatalf("accepted %s", tc.data)
			}
			// The chunk reader hands a trace its bytes unvalidated (DecodeJSON, which UnmarshalJSON
			// calls without encoding/json's scan): the trace must refuse them itself.
			if err := tr.UnmarshalJSON([]byte(tc.data)); err == nil {
				t.Fatalf("UnmarshalJSON accepted %s", tc.data)
			}
		})
	}
}

// BenchmarkTraceLocals measures materialising one event's locals, the cost of rendering a state.
func BenchmarkTraceLocals(b *testing.B) {
	tr := debugger.NewTrace(loopEvents(1000))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = tr.Locals(i % tr.Len())
	}
}

// TestTraceHints checks that the stored sizes are hints only: a trace whose hints are absent, too
// large for its array or wrong reads the same events.
func TestTraceHints(t *testing.T) {
	tr := debugger.NewTrace(loopEvents(50))
	data, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	hints := regexp.MustCompile(`"n":\d+,"np":\d+,`)
	if !hints.Match(data) {
		t.Fatalf("no size hints in %.80s", data)
	}
	for name, repl := range map[string]string{"absent": ``, "huge": `"n":99999999999,"np":5,`, "small": `"n":1,"np":1,`,
		"negative":    `"n":3,"np":-4,`,
		"overflowing": `"n":1676976733973595602,"np":0,`, "overflowing pairs": `"n":1,"np":9223372036854775807,`} {
		t.Run(name, func(t *testing.T) {
			var got debugger.Trace
			if err := json.Unmarshal(hints.ReplaceAll(data, []byte(repl)), &got); err != nil {
				t.Fatal(err)
			}
			if got.Len() != tr.Len() {
				t.Fatalf("%d events, want %d", got.Len(), tr.Len())
			}
			for i := 0; i < tr.Len(); i++ {
				if !reflect.DeepEqual(got.Event(i), tr.Event(i)) {
					t.Fatalf("event %d differs", i)
				}
			}
		})
	}
}

// BenchmarkTraceUnmarshal measures reading a stored trace of 100k events as a chunk reader does
// (DecodeJSON on the trace's bytes) and, as the baseline in the same run, through json.Unmarshal
// without the size hints (a trace written before them, read as a field of a larger value).
func BenchmarkTraceUnmarshal(b *testing.B) {
	data, err := json.Marshal(debugger.NewTrace(loopEvents(100_000)))
	if err != nil {
		b.Fatal(err)
	}
	old := regexp.MustCompile(`"n":\d+,"np":\d+,`).ReplaceAll(data, nil)
	// Every value a string JSON escapes (a repr holding a double quote): each one is decoded on
	// its own.
	evs := loopEvents(100_000)
	for i := range evs {
		for k := range evs[i].Locals {
			evs[i].Locals[k].Value = `'"` + evs[i].Locals[k].Value + `'`
		}
	}
	escaped, err := json.Marshal(debugger.NewTrace(evs))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		d    []byte
		read func(d []byte, tr *debugger.Trace) error
	}{
		{"DecodeJSON", data, func(d []byte, tr *debugger.Trace) error { _, err := tr.DecodeJSON(d); return err }},
		{"DecodeJSON-escaped-strings", escaped, func(d []byte, tr *debugger.Trace) error { _, err := tr.DecodeJSON(d); return err }},
		{"baseline-json.Unmarshal-no-hints", old, func(d []byte, tr *debugger.Trace) error { return json.Unmarshal(d, tr) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.d)))
			for i := 0; i < b.N; i++ {
				var tr debugger.Trace
				if err := bc.read(bc.d, &tr); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzTraceJSON checks the stored trace's reader: it accepts only valid JSON, and what it accepts
// it writes back in a form it reads to the same events.
func FuzzTraceJSON(f *testing.F) {
	data, err := json.Marshal(debugger.NewTrace(loopEvents(3)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"v":1,"strs":["","a"],"evs":[0,1,1,1,0,0,0,0,0,0,1,1,1]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var tr debugger.Trace
		if err := tr.UnmarshalJSON(data); err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		again, err := json.Marshal(&tr)
		if err != nil {
			t.Fatal(err)
		}
		checkWriteJSON(t, &tr, again)
		var back debugger.Trace
		if err := back.UnmarshalJSON(again); err != nil {
			t.Fatalf("%q: written back as %q, unreadable: %v", data, again, err)
		}
		if back.Len() != tr.Len() {
			t.Fatalf("%d events read back, want %d", back.Len(), tr.Len())
		}
		for i := 0; i < tr.Len(); i++ {
			if !reflect.DeepEqual(back.Event(i), tr.Event(i)) {
				t.Fatalf("event %d differs", i)
			}
		}
	})
}
