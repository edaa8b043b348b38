package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/internal/progress"
	"github.com/ndtrace/ndtrace/workflows"
)

// screen is what a terminal shows after the output of a program, as far as the sequences a
// progress block uses go: text, carriage return, line feed, cursor up (ESC [ n A) and erase to the
// end of the screen (ESC [ J). Any other escape sequence is an error.
func screen(out []byte) ([]string, error) {
	var rows [][]rune
	row, col := 0, 0
	put := func(r rune) {
		for len(rows) <= row {
			rows = append(rows, nil)
		}
		for len(rows[row]) <= col {
			rows[row] = append(rows[row], ' ')
		}
		rows[row][col] = r
		col++
	}
	csi := regexp.MustCompile(`^\x1b\[([0-9]*)([A-Za-z])`)
	s := []rune(string(out))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\r':
			col = 0
		case '\n':
			row++
		case 0x1b:
			m := csi.FindStringSubmatch(string(s[i:min(i+16, len(s))]))
			if m == nil {
				return nil, fmt.Errorf("unknown escape sequence %q", string(s[i:min(i+8, len(s))]))
			}
			n, _ := strconv.Atoi(m[1])
			switch m[2] {
			case "A":
				row = max(row-max(n, 1), 0)
			case "J":
				if row < len(rows) {
					rows = rows[:row+1]
					rows[row] = rows[row][:min(col, len(rows[row]))]
				}
			default:
				return nil, fmt.Errorf("unknown escape sequence %q", m[0])
			}
			i += len([]rune(m[0])) - 1
		default:
			put(c)
		}
	}
	var lines []string
	for _, r := range rows {
		lines = append(lines, strings.TrimRight(string(r), " "))
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines, nil
}

// TestScreen checks the test's terminal model.
func TestScreen(t *testing.T) {
	lines, err := screen([]byte("head\r\nbar 1\r\nline\r\n\x1b[2A\x1b[Jbar 2\r\nline 2\r\n"))
	if err != nil || strings.Join(lines, "|") != "head|bar 2|line 2" {
		t.Errorf("screen = %q, %v", lines, err)
	}
	if _, err := screen([]byte("\x1b[31mred")); err == nil {
		t.Error("a colour passed as a known sequence")
	}
}

// TestRunProgressTerminal runs the built ndtrace with stderr on a real pseudo-terminal and checks
// that the progress is one block redrawn in place (cursor up, erase), that the screen ends with
// the block's final state and the summary, and that the screen holds a handful of lines.
// openTerminal opens a pseudo-terminal of 40 rows and 150 columns and returns its master and its
// terminal; the master is closed when the test ends, the terminal is the caller's to close.
func openTerminal(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 150}); err != nil {
		t.Fatal(err)
	}
	return ptmx, tty
}

func TestRunProgressTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	bin := buildBinary(t)
	out := filepath.Join(t.TempDir(), "data")
	ptmx, tty := openTerminal(t)
	cmd := exec.Command(bin, "run", "--out", out)
	cmd.Env = append(os.Environ(), "TERM=xterm")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds it now; the master reads EIO once the child is gone
	read := make(chan []byte, 1)
	go func() {
		b, err := io.ReadAll(ptmx)
		if err != nil && !errors.Is(err, syscall.EIO) {
			t.Errorf("read the terminal: %v", err)
		}
		read <- b
	}()
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	select {
	case err := <-waitErr:
		if err != nil {
			t.Fatalf("ndtrace run: %v\n%s", err, <-read)
		}
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("ndtrace run did not end in 5 minutes")
	}
	raw := <-read
	redraws := regexp.MustCompile(`\x1b\[[0-9]+A`).FindAll(raw, -1)
	lines, err := screen(raw)
	if err != nil {
		t.Fatalf("%v in %q", err, raw)
	}
	shown := strings.Join(lines, "\n")
	t.Logf("%d redraws, %d bytes; the screen:\n%s", len(redraws), len(raw), shown)
	if len(redraws) < 2 {
		t.Errorf("%d redraws in place, want the block redrawn (cursor up) again and again", len(redraws))
	}
	if strings.Contains(string(raw), "items traced") {
		t.Error("log lines of progress on a terminal")
	}
	// The screen: the run's first line, the block (4 lines) and nothing else: no line per update.
	if len(lines) > 6 {
		t.Errorf("%d lines on the screen, want at most 6", len(lines))
	}
	for _, want := range []string{"dataset workflow ", "done ", "22/22 items", "100%", "54 trajectories", "13,425 tokens", "batches 3/3"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the screen lacks %q", want)
		}
	}
	if !strings.HasPrefix(stdout.String(), "dataset "+out+": 54 rows") {
		t.Errorf("summary: %q", stdout.String())
	}
}

// progressLines are the lines of text progress in a run's stderr.
var progressLines = regexp.MustCompile(`(?m)^[a-z]+: \d+/\d+ items traced, .*$`)

