package schemas

import "time"

// RowSchemaVersion changes whenever Row's columns change.
const RowSchemaVersion = "3"

// Row is one trajectory in a dataset shard: one Parquet row. Every column is documented here and in
// docs/dataset.md; the Parquet schema is derived from the struct tags (parquet-go), and a test checks
// it against the Arrow schema in package dataset.
type Row struct {
	// ID is the row's stable id: the hex SHA-256 of its source, direction, policy, seed, tokenizer and
	// text, so the same trajectory always has the same id.
	ID string `parquet:"id" json:"id"`

	// Level is "function" or "repository".
	Level string `parquet:"level,dict" json:"level"`
	// RepoURL and Commit identify a repository-level source (empty at function level).
	RepoURL string `parquet:"repo_url,dict" json:"repo_url"`
	Commit  string `parquet:"commit,dict" json:"commit"`
	// Path is the source file (the corpus file and row id at function level).
	Path string `parquet:"path,dict" json:"path"`
	// QualName is the qualified name of the entry function.
	QualName string `parquet:"qualname,dict" json:"qualname"`
	// SourceID identifies the input item (a corpus row id, a test id).
	SourceID string `parquet:"source_id" json:"source_id"`

	// Direction is "forward" or "inverse"; Policy the action policy's name; Seed the trajectory seed.
	Direction string `parquet:"direction,dict" json:"direction"`
	Policy    string `parquet:"policy,dict" json:"policy"`
	Seed      int64  `parquet:"seed" json:"seed"`

	// Text is the trajectory in the neural-debugger grammar (docs/grammar.md).
	Text string `parquet:"text,zstd" json:"text"`
	// InputIDs are Text's token ids under Tokenizer.
	InputIDs []int32 `parquet:"input_ids,list,dict" json:"input_ids"`
	// LossMask has one entry per input id: true for the tokens a model learns to predict (see
	// MaskMode in docs/dataset.md), false for the tokens it is given.
	LossMask []bool `parquet:"loss_mask,list" json:"loss_mask"`

	// NumTokens is len(InputIDs); NumLearned counts the true entries of LossMask.
	NumTokens  int32 `parquet:"num_tokens" json:"num_tokens"`
	NumLearned int32 `parquet:"num_learned" json:"num_learned"`
	// NumActions and NumStates count the trajectory's actions and states.
	NumActions int32 `parquet:"num_actions" json:"num_actions"`
	NumStates  int32 `parquet:"num_states" json:"num_states"`
	// Actions per type.
	ActStepInto    int32 `parquet:"act_step_into" json:"act_step_into"`
	ActStepOver    int32 `parquet:"act_step_over" json:"act_step_over"`
	ActStepReturn  int32 `parquet:"act_step_return" json:"act_step_return"`
	ActBreakpoint  int32 `parquet:"act_breakpoint" json:"act_breakpoint"`
	ActContinue    int32 `parquet:"act_continue" json:"act_continue"`
	ActInvStepInto int32 `parquet:"act_inv_step_into" json:"act_inv_step_into"`
	ActInvStepOver int32 `parquet:"act_inv_step_over" json:"act_inv_step_over"`
	ActInvStepCall int32 `parquet:"act_inv_step_call" json:"act_inv_step_call"`
	// Trace events per type (of the whole trace the trajectory was sampled from).
	EvCall      int32 `parquet:"ev_call" json:"ev_call"`
	EvLine      int32 `parquet:"ev_line" json:"ev_line"`
	EvReturn    int32 `parquet:"ev_return" json:"ev_return"`
	EvException int32 `parquet:"ev_exception" json:"ev_exception"`
	// Exit is the trajectory's exit state (exit_normal, exit_error, exit_never, inv_exit_entry).
	Exit string `parquet:"exit,dict" json:"exit"`
	// CodeChars is the length of the CODE context in characters.
	CodeChars int32 `parquet:"code_chars" json:"code_chars"`
	// CodeOmitted counts the module-level definitions (constants, imports, class headers) the
	// visited code names that the CODE context left out to stay within its token budget.
	CodeOmitted int32 `parquet:"code_omitted" json:"code_omitted"`
	// FunctionID is the stable id of the function under study: the hex SHA-256 (first 16 bytes)
	// of its normalized source (crawl.SourceKey's normalisation), the same for the same function
	// at any level, in any run.
	FunctionID string `parquet:"function_id" json:"function_id"`
	// Split is the dataset split the row's function belongs to ("train", "validation", ...):
	// drawn from FunctionID, so no function is in two splits.
	Split string `parquet:"split,dict" json:"split"`
	// Truncated is true for a trajectory shortened to fit the token budget (a forced continue,
	// or inv_step_call/inv_step_over back to the entry): its last actions were not the policy's.
	Truncated bool `parquet:"truncated" json:"truncated"`
	// NoisyValues counts the values of the row's states that a model cannot learn from the
	// code: a repr that raised or timed out, a value that differed between two runs of the same
	// test, an epoch time, a hash-sized integer (docs/tracer-protocol.md, "Values").
	NoisyValues int32 `parquet:"noisy_values" json:"noisy_values"`
	// PlaceholderGap is true when the row's address placeholders do not run 0x1, 0x2, ... in
	// order of first appearance (never, since rows renumber them; kept as a check).
	PlaceholderGap bool `parquet:"placeholder_gap" json:"placeholder_gap"`
	// InputSource is how a function-level row's input was made (InputSource*): corpus (given with
	// the code, the default), test_call (a call the repository's tests made), or generated:
	// doctest, example, typed, fuzzed, llm. Empty for a repository-level row, whose input is the
	// test (row schema 3).
	InputSource string `parquet:"input_source,dict" json:"input_source"`

	// TracerVersion, PipelineVersion and Tokenizer record what produced the row.
	TracerVersion   string `parquet:"tracer_version,dict" json:"tracer_version"`
	PipelineVersion string `parquet:"pipeline_version,dict" json:"pipeline_version"`
	Tokenizer       string `parquet:"tokenizer,dict" json:"tokenizer"`
	// CreatedAt is the creation time of the dataset version that wrote the row, taken from the run's
	// configuration (not the clock), so the same input, configuration and seed give byte-identical
	// shards. A later version that reuses the row's shard keeps it: it can be earlier than the
	// manifest's created_at.
	CreatedAt time.Time `parquet:"created_at,timestamp(microsecond)" json:"created_at"`
}

