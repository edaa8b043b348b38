package emulators

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// fakeGCSInstall is the command that installs the GCS emulator GCS runs.
const fakeGCSInstall = "GOBIN=$PWD/bin go install github.com/fsouza/fake-gcs-server@v1.56.1"

// GCS runs fake-gcs-server (in memory, plain HTTP) on a free loopback port with an empty bucket
// named BucketName, and points the Google Cloud client at it for the rest of the test: gocloud.dev's
// gcsblob sends every request to $STORAGE_EMULATOR_HOST, unauthenticated, when that variable is
// set, so the URLs are plain gs://BUCKET/PREFIX. The binary is $NDTRACE_FAKE_GCS_SERVER, or
// bin/fake-gcs-server at the module root; without it the test is skipped, or fails when CI is set.
func GCS(t testing.TB) *Bucket {
	t.Helper()
	bin := installedTool(t, "NDTRACE_FAKE_GCS_SERVER", "fake-gcs-server", fakeGCSInstall)
	addr := freeLoopbackAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "-scheme", "http", "-host", "127.0.0.1", "-port", port, "-backend", "memory",
		"-public-host", addr, "-external-url", "http://"+addr, "-log-level", "error")
	startLoopbackServer(t, "fake-gcs-server", cmd, addr)
	setGCSEnv(t, addr)
	createGCSBucket(t, addr, BucketName)
	return &Bucket{
		Server: "fake-gcs-server",
		url:    func(prefix string) string { return "gs://" + BucketName + "/" + prefix },
	}
}

// setGCSEnv points the Google Cloud client at the emulator at addr and keeps it from looking for
// credentials anywhere else, so that no request leaves loopback.
func setGCSEnv(t testing.TB, addr string) {
	t.Setenv("STORAGE_EMULATOR_HOST", addr) // host:port, no scheme: gcsblob prepends http://
	t.Setenv("STORAGE_EMULATOR_HOST_GRPC", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())
	// Should anything still ask the GCE metadata server, it asks a closed loopback port.
	t.Setenv("GCE_METADATA_HOST", "127.0.0.1:1")
}

// createGCSBucket creates a bucket through the emulator's JSON API (gocloud.dev has no bucket
// creation).
func createGCSBucket(t testing.TB, addr, bucket string) {
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
