package dataset

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/store"

	"github.com/ndtrace/ndtrace/internal/emulators"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestServers writes, re-writes and validates a dataset on each storage server the store's
// conformance suite runs against (versitygw for S3, fake-gcs-server, Azurite), through the same
// URLs a user would give. Each is skipped when its server is not installed, unless CI is set.
func TestServers(t *testing.T) {
	if testing.Short() {
		t.Skip("a dataset on the S3, GCS and Azure emulators: long integration test; run without -short")
	}
	for _, tc := range []struct {
		name  string
		start func(testing.TB) *emulators.Bucket
	}{{"s3-versitygw", emulators.S3}, {"gs-fake-gcs-server", emulators.GCS}, {"azblob-azurite", emulators.Azurite}} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.start(t)
			checkServerDataset(t, b.Server, b.URL)
			if b.Dir == "" {
				return
			}
			// versitygw's posix backend stores objects as plain files under <Dir>/<key>.
			data, err := os.ReadFile(filepath.Join(b.Dir, "datasets", "run-1", ManifestKey))
			if err != nil || !strings.Contains(string(data), fmt.Sprintf(`"server": %q`, b.Server)) {
				t.Errorf("manifest on the gateway's disk: %v\n%s", err, data)
			}
		})
	}
}

// checkServerDataset writes, re-writes and validates a dataset under datasets/run-1 on a storage
// server, including a shard large enough to need more than one upload request, the way
// TestVersityGW does for S3.
func checkServerDataset(t *testing.T, server string, urlFor func(prefix string) string) {
	ctx := context.Background()
	url := urlFor("datasets/run-1")
	s := openTest(t, url)

	// Shard 0: ordinary rows. Shard 1: ~10 MB of incompressible text, more than the 8 MiB upload
	// buffer.
	rng := rand.New(rand.NewPCG(3, 4))
	var big []schemas.Row
	for i := range 40 {
		text := make([]byte, 256<<10)
		for j := range text {
			text[j] = byte('!' + rng.IntN(90))
		}
		big = append(big, makeRow(t, 1000+i, trajectoryText(i, 2)+string(text)))
	}
	shards := [][]schemas.Row{makeRows(t, 0, 20), big}
	var infos []ShardInfo
	for i, rows := range shards {
		info, err := WriteShard(ctx, s, fmt.Sprintf("part-%05d", i), rows)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	if infos[1].Bytes < 9<<20 {
		t.Fatalf("the big shard has only %d bytes", infos[1].Bytes)
	}
	// Idempotent re-writes, and conflicts, for the small and the big shard.
	for i, rows := range shards {
		name := fmt.Sprintf("part-%05d", i)
		again, err := WriteShard(ctx, s, name, rows)
		if err != nil || again != infos[i] {
			t.Fatalf("rewrite of %s: %+v, %v", name, again, err)
		}
		other := append([]schemas.Row{makeRow(t, 99999, trajectoryText(99999, 1))}, rows[1:]...)
		if _, err := WriteShard(ctx, s, name, other); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("conflicting write of %s: %v", name, err)
		}
	}
	config := fmt.Sprintf(`{"server":%q}`, server)
	m, err := WriteManifest(ctx, s, Manifest{CreatedAt: testCreated, Versions: testVersions, Shards: infos,
		Config: []byte(config)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteManifest(ctx, s, *m); err != nil {
		t.Fatalf("recommit: %v", err)
	}
	other := *m
	other.Counts = schemas.Counts{"x": 1}
	if _, err := WriteManifest(ctx, s, other); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("commit of another manifest: %v, want a conflict", err)
	}

	// A separate reader validates it and reads rows back.
	r := openTest(t, url)
	rep, err := Check(ctx, r, testLookup, CheckOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("Check = %+v, %v", rep.Problems, err)
	}
	if rep.Rows != 60 || rep.Shards != 2 {
		t.Errorf("checked %d rows in %d shards", rep.Rows, rep.Shards)
	}
	rows, err := ReadRows(ctx, r, infos[1].Path, 0)
	if err != nil || len(rows) != 40 || rows[39].Text != big[39].Text {
		t.Fatalf("ReadRows of the big shard = %d rows, %v", len(rows), err)
	}

	// The dataset lives under the URL's path inside the bucket.
	root := openTest(t, urlFor(""))
	for _, key := range []string{"datasets/run-1/" + ManifestKey, "datasets/run-1/" + infos[0].Path, "datasets/run-1/" + infos[1].Path} {
		if ok, err := root.Exists(ctx, key); !ok || err != nil {
			t.Errorf("%s: exists=%v err=%v", key, ok, err)
		}
	}
	data, err := root.ReadAll(ctx, "datasets/run-1/"+ManifestKey)
	if err != nil || !strings.Contains(string(data), fmt.Sprintf(`"server": %q`, server)) {
		t.Errorf("manifest read from the bucket's root: %v\n%s", err, data)
	}

	// Corrupt a shard behind the dataset's back: Validate names it.
	if err := s.Put(ctx, infos[0].Path, []byte("broken"), nil); err != nil {
		t.Fatal(err)
	}
	err = Validate(ctx, r, testLookup)
	var p *Problem
	if !errors.As(err, &p) || p.Shard != infos[0].Path {
		t.Errorf("Validate after corruption = %v", err)
	}
}

// TestPublishOnServers commits and publishes three versions into a prefix of each storage server
// (S3, GCS and Azure emulators on loopback; each skipped when not installed, unless CI is set):
// data/ and packed/ hold exactly the head's shards, made by server-side copies.
func TestPublishOnServers(t *testing.T) {
	if testing.Short() {
		t.Skip("publishing versions on the S3, GCS and Azure emulators: long integration test; run without -short")
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		start func(testing.TB) *emulators.Bucket
	}{{"s3-versitygw", emulators.S3}, {"gs-fake-gcs-server", emulators.GCS}, {"azblob-azurite", emulators.Azurite}} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, tc.start(t).URL("datasets/versions"))
			for i, v := range threeVersions {
				m, _ := commitPooled(t, s, v, i+1)
				if _, err := Publish(ctx, s, nil); err != nil {
					t.Fatal(err)
				}
				checkPublished(t, s, "", m)
			}
		})
	}
}
