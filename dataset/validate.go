package dataset

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
	"github.com/ndtrace/ndtrace/tokenize"
)

// TokenizerLookup returns the tokenizer a row names in its tokenizer column (tokenize.Get in the CLI).
type TokenizerLookup func(name string) (tokenize.Tokenizer, error)

// Problem is one inconsistency found by Check or Validate. It is an error.
type Problem struct {
	// Shard is the shard's path relative to the dataset root; empty for a problem of the manifest.
	Shard string
	// Row is the row's index in the shard (from 0), or -1 for a problem of the whole shard.
	Row int64
	// Column is the column concerned, if any.
	Column string
	// Msg says what is wrong.
	Msg string
}

// Error formats the problem as "data/part-00001.parquet row 17 column input_ids: msg".
func (p *Problem) Error() string {
	var b strings.Builder
	if p.Shard == "" {
		b.WriteString(ManifestKey)
	} else {
		b.WriteString(p.Shard)
	}
	if p.Row >= 0 {
		fmt.Fprintf(&b, " row %d", p.Row)
	}
	if p.Column != "" {
		fmt.Fprintf(&b, " column %s", p.Column)
	}
	b.WriteString(": ")
	b.WriteString(p.Msg)
	return b.String()
}

// Report is the outcome of Check.
type Report struct {
	// Manifest is the dataset's manifest, nil if it could not be read.
	Manifest *Manifest
	// Shards, Rows, Tokens and LearnedTokens count what was read and checked.
	Shards, Rows, Tokens, LearnedTokens int64
	// Problems lists what is wrong, in the order found (manifest, then shards in manifest order, rows
	// in file order); empty if the dataset is valid.
	Problems []*Problem
	// Truncated is true if Check stopped after CheckOptions.MaxProblems problems.
	Truncated bool
}

// OK reports whether no problem was found.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// CheckOptions tunes Check.
type CheckOptions struct {
	// MaxProblems stops the check after this many problems; 0 means 1,000.
	MaxProblems int
}

// Validate checks the dataset in store like Check and returns nil if it is valid, or the first
// problem found (a *Problem naming the shard, row and column). Errors of the context are returned
// as they are.
func Validate(ctx context.Context, st *store.Store, lookup TokenizerLookup) error {
	rep, err := Check(ctx, st, lookup, CheckOptions{MaxProblems: 1})
	if err != nil {
		return err
	}
	if !rep.OK() {
		return rep.Problems[0]
	}
	return nil
}

// Check reads the dataset in store and reports every problem it finds (up to opts.MaxProblems):
//
//   - the manifest is present and well-formed (ParseManifest) and its schema_version is
//     schemas.RowSchemaVersion;
//   - every shard it names exists, with the listed size and sha256 (computed from the content);
//   - the shard is Parquet with exactly the expected schema (parquet.SchemaOf(schemas.Row{})) and its
//     row count, token and learned-token sums match the manifest;
//   - every row has len(input_ids) == len(loss_mask) == num_tokens, num_learned true entries in
//     loss_mask, an input_source (schemas.InputSources) at function level and none at another,
//     the manifest's tokenizer (versions.tokenizer, if set), and decode(input_ids) == text under the tokenizer the row names (looked up with lookup); for a
//     tokenizer that normalizes its input (a Normalize(string) string method, e.g. NFC), decoding
//     may give Normalize(text) instead.
//
// It only reads what the manifest names, in manifest order. The error is non-nil only if ctx ends.
func Check(ctx context.Context, st *store.Store, lookup TokenizerLookup, opts CheckOptions) (*Report, error) {
	if opts.MaxProblems <= 0 {
		opts.MaxProblems = 1000
	}
	c := &checker{st: st, lookup: lookup, max: opts.MaxProblems, rep: &Report{}, toks: map[string]tokenize.Tokenizer{}, bad: map[string]bool{}}
	m, err := ReadManifest(ctx, st)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		msg := err.Error()
		if store.IsNotExist(err) {
			msg = "missing: no committed dataset at " + st.URL()
		}
		c.add("", -1, "", msg)
		return c.rep, nil
	}
	c.rep.Manifest = m
	if m.SchemaVersion != schemas.RowSchemaVersion {
		c.add("", -1, "", fmt.Sprintf("schema_version is %q, this ndtrace checks %q", m.SchemaVersion, schemas.RowSchemaVersion))
		return c.rep, nil
	}
	if m.Packing != nil {
		c.members = map[string][sha256.Size]byte{}
	}
	errStop := errors.New("stop")
	var ctxErr error
	visit := func(check func(context.Context, *Manifest, ShardInfo) error) func(ShardInfo) error {
		return func(s ShardInfo) error {
			if c.stop() {
				return errStop
			}
			if err := check(ctx, m, s); err != nil {
				ctxErr = err
				return err
			}
			return nil
		}
	}
	err = m.EachShard(ctx, st, visit(c.shard))
	if ctxErr != nil {
		return nil, ctxErr
	}
	if err != nil && err != errStop {
		c.add("", -1, "", "shard index: "+err.Error())
	}
	if m.Packing != nil && !c.stop() {
		packed := &Manifest{Shards: m.Packing.Shards, ShardIndex: m.Packing.Index}
		err = packed.EachShard(ctx, st, visit(c.packedShard))
		if ctxErr != nil {
			return nil, ctxErr
		}
		if err != nil && err != errStop {
			c.add("", -1, "", "packing index: "+err.Error())
		}
	}
	return c.rep, nil
}

