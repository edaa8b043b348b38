package dataset

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ndtrace/ndtrace/store"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ndtrace/ndtrace/schemas"
)

// The manifest: manifest.json at the dataset root, written last. It is the commit point of a dataset:
// readers never list the store, they read the manifest and only the shards it names, so a dataset
// whose writer died before the manifest is simply absent, and stray shards (a retry that wrote under
// another name, a run that never finished) are invisible.
const (
	// ManifestKey is the manifest's key relative to the dataset root.
	ManifestKey = "manifest.json"
	// Format is the manifest's format field.
	Format = "ndtrace-dataset"
	// FormatVersion is the version of the manifest's layout; any change to its fields bumps it.
	// Version 2 added the packing section; version 3 the version's id, its rejects, dedup keys
	// and statistics by sha256, and its failed batches. Older manifests are still read.
	FormatVersion = 3
	// MaxManifestBytes is the largest manifest ReadManifest accepts (~250 bytes per shard).
	MaxManifestBytes = 64 << 20
	// manifestContentType is the content type the manifest is stored with.
	manifestContentType = "application/json"
)

// Manifest describes a committed dataset. Fields marked "computed" are set by WriteManifest.
type Manifest struct {
	// Format is always "ndtrace-dataset" (computed).
	Format string `json:"format"`
	// FormatVersion is the manifest layout's version (computed).
	FormatVersion int `json:"format_version"`
	// SchemaVersion is the rows' schema version, schemas.RowSchemaVersion (computed).
	SchemaVersion string `json:"schema_version"`
	// CreatedAt is the dataset's creation time, given by the caller from its configuration (never
	// the clock), the same as every row's created_at. It is stored in UTC, to the microsecond.
	CreatedAt time.Time `json:"created_at"`
	// Config is the caller's configuration, any JSON value (null if none); it is stored with its
	// object keys sorted.
	Config json.RawMessage `json:"config"`
	// Versions records what produced the dataset.
	Versions Versions `json:"versions"`
	// Shards lists the dataset's shards, sorted by path (sorted by WriteManifest). A version with a
	// ShardIndex lists none here: read them with AllShards.
	Shards []ShardInfo `json:"shards"`
	// ShardIndex are the pages that list the shards of a format 3 version, each a JSON Lines object
	// of ShardInfo sorted by path, with its totals: a manifest stays small at a million shards.
	ShardIndex []ShardPage `json:"shard_index,omitempty"`
	// Totals sums the shards (computed).
	Totals Totals `json:"totals"`
	// Counts holds the caller's counters: rejects by reason, rows dropped as too long, and so on.
	Counts schemas.Counts `json:"counts,omitempty"`
	// Packing describes the dataset's packed shards, if it was written with packing on.
	Packing *Packing `json:"packing,omitempty"`
	// Version names the version (format 3): its objects live under VersionPrefix(Version).
	Version string `json:"version,omitempty"`
	// Rejects are the objects that hold the version's rejects, JSON Lines of schemas.Reject
	// (format 3; older versions have rejects.jsonl at the root).
	Rejects []ObjectRef `json:"rejects,omitempty"`
	// DedupKeys are the version's dedup key shards, sorted runs by first byte (format 3; older
	// versions have dedup_keys.json at the root).
	DedupKeys []ObjectRef `json:"dedup_keys,omitempty"`
	// Repos are the objects that hold the version's repository yield reports, JSON Lines of
	// schemas.RepoYield (format 3; absent when the dataset has no repository source).
	Repos []ObjectRef `json:"repos,omitempty"`
	// Stats and StatsParquet are the version's statistics (stats.json and stats.parquet, format 3),
	// computed from its batches' statistics when it was committed.
	Stats        *ObjectRef `json:"stats,omitempty"`
	StatsParquet *ObjectRef `json:"stats_parquet,omitempty"`
	// FailedBatches lists the batches that failed on every attempt: their items are rejects of
	// class batch_failed, and ndtrace retry re-runs them into a new version.
	FailedBatches []FailedBatch `json:"failed_batches,omitempty"`
}

