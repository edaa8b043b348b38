package rows

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/ndtrace/ndtrace/debugger"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

// Version is the version of how rows are built: it changes whenever the rows built from the same
// traces could; every row records it (pipeline_version).
const Version = "2"

// DefaultMaxTokens is the longest trajectory kept by default: the paper's sequence length.
const DefaultMaxTokens = 16384

// TooLong says what happens to a trajectory longer than Options.MaxTokens.
type TooLong string

// Too-long policies.
const (
	// Resample draws the trajectory again with a token budget, shorter each attempt; if no attempt
	// fits (the CODE context alone may be too long) it is dropped.
	Resample TooLong = "resample"
	// Drop drops it.
	Drop TooLong = "drop"
)

// Options configures Build.
type Options struct {
	Tokenizer tokenize.Tokenizer
	// Mask selects the loss mask (default tokenize.MaskStates).
	Mask tokenize.MaskMode
	// MaxTokens caps a row's tokens (default DefaultMaxTokens). A longer trajectory is never cut: it
	// is re-sampled or dropped per TooLong (default Resample), and the caller counts it.
	MaxTokens int
	TooLong   TooLong
	// Attempts bounds the re-sampling (default 4).
	Attempts int
	// CreatedAt is the dataset's creation time recorded in every row (not the clock: rows must be
	// reproducible).
	CreatedAt time.Time
	// TracerVersion is recorded in every row.
	TracerVersion string
	// LoadTest reads a repository's test trace kept apart (schemas.TestTrace.Ref) for Of; nil
	// when every trace is inline.
	LoadTest func(ref string) (schemas.TestTrace, *debugger.Trace, error)
	// Decontaminate, when set, reports whether code (a function-level item's module, a row's
	// CODE context) holds a function of an evaluation set, naming the set and its item: such an
	// item is a reject of class decontaminated, such a repository row is not built (see
	// decontam.go).
	Decontaminate func(code string) (set, item string, hit bool)
	// ForwardStart is where function-level forward trajectories start: schemas.ForwardStartMain,
	// or else (the default) schemas.ForwardStartFunction.
	ForwardStart string
	// Split assigns each row its split from its function id (default: every row in train).
	Split schemas.SplitSpec
}

