package sandbox_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/internal/gencorpus"
	"github.com/ndtrace/ndtrace/sandbox"
	"github.com/ndtrace/ndtrace/sandbox/sandboxtest"
	"github.com/ndtrace/ndtrace/schemas"
)

// BenchmarkRunLatency measures the sandbox start-up cost paid per traced item: one trivial call
// through a warm sandbox (the item's keeper, init and item processes, their user, mount, PID and
// IPC namespaces, mounts, capability drop, Landlock, seccomp, audit hook, the sealed trace,
// verification, cleanup, report), on each backend. The baseline, measured in the same run, is the
// cheapest fresh interpreter there is: exec of python3 -S -c pass, with no sandbox at all.
func BenchmarkRunLatency(b *testing.B) {
	b.Run("baseline-python-exec", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if err := exec.Command("/usr/bin/python3", "-S", "-c", "pass").Run(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.ReportMetric(float64(median(lat).Microseconds())/1000, "median-ms")
	})
	for _, backend := range sandbox.Backends() {
		b.Run(backend, func(b *testing.B) {
			sb, err := sandbox.New(context.Background(), sandbox.Config{Backend: backend})
			if err != nil {
				b.Skip(err)
			}
			defer sb.Close()
			req := sandbox.Request{Code: "def f(x):\n    return x + 1\n", Call: "f(1)"}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				res, err := sb.Run(context.Background(), req)
				lat = append(lat, time.Since(t0))
				if err != nil || res.Status != schemas.StatusOK {
					b.Fatalf("%v %s %s", err, res.Status, res.Detail)
				}
			}
			b.ReportMetric(float64(median(lat).Microseconds())/1000, "median-ms")
		})
	}
}

// BenchmarkColdStart measures building a sandbox from nothing (namespaces, root filesystem, Python
// start-up, tracer import) plus its first run.
func BenchmarkColdStart(b *testing.B) {
	for _, backend := range sandbox.Backends() {
		b.Run(backend, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				sb, err := sandbox.New(context.Background(), sandbox.Config{Backend: backend})
				if err != nil {
					b.Skip(err)
				}
				if _, err := sb.Run(context.Background(), sandbox.Request{Code: "def f():\n    return 1\n", Call: "f()"}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				sb.Close()
			}
			b.ReportMetric(float64(median(lat).Microseconds())/1000, "median-ms")
		})
	}
}

