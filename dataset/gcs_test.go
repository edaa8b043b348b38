package dataset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/ndtrace/ndtrace/schemas"
)

// fakeGCSInstall is the command that installs the GCS emulator TestGCSEmulator runs.
const fakeGCSInstall = "GOBIN=$PWD/bin go install github.com/fsouza/fake-gcs-server@v1.56.1"

// TestGCSEmulator runs the store conformance cases, the conditional-write checks and the dataset
// integration checks through gs:// against fake-gcs-server (in memory, plain HTTP, on loopback).
// gocloud.dev's gcsblob sends every request to $STORAGE_EMULATOR_HOST, unauthenticated, when that
// variable is set, so the dataset URLs are plain gs://BUCKET/PREFIX.
func TestGCSEmulator(t *testing.T) {
	bin := installedTool(t, "NDTRACE_FAKE_GCS_SERVER", "fake-gcs-server", fakeGCSInstall)
	addr := freeLoopbackAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "-scheme", "http", "-host", "127.0.0.1", "-port", port, "-backend", "memory",
		"-public-host", addr, "-external-url", "http://"+addr, "-log-level", "error")
	startLoopbackServer(t, "fake-gcs-server", cmd, addr)
	setGCSEnv(t, addr)
	createGCSBucket(t, addr, "ndtrace")

	runEmulatorSuite(t, "fake-gcs-server", func(prefix string) string { return "gs://ndtrace/" + prefix })
}

// setGCSEnv points the Google Cloud client at the emulator at addr and keeps it from looking for
// credentials anywhere else, so that no request leaves loopback.
func setGCSEnv(t *testing.T, addr string) {
	t.Setenv("STORAGE_EMULATOR_HOST", addr) // host:port, no scheme: gcsblob prepends http://
	t.Setenv("STORAGE_EMULATOR_HOST_GRPC", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())
	// Should anything still ask the GCE metadata server, it asks a closed loopback port.
	t.Setenv("GCE_METADATA_HOST", "127.0.0.1:1")
}

// createGCSBucket creates a bucket through the emulator's JSON API (gocloud.dev has no bucket
// creation).
func createGCSBucket(t *testing.T, addr, bucket string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := strings.NewReader(fmt.Sprintf(`{"name": %q}`, bucket))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/storage/v1/b?project=ndtrace-test", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var msg bytes.Buffer
		_, _ = msg.ReadFrom(resp.Body)
		t.Fatalf("create bucket %s: %s: %s", bucket, resp.Status, msg.String())
	}
}

// The helpers below are shared by the emulator tests (gcs_test.go, azure_test.go).

