package pyenv

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/testwheels"
	"github.com/ndtrace/ndtrace/store"
)

// TestHostileWheelIsTheEnvironmentsFault (attacker's review, issue 26): the index serves any
// package a repository names, so a wheel's file names are the attacker's. A wheel installing a
// file whose name holds a backslash (a plain character on Linux) made an archive that Extract
// refuses: a plain error, which tracing takes as the worker's (never counted towards the item's
// attempts), so the repository was retried until the activity's deadline, and the archive,
// stored before it was extracted, failed every later attempt of every repository needing the
// same packages. It is now an *Error (a reject), and nothing is stored.
func TestHostileWheelIsTheEnvironmentsFault(t *testing.T) {
	needPip(t)
	ctx := context.Background()
	w := testwheels.Wheel{Name: "ndtrace-hostile", Version: "1.0", Files: map[string]string{
		"hostile/__init__.py": "", `hostile/a\b.py`: "X = 1\n"}}
	wheels := testwheels.Folder(t, "", []testwheels.Wheel{w})
	st, err := store.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := &Cache{Dir: t.TempDir(), Store: st}
	_, err = c.Ensure(ctx, Config{FindLinks: []string{wheels}}, reqs(t, "ndtrace-hostile==1.0"))
	var pe *Error
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, `a file named "hostile/a\\b.py"`) {
		t.Fatalf("Ensure: %v (%T), want an *Error naming the file: any other error is the worker's, retried without end", err, err)
	}
	st.List(ctx, "envs/", func(k string, _ int64) error {
		if strings.HasSuffix(k, ".tar") {
			t.Errorf("stored %s, which no worker can extract", k)
		}
		return nil
	})
}
