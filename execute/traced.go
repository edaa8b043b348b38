package execute

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/internal/jsonmembers"
)

// AppendJSON appends t to b as one JSON line. The compact trace, most of the line, is
// appended in place (debugger.Trace.AppendJSON) rather than marshalled, then checked and copied
// again by encoding/json as a json.Marshaler's output would be.
func (t TracedItem) AppendJSON(b []byte) ([]byte, error) {
	tr := t.Trace
	t.Trace = nil
	b, err := appendWithTrace(b, t, tr)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// appendWithTrace appends v, a struct that marshals to a JSON object without its trace, to b with
// the member "trace": tr (when tr is not nil) appended in place by tr.AppendJSON.
func appendWithTrace(b []byte, v any, tr *debugger.Trace) ([]byte, error) {
	head, err := traceHead(v, tr)
	if err != nil || tr == nil {
		return append(b, head...), err
	}
	if b, err = tr.AppendJSON(append(b, head...)); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// writeWithTrace writes to w what appendWithTrace appends, the trace a piece at a time
// (debugger.Trace.WriteJSON).
func writeWithTrace(w io.Writer, v any, tr *debugger.Trace) error {
	head, err := traceHead(v, tr)
	if err == nil {
		_, err = w.Write(head)
	}
	if err != nil || tr == nil {
		return err
	}
	if err := tr.WriteJSON(w); err != nil {
		return err
	}
	_, err = w.Write([]byte{'}'})
	return err
}

// traceHead is v marshalled (a JSON object) when tr is nil, else the object open for its trace:
// without its closing brace, with the member name "trace" added.
func traceHead(v any, tr *debugger.Trace) ([]byte, error) {
	rest, err := json.Marshal(v)
	if err != nil || tr == nil {
		return rest, err
	}
	rest = rest[:len(rest)-1] // without its closing brace
	if len(rest) > 1 {
		rest = append(rest, ',')
	}
	return append(rest, `"trace":`...), nil
}

// DecodeTracedItem reads one line of a stored chunk (AppendJSON's) as json.Unmarshal would,
// except that the trace's bytes go to debugger.Trace.DecodeJSON unscanned: they are most of the
// line, and encoding/json would validate and skip them before the trace reads them.
func DecodeTracedItem(line []byte) (TracedItem, error) {
	var t TracedItem
	tr, err := decodeWithTrace(line, &t)
	if err != nil {
		return TracedItem{}, err
	}
	t.Trace = tr
	return t, nil
}

// decodeWithTrace reads data, what appendWithTrace wrote, into v as json.Unmarshal would, and
// returns its member "trace" (nil when there is none or it is null), read by
// debugger.Trace.DecodeJSON without encoding/json scanning its bytes first.
func decodeWithTrace(data []byte, v any) (*debugger.Trace, error) {
	var tr *debugger.Trace
	rest := append(make([]byte, 0, 512), '{')
	n, err := jsonmembers.Walk(data, func(name string, v []byte) (int, error) {
		if strings.EqualFold(name, "trace") { // as json.Unmarshal matches a field
			if bytes.HasPrefix(v, []byte("null")) {
				tr = nil
				return len("null"), nil
			}
			tr = new(debugger.Trace)
			return tr.DecodeJSON(v)
		}
		n, err := jsonmembers.ValueLen(v)
		if err != nil {
			return 0, err
		}
		if len(rest) > 1 {
			rest = append(rest, ',')
		}
		key, _ := json.Marshal(name)
		rest = append(append(append(rest, key...), ':'), v[:n]...)
		return n, nil
	})
	if err == nil {
		err = jsonmembers.End(data, n)
	}
	if err == nil {
		err = json.Unmarshal(append(rest, '}'), v)
	}
	if err != nil {
		return nil, err
	}
	return tr, nil
}
