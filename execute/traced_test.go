package execute

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestTracedItemLine checks that a chunk line written by AppendJSON reads back as the item
// encoding/json would have written, with and without a compact trace.
func TestTracedItemLine(t *testing.T) {
	b := debugger.NewTraceBuilder()
	none := "None"
	for _, ev := range []schemas.Event{
		{Event: "call", Frame: 1, Func: "f", File: "<item>", Lineno: 1, Locals: schemas.Locals{{Name: "n", Value: "3"}}},
		{Event: "line", Frame: 1, Func: "f", File: "<item>", Lineno: 2, Locals: schemas.Locals{{Name: "n", Value: "3"}}, Src: "x = n <&> 1"},
		{Event: "return", Frame: 1, Func: "f", File: "<item>", Lineno: 2, Locals: schemas.Locals{{Name: "n", Value: "3"}, {Name: "x", Value: "'<\u2028>'"}}, Value: &none},
	} {
		b.Add(&ev)
	}
	tr := b.Trace()
	for _, item := range []TracedItem{
		{Item: crawl.Item{Key: "k1", Code: "def f(n): ..."}, Status: schemas.StatusOK, Trace: tr},
		{Item: crawl.Item{Key: "k2"}, Status: schemas.StatusTimeout, Detail: "timed out"},
		{Trace: tr},
	} {
		line, err := item.AppendJSON([]byte("prefix\n"))
		if err != nil {
			t.Fatal(err)
		}
		line, ok := bytes.CutPrefix(line, []byte("prefix\n"))
		if !ok || !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
			t.Fatalf("not one line after the prefix: %q", line)
		}
		want, err := json.Marshal(item)
		if err != nil {
			t.Fatal(err)
		}
		var got, exp TracedItem
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if err := json.Unmarshal(want, &exp); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, exp) {
			t.Errorf("read back\n%+v\nwant\n%+v", got, exp)
		}
		if fast, err := DecodeTracedItem(line); err != nil || !reflect.DeepEqual(fast, exp) {
			t.Errorf("DecodeTracedItem: %v\n%+v\nwant\n%+v", err, fast, exp)
		}
	}
}

// FuzzDecodeTracedItem checks DecodeTracedItem, the chunk reader, against json.Unmarshal: the same
// lines accepted, the same item read.
func FuzzDecodeTracedItem(f *testing.F) {
	tr := debugger.NewTrace([]schemas.Event{{Event: "call", Frame: 1, Func: "f", File: "<item>", Lineno: 1,
		Locals: schemas.Locals{{Name: "n", Value: "3"}}}})
	line, err := TracedItem{Item: crawl.Item{Key: "k"}, Status: schemas.StatusOK, Trace: tr}.AppendJSON(nil)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{string(line), `{}`, `{"trace":null}`, `{"Trace":{"v":1,"strs":[""],"evs":[]},"trace":null}`,
		`{"status":"ok","trace":{"v":1,"strs":["","a"],"evs":[0,1,1,1,0,0,0,0,0,0,1,1,1]},"detail":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, err := DecodeTracedItem(line)
		var want TracedItem
		werr := json.Unmarshal(line, &want)
		if werr == nil && bytes.Equal(bytes.TrimSpace(line), []byte("null")) {
			return // json.Unmarshal takes null as no change; a chunk line is an object
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: DecodeTracedItem error %v, json error %v", line, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n%+v\nwant\n%+v", line, got, want)
		}
	})
}