// checker holds the state of one Check.
type checker struct {
	st     *store.Store
	lookup TokenizerLookup
	max    int
	rep    *Report
	toks   map[string]tokenize.Tokenizer // tokenizers found by name
	bad    map[string]bool               // tokenizer names already reported as not found
	// members maps the id of every row read to the digest of its ids and mask (segmentDigest), when
	// the dataset has packed shards to check against the rows.
	members map[string][sha256.Size]byte
}

// segmentDigest is the SHA-256 of a token sequence and its mask.
func segmentDigest(ids []int32, mask []bool) [sha256.Size]byte {
	b := make([]byte, 0, 5*len(ids))
	for i, id := range ids {
		b = binary.LittleEndian.AppendUint32(b, uint32(id))
		if mask[i] {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	return sha256.Sum256(b)
}

func (c *checker) add(shard string, row int64, column, msg string) {
	if c.full() {
		c.rep.Truncated = true
		return
	}
	c.rep.Problems = append(c.rep.Problems, &Problem{Shard: shard, Row: row, Column: column, Msg: msg})
}

func (c *checker) full() bool { return len(c.rep.Problems) >= c.max }

// stop reports whether the check must stop before work that remains, marking the report truncated.
func (c *checker) stop() bool {
	if c.full() {
		c.rep.Truncated = true
		return true
	}
	return false
}

// shard checks one shard against its manifest entry.
func (c *checker) shard(ctx context.Context, m *Manifest, s ShardInfo) error {
	f, err := c.open(ctx, s)
	if f == nil {
		return err
	}
	if !c.schemaOK(s.Path, expectedSchema, f) {
		return nil
	}
	if v, _ := f.Lookup(MetaSchemaVersion); v != m.SchemaVersion {
		c.add(s.Path, -1, "", fmt.Sprintf("key-value metadata %s is %q, the manifest says %q", MetaSchemaVersion, v, m.SchemaVersion))
	}
	rows, tokens, learned, err := scanShard(ctx, c, s.Path, f, func(i int64, r *schemas.Row) (int64, int64) {
		c.row(s.Path, i, r, m)
		if c.members != nil && len(r.InputIDs) == len(r.LossMask) {
			c.members[r.ID] = segmentDigest(r.InputIDs, r.LossMask)
		}
		return int64(r.NumTokens), int64(r.NumLearned)
	})
	if rows < 0 || err != nil {
		return err
	}
	c.rep.Rows += rows
	c.rep.Tokens += tokens
	c.rep.LearnedTokens += learned
	if tokens != s.Tokens {
		c.add(s.Path, -1, "num_tokens", fmt.Sprintf("rows sum to %d tokens, the manifest says %d", tokens, s.Tokens))
	}
	if learned != s.LearnedTokens {
		c.add(s.Path, -1, "num_learned", fmt.Sprintf("rows sum to %d learned tokens, the manifest says %d", learned, s.LearnedTokens))
	}
	return nil
}

// schemaOK reports whether f has exactly the schema want, recording the difference as a problem of
// the shard at path if not.
func (c *checker) schemaOK(path string, want *parquet.Schema, f *parquet.File) bool {
	err := compareSchemaTo(want, f.Schema())
	if err == nil {
		return true
	}
	var se *schemaError
	if errors.As(err, &se) {
		c.add(path, -1, se.column, se.msg)
	} else {
		c.add(path, -1, "", err.Error())
	}
	return false
}

// scanShard calls visit for every row of f, in order, and sums the rows and the tokens and learned
// tokens visit returns. rows is -1 when the scan stopped early: the check is full, ctx ended (the
// error), or the file could not be read to the end (recorded as a problem of path).
func scanShard[T any](ctx context.Context, c *checker, path string, f *parquet.File, visit func(i int64, r *T) (tokens, learned int64)) (rows, tokens, learned int64, err error) {
	err = eachOf(f, func(i int64, r *T) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if c.stop() {
			return errStop
		}
		rows++
		t, l := visit(i, r)
		tokens += t
		learned += l
		return nil
	})
	switch {
	case ctx.Err() != nil:
		return -1, 0, 0, ctx.Err()
	case errors.Is(err, errStop):
		return -1, 0, 0, nil
	case err != nil:
		c.add(path, -1, "", err.Error())
		return -1, 0, 0, nil
	}
	return rows, tokens, learned, nil
}

// open reads the shard s names and checks its size and sha256; it returns the file, or nil (with the
// problem recorded, or the context's error) if the shard cannot be checked further.
func (c *checker) open(ctx context.Context, s ShardInfo) (*parquet.File, error) {
	data, err := readStored(ctx, c.st, s.Path)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if store.IsNotExist(err) {
			c.add(s.Path, -1, "", "missing: the manifest names it but it is not stored")
		} else {
			c.add(s.Path, -1, "", err.Error())
		}
		return nil, nil
	}
	c.rep.Shards++
	if int64(len(data)) != s.Bytes {
		c.add(s.Path, -1, "", fmt.Sprintf("size is %d bytes, the manifest says %d", len(data), s.Bytes))
	}
	if got := hexSHA256(sha256.Sum256(data)); got != s.SHA256 {
		c.add(s.Path, -1, "", fmt.Sprintf("sha256 is %s, the manifest says %s", got, s.SHA256))
	}
	if c.stop() {
		return nil, nil
	}
	f, err := openParquet(data)
	if err != nil {
		c.add(s.Path, -1, "", err.Error())
		return nil, nil
	}
	if f.NumRows() != s.Rows {
		c.add(s.Path, -1, "", fmt.Sprintf("%d rows, the manifest says %d", f.NumRows(), s.Rows))
	}
	return f, nil
}

