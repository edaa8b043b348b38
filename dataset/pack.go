package dataset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
	"github.com/ndtrace/ndtrace/tokenize"
)

// Pack lays rows end to end into sequences of exactly seqLen tokens, in order: a row goes into the
// current sequence if it fits, otherwise it starts a new one; the rest of each sequence is padID with
// a false mask. A row is never split; a row longer than seqLen is returned in tooLong, not packed. The
// same rows always give the same sequences.
func Pack(rows []schemas.Row, seqLen int, padID int32) (packed []schemas.PackedRow, tooLong []schemas.Row, err error) {
	if seqLen <= 0 {
		return nil, nil, fmt.Errorf("dataset: packing length %d", seqLen)
	}
	var cur *schemas.PackedRow
	flush := func() {
		if cur == nil {
			return
		}
		cur.NumTokens = int32(len(cur.InputIDs))
		cur.NumPadding = int32(seqLen - len(cur.InputIDs))
		for len(cur.InputIDs) < seqLen {
			cur.InputIDs = append(cur.InputIDs, padID)
			cur.LossMask = append(cur.LossMask, false)
		}
		cur.ID = packedID(cur.RowIDs)
		packed = append(packed, *cur)
		cur = nil
	}
	for _, r := range rows {
		if len(r.InputIDs) != len(r.LossMask) {
			return nil, nil, fmt.Errorf("dataset: row %s has %d ids and %d mask entries", r.ID, len(r.InputIDs), len(r.LossMask))
		}
		if len(r.InputIDs) > seqLen {
			tooLong = append(tooLong, r)
			continue
		}
		if cur != nil && (len(cur.InputIDs)+len(r.InputIDs) > seqLen || cur.Tokenizer != r.Tokenizer) {
			flush()
		}
		if cur == nil {
			cur = &schemas.PackedRow{InputIDs: make([]int32, 0, seqLen), LossMask: make([]bool, 0, seqLen), Tokenizer: r.Tokenizer}
		}
		cur.SegmentStarts = append(cur.SegmentStarts, int32(len(cur.InputIDs)))
		cur.RowIDs = append(cur.RowIDs, r.ID)
		cur.InputIDs = append(cur.InputIDs, r.InputIDs...)
		cur.LossMask = append(cur.LossMask, r.LossMask...)
	}
	flush()
	return packed, tooLong, nil
}

