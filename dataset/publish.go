package dataset

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/ndtrace/ndtrace/store"
)

// One version per read. The pipeline writes every shard once into the pool (pool/data/,
// pool/packed/: WritePoolShard, WritePoolPackedShard), and every version's manifest names its
// shards there, so a committed shard never moves and every version stays readable through its
// manifest (versions/<id>/manifest.json). data/ and packed/ are the head's copies: Publish makes
// them hold exactly the shards of the head (hard links in a local folder, server-side copies in a
// bucket), so a glob over data/ or the dataset card's configurations read exactly one version.
// docs/dataset.md ("Layout") says why.

// Head returns the manifest of the dataset's head: the last version of the chain of claims that
// starts at the version manifest.json names. That is manifest.json's own version unless a commit
// claimed a later one and has not written manifest.json yet (it is running, or it crashed after
// its claim and its retry will). A dataset with no manifest gives an error for which
// store.IsNotExist is true.
func Head(ctx context.Context, st *store.Store) (*Manifest, error) {
	m, err := ReadManifest(ctx, st)
	if err != nil {
		return nil, err
	}
	claim := firstKey
	if m.Version != "" {
		claim = successorKey(m.Version)
	}
	for {
		next, err := st.ReadAll(ctx, claim)
		if store.IsNotExist(err) {
			return m, nil
		}
		if err != nil {
			return nil, err
		}
		id := strings.TrimSpace(string(next))
		if m, err = ReadVersion(ctx, st, id); err != nil {
			return nil, err
		}
		claim = successorKey(id)
	}
}

// publishCopies is how many copies Publish makes at once.
const publishCopies = 8

// Publish makes the dataset's head readable whole by folder: it copies the head's shards from the
// pool into data/ and packed/ (Store.Copy: hard links in a local folder, so no metadata sidecar
// is beside them), writes the head's dataset card, then deletes from data/ and packed/ the copies
// of shards the head does not have. It then looks at the head again and publishes anew if another
// commit moved it meanwhile, so that of runs committing at once the last to finish leaves the
// newest head's files, whatever order their steps interleaved in. Publish is idempotent: a crash
// between its steps leaves data/ with copies of the head before too (or a stale card) until the
// next Publish, which the commit's retry or the next commit runs; the manifest is exact throughout.
//
// Shards in data/ and packed/ themselves (datasets written before the pool, or with WriteShard)
// are their own copies while the head has them; once it does not, Publish moves them into the
// pool (PoolDir/<their path>), where every reader of this package finds them for the versions that
// name them, and puts them back if a later head names them again. Shards in shards/ (datasets
// written before the data/ layout) are never touched. progress, if not nil, is called
// (one call at a time) with the number of copies made and deleted so far, after each: a caller
// that must show it is alive (an activity's heartbeat) passes it. It returns the head it published.
func Publish(ctx context.Context, st *store.Store, progress func(done int)) (*Manifest, error) {
	var mu sync.Mutex
	done := 0
	step := func() {
		if progress == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		done++
		progress(done)
	}
	for {
		m, err := Head(ctx, st)
		if err != nil {
			return nil, err
		}
		if err := publish(ctx, st, m, step); err != nil {
			return nil, fmt.Errorf("dataset: publish version %s: %w", m.Version, err)
		}
		again, err := Head(ctx, st)
		if err != nil {
			return nil, err
		}
		if again.Version == m.Version && again.CreatedAt.Equal(m.CreatedAt) && again.Totals == m.Totals {
			return m, nil
		}
	}
}