// packedShard checks one packed shard against the manifest's packing section and the rows read:
// schema, structure of every sequence (packedProblem), the manifest's tokenizer, sums, and that
// every segment holds exactly the ids and mask of the row it names.
func (c *checker) packedShard(ctx context.Context, m *Manifest, s ShardInfo) error {
	f, err := c.open(ctx, s)
	if f == nil {
		return err
	}
	if !c.schemaOK(s.Path, packedSchema, f) {
		return nil
	}
	if v, _ := f.Lookup(MetaPackLength); v != strconv.Itoa(m.Packing.Length) {
		c.add(s.Path, -1, "", fmt.Sprintf("key-value metadata %s is %q, the manifest's packing length is %d", MetaPackLength, v, m.Packing.Length))
	}
	rows, tokens, learned, err := scanShard(ctx, c, s.Path, f, func(i int64, p *schemas.PackedRow) (int64, int64) {
		c.packed(s.Path, i, p, m)
		return int64(p.NumTokens), tokenize.LearnedTokens(p.LossMask)
	})
	if rows < 0 || err != nil {
		return err
	}
	if tokens != s.Tokens {
		c.add(s.Path, -1, "num_tokens", fmt.Sprintf("sequences sum to %d tokens, the manifest says %d", tokens, s.Tokens))
	}
	if learned != s.LearnedTokens {
		c.add(s.Path, -1, "loss_mask", fmt.Sprintf("sequences sum to %d learned tokens, the manifest says %d", learned, s.LearnedTokens))
	}
	return nil
}

