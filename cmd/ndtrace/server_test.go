package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startServer runs "ndtrace server" in-process with args and returns once it prints that it is
// ready. stop cancels its context, as SIGINT does, and checks that it returns without error.
func startServer(t *testing.T, args ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		err := runServer(ctx, args, pw, &stderr)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	var printed strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		printed.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "starts a dataset") {
			break
		}
	}
	if sc.Err() != nil || !strings.Contains(printed.String(), "starts a dataset") {
		cancel()
		t.Fatalf("server did not start: %v\nstdout:\n%s\nstderr:\n%s", <-done, printed.String(), stderr.String())
	}
	go io.Copy(io.Discard, pr)
	t.Logf("ndtrace server %s:\n%s", strings.Join(args, " "), printed.String())
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server returned %v after SIGINT", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// cli runs one ndtrace command in-process and returns its exit code and output.
func cli(args ...string) (int, string) {
	var out bytes.Buffer
	code := run(args, &out, &out)
	return code, out.String()
}

// waitStatus runs "ndtrace status id" until its output has want.
func waitStatus(t *testing.T, temporal, id, want string) string {
	t.Helper()
	var out string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		_, out = cli("status", id, "--temporal", temporal)
		if strings.Contains(out, want) {
			return out
		}
	}
	t.Fatalf("status %s never showed %q; last:\n%s", id, want, out)
	return ""
}

// TestServer runs "ndtrace server" on a SQLite file three times, as a person on one machine would:
//
//  1. without a worker: submit one dataset, submit a second and cancel it;
//  2. restarted with --worker: the first dataset, submitted before the restart, runs to completion,
//     the second ends cancelled, and the Web UI, loaded in headless Chromium, lists both;
//  3. restarted headless without a worker: status still reports the first dataset's result.
func TestServer(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	chromium := requireChromium(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "state", "temporal.db")
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	uiPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	temporal := fmt.Sprintf("127.0.0.1:%d", port)
	base := []string{"--db", db, "--port", fmt.Sprint(port), "--ui-port", fmt.Sprint(uiPort)}
	specA := writeSpec(t, t.TempDir(), fmt.Sprintf("name: srv-a\noutput: %s\nsources:\n  - kind: examples\n", filepath.Join(dir, "a")))
	specB := writeSpec(t, t.TempDir(), fmt.Sprintf("name: srv-b\noutput: %s\nsources:\n  - kind: examples\n", filepath.Join(dir, "b")))

	// 1. No worker: the workflows wait.
	stop := startServer(t, base...)
	submit := func(spec string) string {
		code, out := cli("submit", "--spec", spec, "--temporal", temporal)
		if code != 0 {
			t.Fatalf("submit: exit %d: %s", code, out)
		}
		return strings.TrimSpace(out)
	}
	idA, idB := submit(specA), submit(specB)
	if code, out := cli("cancel", idB, "--temporal", temporal); code != 0 || !strings.Contains(out, "cancel requested") {
		t.Fatalf("cancel: exit %d: %s", code, out)
	}
	stop()

	// 2. Restarted with a worker on the same database.
	stop = startServer(t, append(base, "--worker", "--trace-concurrency", "1", "--io-concurrency", "2")...)
	out := waitStatus(t, temporal, idA, "committed")
	if !strings.Contains(out, "rows in") || !strings.Contains(out, filepath.Join(dir, "a")) {
		t.Errorf("status of the completed dataset lacks its summary:\n%s", out)
	}
	waitStatus(t, temporal, idB, "cancelled")
	if _, err := os.Stat(filepath.Join(dir, "b", "manifest.json")); err == nil {
		t.Error("the cancelled dataset committed a manifest")
	}
	page := webUIWorkflows(t, chromium, fmt.Sprintf("http://127.0.0.1:%d/namespaces/default/workflows", uiPort), idA, idB)
	for _, s := range []string{idA, idB, `data-testid="workflow-status-Completed"`, `data-testid="workflow-status-Canceled"`} {
		if !strings.Contains(page, s) {
			t.Errorf("the Web UI's workflow list lacks %q", s)
		}
	}
	// The view docs/operations.md gives lists the datasets without their batches (which the
	// default list shows: children are top-level there). A batch's ID is "<dataset ID>/<version>/p1-…".
	if !strings.Contains(page, "/p1-") {
		t.Errorf("the Web UI's default list shows no batch")
	}
	top := webUIWorkflows(t, chromium, fmt.Sprintf("http://127.0.0.1:%d/namespaces/default/workflows?query=%%60ParentWorkflowId%%60+is+null", uiPort), idA, idB)
	if rows := strings.Count(top, `data-testid="workflow-status-`); strings.Contains(top, "/p1-") || rows != 2 {
		t.Errorf("the Web UI's list with the query %s shows %d workflows, batches among them: %v", topLevelQuery, rows, strings.Contains(top, "/p1-"))
	}
	stop()

	// 3. Restarted again, without Web UI or worker: the result is still there.
	startServer(t, append(base, "--headless")...)
	if code, out := cli("status", idA, "--temporal", temporal); code != 0 || !strings.Contains(out, "committed") || !strings.Contains(out, "rows in") {
		t.Errorf("status after a restart: exit %d:\n%s", code, out)
	}
}

