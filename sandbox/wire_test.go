package sandbox

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/schemas"
)

var wireSeeds = []string{
	`{"event":"call","frame":1,"func":"f","file":"main.py","lineno":1,"depth":0,"src":"def f(x):","names":["x"],"locals":{"x":"5"}}` + "\n",
	`{"event":"return","frame":3,"func":"f.<locals>.g","file":"main.py","lineno":2,"depth":2,"src":"    return \"a\\tb\" + '\u00e9'","locals":{},"value":"'\ud83d\ude00'","unwind":true}`,
	`{"event":"exception","frame":2,"func":"g","lineno":4,"depth":1,"src":"","locals":{"e":"ValueError('x')"},"value":"ValueError('x')","exc_type":"ValueError"}`,
	`{"event":"end","status":"ok","value":"6","events":3}`,
	`{"event":"end","status":"exception","value":"KeyError('k')","exc_type":"KeyError","exc_message":"'k'","events":3}`,
	`{"event":"line","frame":1,"locals":{"s":"'\ud800'"},"extra":[1,{"a":[true,false,null,-1.5e3]}]}`,
	`{}`, `{"event":1}`, `{"frame":"x"}`, `{"names":null,"locals":null}`, `[1,2]`, `{"a":}`, `{"event":"line"} x`,
	`{"event":"blocks","file":"main.py","blocks":[[1,5],[7,12]]}`,
	`{"event":"blocks","blocks":[[1,"x"]]}`, `{"blocks":[]}`, `{"blocks":[[1,2],]}`,
	`{"event":"function","file":"/r/a.py","qualname":"C.m","first":3,"last":7,"source":"@d\ndef m(self):\n    pass"}`,
	`{"event":"function","first":"x","last":1.5,"source":null}`,
	`{"event":"test","runner":"pytest","outcome":"failed","missing_module":"","when":"call","exc_type":"AssertionError","exc_message":"assert 1 == 2"}`,
	`{"event":"collection","runner":"unittest","tests":["t.T.test_a","t.T.test_b"],"errors":["x: ModuleNotFoundError: No module named 'y'"],"missing_module":"y"}`,
	`{"event":"collection","tests":[1],"errors":null}`, `{"tests":["a",]}`,
	`{"event":"collection","runner":"pytest","tests":["t.py::a"],"errors":[],"missing_module":"","neutralised":["--cov","-p no_such_plugin"],"original_runnable":false,"fallback":true}`,
	`{"event":"test","outcome":"passed","neutralised":["addopts"]}`, `{"neutralised":[1]}`, `{"neutralised":"--cov"}`,
	`{"original_runnable":1,"fallback":"yes"}`, `{"neutralised":null,"original_runnable":true}`,
	`{"event":"collection","runner":"pytest","tests":[],"refused":["args","testpaths"]}`, `{"refused":[1]}`, `{"refused":"args"}`,
}

// wireRef is the same line decoded by encoding/json, the reference.
type wireRef struct {
	Event      string            `json:"event"`
	Frame      int               `json:"frame"`
	Func       string            `json:"func"`
	File       string            `json:"file"`
	Lineno     int               `json:"lineno"`
	Depth      int               `json:"depth"`
	Src        string            `json:"src"`
	Names      []string          `json:"names"`
	Locals     map[string]string `json:"locals"`
	Value      *string           `json:"value"`
	ExcType    string            `json:"exc_type"`
	ExcMessage string            `json:"exc_message"`
	Unwind     bool              `json:"unwind"`
	Status     string            `json:"status"`
	Blocks     [][]int           `json:"blocks"`
	QualName   string            `json:"qualname"`
	Source     string            `json:"source"`
	First      int               `json:"first"`
	Last       int               `json:"last"`
	Runner     string            `json:"runner"`
	Outcome    string            `json:"outcome"`
	Missing    string            `json:"missing_module"`
	When       string            `json:"when"`
	Tests      []string          `json:"tests"`
	Errors     []string          `json:"errors"`
	Neutral    []string          `json:"neutralised"`
	Runnable   bool              `json:"original_runnable"`
	Fallback   bool              `json:"fallback"`
	Refused    []string          `json:"refused"`
}

var wireFields = func() map[string]string {
	m := map[string]string{}
	for _, f := range reflect.VisibleFields(reflect.TypeOf(wireRef{})) {
		name := f.Tag.Get("json")
		m[strings.ToLower(name)] = name
	}
	return m
}()

func TestParseWire(t *testing.T) {
	for _, seed := range wireSeeds {
		checkWire(t, []byte(seed))
	}
	w, err := parseWire([]byte(wireSeeds[1]))
	if err != nil {
		t.Fatal(err)
	}
	if w.Src != "    return \"a\\tb\" + 'é'" || *w.Value != "'😀'" || !w.Unwind || w.Depth != 2 {
		t.Errorf("decoded %+v", w)
	}
	w, _ = parseWire([]byte(wireSeeds[5]))
	if got := w.Locals[0].Value; got != "'\uFFFD'" {
		t.Errorf("lone surrogate decoded as %q", got)
	}
}