// TestRunProgressPipe runs the built ndtrace with stderr on a pipe, as under CI or Kubernetes: the
// progress comes as plain lines, the first, then at most one every --progress-interval, then the
// final one; never a line per update, and no terminal sequences.
func TestRunProgressPipe(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	// 20 batches of 10 items, two at a time: the progress changes on every poll.
	spec := writeSpec(t, dir, fmt.Sprintf("name: pipe\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\n    limit: 200\nbatch_size: 10\nparallelism: 2\ncreated_at: 2026-11-22T00:00:00Z\n",
		filepath.Join(dir, "data"), cruxeval.Path(t)))
	for _, tt := range []struct {
		interval time.Duration
	}{{progress.DefaultEvery}, {time.Hour}} {
		t.Run(tt.interval.String(), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, "run", "--spec", spec, "--out", filepath.Join(t.TempDir(), "data"), "--progress-interval", tt.interval.String())
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			if err := cmd.Run(); err != nil {
				t.Fatalf("ndtrace run: %v\n%s", err, stderr.String())
			}
			took := time.Since(start)
			lines := progressLines.FindAllString(stderr.String(), -1)
			t.Logf("%s run, %d progress lines:\n%s", took.Round(100*time.Millisecond), len(lines), strings.Join(lines, "\n"))
			// The first, one an interval at most, the final.
			most := 2 + int(took/tt.interval)
			if len(lines) < 2 || len(lines) > most {
				t.Errorf("%d progress lines in %s at one every %s, want 2 to %d", len(lines), took, tt.interval, most)
			}
			if len(lines) > 0 && !strings.HasPrefix(lines[len(lines)-1], "done: 200/200 items traced") {
				t.Errorf("the final line: %q", lines[len(lines)-1])
			}
			if strings.Contains(stderr.String(), "\x1b[") || strings.Contains(stderr.String(), "\r") {
				t.Error("terminal sequences on a pipe")
			}
			if !strings.Contains(stdout.String(), "dataset ") {
				t.Errorf("no summary: %q", stdout.String())
			}
		})
	}
}

// TestProgressLine checks the one-line form of a status.
func TestProgressLine(t *testing.T) {
	tests := []struct {
		st   progress.Status
		want string
	}{
		{progress.Status{Snapshot: progress.Snapshot{Phase: "planning"}},
			"planning: 0/0 items traced, 0 trajectories, 0 tokens, 0 rejects, 0/0 batches"},
		{progress.Status{Snapshot: progress.Snapshot{Phase: "tracing", Items: 50000, ItemsDone: 12345, Trajectories: 24690,
			Tokens: 8123456, Rejects: 17, Batches: 500, BatchesDone: 123, BatchesFailed: 1, InFlight: 4},
			Elapsed: 40 * time.Second, Rate: 312.44, ETA: 121 * time.Second, ETAKnown: true},
			"tracing: 12345/50000 items traced, 24690 trajectories, 8123456 tokens, 17 rejects, 123/500 batches (4 in flight), 1 batches failed, 312.4 items/s, ETA 2m1s, elapsed 40s"},
		// Inputs generated for functions that came without them: how many, and the cost of one.
		{progress.Status{Snapshot: progress.Snapshot{Phase: "tracing", Items: 10, ItemsDone: 4, Batches: 10, BatchesDone: 4,
			GenUnits: 120, GenWall: 30 * time.Second}, Elapsed: 9 * time.Second},
			"tracing: 4/10 items traced, 0 trajectories, 0 tokens, 0 rejects, 4/10 batches, inputs generated for 120 functions (250ms per function), elapsed 9s"},
	}
	for _, tt := range tests {
		if got := progressLine(tt.st); got != tt.want {
			t.Errorf("progressLine =\n%s\nwant\n%s", got, tt.want)
		}
	}
}

// TestLineViewJSON checks the progress of run --log-format json: slog records named progress, the
// first and the final (marked final) of a burst of updates.
func TestLineViewJSON(t *testing.T) {
	var buf bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	v := newProgressView(&buf, true, progress.DefaultEvery, &logSwitch{out: &buf})
	p := workflows.Progress{Phase: "tracing", Items: 100, Batches: 10, Started: time.Now().Add(-10 * time.Second)}
	for i := range 50 {
		p.ItemsDone = 2 * i
		v.update(p)
	}
	p.Phase, p.ItemsDone, p.BatchesDone, p.Rows = "done", 100, 10, 200
	v.finish(p, true)
	var recs []map[string]any
	for line := range strings.Lines(buf.String()) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		recs = append(recs, r)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records for 50 updates in a burst and the final one, want 2:\n%s", len(recs), buf.String())
	}
	last := recs[1]
	if last["msg"] != "progress" || last["phase"] != "done" || last["items_done"] != 100.0 || last["trajectories"] != 200.0 ||
		last["final"] != true || last["elapsed_seconds"] != 10.0 {
		t.Errorf("final record %v", last)
	}
	if _, ok := recs[0]["final"]; ok || recs[0]["items"] != 100.0 {
		t.Errorf("first record %v", recs[0])
	}
}