// webUIWorkflows loads the Web UI's workflow list in headless Chromium until the DOM it renders
// has every one of ids (the page is an app that fetches the list after it loads) and returns it.
// Chromium resolves no host name, so the page can reach nothing but the loopback UI server.
func webUIWorkflows(t *testing.T, chromium, url string, ids ...string) string {
	t.Helper()
	profile := t.TempDir()
	var dom string
	for try := 0; try < 10; try++ {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		out, err := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
			"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--disable-dev-shm-usage", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--user-data-dir="+profile,
			"--virtual-time-budget=15000", "--dump-dom", url).Output()
		cancel()
		if err != nil {
			t.Fatalf("chromium --dump-dom %s: %v", url, err)
		}
		dom = string(out)
		missing := false
		for _, id := range ids {
			missing = missing || !strings.Contains(dom, id)
		}
		if !missing {
			return dom
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("the Web UI at %s never listed %v; last DOM (%d bytes):\n%.2000s", url, ids, len(dom), dom)
	return ""
}

// TestServerFlags checks the mistakes "ndtrace server" refuses before starting anything.
func TestServerFlags(t *testing.T) {
	busy, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", busy))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	free, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "temporal.db")
	tests := []struct {
		name string
		args []string
		code int
		has  string
	}{
		{"bad ip", []string{"--ip", "localhost"}, 2, `--ip "localhost": not an IP address`},
		{"same ports", []string{"--port", "7300", "--ui-port", "7300"}, 2, "must differ"},
		{"port out of range", []string{"--port", "70000"}, 2, "between 1 and 65535"},
		{"port in use", []string{"--port", fmt.Sprint(busy)}, 1, "is another Temporal server running?"},
		{"ui port in use", []string{"--port", fmt.Sprint(free), "--ui-port", fmt.Sprint(busy)}, 1, "--ui-port: cannot listen"},
		{"bad worker flag", []string{"--worker", "--queues", "gpu"}, 2, `unknown queue "gpu"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out := cli(append([]string{"server", "--db", db}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.has) {
				t.Errorf("exit %d, output %q; want %d and %q", code, out, tc.code, tc.has)
			}
			if _, err := os.Stat(db); err == nil {
				t.Errorf("a refused start created %s", db)
			}
		})
	}
}

func TestDefaultServerDB(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("NDTRACE_STATE", "")
	if got, want := defaultServerDB(), filepath.Join(cache, "ndtrace", "state", "temporal.db"); got != want {
		t.Errorf("defaultServerDB() = %s, want %s", got, want)
	}
}
