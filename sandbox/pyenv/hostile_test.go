package pyenv

import (
	"context"
	"errors"
	"slices"
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

// TestWheelBombNotUnpacked (attacker's review, issue 26): the size of an environment was measured
// after pip had installed it, on the worker's disk outside the sandbox: a wheel of a few hundred
// kilobytes (a file of zeros deflates a thousand to one) unpacks to gigabytes, filling the disk
// every other repository's checkout and environment on the worker share. The wheels are now
// downloaded first and their declared sizes (which Python's zipfile never writes past) summed
// before anything is unpacked: a set larger than MaxBytes is an *Error and pip never installs it.
func TestWheelBombNotUnpacked(t *testing.T) {
	needPip(t)
	ctx := context.Background()
	w := testwheels.Wheel{Name: "ndtrace-bomb", Version: "1.0", Files: map[string]string{
		"bomb/__init__.py": "", "bomb/zeros.bin": strings.Repeat("\x00", 8<<20)}}
	wheels := testwheels.Folder(t, "", []testwheels.Wheel{w})
	var runs [][]string
	c := &Cache{Dir: t.TempDir(), OnPip: func(args []string) { runs = append(runs, args) }}
	_, err := c.Ensure(ctx, Config{FindLinks: []string{wheels}, MaxBytes: 1 << 20}, reqs(t, "ndtrace-bomb==1.0"))
	var pe *Error
	if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "larger than 1048576 bytes") {
		t.Errorf("Ensure: %v, want an *Error: larger than the limit", err)
	}
	for _, args := range runs {
		if slices.Contains(args, "install") && !slices.Contains(args, "--dry-run") {
			t.Errorf("pip installed the wheels (%v) before their size was known", args)
		}
	}
}

// TestPipBounded (attacker's review, issue 26): pip runs on the worker, resolving and downloading
// what a repository declares, with no bound on its memory or on the files it writes: a resolver
// blow-up or an endless download took the worker's memory or disk. What pip runs now has its
// address space bounded (pipAddressSpace) and every file it writes capped at the environment's
// MaxBytes; each is tried here with the interpreter pip runs in.
func TestPipBounded(t *testing.T) {
	ctx := context.Background()
	b := &builder{cfg: Config{Python: "/usr/bin/python3", MaxBytes: 1 << 20}.withDefaults(), work: t.TempDir()}
	for _, tc := range []struct{ name, script string }{
		{"memory", "b = bytearray(4 << 30)"},
		{"file", "f = open('big', 'wb')\nfor _ in range(8): f.write(b'x' * (1 << 20))\nf.close()"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := b.run(ctx, "/usr/bin/python3", "-c", tc.script)
			if err == nil {
				t.Fatalf("ran past its bound: %s", out)
			}
			t.Logf("%v: %.200s", err, out)
		})
	}
	if out, err := b.run(ctx, "/usr/bin/python3", "-c", "b = bytearray(64 << 20); open('small', 'wb').write(b'x' * 1000)"); err != nil {
		t.Fatalf("a run within its bounds failed: %v: %s", err, out)
	}
}
