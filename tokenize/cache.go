package tokenize

import (
	"hash/maphash"
	"strings"
	"sync"
)

// Sizes of a tokenizer's piece cache: cacheShards shards of at most 2×cacheShardEntries pieces.
// Trajectories repeat the same source lines, names and values, so most pieces after the first
// thousand trajectories are hits. The bound keeps memory under about 30 MB per tokenizer.
const (
	cacheShards       = 64
	cacheShardEntries = 2048
)

// pieceCache is a bounded, concurrency-safe map from a piece to its ids. Each shard keeps two
// generations: a hit in the old one moves the piece to the new one, and when the new one is full
// the old one is dropped, so pieces in use survive and memory stays bounded.
type pieceCache struct {
	seed   maphash.Seed
	once   sync.Once
	shards [cacheShards]cacheShard
}

type cacheShard struct {
	mu       sync.Mutex
	cur, old map[uint64]cacheEntry
}

// cacheEntry is keyed by the piece's 64-bit hash; piece guards against collisions.
type cacheEntry struct {
	piece string
	ids   []int32
}

func (c *pieceCache) hash(piece string) uint64 {
	c.once.Do(func() { c.seed = maphash.MakeSeed() })
	return maphash.String(c.seed, piece)
}

// get returns the ids of piece, whose hash is h.
func (c *pieceCache) get(h uint64, piece string) ([]int32, bool) {
	s := &c.shards[h%cacheShards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.cur[h]; ok && e.piece == piece {
		return e.ids, true
	}
	if e, ok := s.old[h]; ok && e.piece == piece {
		s.add(h, e)
		return e.ids, true
	}
	return nil, false
}

// put stores a copy of ids for piece, whose hash is h.
func (c *pieceCache) put(h uint64, piece string, ids []int32) {
	// Clone the key: piece is a substring of the caller's text, which must not be kept alive.
	e := cacheEntry{piece: strings.Clone(piece), ids: append([]int32(nil), ids...)}
	s := &c.shards[h%cacheShards]
	s.mu.Lock()
	s.add(h, e)
	s.mu.Unlock()
}

// add puts e in the current generation, first retiring it if it is full. s.mu is held.
func (s *cacheShard) add(h uint64, e cacheEntry) {
	if s.cur == nil {
		s.cur = make(map[uint64]cacheEntry, cacheShardEntries)
	}
	if len(s.cur) >= cacheShardEntries {
		s.old, s.cur = s.cur, make(map[uint64]cacheEntry, cacheShardEntries)
	}
	s.cur[h] = e
}

// reset empties the cache.
func (c *pieceCache) reset() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		s.cur, s.old = nil, nil
		s.mu.Unlock()
	}
}
