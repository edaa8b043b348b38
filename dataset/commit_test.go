package dataset

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/schemas"
)

// TestCommitChain commits versions of one dataset out of order and twice: every version is kept
// under versions/, manifest.json always ends at the newest, an older version committed late does
// not roll it back, a retried commit changes nothing, and each version's rejects are its own.
func TestCommitChain(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "mem://")
	base := writeTestDataset(t, s, 2, 3)
	at := func(h int) time.Time { return time.Date(2026, 11, 24, h, 0, 0, 0, time.UTC) }
	commit := func(id string, h int, rejects string) (*Manifest, bool) {
		t.Helper()
		ref, err := PutObject(ctx, s, VersionPrefix(id)+"rejects/p1-000000.jsonl", []byte(rejects), 1)
		if err != nil {
			t.Fatal(err)
		}
		m := Manifest{CreatedAt: at(h), Versions: base.Versions, Shards: base.Shards, Rejects: []ObjectRef{ref}}
		got, head, err := Commit(ctx, s, id, m)
		if err != nil {
			t.Fatal(err)
		}
		return got, head
	}
	head := func() string {
		t.Helper()
		m, err := ReadManifest(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		return m.Version
	}
	if m, ok := commit("v10", 10, `{"key":"a","class":"timeout","reason":"timeout"}`+"\n"); !ok || m.FormatVersion != 3 || head() != "v10" {
		t.Fatalf("first commit: head %v, %s", ok, head())
	}
	if _, ok := commit("v12", 12, `{"key":"b","class":"timeout","reason":"timeout"}`+"\n"); !ok || head() != "v12" {
		t.Fatalf("newer commit: head %v, %s", ok, head())
	}
	// An older run that commits late: kept, not the head.
	if _, ok := commit("v11", 11, `{"key":"c","class":"timeout","reason":"timeout"}`+"\n"); ok || head() != "v12" {
		t.Fatalf("late older commit: head %v, %s", ok, head())
	}
	// A retry of a committed version: no change.
	if _, ok := commit("v12", 12, `{"key":"b","class":"timeout","reason":"timeout"}`+"\n"); !ok || head() != "v12" {
		t.Fatalf("retried commit: head %v, %s", ok, head())
	}
	for id, want := range map[string]string{"v10": "a", "v11": "c", "v12": "b"} {
		m, err := ReadVersion(ctx, s, id)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		if _, err := EachReject(ctx, s, m, func(r schemas.Reject) error { keys = append(keys, r.Key); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(keys) != 1 || keys[0] != want {
			t.Errorf("version %s: rejects %v, want [%s]", id, keys, want)
		}
	}
	// A tampered rejects object is refused.
	m, _ := ReadVersion(ctx, s, "v10")
	if err := s.Put(ctx, m.Rejects[0].Key, []byte(`{"key":"x"}`+"\n"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := EachReject(ctx, s, m, func(schemas.Reject) error { return nil }); err == nil {
		t.Error("a tampered rejects object was read")
	}
}

// TestCommitRefusesOversizedManifest lists so many shards inline that the manifest passes the size
// readers accept: the commit fails before anything is written.
func TestCommitRefusesOversizedManifest(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	ctx := context.Background()
	s := openTest(t, "mem://")
	var m Manifest
	m.CreatedAt = time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 300_000; i++ {
		m.Shards = append(m.Shards, ShardInfo{Path: ShardPath(fmt.Sprintf("part-%024x", i)), Rows: 1, Tokens: 10, LearnedTokens: 5,
			Bytes: 100, SHA256: fmt.Sprintf("%064x", i)})
	}
	_, _, err := Commit(ctx, s, "v1", m)
	if err == nil || !strings.Contains(err.Error(), "more than readers accept") {
		t.Fatalf("Commit = %v, want the size refused", err)
	}
	if ok, _ := s.Exists(ctx, ManifestKey); ok {
		t.Error("a manifest was written")
	}
}
