package workflows

import (
	"os"
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplay replays the histories recorded in testdata (cmd/ndtrace's TestRecordHistory, with
// -record-history) against today's workflows. A change that makes a workflow issue other commands
// than it did for the same events breaks the runs in flight when workers are upgraded: it must
// branch on workflow.GetVersion, and this test fails until it does (docs/operations.md).
func TestReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "history-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(DatasetWorkflow)
			r.RegisterWorkflow(BatchWorkflow)
			file, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			defer file.Close()
			h, err := client.HistoryFromJSON(file, client.HistoryJSONOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// Child workflow IDs derive from the workflow's own ID: replay under the original.
			start := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
			id := ""
			dc := converter.GetDefaultDataConverter()
			switch start.GetWorkflowType().GetName() {
			case "DatasetWorkflow":
				var in DatasetInput
				if err := dc.FromPayloads(start.GetInput(), &in); err != nil {
					t.Fatal(err)
				}
				id = WorkflowID(in.Spec)
			case "BatchWorkflow":
				var in BatchInput
				if err := dc.FromPayloads(start.GetInput(), &in); err != nil {
					t.Fatal(err)
				}
				id = in.Parent + "/" + in.Run.ID + "/" + in.Ref.String()
			}
			err = r.ReplayWorkflowHistoryWithOptions(nil, h, worker.ReplayWorkflowHistoryOptions{
				OriginalExecution: workflow.Execution{ID: id, RunID: start.GetOriginalExecutionRunId()}})
			if err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
