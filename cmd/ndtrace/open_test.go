package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/emulators"
)

// readCommands are the commands that read a committed dataset named by a positional URL.
var readCommands = []string{"stats", "validate", "inspect"}

// checkReadError runs every read command on url and checks that each fails with exit 1 and the
// same one line, "ndtrace CMD: " then want.
func checkReadError(t *testing.T, url, want string) {
	t.Helper()
	for _, cmd := range readCommands {
		stdout, stderr, code := runCmd(cmd, url)
		if line := "ndtrace " + cmd + ": " + want + "\n"; code != 1 || stdout != "" || stderr != line {
			t.Errorf("%s %s: exit %d, want 1\nstderr %q\nwant   %q", cmd, url, code, stderr, line)
		}
	}
}

// TestReadMissingDataset checks that stats, validate and inspect say in the same one line what is
// missing: the folder (which they do not create), or the committed dataset in a folder that exists.
func TestReadMissingDataset(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	checkReadError(t, missing, missing+": no dataset: folder "+missing+" does not exist (check the path)")
	checkReadError(t, "file://"+missing, "file://"+missing+": no dataset: folder "+missing+" does not exist (check the path)")
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("reading a missing folder created it: %v", err)
	}
	checkReadError(t, dir, dir+": no committed dataset (no manifest.json): check the URL, or make one with 'ndtrace run --out URL'")
}

// TestReadMissingBucket checks, against a real S3 server, that the read commands tell a bucket that
// does not exist, an endpoint that does not answer and a bucket without a dataset apart.
func TestReadMissingBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server: long integration test; run without -short")
	}
	bucket := emulators.S3(t)
	empty := bucket.URL("nothing-here")
	checkReadError(t, empty, empty+": no committed dataset (no manifest.json): check the URL, or make one with 'ndtrace run --out URL'")

	noBucket := strings.Replace(empty, "s3://"+emulators.BucketName+"/", "s3://no-such-bucket/", 1)
	checkReadError(t, noBucket, noBucket+`: bucket "no-such-bucket" does not exist (check the URL: the bucket's name, endpoint and region)`)

	t.Run("wrong secret", func(t *testing.T) {
		t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
		checkReadError(t, empty, empty+": cannot read the store: access denied (check the credentials and the bucket's permissions)")
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	down := emulators.S3URL(emulators.BucketName, "x", "http://"+addr)
	checkReadError(t, down, down+": cannot read the store: dial tcp "+addr+": connect: connection refused")
}
