package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/cruxeval"
)

// hostileItem floods the events descriptor with a few hundred KB of forged events (the kind of
// item that used to cost the decoder minutes and fail its batch on every retry) and raises,
// claiming through the descriptor to have returned.
const hostileItem = `import os
def f(n):
    names = ",".join('"v%d"' % i for i in range(2000))
    line = '{"event":"line","frame":1,"func":"f","file":"main.py","lineno":2,"depth":0,"src":"","names":[' + names + '],"locals":{"v0":"1"}}\n'
    for _ in range(n):
        os.write(3, line.encode())
    os.write(3, b'{"event":"end","status":"ok","value":"42","events":1}\n')
    raise ValueError("the real outcome")
`

// TestHostileItemIsOneReject runs forty ordinary items and one hostile one through the pipeline on
// an in-process Temporal server: the hostile item ends as one reject (tampered), every other item
// gives rows, and the dataset commits and validates.
func TestHostileItemIsOneReject(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	dir := t.TempDir()
	corpus := filepath.Join(dir, "items.jsonl")
	f, err := os.Create(corpus)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(cruxeval.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	sc := bufio.NewScanner(src)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 0; n < 40 && sc.Scan(); n++ {
		fmt.Fprintln(f, sc.Text())
	}
	hostile, _ := json.Marshal(map[string]string{"id": "hostile", "code": hostileItem, "input": "100"})
	fmt.Fprintln(f, string(hostile))
	f.Close()

	out := filepath.Join(dir, "data")
	spec := writeSpec(t, dir, fmt.Sprintf("name: hostile\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\nbatch_size: 50\ncreated_at: 2026-11-24T00:00:00Z\n", out, corpus))
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--spec", spec}, &stdout, &stderr); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr.String())
	}
	m, ids := checkDataset(t, out)
	if m.Counts["items"] != 41 || m.Counts["rejects"] != 1 || len(ids) == 0 {
		t.Fatalf("items %d, rejects %d, %d rows; want 41 items, 1 reject", m.Counts["items"], m.Counts["rejects"], len(ids))
	}
	rejects := readRejects(t, out)
	lines := strings.Split(strings.TrimSpace(string(rejects)), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `#hostile"`) || !strings.Contains(lines[0], `"reason":"tampered`) {
		t.Fatalf("rejects: %s", rejects)
	}
	t.Logf("reject: %s", lines[0])
}
