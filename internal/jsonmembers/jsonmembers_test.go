package jsonmembers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/ndtrace/ndtrace/internal/jsonmembers"
)

// walkAll reads every member of data with ValueLen.
func walkAll(data []byte) (map[string]string, error) {
	got := map[string]string{}
	n, err := jsonmembers.Walk(data, func(name string, v []byte) (int, error) {
		n, err := jsonmembers.ValueLen(v)
		if err == nil {
			got[name] = string(v[:n])
		}
		return n, err
	})
	if err == nil {
		err = jsonmembers.End(data, n)
	}
	return got, err
}

func TestWalk(t *testing.T) {
	for _, tc := range []struct {
		data string
		want map[string]string
		bad  bool
	}{
		{data: `{}`, want: map[string]string{}},
		{data: ` { "a" : 1 , "b":[1,2] ,"c":{"d":"}"}} `, want: map[string]string{"a": "1", "b": "[1,2]", "c": `{"d":"}"}`}},
		{data: `{"a\u0062":"x"}`, want: map[string]string{"ab": `"x"`}},
		{data: `{"a":1,}`, bad: true},
		{data: `{"a" 1}`, bad: true},
		{data: `{"a":1} x`, bad: true},
		{data: `[1]`, bad: true},
		{data: `{"a":}`, bad: true},
		{data: `{"a":1`, bad: true},
		{data: ``, bad: true},
	} {
		got, err := walkAll([]byte(tc.data))
		if tc.bad != (err != nil) {
			t.Errorf("%q: error %v", tc.data, err)
			continue
		}
		if !tc.bad && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.data, got, tc.want)
		}
	}
}

// FuzzWalk checks Walk against encoding/json: it accepts exactly the objects json.Unmarshal
// accepts, with the same members (the last of a repeated name).
func FuzzWalk(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[1,{"c":null}]}`, `{"a":"\"}"}`, `{"a":1,}`, ` {"x":true} `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := walkAll(data)
		var want map[string]json.RawMessage
		werr := json.Unmarshal(data, &want)
		if werr == nil && want == nil {
			werr = errNull // `null` is not an object
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: Walk error %v, json error %v", data, err, werr)
		}
		if err != nil {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d members, want %d", data, len(got), len(want))
		}
		for k, v := range want {
			var a, b any
			if json.Unmarshal([]byte(got[k]), &a) != nil || json.Unmarshal(v, &b) != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("%q: member %q = %s, want %s", data, k, got[k], v)
			}
		}
	})
}

var errNull = json.Unmarshal([]byte(`1`), new(string))

// stringsByJSON is what Strings must return: encoding/json's decoding of the first value.
func stringsByJSON(data []byte) ([]string, int, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var out []string
	if err := dec.Decode(&out); err != nil {
		return nil, 0, err
	}
	return out, int(dec.InputOffset()), nil
}

func TestStrings(t *testing.T) {
	for _, s := range []string{
		`[]`, ` [ ] `, `["a","b"]`, ` [ "a" , "" ,"ü"] x`, `["a\"b","c"]`, `["\u00fc","x"]`, `["x", "print(\"hi\")", "y\tz", "w"]`, `["a\"]`, `["a\\"]`, "[\"a\\\x01\"]", "[\"a\xffb\"]",
		"[\"a\tb\"]", `["\ud83d\ude00"]`, `["\ud83d"]`, `["\ud83dx", "y"]`, `["\ud83d\u0041"]`, `["\ude00\ud83d"]`,
		`["\ud83d\u00"]`, `["a\u00"]`, `["\'"]`, `["\x"]`, `["\/\b\f\n\r\t\\"]`, "[\"\\n\xc3\"]", "[\"\x7f\"]", `null`, `["a",]`, `["a" "b"]`, `["a",1]`, `["a"`, `["a`, `[`, ``, `{}`, `"a"`, `[null]`,
	} {
		got, n, err := jsonmembers.Strings([]byte(s))
		want, wn, werr := stringsByJSON([]byte(s))
		if (err == nil) != (werr == nil) || n != wn || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %q, %d, %v; want %q, %d, %v", s, got, n, err, want, wn, werr)
		}
	}
}

func FuzzStrings(f *testing.F) {
	for _, s := range []string{`[]`, `["a","b"]`, `["a\"b", "c"]`, "[\"a\xffb\"]", `null`, `["a",]`, `[1]`, `["\ud83d\ude00\u00e9\n"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, n, err := jsonmembers.Strings(data)
		want, wn, werr := stringsByJSON(data)
		if (err == nil) != (werr == nil) || n != wn || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %q, %d, %v; want %q, %d, %v", data, got, n, err, want, wn, werr)
		}
	})
}

// BenchmarkStrings reads an array of 200,000 strings, none escaped or every one escaped, against
// encoding/json reading the same array (the previous reader) in the same run.
func BenchmarkStrings(b *testing.B) {
	for _, bc := range []struct{ name, format string }{{"plain", "'s%d'"}, {"escaped", "'\"%d'"}} {
		strs := make([]string, 200_000)
		for i := range strs {
			strs[i] = fmt.Sprintf(bc.format, i)
		}
		data, err := json.Marshal(strs)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range []struct {
			name string
			read func([]byte) ([]string, int, error)
		}{{"Strings", jsonmembers.Strings}, {"baseline-encoding-json", stringsByJSON}} {
			b.Run(bc.name+"/"+r.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(data)))
				for i := 0; i < b.N; i++ {
					if _, _, err := r.read(data); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