// ObjectRef names a stored object of a version by key, size and content: a reader checks the
// sha256 of what it reads.
type ObjectRef struct {
	Key    string `json:"key"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
	// Count is how many records the object holds, where that means something (rejects).
	Count int64 `json:"count,omitempty"`
}

// ShardPage is one page of a shard index: an object of JSON Lines of ShardInfo, sorted by path,
// and the totals of its shards.
type ShardPage struct {
	Key    string `json:"key"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
	Totals Totals `json:"totals"`
}

// FailedBatch is a batch a version was committed without.
type FailedBatch struct {
	Batch  string `json:"batch"`
	Items  int    `json:"items"`
	Reason string `json:"reason"`
}

// Packing is the manifest's section on packed shards: the same trajectories as the shards, laid end
// to end into sequences of exactly Length tokens (see Pack and schemas.PackedRow).
type Packing struct {
	// Length is every sequence's length in tokens; PadID the id its padding holds.
	Length int   `json:"length"`
	PadID  int32 `json:"pad_id"`
	// Shards lists the packed shards, sorted by path: Rows counts sequences, Tokens their real
	// (non-padding) tokens (sorted by WriteManifest). With an Index, none are listed here.
	Shards []ShardInfo `json:"shards"`
	// Index are the pages that list the packed shards (format 3), as Manifest.ShardIndex.
	Index []ShardPage `json:"index,omitempty"`
	// Totals sums the packed shards (computed).
	Totals Totals `json:"totals"`
}

// Versions records the versions of what produced a dataset; every row carries the same values in
// tracer_version, pipeline_version and tokenizer.
type Versions struct {
	Tracer    string `json:"tracer"`
	Pipeline  string `json:"pipeline"`
	Tokenizer string `json:"tokenizer"`
}

// Totals sums a dataset's shards.
type Totals struct {
	Rows          int64 `json:"rows"`
	Tokens        int64 `json:"tokens"`
	LearnedTokens int64 `json:"learned_tokens"`
	Shards        int64 `json:"shards"`
}

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// normalize fills the computed fields of m: format, versions, UTC microsecond created_at, sorted
// shards and totals, canonical config.
func (m *Manifest) normalize() error {
	m.Format = Format
	// A manifest without the fields of format 3 is written as format 2, readable by older ndtrace.
	m.FormatVersion = 2
	if m.Version != "" || len(m.Rejects) > 0 || len(m.DedupKeys) > 0 || len(m.Repos) > 0 || len(m.FailedBatches) > 0 || len(m.ShardIndex) > 0 || m.Stats != nil {
		m.FormatVersion = FormatVersion
	}
	m.SchemaVersion = schemas.RowSchemaVersion
	m.CreatedAt = m.CreatedAt.UTC().Truncate(time.Microsecond)
	m.Shards = slices.Clone(m.Shards)
	slices.SortFunc(m.Shards, func(a, b ShardInfo) int { return strings.Compare(a.Path, b.Path) })
	m.ShardIndex = slices.Clone(m.ShardIndex)
	slices.SortFunc(m.ShardIndex, func(a, b ShardPage) int { return strings.Compare(a.Key, b.Key) })
	t, err := sumAll(m.Shards, m.ShardIndex)
	if err != nil {
		return err
	}
	m.Totals = t
	if m.Packing != nil {
		p := *m.Packing
		p.Shards = slices.Clone(p.Shards)
		slices.SortFunc(p.Shards, func(a, b ShardInfo) int { return strings.Compare(a.Path, b.Path) })
		p.Index = slices.Clone(p.Index)
		slices.SortFunc(p.Index, func(a, b ShardPage) int { return strings.Compare(a.Key, b.Key) })
		if p.Totals, err = sumAll(p.Shards, p.Index); err != nil {
			return err
		}
		m.Packing = &p
	}
	return nil
}

