package dataset

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// versitygwInstall is the command that installs the S3 gateway the integration test runs.
const versitygwInstall = "GOBIN=$PWD/bin go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// moduleRoot returns the folder of go.mod above the test's working directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// versitygwBinary returns the versitygw binary: $NDTRACE_VERSITYGW, or bin/versitygw at the module
// root. Without it the test is skipped, or fails when CI is set.
func versitygwBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("NDTRACE_VERSITYGW")
	if bin == "" {
		bin = filepath.Join(moduleRoot(t), "bin", "versitygw")
	}
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("versitygw not found at %s (install it at the module root with: %s, or set NDTRACE_VERSITYGW)", bin, versitygwInstall)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// lockedBuffer collects a process's output for failure messages.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startVersityGW runs versitygw with a posix backend in a temporary folder on a free loopback port
// and returns its endpoint and the backend folder. The gateway is stopped when the test ends.
func startVersityGW(t *testing.T) (endpoint, root string) {
	t.Helper()
	bin := versitygwBinary(t)
	setAWSEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	root = t.TempDir()
	cmd := exec.Command(bin, "--access", os.Getenv("AWS_ACCESS_KEY_ID"), "--secret", os.Getenv("AWS_SECRET_ACCESS_KEY"),
		"--port", addr, "posix", root)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("versitygw output:\n%s", out.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("versitygw exited: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not listen on %s within 20s:\n%s", addr, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "http://" + addr, root
}

// createBucket creates a bucket with the AWS SDK (gocloud.dev has no bucket creation).
func createBucket(t *testing.T, endpoint, bucket string) {
	t.Helper()
	client := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), ""),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
}

// TestVersityGW writes, re-writes and validates a dataset through s3:// against a real S3 server
// (versitygw, posix backend), including a shard large enough for a multipart upload.
func TestVersityGW(t *testing.T) {
	ep, root := startVersityGW(t)
	createBucket(t, ep, "ndtrace")
	checkServerDataset(t, "versitygw", func(prefix string) string { return s3URL("ndtrace", prefix, ep) })
	// The posix backend stores objects as plain files under <root>/<bucket>/<key>.
	data, err := os.ReadFile(filepath.Join(root, "ndtrace", "datasets", "run-1", ManifestKey))
	if err != nil || !strings.Contains(string(data), `"server": "versitygw"`) {
		t.Errorf("manifest on the gateway's disk: %v\n%s", err, data)
	}
}
