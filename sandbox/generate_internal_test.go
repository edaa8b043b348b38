package sandbox

import (
	"fmt"
	"strings"
	"testing"
)

// TestParseGeneration: a generate run's result is checked field by field; anything out of its
// bounds or form makes it invalid (an error), except what is mapped (reasons, exception names) or
// dropped (inputs of a source a generator may not give).
func TestParseGeneration(t *testing.T) {
	ok := func(rec string) string { return rec + "\n" }
	long := strings.Repeat("a", 41)
	manyLines := make([]string, MaxGenLines+1)
	for i := range manyLines {
		manyLines[i] = fmt.Sprint(i + 1)
	}
	manyFuncs := strings.Repeat(`{"qualname":"f","kind":"function","line":1,"end_line":1},`, MaxGenFunctions)
	manyFuncs = `{"status":"ok","functions":[` + manyFuncs + `{"qualname":"f","kind":"function","line":1,"end_line":1}]}`
	for _, tc := range []struct {
		name, data, function string
		err                  string // a part of the error; "" for none
		check                func(*Generation) error
	}{
		{name: "find", data: ok(`{"status":"ok","functions":[{"qualname":"f","kind":"function","line":1,"end_line":2},` +
			`{"qualname":"C.m","kind":"method","line":3,"end_line":4,"skip":"class_needs_arguments"},` +
			`{"qualname":"C.s","kind":"staticmethod","line":5,"end_line":5,"skip":"Weird Reason"},` +
			`{"qualname":"\u00e9t\u00e9","kind":"function","line":6,"end_line":6,"skip":"` + long + `"}],"extra":{"x":[1]}}`),
			check: func(g *Generation) error {
				if len(g.Functions) != 4 || g.Functions[1].Skip != "class_needs_arguments" || g.Functions[2].Skip != "other" ||
					g.Functions[3].Skip != "other" || g.Functions[3].QualName != "été" {
					return fmt.Errorf("%+v", g.Functions)
				}
				return nil
			}},
		{name: "inputs", function: "C.m", data: ok(`{"status":"ok","inputs":[{"call":"C().m(1)","source":"typed","lines":[3,4]},` +
			`{"call":"C.m(2)","source":"fuzzed","lines":[],"raised":"C.m.<locals>.E"},{"call":"C(1).m(2)","source":"corpus","lines":[4]},` +
			`{"call":"C().m('\u00e9')","source":"llm","lines":[4],"raised":"bad name!"}],"lines":[3,4],"attempts":999999,"reason":"x"}`),
			check: func(g *Generation) error {
				if len(g.Inputs) != 3 || g.Inputs[1].Raised != "C.m.<locals>.E" || g.Inputs[2].Raised != "?" || g.Inputs[2].Call != "C().m('é')" ||
					len(g.Lines) != 2 || g.Attempts != 999999 || g.Reason != "x" {
					return fmt.Errorf("%+v", g)
				}
				return nil
			}},
		{name: "missing module", data: ok(`{"status":"exception","missing_module":"a.b","detail":"line\nbreak"}`),
			check: func(g *Generation) error {
				if g.Status != "exception" || g.MissingModule != "a.b" || g.Detail != "line break" {
					return fmt.Errorf("%+v", g)
				}
				return nil
			}},
		{name: "nulls", data: ok(`{"status":"ok","functions":null,"inputs":null,"lines":null}`)},
		{name: "memory", data: ok(`{"status":"memory"}`)},
		{name: "no newline", data: `{"status":"ok"}`, err: "no result line"},
		{name: "empty", data: "", err: "no result line"},
		{name: "two lines", data: "{\"status\":\"ok\"}\n{\"status\":\"ok\"}\n", err: "more than one line"},
		{name: "junk after", data: ok(`{"status":"ok"} x`), err: "more after"},
		{name: "not an object", data: ok(`[1]`), err: "where { was due"},
		{name: "truncated", data: ok(`{"status":"ok","functions":[`), err: "result"},
		{name: "status forged", data: ok(`{"status":"timeout"}`), err: "status"},
		{name: "status missing", data: ok(`{}`), err: "status"},
		{name: "key twice", data: ok(`{"status":"ok","status":"ok"}`), err: "twice"},
		{name: "bad module", data: ok(`{"status":"exception","missing_module":"a b"}`), err: "dotted"},
		{name: "bad qualname", data: ok(`{"status":"ok","functions":[{"qualname":"a.b.c","kind":"method","line":1,"end_line":1}]}`), err: "qualname"},
		{name: "bad kind", data: ok(`{"status":"ok","functions":[{"qualname":"f","kind":"lambda","line":1,"end_line":1}]}`), err: "kind"},
		{name: "method not in a class", data: ok(`{"status":"ok","functions":[{"qualname":"f","kind":"method","line":1,"end_line":1}]}`), err: "a method"},
		{name: "bad lines of a function", data: ok(`{"status":"ok","functions":[{"qualname":"f","kind":"function","line":3,"end_line":2}]}`), err: "lines"},
		{name: "float line", data: ok(`{"status":"ok","functions":[{"qualname":"f","kind":"function","line":1.5,"end_line":2}]}`), err: "functions"},
		{name: "too many functions", data: ok(manyFuncs), err: "more than 5000"},
		{name: "inputs in find", data: ok(`{"status":"ok","inputs":[{"call":"f()","source":"typed","lines":[]}]}`), err: "find run"},
		{name: "too many inputs", function: "f", data: ok(`{"status":"ok","inputs":[` + strings.Repeat(`{"call":"f()","source":"typed","lines":[]},`, 4) + `{"call":"f()","source":"typed","lines":[]}]}`), err: "more than 4"},
		{name: "call of another", function: "f", data: ok(`{"status":"ok","inputs":[{"call":"g()","source":"typed","lines":[]}]}`), err: "not a call of f"},
		{name: "call too long", function: "f", data: ok(`{"status":"ok","inputs":[{"call":"f(` + strings.Repeat("1", MaxGenCallBytes) + `)","source":"typed","lines":[]}]}`), err: "bytes"},
		{name: "call not UTF-8 comes out valid", function: "f", data: ok("{\"status\":\"ok\",\"inputs\":[{\"call\":\"f('\xff\\udc80')\",\"source\":\"typed\",\"lines\":[]}]}"),
			check: func(g *Generation) error {
				if len(g.Inputs) != 1 || g.Inputs[0].Call != "f('\uFFFD\uFFFD')" {
					return fmt.Errorf("%+v", g.Inputs)
				}
				return nil
			}},
		{name: "call with a newline", function: "f", data: ok(`{"status":"ok","inputs":[{"call":"f(\n)","source":"typed","lines":[]}]}`), err: "control"},
		{name: "lines unsorted", function: "f", data: ok(`{"status":"ok","inputs":[{"call":"f()","source":"typed","lines":[2,1]}]}`), err: "sorted"},
		{name: "lines twice", data: ok(`{"status":"ok","lines":[1,1]}`), err: "sorted"},
		{name: "line zero", data: ok(`{"status":"ok","lines":[0]}`), err: "out of"},
		{name: "line too far", data: ok(`{"status":"ok","lines":[10000001]}`), err: "out of"},
		{name: "too many lines", data: ok(`{"status":"ok","lines":[` + strings.Join(manyLines, ",") + `]}`), err: "more than 100000"},
		{name: "negative attempts", data: ok(`{"status":"ok","attempts":-1}`), err: "attempts"},
		{name: "huge attempts", data: ok(`{"status":"ok","attempts":1e30}`), err: "attempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := parseGeneration([]byte(tc.data), tc.function, 4)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				if err := tc.check(g); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestGenNames: the names a generation may hold.
func TestGenNames(t *testing.T) {
	for s, want := range map[string]bool{"f": true, "C.m": true, "_x1": true, "été": true, "x\u0301": true,
		"": false, "1f": false, "a.b.c": false, "a.": false, ".a": false, "a-b": false, "a b": false} {
		if got := genQualName(s); got != want {
			t.Errorf("genQualName(%q) = %v", s, got)
		}
	}
	for s, want := range map[string]string{"": "", "async": "async", "needs_io": "needs_io", "a_": "other",
		"Async": "other", "_a": "other", "a__b": "other", strings.Repeat("a", 40): strings.Repeat("a", 40),
		strings.Repeat("a", 41): "other", "ok2": "ok2"} {
		if got := genReason(s); got != want {
			t.Errorf("genReason(%q) = %q, want %q", s, got, want)
		}
	}
	for s, want := range map[string]bool{"ValueError": true, "a.b.C": true, "f.<locals>.E": true,
		"<locals>.E": false, "E.<locals>": false, "?": false, "a..b": false} {
		if got := genTypeName(s); got != want {
			t.Errorf("genTypeName(%q) = %v", s, got)
		}
	}
}

// FuzzParseGeneration: no result a run writes panics the parser or gets past its bounds.
func FuzzParseGeneration(f *testing.F) {
	for _, s := range []string{
		"{\"status\":\"ok\",\"functions\":[{\"qualname\":\"f\",\"kind\":\"function\",\"line\":1,\"end_line\":2}]}\n",
		"{\"status\":\"ok\",\"inputs\":[{\"call\":\"f(1)\",\"source\":\"typed\",\"lines\":[1,2],\"raised\":\"E\"}],\"lines\":[1,2],\"attempts\":3,\"reason\":\"x\"}\n",
		"{\"status\":\"exception\",\"missing_module\":\"a.b\",\"detail\":\"d\"}\n",
		"{\"status\":\"ok\",\"lines\":[[[[[[]]]]]]}\n", "\n", "{}", "[",
	} {
		f.Add([]byte(s), "f")
	}
	f.Fuzz(func(t *testing.T, data []byte, function string) {
		g, err := parseGeneration(data, function, 4)
		if err != nil {
			return
		}
		if len(g.Functions) > MaxGenFunctions || len(g.Inputs) > 4 || len(g.Lines) > MaxGenLines || !g.Status.Valid() {
			t.Fatalf("out of bounds: %+v", g)
		}
		for _, in := range g.Inputs {
			if len(in.Call) > MaxGenCallBytes || !genSources[in.Source] || genLines(in.Lines) != nil {
				t.Fatalf("input out of bounds: %+v", in)
			}
		}
		for _, fn := range g.Functions {
			if checkFound(fn) != nil || genReason(fn.Skip) != fn.Skip {
				t.Fatalf("function out of bounds: %+v", fn)
			}
		}
		if genReason(g.Reason) != g.Reason || len(g.Detail) > MaxDetail {
			t.Fatalf("reason or detail: %+v", g)
		}
	})
}