// InputSources are the input sources a function-level row may have (the column input_source),
// given first, then generated.
var InputSources = []string{InputSourceCorpus, InputSourceTestCall, InputSourceDoctest, InputSourceExample,
	InputSourceTyped, InputSourceFuzzed, InputSourceLLM}

// IsInputSource reports whether s is one of InputSources.
func IsInputSource(s string) bool {
	for _, k := range InputSources {
		if s == k {
			return true
		}
	}
	return false
}

// GeneratedInputSource reports whether s is the source of a generated input (doctest, example,
// typed, fuzzed, llm): not given with the code (corpus) nor seen in a test (test_call).
func GeneratedInputSource(s string) bool {
	return IsInputSource(s) && s != InputSourceCorpus && s != InputSourceTestCall
}

// PackedRow is a fixed-length training sequence made of whole trajectories (rows) laid end to end and
// padded: a trajectory is never split across sequences.
type PackedRow struct {
	// ID is the hex SHA-256 of the member rows' ids, in order.
	ID string `parquet:"id" json:"id"`
	// InputIDs has exactly the packing length; the tail after the last trajectory is padding.
	InputIDs []int32 `parquet:"input_ids,list,dict" json:"input_ids"`
	// LossMask is the members' masks end to end; padding is false.
	LossMask []bool `parquet:"loss_mask,list" json:"loss_mask"`
	// SegmentStarts are the offsets in InputIDs where each member trajectory starts (for attention
	// masks that keep trajectories apart); RowIDs are the members' row ids, in the same order.
	SegmentStarts []int32  `parquet:"segment_starts,list" json:"segment_starts"`
	RowIDs        []string `parquet:"row_ids,list" json:"row_ids"`
	// NumTokens counts real tokens; NumPadding the padding at the end.
	NumTokens  int32 `parquet:"num_tokens" json:"num_tokens"`
	NumPadding int32 `parquet:"num_padding" json:"num_padding"`
	// Tokenizer names the tokenizer of the ids.
	Tokenizer string `parquet:"tokenizer,dict" json:"tokenizer"`
}
