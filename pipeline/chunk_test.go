package pipeline

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestTracedItemLine checks that a chunk line written by appendTracedItem reads back as the item
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
		line, err := appendTracedItem([]byte("prefix\n"), item)
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
	}
}
