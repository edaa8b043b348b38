package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"github.com/ndtrace/ndtrace/activities"
	"github.com/ndtrace/ndtrace/crawl"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/internal/metrics"
	"github.com/ndtrace/ndtrace/internal/progress"
	"github.com/ndtrace/ndtrace/internal/termsafe"
	"github.com/ndtrace/ndtrace/internal/userdirs"
	"github.com/ndtrace/ndtrace/pipeline"
	"github.com/ndtrace/ndtrace/rows"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
	"github.com/ndtrace/ndtrace/tokenize"
	"github.com/ndtrace/ndtrace/workflows"
)

// temporalFlags say which Temporal cluster to use.
type temporalFlags struct {
	addr      string
	namespace string
}

func (f *temporalFlags) register(fs *flag.FlagSet, required bool) {
	help := "Temporal frontend HOST:PORT"
	if !required {
		help += " (default: start an embedded server in this process)"
	}
	fs.StringVar(&f.addr, "temporal", "", help)
	fs.StringVar(&f.namespace, "namespace", "default", "Temporal namespace")
}

// dial connects to the cluster.
func (f *temporalFlags) dial() (client.Client, error) { return f.dialWith(nil) }

// dialWith connects to the cluster, recording the SDK's metrics in mh (nil: none).
func (f *temporalFlags) dialWith(mh client.MetricsHandler) (client.Client, error) {
	if f.addr == "" {
		return nil, usagef("--temporal HOST:PORT is required")
	}
	c, err := client.Dial(client.Options{HostPort: f.addr, Namespace: f.namespace, Logger: sdkLogger(), MetricsHandler: mh, FailureConverter: workflows.FailureConverter()})
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w", f.addr, err)
	}
	return c, nil
}

// sdkLogger routes the SDK's logs to slog at warning level unless NDTRACE_LOG=debug.
func sdkLogger() *slog.Logger { return slog.New(sdkHandler{slog.Default().Handler()}) }

// sdkHandler passes the Temporal SDK's records on, except that a task the worker stopped in the
// middle of ("Task processing failed with error" with the error "worker stopping", logged at
// info by every orderly stop) is a debug record: at the end of a run that succeeded, a line
// saying that something failed only misleads.
type sdkHandler struct{ slog.Handler }

