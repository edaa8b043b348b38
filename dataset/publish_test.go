package dataset

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/store"
)

// versionSpec is one version of a multi-version test dataset: its id, and its shards by name (the
// first row and row count of each, see makeRows); a name two versions share is a reused batch.
type versionSpec struct {
	id     string
	shards map[string][2]int
}

// threeVersions are three versions as re-runs with other seeds leave them: each has shards of its
// own, and all share part-shared (a batch every run reuses).
var threeVersions = []versionSpec{
	{"v1", map[string][2]int{"part-shared": {0, 5}, "part-a1": {100, 7}}},
	{"v2", map[string][2]int{"part-shared": {0, 5}, "part-b1": {200, 4}, "part-b2": {300, 1100}}}, // b2: two row groups
	{"v3", map[string][2]int{"part-shared": {0, 5}, "part-c1": {400, 9}}},
}

// commitPooled writes version v's shards (and one packed shard) into the pool and commits it,
// created hours after testCreated, without publishing. It returns the committed manifest and
// the version's rows.
func commitPooled(t *testing.T, s *store.Store, v versionSpec, hour int) (*Manifest, []schemas.Row) {
	t.Helper()
	names := make([]string, 0, len(v.shards))
	for name := range v.shards {
		names = append(names, name)
	}
	slices.Sort(names)
	var shards []pooledShard
	for _, name := range names {
		shards = append(shards, pooledShard{name, makeRows(t, v.shards[name][0], v.shards[name][1])})
	}
	man, all, _ := pooledVersion(t, s, v.id, "part-"+v.id, shards, false)
	man.CreatedAt = testCreated.Add(time.Duration(hour) * time.Hour)
	man.Config = []byte(fmt.Sprintf(`{"name": "versions", "policy": "paper", "pack_length": 4096, "seed": %d}`, hour))
	m, _, err := Commit(context.Background(), s, v.id, man)
	if err != nil {
		t.Fatal(err)
	}
	return m, all
}

// pooledShard is one shard's name and rows.
type pooledShard struct {
	name string
	rows []schemas.Row
}

