package dataset

import (
	"context"
	"fmt"
	"github.com/ndtrace/ndtrace/store"
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
func CommitVersion(ctx context.Context, st *store.Store, m Manifest) (*Manifest, error) {
	data, md, err := prepareManifest(ctx, st, &m)
	if err != nil {
		return nil, err
	}
	if _, err := st.PutOnce(ctx, VersionKey(m.CreatedAt), data, manifestContentType, md); err != nil {
		return nil, fmt.Errorf("dataset: version %s: %w", m.CreatedAt.UTC().Format(time.RFC3339Nano), err)
	}
	if err := st.Put(ctx, ManifestKey, data, &blob.WriterOptions{ContentType: manifestContentType, Metadata: md}); err != nil {
		return nil, fmt.Errorf("dataset: write %s in %s: %w", ManifestKey, st.URL(), err)
	}
	return ParseManifest(data)
}