func (h sdkHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo && strings.HasPrefix(r.Message, "Task processing failed") {
		stopping := false
		r.Attrs(func(a slog.Attr) bool {
			if v := a.Value.Resolve(); a.Key == "Error" && v.Kind() != slog.KindGroup && v.String() == "worker stopping" {
				stopping = true
			}
			return !stopping
		})
		if stopping {
			if !h.Enabled(ctx, slog.LevelDebug) {
				return nil
			}
			r.Level = slog.LevelDebug
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h sdkHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return sdkHandler{h.Handler.WithAttrs(as)}
}
func (h sdkHandler) WithGroup(name string) slog.Handler { return sdkHandler{h.Handler.WithGroup(name)} }

// workerFlags size a worker.
type workerFlags struct {
	traceSlots int
	ioSlots    int
	queues     string
	scratch    string
	envs       string
	// metricsAddr serves Prometheus metrics when set; the registry is made by prepareWorkers.
	metricsAddr string
	metrics     *metrics.Registry
}

func (f *workerFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.traceSlots, "trace-concurrency", 2, "sandboxes, i.e. items traced at once, per worker")
	fs.IntVar(&f.ioSlots, "io-concurrency", 4, "concurrent I/O activities (planning, building shards) per worker")
	fs.StringVar(&f.queues, "queues", "trace,io", "task queues this worker serves: trace, io or both")
	fs.StringVar(&f.scratch, "scratch", "", "folder for repository checkouts, not under /tmp (default $NDTRACE_SCRATCH, else ndtrace/scratch in the user's cache directory, else /var/tmp/ndtrace-UID/scratch)")
	fs.StringVar(&f.envs, "envs", "", "folder of the environments built for repositories, not under /tmp (default $NDTRACE_ENVS, else ndtrace/envs in the user's cache directory, else /var/tmp/ndtrace-UID/envs)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics (ndtrace's, the Temporal SDK's, the Go runtime's and the process's) on HOST:PORT at /metrics, e.g. :9090 (default off)")
}

// workerSet is what a process's workers need before they can start: the queues they serve and
// the activities, with the tracing sandboxes already built.
type workerSet struct {
	wf           workerFlags
	queues       map[string]bool
	acts         *activities.Activities
	closeFetcher func() error
}

// checkWorkerFlags checks the worker flags and returns the queues they name.
func checkWorkerFlags(wf workerFlags) (map[string]bool, error) {
	if wf.traceSlots < 1 || wf.ioSlots < 1 {
		return nil, usagef("concurrency must be positive")
	}
	queues := map[string]bool{}
	for _, q := range strings.Split(wf.queues, ",") {
		switch q = strings.TrimSpace(q); q {
		case "trace", "io":
			queues[q] = true
		default:
			return nil, usagef("--queues: unknown queue %q (trace, io)", q)
		}
	}
	return queues, nil
}

// prepareWorkers checks the flags and builds the activities; a tracing worker's sandboxes are all
// started now, which also fails early, not on the first item, if this machine cannot sandbox. It
// needs no Temporal client, so it can run while the embedded server starts.
func prepareWorkers(ctx context.Context, wf workerFlags, sf sandboxFlags) (*workerSet, error) {
	queues, err := checkWorkerFlags(wf)
	if err != nil {
		return nil, err
	}
	if err := resolveWorkDirs(&wf, queues["trace"]); err != nil {
		return nil, err
	}
	fetcher, closeFetcher, err := crawl.NewFetcher(ctx)
	if err != nil {
		return nil, err
	}
	ws := &workerSet{wf: wf, queues: queues, closeFetcher: closeFetcher,
		acts: &activities.Activities{Tokenizers: tokenize.Get, Fetcher: fetcher, Scratch: wf.scratch, Envs: wf.envs}}
	if wf.metricsAddr != "" {
		ws.wf.metrics = metrics.New()
		ws.acts.Metrics = activities.NewMetrics(ws.wf.metrics)
	}
	if queues["trace"] {
		cfg, err := sf.config()
		if err != nil {
			return nil, err
		}
		pool := execute.NewSandboxPool(cfg, wf.traceSlots)
		if err := pool.Warm(ctx, wf.traceSlots); err != nil {
			pool.Close()
			return nil, err
		}
		ws.acts.Sandboxes = pool
	}
	return ws, nil
}

// resolveWorkDirs fills in the default scratch and environments folders (internal/userdirs) and,
// for a tracing worker, checks now that it can write in them: a folder it cannot use would
// otherwise fail every repository item, retried, deep inside a run.
func resolveWorkDirs(wf *workerFlags, tracing bool) error {
	for _, d := range []struct {
		dir             *string
		what, flag, env string
		def             func() (string, error)
	}{
		{&wf.scratch, "scratch", "--scratch", userdirs.ScratchEnv, userdirs.ScratchDir},
		{&wf.envs, "environments", "--envs", userdirs.EnvsEnv, userdirs.EnvsDir},
	} {
		if *d.dir == "" {
			dir, err := d.def()
			if err != nil {
				return folderError(d.what, d.flag, d.env, err)
			}
			*d.dir = dir
		}
		if strings.HasPrefix(filepath.Clean(*d.dir)+"/", "/tmp/") {
			return usagef("%s %s: not under /tmp (the sandbox's private /tmp hides it)", d.flag, *d.dir)
		}
		if tracing {
			if err := userdirs.CheckWritable(*d.dir); err != nil {
				return folderError(d.what, d.flag, d.env, err)
			}
		}
	}
	return nil
}

// close stops the sandboxes of workers that were prepared but never started.
func (ws *workerSet) close() {
	if ws.acts.Sandboxes != nil {
		ws.acts.Sandboxes.Close()
	}
	if ws.closeFetcher != nil {
		ws.closeFetcher()
	}
}

// start runs the workers until the returned stop function is called, which also stops the
// sandboxes. On error the sandboxes are stopped too.
func (ws *workerSet) start(c client.Client) (stop func(), err error) {
	stop, err = ws.tryStart(c)
	if err != nil {
		ws.close()
	}
	return stop, err
}

// tryStart is start, except that a failure leaves the sandboxes running (for another try).
func (ws *workerSet) tryStart(c client.Client) (stop func(), err error) {
	// Without this the SDK identifies the worker by hashing the whole executable (a quarter of a
	// gigabyte with the embedded server): half a second of CPU at every start.
	worker.SetBinaryChecksum("ndtrace-pipeline-" + rows.Version + "-tracer-" + sandbox.TracerVersion)
	var workers []worker.Worker
	if ws.queues["trace"] {
		w := worker.New(c, activities.TraceQueue, worker.Options{MaxConcurrentActivityExecutionSize: ws.wf.traceSlots})
		w.RegisterActivity(ws.acts.TraceBatch)
		workers = append(workers, w)
	}
	if ws.queues["io"] {
		w := worker.New(c, activities.IOQueue, worker.Options{MaxConcurrentActivityExecutionSize: ws.wf.ioSlots})
		w.RegisterWorkflow(workflows.DatasetWorkflow)
		w.RegisterWorkflow(workflows.BatchWorkflow)
		for _, act := range []any{ws.acts.ScanPage, ws.acts.ScanFunctions, ws.acts.MergeKeys, ws.acts.FormBatches,
			ws.acts.BuildShard, ws.acts.RecordFailure, ws.acts.FinalizePage, ws.acts.Commit} {
			w.RegisterActivity(act)
		}
		workers = append(workers, w)
	}
	for i, w := range workers {
		if err := w.Start(); err != nil {
			for _, s := range workers[:i] {
				s.Stop()
			}
			return nil, fmt.Errorf("start worker: %w", err)
		}
	}
	return func() {
		for _, w := range workers {
			w.Stop()
		}
		ws.close()
	}, nil
}

// startWorkers runs the workers of the chosen queues until the returned stop function is called,
// and serves their metrics when --metrics-addr is set (ndtrace server --worker).
func startWorkers(ctx context.Context, c client.Client, wf workerFlags, sf sandboxFlags) (stop func(), err error) {
	ws, err := prepareWorkers(ctx, wf, sf)
	if err != nil {
		return nil, err
	}
	if ws.wf.metrics == nil {
		return ws.start(c)
	}
	srv, err := serveMetrics(ctx, wf.metricsAddr, ws.wf.metrics)
	if err != nil {
		ws.close()
		return nil, err
	}
	stopWorkers, err := ws.start(c)
	if err != nil {
		srv.Close()
		return nil, err
	}
	return func() { stopWorkers(); srv.Close() }, nil
}

// loadSpec reads a spec file, or returns the built-in examples spec when path is empty.
func loadSpec(path, out string) (schemas.Spec, error) {
	var spec schemas.Spec
	if path == "" {
		spec = schemas.Spec{Name: "ndtrace-examples", Sources: []schemas.SourceSpec{{Kind: "examples"}}}.WithDefaults()
	} else {
		data, err := os.ReadFile(path)
		if err != nil {
			return spec, usagef("cannot read spec: %v", err)
		}
		if spec, err = schemas.ParseSpec(data); err != nil {
			return spec, specError(path, err)
		}
		if err := crawl.CheckRequirements(spec); err != nil {
			return spec, specError(path, err)
		}
	}
	if out != "" {
		spec.Output = out
	}
	return spec, spec.Validate()
}

// startDataset starts (or attaches to) the dataset workflow of spec and returns its ID.
func startDataset(ctx context.Context, c client.Client, spec schemas.Spec) (client.WorkflowRun, error) {
	created := time.Now().UTC().Truncate(time.Second)
	if spec.CreatedAt != "" {
		created, _ = time.Parse(time.RFC3339, spec.CreatedAt)
	}
	opts := client.StartWorkflowOptions{
		ID:                       workflows.WorkflowID(spec),
		TaskQueue:                activities.IOQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// With a worker of the I/O queue in this process (ndtrace run), the first workflow task
		// comes back with the start response instead of through a poll; elsewhere this is a no-op.
		EnableEagerStart: true,
	}
	run, err := c.ExecuteWorkflow(ctx, opts, workflows.DatasetWorkflow, workflows.DatasetInput{Spec: spec, Dataset: spec.Output, CreatedAt: created})
	if err != nil {
		return nil, fmt.Errorf("start dataset workflow: %w", err)
	}
	return run, nil
}

// datasetRunning reports whether spec's dataset workflow is running (a run that starts resumes it),
// false when it is not or the server cannot say.
func datasetRunning(ctx context.Context, c client.Client, spec schemas.Spec) bool {
	d, err := c.DescribeWorkflowExecution(ctx, workflows.WorkflowID(spec), "")
	return err == nil && d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// queryProgress asks a running dataset workflow for its progress.
func queryProgress(ctx context.Context, c client.Client, id string) (workflows.Progress, error) {
	var p workflows.Progress
	v, err := c.QueryWorkflow(ctx, id, "", workflows.ProgressQuery)
	if err != nil {
		return p, err
	}
	return p, v.Get(&p)
}

// watch shows the run's progress in view until the run ends and returns its result.
func watch(ctx context.Context, c client.Client, run client.WorkflowRun, view progressView) (workflows.DatasetResult, error) {
	done := make(chan error, 1)
	var res workflows.DatasetResult
	go func() { done <- run.Get(ctx, &res) }()
	// The first poll at once, then one a second.
	tick := time.NewTimer(0)
	defer tick.Stop()
	var last workflows.Progress
	for {
		select {
		case err := <-done:
			if err == nil {
				last = res.Progress
			}
			view.finish(last, err == nil)
			return res, err
		case <-tick.C:
			if p, err := queryProgressWithin(ctx, c, run.GetID(), queryTimeout); err == nil {
				last = p
				view.update(p)
			}
			tick.Reset(time.Second)
		case <-ctx.Done():
			view.finish(last, false)
			return res, ctx.Err()
		}
	}
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", "[--spec FILE] [--out URL] [--temporal HOST:PORT] [flags]", stderr)
	var (
		specPath, out, db string
		port              int
		tf                temporalFlags
		wf                workerFlags
		sf                sandboxFlags
		noWorker          bool
		logFormat         string
		every             time.Duration
	)
	fs.StringVar(&specPath, "spec", "", "dataset spec (YAML, docs/spec.md); default: the built-in examples")
	fs.StringVar(&out, "out", "", "dataset URL, overriding the spec's output (default ./ndtrace-data)")
	fs.StringVar(&db, "db", "", "embedded server: SQLite file for Temporal's state (default in memory)")
	fs.BoolVar(&noWorker, "no-worker", false, "start no worker in this process (workers run elsewhere)")
	fs.IntVar(&port, "port", 0, "embedded server: the frontend's port on 127.0.0.1, for workers of other processes to join (default: any free port)")
	fs.StringVar(&logFormat, "log-format", "text", "log format: text, or json (structured logs, progress as \"progress\" records, for log collectors)")
	fs.DurationVar(&every, "progress-interval", progress.DefaultEvery, "when stderr is not a terminal: at most one progress line this often (and one a minute while nothing changes); on a terminal the progress is one block redrawn in place")
	tf.register(fs, false)
	wf.register(fs)
	sf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if every <= 0 {
		return usagef("--progress-interval must be positive")
	}
	// On a terminal, text logs go through a switch that prints them above the live progress block
	// while it is on the screen.
	logs := &logSwitch{out: stderr}
	var textLogs io.Writer
	if logFormat == "text" && canRedraw(stderr) {
		textLogs = logs
	}
	if err := setLogs(logFormat, stderr, textLogs); err != nil {
		return err
	}
	spec, err := loadSpec(specPath, out)
	if err != nil {
		return err
	}
	// A run on a server whose state outlives it (--db, --temporal) may resume its dataset's
	// workflow, while its store is down: the names are checked now, the rest once the run knows
	// it starts a new workflow (below).
	resumable := db != "" || tf.addr != ""
	if err := preflightWith(ctx, spec, specPath, pipeline.PreflightOptions{Tokenizers: tokenize.Get, Local: !noWorker, Offline: resumable}); err != nil {
		return err
	}
	if tf.addr == "" && !embeddedAvailable {
		return usagef("this build has no embedded Temporal server: give --temporal HOST:PORT")
	}
	// Start the worker's sandboxes while the embedded server starts: both take a fixed time
	// that every run pays.
	type prepared struct {
		ws  *workerSet
		err error
	}
	var ready chan prepared
	if !noWorker {
		if _, err := checkWorkerFlags(wf); err != nil {
			return err
		}
		if _, err := sf.config(); err != nil {
			return err
		}
		ready = make(chan prepared, 1)
		go func() {
			ws, err := prepareWorkers(ctx, wf, sf)
			ready <- prepared{ws, err}
		}()
		defer func() {
			// Stop sandboxes that never reached a worker (an error before the workers started).
			if p, ok := <-ready; ok && p.ws != nil {
				p.ws.close()
			}
		}()
	}
	if tf.addr == "" {
		// The worker service (Schedules, scavengers) is only worth its start-up and shutdown time
		// for a database that outlives this run.
		srv, err := startEmbedded(db, tf.namespace, db != "", port)
		if err != nil {
			return err
		}
		defer srv.Stop()
		tf.addr = srv.Addr()
		slog.Debug("embedded Temporal server", "addr", tf.addr)
		if port > 0 {
			fmt.Fprintf(stdout, "embedded Temporal server at %s (ndtrace worker --temporal %s joins it)\n", tf.addr, tf.addr)
		}
	}
	c, err := tf.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if !noWorker {
		p := <-ready
		close(ready)
		if p.err != nil {
			return p.err
		}
		stop, err := p.ws.start(c)
		if err != nil {
			return err
		}
		defer stop()
		if reg := p.ws.wf.metrics; reg != nil {
			srv, err := serveMetrics(ctx, wf.metricsAddr, reg)
			if err != nil {
				return err
			}
			defer srv.Close()
		}
	}
	if resumable && !datasetRunning(ctx, c, spec) {
		// A new workflow: the whole preflight first.
		if err := preflight(ctx, spec, specPath, !noWorker); err != nil {
			return err
		}
	}
	run, err := startDataset(ctx, c, spec)
	if err != nil {
		return err
	}
	if logFormat == "json" {
		slog.Info("dataset workflow started", "workflow", run.GetID(), "output", spec.Output)
	} else {
		fmt.Fprintf(stderr, "dataset workflow %s writing %s\n", run.GetID(), spec.Output)
	}
	res, err := watch(ctx, c, run, newProgressView(stderr, logFormat == "json", every, logs))
	if err != nil {
		return explainRun(spec.Output, err)
	}
	printSummary(stdout, spec.Output, res)
	return nil
}

// printSummary prints a finished run's totals and failures, its text escaped for a terminal.
func printSummary(w io.Writer, url string, res workflows.DatasetResult) {
	p, f := res.Progress, res.Final
	fmt.Fprintf(w, "dataset %s: %d rows in %d shards, %d tokens (%d learned), %d of %d items rejected (ndtrace stats shows why); %d batches reused\n",
		termsafe.String(url), f.Totals.Rows, f.Totals.Shards, f.Totals.Tokens, f.Totals.LearnedTokens, f.Counts[schemas.CountRejects], f.Counts[schemas.CountItems], p.Reused)
	if !f.Head && f.Version != "" {
		fmt.Fprintf(w, "version %s is committed under versions/ but a newer version is the dataset's head\n", termsafe.String(f.Version))
	}
	printFailures(w, p)
}

func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("worker", "--temporal HOST:PORT [flags]", stderr)
	var (
		tf        temporalFlags
		wf        workerFlags
		sf        sandboxFlags
		logFormat string
	)
	tf.register(fs, true)
	wf.register(fs)
	sf.register(fs)
	fs.StringVar(&logFormat, "log-format", "text", "log format: text, or json (structured logs for log collectors)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := setLogs(logFormat, stderr, nil); err != nil {
		return err
	}
	ws, err := prepareWorkers(ctx, wf, sf)
	if err != nil {
		return err
	}
	var mh client.MetricsHandler
	if reg := ws.wf.metrics; reg != nil {
		mh = activities.TemporalMetricsHandler(reg)
		srv, err := serveMetrics(ctx, wf.metricsAddr, reg)
		if err != nil {
			ws.close()
			return err
		}
		defer srv.Close()
		slog.Info("serving metrics", "addr", srv.Addr, "path", "/metrics")
	}
	// A worker connects lazily: one started while the server is down (a restart, an outage) polls
	// until it is back, as one that lost its server mid-run does, instead of exiting.
	if tf.addr == "" {
		return usagef("--temporal HOST:PORT is required")
	}
	c, err := client.NewLazyClient(client.Options{HostPort: tf.addr, Namespace: tf.namespace, Logger: sdkLogger(), MetricsHandler: mh, FailureConverter: workflows.FailureConverter()})
	if err != nil {
		ws.close()
		return err
	}
	defer c.Close()
	// Starting a worker checks the server: while it is unreachable, wait and try again.
	var stop func()
	for delay := time.Second; ; delay = min(2*delay, 30*time.Second) {
		if stop, err = ws.tryStart(c); err == nil {
			break
		}
		if !isUnavailable(err) {
			ws.close()
			return err
		}
		slog.Warn("Temporal server unreachable; retrying", "temporal", tf.addr, "in", delay, "err", err)
		select {
		case <-ctx.Done():
			ws.close()
			return nil // stopped (SIGTERM) before the server came
		case <-time.After(delay):
		}
	}
	defer stop()
	slog.Info("worker started", "queues", wf.queues, "temporal", tf.addr, "scratch", ws.wf.scratch, "envs", ws.wf.envs)
	if logFormat == "text" {
		fmt.Fprintf(stderr, "ndtrace worker serving %s on %s (Ctrl-C to stop)\n", wf.queues, tf.addr)
	}
	<-ctx.Done()
	return nil
}

// serveMetrics serves reg at /metrics on addr until ctx ends; Addr is the address it listens on.
func serveMetrics(ctx context.Context, addr string, reg *metrics.Registry) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", reg)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	srv := &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("metrics server", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	return srv, nil
}