// packedID is a packed sequence's id: the hex SHA-256 of its rows' ids, each followed by a zero byte.
func packedID(rowIDs []string) string {
	h := sha256.New()
	for _, id := range rowIDs {
		h.Write([]byte(id))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Packed shards: the optional fixed-length training sequences of a dataset (schemas.PackedRow), kept
// beside the per-trajectory shards and listed in the manifest's packing section.
const (
	// PackedDir is the folder of the packed shards, relative to the dataset root.
	PackedDir = "packed"
	// MetaPackLength is the key-value metadata key of a packed shard's sequence length.
	MetaPackLength = "ndtrace.pack_length"
	// MaxPackLength is the longest sequence Pack accepts.
	MaxPackLength = schemas.MaxPackLength
)

// PackedShardPath returns the key of packed shard name relative to the dataset root:
// packed/<name>.parquet.
func PackedShardPath(name string) string { return PackedDir + "/" + name + ShardExt }

// PoolPackedShardPath returns the key of packed shard name in the pool: pool/packed/<name>.parquet.
func PoolPackedShardPath(name string) string { return PoolDir + "/" + PackedShardPath(name) }

// packedPathRE matches the keys PackedShardPath and PoolPackedShardPath produce.
var packedPathRE = regexp.MustCompile(`^(?:` + PoolDir + `/)?` + PackedDir + `/[A-Za-z0-9][A-Za-z0-9._-]{0,199}\` + ShardExt + `$`)

// packedProblem returns the first structural problem of a packed sequence of length seqLen: the
// column concerned and a message, or "" if there is none.
func packedProblem(p *schemas.PackedRow, seqLen int) (column, msg string) {
	switch {
	case len(p.InputIDs) != seqLen:
		return "input_ids", fmt.Sprintf("%d ids, the packing length is %d", len(p.InputIDs), seqLen)
	case len(p.LossMask) != seqLen:
		return "loss_mask", fmt.Sprintf("%d entries, the packing length is %d", len(p.LossMask), seqLen)
	case int(p.NumTokens)+int(p.NumPadding) != seqLen || p.NumTokens < 1 || p.NumPadding < 0:
		return "num_tokens", fmt.Sprintf("%d tokens and %d padding do not make the packing length %d", p.NumTokens, p.NumPadding, seqLen)
	case len(p.SegmentStarts) == 0 || len(p.SegmentStarts) != len(p.RowIDs):
		return "segment_starts", fmt.Sprintf("%d segment starts for %d row ids", len(p.SegmentStarts), len(p.RowIDs))
	case p.SegmentStarts[0] != 0:
		return "segment_starts", fmt.Sprintf("the first segment starts at %d, not 0", p.SegmentStarts[0])
	case p.Tokenizer == "":
		return "tokenizer", "empty"
	}
	for i := 1; i < len(p.SegmentStarts); i++ {
		if p.SegmentStarts[i] <= p.SegmentStarts[i-1] || p.SegmentStarts[i] >= p.NumTokens {
			return "segment_starts", fmt.Sprintf("segment %d starts at %d, after %d and before %d tokens are required", i, p.SegmentStarts[i], p.SegmentStarts[i-1], p.NumTokens)
		}
	}
	for i := int(p.NumTokens); i < seqLen; i++ {
		if p.LossMask[i] {
			return "loss_mask", fmt.Sprintf("padding position %d is learned", i)
		}
	}
	if want := packedID(p.RowIDs); p.ID != want {
		return "id", fmt.Sprintf("%q is not the sha256 of the row ids (%s)", p.ID, want)
	}
	return "", ""
}

// EncodePackedShard encodes packed sequences of length seqLen as one Parquet file, the way
// EncodeShard encodes rows (zstd, bloom filter on id, deterministic bytes), and returns its bytes and
// info (Path left empty; Rows counts sequences, Tokens their real tokens, LearnedTokens their true
// mask entries). The file's key-value metadata records the packing length under MetaPackLength.
func EncodePackedShard(seqs []schemas.PackedRow, seqLen int) ([]byte, ShardInfo, error) {
	if len(seqs) == 0 {
		return nil, ShardInfo{}, errors.New("dataset: encode packed shard: no sequences")
	}
	info := ShardInfo{Rows: int64(len(seqs))}
	for i := range seqs {
		if col, msg := packedProblem(&seqs[i], seqLen); col != "" {
			return nil, ShardInfo{}, fmt.Errorf("dataset: encode packed shard: sequence %d column %s: %s", i, col, msg)
		}
		info.Tokens += int64(seqs[i].NumTokens)
		info.LearnedTokens += tokenize.LearnedTokens(seqs[i].LossMask)
	}
	// Sequences have the same size: row groups of ~64 MiB of ids, at most MaxRowsPerRowGroup rows.
	perGroup := max(1, min(MaxRowsPerRowGroup, MaxRowGroupBytes/(5*seqLen+64)))
	var groups []int
	for n := len(seqs); n > 0; n -= perGroup {
		groups = append(groups, min(n, perGroup))
	}
	data, err := encodeParquet(seqs, groups,
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedDefault}),
		parquet.PageBufferSize(PageSize),
		parquet.MaxRowsPerRowGroup(MaxRowsPerRowGroup),
		parquet.BloomFilters(parquet.SplitBlockFilter(10, "id")),
		parquet.KeyValueMetadata(MetaFormat, Format),
		parquet.KeyValueMetadata(MetaSchemaVersion, schemas.RowSchemaVersion),
		parquet.KeyValueMetadata(MetaPackLength, strconv.Itoa(seqLen)))
	if err != nil {
		return nil, ShardInfo{}, fmt.Errorf("dataset: encode packed shard: %w", err)
	}
	sum := sha256.Sum256(data)
	info.Bytes = int64(len(data))
	info.SHA256 = hex.EncodeToString(sum[:])
	return data, info, nil
}

// WritePackedShard writes packed sequences as packed/<name>.parquet of the dataset in store, with
// the same idempotence as WriteShard: the same sequences always land on the same key with the same
// bytes, and other content under an existing key fails with ErrConflict.
func WritePackedShard(ctx context.Context, st *store.Store, name string, seqs []schemas.PackedRow, seqLen int) (ShardInfo, error) {
	return writePackedShard(ctx, st, name, PackedShardPath, seqs, seqLen)
}

// WritePoolPackedShard is WritePackedShard into the pool: pool/packed/<name>.parquet.
func WritePoolPackedShard(ctx context.Context, st *store.Store, name string, seqs []schemas.PackedRow, seqLen int) (ShardInfo, error) {
	return writePackedShard(ctx, st, name, PoolPackedShardPath, seqs, seqLen)
}

func writePackedShard(ctx context.Context, st *store.Store, name string, at func(string) string, seqs []schemas.PackedRow, seqLen int) (ShardInfo, error) {
	if err := CheckShardName(name); err != nil {
		return ShardInfo{}, err
	}
	data, info, err := EncodePackedShard(seqs, seqLen)
	if err != nil {
		return ShardInfo{}, fmt.Errorf("dataset: packed shard %s: %w", name, err)
	}
	info.Path = at(name)
	return info, putShard(ctx, st, info, data, map[string]string{"pack_length": strconv.Itoa(seqLen)})
}

// ReadPackedRows reads up to limit sequences (all if limit <= 0) of the packed shard at path
// (relative to the dataset root, as in the manifest's packing section).
func ReadPackedRows(ctx context.Context, st *store.Store, shardPath string, limit int) ([]schemas.PackedRow, error) {
	if !packedPathRE.MatchString(shardPath) {
		return nil, fmt.Errorf("dataset: bad packed shard path %q (want %s)", shardPath, PackedShardPath("NAME"))
	}
	return readShard[schemas.PackedRow](ctx, st, "packed shard", shardPath, packedSchema, limit)
}