// packed checks one packed sequence.
func (c *checker) packed(shard string, i int64, p *schemas.PackedRow, m *Manifest) {
	if col, msg := packedProblem(p, m.Packing.Length); col != "" {
		c.add(shard, i, col, msg)
		return
	}
	if want := m.Versions.Tokenizer; want != "" && p.Tokenizer != want {
		c.add(shard, i, "tokenizer", fmt.Sprintf("%q, the manifest's versions say %q", p.Tokenizer, want))
		return
	}
	for k, id := range p.RowIDs {
		end := p.NumTokens
		if k+1 < len(p.SegmentStarts) {
			end = p.SegmentStarts[k+1]
		}
		want, ok := c.members[id]
		if !ok {
			c.add(shard, i, "row_ids", fmt.Sprintf("segment %d names row %q, which is in no shard of the dataset", k, id))
			return
		}
		start := p.SegmentStarts[k]
		if segmentDigest(p.InputIDs[start:end], p.LossMask[start:end]) != want {
			c.add(shard, i, "input_ids", fmt.Sprintf("segment %d (tokens %d to %d) differs from row %q", k, start, end, id))
			return
		}
	}
	for k := p.NumTokens; k < int32(len(p.InputIDs)); k++ {
		if p.InputIDs[k] != m.Packing.PadID {
			c.add(shard, i, "input_ids", fmt.Sprintf("padding position %d holds %d, the pad id is %d", k, p.InputIDs[k], m.Packing.PadID))
			return
		}
	}
}

// row checks one row: structure, tokenizer, then the decoded text.
func (c *checker) row(shard string, i int64, r *schemas.Row, m *Manifest) {
	if col, msg := rowProblem(r); col != "" {
		c.add(shard, i, col, msg)
		return
	}
	if want := m.Versions.Tokenizer; want != "" && r.Tokenizer != want {
		c.add(shard, i, "tokenizer", fmt.Sprintf("%q, the manifest's versions say %q", r.Tokenizer, want))
		return
	}
	tok, ok := c.toks[r.Tokenizer]
	if !ok {
		if c.bad[r.Tokenizer] {
			return
		}
		var err error
		if c.lookup == nil {
			err = errors.New("no tokenizer lookup given")
		} else {
			tok, err = c.lookup(r.Tokenizer)
		}
		if err != nil {
			c.bad[r.Tokenizer] = true
			c.add(shard, i, "tokenizer", fmt.Sprintf("cannot load tokenizer %q to decode input_ids: %v", r.Tokenizer, err))
			return
		}
		c.toks[r.Tokenizer] = tok
	}
	text, err := tok.Decode(r.InputIDs)
	if err != nil {
		c.add(shard, i, "input_ids", fmt.Sprintf("do not decode with %s: %v", r.Tokenizer, err))
		return
	}
	if text != r.Text {
		// A normalizing tokenizer (NFC for Qwen) decodes to the normalized text.
		if n, ok := tok.(interface{ Normalize(string) string }); ok && text == n.Normalize(r.Text) {
			return
		}
		c.add(shard, i, "text", "differs from decode(input_ids) "+firstDiff(r.Text, text))
	}
}

// rowProblem returns the column and message of the first structural problem of r (see CheckRow), or
// "" if there is none.
func rowProblem(r *schemas.Row) (column, msg string) {
	switch {
	case r.Tokenizer == "":
		return "tokenizer", "empty"
	case len(r.InputIDs) != int(r.NumTokens):
		return "input_ids", fmt.Sprintf("%d ids, num_tokens says %d", len(r.InputIDs), r.NumTokens)
	case len(r.LossMask) != int(r.NumTokens):
		return "loss_mask", fmt.Sprintf("%d entries, num_tokens says %d", len(r.LossMask), r.NumTokens)
	}
	if learned := tokenize.LearnedTokens(r.LossMask); learned != int64(r.NumLearned) {
		return "num_learned", fmt.Sprintf("%d, loss_mask has %d true entries", r.NumLearned, learned)
	}
	switch {
	case r.Level == "function" && !schemas.IsInputSource(r.InputSource):
		return "input_source", fmt.Sprintf("%.60q at function level, want one of %s", r.InputSource, strings.Join(schemas.InputSources, ", "))
	case r.Level != "function" && r.InputSource != "":
		return "input_source", fmt.Sprintf("%.60q at %.40q level, want empty", r.InputSource, r.Level)
	}
	return "", ""
}

