package dataset

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ndtrace/ndtrace/store"
)

// VersionsDir holds the versions of a dataset: versions/<id>/ the objects of version id (its
// manifest, shard index, rejects, statistics). Datasets of ndtrace before manifest format 3 kept
// each version's manifest as versions/manifest-<created_at>.json.
const VersionsDir = "versions/"

// VersionPrefix is where the objects of version id live: its manifest, rejects and statistics.
func VersionPrefix(id string) string { return VersionsDir + id + "/" }

// firstKey is the claim of the first version of a dataset (format 3), successorKey the claim of
// the version after id: each holds the claiming version's id and is written once.
const firstKey = VersionsDir + "first"

func successorKey(id string) string       { return VersionPrefix(id) + "successor" }
func versionManifestKey(id string) string { return VersionPrefix(id) + "manifest.json" }

// PutObject stores data under key, write-once, and returns its reference (count records).
func PutObject(ctx context.Context, st *store.Store, key string, data []byte, count int64) (ObjectRef, error) {
	if _, err := st.PutOnce(ctx, key, data, "application/octet-stream", nil); err != nil {
		return ObjectRef{}, err
	}
	sum := sha256.Sum256(data)
	return ObjectRef{Key: key, SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(data)), Count: count}, nil
}

// ReadObject reads a referenced object and checks its size and sha256.
func ReadObject(ctx context.Context, st *store.Store, ref ObjectRef) ([]byte, error) {
	data, err := st.ReadLimit(ctx, ref.Key, ref.Bytes)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if int64(len(data)) != ref.Bytes || hex.EncodeToString(sum[:]) != ref.SHA256 {
		return nil, fmt.Errorf("dataset: %s does not hold the %d bytes with sha256 %s its manifest names", ref.Key, ref.Bytes, ref.SHA256)
	}
	return data, nil
}

// Commit commits m as version id of the dataset in st. The version's manifest is stored,
// immutable, under its prefix; then the version claims to succeed the current head (a write-once
// object, so of two runs committing over the same head exactly one wins, and the other chains after
// it), and manifest.json is replaced by the newest version of the chain. A version older (by
// created_at) than the head is committed under versions/ but does not become the head: head is
// false then. A retry of a commit finds its own claim and goes on.
func Commit(ctx context.Context, st *store.Store, id string, m Manifest) (*Manifest, bool, error) {
	m.Version = id
	data, md, err := prepareManifest(ctx, st, &m)
	if err != nil {
		return nil, false, err
	}
	if _, err := st.PutOnce(ctx, versionManifestKey(id), data, manifestContentType, md); err != nil {
		return nil, false, fmt.Errorf("dataset: version %s: %w", id, err)
	}
	committed, err := ParseManifest(data)
	if err != nil {
		return nil, false, err
	}
	// Claim from the current head (walking the chain from the first version would read every
	// version's manifest); a stale manifest.json only makes the walk start earlier.
	claim := firstKey
	switch head, err := ReadManifest(ctx, st); {
	case err == nil && head.Version == id:
		claim = "" // a retry of this commit: claimed already
	case err == nil && head.Version != "":
		if head.CreatedAt.After(committed.CreatedAt) {
			return committed, false, nil
		}
		claim = successorKey(head.Version)
	case err != nil && !store.IsNotExist(err):
		return nil, false, err
	}
	for claim != "" {
		created, err := st.PutFirst(ctx, claim, []byte(id), "text/plain")
		if err != nil {
			return nil, false, fmt.Errorf("dataset: claim %s: %w", claim, err)
		}
		if created {
			break
		}
		other, err := st.ReadAll(ctx, claim)
		if err != nil {
			return nil, false, err
		}
		if string(other) == id {
			break // our own claim, from an attempt before
		}
		om, err := ReadVersion(ctx, st, string(other))
		if err != nil {
			return nil, false, err
		}
		if om.CreatedAt.After(committed.CreatedAt) {
			// A newer version was committed over the same head: ours stays in versions/ only.
			return committed, false, nil
		}
		claim = successorKey(string(other))
	}
	// Ours is in the chain: point manifest.json at the chain's tip (ours, unless a version
	// claimed after ours meanwhile), and check again after writing, so that the last writer of
	// manifest.json always writes the tip.
	tip := id
	for {
		tipData := data
		if tip != id {
			if tipData, err = st.ReadLimit(ctx, versionManifestKey(tip), MaxManifestBytes); err != nil {
				return nil, false, err
			}
		}
		if err := st.Put(ctx, ManifestKey, tipData, &store.PutOptions{ContentType: manifestContentType, Metadata: md}); err != nil {
			return nil, false, fmt.Errorf("dataset: write %s in %s: %w", ManifestKey, st.URL(), err)
		}
		next, err := st.ReadAll(ctx, successorKey(tip))
		if store.IsNotExist(err) {
			break
		}
		if err != nil {
			return nil, false, err
		}
		tip = strings.TrimSpace(string(next))
	}
	return committed, tip == id, nil
}

