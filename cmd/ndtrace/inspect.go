package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/internal/numfmt"
	"github.com/ndtrace/ndtrace/internal/termsafe"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
)

const inspectUsage = `URL [flags]

Prints the dataset's manifest summary, then rows decoded back to text with the loss mask visible,
each after a header line with the row's metadata. Rows are read from the shards the manifest names,
in manifest order (or from --shard only).

Learned tokens (loss mask 1) are shown between the markers ⟦ and ⟧, or in green underlined text
(ANSI) when stdout is a terminal; --color chooses. A character whose bytes straddle a mask boundary
is shown with the span it starts in. Control characters, bidi controls and invalid UTF-8 in the
rows are shown as escapes (\x1b, \u202e, \xff): the rows keep them, the terminal obeys none.

URL: a folder (./ndtrace-data), file:///abs/dir, s3://bucket/prefix?region=..., gs://bucket/prefix,
azblob://container/prefix (see docs/dataset.md). Flags may come before or after URL.`

// Loss-mask markers: plain-text markers, and ANSI green underline for terminals.
const (
	markOpen  = "⟦"
	markClose = "⟧"
	ansiOpen  = "\x1b[32;4m"
	ansiClose = "\x1b[0m"
)

// runInspect implements "ndtrace inspect".
func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("inspect", inspectUsage, stderr)
	nrows := fs.Int("rows", 3, "rows to print in all (0: every row)")
	shard := fs.String("shard", "", "print rows of this shard only: part-00012, part-00012.parquet or data/part-00012.parquet (shards/… in a dataset written before the data/ layout)")
	color := fs.String("color", "auto", "learned-token display: auto (ANSI on a terminal unless NO_COLOR is set, markers otherwise), always (ANSI), never (markers)")
	url, err := parseURLArg(fs, args)
	if err != nil {
		return err
	}
	if *nrows < 0 {
		return usagef("--rows must be 0 or more")
	}
	open, closing := markOpen, markClose
	switch *color {
	case "always":
		open, closing = ansiOpen, ansiClose
	case "never":
	case "auto":
		if isTerminal(stdout) && os.Getenv("NO_COLOR") == "" {
			open, closing = ansiOpen, ansiClose
		}
	default:
		return usagef("--color must be auto, always or never, not %q", *color)
	}

	st, m, err := openDataset(ctx, url)
	if err != nil {
		return err
	}
	defer st.Close()
	all, err := m.AllShards(ctx, st)
	if err != nil {
		return err
	}
	shards := all
	if *shard != "" {
		want := *shard
		for _, dir := range []string{dataset.PoolDir + "/" + dataset.ShardDir, dataset.ShardDir, dataset.LegacyShardDir} {
			want = strings.TrimPrefix(want, dir+"/")
		}
		want = strings.TrimSuffix(want, dataset.ShardExt)
		shards = nil
		for _, s := range all {
			if s.Path == dataset.ShardPath(want) || s.Path == dataset.PoolShardPath(want) || s.Path == dataset.LegacyShardDir+"/"+want+dataset.ShardExt {
				shards = []dataset.ShardInfo{s}
			}
		}
		if shards == nil {
			return usagef("no shard %q in the manifest of %s (it has %d shards, e.g. %s)", *shard, url, len(all), firstShard(all))
		}
	}
	printManifestSummary(stdout, url, m)

	left := *nrows
	toks := map[string]loadedTokenizer{}
	for _, s := range shards {
		if *nrows > 0 && left == 0 {
			break
		}
		limit := 0
		if *nrows > 0 {
			limit = left
		}
		rows, err := dataset.ReadRows(ctx, st, s.Path, limit)
		if err != nil {
			return err
		}
		for i := range rows {
			fmt.Fprintf(stdout, "\n── %s row %d ──\n", termsafe.String(s.Path), i)
			fmt.Fprintln(stdout, rowMetadata(&rows[i]))
			fmt.Fprintln(stdout, maskedText(&rows[i], toks, open, closing))
		}
		left -= len(rows)
	}
	return nil
}

func firstShard(shards []dataset.ShardInfo) string {
	if len(shards) == 0 {
		return "none"
	}
	return shards[0].Path
}