func runSubmit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("submit", "--spec FILE --temporal HOST:PORT [--out URL]", stderr)
	var (
		specPath, out string
		tf            temporalFlags
	)
	fs.StringVar(&specPath, "spec", "", "dataset spec (YAML, docs/spec.md) (required)")
	fs.StringVar(&out, "out", "", "dataset URL, overriding the spec's output")
	noLocal := registerNoLocalCheck(fs)
	tf.register(fs, true)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if specPath == "" {
		return usagef("--spec is required")
	}
	spec, err := loadSpec(specPath, out)
	if err != nil {
		return err
	}
	if err := preflight(ctx, spec, specPath, !*noLocal); err != nil {
		return err
	}
	c, err := tf.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	run, err := startDataset(ctx, c, spec)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, run.GetID())
	return nil
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sf, err := parseStatus(args, stderr)
	if err != nil {
		return err
	}
	c, err := sf.tf.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if sf.watch {
		return watchStatus(ctx, c, sf.id, stdout, stderr)
	}
	return printStatus(ctx, c, sf.id, stdout)
}

// memoProgress decodes the progress a dataset workflow keeps in its memo.
func memoProgress(memo *commonpb.Memo) (workflows.Progress, bool, error) {
	var p workflows.Progress
	f, ok := memo.GetFields()[workflows.MemoProgress]
	if !ok {
		return p, false, nil
	}
	if err := converter.GetDefaultDataConverter().FromPayload(f, &p); err != nil {
		return p, false, fmt.Errorf("memo: %w", err)
	}
	return p, true, nil
}

