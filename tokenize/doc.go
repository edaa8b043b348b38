// Package tokenize renders debugger trajectories in the neural-debugger grammar, parses them back,
// and maps text to token ids.
//
// Render writes a debugger.Trajectory as one string of special tokens, source text and JSON, with
// no whitespace between tokens; Parse is its exact inverse (Parse(Render(t)) equals t.Grammar(),
// and Render(Parse(x)) == x whenever Parse succeeds). RenderState and ParseState do the same for a
// single state, e.g. to score a model's predicted next state. RenderCWM and ParseCWM handle the
// execution-trace format of Code World Model, which the grammar extends. SpecialTokens lists the
// special tokens in the order of their reserved ids.
//
// LOCALS and ARGS are JSON exactly as Python's json.dumps writes it, except that '<' before '|' is
// escaped, so no value can contain a special token; CODE and source lines are raw text that must
// not contain one. docs/grammar.md is the full specification.
package tokenize
