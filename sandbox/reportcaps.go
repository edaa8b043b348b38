package sandbox

import (
	"fmt"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/schemas"
)

// Caps of what a run reports back to the worker beyond its trace (the trace has decodeLimits):
// the item's code can write any of it, and all of it ends in the worker's memory, in reject
// reasons and in stored records.
const (
	// MaxDetail caps Result.Detail (a reject's reason, once the item is rejected) and each of
	// Collection.Errors, in bytes: a longer one is cut at a character boundary and ends in "…".
	MaxDetail = 4 << 10
	// MaxCollectedTests caps the test ids of a Collection: more make its status output_limit.
	MaxCollectedTests = 100_000
	// MaxTestID caps one test id, in bytes: a longer one makes the collection's status
	// output_limit.
	MaxTestID = 4 << 10
	// MaxCollectErrors caps Collection.Errors: the rest are left out, and the last entry says how
	// many.
	MaxCollectErrors = 1000
	// MaxModuleName caps Collection.MissingModule and TestResult.MissingModule, in bytes (cut
	// like a detail).
	MaxModuleName = 256
)

// cut returns s cut to at most maxBytes bytes, at a character boundary, ending in "…" when it
// was cut. Its work is linear in maxBytes, not in len(s).
func cut(s string, maxBytes int) string {
	if len(s) <= maxBytes {
		return s
	}
	const ellipsis = "…"
	n := max(maxBytes-len(ellipsis), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ellipsis
}

// boundCollection applies the caps above to what a collection run reported: too many test ids,
// or one too long, make its status output_limit (the repository becomes a reject saying which
// cap), and its errors, missing module and detail are cut. Its work is linear in the number of
// ids and errors, and never copies one.
func boundCollection(c *Collection) {
	c.Detail = cut(c.Detail, MaxDetail)
	c.MissingModule = cut(c.MissingModule, MaxModuleName)
	if len(c.Errors) > MaxCollectErrors {
		more := len(c.Errors) - MaxCollectErrors
		c.Errors = append(c.Errors[:MaxCollectErrors:MaxCollectErrors], fmt.Sprintf("... and %d more files that failed to collect", more))
	}
	for i, e := range c.Errors {
		c.Errors[i] = cut(e, MaxDetail)
	}
	why := ""
	if len(c.Tests) > MaxCollectedTests {
		why = fmt.Sprintf("the collection listed %d tests, more than %d", len(c.Tests), MaxCollectedTests)
	} else {
		for _, id := range c.Tests {
			if len(id) > MaxTestID {
				why = fmt.Sprintf("the collection listed a test id of %d bytes, more than %d: %s", len(id), MaxTestID, cut(id, 200))
				break
			}
		}
	}
	if why != "" && c.Status == schemas.StatusOK {
		c.Status, c.Detail, c.Tests = schemas.StatusOutputLimit, why, []string{}
	}
}
