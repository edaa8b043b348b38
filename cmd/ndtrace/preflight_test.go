package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/internal/emulators"
	"github.com/ndtrace/ndtrace/schemas"
)

// preflightBound is how long a misconfigured spec may take to be refused: far above the seconds a
// preflight takes, far below the minutes of retried activities it replaces.
const preflightBound = 30 * time.Second

// checkRefused runs ndtrace with args and checks that it exits 2 within preflightBound with one line
// of stderr that holds every one of want and no Go type.
func checkRefused(t *testing.T, args []string, want ...string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(args, &stdout, &stderr)
	if took := time.Since(start); took > preflightBound {
		t.Errorf("refused after %s, want within %s", took, preflightBound)
	}
	msg := strings.TrimSpace(stderr.String())
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr: %s", code, msg)
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("stderr is more than one line: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("stderr %q lacks %q", msg, w)
		}
	}
	for _, goType := range []string{"schemas.", "*fs.PathError", "smithy", "operation error"} {
		if strings.Contains(msg, goType) {
			t.Errorf("stderr %q names %q", msg, goType)
		}
	}
}

// submitArgs are the arguments of an ndtrace submit of spec to a cluster that is never reached: a
// preflight refuses the spec before any connection.
func submitArgs(spec string) []string {
	return []string{"submit", "--spec", spec, "--temporal", "127.0.0.1:1"}
}

// TestPreflightSpec checks that every name and path a later stage resolves is checked before a
// workflow starts, and that what is wrong is said in one line naming the field in the spec.
func TestPreflightSpec(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, "good.jsonl", `{"id": "a", "code": "def f(x):\n    return x\n", "input": "1"}`+"\n")
	out := filepath.Join(dir, "out")
	file := writeFile(t, "file", "a file, not a folder\n")
	base := "output: " + out + "\nsources:\n  - kind: jsonl\n    path: " + good + "\n"
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown tokenizer", base + "tokenizer: gpt5\n",
			[]string{`spec.yaml: tokenizer: unknown tokenizer "gpt5" (want one of bytes, cl100k_base, o200k_base, hf:PATH, llama3:PATH`}},
		{"missing tokenizer file", base + "tokenizer: hf:/nonexistent/tokenizer.json\n",
			[]string{"tokenizer: hf:/nonexistent/tokenizer.json: cannot read the tokenizer file /nonexistent/tokenizer.json (no such file or directory)"}},
		{"unknown policy", base + "policy: greedy\n", []string{`policy: "greedy" is not paper or step_into`}},
		{"missing evaluation set", base + "decontaminate:\n  - path: /nonexistent/cruxeval.jsonl\n",
			[]string{"decontaminate[0].path: /nonexistent/cruxeval.jsonl does not exist"}},
		{"unknown field", base + "    limt: 3\n", []string{`spec.yaml: sources[0]: unknown field "limt" (did you mean "limit"?)`}},
		{"missing source", base + "  - kind: examples\n  - kind: python\n    path: /nonexistent/f.py\n    calls: ['f(1)']\n",
			[]string{"spec.yaml: sources[2].path: /nonexistent/f.py does not exist (fix the path"}},
		{"source is a folder", base + "  - kind: jsonl\n    path: " + dir + "\n", []string{"sources[1].path: " + dir + " is a folder, not a file"}},
		{"missing repository folder", base + "  - kind: repository\n    url: /nonexistent/repo\n", []string{"sources[1].url: /nonexistent/repo does not exist"}},
		{"missing crawl list", base + "  - kind: repository\n    list: /nonexistent/repos.txt\n", []string{"sources[1].list: /nonexistent/repos.txt does not exist"}},
		{"dedup against nothing", base + "dedup_against: [" + filepath.Join(dir, "empty") + "]\n",
			[]string{"dedup_against[0]: " + filepath.Join(dir, "empty") + " has no manifest"}},
		{"output is a file", "output: " + file + "/ds\nsources:\n  - kind: examples\n",
			[]string{"output: " + file + "/ds cannot be used: a file stands where a folder is expected"}},
		{"every problem at once", base + "tokenizer: gpt5\ndecontaminate:\n  - path: /nonexistent/e.jsonl\n",
			[]string{`tokenizer: unknown tokenizer "gpt5"`, "; decontaminate[0].path: /nonexistent/e.jsonl does not exist"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkRefused(t, submitArgs(writeSpec(t, t.TempDir(), tc.yaml)), tc.want...)
		})
	}
	// A good spec passes, and its probe leaves nothing behind.
	if err := preflight(t.Context(), mustLoad(t, base), "", true); err != nil {
		t.Fatalf("a good spec: %v", err)
	}
	if es, err := os.ReadDir(filepath.Join(out, "work", "preflight")); err != nil || len(es) != 0 {
		t.Errorf("work/preflight after the probe: %v, %v; want an empty folder", es, err)
	}
	// ndtrace run refuses the same way, before it starts a server or a sandbox.
	t.Run("run", func(t *testing.T) {
		checkRefused(t, []string{"run", "--spec", writeSpec(t, t.TempDir(), base+"tokenizer: gpt5\n")}, `tokenizer: unknown tokenizer "gpt5"`)
	})
	// Local paths that exist only where the workers run: submit --no-local-check leaves them to
	// the workers (and goes on to the cluster, which is not there).
	t.Run("no local check", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		spec := writeSpec(t, t.TempDir(), "output: "+out+"\nsources:\n  - kind: jsonl\n    path: /only/on/workers.jsonl\n")
		code := run([]string{"submit", "--no-local-check", "--spec", spec, "--temporal", "127.0.0.1:1"}, &stdout, &stderr)
		if code == 0 || strings.Contains(stderr.String(), "sources[0].path") {
			t.Errorf("exit %d, stderr %q; want the cluster's error, not the path's", code, stderr.String())
		}
	})
}

