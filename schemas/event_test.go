package schemas

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestLocalsJSON(t *testing.T) {
	tests := []struct {
		in   Locals
		want string
	}{
		{nil, `{}`},
		{Locals{}, `{}`},
		{Locals{{"b", "2"}, {"a", "'x\"y'"}}, `{"b": "2", "a": "'x\"y'"}`},
		{Locals{{"é", "<p>"}}, `{"é": "\u003cp\u003e"}`},
	}
	for _, tc := range tests {
		b, err := json.Marshal(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		var compact, want map[string]any
		if err := json.Unmarshal(b, &compact); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		_ = json.Unmarshal([]byte(tc.want), &want)
		if !reflect.DeepEqual(compact, want) {
			t.Errorf("Marshal(%v) = %s, want %s", tc.in, b, tc.want)
		}
		var back Locals
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if len(back) != len(tc.in) || (len(back) > 0 && !reflect.DeepEqual(back, tc.in)) {
			t.Errorf("round trip %v -> %v", tc.in, back)
		}
	}
	var l Locals
	for _, bad := range []string{`[]`, `{"a": 1}`, `{"a": "x"`, `"s"`} {
		if err := json.Unmarshal([]byte(bad), &l); err == nil {
			t.Errorf("Unmarshal(%s) accepted", bad)
		}
	}
}

func FuzzLocalsJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a": "1", "b": "x"}`, `null`, `{"a": "\ud800"}`, `[1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var l Locals
		if json.Unmarshal(b, &l) != nil {
			return
		}
		// Whatever parses marshals and parses back to the same thing.
		out, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		var again Locals
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("re-parse %s: %v", out, err)
		}
		if len(l) != len(again) || (len(l) > 0 && !reflect.DeepEqual(l, again)) {
			t.Fatalf("%v != %v", l, again)
		}
	})
}

func TestStatus(t *testing.T) {
	for _, s := range Statuses {
		if !s.Valid() {
			t.Errorf("%s not valid", s)
		}
	}
	if Status("bogus").Valid() {
		t.Error("bogus valid")
	}
	if !StatusTimeout.Truncated() || StatusOK.Truncated() || StatusException.Truncated() {
		t.Error("Truncated")
	}
}