// pooledVersion writes shards into the pool, in order, with their rows packed into one packed
// shard named packedName, and returns the manifest of a version id of them (created at
// testCreated, config "readers") with its statistics stored (stats.parquet too when parquet),
// uncommitted, and all their rows and packed sequences.
func pooledVersion(t *testing.T, s *store.Store, id, packedName string, shards []pooledShard, parquet bool) (Manifest, []schemas.Row, []schemas.PackedRow) {
	t.Helper()
	ctx := context.Background()
	var infos []ShardInfo
	var all []schemas.Row
	for _, sh := range shards {
		info, err := WritePoolShard(ctx, s, sh.name, sh.rows)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
		all = append(all, sh.rows...)
	}
	packed, _, err := Pack(all, 4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	pinfo, err := WritePoolPackedShard(ctx, s, packedName, packed, 4096)
	if err != nil {
		t.Fatal(err)
	}
	man := Manifest{CreatedAt: testCreated, Versions: testVersions, Shards: infos,
		Config:  []byte(`{"name": "readers", "policy": "paper", "pack_length": 4096}`),
		Packing: &Packing{Length: 4096, Shards: []ShardInfo{pinfo}}}
	norm, err := Normalized(man)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := ComputeStats(ctx, s, norm)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := stats.Marshal()
	ref, err := PutObject(ctx, s, VersionPrefix(id)+StatsKey, js, 0)
	if err != nil {
		t.Fatal(err)
	}
	man.Stats = &ref
	if parquet {
		pq, err := stats.EncodeParquet()
		if err != nil {
			t.Fatal(err)
		}
		pref, err := PutObject(ctx, s, VersionPrefix(id)+StatsParquetKey, pq, 0)
		if err != nil {
			t.Fatal(err)
		}
		man.StatsParquet = &pref
	}
	return man, all, packed
}

// viewKeys lists data/ and packed/ of s.
func viewKeys(t *testing.T, s *store.Store) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{ShardDir, PackedDir} {
		if err := s.List(context.Background(), dir+"/", func(key string, _ int64) error {
			out = append(out, key)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// wantView lists the copies of m's shards: what data/ and packed/ must hold when m is the head.
func wantView(t *testing.T, s *store.Store, m *Manifest) []string {
	t.Helper()
	ctx := context.Background()
	shards, err := m.AllShards(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	packed, err := m.AllPacked(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sh := range append(shards, packed...) {
		out = append(out, ViewPath(sh.Path))
	}
	slices.Sort(out)
	return out
}

// checkPublished checks that data/ and packed/ hold exactly the copies of m's shards, that the card
// is m's, and (in a local folder dir) that no file but those Parquet files is under data/ or packed/.
func checkPublished(t *testing.T, s *store.Store, dir string, m *Manifest) {
	t.Helper()
	if got, want := viewKeys(t, s), wantView(t, s, m); !slices.Equal(got, want) {
		t.Errorf("data/ and packed/ hold %v, want the head %s's %v", got, m.Version, want)
	}
	card, err := s.ReadAll(context.Background(), CardKey)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("| `default` (default): trajectory rows | `data/*.parquet` | %d |", m.Totals.Rows); !strings.Contains(string(card), want) {
		t.Errorf("the card is not version %s's (no %q):\n%s", m.Version, want, card)
	}
	if dir == "" {
		return
	}
	for _, sub := range []string{ShardDir, PackedDir} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ShardExt) || e.IsDir() {
				t.Errorf("%s/%s: not a Parquet file (a sidecar?) in a folder readers glob", sub, e.Name())
			}
		}
	}
}

// TestPublish commits three versions into one dataset, publishing after each, in a folder and in
// memory: data/ and packed/ hold exactly the head's shards (the shard every version reuses stays,
// the others come and go), with no sidecar beside them, the card is the head's, and every version
// stays whole and valid through its own manifest.
func TestPublish(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"folder", "mem"} {
		t.Run(kind, func(t *testing.T) {
			dir, url := "", "mem://"
			if kind == "folder" {
				dir = filepath.Join(t.TempDir(), "ds")
				url = dir
			}
			s := openTest(t, url)
			var ms []*Manifest
			for i, v := range threeVersions {
				m, _ := commitPooled(t, s, v, i+1)
				ms = append(ms, m)
				head, err := Publish(ctx, s, nil)
				if err != nil {
					t.Fatal(err)
				}
				if head.Version != v.id {
					t.Fatalf("Publish published %s, want %s", head.Version, v.id)
				}
				checkPublished(t, s, dir, m)
			}
			for _, m := range ms {
				v, err := ReadVersion(ctx, s, m.Version)
				if err != nil {
					t.Fatal(err)
				}
				rep, err := checkVersion(ctx, s, v)
				if err != nil || len(rep) > 0 {
					t.Errorf("version %s after three publishes: %v %v", m.Version, err, rep)
				}
			}
		})
	}
}

// checkVersion reads every shard of version m (by its manifest) and checks sizes and checksums.
func checkVersion(ctx context.Context, s *store.Store, m *Manifest) ([]string, error) {
	var problems []string
	shards, err := m.AllShards(ctx, s)
	if err != nil {
		return nil, err
	}
	packed, err := m.AllPacked(ctx, s)
	if err != nil {
		return nil, err
	}
	for _, sh := range append(shards, packed...) {
		same, err := s.Holds(ctx, sh.Path, sh.Bytes, sh.SHA256)
		if err != nil || !same {
			problems = append(problems, fmt.Sprintf("%s: %v %v", sh.Path, same, err))
		}
	}
	return problems, nil
}

// TestPublishAfterCrash checks what Publish makes of what a crash leaves: a commit that claimed
// its place but died before writing manifest.json (the head is still found by its claim), and a
// publish that died after copying the new head's shards but before deleting the old head's
// copies (the next Publish deletes them).
func TestPublishAfterCrash(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ds")
	s := openTest(t, dir)
	m1, _ := commitPooled(t, s, threeVersions[0], 1)
	if _, err := Publish(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	v1, err := s.ReadAll(ctx, ManifestKey)
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := commitPooled(t, s, threeVersions[1], 2)
	// The crash: manifest.json as it was before v2's commit wrote it.
	if err := s.Put(ctx, ManifestKey, v1, nil); err != nil {
		t.Fatal(err)
	}
	if h, err := Head(ctx, s); err != nil || h.Version != "v2" {
		t.Fatalf("Head = %v, %v; want v2 (claimed after v1)", h, err)
	}
	if _, err := Publish(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, s, dir, m2)
	// A publish of v2 that died before its deletions: v1's copies are back beside v2's.
	for _, v := range wantView(t, s, m1) {
		if err := s.Copy(ctx, v, PoolDir+"/"+v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Publish(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, s, dir, m2)
}

// TestPublishConcurrent commits and publishes v2 and v3 at once over v1, many times: whatever the
// interleaving, the head is v3 (the newer) and data/ and packed/ hold exactly its shards.
func TestPublishConcurrent(t *testing.T) {
	ctx := context.Background()
	for round := 0; round < 5; round++ {
		s := openTest(t, "mem://")
		commitPooled(t, s, threeVersions[0], 1)
		if _, err := Publish(ctx, s, nil); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		ms := make([]*Manifest, 2)
		for i, v := range threeVersions[1:] {
			wg.Go(func() {
				ms[i], _ = commitPooled(t, s, v, i+2)
				if _, err := Publish(ctx, s, nil); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if h, err := ReadManifest(ctx, s); err != nil || h.Version != "v3" {
			t.Fatalf("head = %v, %v; want v3", h, err)
		}
		checkPublished(t, s, "", ms[1])
	}
}

// TestPublishMovesUnpooledShards checks a folder holding a version written before the pool (its
// shard in data/ itself, with a metadata sidecar): when a pooled version becomes the head, that
// shard moves into the pool (data/ then holds the head's shards only, and no sidecar), the old
// version stays readable by its manifest (rows, stored checks, statistics), and a later version
// that reuses the old shard (its manifest names data/ as the old one does) gets it back in data/.
func TestPublishMovesUnpooledShards(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ds")
	s := openTest(t, dir)
	rows := makeRows(t, 900, 3)
	info, err := WriteShard(ctx, s, "part-old", rows)
	if err != nil {
		t.Fatal(err)
	}
	old, _, err := Commit(ctx, s, "v0", Manifest{CreatedAt: testCreated, Versions: testVersions, Shards: []ShardInfo{info}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Publish(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, s, "", old) // (the sidecar of the pre-pool shard is still there)
	m, _ := commitPooled(t, s, threeVersions[0], 1)
	if _, err := Publish(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, s, dir, m)
	if got, err := ReadRows(ctx, s, info.Path, -1); err != nil || len(got) != len(rows) {
		t.Errorf("ReadRows(%s) of the old version = %d rows, %v", info.Path, len(got), err)
	}
	if err := CheckStored(ctx, s, []ShardInfo{info}); err != nil {
		t.Errorf("CheckStored(old version): %v", err)
	}
	if st, err := ComputeStats(ctx, s, old); err != nil || st.Dataset.Trajectories != int64(len(rows)) {
		t.Errorf("ComputeStats(old version) = %+v, %v", st, err)
	}
	// A later version reuses the old shard (a batch record from before the pool names data/).
	extra, err := WritePoolShard(ctx, s, "part-new", makeRows(t, 950, 2))
	if err != nil {
		t.Fatal(err)
	}
	reuse, _, err := Commit(ctx, s, "v2", Manifest{CreatedAt: testCreated.Add(5 * time.Hour), Versions: testVersions, Shards: []ShardInfo{info, extra}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Publish(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, s, dir, reuse)
	if got, err := ReadRows(ctx, s, info.Path, -1); err != nil || len(got) != len(rows) {
		t.Errorf("ReadRows(%s) after it came back = %d rows, %v", info.Path, len(got), err)
	}
}

// TestPoolPaths checks the pool's keys: where the pipeline writes shards, which shard paths a
// manifest may name, and where each shard's published copy goes.
func TestPoolPaths(t *testing.T) {
	if got := PoolShardPath("part-1"); got != "pool/data/part-1.parquet" {
		t.Errorf("PoolShardPath = %s", got)
	}
	if got := PoolPackedShardPath("part-1"); got != "pool/packed/part-1.parquet" {
		t.Errorf("PoolPackedShardPath = %s", got)
	}
	for _, tc := range []struct {
		path, view   string
		shard, packd bool
	}{
		{"pool/data/part-1.parquet", "data/part-1.parquet", true, false},
		{"pool/packed/part-1.parquet", "packed/part-1.parquet", false, true},
		{"data/part-1.parquet", "data/part-1.parquet", true, false},
		{"shards/part-1.parquet", "shards/part-1.parquet", true, false},
		{"packed/part-1.parquet", "packed/part-1.parquet", false, true},
		{"pool/part-1.parquet", "part-1.parquet", false, false},
		{"pool/data/x/part-1.parquet", "data/x/part-1.parquet", false, false},
		{"pool/shards/part-1.parquet", "shards/part-1.parquet", false, false},
	} {
		if got := ViewPath(tc.path); got != tc.view {
			t.Errorf("ViewPath(%s) = %s, want %s", tc.path, got, tc.view)
		}
		if got := shardPathRE.MatchString(tc.path); got != tc.shard {
			t.Errorf("%s a shard path: %v, want %v", tc.path, got, tc.shard)
		}
		if got := packedPathRE.MatchString(tc.path); got != tc.packd {
			t.Errorf("%s a packed shard path: %v, want %v", tc.path, got, tc.packd)
		}
	}
}

// TestPublishKeepsLegacyNamesakes (attacker's review, issue 27): v0 names data/part-x, a shard
// written before the pool, and the pool holds a shard of the same name with other bytes (a batch
// rebuilt without its record, as in a rolling upgrade). Whether the head v1 names another shard or
// that namesake, Publish took data/part-x for a copy: it deleted it as "moved into the pool", or
// copied the head's over it (or, at the same size, took v0's bytes for the head's copy), and v0
// lost its shard. It now stays.
func TestPublishKeepsLegacyNamesakes(t *testing.T) {
	for _, headNamesake := range []bool{false, true} {
		t.Run(fmt.Sprintf("head names the namesake %v", headNamesake), func(t *testing.T) {
			ctx := context.Background()
			s := openTest(t, filepath.Join(t.TempDir(), "ds"))
			legacy, err := WriteShard(ctx, s, "part-x", makeRows(t, 900, 3))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := Commit(ctx, s, "v0", Manifest{CreatedAt: testCreated, Versions: testVersions, Shards: []ShardInfo{legacy}}); err != nil {
				t.Fatal(err)
			}
			head, err := WritePoolShard(ctx, s, "part-x", makeRows(t, 500, 4))
			if err != nil {
				t.Fatal(err)
			}
			if !headNamesake {
				if head, err = WritePoolShard(ctx, s, "part-o", makeRows(t, 100, 2)); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := Commit(ctx, s, "v1", Manifest{CreatedAt: testCreated.Add(time.Hour), Versions: testVersions, Shards: []ShardInfo{head}}); err != nil {
				t.Fatal(err)
			}
			if _, err := Publish(ctx, s, nil); err != nil {
				t.Fatal(err)
			}
			if err := CheckStored(ctx, s, []ShardInfo{legacy}); err != nil {
				t.Errorf("v0 lost its shard: %v", err)
			}
		})
	}
}

// TestPublishTouchesOnlyShards (attacker's review, issue 27): another dataset nested under data/
// (or any file there that is not a top-level shard) was "moved" out of it. Publish now touches only
// top-level shard files.
func TestPublishTouchesOnlyShards(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ds")
	s := openTest(t, dir)
	inner := openTest(t, filepath.Join(dir, "data", "subset"))
	in, err := WritePoolShard(ctx, inner, "part-i", makeRows(t, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	commitPooled(t, s, threeVersions[0], 1)
	if _, err := Publish(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	if err := CheckStored(ctx, inner, []ShardInfo{in}); err != nil {
		t.Errorf("inner dataset lost its shard: %v", err)
	}
}