// firstDiff describes where two strings first differ, with a short quoted excerpt of each.
func firstDiff(want, got string) string {
	n := min(len(want), len(got))
	i := 0
	for i < n && want[i] == got[i] {
		i++
	}
	for i > 0 && !utf8.RuneStart(want[i]) {
		i--
	}
	excerpt := func(s string) string {
		s = s[min(i, len(s)):]
		if len(s) > 40 {
			s = s[:40]
			for len(s) > 0 && !utf8.ValidString(s) {
				s = s[:len(s)-1]
			}
			return fmt.Sprintf("%q…", s)
		}
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("at byte %d: text has %s, decoded has %s (lengths %d and %d)", i, excerpt(want), excerpt(got), len(want), len(got))
}

// schemaError is a difference between a file's Parquet schema and the expected one.
type schemaError struct{ column, msg string }

func (e *schemaError) Error() string { return "column " + e.column + ": " + e.msg }

// expectedSchema is the Parquet schema of every shard.
var expectedSchema = parquet.SchemaOf(schemas.Row{})

// packedSchema is the Parquet schema of every packed shard.
var packedSchema = parquet.SchemaOf(schemas.PackedRow{})

// SchemaColumn describes one node of a Parquet schema (a column or a group) in a form two Parquet
// libraries can be compared in.
type SchemaColumn struct {
	// Path is the node's dotted path, e.g. input_ids.list.element.
	Path string
	// Repetition is required, optional or repeated.
	Repetition string
	// Physical is the physical type of a leaf (INT32, BYTE_ARRAY, …), "group" for a group.
	Physical string
	// Logical is the logical type (STRING, LIST, TIMESTAMP(isAdjustedToUTC=true,unit=MICROS), …),
	// empty if none.
	Logical string
}

// DescribeSchema flattens a parquet-go schema into its nodes in depth-first order.
func DescribeSchema(s *parquet.Schema) []SchemaColumn {
	var out []SchemaColumn
	var walk func(prefix string, fields []parquet.Field)
	walk = func(prefix string, fields []parquet.Field) {
		for _, f := range fields {
			p := f.Name()
			if prefix != "" {
				p = prefix + "." + p
			}
			col := SchemaColumn{Path: p, Repetition: "required", Physical: "group"}
			switch {
			case f.Optional():
				col.Repetition = "optional"
			case f.Repeated():
				col.Repetition = "repeated"
			}
			t := f.Type()
			if f.Leaf() {
				col.Physical = t.Kind().String()
			}
			if lt := t.LogicalType(); lt != nil {
				col.Logical = lt.String()
			}
			out = append(out, col)
			if !f.Leaf() {
				walk(p, f.Fields())
			}
		}
	}
	walk("", s.Fields())
	return out
}

// compareSchema returns a *schemaError naming the first column where got differs from the expected
// schema.
func compareSchema(got *parquet.Schema) error { return compareSchemaTo(expectedSchema, got) }

// compareSchemaTo is compareSchema against the schema expected.
func compareSchemaTo(expected, got *parquet.Schema) error {
	return compareColumns(DescribeSchema(expected), DescribeSchema(got))
}

// compareColumns is compareSchemaTo on described schemas.
func compareColumns(want, have []SchemaColumn) error {
	for i := range max(len(want), len(have)) {
		switch {
		case i >= len(have):
			return &schemaError{want[i].Path, "missing from the file's schema"}
		case i >= len(want):
			return &schemaError{have[i].Path, "not in the expected schema"}
		case want[i] != have[i]:
			if want[i].Path != have[i].Path {
				return &schemaError{want[i].Path, fmt.Sprintf("expected here, the file has %s", have[i].Path)}
			}
			return &schemaError{want[i].Path, fmt.Sprintf("is %s %s %s in the file, want %s %s %s",
				have[i].Repetition, have[i].Physical, have[i].Logical, want[i].Repetition, want[i].Physical, want[i].Logical)}
		}
	}
	return nil
}