// sumAll adds up listed shards and the totals of index pages, failing on overflow.
func sumAll(shards []ShardInfo, pages []ShardPage) (Totals, error) {
	t, err := sumShards(shards)
	if err != nil {
		return Totals{}, err
	}
	for _, p := range pages {
		var ok [4]bool
		t.Rows, ok[0] = addInt64(t.Rows, p.Totals.Rows)
		t.Tokens, ok[1] = addInt64(t.Tokens, p.Totals.Tokens)
		t.LearnedTokens, ok[2] = addInt64(t.LearnedTokens, p.Totals.LearnedTokens)
		t.Shards, ok[3] = addInt64(t.Shards, p.Totals.Shards)
		if !ok[0] || !ok[1] || !ok[2] || !ok[3] {
			return Totals{}, errors.New("totals overflow int64")
		}
	}
	return t, nil
}

// sumShards adds up shards, failing on overflow.
func sumShards(shards []ShardInfo) (Totals, error) {
	var t Totals
	for _, s := range shards {
		var ok1, ok2, ok3 bool
		t.Rows, ok1 = addInt64(t.Rows, s.Rows)
		t.Tokens, ok2 = addInt64(t.Tokens, s.Tokens)
		t.LearnedTokens, ok3 = addInt64(t.LearnedTokens, s.LearnedTokens)
		if !ok1 || !ok2 || !ok3 {
			return Totals{}, errors.New("totals overflow int64")
		}
	}
	t.Shards = int64(len(shards))
	return t, nil
}

func addInt64(a, b int64) (int64, bool) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, false
	}
	return a + b, true
}

// check reports the first inconsistency of a manifest: bad format or version, empty schema version,
// zero created_at, a malformed or duplicate shard entry, totals that do not add up, a negative count.
func (m *Manifest) check() error {
	if m.Format != Format {
		return fmt.Errorf("format is %q, want %q", m.Format, Format)
	}
	if m.FormatVersion < 1 || m.FormatVersion > FormatVersion {
		return fmt.Errorf("format_version %d is not supported (this ndtrace reads 1 to %d)", m.FormatVersion, FormatVersion)
	}
	if m.SchemaVersion == "" {
		return errors.New("schema_version is empty")
	}
	if m.CreatedAt.IsZero() {
		return errors.New("created_at is missing")
	}
	if y := m.CreatedAt.UTC().Year(); y < 1 || y > 9999 {
		return fmt.Errorf("created_at %s is out of range", m.CreatedAt.Format(time.RFC3339))
	}
	if err := checkShards("shards", m.Shards, shardPathRE, ShardPath("NAME")); err != nil {
		return err
	}
	if len(m.ShardIndex) > 0 && (len(m.Shards) > 0 || m.FormatVersion < 3) {
		return errors.New("shard_index: only in format_version 3, with no shards listed inline")
	}
	if err := checkPages("shard_index", m.ShardIndex); err != nil {
		return err
	}
	t, err := sumAll(m.Shards, m.ShardIndex)
	if err != nil {
		return err
	}
	if t != m.Totals {
		return fmt.Errorf("totals %+v do not match the sum of the shards %+v", m.Totals, t)
	}
	for k, v := range m.Counts {
		if k == "" || v < 0 {
			return fmt.Errorf("counts: bad entry %q: %d", k, v)
		}
	}
	if p := m.Packing; p != nil {
		if m.FormatVersion < 2 {
			return errors.New("packing: not part of format_version 1")
		}
		if p.Length < 1 || p.Length > MaxPackLength {
			return fmt.Errorf("packing: length %d is not between 1 and %d", p.Length, MaxPackLength)
		}
		if err := checkShards("packing.shards", p.Shards, packedPathRE, PackedShardPath("NAME")); err != nil {
			return err
		}
		if len(p.Index) > 0 && (len(p.Shards) > 0 || m.FormatVersion < 3) {
			return errors.New("packing.index: only in format_version 3, with no shards listed inline")
		}
		if err := checkPages("packing.index", p.Index); err != nil {
			return err
		}
		t, err := sumAll(p.Shards, p.Index)
		if err != nil {
			return err
		}
		if t != p.Totals {
			return fmt.Errorf("packing: totals %+v do not match the sum of the shards %+v", p.Totals, t)
		}
		for _, s := range p.Shards {
			if s.Tokens > s.Rows*int64(p.Length) {
				return fmt.Errorf("packed shard %s: %d tokens do not fit %d sequences of %d", s.Path, s.Tokens, s.Rows, p.Length)
			}
		}
	}
	return nil
}

