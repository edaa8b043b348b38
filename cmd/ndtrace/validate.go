package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/internal/numfmt"
	"github.com/ndtrace/ndtrace/internal/termsafe"
	"github.com/ndtrace/ndtrace/tokenize"
)

// tokenizerLookup finds the tokenizer a dataset row names; validate and inspect decode input_ids with
// it. Tests replace it.
var tokenizerLookup dataset.TokenizerLookup = tokenize.Get

const validateUsage = `URL [flags]

Checks the dataset at URL: the manifest is present and well-formed; every shard it names exists with
the listed size and sha256; each shard has the expected Parquet schema and the listed row, token and
learned-token counts; every row has len(input_ids) == len(loss_mask) == num_tokens, the right
num_learned, the manifest's tokenizer, and decodes back to its text with the tokenizer it names.
Only the shards the manifest names are read.

Exit status: 0 and a one-line summary if the dataset is valid; 1 naming the first problem (shard,
row, column) if not, or if the store cannot be read; 2 for bad usage.

URL: a folder (./ndtrace-data), file:///abs/dir, s3://bucket/prefix?region=..., gs://bucket/prefix,
azblob://container/prefix (see docs/dataset.md). Flags may come before or after URL.`

// runValidate implements "ndtrace validate".
func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("validate", validateUsage, stderr)
	all := fs.Bool("all", false, "list every problem on stdout, one per line (up to --max-problems), instead of stopping at the first")
	maxProblems := fs.Int("max-problems", 1000, "with --all, stop after this many problems")
	url, err := parseURLArg(fs, args)
	if err != nil {
		return err
	}
	if *maxProblems < 1 {
		return usagef("--max-problems must be at least 1")
	}
	st, err := openCommitted(ctx, url)
	if err != nil {
		return err
	}
	defer st.Close()
	limit := 1
	if *all {
		limit = *maxProblems
	}
	rep, err := dataset.Check(ctx, st, tokenizerLookup, dataset.CheckOptions{MaxProblems: limit})
	if err != nil {
		return err
	}
	if !rep.OK() {
		if !*all {
			return fmt.Errorf("%s: %w", url, rep.Problems[0])
		}
		for _, p := range rep.Problems {
			fmt.Fprintln(stdout, termsafe.String(p.Error())) // problems quote rows' text
		}
		more := ""
		if rep.Truncated {
			more = " or more"
		}
		return fmt.Errorf("%s: %d problem(s)%s; first: %w", url, len(rep.Problems), more, rep.Problems[0])
	}
	fmt.Fprintf(stdout, "ok: %s: %d shards, %s rows, %s tokens (%s learned), schema %s\n", termsafe.String(url), rep.Shards,
		numfmt.Thousands(rep.Rows), numfmt.Thousands(rep.Tokens), numfmt.Thousands(rep.LearnedTokens), termsafe.String(rep.Manifest.SchemaVersion))
	return nil
}

// parseURLArg parses flags given before or after the one positional argument, a dataset URL.
// A bad flag gives a one-line error (not the usage text, which -h prints).
func parseURLArg(fs *flag.FlagSet, args []string) (string, error) {
	var pos []string
	for {
		if err := parseQuietly(fs, args); err != nil {
			return "", err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...) // after "--" everything is positional
			break
		}
		args = rest
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	switch len(pos) {
	case 0:
		return "", usagef("missing the dataset URL (e.g. ./ndtrace-data or s3://bucket/prefix); see %s -h", fs.Name())
	case 1:
		return pos[0], nil
	default:
		return "", usagef("unexpected argument %q (one dataset URL expected); see %s -h", pos[1], fs.Name())
	}
}
