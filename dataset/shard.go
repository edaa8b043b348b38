package dataset

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/ndtrace/ndtrace/store"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/ndtrace/ndtrace/schemas"
)

// Shard layout and row-group sizing.
//
// A row group is the unit a training data loader reads and shuffles. Rows average ~2k tokens and
// ~8 KB of text (~16 KB in memory), so MaxRowsPerRowGroup rows make a ~16 MB row group (~4 MB on
// disk with zstd): big enough for sequential reads from object storage, small enough that a loader
// holding a few row groups per worker stays in memory. MaxRowGroupBytes caps row groups of unusually
// long rows. Pages of PageSize bytes (uncompressed) keep column index granularity fine without
// making pages so small that headers dominate.
const (
	// ShardDir is the folder of the shards (the trajectory rows), relative to the dataset root:
	// the dataset card's default configuration, so a glob over it (data/**/*.parquet) reads every
	// row and nothing else (docs/dataset.md, "Layout").
	ShardDir = "data"
	// LegacyShardDir is where datasets written before the data/ layout keep their shards; their
	// manifests name shards there, and every reader still accepts them.
	LegacyShardDir = "shards"
	// PoolDir holds every version's shards, each written once under its batch's name and never
	// moved: pool/data/ the rows, pool/packed/ the packed sequences. Manifests name the shards
	// there; data/ and packed/ hold copies (hard links in a local folder) of the head's shards
	// only, made by Publish (docs/dataset.md, "Layout").
	PoolDir = "pool"
	// ShardExt is the extension of a shard file.
	ShardExt = ".parquet"
	// ShardContentType is the content type shards are stored with.
	ShardContentType = "application/vnd.apache.parquet"

	// MaxRowsPerRowGroup is the most rows a row group holds.
	MaxRowsPerRowGroup = 1024
	// MaxRowGroupBytes is the most uncompressed bytes (estimated: text, ids, mask and strings) a row
	// group holds; a row group always holds at least one row.
	MaxRowGroupBytes = 64 << 20
	// PageSize is the page buffer size: a column's data page is cut when it reaches this many
	// uncompressed bytes.
	PageSize = 1 << 20
)

// Keys of the Parquet key-value metadata of every shard.
const (
	MetaFormat        = "ndtrace.format"
	MetaSchemaVersion = "ndtrace.schema_version"
	MetaArrowSchema   = "ARROW:schema"
)

// ShardInfo describes one written shard; it is the shard's entry in the manifest.
type ShardInfo struct {
	// Path is the shard's key relative to the dataset root: pool/data/<name>.parquet
	// (pool/packed/<name>.parquet for a packed shard) as the pipeline writes them; data/<name>.parquet
	// (packed/<name>.parquet) in datasets written before the pool, shards/<name>.parquet in datasets
	// written before the data/ layout.
	Path string `json:"path"`
	// Rows is the number of rows.
	Rows int64 `json:"rows"`
	// Tokens is the sum of the rows' num_tokens; LearnedTokens the sum of their num_learned.
	Tokens        int64 `json:"tokens"`
	LearnedTokens int64 `json:"learned_tokens"`
	// Bytes is the file's size; SHA256 the hex SHA-256 of its content.
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

var shardNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)

// CheckShardName checks a shard name: 1–200 characters of letters, digits, '.', '_' and '-', starting
// with a letter or digit, no slash. The convention is part-NNNNN, where NNNNN is the index of the input
// partition the rows come from (for example part-00012 for the 13th corpus partition), optionally
// qualified (fn-part-00012, repo-part-00003); never a counter or the clock, so that a retried partition
// lands on the same key.
func CheckShardName(name string) error {
	if !shardNameRE.MatchString(name) {
		return fmt.Errorf("dataset: bad shard name %q (want letters, digits, '.', '_', '-', e.g. part-00012)", name)
	}
	return nil
}