// checkPages checks the entries of a shard index: a key, a sha256, a size, consistent totals.
func checkPages(field string, pages []ShardPage) error {
	seen := map[string]bool{}
	for i, p := range pages {
		switch {
		case p.Key == "" || seen[p.Key]:
			return fmt.Errorf("%s[%d]: empty or repeated key %q", field, i, p.Key)
		case !sha256RE.MatchString(p.SHA256) || p.Bytes < 1:
			return fmt.Errorf("%s[%d]: bad sha256 %q or size %d", field, i, p.SHA256, p.Bytes)
		case p.Totals.Shards < 1 || p.Totals.Rows < p.Totals.Shards || p.Totals.LearnedTokens > p.Totals.Tokens || p.Totals.LearnedTokens < 0:
			return fmt.Errorf("%s[%d]: inconsistent totals %+v", field, i, p.Totals)
		}
		seen[p.Key] = true
	}
	return nil
}

// checkShards checks the entries of a list of shards (field names it in errors): paths matching re
// (want is an example), no path twice, at least one row, consistent tokens, a size and a sha256.
func checkShards(field string, shards []ShardInfo, re *regexp.Regexp, want string) error {
	seen := make(map[string]bool, len(shards))
	for i, s := range shards {
		switch {
		case !re.MatchString(s.Path):
			return fmt.Errorf("%s[%d]: bad path %q (want %s)", field, i, s.Path, want)
		case seen[s.Path]:
			return fmt.Errorf("shards[%d]: %s is listed twice", i, s.Path)
		case s.Rows < 1:
			return fmt.Errorf("shard %s: rows is %d, want at least 1", s.Path, s.Rows)
		case s.Tokens < 0 || s.LearnedTokens < 0 || s.LearnedTokens > s.Tokens:
			return fmt.Errorf("shard %s: tokens %d and learned_tokens %d are inconsistent", s.Path, s.Tokens, s.LearnedTokens)
		case s.Bytes < 1:
			return fmt.Errorf("shard %s: bytes is %d", s.Path, s.Bytes)
		case !sha256RE.MatchString(s.SHA256):
			return fmt.Errorf("shard %s: sha256 %q is not 64 lowercase hex digits", s.Path, s.SHA256)
		}
		seen[s.Path] = true
	}
	return nil
}

