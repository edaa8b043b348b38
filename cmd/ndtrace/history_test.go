package main

import (
	"bytes"
	"strings"

	"context"
	"flag"
	"fmt"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ndtrace/ndtrace/workflows"
)

var recordHistory = flag.Bool("record-history", false, "run a small dataset on an embedded server and write the histories of its workflows to ../../workflows/testdata, for the replay tests")

// TestRecordHistory records the histories the workflows' replay tests replay (workflows/
// replay_test.go): a dataset of the built-in examples (a repository, its function-level items, and
// functions) on an in-process server with one worker process. It runs only with -record-history:
// record anew when a change to the workflows is meant to be incompatible (with a GetVersion marker
// for the runs in flight), and keep the old files, so that every shape of history still replays.
func TestRecordHistory(t *testing.T) {
	if !*recordHistory {
		t.Skip("only with -record-history")
	}
	bin := buildBinary(t)
	srv, c := testCluster(t)
	w := exec.Command(bin, "worker", "--temporal", srv.Addr(), "--trace-concurrency", "2")
	w.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-w.Process.Pid, syscall.SIGKILL); w.Wait() })
	dir := t.TempDir()
	spec, err := loadSpec(writeSpec(t, dir, fmt.Sprintf("name: history\noutput: %s\nsources:\n  - kind: examples\nbatch_size: 4\nparallelism: 2\ncreated_at: 2026-11-24T00:00:00Z\n",
		filepath.Join(dir, "data"))), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run, err := startDataset(ctx, c, spec)
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.DatasetResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	stamp := time.Now().UTC().Format("20060102")
	save := func(id, name string) {
		var h historypb.History
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			h.Events = append(h.Events, ev)
		}
		data, err := protojson.MarshalOptions{Indent: " "}.Marshal(&h)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "..", "workflows", "testdata", fmt.Sprintf("history-%s-%s.json", name, stamp))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d events", path, len(h.Events))
	}
	save(run.GetID(), "dataset")
	save(run.GetID()+"/"+res.Final.Version+"/p1-repo-000000", "batch-repo")
	save(run.GetID()+"/"+res.Final.Version+"/p2-fn-000000", "batch-functions")
}

// TestMemoProgress decodes the progress a dataset workflow keeps in its memo (what ndtrace status
// shows when no worker answers), and prints its failed batches and poison items.
func TestMemoProgress(t *testing.T) {
	p := workflows.Progress{Phase: "tracing", Batches: 10, BatchesDone: 7, BatchesFailed: 1, Poison: 2,
		Failed: []string{"p1-fn-000004: trace: sandbox exhausted"}}
	payload, err := converter.GetDefaultDataConverter().ToPayload(p)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := memoProgress(&commonpb.Memo{Fields: map[string]*commonpb.Payload{workflows.MemoProgress: payload}})
	if err != nil || !ok || got.BatchesFailed != 1 || got.Poison != 2 || len(got.Failed) != 1 {
		t.Fatalf("memoProgress = %+v, %v, %v", got, ok, err)
	}
	if _, ok, _ := memoProgress(&commonpb.Memo{}); ok {
		t.Error("an empty memo gave a progress")
	}
	var b bytes.Buffer
	printFailures(&b, got)
	for _, want := range []string{"2 poison items", "failed batch p1-fn-000004", "ndtrace retry"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printFailures lacks %q:\n%s", want, b.String())
		}
	}
}
