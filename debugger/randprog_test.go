package debugger_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// randomProgram writes a small random Python module whose entry is f(n): helper functions that call
// later helpers, loops, branches, caught and uncaught exceptions, recursion, a generator and
// comprehensions, with values kept small.
func randomProgram(rng *rand.Rand) string {
	var b strings.Builder
	nHelpers := 1 + rng.IntN(4)
	b.WriteString("def rec(n):\n    if n <= 0:\n        return 0\n    return 1 + rec(n - 1)\n\n")
	b.WriteString("def gen(n):\n    for i in range(n):\n        yield i * 2\n\n")
	for i := nHelpers - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "def h%d(a, b):\n", i)
		vars := []string{"a", "b"}
		body(&b, rng, "    ", &vars, i, nHelpers, 2)
		fmt.Fprintf(&b, "    return %s\n\n", expr(rng, vars))
	}
	b.WriteString("def f(n):\n")
	vars := []string{"n"}
	body(&b, rng, "    ", &vars, -1, nHelpers, 2)
	fmt.Fprintf(&b, "    return %s\n", expr(rng, vars))
	return b.String()
}

func expr(rng *rand.Rand, vars []string) string {
	v := vars[rng.IntN(len(vars))]
	switch rng.IntN(4) {
	case 0:
		return fmt.Sprintf("(%s + %d) %% 97", v, rng.IntN(10))
	case 1:
		return fmt.Sprintf("(%s * %s) %% 89", v, vars[rng.IntN(len(vars))])
	case 2:
		return fmt.Sprintf("%s - %d", v, rng.IntN(5))
	}
	return v
}

func body(b *strings.Builder, rng *rand.Rand, ind string, vars *[]string, self, nHelpers, depth int) {
	nStmts := 1 + rng.IntN(4)
	for s := 0; s < nStmts; s++ {
		nv := fmt.Sprintf("v%d", len(*vars))
		switch k := rng.IntN(9); {
		case k == 0 && depth > 0:
			fmt.Fprintf(b, "%sfor i%d in range(%d):\n", ind, depth, 1+rng.IntN(3))
			inner := append([]string{}, *vars...)
			inner = append(inner, fmt.Sprintf("i%d", depth))
			body(b, rng, ind+"    ", &inner, self, nHelpers, depth-1)
			continue
		case k == 1 && depth > 0:
			fmt.Fprintf(b, "%sif %s %% 2 == 0:\n", ind, (*vars)[rng.IntN(len(*vars))])
			inner := append([]string{}, *vars...)
			body(b, rng, ind+"    ", &inner, self, nHelpers, depth-1)
			fmt.Fprintf(b, "%selse:\n%s    pass\n", ind, ind)
			continue
		case k == 2 && self+1 < nHelpers:
			callee := self + 1 + rng.IntN(nHelpers-self-1)
			fmt.Fprintf(b, "%s%s = h%d(%s, %s)\n", ind, nv, callee, expr(rng, *vars), expr(rng, *vars))
		case k == 3:
			fmt.Fprintf(b, "%stry:\n%s    %s = 10 // (%s %% 3)\n%sexcept ZeroDivisionError as e:\n%s    %s = -1\n",
				ind, ind, nv, (*vars)[rng.IntN(len(*vars))], ind, ind, nv)
		case k == 4:
			fmt.Fprintf(b, "%s%s = rec(%s %% 4)\n", ind, nv, (*vars)[rng.IntN(len(*vars))])
		case k == 5:
			fmt.Fprintf(b, "%s%s = sum(gen(%d))\n", ind, nv, rng.IntN(4))
		case k == 6:
			fmt.Fprintf(b, "%s%s = [x * 2 for x in range(%d)]\n", ind, nv, rng.IntN(4))
			fmt.Fprintf(b, "%s%s = len(%s)\n", ind, nv, nv)
		case k == 7 && rng.IntN(6) == 0:
			fmt.Fprintf(b, "%sif %s %% 7 == 3:\n%s    raise ValueError('unlucky %%d' %% %s)\n", ind,
				(*vars)[rng.IntN(len(*vars))], ind, (*vars)[rng.IntN(len(*vars))])
			continue
		default:
			fmt.Fprintf(b, "%s%s = %s\n", ind, nv, expr(rng, *vars))
		}
		*vars = append(*vars, nv)
	}
}
