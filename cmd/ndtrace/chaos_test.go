package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/internal/emulators"
	"github.com/ndtrace/ndtrace/pipeline"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/workflows"
)

// proc is a child ndtrace process of the chaos test, killed with its process group. Its output
// goes to a log file in NDTRACE_CHAOS_LOGS (default: the test's temporary folder).
type proc struct {
	cmd *exec.Cmd
	out *lockedLog
}

// lockedLog is a process's output: written to a file, kept for messages.
type lockedLog struct {
	f *os.File
}

func (l *lockedLog) String() string {
	data, _ := os.ReadFile(l.f.Name())
	if len(data) > 8000 {
		data = data[len(data)-8000:]
	}
	return string(data)
}

var procSeq int

func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	dir := os.Getenv("NDTRACE_CHAOS_LOGS")
	if dir == "" {
		dir = t.TempDir()
	}
	procSeq++
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%02d-%s.log", procSeq, args[0])))
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: exec.Command(bin, args...), out: &lockedLog{f: f}}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	return p
}

func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		_ = p.cmd.Wait()
	}
}

// TestChaos runs one dataset through every failure the orchestration must ride out, on a real
// in-process Temporal server (ndtrace run --db, its state in SQLite), real worker processes and a
// real S3 server (versitygw), and checks that its shards are byte-identical to an undisturbed
// run's: workers killed with SIGKILL mid-TraceBatch (the history must show a retried attempt),
// mid-BuildShard and mid-finalize; the server killed and restarted from its --db; the S3 server
// stopped for three minutes. It takes about ten minutes.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	bucket := emulators.S3(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	// The items' wall-clock limit is an input a loaded machine changes. At 2 s, with fuzzers and
	// compilers running beside it, the undisturbed run once gave no rows for three items and other
	// rows for a fourth. On a quiet machine, and beside eight busy loops, these items take
	// milliseconds: the default 10 s leaves room for any load.
	specFor := func(name, prefix string) string {
		return writeSpec(t, filepath.Join(dir, name), fmt.Sprintf(
			"name: chaos\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\n    limit: 400\nbatch_size: 10\nparallelism: 2\npack_length: 2048\nlimits:\n  timeout: 10s\ncreated_at: 2026-11-24T00:00:00Z\n",
			bucket.URL(prefix), cruxeval.Path(t)))
	}
	os.MkdirAll(filepath.Join(dir, "base"), 0o755)
	os.MkdirAll(filepath.Join(dir, "chaos"), 0o755)

	// The undisturbed run.
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--spec", specFor("base", "base")}, &stdout, &stderr); code != 0 {
		t.Fatalf("undisturbed run: exit %d: %s", code, stderr.String())
	}
	want := goldenShards(t, bucket.URL("base"))

	// The disturbed run: a server process (no worker) and worker processes.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	db := filepath.Join(dir, "temporal.db")
	spec := specFor("chaos", "chaos")
	server := func() *proc {
		return startProc(t, bin, "run", "--spec", spec, "--db", db, "--port", fmt.Sprint(port), "--no-worker")
	}
	workers := func() []*proc {
		return []*proc{startProc(t, bin, "worker", "--temporal", addr, "--trace-concurrency", "1"),
			startProc(t, bin, "worker", "--temporal", addr, "--trace-concurrency", "1")}
	}
	killAll := func(ps []*proc) {
		for _, p := range ps {
			p.kill()
		}
	}
	srv := server()
	ws := workers()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	var c client.Client
	for c == nil {
		if c, err = client.Dial(client.Options{HostPort: addr, Logger: sdkLogger()}); err != nil {
			c = nil
			if ctx.Err() != nil {
				t.Fatalf("server: %v\n%s", err, srv.out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	defer func() { c.Close() }()
	chaosSpec := mustSpec(t, spec)
	id := workflows.WorkflowID(chaosSpec)
	version := pipeline.NewRun(chaosSpec, time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)).ID

	// pending reports whether an activity of one of the types is pending, in the dataset or in
	// one of its batches in flight (started, if started is set).
	pending := func(started bool, types ...string) bool {
		ids := []string{id}
		if p, err := queryProgress(ctx, c, id); err == nil {
			ids = append(ids, p.InFlight...) // the batches' workflow IDs
		}
		for _, wid := range ids {
			d, err := c.DescribeWorkflowExecution(ctx, wid, "")
			if err != nil {
				continue
			}
			for _, a := range d.GetPendingActivities() {
				if slices.Contains(types, a.GetActivityType().GetName()) &&
					(!started || a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED) {
					return true
				}
			}
		}
		return false
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if srv.cmd.ProcessState != nil || ctx.Err() != nil {
				t.Fatalf("the run ended (or timed out) before %s:\n%s", what, srv.out)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("%s: %s", time.Now().Format("15:04:05"), what)
	}
	go func() { _ = srv.cmd.Wait() }()

	waitFor("TraceBatch running: kill the workers", func() bool { return pending(true, "TraceBatch") })
	killAll(ws)
	ws = workers()
	// The history shows the killed TraceBatch retried: a batch's history has an attempt after the
	// first (completed), or a batch has one pending.
	retried := func() bool {
		for i := 0; i < 40; i++ {
			wid := fmt.Sprintf("%s/%s/p1-fn-%06d", id, version, i)
			if d, err := c.DescribeWorkflowExecution(ctx, wid, ""); err == nil {
				for _, a := range d.GetPendingActivities() {
					if a.GetActivityType().GetName() == "TraceBatch" && a.GetAttempt() > 1 {
						return true
					}
				}
			}
			it := c.GetWorkflowHistory(ctx, wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			scheduled := map[int64]string{}
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					break
				}
				if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
					scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
				}
				if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 && scheduled[a.GetScheduledEventId()] == "TraceBatch" {
					return true
				}
			}
		}
		return false
	}
	waitFor("a TraceBatch attempt retried, in the history", retried)
	waitFor("BuildShard pending: kill the workers", func() bool { return pending(false, "BuildShard") })
	killAll(ws)
	ws = workers()

	t.Log("kill the server; restart it from its database")
	srv.kill()
	time.Sleep(3 * time.Second)
	srv = server()
	go func() { _ = srv.cmd.Wait() }()

	t.Log("stop the S3 server for three minutes")
	bucket.Stop()
	time.Sleep(3 * time.Minute)
	bucket.Start()

	waitFor("finalizing: kill the workers", func() bool { return pending(false, "FinalizePage", "Commit") })
	killAll(ws)
	ws = workers()

	for srv.cmd.ProcessState == nil {
		if ctx.Err() != nil {
			t.Fatalf("the disturbed run did not finish:\n%s", srv.out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !srv.cmd.ProcessState.Success() {
		t.Fatalf("the disturbed run failed:\n%s", srv.out)
	}
	got := goldenShards(t, bucket.URL("chaos"))
	if !slices.Equal(got, want) {
		t.Fatalf("shards differ from the undisturbed run's:\n got %v\nwant %v", got, want)
	}
	t.Logf("%d shards byte-identical to the undisturbed run's; %s", len(got), lastLine(srv.out.String()))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func mustSpec(t *testing.T, path string) schemas.Spec {
	t.Helper()
	s, err := loadSpec(path, "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
