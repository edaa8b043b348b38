package execute_test

import (
	"context"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/internal/rowtest"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// TestReplayNeverGatesVerify (an attacker's review): code that traces honestly and, under bdb
// only ('bdb' in sys.modules), exits with the tracer's own exit code (70) made its replay a
// sandbox error, an error of Tracer.Replay that ends `ndtrace verify` without a verdict. Its
// replay is now a disagreement of its own (killed), with no error.
func TestReplayNeverGatesVerify(t *testing.T) {
	code := "import os, sys\nif 'bdb' in sys.modules:\n    os._exit(70)\n\ndef f(n):\n    total = n + 1\n    return total\n"
	opts := rows.Options{Tokenizer: tokenize.Bytes(), CreatedAt: time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC), TracerVersion: sandbox.TracerVersion}
	row, err := rowtest.Row(t, rowtest.Item(t, code, "f(4)"), debugger.Forward, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	pool := execute.NewSandboxPool(sandbox.Config{}, 1)
	defer pool.Close()
	trc := &execute.Tracer{Sandboxes: pool}
	out, err := trc.Replay(context.Background(), crawl.Item{Key: "t#0", Code: code, Filename: "main.py", Call: "f(4)"}, row, schemas.Spec{}.WithDefaults())
	if err != nil {
		t.Fatalf("the replay gates verify: %v", err)
	}
	if out.Agreed || !out.Replayed {
		t.Errorf("outcome %+v", out)
	}
}
