package sandbox_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// expectedReprs normalises each expected output to repr(ast.literal_eval(output)). literal_eval
// only reads literals; it runs no code of the corpus.
func expectedReprs(t *testing.T, rows []cruxeval.Row) []string {
	var in strings.Builder
	for _, r := range rows {
		b, _ := json.Marshal(r.Output)
		in.Write(b)
		in.WriteByte('\n')
	}
	cmd := exec.Command("python3", "-c", `import ast, json, sys
for line in sys.stdin:
    try:
        print(json.dumps(repr(ast.literal_eval(json.loads(line)))))
    except Exception as e:
        print(json.dumps("<unparsable %s>" % type(e).__name__))`)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("normalising outputs: %v", err)
	}
	var want []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var s string
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatal(err)
		}
		want = append(want, s)
	}
	if len(want) != len(rows) {
		t.Fatalf("%d normalised outputs for %d rows", len(want), len(rows))
	}
	return want
}

// TestCruxEval traces all 800 CruxEval functions as f(<input>) and checks that the traced return value
// of f equals the row's output for at least 99% of rows.
func TestCruxEval(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	rows := cruxeval.Rows(t)
	want := expectedReprs(t, rows)
	const workers = 2
	sbs := make([]*sandbox.Sandbox, workers)
	for i := range sbs {
		sb, err := sandbox.New(context.Background(), sandbox.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		sbs[i] = sb
	}
	got := make([]string, len(rows))
	status := make([]schemas.Status, len(rows))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(rows); i += workers {
				res, err := sbs[w].Run(context.Background(), sandbox.Request{Code: rows[i].Code,
					Call: sandbox.CallFromInput("f", rows[i].Input)})
				if err != nil {
					got[i] = "<sandbox error " + err.Error() + ">"
					continue
				}
				status[i] = res.Status
				if r := lastReturn(res.Events, "f"); r != nil && r.Depth == 0 && r.Value != nil {
					got[i] = *r.Value
				}
			}
		}(w)
	}
	wg.Wait()
	match, logged := 0, 0
	for i := range rows {
		if got[i] == want[i] {
			match++
		} else if logged++; logged <= 20 {
			t.Logf("%s: status %s, traced %q, want %q", rows[i].ID, status[i], got[i], want[i])
		}
	}
	rate := float64(match) / float64(len(rows))
	t.Logf("CruxEval: %d/%d traced return values match (%.2f%%)", match, len(rows), 100*rate)
	if rate < 0.99 {
		t.Fatalf("match rate %.2f%% < 99%%", 100*rate)
	}
}
