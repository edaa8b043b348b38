package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/internal/cruxeval"
	"github.com/ndtrace/ndtrace/internal/gencorpus"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/schemas"
)

// cpuSplit is CPU time split by who spent it: this (Go) process, and the sandbox processes (every
// process below it that has ended and been reaped: zygotes, keepers, item inits, items).
type cpuSplit struct {
	goUser, goSys, sbUser, sbSys time.Duration
}

// cpuNow reads the counters cpuSplit differences are made of.
func cpuNow(b *testing.B) (self, children syscall.Rusage) {
	b.Helper()
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children); err != nil {
		b.Fatal(err)
	}
	return self, children
}

func tv(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }

// measureCPU runs f and returns the CPU it and what it started cost, split by cpuSplit.
func measureCPU(b *testing.B, f func()) cpuSplit {
	b.Helper()
	s0, c0 := cpuNow(b)
	f()
	s1, c1 := cpuNow(b)
	return cpuSplit{
		goUser: tv(s1.Utime) - tv(s0.Utime), goSys: tv(s1.Stime) - tv(s0.Stime),
		sbUser: tv(c1.Utime) - tv(c0.Utime), sbSys: tv(c1.Stime) - tv(c0.Stime),
	}
}

// report adds the split per item as metrics named prefix-*-ms.
func (s cpuSplit) report(b *testing.B, prefix string, items int) {
	per := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(items) }
	b.ReportMetric(per(s.goUser+s.goSys), prefix+"go-ms/item")
	b.ReportMetric(per(s.sbUser), prefix+"sandbox-user-ms/item")
	b.ReportMetric(per(s.sbSys), prefix+"sandbox-kernel-ms/item")
}

// BenchmarkItemCPU runs the batch path that `ndtrace run` runs (embedded Temporal, one worker,
// its default sandboxes, trajectories in both directions, Parquet to a local folder) over
// NDTRACE_BENCH_ITEMS (default 2,500) CruxEval-shaped items (internal/gencorpus) and reports
// items/s and the CPU an item costs, split into the Go process (worker, pipeline and the embedded
// server) and the sandbox's processes' user and kernel time (zygotes, keepers, item inits, items:
// reaped descendants). Its baseline, in the same run, is the sandbox alone: the same items
// through sandbox.Sandbox.Run, one after the other on one sandbox, as BenchmarkRunLatency runs
// them (metrics prefixed sandbox-only-). The difference is what the pipeline adds around an item.
// With NDTRACE_BENCH_PROFILE=DIR it writes the pipeline run's Go CPU profile to DIR/go.pprof;
// internal/itemcost/profile.sh profiles the sandbox's side (docs/sandbox.md, "What an item
// costs"). Run with -benchtime=1x.
func BenchmarkItemCPU(b *testing.B) {
	n := 2500
	if v := os.Getenv("NDTRACE_BENCH_ITEMS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("NDTRACE_BENCH_ITEMS=%q: want a positive number", v)
		}
	}
	dir := b.TempDir()
	corpus := filepath.Join(dir, "corpus.jsonl")
	var buf bytes.Buffer
	if err := gencorpus.Write(&buf, n, 7); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(corpus, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	items, err := cruxeval.Read(corpus) // the same format as CruxEval's
	if err != nil {
		b.Fatal(err)
	}
	profile := os.Getenv("NDTRACE_BENCH_PROFILE")
	ctx := context.Background()
	var base, pipe cpuSplit
	var baseWall, pipeWall time.Duration
	for i := 0; i < b.N; i++ {
		// The baseline: the sandbox alone, the same items, in order.
		base = base.add(measureCPU(b, func() {
			sb, err := sandbox.New(ctx, sandbox.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer sb.Close()
			t0 := time.Now()
			for _, it := range items {
				res, err := sb.Run(ctx, sandbox.Request{Code: it.Code, Call: sandbox.CallFromInput("f", it.Input)})
				if err != nil || res.Status == schemas.StatusSandboxError {
					b.Fatalf("%v %s %s", err, res.Status, res.Detail)
				}
			}
			baseWall += time.Since(t0)
		}))

		// The pipeline.
		out := filepath.Join(dir, fmt.Sprintf("data-%d", i))
		spec := writeSpec(&testing.T{}, dir, fmt.Sprintf("name: itemcpu\noutput: %s\nsources:\n  - kind: jsonl\n    path: %s\ncreated_at: 2026-11-28T00:00:00Z\n", out, corpus))
		var prof *os.File
		if profile != "" {
			if prof, err = os.Create(filepath.Join(profile, "go.pprof")); err != nil {
				b.Fatal(err)
			}
			if err := pprof.StartCPUProfile(prof); err != nil {
				b.Fatal(err)
			}
		}
		pipe = pipe.add(measureCPU(b, func() {
			var stdout, stderr bytes.Buffer
			t0 := time.Now()
			if code := run([]string{"run", "--spec", spec}, &stdout, &stderr); code != 0 {
				b.Fatalf("run: %s", stderr.String())
			}
			pipeWall += time.Since(t0)
		}))
		if prof != nil {
			pprof.StopCPUProfile()
			if err := prof.Close(); err != nil {
				b.Fatal(err)
			}
		}
		if m := benchManifest(b, out); m.Counts["items"] != int64(n) {
			b.Fatalf("%d items in the manifest, want %d", m.Counts["items"], n)
		}
	}
	b.ReportMetric(float64(n*b.N)/pipeWall.Seconds(), "items/s")
	pipe.report(b, "", n*b.N)
	b.ReportMetric(float64(n*b.N)/baseWall.Seconds(), "sandbox-only-items/s")
	base.report(b, "sandbox-only-", n*b.N)
}

// add sums two splits.
func (s cpuSplit) add(o cpuSplit) cpuSplit {
	return cpuSplit{s.goUser + o.goUser, s.goSys + o.goSys, s.sbUser + o.sbUser, s.sbSys + o.sbSys}
}
