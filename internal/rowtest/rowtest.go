// Package rowtest makes rows of real traced code for tests: an item traced in a real sandbox and
// a row built from it as the pipeline builds rows.
package rowtest

import (
	"context"
	"sync"
	"testing"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

var (
	sbOnce sync.Once
	sb     *sandbox.Sandbox
	sbErr  error
)

// Item traces code's call in a sandbox shared by the tests of a package.
func Item(t testing.TB, code, call string) debugger.Item {
	t.Helper()
	sbOnce.Do(func() { sb, sbErr = sandbox.New(context.Background(), sandbox.Config{}) })
	if sbErr != nil {
		t.Fatal(sbErr)
	}
	res, err := sb.Run(context.Background(), sandbox.Request{Code: code, Call: call})
	if err != nil {
		t.Fatal(err)
	}
	return debugger.Item{Code: code, Call: call, Events: res.Events, Blocks: res.Blocks, Status: res.Status,
		Start: schemas.ForwardStartFunction} // as rows start forward trajectories by default
}

// LoopCode is a function with a loop, the tests' usual item.
const LoopCode = "def f(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n    return total\n"

// Row builds the row of it in direction dir with seed under the paper's policy.
func Row(t *testing.T, it debugger.Item, dir debugger.Direction, seed uint64, o rows.Options) (schemas.Row, error) {
	t.Helper()
	tree, code, err := it.Tree(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := rows.Source{Level: "function", Path: "test.jsonl", QualName: "f", SourceID: "loop", InputSource: schemas.InputSourceCorpus}
	return rows.Build(src, tree, code, it.Events, debugger.PaperPolicy(), seed, o)
}
