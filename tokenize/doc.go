// Package tokenize renders debugger trajectories in the neural-debugger grammar, parses them back,
// and maps text to token ids.
package tokenize
