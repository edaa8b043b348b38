package pipeline

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/store"
)

// legacyDedupKeys is the single object in which datasets before manifest format 3 list their dedup
// keys: {"format": "ndtrace-dedup-keys", "keys": {dedup key: item key}}.
const legacyDedupKeys = "dedup_keys.json"

// maxLegacyDedupKeys bounds the legacy object read whole (newer datasets are read streaming).
const maxLegacyDedupKeys = 1 << 30

// openAgainst opens the dedup keys of the committed dataset at url as a sorted record stream from
// prefix on, and returns it with the function that closes the dataset's store. A format 3 dataset
// is read streaming, shard by shard, each checked against its manifest's sha256 as it is opened;
// an older one's dedup_keys.json is read whole.
func openAgainst(ctx context.Context, url string, prefix int) (recordStream, func() error, error) {
	s, err := store.Open(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	m, err := dataset.ReadManifest(ctx, s)
	if err != nil {
		s.Close()
		if store.IsNotExist(err) {
			return nil, nil, execute.BadInput("%s has no manifest (not an ndtrace dataset, or not committed)", url)
		}
		return nil, nil, err
	}
	if m.Version != "" {
		byFirst := map[int]dataset.ObjectRef{}
		for _, r := range m.DedupKeys {
			info, err := s.Stat(ctx, r.Key)
			if err != nil {
				s.Close()
				return nil, nil, err
			}
			if info.Size != r.Bytes || (info.Metadata["sha256"] != "" && info.Metadata["sha256"] != r.SHA256) {
				s.Close()
				return nil, nil, fmt.Errorf("%s: %s is not the object its manifest names", url, r.Key)
			}
			var k int
			if _, err := fmt.Sscanf(r.Key[len(r.Key)-6:], "%02x.bin", &k); err != nil {
				s.Close()
				return nil, nil, fmt.Errorf("%s: dedup key shard %s: bad name", url, r.Key)
			}
			byFirst[k] = r
		}
		ss := &shardStream{ctx: ctx, s: s, prefix: prefix, keyOf: func(k int) string {
			if r, ok := byFirst[k]; ok {
				return r.Key
			}
			return fmt.Sprintf("%s-missing-%02x", dataset.VersionPrefix(m.Version), k)
		}, sha256Of: func(k int) string { return byFirst[k].SHA256 }}
		return ss, s.Close, nil
	}
	data, err := s.ReadLimit(ctx, legacyDedupKeys, maxLegacyDedupKeys)
	if err != nil {
		s.Close()
		if store.IsNotExist(err) {
			return nil, nil, execute.BadInput("%s has no %s (not an ndtrace dataset, or not committed)", url, legacyDedupKeys)
		}
		return nil, nil, err
	}
	var d struct {
		Format string            `json:"format"`
		Keys   map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(data, &d); err != nil || d.Format != "ndtrace-dedup-keys" {
		s.Close()
		return nil, nil, execute.BadInput("%s/%s is malformed", url, legacyDedupKeys)
	}
	recs := make([]keyRecord, 0, len(d.Keys))
	for k, item := range d.Keys {
		b, err := hex.DecodeString(k)
		if err != nil || len(b) != 32 {
			continue
		}
		var r keyRecord
		copy(r.Key[:], b)
		r.ItemKey = item
		if int(r.Key[0]) >= prefix {
			recs = append(recs, r)
		}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].less(&recs[j]) })
	return &memStream{recs: recs}, s.Close, nil
}
