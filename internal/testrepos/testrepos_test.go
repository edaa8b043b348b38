package testrepos

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// runner imports every tests/test_*.py module of the repository in the working directory and calls
// its test_* functions, printing {"module::test": outcome} as JSON. Tests named on the command line
// are skipped (hanging's test_forever). It stands in for pytest, which is not installed.
const runner = `
import importlib, inspect, json, pathlib, sys
sys.path.insert(0, ".")
skip = set(sys.argv[1:])
out = {}
for f in sorted(pathlib.Path("tests").glob("test_*.py")):
    mod = "tests." + f.stem
    try:
        m = importlib.import_module(mod)
    except Exception as e:
        out[mod] = "collect-error:" + type(e).__name__
        continue
    for name, fn in sorted(vars(m).items()):
        if not name.startswith("test_") or not inspect.isfunction(fn):
            continue
        key = mod + "::" + name
        if name in skip:
            out[key] = "skipped"
            continue
        try:
            fn()
            out[key] = "passed"
        except AssertionError:
            out[key] = "failed"
        except Exception as e:
            out[key] = "error:" + type(e).__name__
print(json.dumps(out, sort_keys=True))
`

func python(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 not found")
		}
		t.Skip("python3 not found")
	}
	return p
}

// TestOutcomes runs each embedded repository's tests with real Python and checks the outcomes the
// package documentation promises.
func TestOutcomes(t *testing.T) {
	py := python(t)
	tests := []struct {
		name string
		skip []string
		want map[string]string
	}{
		{name: "passing", want: map[string]string{
			"tests.test_mathutil::test_clamp": "passed", "tests.test_mathutil::test_counter": "passed",
			"tests.test_mathutil::test_mean": "passed", "tests.test_mathutil::test_mean_empty": "passed",
			"tests.test_mathutil::test_primes_below": "passed", "tests.test_mathutil::test_total": "passed",
		}},
		{name: "failing", want: map[string]string{
			"tests.test_mathutil::test_total": "passed", "tests.test_mathutil::test_clamp_wrong": "failed",
			"tests.test_mathutil::test_mean_of_nothing": "error:ValueError",
		}},
		{name: "hanging", skip: []string{"test_forever"}, want: map[string]string{
			"tests.test_loops::test_countdown": "passed", "tests.test_loops::test_forever": "skipped",
			"tests.test_optional": "collect-error:ModuleNotFoundError",
		}},
		{name: "forking", want: map[string]string{
			"tests.test_fork::test_square": "passed", "tests.test_fork::test_os_fork": "passed",
			"tests.test_fork::test_multiprocessing_fork": "passed",
		}},
		{name: "writes_files", want: map[string]string{
			"tests.test_notes::test_put_get": "passed", "tests.test_notes::test_missing": "passed",
			"tests.test_notes::test_log_next_to_code": "passed", "tests.test_notes::test_word_count": "passed",
		}},
		{name: "generators", want: map[string]string{
			"tests.test_lazy::test_squares": "passed", "tests.test_lazy::test_countdown": "passed",
			"tests.test_lazy::test_naturals": "passed", "tests.test_lazy::test_chunks": "passed",
			"tests.test_lazy::test_evens": "passed", "tests.test_lazy::test_scaled": "passed",
			"tests.test_lazy::test_fib": "passed", "tests.test_lazy::test_plus_one": "passed",
			"tests.test_lazy::test_tagged": "passed",
		}},
		{name: "linked_list", want: map[string]string{
			"tests.test_linkedlist::test_values": "passed", "tests.test_linkedlist::test_values_reversed": "passed",
			"tests.test_linkedlist::test_step": "passed", "tests.test_linkedlist::test_group_by_parity": "passed",
			"tests.test_linkedlist::test_pairs": "passed", "tests.test_linkedlist::test_tagged": "passed",
		}},
		{name: "nondeterministic", want: map[string]string{
			"tests.test_registry::test_tag": "passed", "tests.test_registry::test_ident": "passed",
			"tests.test_registry::test_fingerprint": "passed", "tests.test_registry::test_stamp": "passed",
			"tests.test_registry::test_names_of": "passed", "tests.test_registry::test_index_of": "passed",
			"tests.test_registry::test_weak_name": "passed", "tests.test_registry::test_roll": "passed",
			"tests.test_registry::test_total": "passed", "tests.test_registry::test_wander": "passed",
		}},
		{name: "doctests", want: map[string]string{
			"tests.test_textfmt::test_testmod": "passed", "tests.test_textfmt::test_run_docstring_examples": "passed",
			"tests.test_textfmt::test_shout": "passed",
		}},
		{name: "gc_at_import", want: map[string]string{
			"tests.test_calc::test_add": "passed", "tests.test_calc::test_scale": "passed",
			"tests.test_gc::test_live": "passed", "tests.test_more::test_add_negative": "passed",
		}},
		{name: "missing_module", want: map[string]string{
			"tests.test_properties": "collect-error:ModuleNotFoundError",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(py, append([]string{"-I", "-B", "-c", runner}, tc.skip...)...)
			cmd.Dir = Dir(t, tc.name)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%v: %s", err, stderr.String())
			}
			var got map[string]string
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("outcomes %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("tests_py_unittest", func(t *testing.T) {
		cmd := exec.Command(py, "-B", "-m", "unittest", "discover")
		cmd.Dir = Dir(t, "tests_py_unittest")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Ran 5 tests") || !strings.Contains(string(out), "OK") {
			t.Errorf("unittest discover: %v\n%s", err, out)
		}
	})
	t.Run("unittest_only", func(t *testing.T) {
		cmd := exec.Command(py, "-B", "-m", "unittest", "discover")
		cmd.Dir = Dir(t, "unittest_only")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Ran 5 tests") || !strings.Contains(string(out), "OK") {
			t.Errorf("unittest discover: %v\n%s", err, out)
		}
	})
}

