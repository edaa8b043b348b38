package rows_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/internal/rowtest"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

func TestBuildRow(t *testing.T) {
	it := rowtest.Item(t, rowtest.LoopCode, "f(6)")
	opts := rows.Options{Tokenizer: tokenize.Bytes(), CreatedAt: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), TracerVersion: sandbox.TracerVersion}
	for _, dir := range []debugger.Direction{debugger.Forward, debugger.Inverse} {
		row, err := rowtest.Row(t, it, dir, 3, opts)
		if err != nil {
			t.Fatal(err)
		}
		text, err := tokenize.Bytes().Decode(row.InputIDs)
		if err != nil || text != row.Text {
			t.Fatalf("decode(input_ids) != text: %v", err)
		}
		if int(row.NumTokens) != len(row.InputIDs) || len(row.LossMask) != len(row.InputIDs) {
			t.Fatalf("lengths: %d tokens, %d ids, %d mask", row.NumTokens, len(row.InputIDs), len(row.LossMask))
		}
		learned := 0
		for _, m := range row.LossMask {
			if m {
				learned++
			}
		}
		acts := row.ActStepInto + row.ActStepOver + row.ActStepReturn + row.ActBreakpoint + row.ActContinue +
			row.ActInvStepInto + row.ActInvStepOver + row.ActInvStepCall
		if int(row.NumLearned) != learned || acts != row.NumActions || row.NumActions != row.NumStates {
			t.Fatalf("counts: learned %d/%d, actions %d/%d, states %d", row.NumLearned, learned, acts, row.NumActions, row.NumStates)
		}
		if row.EvCall != 1 || row.EvReturn != 1 || row.EvLine == 0 || row.Direction != string(dir) || row.Tokenizer != "bytes" {
			t.Fatalf("row %+v", row)
		}
		again, _ := rowtest.Row(t, it, dir, 3, opts)
		other, _ := rowtest.Row(t, it, dir, 4, opts)
		if again.ID != row.ID || len(row.ID) != 64 || other.ID == row.ID && other.Text == row.Text && other.Seed == row.Seed {
			t.Fatalf("ids: %s %s %s", row.ID, again.ID, other.ID)
		}
	}
}

func TestBuildRowTooLong(t *testing.T) {
	it := rowtest.Item(t, rowtest.LoopCode, "f(200)")
	base := rows.Options{Tokenizer: tokenize.Bytes()}
	// Long enough for the CODE context and a few states, far too short for the whole trace.
	base.MaxTokens = 1200
	step := debugger.StepIntoPolicy()
	tree, code, _ := it.Tree(debugger.Forward)
	src := rows.Source{Level: "function"}
	row, err := rows.Build(src, tree, code, it.Events, step, 0, base)
	if err != nil {
		t.Fatalf("resample: %v", err)
	}
	if row.NumTokens > 1200 || row.Exit != string(debugger.ExitNormal) || row.ActContinue != 1 {
		t.Fatalf("re-sampled row: %d tokens, exit %s, %d continue", row.NumTokens, row.Exit, row.ActContinue)
	}
	drop := base
	drop.TooLong = rows.Drop
	if _, err := rows.Build(src, tree, code, it.Events, step, 0, drop); !errors.Is(err, rows.ErrTooLong) {
		t.Fatalf("drop: %v", err)
	}
	// A CODE context longer than the limit cannot be re-sampled short enough.
	tiny := base
	tiny.MaxTokens = 50
	if _, err := rows.Build(src, tree, code, it.Events, step, 0, tiny); !errors.Is(err, rows.ErrTooLong) {
		t.Fatalf("tiny limit: %v", err)
	}
}

func TestPack(t *testing.T) {
	mk := func(id string, n int) schemas.Row {
		r := schemas.Row{ID: id, Tokenizer: "bytes"}
		for i := 0; i < n; i++ {
			r.InputIDs = append(r.InputIDs, int32(i))
			r.LossMask = append(r.LossMask, i%2 == 0)
		}
		return r
	}
	rows := []schemas.Row{mk("a", 4), mk("b", 5), mk("c", 3), mk("d", 12), mk("e", 10)}
	packed, tooLong, err := dataset.Pack(rows, 10, 999)
	if err != nil {
		t.Fatal(err)
	}
	if len(tooLong) != 1 || tooLong[0].ID != "d" {
		t.Fatalf("too long: %v", tooLong)
	}
	// a+b fill 9 of 10; c starts a new one; e fills one alone.
	if len(packed) != 3 {
		t.Fatalf("%d sequences", len(packed))
	}
	want := [][]string{{"a", "b"}, {"c"}, {"e"}}
	for i, p := range packed {
		if len(p.InputIDs) != 10 || len(p.LossMask) != 10 || int(p.NumTokens+p.NumPadding) != 10 {
			t.Fatalf("sequence %d: %d ids, %d mask", i, len(p.InputIDs), len(p.LossMask))
		}
		if len(p.RowIDs) != len(want[i]) {
			t.Fatalf("sequence %d rows %v", i, p.RowIDs)
		}
		for j := range want[i] {
			if p.RowIDs[j] != want[i][j] {
				t.Fatalf("sequence %d rows %v", i, p.RowIDs)
			}
		}
		for k := int(p.NumTokens); k < 10; k++ {
			if p.InputIDs[k] != 999 || p.LossMask[k] {
				t.Fatalf("padding at %d", k)
			}
		}
	}
	if packed[0].SegmentStarts[1] != 4 {
		t.Fatalf("segment starts %v", packed[0].SegmentStarts)
	}
	again, _, _ := dataset.Pack(rows, 10, 999)
	if again[0].ID != packed[0].ID {
		t.Fatal("packing is not deterministic")
	}
}
