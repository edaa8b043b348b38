// Package costbound measures what a parser of untrusted input costs, for the fuzz tests and
// attack tests that assert its bound: the bytes it allocates, per byte of input.
//
// Allocated bytes are deterministic where time is not (a busy machine, the race detector), and a
// parser that does quadratic work on a hostile input (joining a growing string once per line)
// allocates quadratically too, so a bound of the form perByte*len(input) + fixed catches it on
// inputs of a few kilobytes already.
package costbound

import (
	"runtime"
	"testing"
)

// Allocated returns the bytes allocated while fn runs (runtime.MemStats.TotalAlloc over its call;
// the allocations of other goroutines running meanwhile count too, so callers allow some slack).
func Allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Bound is a cost bound: at most PerByte bytes allocated per byte of input, plus Fixed.
type Bound struct {
	PerByte uint64
	Fixed   uint64
}

// Max is the most an input of n bytes may allocate under b.
func (b Bound) Max(n int) uint64 { return b.PerByte*uint64(n) + b.Fixed }

// Check runs fn (which parses an input of n bytes) and fails t, naming what, when it allocates
// more than b allows. It returns the bytes allocated.
func Check(t testing.TB, what string, n int, b Bound, fn func()) uint64 {
	t.Helper()
	got := Allocated(fn)
	if got > b.Max(n) {
		t.Errorf("%s: %d bytes of input allocated %d bytes, more than the bound %d per byte + %d (%d)",
			what, n, got, b.PerByte, b.Fixed, b.Max(n))
	}
	return got
}
