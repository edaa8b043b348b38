package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/dataset"
	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/internal/testrepos"
	"github.com/ndtrace/ndtrace/schemas"
)

// shardHashes is the SHA-256 of every shard of m, sorted.
func shardHashes(m *dataset.Manifest) []string {
	var out []string
	for _, s := range m.Shards {
		out = append(out, s.SHA256)
	}
	slices.Sort(out)
	return out
}

// differingRows counts the rows of a that b lacks or has with other text (by row id), and the
// rows of b that a lacks.
func differingRows(a, b []schemas.Row) int {
	byID := map[string]string{}
	for _, r := range b {
		byID[r.ID] = r.Text
	}
	n := 0
	for _, r := range a {
		if text, ok := byID[r.ID]; !ok || text != r.Text {
			n++
		}
		delete(byID, r.ID)
	}
	return n + len(byID)
}

// TestRunRepositoryReproducible runs the same repository spec twice over the nondeterministic and
// passing fixture repositories, without reexecution (the runs differ: object ids, times, set
// orders, a test whose path depends on os.urandom) and with it (the default: the two runs' shards
// are byte-identical, and the counts say what was replaced and quarantined).
func TestRunRepositoryReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("long integration test; run without -short")
	}
	nd, _ := testrepos.Git(t, "nondeterministic")
	passing, _ := testrepos.Git(t, "passing")
	lines := []string{nd + " main", passing + " main"}
	// Reexecution off: two runs of one spec differ.
	out1, m1 := runRepoList(t, "repro", lines, "    reexecute: false\n", "")
	out2, m2 := runRepoList(t, "repro", lines, "    reexecute: false\n", "")
	rows1, rows2 := repositoryRows(t, out1, m1), repositoryRows(t, out2, m2)
	before := differingRows(rows1, rows2)
	t.Logf("reexecute off: %d of %d repository rows differ between two runs", before, len(rows1))
	if before == 0 || slices.Equal(shardHashes(m1), shardHashes(m2)) {
		t.Errorf("reexecute off: the two runs agree (%d rows differ): the fixture shows nothing", before)
	}
	if m1.Counts[schemas.CountValuesNondeterministic] != 0 || m1.Counts[schemas.CountTestsNondeterministic] != 0 {
		t.Errorf("reexecute off: counts %v", m1.Counts)
	}
	// Reexecution on (the default), with a frozen clock: byte-identical shards.
	out3, m3 := runRepoList(t, "repro", lines, "    frozen_clock: true\n", "")
	out4, m4 := runRepoList(t, "repro", lines, "    frozen_clock: true\n", "")
	rows3, rows4 := repositoryRows(t, out3, m3), repositoryRows(t, out4, m4)
	after := differingRows(rows3, rows4)
	if after > 0 {
		byID := map[string]string{}
		for _, r := range rows4 {
			byID[r.ID] = r.Text
		}
		for _, r := range rows3 {
			if byID[r.ID] != r.Text {
				t.Logf("row %s differs:\n%s\n----\n%s", r.ID, r.Text, byID[r.ID])
			}
		}
	}
	t.Logf("reexecute on: %d of %d repository rows differ; counts %v", after, len(rows3), m3.Counts)
	if h3, h4 := shardHashes(m3), shardHashes(m4); len(h3) == 0 || !slices.Equal(h3, h4) || after != 0 {
		t.Errorf("reexecute on: shards %v and %v (%d rows differ)", h3, h4, after)
	}
	for _, k := range []schemas.CountKey{schemas.CountValuesNondeterministic, schemas.CountTestsNondeterministic} {
		if m3.Counts[k] == 0 || m3.Counts[k] != m4.Counts[k] {
			t.Errorf("reexecute on: %s counted %d and %d", k, m3.Counts[k], m4.Counts[k])
		}
	}
	// The deterministic repository's rows are the same with and without reexecution.
	var plainOff, plainOn []schemas.Row
	for _, r := range rows1 {
		if r.RepoURL == passing {
			plainOff = append(plainOff, r)
		}
	}
	for _, r := range rows3 {
		if r.RepoURL == passing {
			plainOn = append(plainOn, r)
		}
	}
	if len(plainOn) == 0 || differingRows(plainOff, plainOn) != 0 {
		t.Errorf("the passing repository: %d rows without reexecution, %d with, %d differ", len(plainOff), len(plainOn), differingRows(plainOff, plainOn))
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"stats", out3}, &stdout, &stderr); code != 0 {
		t.Fatalf("stats: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "traced twice: 1 tests quarantined") {
		t.Errorf("stats does not show the reexecution:\n%s", stdout.String())
	}
	noisy := 0
	for _, r := range rows3 {
		if strings.Contains(r.Text, execute.Nondeterministic) {
			noisy++
		}
	}
	// Whether a sampled trajectory shows a replaced value depends on which values differed
	// between the two traced runs of this invocation (0 to 3 of the 30 rows in seven runs on one
	// machine, issue 30): the replacement itself is the counts' (values_nondeterministic, above),
	// and the byte-identical shards show it took effect.
	t.Logf("reexecute on: %d of %d repository rows show %s", noisy, len(rows3), execute.Nondeterministic)
}