// BenchmarkTraceThroughput measures events traced per second on CPU-bound code, sandbox and Go-side
// decoding included, for ndtrace's tracer and for the naive tracer that reprs every local at every
// event.
func BenchmarkTraceThroughput(b *testing.B) {
	code := gencorpus.ListWorkload
	for _, mode := range []struct {
		name  string
		naive bool
	}{{"ndtrace", false}, {"naive", true}} {
		b.Run(mode.name, func(b *testing.B) {
			sb, err := sandbox.New(context.Background(), sandbox.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer sb.Close()
			req := sandbox.Request{Code: code, Call: "f(5000)", Naive: mode.naive,
				Limits: sandbox.Limits{TraceEvents: 1 << 24, TraceBytes: 1 << 32, WallTime: time.Minute, CPUTime: time.Minute}}
			events := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := sb.Run(context.Background(), req)
				if err != nil || res.Status != schemas.StatusOK {
					b.Fatalf("%v %s %s", err, res.Status, res.Detail)
				}
				events += len(res.Events)
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkTracerCPU measures the tracer's own CPU per event (the item's CPU time as the zygote
// reports it, so the Go side's decoding is not counted). "loop" is a CPU-bound loop of four int
// locals (f(60000): 240,005 events); "list" also keeps a string and a growing list of strings
// (BenchmarkTraceThroughput's code, f(50000): 200,504 events). The cost of an item that does nearly
// nothing (f(1)), measured in the same run, is subtracted, so ns/event is what each event adds: the
// trace function, reading and diffing the locals, the wire line, sealing and writing it. The naive
// tracer (plain repr of every local and json.dumps of every event) is measured alongside.
func BenchmarkTracerCPU(b *testing.B) {
	workloads := []struct{ name, code, call string }{
		{"loop", gencorpus.LoopWorkload, "f(60000)"},
		{"list", gencorpus.ListWorkload, "f(50000)"},
	}
	for _, w := range workloads {
		for _, mode := range []struct {
			name  string
			naive bool
		}{{"ndtrace", false}, {"naive", true}} {
			b.Run(w.name+"/"+mode.name, func(b *testing.B) {
				sb, err := sandbox.New(context.Background(), sandbox.Config{})
				if err != nil {
					b.Skip(err)
				}
				defer sb.Close()
				lim := sandbox.Limits{TraceEvents: 1 << 22, TraceBytes: 1 << 32, WallTime: time.Minute, CPUTime: time.Minute}
				run := func(call string) (time.Duration, int) {
					res, err := sb.Run(context.Background(), sandbox.Request{Code: w.code, Call: call, Naive: mode.naive, Limits: lim})
					if err != nil || res.Status != schemas.StatusOK {
						b.Fatalf("%v %s %s", err, res.Status, res.Detail)
					}
					return res.CPU, len(res.Events)
				}
				run("f(1)") // warm
				var cpu, idle time.Duration
				events := 0
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					c0, e0 := run("f(1)")
					c1, e1 := run(w.call)
					idle += c0
					cpu += c1 - c0
					events += e1 - e0
				}
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(events), "ns/event")
				b.ReportMetric(float64(idle.Milliseconds())/float64(b.N), "idle-cpu-ms")
				b.ReportMetric(float64(events)/float64(b.N), "events")
			})
		}
	}
}

// BenchmarkForkedMemory measures issue 26's attack on an item's memory: five forked children that
// each commit (touch) 700 MiB, under the default limits (Memory 2 GiB, AddressSpace 1 GiB,
// Processes 64), on each backend. It reports what the item's live processes held together once
// every child had reported (held-MiB: what each touched, or its peak RSS if more; not when the
// item was ended for memory first) and, where the
// item runs in a cgroup v1 group, the group's peak (peak-MiB, memory.max_usage_in_bytes). Modes:
// "auto" is the sandbox's own (cgroup v2, cgroup v1 or rlimits, by what the worker may use),
// "rlimits" forces rlimits alone (Config.Cgroup off), and "per-process" is the regime before
// issue 26 (rlimits alone with a memory limit of Processes x AddressSpace, which leaves each
// process its own RLIMIT_AS). The numbers are in docs/sandbox.md, "Resources".
func BenchmarkForkedMemory(b *testing.B) {
	modes := []struct {
		name   string
		cgroup string
		memory int64
	}{{"auto", sandbox.CgroupAuto, 0}, {"rlimits", sandbox.CgroupOff, 0}, {"per-process", sandbox.CgroupOff, 64 << 30}}
	for _, backend := range sandbox.Backends() {
		for _, mode := range modes {
			b.Run(backend+"/"+mode.name, func(b *testing.B) {
				sb, err := sandbox.New(context.Background(), sandbox.Config{Backend: backend, Cgroup: mode.cgroup})
				if err != nil {
					b.Skip(err)
				}
				defer sb.Close()
				info := sb.Info()
				req := sandbox.Request{Code: sandboxtest.ForkedMemoryCode, Call: "f(5, 700 << 20)",
					Limits: sandbox.Limits{Memory: mode.memory, WallTime: 2 * time.Minute, CPUTime: 2 * time.Minute}}
				var held struct{ Kids, Held, Parent int64 }
				var peak int64
				returned := false
				for i := 0; i < b.N; i++ {
					res, err := sb.Run(context.Background(), req)
					if err != nil {
						b.Fatal(err)
					}
					held.Kids, held.Held, held.Parent = 0, 0, 0
					returned = strings.HasPrefix(res.Value, "'{") // not when the item was ended for memory
					if returned {
						if err := json.Unmarshal([]byte(strings.Trim(res.Value, "'")), &held); err != nil {
							b.Fatalf("value %s: %v", res.Value, err)
						}
					}
					if info.Memory == sandbox.MemoryCgroup1 {
						data, err := os.ReadFile(filepath.Join(info.Cgroup, "memory.max_usage_in_bytes"))
						if err != nil {
							b.Fatal(err)
						}
						if peak, err = strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err != nil {
							b.Fatal(err)
						}
					}
					b.Logf("%s: status %s (%s), %d children, held %d MiB (parent %d MiB), peak %d MiB",
						info.Memory, res.Status, res.Detail, held.Kids, held.Held>>20, held.Parent>>20, peak>>20)
				}
				if returned {
					b.ReportMetric(float64((held.Held+held.Parent)>>20), "held-MiB")
				}
				if info.Memory == sandbox.MemoryCgroup1 {
					b.ReportMetric(float64(peak>>20), "peak-MiB")
				}
			})
		}
	}
}