// ReadVersion reads the manifest of version id (format 3). An unknown id gives an error for
// which store.IsNotExist is true.
func ReadVersion(ctx context.Context, st *store.Store, id string) (*Manifest, error) {
	data, err := st.ReadLimit(ctx, versionManifestKey(id), MaxManifestBytes)
	if err != nil {
		return nil, fmt.Errorf("dataset: version %s: %w", id, err)
	}
	return ParseManifest(data)
}

// PutShardPage stores shards (sorted by path here) as one page of a shard index under key,
// write-once, and returns its entry.
func PutShardPage(ctx context.Context, st *store.Store, key string, shards []ShardInfo) (ShardPage, error) {
	shards = slices.Clone(shards)
	slices.SortFunc(shards, func(a, b ShardInfo) int { return strings.Compare(a.Path, b.Path) })
	if err := checkShards("page", shards, anyShardPathRE, "data/… or packed/…"); err != nil {
		return ShardPage{}, fmt.Errorf("dataset: shard page %s: %w", key, err)
	}
	t, err := sumShards(shards)
	if err != nil {
		return ShardPage{}, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, s := range shards {
		if err := enc.Encode(s); err != nil {
			return ShardPage{}, err
		}
	}
	ref, err := PutObject(ctx, st, key, buf.Bytes(), t.Shards)
	if err != nil {
		return ShardPage{}, err
	}
	return ShardPage{Key: ref.Key, SHA256: ref.SHA256, Bytes: ref.Bytes, Totals: t}, nil
}

// anyShardPathRE matches the path of a shard or of a packed shard.
var anyShardPathRE = regexp.MustCompile(`(?:` + shardPathRE.String() + `)|(?:` + packedPathRE.String() + `)`)

// maxShardPageBytes bounds a shard index page read whole (16,384 shards of ~250 bytes).
const maxShardPageBytes = 64 << 20

// readPages reads the shards of index pages, each checked against its sha256.
func readPages(ctx context.Context, st *store.Store, pages []ShardPage, fn func(ShardInfo) error) error {
	for _, p := range pages {
		if p.Bytes > maxShardPageBytes {
			return fmt.Errorf("dataset: shard page %s: %d bytes, more than %d", p.Key, p.Bytes, maxShardPageBytes)
		}
		data, err := ReadObject(ctx, st, ObjectRef{Key: p.Key, SHA256: p.SHA256, Bytes: p.Bytes})
		if err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		for dec.More() {
			var s ShardInfo
			if err := dec.Decode(&s); err != nil {
				return fmt.Errorf("dataset: shard page %s: %w", p.Key, err)
			}
			if err := fn(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// AllShards returns every shard of the version, sorted by path: those listed inline, or those of
// its shard index (read and checked against their sha256). It holds them all in memory: readers
// that go shard by shard use EachShard.
func (m *Manifest) AllShards(ctx context.Context, st *store.Store) ([]ShardInfo, error) {
	out := slices.Clone(m.Shards)
	if err := readPages(ctx, st, m.ShardIndex, func(s ShardInfo) error { out = append(out, s); return nil }); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b ShardInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// EachShard calls fn with every shard of the version: the inline list, then each index page in
// order (sorted by path within a page). Memory is bounded by one page.
func (m *Manifest) EachShard(ctx context.Context, st *store.Store, fn func(ShardInfo) error) error {
	for _, s := range m.Shards {
		if err := fn(s); err != nil {
			return err
		}
	}
	return readPages(ctx, st, m.ShardIndex, fn)
}

// AllPacked returns every packed shard of the version (none without packing), sorted by path.
func (m *Manifest) AllPacked(ctx context.Context, st *store.Store) ([]ShardInfo, error) {
	if m.Packing == nil {
		return nil, nil
	}
	out := slices.Clone(m.Packing.Shards)
	if err := readPages(ctx, st, m.Packing.Index, func(s ShardInfo) error { out = append(out, s); return nil }); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b ShardInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// Normalized returns a copy of m with its computed fields filled (format, totals, sorted lists),
// as Commit will write it: what statistics computed before the commit describe.
func Normalized(m Manifest) (*Manifest, error) {
	if err := m.normalize(); err != nil {
		return nil, fmt.Errorf("dataset: manifest: %w", err)
	}
	return &m, nil
}
