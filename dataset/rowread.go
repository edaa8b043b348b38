package dataset

import (
	"context"
	"fmt"

	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// RowKey holds the columns of a row that place it in a sample's stratum (ndtrace verify): its id,
// level and direction. EachRowKey reads only these columns of a shard.
type RowKey struct {
	ID        string `parquet:"id"`
	Level     string `parquet:"level,dict"`
	Direction string `parquet:"direction,dict"`
}

// EachRowKey calls fn with the RowKey of every row of the shard at path, in file order, after
// checking the shard's schema. Memory is bounded by the shard's file.
func EachRowKey(ctx context.Context, st *store.Store, path string, fn func(i int64, k *RowKey) error) error {
	return eachShardRow(ctx, st, path, fn)
}

// EachRow calls fn with every row of the shard at path, in file order, after checking the shard's
// schema. Each row is freshly allocated, so fn may keep the ones it wants; memory is bounded by
// the shard's file and what fn keeps.
func EachRow(ctx context.Context, st *store.Store, path string, fn func(i int64, r *schemas.Row) error) error {
	return eachShardRow(ctx, st, path, fn)
}

func eachShardRow[T any](ctx context.Context, st *store.Store, path string, fn func(i int64, r *T) error) error {
	if !shardPathRE.MatchString(path) {
		return fmt.Errorf("dataset: bad shard path %q (want %s)", path, ShardPath("NAME"))
	}
	data, err := readStored(ctx, st, path)
	if err != nil {
		return fmt.Errorf("dataset: shard %s: %w", path, err)
	}
	f, err := openParquet(data)
	if err != nil {
		return fmt.Errorf("dataset: shard %s: %w", path, err)
	}
	if err := compareSchema(f.Schema()); err != nil {
		return fmt.Errorf("dataset: shard %s: %w", path, err)
	}
	if err := eachOf(f, fn); err != nil {
		return fmt.Errorf("dataset: shard %s: %w", path, err)
	}
	return nil
}