// Marshal returns the manifest's canonical JSON: fields in declaration order, map and config object
// keys sorted, two-space indent, no HTML escaping, a final newline, created_at in UTC. The same
// manifest always gives the same bytes.
func (m *Manifest) Marshal() ([]byte, error) {
	c := *m
	c.CreatedAt = c.CreatedAt.UTC()
	cfg, err := canonicalJSON(c.Config)
	if err != nil {
		return nil, fmt.Errorf("dataset: manifest config: %w", err)
	}
	c.Config = cfg
	if c.Shards == nil {
		c.Shards = []ShardInfo{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(&c); err != nil {
		return nil, fmt.Errorf("dataset: encode manifest: %w", err)
	}
	return buf.Bytes(), nil
}

// canonicalJSON re-encodes a JSON value with sorted object keys and numbers kept as written;
// empty input is null.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("null"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// ParseManifest decodes and checks a manifest: unknown fields, trailing data, a wrong format or an
// unsupported format_version, malformed shard entries and totals that do not add up are errors.
func ParseManifest(data []byte) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("dataset: malformed manifest: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("dataset: malformed manifest: trailing data after the JSON object")
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("dataset: bad manifest: %w", err)
	}
	return &m, nil
}

// ReadManifest reads and checks the manifest of the dataset in store (see ParseManifest). A missing
// manifest (no dataset, or one that was never committed) gives an error for which IsNotExist is true.
func ReadManifest(ctx context.Context, st *store.Store) (*Manifest, error) {
	data, err := st.ReadLimit(ctx, ManifestKey, MaxManifestBytes)
	if err != nil {
		return nil, err
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", ManifestKey, st.URL(), err)
	}
	return m, nil
}

// WriteManifest commits a dataset: it fills m's computed fields (format, versions, totals; shards
// sorted by path; created_at in UTC to the microsecond), checks that every listed shard is stored
// with the listed size and sha256, and writes manifest.json. Call it once, after every WriteShard
// has returned. It is idempotent: committing the same manifest again succeeds, while committing a
// different one over an existing manifest fails with an error wrapping ErrConflict (a committed
// dataset is immutable; write a new one under another prefix). It returns the manifest as written.
func WriteManifest(ctx context.Context, st *store.Store, m Manifest) (*Manifest, error) {
	data, md, err := prepareManifest(ctx, st, &m)
	if err != nil {
		return nil, err
	}
	if _, err := st.PutOnce(ctx, ManifestKey, data, manifestContentType, md); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("dataset: %s is already committed with a different manifest (a committed dataset is immutable): %w", st.URL(), store.ErrConflict)
		}
		return nil, err
	}
	// Return the manifest as a reader sees it (config canonical).
	out, err := ParseManifest(data)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// prepareManifest fills m's computed fields, checks it and the shards it lists, and returns its
// bytes and object metadata.
func prepareManifest(ctx context.Context, st *store.Store, m *Manifest) ([]byte, map[string]string, error) {
	if err := m.normalize(); err != nil {
		return nil, nil, fmt.Errorf("dataset: manifest: %w", err)
	}
	if err := m.check(); err != nil {
		return nil, nil, fmt.Errorf("dataset: manifest: %w", err)
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, nil, err
	}
	if len(data) > MaxManifestBytes {
		// Readers refuse it: fail before anything is committed.
		return nil, nil, fmt.Errorf("dataset: manifest: %d bytes, more than readers accept (%d): list the shards in a shard index", len(data), MaxManifestBytes)
	}
	if err := CheckStored(ctx, st, m.Shards); err != nil {
		return nil, nil, err
	}
	if m.Packing != nil {
		if err := CheckStored(ctx, st, m.Packing.Shards); err != nil {
			return nil, nil, err
		}
	}
	return data, map[string]string{"format_version": strconv.Itoa(m.FormatVersion)}, nil
}

// CheckStored checks, a few at a time, that every shard is stored with its listed size and sha256.
func CheckStored(ctx context.Context, st *store.Store, shards []ShardInfo) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, s := range shards {
		g.Go(func() error {
			ok, err := st.Holds(ctx, s.Path, s.Bytes, s.SHA256)
			if store.IsNotExist(err) && movable(s.Path) {
				ok, err = st.Holds(ctx, PoolDir+"/"+s.Path, s.Bytes, s.SHA256)
			}
			if store.IsNotExist(err) {
				return fmt.Errorf("dataset: manifest names %s, which is not in %s", s.Path, st.URL())
			}
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("dataset: manifest names %s with %d bytes and sha256 %s, but the stored shard differs", s.Path, s.Bytes, s.SHA256)
			}
			return nil
		})
	}
	return g.Wait()
}

// hexSHA256 is a helper for tests and validation.
func hexSHA256(sum [32]byte) string { return hex.EncodeToString(sum[:]) }
