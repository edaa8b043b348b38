package debugger_test

import (
	"encoding/json"
	"fmt"
	"reflect"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr debugger.Trace
			if err := json.Unmarshal([]byte(tc.data), &tr); err == nil {
				t.Fatalf("accepted %s", tc.data)
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
