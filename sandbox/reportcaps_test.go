package sandbox

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/internal/costbound"
	"github.com/ndtrace/ndtrace/schemas"
)

func TestCut(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abcdefg…"},
		{"ééééé", 8, "éé…"}, // é is 2 bytes, … 3: never half a character
		{"abc", 0, "…"},
	}
	for _, tc := range tests {
		if got := cut(tc.in, tc.max); got != tc.want || !utf8.ValidString(got) {
			t.Errorf("cut(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

func TestLastLine(t *testing.T) {
	long := strings.Repeat("x", 3*MaxDetail)
	tests := []struct{ in, want string }{
		{"a\nb\n", "b"},
		{"a\n  b  \n\n", "b"},
		{"one", "one"},
		{"", ""},
		{"first\n" + long + "\n", cut(long, MaxDetail)},
	}
	for _, tc := range tests {
		if got := lastLine([]byte(tc.in)); got != tc.want {
			t.Errorf("lastLine(%.20q) = %.20q (%d bytes), want %.20q", tc.in, got, len(got), tc.want)
		}
	}
}

// TestBoundCollection applies the caps of what a collection reports back: ids past the count or
// the length make it output_limit with the reason, the rest is cut.
func TestBoundCollection(t *testing.T) {
	ids := func(n int, id string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = id
		}
		return out
	}
	tests := []struct {
		name    string
		in      Collection
		status  schemas.Status
		detail  string // a part of the detail
		tests   int
		errors  int
		missing int // len(MissingModule)
	}{
		{"honest", Collection{Status: schemas.StatusOK, Tests: []string{"t.py::a", "t.py::b"}, Errors: []string{"x.py: E"}, MissingModule: "hypothesis"},
			schemas.StatusOK, "", 2, 1, len("hypothesis")},
		{"at the caps", Collection{Status: schemas.StatusOK, Tests: ids(MaxCollectedTests, strings.Repeat("t", MaxTestID))},
			schemas.StatusOK, "", MaxCollectedTests, 0, 0},
		{"too many tests", Collection{Status: schemas.StatusOK, Tests: ids(MaxCollectedTests+1, "t")},
			schemas.StatusOutputLimit, "listed 100001 tests, more than 100000", 0, 0, 0},
		{"a test id too long", Collection{Status: schemas.StatusOK, Tests: []string{"a", strings.Repeat("t", MaxTestID+1)}},
			schemas.StatusOutputLimit, "a test id of 4097 bytes, more than 4096", 0, 0, 0},
		{"too many errors", Collection{Status: schemas.StatusOK, Tests: []string{"a"}, Errors: ids(5000, strings.Repeat("e", 2*MaxDetail))},
			schemas.StatusOK, "", 1, MaxCollectErrors + 1, 0},
		{"long module and detail", Collection{Status: schemas.StatusException, Detail: strings.Repeat("d", 1<<20), MissingModule: strings.Repeat("m", 1<<20)},
			schemas.StatusException, "ddd…", 0, 0, MaxModuleName},
		{"failed already", Collection{Status: schemas.StatusTimeout, Detail: "wall", Tests: ids(MaxCollectedTests+1, "t")},
			schemas.StatusTimeout, "wall", MaxCollectedTests + 1, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.in
			boundCollection(&c)
			if c.Status != tc.status || !strings.Contains(c.Detail, tc.detail) || len(c.Detail) > MaxDetail ||
				len(c.Tests) != tc.tests || len(c.Errors) != tc.errors || len(c.MissingModule) > tc.missing {
				t.Errorf("got %s %.80q, %d tests, %d errors, module of %d bytes; want %s %q, %d, %d, at most %d",
					c.Status, c.Detail, len(c.Tests), len(c.Errors), len(c.MissingModule), tc.status, tc.detail, tc.tests, tc.errors, tc.missing)
			}
			for _, e := range c.Errors {
				if len(e) > MaxDetail {
					t.Fatalf("an error of %d bytes kept", len(e))
				}
			}
		})
	}
}

// boundCollectionCost bounds what boundCollection allocates per byte of what the run reported:
// it cuts (substrings, no copies) and writes a few short messages.
var boundCollectionCost = costbound.Bound{PerByte: 2, Fixed: 64 << 10}

// FuzzBoundCollection feeds boundCollection arbitrary collections (ids and errors are the
// input's lines): whatever it keeps is within the caps, and it allocates within
// boundCollectionCost.
func FuzzBoundCollection(f *testing.F) {
	f.Add("t.py::a\nt.py::b", "x.py: ImportError", "mod", uint8(0))
	f.Add(strings.Repeat("t\n", 3000), strings.Repeat("é", 5000), strings.Repeat("m", 300), uint8(1))
	f.Fuzz(func(t *testing.T, tests, errs, module string, status uint8) {
		c := Collection{Status: schemas.StatusOK, Tests: strings.Split(tests, "\n"), Errors: strings.Split(errs, "\n"),
			MissingModule: module, Detail: errs}
		if status%2 == 1 {
			c.Status = schemas.StatusException
		}
		n := len(tests) + len(errs) + len(module)
		costbound.Check(t, "boundCollection", n, boundCollectionCost, func() { boundCollection(&c) })
		if len(c.Detail) > MaxDetail || len(c.MissingModule) > MaxModuleName || len(c.Errors) > MaxCollectErrors+1 {
			t.Fatalf("beyond the caps: detail %d, module %d, %d errors", len(c.Detail), len(c.MissingModule), len(c.Errors))
		}
		if c.Status == schemas.StatusOK {
			if len(c.Tests) > MaxCollectedTests {
				t.Fatalf("%d tests kept", len(c.Tests))
			}
			for _, id := range c.Tests {
				if len(id) > MaxTestID {
					t.Fatalf("an id of %d bytes kept", len(id))
				}
			}
		}
		for _, e := range c.Errors {
			if len(e) > MaxDetail || !utf8.ValidString(e) && utf8.ValidString(errs) {
				t.Fatalf("error %.40q kept", e)
			}
		}
	})
}