func FuzzParseWire(f *testing.F) {
	for _, s := range wireSeeds {
		f.Add([]byte(s))
	}
	// The decoder's parser reuses its record's arrays and interns strings: after any other line
	// it must give what a fresh parseWire gives.
	var p wireParser
	var reused wireEvent
	f.Fuzz(func(t *testing.T, b []byte) {
		checkWire(t, b)
		want, wantErr := parseWire(b)
		err := p.parse(b, &reused)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("reused parser: error %v, fresh %v", err, wantErr)
		}
		if err == nil && !sameWire(reused, want) {
			t.Fatalf("reused parser\n got %+v\nwant %+v", reused, want)
		}
	})
}

// sameWire compares two records, nil and empty Names and Locals alike but for HasNames.
func sameWire(a, b wireEvent) bool {
	if len(a.Names) != len(b.Names) || len(a.Locals) != len(b.Locals) ||
		(a.Locals == nil) != (b.Locals == nil) || (a.Value == nil) != (b.Value == nil) ||
		(a.Value != nil && *a.Value != *b.Value) {
		return false
	}
	for i := range a.Names {
		if a.Names[i] != b.Names[i] {
			return false
		}
	}
	for i := range a.Locals {
		if a.Locals[i] != b.Locals[i] {
			return false
		}
	}
	a.Names, b.Names, a.Locals, b.Locals, a.Value, b.Value = nil, nil, nil, nil, nil, nil
	return reflect.DeepEqual(a, b)
}

// checkWire compares parseWire with encoding/json: whatever parseWire accepts is valid JSON, and
// where encoding/json decodes the line into the wire schema both agree.
func checkWire(t *testing.T, b []byte) {
	t.Helper()
	w, err := parseWire(b)
	if err != nil {
		return
	}
	if !json.Valid(b) {
		t.Fatalf("accepted invalid JSON %q", b)
	}
	// encoding/json matches keys case-insensitively; the wire format does not.
	var keys map[string]json.RawMessage
	if json.Unmarshal(b, &keys) != nil {
		return
	}
	for k := range keys {
		if f, ok := wireFields[strings.ToLower(k)]; ok && f != k {
			return
		}
	}
	var ref wireRef
	if json.Unmarshal(b, &ref) != nil {
		return // valid JSON of other types: parseWire skips fields it cannot use
	}
	// encoding/json fills a short inner array with zeros and drops extra elements; the wire format
	// has pairs only, and parseWire skips a blocks value that is not a list of pairs.
	for _, b := range ref.Blocks {
		if len(b) != 2 {
			ref.Blocks = nil
			break
		}
	}
	var blocks [][]int
	if w.Blocks != nil {
		blocks = [][]int{}
		for _, b := range w.Blocks {
			blocks = append(blocks, []int{b[0], b[1]})
		}
	}
	got := wireRef{Event: w.Event, Frame: w.Frame, Func: w.Func, File: w.File, Lineno: w.Lineno, Depth: w.Depth,
		Src: w.Src, Names: w.Names, Value: w.Value, ExcType: w.ExcType, ExcMessage: w.ExcMessage,
		Unwind: w.Unwind, Status: w.Status, Blocks: blocks, QualName: w.QualName, Source: w.Source,
		First: w.First, Last: w.Last, Runner: w.Runner, Outcome: w.Outcome, Missing: w.MissingModule, When: w.When,
		Tests: w.Tests, Errors: w.Errors, Neutral: w.Neutralised, Runnable: w.OriginalRunnable, Fallback: w.Fallback,
		Refused: w.Refused}
	if w.Locals != nil {
		got.Locals = map[string]string{}
		for _, v := range w.Locals {
			got.Locals[v.Name] = v.Value
		}
	}
	if !reflect.DeepEqual(got, ref) {
		t.Fatalf("parseWire(%q)\n got %+v\nwant %+v", b, got, ref)
	}
}

func TestDecoderRebuildsLocals(t *testing.T) {
	d := newDecoder(nil, decodeLimits{})
	for _, l := range []string{
		`{"event":"call","frame":1,"func":"f","lineno":1,"names":["a","b"],"locals":{"a":"1","b":"2"}}`,
		`{"event":"line","frame":1,"func":"f","lineno":2,"locals":{}}`,
		`{"event":"line","frame":1,"func":"f","lineno":3,"names":["a","b","c"],"locals":{"c":"3"}}`,
		`{"event":"line","frame":1,"func":"f","lineno":4,"names":["a","c"],"locals":{"a":"9"}}`,
		`{"event":"end","status":"ok","value":"9"}`,
	} {
		d.decode([]byte(l))
	}
	want := [][]schemas.Var{
		{{Name: "a", Value: "1"}, {Name: "b", Value: "2"}},
		{{Name: "a", Value: "1"}, {Name: "b", Value: "2"}},
		{{Name: "a", Value: "1"}, {Name: "b", Value: "2"}, {Name: "c", Value: "3"}},
		{{Name: "a", Value: "9"}, {Name: "c", Value: "3"}},
	}
	if len(d.events) != len(want) || d.end == nil || d.end.value != "9" {
		t.Fatalf("%d events, end %+v", len(d.events), d.end)
	}
	for i, w := range want {
		if !reflect.DeepEqual([]schemas.Var(d.events[i].Locals), w) {
			t.Errorf("event %d locals %v, want %v", i, d.events[i].Locals, w)
		}
	}
}
