package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/internal/progress"
	"github.com/ndtrace/ndtrace/internal/termsafe"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
	"github.com/ndtrace/ndtrace/verify"
	"github.com/ndtrace/ndtrace/workflows"
)

// hostileText is what a hostile test, repository or corpus puts in a reject reason, a name or a
// comment: an OSC title set, an OSC 52 clipboard write, a CSI clear screen and cursor home, a fake
// report behind a C1 CSI (U+009B), a bidi override and isolate, a carriage return and a DEL.
const hostileText = "\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4K\x07\x1b[2J\x1b[H\u009b32mALL TESTS PASSED" +
	"\u202egnp.exe\u2066\u2069\rok\x7f"

// hostileRaw adds a raw C1 CSI byte (0x9b, invalid UTF-8) to hostileText, for the stored strings
// that keep bytes as they are (Parquet columns).
const hostileRaw = hostileText + "\x9b2J"

// hostileEscaped is how the output shows hostileText's start.
const hostileEscaped = `\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4K\x07\x1b[2J\x1b[H\u009b32mALL TESTS PASSED\u202egnp.exe`

// checkTerminalSafe fails t if out holds what a terminal would obey rather than show: invalid
// UTF-8 (a raw C1 byte), a control character other than tab and newline (ESC, BEL, CR, DEL, C1) or
// a bidi control. With ansi, the ANSI markers inspect itself writes are allowed.
func checkTerminalSafe(t *testing.T, what, out string, ansi bool) {
	t.Helper()
	if ansi {
		out = strings.NewReplacer(ansiOpen, "", ansiClose, "").Replace(out)
	}
	for i := 0; i < len(out); {
		r, size := utf8.DecodeRuneInString(out[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			t.Fatalf("%s: raw byte %#x at %d: %q", what, out[i], i, excerptAt(out, i))
		case r == '\n' || r == '\t':
		case unicode.IsControl(r) || isBidiControl(r):
			t.Fatalf("%s: raw %U at %d: %q", what, r, i, excerptAt(out, i))
		}
		i += size
	}
}

func excerptAt(s string, i int) string { return s[max(0, i-40):min(len(s), i+40)] }

// isBidiControl reports the bidi controls (and line separators) a terminal must not get raw.
func isBidiControl(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || r == 0x2028 || r == 0x2029 ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// hostileRow is cliRow with hostile text in its code (a comment), its learned state, and its
// metadata columns.
func hostileRow(t *testing.T, seed int) schemas.Row {
	t.Helper()
	r := cliRow(t, seed)
	r.Text = strings.Replace(r.Text, "# é\n", "# é "+hostileText+"\n", 1)
	r.Text = strings.Replace(r.Text, `"日本"}`, `"日本`+hostileText+`"}`, 1)
	tok := tokenize.Bytes()
	ids, err := tokenize.Encode(tok, r.Text)
	if err != nil {
		t.Fatal(err)
	}
	mask, err := tokenize.LossMask(tok, ids, tokenize.MaskStates)
	if err != nil {
		t.Fatal(err)
	}
	r.InputIDs, r.LossMask, r.NumTokens, r.NumLearned = ids, mask, int32(len(ids)), int32(tokenize.LearnedTokens(mask))
	r.Path, r.QualName, r.SourceID = "corpus/"+hostileRaw+".jsonl", "f"+hostileRaw, hostileRaw
	return r
}

// writeHostileDataset writes a valid dataset whose rows, rejects, manifest and verification
// certificate hold hostile text, as a hostile corpus or repository leaves them, and returns its
// folder.
func writeHostileDataset(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "hostile")
	st := openStore(t, dir)
	var infos []dataset.ShardInfo
	for s, n := range []int{3, 2} {
		rows := make([]schemas.Row, n)
		for i := range rows {
			rows[i] = hostileRow(t, 10*s+i)
		}
		info, err := dataset.WriteShard(ctx, st, fmt.Sprintf("part-%05d", s), rows)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	var rejects bytes.Buffer
	for _, r := range []schemas.Reject{
		{Source: "https://example.com/" + hostileText, Key: hostileText + "::test_x", Class: schemas.RejectRepository,
			Reason: "ModuleNotFoundError: No module named '" + hostileText + "'"},
		{Source: "corpus/" + hostileText, Key: "k", Reason: hostileText + ": a reason whose first word is its class"},
	} {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		rejects.Write(append(line, '\n'))
	}
	if err := st.Put(ctx, dataset.RejectsKey, rejects.Bytes(), nil); err != nil {
		t.Fatal(err)
	}
	_, err := dataset.WriteManifest(ctx, st, dataset.Manifest{CreatedAt: cliCreated, Shards: infos,
		Versions: dataset.Versions{Tracer: "t1", Pipeline: "p1" + hostileText, Tokenizer: "bytes"},
		Counts:   schemas.Counts{"rejects": 2, schemas.CountKey(hostileText): 1}})
	if err != nil {
		t.Fatal(err)
	}
	st, m := openHead(t, dir)
	v := &schemas.Verification{Format: schemas.VerifyFormat, Version: m.Version, DatasetCreatedAt: m.CreatedAt, Rows: m.Totals.Rows,
		Sample: schemas.VerifySample{Seed: 7, Requested: 5, Size: 5, Strata: 2}, Checked: 5, Agreed: 4, Agreement: 0.8,
		Differences: map[string]int{hostileText: 1}, MinAgreement: 1, StartedAt: m.CreatedAt,
		Verifier: schemas.VerifyVersions{Tracer: "5" + hostileText, Pipeline: "1"},
		Examples: []schemas.VerifyExample{{RowID: hostileText, Check: "re-execution", Kind: hostileText, Detail: "value differs: " + hostileText}}}
	if _, err := verify.Write(ctx, st, m, v); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestHostileTextStoredAsIs: the hostile dataset's stored data holds the real text (what the
// terminal tests below print escaped).
func TestHostileTextStoredAsIs(t *testing.T) {
	ctx := context.Background()
	dir := writeHostileDataset(t)
	st, m := openHead(t, dir)
	shards, err := m.AllShards(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := dataset.ReadRows(ctx, st, shards[0].Path, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := rows[0]; r.Path != "corpus/"+hostileRaw+".jsonl" || r.SourceID != hostileRaw || !strings.Contains(r.Text, "# é "+hostileText+"\n") {
		t.Errorf("row 0 does not hold the hostile text as written: path %q, text %q", r.Path, r.Text)
	}
	var reasons []string
	if _, err := dataset.EachReject(ctx, st, m, func(r schemas.Reject) error {
		reasons = append(reasons, r.Reason)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(reasons) != 2 || !strings.Contains(reasons[0], hostileText) {
		t.Errorf("rejects: %q", reasons)
	}
	v, err := verify.Read(ctx, st, m)
	if err != nil || v == nil || v.Examples[0].Detail != "value differs: "+hostileText {
		t.Errorf("certificate: %v, %+v", err, v)
	}
	// stats.json, written from the computed statistics, keeps the source names and reasons too.
	writeStoredStats(t, dir, nil)
	stats, _, err := dataset.LoadStats(ctx, st, m)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range stats.Sources {
		found = found || strings.Contains(s.Source, hostileText)
	}
	if !found || len(stats.Rejects) == 0 {
		t.Errorf("stats.json lost the hostile text: sources %+v, rejects %+v", stats.Sources, stats.Rejects)
	}
}

// TestTerminalSafeCommands runs the commands that print a dataset's text on the hostile dataset:
// nothing a terminal obeys reaches stdout or stderr, and the text shows, escaped.
func TestTerminalSafeCommands(t *testing.T) {
	dir := writeHostileDataset(t)
	stored := writeHostileDataset(t)
	writeStoredStats(t, stored, nil)
	tests := []struct {
		name string
		args []string
		code int
		ansi bool
		has  []string
	}{
		{name: "stats computed", args: []string{"stats", dir}, has: []string{
			"corpus/" + hostileEscaped, "ModuleNotFoundError: No module named '" + hostileEscaped,
			`\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4K\x07\x1b[2J\x1b[H\u009b32mALL`, // the class of the second reject
			"value differs: " + hostileEscaped, "row " + hostileEscaped}},
		{name: "stats from stats.json", args: []string{"stats", stored, "--sources", "0"}, has: []string{"corpus/" + hostileEscaped}},
		{name: "inspect never", args: []string{"inspect", dir, "--color", "never", "--rows", "0"}, has: []string{
			"# é " + hostileEscaped, markOpen, "source=" + hostileEscaped, "pipeline p1" + hostileEscaped, "counts: " + hostileEscaped}},
		{name: "inspect always", args: []string{"inspect", dir, "--color", "always", "--rows", "0"}, ansi: true, has: []string{
			"# é " + hostileEscaped, ansiOpen, `"日本` + hostileEscaped}},
		{name: "inspect auto", args: []string{"inspect", dir}, has: []string{"# é " + hostileEscaped}},
		{name: "validate", args: []string{"validate", dir}, has: []string{"ok: "}},
		{name: "validate all", args: []string{"validate", "--all", corruptHostileDataset(t)}, code: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCmd(tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstderr: %q", code, tc.code, stderr)
			}
			checkTerminalSafe(t, "stdout", stdout, tc.ansi)
			checkTerminalSafe(t, "stderr", stderr, false)
			for _, s := range tc.has {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
		})
	}
}

// corruptHostileDataset is the hostile dataset with a row whose text no longer matches its ids
// and an unknown tokenizer: validate reports problems that quote hostile text.
func corruptHostileDataset(t *testing.T) string {
	return writeCLIDataset(t, func(s int, rows []schemas.Row) {
		for i := range rows {
			rows[i] = hostileRow(t, 10*s+i)
		}
		rows[0].Text = strings.Replace(rows[0].Text, "# é", "# è", 1)
		if s == 1 {
			rows[1].Tokenizer = hostileText
		}
	})
}

// TestTerminalSafeErrorLine: an error whose text came from a dataset or a repository is printed on
// one line with its control characters escaped.
func TestTerminalSafeErrorLine(t *testing.T) {
	for _, args := range [][]string{
		{"inspect", "--rows", "1", "./no-such-" + hostileText},
		{"stats", "./no-such-" + hostileRaw},
		{"validate", "./no-such-" + hostileText},
	} {
		stdout, stderr, code := runCmd(args...)
		if code == 0 {
			t.Fatalf("%s: exit 0", args[0])
		}
		checkTerminalSafe(t, args[0]+" stderr", stderr, false)
		checkTerminalSafe(t, args[0]+" stdout", stdout, false)
		if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, hostileEscaped) {
			t.Errorf("%s: stderr %q: want one line showing %q", args[0], stderr, hostileEscaped)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTerminalSafeLogLine: a log line of the dashboard (the request it logs at debug level, whose
// path a remote client chooses) in either --log-format holds no raw control character.
func TestTerminalSafeLogLine(t *testing.T) {
	t.Setenv("NDTRACE_LOG", "debug")
	saved := slog.Default()
	t.Cleanup(func() { slog.SetDefault(saved) })
	ds := writeHostileDataset(t)
	// %9b is a raw C1 CSI byte, %c2%9b the same as a rune, %e2%80%ae a bidi override.
	path := "%1b]0;pwned%07/%1b]52;c;eA==%07/%1b[2J/%9b2J/%c2%9b2J/%e2%80%aegnp.exe/%0d%0aFAKE"
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var logs syncBuffer
			if err := setLogs(format, &logs, &logs); err != nil {
				t.Fatal(err)
			}
			base := startDashboard(t, ds)
			httpGet(t, base+path)
			out := logs.String()
			checkTerminalSafe(t, "logs", out, false)
			if !strings.Contains(out, "dashboard: request") || !strings.Contains(out, `\x1b]0;pwned`) {
				t.Errorf("no escaped request line in the logs:\n%s", out)
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if strings.Contains(line, "FAKE") && !strings.Contains(line, "dashboard: request") {
					t.Errorf("the request's path began a log line of its own: %q", line)
				}
			}
		})
	}
}

// TestTerminalSafeProgress: the status and progress lines escape a phase and failed batch names
// (they come from the workflow, which names batches after their items' sources).
func TestTerminalSafeProgress(t *testing.T) {
	st := progress.NewMeter(nil, 0).Update(progress.Snapshot{Phase: hostileText, Items: 2, ItemsDone: 1})
	line := progressLine(st)
	checkTerminalSafe(t, "progress line", line, false)
	if !strings.HasPrefix(line, hostileEscaped) {
		t.Errorf("progress line %q", line)
	}
	var b bytes.Buffer
	printFailures(&b, workflows.Progress{Failed: []string{"batch-" + hostileRaw}, Poison: 1})
	printSummary(&b, "./data", workflows.DatasetResult{Progress: workflows.Progress{Failed: []string{hostileText}}})
	checkTerminalSafe(t, "failures", b.String(), false)
	if !strings.Contains(b.String(), "failed batch batch-"+hostileEscaped) {
		t.Errorf("failures:\n%s", b.String())
	}
}

// TestRenderTerminalText: render escapes the grammar text for a terminal (a character device),
// and writes it exactly to a file or a pipe.
func TestRenderTerminalText(t *testing.T) {
	text := "def f():\n\treturn '" + hostileText + "'\n"
	var buf bytes.Buffer
	if got := terminalText(&buf, text); got != text {
		t.Errorf("to a buffer: %q, want the text as it is", got)
	}
	tty, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0) // a character device, as a terminal is
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	got := terminalText(tty, text)
	checkTerminalSafe(t, "render to a terminal", got, false)
	if got != termsafe.Text(text) || !strings.Contains(got, "\n\treturn '"+hostileEscaped) {
		t.Errorf("to a terminal: %q", got)
	}
}

func TestHostileFixtures(t *testing.T) {
	// The fixtures are what they claim: each attack is in hostileText, and escaping shows it.
	for _, s := range []string{"\x1b]0;", "\x1b]52;", "\x1b[2J", "\u009b", "\u202e", "\u2066", "\r", "\x07"} {
		if !strings.Contains(hostileText, s) {
			t.Errorf("hostileText lacks %q", s)
		}
	}
	if !strings.HasPrefix(termsafe.String(hostileText), hostileEscaped) || utf8.ValidString(hostileRaw) {
		t.Errorf("escaped fixture %q", termsafe.String(hostileText))
	}
}

// TestTerminalJSON: the JSON outputs (stats --json, verify --json, trace, render --format json)
// are escaped on a terminal into the same JSON value, and exact to a file or a pipe.
func TestTerminalJSON(t *testing.T) {
	data, err := json.MarshalIndent(map[string]any{"reason": hostileText, "sources": []string{hostileRaw}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if got := terminalJSON(&buf, data); !bytes.Equal(got, data) {
		t.Errorf("to a buffer: %q, want the JSON as it is", got)
	}
	tty, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0) // a character device, as a terminal is
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	got := terminalJSON(tty, data)
	checkTerminalSafe(t, "JSON to a terminal", string(got), false)
	var want, have map[string]any
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &have); err != nil || have["reason"] != hostileText || fmt.Sprint(have) != fmt.Sprint(want) {
		t.Errorf("to a terminal: %q decodes to %v (%v), want %v", got, have, err, want)
	}
}
