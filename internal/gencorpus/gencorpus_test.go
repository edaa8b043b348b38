package gencorpus

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	var a, b bytes.Buffer
	if err := Write(&a, 500, 1); err != nil {
		t.Fatal(err)
	}
	if err := Write(&b, 500, 1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same seed gave different corpora")
	}
	seen := map[string]bool{}
	for i, line := range strings.Split(strings.TrimSpace(a.String()), "\n") {
		var row struct{ ID, Code, Input string }
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if row.Code == "" || row.Input == "" || seen[row.Code+"|"+row.Input] {
			t.Fatalf("line %d: empty or repeated: %s", i, line)
		}
		seen[row.Code+"|"+row.Input] = true
	}
}
