package dataset

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"gocloud.dev/blob"
)

// VersionsDir holds the manifest of every committed version of a dataset.
const VersionsDir = "versions/"

// VersionKey is where the manifest of the version created at t is kept.
func VersionKey(t time.Time) string {
	return VersionsDir + "manifest-" + t.UTC().Format("20060102T150405.000000Z") + ".json"
}

// CommitVersion commits m as a new version of a dataset that may already hold earlier ones (a
// scheduled re-run): the manifest is stored, immutable, under VersionKey(m.CreatedAt), and then
// manifest.json is replaced by it. manifest.json stays the commit point and is written last, so a
// reader sees the previous complete version or this one, never a mix. Versions share the shards
// they have in common; nothing is copied.
func CommitVersion(ctx context.Context, store *Store, m Manifest) (*Manifest, error) {
	if err := m.normalize(); err != nil {
		return nil, fmt.Errorf("dataset: manifest: %w", err)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("dataset: manifest: %w", err)
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	if err := checkStored(ctx, store, m.Shards); err != nil {
		return nil, err
	}
	md := map[string]string{"format_version": strconv.Itoa(FormatVersion)}
	if _, err := store.PutOnce(ctx, VersionKey(m.CreatedAt), data, manifestContentType, md); err != nil {
		return nil, fmt.Errorf("dataset: version %s: %w", m.CreatedAt.UTC().Format(time.RFC3339Nano), err)
	}
	if err := store.Bucket().WriteAll(ctx, ManifestKey, data, &blob.WriterOptions{ContentType: manifestContentType, Metadata: md}); err != nil {
		return nil, fmt.Errorf("dataset: write %s in %s: %w", ManifestKey, store.URL(), err)
	}
	return ParseManifest(data)
}