// mustLoad parses a spec.
func mustLoad(t *testing.T, yaml string) schemas.Spec {
	t.Helper()
	s, err := loadSpec(writeSpec(t, t.TempDir(), yaml), "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPreflightReadOnlyFolder checks a real read-only output folder (mode 0555). Root writes in it
// all the same, so the case is skipped as root (TestPreflightSpec's "output is a file" is the
// check that holds for every user).
func TestPreflightReadOnlyFolder(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes in a folder of mode 0555")
	}
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	checkRefused(t, submitArgs(writeSpec(t, t.TempDir(), "output: "+ro+"\nsources:\n  - kind: examples\n")),
		"output: "+ro+" cannot be written: permission denied")
}

// TestPreflightS3 checks the output's probe against a real S3 server: a bucket that does not exist,
// an endpoint port nothing listens on, and an invalid bucket name are each refused in one line
// within seconds; the bucket that exists passes, and the probe leaves no object behind.
func TestPreflightS3(t *testing.T) {
	if testing.Short() {
		t.Skip("S3 server: long integration test; run without -short")
	}
	b := emulators.S3(t)
	good := b.URL("ds")
	endpoint, closed := b.Endpoint(), emulators.ClosedEndpoint(t)
	spec := func(output string) string {
		return writeSpec(t, t.TempDir(), fmt.Sprintf("output: %q\nsources:\n  - kind: examples\n", output))
	}
	for _, tc := range []struct {
		name, output string
		want         string
	}{
		{"missing bucket", emulators.S3URL("no-such-bucket", "ds", endpoint), "cannot be written: the bucket does not exist (create it, or fix the bucket's name in the URL)"},
		{"wrong port", emulators.S3URL(emulators.BucketName, "ds", closed), "connection refused (check the URL's endpoint, host and port)"},
		{"invalid bucket name", emulators.S3URL("Bad_Bucket", "ds", endpoint), "the bucket's name is invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkRefused(t, submitArgs(spec(tc.output)), "spec.yaml: output: s3://", tc.want)
		})
	}
	if err := preflight(t.Context(), mustLoad(t, fmt.Sprintf("output: %q\nsources:\n  - kind: examples\n", good)), "", true); err != nil {
		t.Fatalf("the bucket that exists: %v", err)
	}
	if es, err := os.ReadDir(filepath.Join(b.Dir, "ds", "work", "preflight")); err == nil && len(es) > 0 {
		t.Errorf("the probe left %d objects", len(es))
	}
}