// installedTool returns a server binary: $envVar, or bin/NAME at the module root. Without it the
// test is skipped, or fails when CI is set.
func installedTool(t *testing.T, envVar, name, install string) string {
	t.Helper()
	bin := os.Getenv(envVar)
	if bin == "" {
		bin = filepath.Join(moduleRoot(t), "bin", name)
	}
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("%s not found at %s (install it at the module root with: %s, or set %s)", name, bin, install, envVar)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// freeLoopbackAddr returns 127.0.0.1:PORT for a port that was free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startLoopbackServer starts cmd and waits until something listens on addr. The process is killed
// when the test ends; its output is logged if the test failed.
func startLoopbackServer(t *testing.T, name string, cmd *exec.Cmd, addr string) {
	t.Helper()
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("%s exited: %v\n%s", name, err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s within 30s:\n%s", name, addr, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runEmulatorSuite runs, against one storage server, every store conformance case (each under its
// own prefix), the conditional-write checks and the dataset integration checks. urlFor returns the
// dataset URL for a prefix inside the server's bucket ("" is the bucket's root).
func runEmulatorSuite(t *testing.T, server string, urlFor func(prefix string) string) {
	for _, tc := range conformanceCases {
		t.Run("conformance/"+tc.name, func(t *testing.T) { tc.run(t, openTest(t, urlFor("conformance/"+tc.name))) })
	}
	t.Run("conditional-write", func(t *testing.T) { checkConditionalWrites(t, openTest(t, urlFor("conditional"))) })
	t.Run("put-once-race", func(t *testing.T) { checkPutOnceRace(t, openTest(t, urlFor("race"))) })
	t.Run("dataset", func(t *testing.T) { checkServerDataset(t, server, urlFor) })
}

// checkConditionalWrites checks that the server refuses a write with IfNotExist to an existing
// key, for a single-request upload and for one larger than the upload buffer (GCS: resumable
// upload; Azure: staged blocks and a block-list commit), and keeps the first content. PutOnce
// relies on this when writers race; its own look-before-write hides it from the other tests. It
// writes the way PutOnce does (Store.putObject: Bucket.WriteAll, or Bucket.Upload on Azure).
func checkConditionalWrites(t *testing.T, s *Store) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	for _, tc := range []struct {
		name string
		size int
	}{{"small", 100}, {"multi-request", 10 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			key := "cond/" + tc.name
			first, second := random(tc.size), random(tc.size)
			opts := &blob.WriterOptions{IfNotExist: true, BufferSize: 8 << 20}
			if err := s.putObject(ctx, key, first, opts); err != nil {
				t.Fatalf("first conditional write: %v", err)
			}
			err := s.putObject(ctx, key, second, opts)
			if gcerrors.Code(err) != gcerrors.FailedPrecondition {
				t.Fatalf("second conditional write to %s: %v (code %v), want FailedPrecondition", key, err, gcerrors.Code(err))
			}
			got, err := s.ReadAll(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, first) {
				t.Errorf("%s holds %d bytes that are not the first write's", key, len(got))
			}
		})
	}
}

// checkPutOnceRace lets writers race for one key, with different and with equal content: exactly
// one creates the object; the others get ErrConflict (different content) or succeed without
// writing (equal content).
func checkPutOnceRace(t *testing.T, s *Store) {
	const writers = 8
	ctx := context.Background()
	for _, same := range []bool{false, true} {
		key := fmt.Sprintf("race-same-%v", same)
		type result struct {
			created bool
			err     error
		}
		results := make([]result, writers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range writers {
			data := []byte(fmt.Sprintf("writer %d", i))
			if same {
				data = []byte("every writer's content")
			}
			wg.Go(func() {
				<-start
				created, err := s.PutOnce(ctx, key, data, "text/plain", nil)
				results[i] = result{created, err}
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, r := range results {
			switch {
			case r.err == nil && r.created:
				if winner >= 0 {
					t.Errorf("%s: writers %d and %d both created the object", key, winner, i)
				}
				winner = i
			case r.err == nil && !same:
				t.Errorf("%s: writer %d succeeded without writing, but its content differs", key, i)
			case r.err != nil && (same || !errors.Is(r.err, ErrConflict)):
				t.Errorf("%s: writer %d: %v", key, i, r.err)
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no writer created the object: %+v", key, results)
		}
		got, err := s.ReadAll(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("writer %d", winner)
		if same {
			want = "every writer's content"
		}
		if string(got) != want {
			t.Errorf("%s holds %q, want the winner's %q", key, got, want)
		}
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
		if _, err := WriteShard(ctx, s, name, other); !errors.Is(err, ErrConflict) {
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
	other.Counts = map[string]int64{"x": 1}
	if _, err := WriteManifest(ctx, s, other); !errors.Is(err, ErrConflict) {
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
	if err := s.Bucket().WriteAll(ctx, infos[0].Path, []byte("broken"), nil); err != nil {
		t.Fatal(err)
	}
	err = Validate(ctx, r, testLookup)
	var p *Problem
	if !errors.As(err, &p) || p.Shard != infos[0].Path {
		t.Errorf("Validate after corruption = %v", err)
	}
}