// publish makes data/ and packed/ hold the copies of m's shards and no other copies of pooled
// shards, and writes m's card.
func publish(ctx context.Context, st *store.Store, m *Manifest, step func()) error {
	shards, err := m.AllShards(ctx, st)
	if err != nil {
		return err
	}
	packed, err := m.AllPacked(ctx, st)
	if err != nil {
		return err
	}
	want := map[string]ShardInfo{} // copy key -> the shard
	for _, s := range append(shards, packed...) {
		v := ViewPath(s.Path)
		if o, ok := want[v]; ok {
			return fmt.Errorf("shards %s and %s would have the same copy %s", o.Path, s.Path, v)
		}
		want[v] = s
	}
	present := map[string]int64{} // the shards in data/ and packed/ (nothing else there is touched)
	listed := 0
	for _, dir := range []string{ShardDir, PackedDir} {
		if err := st.List(ctx, dir+"/", func(key string, size int64) error {
			if listed++; listed%1000 == 0 {
				step() // a long listing is progress too (the commit activity's heartbeat)
			}
			if anyShardPathRE.MatchString(key) && !strings.HasPrefix(key, PoolDir+"/") {
				present[key] = size
			}
			return nil
		}); err != nil {
			return err
		}
	}
	var todo []string
	src := map[string]string{} // copy key -> where its bytes are
	for v, s := range want {
		size, ok := present[v]
		switch {
		case v != s.Path && !ok:
			src[v] = s.Path
		case v != s.Path:
			// A file at the copy's key is the copy, or a shard of a dataset written before the
			// pool under the same name with other bytes, which an older version's manifest
			// names: never overwritten. Its size tells most apart for free; in a local folder a
			// copy is a hard link, which two stats tell for sure. (On a bucket a namesake of the
			// same size is taken for the copy: one HEAD per shard at every publish would cost
			// more than that rare case, which loses nothing.)
			same := size == s.Bytes
			if same && st.Local() {
				var err error
				if same, err = st.SameBytes(ctx, v, s.Path); err != nil {
					return err
				}
			}
			if !same {
				slog.Warn("publish: a shard written before the pool has the name of another; left in place, so this copy is not published",
					"dataset", st.URL(), "key", v, "shard", s.Path)
			}
			continue
		case !ok && movable(v):
			// A shard of a dataset written before the pool that a publish moved into the pool
			// (below) and a later version reuses: back in place, if the pool's is that shard.
			if held, err := st.Holds(ctx, PoolDir+"/"+v, s.Bytes, s.SHA256); err != nil || !held {
				if err != nil && !store.IsNotExist(err) {
					return err
				}
				slog.Warn("publish: a shard written before the pool is not in the pool", "dataset", st.URL(), "key", v)
				continue
			}
			src[v] = PoolDir + "/" + v
		default:
			continue
		}
		todo = append(todo, v)
	}
	slices.Sort(todo)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(publishCopies)
	for _, v := range todo {
		g.Go(func() error {
			defer step()
			return st.Copy(gctx, v, src[v])
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var stats *Stats
	if m.Stats != nil {
		data, err := ReadObject(ctx, st, *m.Stats)
		if err != nil {
			return err
		}
		if stats, err = ParseStats(data); err != nil {
			return err
		}
	}
	if err := WriteCard(ctx, st, m, stats); err != nil {
		return err
	}
	var stale []string
	for key := range present {
		if _, ok := want[key]; !ok {
			stale = append(stale, key)
		}
	}
	slices.Sort(stale)
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(publishCopies)
	for _, key := range stale {
		g.Go(func() error {
			defer step()
			// A copy of a pooled shard just goes. A shard written in data/ or packed/ itself (a
			// dataset written before the pool) may be named by an older version's manifest: it
			// moves into the pool first (a copy, then the delete), where readers of that version
			// find it (readStored).
			pool := PoolDir + "/" + key
			pooled, err := st.Exists(gctx, pool)
			if err != nil {
				return err
			}
			if !pooled {
				if err := st.Copy(gctx, pool, key); err != nil {
					if store.IsNotExist(err) {
						return nil // another publish moved it meanwhile
					}
					return err
				}
			}
			// Deleted only when the pool holds its very bytes: a shard written before the pool
			// under a pooled shard's name stays where its version's manifest names it.
			same, err := st.SameBytes(gctx, key, pool)
			switch {
			case store.IsNotExist(err):
				return nil // another publish moved it meanwhile
			case err != nil:
				return err
			case !same:
				slog.Warn("publish: a shard written before the pool has the name of another; left in place",
					"dataset", st.URL(), "key", key)
				return nil
			}
			return st.Delete(gctx, key)
		})
	}
	return g.Wait()
}
