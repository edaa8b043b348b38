package rows

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// MaxRejectReason bounds, in characters, the reason of a reject Of gives: it holds what the item's
// code or repository wrote (an exception's message, a collection's stderr, a checkout's reason).
const MaxRejectReason = 1000

// Of builds every row of one traced item, or the reject that says why it gives none. An error is
// one of reading a repository's test traces kept apart (Options.LoadTest): a retry may fix it.
// Options' ForwardStart and Split, when unset, are the spec's.
func Of(t execute.TracedItem, spec schemas.Spec, p debugger.Policy, o Options, counts schemas.Counts) ([]schemas.Row, *schemas.Reject, error) {
	if o.ForwardStart == "" {
		o.ForwardStart = spec.ForwardStart
	}
	if o.Split == nil {
		o.Split = spec.Split
	}
	reject := func(class schemas.RejectClass, reason string) ([]schemas.Row, *schemas.Reject, error) {
		return nil, &schemas.Reject{Source: t.Item.Origin(), Key: t.Item.Key, Class: class, Reason: cutText(reason, MaxRejectReason)}, nil
	}
	switch {
	case t.Poison != "":
		return reject(schemas.RejectPoison, "poison: "+t.Poison)
	case t.Item.Kind() == crawl.RepositoryTests && t.Repo == nil:
		reason := t.Detail // the repository could not be used
		if reason == "" {
			reason = string(t.Status)
		}
		class := schemas.RejectRepository
		if t.Stage == schemas.YieldEnvironment {
			class = schemas.RejectEnvironment
		}
		return reject(class, reason)
	case t.Item.Kind() == crawl.RepositoryTests:
		rows, reason, err := repoRows(t, spec, p, o, counts)
		if err != nil {
			return nil, nil, err
		}
		if reason != "" {
			return reject(schemas.RejectNoTrajectory, reason)
		}
		return rows, nil, nil
	}
	if _, err := debugger.ExitFor(t.Status); err != nil {
		if t.Detail != "" {
			return reject(schemas.StatusReject(t.Status), fmt.Sprintf("%s: %s", t.Status, t.Detail))
		}
		return reject(schemas.StatusReject(t.Status), string(t.Status))
	}
	if r := decontaminatedItem(&t, o); r != nil {
		return nil, r, nil
	}
	if src := InputSource(t.Item); !schemas.IsInputSource(src) {
		// Set by this program, never by a corpus: a reject rather than rows a shard refuses.
		return reject(schemas.RejectMalformed, fmt.Sprintf("malformed: unknown input source %.60q", src))
	}
	item, trace := debuggerItem(&t, o)
	src := functionSource(t.Item)
	var rows []schemas.Row
	var last string
	for _, dir := range spec.Directions {
		tree, code, err := item.Tree(debugger.Direction(dir))
		if err != nil {
			counts[schemas.CountSkipped(dir, reasonKey(err))]++
			last = err.Error()
			continue
		}
		for k := 0; k < spec.TrajectoriesPerTrace; k++ {
			seed := Seed(spec.Seed, t.Item.Key, dir, k)
			row, err := build(src, tree, code, traceCounts(trace), p, seed, o)
			if err != nil {
				counts[schemas.CountDropped(reasonKey(err))]++
				last = err.Error()
				continue
			}
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		if r := raisedBeforeCall(&t, trace); r != "" {
			last = r
		}
		if last == "" {
			last = "no trajectory"
		}
		return reject(schemas.RejectNoTrajectory, last)
	}
	return rows, nil, nil
}

// raisedBeforeCall is the reason of a function-level item whose run raised before the traced
// function was called: the module body (an import that fails, most often) or the call expression
// (its arguments, a name it does not define). The trace then has no events, and the exception
// (Detail: "ExcType: message") is the reason, not "the trace has no events". "" for any other run.
func raisedBeforeCall(t *execute.TracedItem, trace *debugger.Trace) string {
	if t.Status != schemas.StatusException || (trace != nil && trace.Len() > 0) {
		return ""
	}
	detail := t.Detail
	if detail == "" {
		detail = "an exception"
	}
	return "raised before the call, by the module body or the call expression: " + detail
}

// debuggerItem is a traced function-level item as package debugger takes it, its forward
// trajectories starting where o says, and its trace.
func debuggerItem(t *execute.TracedItem, o Options) (debugger.Item, *debugger.Trace) {
	trace := t.CompactTrace()
	start := o.ForwardStart
	if start == "" {
		start = schemas.ForwardStartFunction
	}
	return debugger.Item{Code: t.Item.Code, Call: t.Item.Call, Trace: trace, Blocks: t.Blocks, Status: t.Status, Consume: t.Consume,
		Value: t.Value, Start: start}, trace
}

// functionSource is the source columns of a function-level item's rows; the function under study
// is the item's function (Func, or else its module: crawl.Item.Source).
func functionSource(it crawl.Item) Source {
	return Source{Level: "function", RepoURL: it.RepoURL, Commit: it.Commit, Path: it.Path,
		QualName: it.QualName, SourceID: it.SourceID, FunctionID: crawl.FunctionID(it.Source()),
		InputSource: InputSource(it)}
}

// InputSource is the input_source of a function-level item's rows: the item's InputSource,
// schemas.InputSourceCorpus when it has none (a corpus item). The row ID does not cover it: the
// same trajectory of the same call keeps its id whatever found the call.
func InputSource(it crawl.Item) string {
	if it.InputSource == "" {
		return schemas.InputSourceCorpus
	}
	return it.InputSource
}

// reasonKey is a short counter key for an error.
func reasonKey(err error) string {
	switch {
	case errors.Is(err, ErrTooLong):
		return "too_long"
	case errors.Is(err, debugger.ErrNoInverse):
		return "run_cut_off"
	case errors.Is(err, tokenize.ErrSpecialToken):
		return "special_token_in_source"
	case errors.Is(err, ErrSplitMixed):
		return "split_mixed"
	}
	return "error"
}

// Seed derives a trajectory's seed from the spec's seed, the item and the draw.
func Seed(seed uint64, key, dir string, k int) uint64 {
	h := sha256.New()
	fmt.Fprintf(h, "%d/%s/%s/%d", seed, key, dir, k)
	return binary.LittleEndian.Uint64(h.Sum(nil)[:8])
}

// FunctionRow builds the row of the traced function-level item t in direction dir with seed, as Of
// builds each of its rows; an error of the item's tree (not one of building the row) is a
// *TreeError.
func FunctionRow(t execute.TracedItem, dir debugger.Direction, seed uint64, p debugger.Policy, o Options) (schemas.Row, error) {
	item, trace := debuggerItem(&t, o)
	tree, code, err := item.Tree(dir)
	if err != nil {
		return schemas.Row{}, &TreeError{err}
	}
	return build(functionSource(t.Item), tree, code, traceCounts(trace), p, seed, o)
}

// OptionsFor are the options the rows of spec are built with by tokenizer tok at createdAt.
func OptionsFor(spec schemas.Spec, tok tokenize.Tokenizer, createdAt time.Time) Options {
	return Options{Tokenizer: tok, Mask: tokenize.MaskMode(spec.Mask), MaxTokens: spec.MaxTokens,
		TooLong: TooLong(spec.TooLong), CreatedAt: createdAt, TracerVersion: sandbox.TracerVersion,
		ForwardStart: spec.ForwardStart, Split: spec.Split}
}

// noTestsToRun reports whether a traced repository item had no test to give rows, and was not
// meant to: a files group (NoTests), or a functions: all repository in which no test was
// collected (docs/spec.md: it gives function items only).
func noTestsToRun(t execute.TracedItem) bool {
	rt, rp := t.Repo, t.Item.Repo
	if rt == nil || rp == nil || len(rt.Traces) > 0 {
		return false
	}
	return rp.NoTests || rp.FunctionsAll && rt.Tests == 0
}
