package crawl

import (
	_ "embed"
)

// examplesCode is ndtrace's built-in function-level examples (written for the project).
//
//go:embed examples/functions.py
var examplesCode string

// exampleCalls are the calls traced in the built-in examples; the last one raises on purpose.
var exampleCalls = []string{
	"running_max([3, 1, 4, 1, 5, 9, 2, 6])",
	"word_lengths('the quick brown fox jumps over the lazy dog')",
	"collatz_steps(27)",
	"gcd(1071, 462)",
	"caesar('Hello, World', 3)",
	"safe_ratio(7, 0)",
	"first_fibs(12)",
	"parse_pairs('a=1, b=2, c=x')",
}
