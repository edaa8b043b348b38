#!/usr/bin/env bash
# profile.sh OUTDIR [SECONDS]: where a sandboxed item's CPU goes, by process and by kernel path
# (docs/sandbox.md, "What an item costs"). Our own tooling, not a test: it needs root (perf
# over the whole machine) and a quiet machine. It builds the sandbox package's test binary, runs
# BenchmarkRunLatency/namespaces (one trivial item after another through a warm sandbox) and,
# while it runs, records for SECONDS (default 1):
#  (1) cpu.data: perf record -a -g at 1999 Hz; `perf report -i OUTDIR/cpu.data --comm python3
#      --no-children --sort sym` shows the sandbox's processes' hot spots, and attribute.py
#      --kernel sums their kernel time by path (page faults, exit, fork, seccomp, mount, ...);
#  (2) faults.data: every page fault with its address, and every fork, so attribute.py --faults
#      splits the faults per item among zygote, keeper, init and item (by their fork chain from
#      the zygote) and by mapping (the zygote's /proc/PID/maps, saved as maps.txt);
#  (3) dwarf.data: perf record --call-graph dwarf at 4999 Hz, so attribute.py --callers counts
#      the samples under the native helper's and CPython's C functions (spawn_item,
#      PyOS_AfterFork_Child, nd_seccomp, nd_landlock, tracer set-up, compile).
# The Go side is profiled by the pipeline benchmark itself: NDTRACE_BENCH_PROFILE=DIR go test
# ./cmd/ndtrace -run '^$' -bench ItemCPU -benchtime 1x writes DIR/go.pprof.
set -eu
OUT=$(mkdir -p "${1:?usage: profile.sh OUTDIR [SECONDS]}" && readlink -f "$1")
SECS=${2:-1}
H=$(dirname "$(readlink -f "$0")")
ROOT=$(cd "$H/../.." && pwd)
command -v perf >/dev/null || { echo "perf not found (Debian: linux-perf)" >&2; exit 1; }
(cd "$ROOT" && go test -c -o "$OUT/sandbox.test" ./sandbox)
run_bench() {
  (cd "$ROOT/sandbox" && exec "$OUT/sandbox.test" -test.run '^$' -test.bench 'RunLatency/namespaces' \
    -test.benchtime 100000x >/dev/null 2>&1) &
  BENCH=$!
  # the zygote: the process running the tracer's bootstrap whose parent does not (its keepers,
  # inits and items are forks of it and show the same command line)
  sleep 1   # past the sandbox's start
  Z=""
  for _ in $(seq 100); do
    Z=$(python3 "$H/attribute.py" --zygote || true)
    [ -n "$Z" ] && break
    sleep 0.1
  done
  [ -n "$Z" ] || { echo "no zygote found" >&2; kill "$BENCH"; exit 1; }
}
stop_bench() { pkill -P "$BENCH" 2>/dev/null || true; kill "$BENCH" 2>/dev/null || true; wait "$BENCH" 2>/dev/null || true; }

run_bench
perf record -a -g -F 1999 -o "$OUT/cpu.data" -- sleep "$SECS" 2>/dev/null
stop_bench

run_bench
cat "/proc/$Z/maps" > "$OUT/maps.txt"
echo "$Z" > "$OUT/zygote.pid"
perf record -e minor-faults -c 1 -d -e sched:sched_process_fork -a -o "$OUT/faults.data" -- sleep "$SECS" 2>/dev/null
stop_bench

run_bench
perf record -F 4999 --call-graph dwarf,16384 -a -o "$OUT/dwarf.data" -- sleep "$SECS" 2>/dev/null
stop_bench

perf script -i "$OUT/cpu.data" --comm python3 > "$OUT/cpu.txt" 2>/dev/null
perf script -i "$OUT/faults.data" -F comm,pid,tid,event,addr,trace > "$OUT/faults.txt" 2>/dev/null
perf script -i "$OUT/dwarf.data" --comm python3 -F comm,tid,ip,sym > "$OUT/dwarf.txt" 2>/dev/null
python3 "$H/attribute.py" --kernel "$OUT/cpu.txt"
python3 "$H/attribute.py" --faults "$OUT/faults.txt" "$OUT/maps.txt" "$(cat "$OUT/zygote.pid")"
python3 "$H/attribute.py" --callers "$OUT/dwarf.txt"