// ShardPath returns the key of shard name relative to the dataset root: data/<name>.parquet, where
// WriteShard writes it (a dataset written before the pool, or by the Go API directly).
func ShardPath(name string) string { return ShardDir + "/" + name + ShardExt }

// PoolShardPath returns the key of shard name in the pool: pool/data/<name>.parquet.
func PoolShardPath(name string) string { return PoolDir + "/" + ShardPath(name) }

// shardPathRE matches the keys ShardPath and PoolShardPath produce, and those of the legacy layout
// (shards/).
var shardPathRE = regexp.MustCompile(`^(?:` + ShardDir + `|` + LegacyShardDir + `|` + PoolDir + `/` + ShardDir + `)/[A-Za-z0-9][A-Za-z0-9._-]{0,199}\` + ShardExt + `$`)

// movable reports whether the shard at p is one Publish may have moved into the pool: a shard in
// data/ or packed/ itself, as datasets written before the pool have them. It is then stored at
// PoolDir/p.
func movable(p string) bool {
	return strings.HasPrefix(p, ShardDir+"/") || strings.HasPrefix(p, PackedDir+"/")
}

// readStored reads the shard at path: there, or (for a shard Publish moved, see movable) in the
// pool. A shard in neither gives the error of the read at path.
func readStored(ctx context.Context, st *store.Store, path string) ([]byte, error) {
	data, err := st.ReadAll(ctx, path)
	if store.IsNotExist(err) && movable(path) {
		if pooled, perr := st.ReadAll(ctx, PoolDir+"/"+path); perr == nil {
			return pooled, nil
		}
	}
	return data, err
}

// ViewPath returns where the head's copy of the shard (or packed shard) at p is: data/<name> for a
// shard in the pool, packed/<name> for a packed shard there; a shard outside the pool (data/,
// packed/ or shards/, as datasets written before the pool have them) is its own copy.
func ViewPath(p string) string {
	if rest, ok := strings.CutPrefix(p, PoolDir+"/"); ok {
		return rest
	}
	return p
}

// CheckRow checks the structural invariants of a row that need no tokenizer: len(input_ids) ==
// len(loss_mask) == num_tokens, num_learned counts the true entries of loss_mask, and the tokenizer
// is named. It returns an error naming the column.
func CheckRow(r *schemas.Row) error {
	if col, msg := rowProblem(r); col != "" {
		return fmt.Errorf("column %s: %s", col, msg)
	}
	return nil
}

// rowBytes estimates the uncompressed size of a row for row-group sizing.
func rowBytes(r *schemas.Row) int {
	return len(r.Text) + 4*len(r.InputIDs) + len(r.LossMask) + len(r.ID) + len(r.Level) + len(r.RepoURL) +
		len(r.Commit) + len(r.Path) + len(r.QualName) + len(r.SourceID) + len(r.Direction) + len(r.Policy) +
		len(r.Exit) + len(r.TracerVersion) + len(r.PipelineVersion) + len(r.Tokenizer) + 128
}

// groupRows splits rows into row groups of at most maxRows rows and maxBytes estimated bytes (at
// least one row each) and returns their sizes.
func groupRows(rows []schemas.Row, maxRows, maxBytes int) []int {
	var groups []int
	n, size := 0, 0
	for i := range rows {
		b := rowBytes(&rows[i])
		if n > 0 && (n >= maxRows || size+b > maxBytes) {
			groups = append(groups, n)
			n, size = 0, 0
		}
		n++
		size += b
	}
	if n > 0 {
		groups = append(groups, n)
	}
	return groups
}

// writerOptions are the Parquet writer settings of every shard. Nothing in them depends on the clock
// or the environment, so the same rows always encode to the same bytes.
func writerOptions() []parquet.WriterOption {
	return []parquet.WriterOption{
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedDefault}),
		parquet.PageBufferSize(PageSize),
		parquet.MaxRowsPerRowGroup(MaxRowsPerRowGroup),
		// Point look-ups by row id (DuckDB, Spark and pyarrow use Parquet bloom filters).
		parquet.BloomFilters(parquet.SplitBlockFilter(10, "id")),
		parquet.KeyValueMetadata(MetaFormat, Format),
		parquet.KeyValueMetadata(MetaSchemaVersion, schemas.RowSchemaVersion),
		parquet.KeyValueMetadata(MetaArrowSchema, arrowSchemaMetadata()),
	}
}

// EncodeShard encodes rows as one Parquet file (see the package constants for the layout) and returns
// its bytes and info (Path left empty). Rows are written in the order given; the result is a pure
// function of rows. It fails if a row breaks CheckRow or if rows is empty.
func EncodeShard(rows []schemas.Row) ([]byte, ShardInfo, error) {
	data, info, err := encodeShard(rows)
	if err != nil {
		return nil, ShardInfo{}, fmt.Errorf("dataset: encode shard: %w", err)
	}
	return data, info, nil
}

func encodeShard(rows []schemas.Row) ([]byte, ShardInfo, error) {
	if len(rows) == 0 {
		return nil, ShardInfo{}, errors.New("a shard needs at least one row (skip empty partitions)")
	}
	info := ShardInfo{Rows: int64(len(rows))}
	for i := range rows {
		if err := CheckRow(&rows[i]); err != nil {
			return nil, ShardInfo{}, fmt.Errorf("row %d (id %q): %w", i, rows[i].ID, err)
		}
		info.Tokens += int64(rows[i].NumTokens)
		info.LearnedTokens += int64(rows[i].NumLearned)
	}
	data, err := encodeParquet(rows, groupRows(rows, MaxRowsPerRowGroup, MaxRowGroupBytes), writerOptions()...)
	if err != nil {
		return nil, ShardInfo{}, err
	}
	sum := sha256.Sum256(data)
	info.Bytes = int64(len(data))
	info.SHA256 = hex.EncodeToString(sum[:])
	return data, info, nil
}

// encodeParquet writes rows as a Parquet file with a row group per entry of groups (their sizes).
func encodeParquet[T any](rows []T, groups []int, opts ...parquet.WriterOption) ([]byte, error) {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, opts...)
	start := 0
	for _, n := range groups {
		if _, err := w.Write(rows[start : start+n]); err != nil {
			return nil, err
		}
		if err := w.Flush(); err != nil {
			return nil, err
		}
		start += n
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteShard writes rows as the shard data/<name>.parquet of the dataset in store (see EncodeShard
// and CheckShardName). It is idempotent: the write is conditional (IfNotExist) and carries the
// file's sha256 and row count as object metadata; if the shard already exists with the same sha256
// WriteShard returns its info without writing, and if it exists with other content it fails with an
// error wrapping ErrConflict that names the shard. The shard is encoded in memory first (the checksum
// must be known before the upload starts), then uploaded in one write: a failed or cancelled write
// leaves no partial object. A shard is not part of the dataset until a manifest names it.
func WriteShard(ctx context.Context, st *store.Store, name string, rows []schemas.Row) (ShardInfo, error) {
	return writeShard(ctx, st, name, ShardPath, rows)
}

// WritePoolShard is WriteShard into the pool: the shard pool/data/<name>.parquet, as the pipeline
// writes its batches' shards (Publish copies the head's into data/).
func WritePoolShard(ctx context.Context, st *store.Store, name string, rows []schemas.Row) (ShardInfo, error) {
	return writeShard(ctx, st, name, PoolShardPath, rows)
}

func writeShard(ctx context.Context, st *store.Store, name string, at func(string) string, rows []schemas.Row) (ShardInfo, error) {
	if err := CheckShardName(name); err != nil {
		return ShardInfo{}, err
	}
	data, info, err := encodeShard(rows)
	if err != nil {
		return ShardInfo{}, fmt.Errorf("dataset: shard %s: %w", name, err)
	}
	info.Path = at(name)
	return info, putShard(ctx, st, info, data, map[string]string{
		"tokens":         strconv.FormatInt(info.Tokens, 10),
		"learned_tokens": strconv.FormatInt(info.LearnedTokens, 10),
	})
}

// putShard stores an encoded shard at info.Path once, with its row count, sha256 and schema version
// (and md) as object metadata; other content already under the key is an ErrConflict naming it.
func putShard(ctx context.Context, st *store.Store, info ShardInfo, data []byte, md map[string]string) error {
	meta := map[string]string{"rows": strconv.FormatInt(info.Rows, 10), "schema_version": schemas.RowSchemaVersion}
	for k, v := range md {
		meta[k] = v
	}
	if _, err := st.PutOnce(ctx, info.Path, data, ShardContentType, meta); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("dataset: shard %s in %s already exists with other content (sha256 %s): %w",
				info.Path, st.URL(), info.SHA256, store.ErrConflict)
		}
		return err
	}
	return nil
}

// ReadRows reads up to limit rows (all if limit <= 0) of the shard at path (relative to the dataset
// root, as in the manifest).
func ReadRows(ctx context.Context, st *store.Store, shardPath string, limit int) ([]schemas.Row, error) {
	if !shardPathRE.MatchString(shardPath) {
		return nil, fmt.Errorf("dataset: bad shard path %q (want %s)", shardPath, ShardPath("NAME"))
	}
	return readShard[schemas.Row](ctx, st, "shard", shardPath, expectedSchema, limit)
}

// readShard reads up to limit rows (all if limit <= 0) of type T from the shard at path, after
// checking that its schema is want; kind names the shard in errors.
func readShard[T any](ctx context.Context, st *store.Store, kind, path string, want *parquet.Schema, limit int) ([]T, error) {
	data, err := readStored(ctx, st, path)
	if err != nil {
		return nil, err
	}
	f, err := openParquet(data)
	if err != nil {
		return nil, fmt.Errorf("dataset: %s %s: %w", kind, path, err)
	}
	if err := compareSchemaTo(want, f.Schema()); err != nil {
		return nil, fmt.Errorf("dataset: %s %s: %w", kind, path, err)
	}
	var rows []T
	err = eachOf(f, func(_ int64, r *T) error {
		if limit > 0 && len(rows) >= limit {
			return errStop
		}
		rows = append(rows, *r)
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, fmt.Errorf("dataset: %s %s: %w", kind, path, err)
	}
	return rows, nil
}

// errStop ends an eachRow loop early without an error.
var errStop = errors.New("stop")

// openParquet opens an in-memory Parquet file; malformed files give an error, never a panic.
func openParquet(data []byte) (f *parquet.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed Parquet file: %v", p)
		}
	}()
	f, err = parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("malformed Parquet file: %w", err)
	}
	return f, nil
}

// eachRow calls fn for every row of f in order, with the row's index in the file. Each row is freshly
// allocated, so fn may keep it. A malformed file gives an error, never a panic.
func eachRow(f *parquet.File, fn func(i int64, r *schemas.Row) error) error { return eachOf(f, fn) }

// eachOf is eachRow for any row type.
func eachOf[T any](f *parquet.File, fn func(i int64, r *T) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed Parquet data: %v", p)
		}
	}()
	r := parquet.NewGenericReader[T](f)
	defer r.Close()
	buf := make([]T, 64)
	var i int64
	for {
		// Zeroed so that the reader allocates fresh slices: rows handed to fn never alias each other.
		clear(buf)
		n, rerr := r.Read(buf)
		for k := 0; k < n; k++ {
			if err := fn(i, &buf[k]); err != nil {
				return err
			}
			i++
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("read row %d: %w", i, rerr)
		}
		if n == 0 {
			return fmt.Errorf("read row %d: no progress", i)
		}
	}
}