// printManifestSummary prints what the manifest says about the dataset, in a few lines escaped for
// a terminal.
func printManifestSummary(w io.Writer, url string, m *dataset.Manifest) {
	fmt.Fprintf(w, "dataset %s: %d shards, %s rows, %s tokens (%s learned)\n", termsafe.String(url), m.Totals.Shards,
		numfmt.Thousands(m.Totals.Rows), numfmt.Thousands(m.Totals.Tokens), numfmt.Thousands(m.Totals.LearnedTokens))
	fmt.Fprintln(w, termsafe.String(fmt.Sprintf("format %s v%d, schema %s, created %s; tracer %s, pipeline %s, tokenizer %s", m.Format,
		m.FormatVersion, m.SchemaVersion, m.CreatedAt.UTC().Format(time.RFC3339), orDash(m.Versions.Tracer),
		orDash(m.Versions.Pipeline), orDash(m.Versions.Tokenizer))))
	if len(m.Counts) > 0 {
		keys := slices.Sorted(maps.Keys(m.Counts))
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s=%d", k, m.Counts[k])
		}
		fmt.Fprintf(w, "counts: %s\n", termsafe.String(strings.Join(parts, " ")))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// rowMetadata is the one-line header of a row: every column but text, input_ids and loss_mask,
// escaped for a terminal (qualname, path, source and repository come from the code).
func rowMetadata(r *schemas.Row) string { return termsafe.String(rawRowMetadata(r)) }

// rawRowMetadata is rowMetadata unescaped.
func rawRowMetadata(r *schemas.Row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "id=%s level=%s direction=%s policy=%s seed=%d exit=%s tokens=%d learned=%d actions=%d states=%d",
		shortID(r.ID), r.Level, r.Direction, r.Policy, r.Seed, r.Exit, r.NumTokens, r.NumLearned, r.NumActions, r.NumStates)
	acts := []struct {
		name string
		n    int32
	}{
		{"step_into", r.ActStepInto}, {"step_over", r.ActStepOver}, {"step_return", r.ActStepReturn},
		{"breakpoint", r.ActBreakpoint}, {"continue", r.ActContinue}, {"inv_step_into", r.ActInvStepInto},
		{"inv_step_over", r.ActInvStepOver}, {"inv_step_call", r.ActInvStepCall},
	}
	var nonzero []string
	for _, a := range acts {
		if a.n != 0 {
			nonzero = append(nonzero, fmt.Sprintf("%s:%d", a.name, a.n))
		}
	}
	if len(nonzero) > 0 {
		fmt.Fprintf(&b, " [%s]", strings.Join(nonzero, " "))
	}
	fmt.Fprintf(&b, " events=call:%d,line:%d,return:%d,exception:%d code_chars=%d", r.EvCall, r.EvLine, r.EvReturn,
		r.EvException, r.CodeChars)
	fmt.Fprintf(&b, " qualname=%s path=%s source=%s", orDash(r.QualName), orDash(r.Path), orDash(r.SourceID))
	if r.RepoURL != "" {
		fmt.Fprintf(&b, " repo=%s@%s", r.RepoURL, r.Commit)
	}
	fmt.Fprintf(&b, " tokenizer=%s tracer=%s pipeline=%s created=%s", r.Tokenizer, orDash(r.TracerVersion),
		orDash(r.PipelineVersion), r.CreatedAt.UTC().Format(time.RFC3339))
	return b.String()
}

func shortID(id string) string {
	if len(id) > 16 {
		return id[:16] + "…"
	}
	return id
}

// maskedText decodes a row's input_ids span by span (a span is a run of equal loss-mask values) and
// wraps the learned spans in open/close. If the row's tokenizer cannot be loaded or the ids do not
// decode, it returns the row's text with a note instead. The row's text is escaped for a terminal
// (termsafe.Text: tabs and newlines kept), open and close are not.
func maskedText(r *schemas.Row, toks map[string]loadedTokenizer, open, closing string) string {
	lt, ok := toks[r.Tokenizer]
	if !ok {
		lt.tok, lt.err = tokenizerLookup(r.Tokenizer)
		toks[r.Tokenizer] = lt
	}
	if lt.err != nil {
		return fmt.Sprintf("[loss mask not shown: %s]\n%s", termsafe.String(oneLine(lt.err.Error())), termsafe.Text(r.Text))
	}
	s, err := renderMasked(lt.tok, r.InputIDs, r.LossMask, open, closing)
	if err != nil {
		return fmt.Sprintf("[loss mask not shown: %s]\n%s", termsafe.String(oneLine(err.Error())), termsafe.Text(r.Text))
	}
	return s
}

// loadedTokenizer is the outcome of one tokenizer lookup.
type loadedTokenizer struct {
	tok tokenize.Tokenizer
	err error
}

// maxSpanGrowth bounds how many tokens a span may borrow from the next one to end on a character
// boundary (a UTF-8 character is at most 4 bytes, so a few tokens always suffice for a sane
// tokenizer).
const maxSpanGrowth = 8

// renderMasked decodes ids in runs of equal mask values, wrapping the learned runs in open/close.
// A run that does not decode on its own (a multi-byte character split between runs) borrows tokens
// from the next run until it does. Each run's text is escaped for a terminal (termsafe.Text).
func renderMasked(tok tokenize.Tokenizer, ids []int32, mask []bool, open, closing string) (string, error) {
	if len(mask) != len(ids) {
		return "", fmt.Errorf("%d ids but %d loss-mask entries", len(ids), len(mask))
	}
	var b strings.Builder
	for i := 0; i < len(ids); {
		j := i
		for j < len(ids) && mask[j] == mask[i] {
			j++
		}
		text, err := tok.Decode(ids[i:j])
		for grow := 0; err != nil && j < len(ids) && grow < maxSpanGrowth; grow++ {
			j++
			text, err = tok.Decode(ids[i:j])
		}
		if err != nil {
			return "", fmt.Errorf("ids %d..%d do not decode with %s: %w", i, j, tok.Name(), err)
		}
		text = termsafe.Text(text)
		if mask[i] {
			b.WriteString(open)
			b.WriteString(text)
			b.WriteString(closing)
		} else {
			b.WriteString(text)
		}
		i = j
	}
	return b.String(), nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
