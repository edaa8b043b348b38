package execute

import (
	"bytes"
	"encoding/json"
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
	rest, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if tr == nil {
		return append(b, rest...), nil
	}
	b = append(b, rest[:len(rest)-1]...) // without its closing brace
	if len(rest) > 2 {
		b = append(b, ',')
	}
	b = append(b, `"trace":`...)
	if b, err = tr.AppendJSON(b); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// DecodeTracedItem reads one line of a stored chunk (AppendJSON's) as json.Unmarshal would,
// except that the trace's bytes go to debugger.Trace.DecodeJSON unscanned: they are most of the
// line, and encoding/json would validate and skip them before the trace reads them.
func DecodeTracedItem(line []byte) (TracedItem, error) {
	var tr *debugger.Trace
	rest := append(make([]byte, 0, 512), '{')
	n, err := jsonmembers.Walk(line, func(name string, v []byte) (int, error) {
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
		err = jsonmembers.End(line, n)
	}
	var t TracedItem
	if err == nil {
		err = json.Unmarshal(append(rest, '}'), &t)
	}
	if err != nil {
		return TracedItem{}, err
	}
	t.Trace = tr
	return t, nil
}
