// Package gencorpus generates corpora of Python functions with inputs, in the JSONL format of a
// jsonl source ({"id", "code", "input"}), for benchmarks and scale tests: any number of distinct
// items, the same bytes for the same seed, nothing to download or commit. The functions are small
// and varied (loops, branches, string and list work, exceptions, recursion), like CruxEval's, so
// that traces and trajectories have realistic shapes.
package gencorpus

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
)

// templates are function bodies with holes: %[1]d and %[2]d are constants.
var templates = []struct {
	code  string
	input func(r *rand.Rand) string
}{
	{"def f(xs):\n    total = 0\n    for x in xs:\n        if x %% %[1]d == 0:\n            total += x * %[2]d\n        else:\n            total -= 1\n    return total\n",
		func(r *rand.Rand) string { return intList(r, 3+r.IntN(6)) }},
	{"def f(s):\n    out = []\n    for i, c in enumerate(s):\n        if i %% %[1]d == 0:\n            out.append(c.upper())\n        else:\n            out.append(c * %[2]d)\n    return ''.join(out)\n",
		func(r *rand.Rand) string { return fmt.Sprintf("%q", word(r, 3+r.IntN(5))) }},
	{"def f(n):\n    a, b = 0, 1\n    for _ in range(n %% %[1]d + 2):\n        a, b = b, a + b + %[2]d\n    return a\n",
		func(r *rand.Rand) string { return fmt.Sprint(r.IntN(30)) }},
	{"def f(d, k):\n    try:\n        v = d[k] + %[1]d\n    except KeyError:\n        v = -%[2]d\n    return {k: v, 'n': len(d)}\n",
		func(r *rand.Rand) string {
			return fmt.Sprintf("{%q: %d, %q: %d}, %q", word(r, 2), r.IntN(9), word(r, 2), r.IntN(9), word(r, 2))
		}},
	{"def g(x):\n    return x * %[1]d - %[2]d\n\ndef f(xs):\n    return [g(x) for x in xs if x > %[2]d]\n",
		func(r *rand.Rand) string { return intList(r, 2+r.IntN(5)) }},
	{"def f(n):\n    if n <= %[1]d:\n        return %[2]d\n    return n + f(n - 1)\n",
		func(r *rand.Rand) string { return fmt.Sprint(r.IntN(12)) }},
	{"def f(text):\n    words = text.split()\n    seen = {}\n    for w in words:\n        seen[w] = seen.get(w, %[1]d) + %[2]d\n    return sorted(seen.items())\n",
		func(r *rand.Rand) string { return fmt.Sprintf("%q", word(r, 2)+" "+word(r, 3)+" "+word(r, 2)) }},
	{"def f(xs, t):\n    lo, hi = 0, len(xs) - 1\n    steps = %[1]d\n    while lo <= hi:\n        mid = (lo + hi) // 2\n        steps += %[2]d\n        if xs[mid] < t:\n            lo = mid + 1\n        else:\n            hi = mid - 1\n    return lo, steps\n",
		func(r *rand.Rand) string { return fmt.Sprintf("%s, %d", sortedList(r, 4+r.IntN(6)), r.IntN(40)) }},
}

func intList(r *rand.Rand, n int) string {
	b := []byte("[")
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = fmt.Append(b, r.IntN(50)-10)
	}
	return string(append(b, ']'))
}

func sortedList(r *rand.Rand, n int) string {
	b := []byte("[")
	v := 0
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ", "...)
		}
		v += 1 + r.IntN(5)
		b = fmt.Append(b, v)
	}
	return string(append(b, ']'))
}

func word(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return string(b)
}

// Write writes n items generated from seed to w, one JSON object a line. Every item is distinct
// (its constants and its index make its code or input unique).
func Write(w io.Writer, n int, seed uint64) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	r := rand.New(rand.NewPCG(seed, 0x6e64))
	for i := 0; i < n; i++ {
		t := templates[r.IntN(len(templates))]
		// The index goes into the constants, so no two items share code and input.
		code := fmt.Sprintf(t.code, 2+i%7, i)
		row := struct {
			ID    string `json:"id"`
			Code  string `json:"code"`
			Input string `json:"input"`
		}{fmt.Sprintf("gen-%d", i), code, t.input(r)}
		if err := enc.Encode(row); err != nil {
			return fmt.Errorf("gencorpus: item %d: %w", i, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gencorpus: %w", err)
	}
	return nil
}
