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
	"strings"
	"time"

	"github.com/ndtrace/ndtrace/dashboard"
)

const dashboardUsage = `--dataset URL [--dataset URL2 ...] [flags]

Serves a web page of dataset statistics: the per-trajectory summary of the paper's Figure 5 (mean
with the 25-90 % range of tokens, actions and events), histograms of tokens, actions, events and code
length per trajectory (Figure A.1) for function and repository level side by side, actions and events
per type, exits, sources, the rejects by reason, and the certificate of 'ndtrace verify'. Several datasets are compared in the same plots,
one colour each. The plots are SVG drawn by the server: the page loads nothing from the network.

Each dataset's statistics come from its stats.json when it matches the manifest, or are computed
from the shards at start-up (restart to refresh). GET /api/stats?dataset=N returns dataset N's
statistics (from 0, in --dataset order) as JSON; GET /api/datasets lists the datasets.

Stop it with Ctrl-C (SIGINT) or SIGTERM: open requests are finished first.

URL: a folder (./ndtrace-data), file:///abs/dir, s3://bucket/prefix?region=..., gs://bucket/prefix,
azblob://container/prefix (see docs/dataset.md).`

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// stringList is a flag.Value.
var _ flag.Value = (*stringList)(nil)

// runDashboard implements "ndtrace dashboard".
func runDashboard(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dashboard", dashboardUsage, stderr)
	var urls stringList
	fs.Var(&urls, "dataset", "a dataset URL (repeat to compare datasets)")
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(urls) == 0 {
		return usagef("missing --dataset URL (repeat it to compare datasets)")
	}
	datasets, err := loadDashboardDatasets(ctx, urls)
	if err != nil {
		return err
	}
	d, err := dashboard.New(datasets)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	return serveDashboard(ctx, d.Handler(), len(datasets), ln, stdout)
}

// loadDashboardDatasets loads the statistics and certificate of every dataset.
func loadDashboardDatasets(ctx context.Context, urls []string) ([]dashboard.Dataset, error) {
	var out []dashboard.Dataset
	for i, u := range urls {
		start := time.Now()
		st, from, err := loadDatasetStats(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("dataset %d: %w", i, err)
		}
		slog.Info("dashboard: dataset loaded", "index", i, "url", u, "statistics", from, "rows", st.Totals.Rows,
			"elapsed", time.Since(start).Round(time.Millisecond))
		v, err := loadVerification(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("dataset %d: %w", i, err)
		}
		out = append(out, dashboard.Dataset{URL: u, From: from, Stats: st, Verify: v})
	}
	return out, nil
}

// serveDashboard serves h, the dashboard of n datasets, on ln until ctx ends, then shuts down
// gracefully.
func serveDashboard(ctx context.Context, h http.Handler, n int, ln net.Listener, stdout io.Writer) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + ln.Addr().String() + "/"
	fmt.Fprintf(stdout, "ndtrace dashboard: serving %d dataset(s) at %s (Ctrl-C to stop)\n", n, url)
	slog.Info("dashboard: listening", "url", url, "datasets", n)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("dashboard: serve: %w", err)
	case <-ctx.Done():
	}
	slog.Info("dashboard: shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("dashboard: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("dashboard: serve: %w", err)
	}
	return nil
}
