package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// repoBenchTest is one test of the benchmark's repository: a loop whose locals change at every
// line, up to the per-run event limit (100,000 events), with values near value_chars.
const repoBenchTest = `from work import churn


def test_%d():
    assert churn(%d) == 64
`

// repoBenchWork is the module the tests call.
const repoBenchWork = `def churn(n):
    table = {}
    text = ""
    for i in range(n):
        table[i %% 64] = "v" * 12 + str(i)
        text = (text + str(i))[-900:]
    return len(table)
`

// BenchmarkRepositoryPeakRSS runs `ndtrace run` over one repository of 40 tests, each traced near
// the per-run limits (about 100,000 events whose locals change at every line), and over one of 4
// such tests as the baseline in the same run, and reports each run's peak RSS (the ndtrace
// process; the sandbox's processes are its children, not counted): what a worker holds of a
// repository must not grow with its tests (issue 26: 4 tests took 3.2 GiB, 40 tests 13.3 GiB when
// every test's trace stayed in memory until the repository ended). Run with -benchtime=1x.
func BenchmarkRepositoryPeakRSS(b *testing.B) {
	dir := b.TempDir()
	repo := func(name string, tests int) string {
		root := filepath.Join(dir, name)
		files := map[string]string{"work.py": fmt.Sprintf(repoBenchWork)}
		for k := 0; k < tests; k++ {
			files[fmt.Sprintf("tests/test_%02d.py", k)] = fmt.Sprintf(repoBenchTest, k, 33000)
		}
		for p, body := range files {
			full := filepath.Join(root, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		return root
	}
	workerBin, err := benchWorkerBinary()
	if err != nil {
		b.Fatal(err)
	}
	temporal, stopServer := serverChild(b, dir)
	// peaks: by default (one process, embedded server) and as a cluster runs it (the worker
	// binary against ndtrace server), each for 4 and 40 tests.
	var peaks [2][2]int64
	for i := 0; i < b.N; i++ {
		for w, worker := range []bool{false, true} {
			for j, n := range []int{4, 40} {
				name := fmt.Sprintf("r%d-%d-%v", n, i, worker)
				spec := filepath.Join(dir, name+".yaml")
				body := fmt.Sprintf("name: %s\noutput: %s\nsources:\n  - kind: repository\n    url: %s\n    functions: false\n"+
					"created_at: 2026-11-22T00:00:00Z\nlimits:\n  timeout: 120s\n", name, filepath.Join(dir, name+"-data"), repo(name, n))
				if err := os.WriteFile(spec, []byte(body), 0o644); err != nil {
					b.Fatal(err)
				}
				var peak int64
				if worker {
					_, peak = runBinaryAt(b, workerBin, "run", "--spec", spec, "--temporal", temporal)
				} else {
					_, peak = runBinary(b, "run", "--spec", spec)
				}
				peaks[w][j] = max(peaks[w][j], peak)
				m := benchManifest(b, filepath.Join(dir, name+"-data"))
				if m.Counts["tests_run"] != int64(n) || m.Totals.Rows == 0 {
					b.Fatalf("%s: %d tests run, %d rows (counts %v)", name, m.Counts["tests_run"], m.Totals.Rows, m.Counts)
				}
			}
		}
	}
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	b.ReportMetric(mib(peaks[0][0]), "4-tests-peak-RSS-MiB")
	b.ReportMetric(mib(peaks[0][1]), "40-tests-peak-RSS-MiB")
	b.ReportMetric(float64(peaks[0][1])/float64(peaks[0][0]), "ratio-40/4")
	b.ReportMetric(mib(peaks[1][0]), "worker-4-tests-peak-RSS-MiB")
	b.ReportMetric(mib(peaks[1][1]), "worker-40-tests-peak-RSS-MiB")
	b.ReportMetric(float64(peaks[1][1])/float64(peaks[1][0]), "worker-ratio-40/4")
	b.ReportMetric(mib(stopServer()), "server-peak-RSS-MiB")
}