// printFailures lists the failed batches (names escaped for a terminal) and counts the poison
// items of a progress.
func printFailures(w io.Writer, p workflows.Progress) {
	if p.Poison > 0 {
		fmt.Fprintf(w, "%d poison items (rejected after killing their attempts; class poison in the version's rejects)\n", p.Poison)
	}
	for _, f := range p.Failed {
		fmt.Fprintf(w, "failed batch %s\n", termsafe.String(f))
	}
	if len(p.Failed) > 0 {
		fmt.Fprintln(w, "the version commits without them; ndtrace retry ID re-runs them into a new version")
	}
}

func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, id, err := dialWithID("cancel", "the workflow ID is required (ndtrace submit and ndtrace runs print it)", args, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	return cancelDataset(ctx, c, id, stdout)
}

func runRetry(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, id, err := dialWithID("retry", "the workflow ID is required (ndtrace submit prints it)", args, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	in, err := datasetInput(ctx, c, id)
	if err != nil {
		return err
	}
	// A new version: the same spec, created now. Batches whose records exist are reused as they
	// are; the failed ones (no record) run again.
	spec := in.Spec
	spec.CreatedAt = time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	// The spec was checked when it was submitted; what may have changed since is checked again
	// (the output, buckets, names), not the workers' local files.
	if err := preflight(ctx, spec, "", false); err != nil {
		return err
	}
	run, err := startDataset(ctx, c, spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: retrying into a new version created at %s (run %s)\n", run.GetID(), spec.CreatedAt, run.GetRunID())
	return nil
}

// datasetInput reads the input a dataset workflow was started with (its first run's).
func datasetInput(ctx context.Context, c client.Client, id string) (workflows.DatasetInput, error) {
	var in workflows.DatasetInput
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return in, fmt.Errorf("workflow %s: no history", id)
	}
	ev, err := it.Next()
	if err != nil {
		return in, fmt.Errorf("workflow %s: %w", id, err)
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil {
		return in, fmt.Errorf("workflow %s: the first event is not its start", id)
	}
	if err := converter.GetDefaultDataConverter().FromPayloads(attrs.GetInput(), &in); err != nil {
		return in, fmt.Errorf("workflow %s: input: %w", id, err)
	}
	return in, nil
}

// dialWithID parses the command line of a command that acts on one workflow or schedule ("NAME ID
// --temporal HOST:PORT"; missing is the message when the ID is) and connects to the cluster. The
// caller closes the client.
func dialWithID(name, missing string, args []string, stderr io.Writer) (client.Client, string, error) {
	fs := newFlagSet(name, "ID --temporal HOST:PORT", stderr)
	var tf temporalFlags
	tf.register(fs, true)
	id, err := parseWithID(fs, args, missing)
	if err != nil {
		return nil, "", err
	}
	c, err := tf.dial()
	if err != nil {
		return nil, "", err
	}
	return c, id, nil
}

// parseWithID parses a command line whose first argument, before the flags, is an ID.
func parseWithID(fs *flag.FlagSet, args []string, missing string) (string, error) {
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return "", err
	}
	if id == "" {
		return "", usagef("%s", missing)
	}
	return id, nil
}

// isUnavailable reports whether err says the Temporal server could not be reached.
func isUnavailable(err error) bool {
	var u *serviceerror.Unavailable
	if errors.As(err, &u) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "failed reaching server") || strings.Contains(msg, "connection refused") ||
		strings.Contains(msg, "connection error")
}