func TestNamesAndFiles(t *testing.T) {
	want := []string{"doctests", "failing", "forking", "gc_at_import", "generators", "hanging", "lib_layout", "linked_list", "missing_module", "nondeterministic", "ns_layout", "passing", "runner_options", "selection", "src_layout", "tests_py_unittest", "trace_sensitive", "unittest_only", "with_dependency", "writes_files"}
	if got := Names(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	files := Files(t, "passing")
	for _, p := range []string{"mathutil.py", "tests/__init__.py", "tests/test_mathutil.py"} {
		if _, ok := files[p]; !ok {
			t.Errorf("passing lacks %s (has %v)", p, files)
		}
	}
	dir := Dir(t, "passing")
	if data, err := os.ReadFile(filepath.Join(dir, "mathutil.py")); err != nil || !bytes.Equal(data, files["mathutil.py"]) {
		t.Errorf("Dir: %v", err)
	}
}

func TestGitDeterministic(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git not found")
	}
	url1, c1 := Git(t, "passing")
	url2, c2 := Git(t, "passing")
	if url1 == url2 || c1 != c2 || len(c1) != 40 {
		t.Errorf("Git gave %s %s and %s %s; want different URLs and one 40-hex commit", url1, c1, url2, c2)
	}
	if _, c3 := Git(t, "failing"); c3 == c1 {
		t.Error("different repositories gave the same commit")
	}
	dir := strings.TrimPrefix(url1, "file://")
	if tag := strings.TrimSpace(RunGit(t, dir, "rev-parse", Tag+"^{commit}")); tag != c1 {
		t.Errorf("tag %s at %s, want %s", Tag, tag, c1)
	}
	_, s1 := SymlinkEscape(t)
	_, s2 := SymlinkEscape(t)
	if s1 != s2 {
		t.Errorf("SymlinkEscape commits %s and %s differ", s1, s2)
	}
}

func TestTarball(t *testing.T) {
	a, b := Tarball(t, "passing", "passing-1.0"), Tarball(t, "passing", "passing-1.0/")
	if !bytes.Equal(a, b) {
		t.Fatal("Tarball is not deterministic")
	}
	gz, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
	}
	want := []string{"passing-1.0/", "passing-1.0/mathutil.py", "passing-1.0/tests/", "passing-1.0/tests/__init__.py",
		"passing-1.0/tests/test_mathutil.py"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("entries %v, want %v", names, want)
	}
}
