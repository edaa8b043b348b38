package emulators

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// versitygwInstall is the command that installs the S3 gateway S3 runs.
const versitygwInstall = "GOBIN=$PWD/bin go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// S3 runs a real S3 server, versitygw with its posix backend in a temporary folder, on a free
// loopback port, with an empty bucket named BucketName, and sets the AWS SDK's environment (static
// test credentials, no instance metadata service) for the rest of the test. The binary is
// $NDTRACE_VERSITYGW, or bin/versitygw at the module root; without it the test is skipped, or
// fails when CI is set.
func S3(t testing.TB) *Bucket {
	t.Helper()
	bin := installedTool(t, "NDTRACE_VERSITYGW", "versitygw", versitygwInstall)
	SetAWSEnv(t)
	addr := freeLoopbackAddr(t)
	root := t.TempDir()
	command := func() *exec.Cmd {
		return exec.Command(bin, "--access", os.Getenv("AWS_ACCESS_KEY_ID"), "--secret", os.Getenv("AWS_SECRET_ACCESS_KEY"),
			"--port", addr, "posix", root)
	}
	b := &Bucket{Server: "versitygw", Dir: root + "/" + BucketName}
	b.stop = startLoopbackServer(t, "versitygw", command(), addr)
	b.start = func() { b.stop = startLoopbackServer(t, "versitygw", command(), addr) }
	endpoint := "http://" + addr
	b.endpoint = endpoint
	createS3Bucket(t, endpoint, BucketName)
	b.url = func(prefix string) string { return S3URL(BucketName, prefix, endpoint) }
	return b
}

// SetAWSEnv points the AWS SDK at static test credentials and turns off the EC2 metadata service,
// so that no request leaves loopback.
func SetAWSEnv(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", "ndtrace-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "ndtrace-test-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
}

// S3URL returns the s3:// storage URL of prefix in bucket on an S3-compatible server at endpoint.
func S3URL(bucket, prefix, endpoint string) string {
	q := url.Values{}
	q.Set("endpoint", endpoint)
	q.Set("use_path_style", "true")
	q.Set("disable_https", "true")
	q.Set("region", "us-east-1")
	// versitygw returns no response checksums; don't ask for them.
	q.Set("response_checksum_validation", "when_required")
	q.Set("request_checksum_calculation", "when_required")
	return "s3://" + bucket + "/" + prefix + "?" + q.Encode()
}

// createS3Bucket creates a bucket with the AWS SDK (gocloud.dev has no bucket creation).
func createS3Bucket(t testing.TB, endpoint, bucket string) {
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
