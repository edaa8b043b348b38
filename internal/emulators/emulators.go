// Package emulators starts storage servers on loopback for tests: versitygw (S3), fake-gcs-server
// (GCS) and Azurite (Azure Blob), each with one empty bucket, and points the cloud SDKs' environment
// at them so that no request leaves the machine. Every server is stopped when its test ends.
//
// The servers are installed at the module root by .ci/run and the README's set-up command (bin/ and
// internal/emulators/testdata/azurite). A server that is not installed skips the test, or fails it
// when the CI environment variable is set.
package emulators

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// BucketName is the name of the bucket (or container) every emulator starts with.
const BucketName = "ndtrace"

// Bucket is the empty bucket of an emulator started for one test.
type Bucket struct {
	// Server is the emulator's name: versitygw, fake-gcs-server or azurite.
	Server string
	// Dir is where versitygw's posix backend keeps the bucket's objects, as plain files
	// <Dir>/<key>; empty for the other emulators.
	Dir string
	// url returns the storage URL of a prefix.
	url func(prefix string) string
	// endpoint is the server's endpoint (S3 only).
	endpoint string
	// stop and start stop the server and start it again with the same data (S3 only).
	stop, start func()
}

// Endpoint is the S3 server's endpoint URL (the endpoint parameter of its storage URLs); "" for
// the other emulators.
func (b *Bucket) Endpoint() string { return b.endpoint }

// Stop stops the server, as an outage would (its data stays): requests fail until Start. Only the
// S3 server can be stopped.
func (b *Bucket) Stop() {
	if b.stop == nil {
		panic("emulators: " + b.Server + " cannot be stopped")
	}
	b.stop()
}

// Start starts a stopped server again on the same address, with the same data.
func (b *Bucket) Start() {
	if b.start == nil {
		panic("emulators: " + b.Server + " cannot be started again")
	}
	b.start()
}

// URL returns the storage URL (for store.Open) of prefix inside the bucket; "" is the bucket's root.
func (b *Bucket) URL(prefix string) string { return b.url(prefix) }

// moduleRoot returns the folder of go.mod above the test's working directory.
func moduleRoot(t testing.TB) string {
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

// missing skips the test with msg, or fails it when CI is set.
func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// installedTool returns a server binary: $envVar, or bin/NAME at the module root. Without it the
// test is skipped, or fails when CI is set.
func installedTool(t testing.TB, envVar, name, install string) string {
	t.Helper()
	bin := os.Getenv(envVar)
	if bin == "" {
		bin = filepath.Join(moduleRoot(t), "bin", name)
	}
	if _, err := os.Stat(bin); err != nil {
		missing(t, fmt.Sprintf("%s not found at %s (install it at the module root with: %s, or set %s)", name, bin, install, envVar))
	}
	return bin
}

// RequireTool returns the path of a program on the PATH, skipping the test if it is missing
// (failing it when CI is set). why says what the test needs it for.
func RequireTool(t testing.TB, name, why string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing (%s) and CI is set", name, why)
		}
		t.Skipf("%s is missing (%s); install it to run this test", name, why)
	}
	return p
}

// freeLoopbackAddr returns 127.0.0.1:PORT for a port that was free a moment ago.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// ClosedEndpoint returns an http:// endpoint on loopback where nothing listens (a wrong port): a
// connection to it is refused at once.
func ClosedEndpoint(t testing.TB) string {
	t.Helper()
	return "http://" + freeLoopbackAddr(t)
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

// startLoopbackServer starts cmd and waits until something listens on addr. The process is killed
// when the test ends, or by the stop function it returns; its output is logged if the test failed.
func startLoopbackServer(t testing.TB, name string, cmd *exec.Cmd, addr string) (stop func()) {
	t.Helper()
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return stop
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