func (o Options) withDefaults() Options {
	if o.Mask == "" {
		o.Mask = tokenize.MaskStates
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.TooLong == "" {
		o.TooLong = Resample
	}
	if o.Attempts <= 0 {
		o.Attempts = 4
	}
	return o
}

// Source describes where a trajectory comes from; it fills the row's source columns.
type Source struct {
	Level    string // "function" or "repository"
	RepoURL  string
	Commit   string
	Path     string
	QualName string
	SourceID string
	// FunctionID is the function under study's id (crawl.FunctionID); the row's split is drawn
	// from it.
	FunctionID string
	// InputSource is the row's input_source: how a function-level item's input was made
	// (schemas.InputSource*), empty at repository level.
	InputSource string
}

// ErrTooLong is returned (wrapped) for a trajectory that does not fit in Options.MaxTokens.
var ErrTooLong = errors.New("trajectory longer than the token limit")

// Build samples the trajectory of tree in its direction with policy and seed, renders and tokenizes
// it and returns its row. events are the trace's events (counted per type). An error wrapping
// ErrTooLong means the trajectory was dropped for its length; the caller counts it.
func Build(src Source, tree *debugger.Tree, code string, events []schemas.Event, p debugger.Policy, seed uint64, o Options) (schemas.Row, error) {
	return build(src, tree, code, func(r *schemas.Row) { countEvents(r, events) }, p, seed, o)
}

// build is Build with the trace's events counted into the row by count.
func build(src Source, tree *debugger.Tree, code string, count func(*schemas.Row), p debugger.Policy, seed uint64, o Options) (schemas.Row, error) {
	o = o.withDefaults()
	if o.Tokenizer == nil {
		return schemas.Row{}, errors.New("dataset: no tokenizer")
	}
	// Drawn with no more steps than could fit in MaxTokens (maxSteps): a longer one is re-sampled
	// or dropped anyway, so it is neither drawn to its end nor rendered.
	traj, complete, err := debugger.SampleAtMost(tree, code, p, seed, nil, maxSteps(o.MaxTokens))
	if err != nil {
		return schemas.Row{}, err
	}
	traj = Renumber(traj) // values.go: before any encoding, so that sizes are the row's
	var text string
	var ids []int32
	if complete {
		if text, ids, err = encode(traj, o.Tokenizer); err != nil {
			return schemas.Row{}, err
		}
	}
	if !complete || len(ids) > o.MaxTokens {
		if o.TooLong != Resample {
			if !complete {
				return schemas.Row{}, fmt.Errorf("%w: more than %d states, %d tokens at least > %d", ErrTooLong, len(traj.Steps), len(traj.Steps)*minStepTokens, o.MaxTokens)
			}
			return schemas.Row{}, fmt.Errorf("%w: %d tokens > %d", ErrTooLong, len(ids), o.MaxTokens)
		}
		// Re-sample under an exact token budget that shrinks each attempt. The budget counts the
		// states only; the CODE context and framing come on top.
		cost := StepCost(o.Tokenizer)
		fixed, err := tokenize.Encode(o.Tokenizer, traj.Code)
		if err != nil {
			return schemas.Row{}, err
		}
		budget := o.MaxTokens - len(fixed) - 16
		fit := false
		for a := 0; a < o.Attempts && budget > 0; a++ {
			q := p
			q.MaxTokens = budget
			if traj, err = debugger.Sample(tree, code, q, seed, cost); err != nil {
				return schemas.Row{}, err
			}
			traj = Renumber(traj)
			if text, ids, err = encode(traj, o.Tokenizer); err != nil {
				return schemas.Row{}, err
			}
			if len(ids) <= o.MaxTokens {
				fit = true
				break
			}
			budget = budget * 3 / 4
		}
		if !fit {
			return schemas.Row{}, fmt.Errorf("%w: %d tokens > %d after %d re-samples", ErrTooLong, len(ids), o.MaxTokens, o.Attempts)
		}
	}
	if err := decontaminated(src, traj.Code, o); err != nil {
		return schemas.Row{}, err
	}
	mask, err := tokenize.LossMask(o.Tokenizer, ids, o.Mask)
	if err != nil {
		return schemas.Row{}, err
	}
	row := schemas.Row{
		Level: src.Level, RepoURL: src.RepoURL, Commit: src.Commit, Path: src.Path, QualName: src.QualName,
		SourceID: src.SourceID, FunctionID: src.FunctionID, Split: o.Split.Assign(src.FunctionID), Direction: string(traj.Direction), Policy: p.Name, Seed: int64(seed),
		Text: text, InputIDs: ids, LossMask: mask, NumTokens: int32(len(ids)),
		NumActions: int32(traj.Actions()), NumStates: int32(len(traj.Steps)), Exit: string(traj.Exit),
		Truncated: traj.Truncated, InputSource: src.InputSource,
		CodeChars: int32(len([]rune(traj.Code))), CodeOmitted: int32(tree.CodeOmitted), TracerVersion: o.TracerVersion, PipelineVersion: Version,
		Tokenizer: o.Tokenizer.Name(), CreatedAt: o.CreatedAt.UTC().Truncate(time.Microsecond),
	}
	row.NumLearned = int32(tokenize.LearnedTokens(mask))
	row.NoisyValues = int32(NoisyValues(traj))
	if row.PlaceholderGap, err = PlaceholderGap(text); err != nil {
		return schemas.Row{}, err
	}
	countActions(&row, traj)
	count(&row)
	row.ID = ID(row)
	return row, nil
}

// encode renders a trajectory and tokenizes it.
func encode(traj debugger.Trajectory, tok tokenize.Tokenizer) (string, []int32, error) {
	text, err := tokenize.Render(traj)
	if err != nil {
		return "", nil, err
	}
	ids, err := tokenize.Encode(tok, text)
	if err != nil {
		return "", nil, err
	}
	return text, ids, nil
}

// StepCost returns the exact token cost of a step under tok: its frame, state and action.
func StepCost(tok tokenize.Tokenizer) debugger.CostFunc {
	return func(s debugger.Step) int {
		st, err := tokenize.RenderState(s.State)
		if err != nil {
			return debugger.EstimateTokens(s)
		}
		ids, err := tokenize.Encode(tok, st)
		if err != nil {
			return debugger.EstimateTokens(s)
		}
		arg, _ := tokenize.Encode(tok, s.Arg)
		return len(ids) + len(arg) + 3 // <|frame_sep|>, <|action_sep|>, the action
	}
}

// ID is a row's stable id: the SHA-256 of its source, direction, policy, seed, tokenizer and text.
func ID(r schemas.Row) string {
	h := sha256.New()
	for _, f := range []string{r.Level, r.RepoURL, r.Commit, r.Path, r.QualName, r.SourceID, r.Direction,
		r.Policy, fmt.Sprint(r.Seed), r.Tokenizer, r.Text} {
		fmt.Fprintf(h, "%d:%s;", len(f), f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func countActions(r *schemas.Row, t debugger.Trajectory) {
	for _, s := range t.Steps {
		switch s.Action {
		case debugger.StepInto:
			r.ActStepInto++
		case debugger.StepOver:
			r.ActStepOver++
		case debugger.StepReturn:
			r.ActStepReturn++
		case debugger.Breakpoint:
			r.ActBreakpoint++
		case debugger.Continue:
			r.ActContinue++
		case debugger.InvStepInto:
			r.ActInvStepInto++
		case debugger.InvStepOver:
			r.ActInvStepOver++
		case debugger.InvStepCall:
			r.ActInvStepCall++
		}
	}
}

func countEvents(r *schemas.Row, events []schemas.Event) {
	for _, e := range events {
		countEvent(r, e.Event)
	}
}

// traceCounts counts the events of a compact trace by type.
func traceCounts(tr *debugger.Trace) func(*schemas.Row) {
	return func(r *schemas.Row) {
		for i := 0; i < tr.Len(); i++ {
			countEvent(r, tr.Kind(i))
		}
	}
}

// countEvent counts one event of type kind.
func countEvent(r *schemas.Row, kind string) {
	switch kind {
	case schemas.EventCall:
		r.EvCall++
	case schemas.EventLine:
		r.EvLine++
	case schemas.EventReturn:
		r.EvReturn++
	case schemas.EventException:
		r.EvException++
	}
}
