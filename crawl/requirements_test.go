package crawl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/crawl/pyreq"
	"github.com/ndtrace/ndtrace/internal/costbound"
	"github.com/ndtrace/ndtrace/schemas"
)

// TestCheckRequirements checks the requirements of a spec's env lists, which schemas.ParseSpec
// leaves to CheckRequirements: the errors name the field, as ParseSpec's do.
func TestCheckRequirements(t *testing.T) {
	tests := []struct{ yaml, err string }{
		{"sources:\n  - kind: repository\n    url: a\n    env: ['pytest>=7', 'numpy; python_version >= \"3.9\"']\n", ""},
		{"sources:\n  - kind: repository\n    url: a\n    env: repository\n", ""},
		{"sources:\n  - kind: examples\n", ""},
		{"sources:\n  - kind: repository\n    url: a\n    env: ['-e .']\n", "spec: sources[0].env[0]: requirement \"-e .\": "},
		{"sources:\n  - kind: repository\n    url: a\n    env: [x]\n  - kind: repository\n    url: b\n    env: [y, 'x @ https://evil.example/x.whl']\n",
			"spec: sources[1].env[1]: requirement \"x @ https://evil.example/x.whl\": direct references"},
	}
	for _, tc := range tests {
		s, err := schemas.ParseSpec([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		err = CheckRequirements(s)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)) {
			t.Errorf("%q: %v; want an error starting %q", tc.yaml, err, tc.err)
		}
	}
}

// manyIncludes is a checkout whose requirements.txt includes n other files, each requiring "a".
func manyIncludes(n int) map[string]string {
	files := map[string]string{}
	var top strings.Builder
	for i := range n {
		fmt.Fprintf(&top, "-r requirements/r%d.txt\n", i)
		files[fmt.Sprintf("requirements/r%d.txt", i)] = "a\n"
	}
	files["requirements.txt"] = top.String()
	return files
}

func TestDeclaredRequirements(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string // the requirements, joined by |
		err   string // a part of the error
	}{
		{name: "nothing", files: map[string]string{"m.py": ""}, want: ""},
		{name: "pyproject", files: map[string]string{"pyproject.toml": `
[project]
name = "My_Pkg"
dependencies = ["requests>=2", "attrs"]
[project.optional-dependencies]
test = ["pytest>=7", "my-pkg[extra]"]
docs = ["sphinx"]
dev = ["attrs", "hypothesis; python_version >= '3.8'"]
`}, want: "requests>=2|attrs|pytest>=7|hypothesis; python_version >= '3.8'"},
		{name: "setup.cfg", files: map[string]string{"setup.cfg": `
[metadata]
name = tool
[options]
install_requires =
    six
    numpy>=1.20  # arrays
[options.extras_require]
testing =
    pytest
    tool[fast]
docs = sphinx
`}, want: "six|numpy>=1.20|pytest"},
		{name: "files", files: map[string]string{
			"requirements.txt":        "click\n",
			"test-requirements.txt":   "pytest\nclick\n",
			"requirements_dev.txt":    "black\n",
			"requirements/test.txt":   "coverage\n",
			"requirements/docs.txt":   "sphinx\n",
			"requirements-extras.txt": "bogus\n",
		}, want: "click|coverage|black|pytest"},
		{name: "hostile index", files: map[string]string{"requirements.txt": "click\n--extra-index-url https://evil.example/simple\n"},
			err: "requirements.txt line 2: requirement \"--extra-index-url https://evil.example/simple\": pip options are refused"},
		{name: "include and self", files: map[string]string{
			"requirements-dev.txt": "-e .[test]\n-r requirements/base.in  # shared\n--requirement=more/extra.txt\npytest\n",
			"requirements/base.in": "click\n-r ../requirements-dev.txt\n", // a cycle: each file once
			"more/extra.txt":       ".\nattrs\n",
		}, want: "pytest|click|attrs"},
		{name: "include outside", files: map[string]string{"requirements-test.txt": "-r ../../etc/passwd\n"}, err: "outside the checkout"},
		{name: "include missing", files: map[string]string{"requirements-test.txt": "-r nowhere.txt\n"}, err: "no such file"},
		{name: "include too deep", files: map[string]string{"requirements.txt": "-r a.txt\n", "a.txt": "-r b.txt\n",
			"b.txt": "-r c.txt\n", "c.txt": "-r d.txt\n", "d.txt": "-r e.txt\n", "e.txt": "x\n"}, err: "more than 4 deep"},
		{name: "hostile editable", files: map[string]string{"requirements-dev.txt": "-e ../other\n"}, err: "pip options are refused"},
		{name: "hostile constraint", files: map[string]string{"requirements-dev.txt": "-c constraints.txt\n"}, err: "pip options are refused"},
		{name: "hostile url", files: map[string]string{"pyproject.toml": "[project]\ndependencies = [\"x @ https://evil.example/x.whl\"]\n"},
			err: "direct references"},
		{name: "hostile setup.cfg", files: map[string]string{"setup.cfg": "[options]\ninstall_requires =\n    git+https://evil.example/x\n"},
			err: "URLs are refused"},
		{name: "file directive", files: map[string]string{"setup.cfg": "[options]\ninstall_requires = file: reqs.in\n"}, err: "file:"},
		{name: "bad toml", files: map[string]string{"pyproject.toml": "[project\n"}, err: "pyproject.toml"},
		{name: "huge", files: map[string]string{"requirements.txt": strings.Repeat("# x\n", 300000)}, err: "larger than"},
		{name: "long include name", files: map[string]string{"requirements.txt": "-r " + strings.Repeat("x", 2000) + "\n"}, err: "requirements.txt line 1: includes a file named by more than 1024 bytes"},
		{name: "long malformed setup.cfg line", files: map[string]string{"setup.cfg": "[" + strings.Repeat("s", 5000) + "]\n" + strings.Repeat("x", 5000) + "\n"},
			err: "crawl: setup.cfg: [" + strings.Repeat("s", 200) + "]: line \"" + strings.Repeat("x", 200) + "\" is not key = value"},
		{name: "too many includes", files: manyIncludes(maxRequirementFiles), err: "requirements/r63.txt: more than 64 requirement files read"},
		{name: "includes up to the cap", files: manyIncludes(maxRequirementFiles - 1), want: "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for p, c := range tc.files {
				os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
				os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644)
			}
			rs, err := DeclaredRequirements(context.Background(), dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rs {
				got = append(got, r.String())
			}
			if g := strings.Join(got, "|"); g != tc.want {
				t.Errorf("got %q, want %q", g, tc.want)
			}
		})
	}
}

func TestDeclaredRequirementsLinkOut(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(secret, []byte("click\n"), 0o644)
	os.Symlink(secret, filepath.Join(dir, "requirements.txt"))
	if _, err := DeclaredRequirements(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "requirements.txt") {
		t.Errorf("a requirements file linking out of the checkout: %v", err)
	}
}

// declaredCost bounds what DeclaredRequirements allocates per byte of the files it reads: the
// TOML library's document (some 70 bytes per byte of a one-array file, the worst shape found),
// the setup.cfg values and the requirements; Fixed pays for opening the checkout and its files.
var declaredCost = costbound.Bound{PerByte: 256, Fixed: 1 << 20}

// FuzzDeclaredRequirements feeds arbitrary pyproject.toml, setup.cfg and requirements.txt
// contents: DeclaredRequirements must not panic, what it returns are requirements pyreq accepts,
// and it allocates within declaredCost.
func FuzzDeclaredRequirements(f *testing.F) {
	f.Add("[project]\ndependencies = [\"a>=1\"]\n", "[options]\ninstall_requires =\n    b\n", "c\n-r x\n")
	f.Fuzz(func(t *testing.T, pyproject, setupCfg, reqs string) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "pyproject.toml"), []byte(pyproject), 0o644)
		os.WriteFile(filepath.Join(dir, "setup.cfg"), []byte(setupCfg), 0o644)
		os.WriteFile(filepath.Join(dir, "requirements.txt"), []byte(reqs), 0o644)
		var rs []pyreq.Requirement
		var err error
		n := len(pyproject) + len(setupCfg) + len(reqs)
		costbound.Check(t, "DeclaredRequirements", n, declaredCost, func() { rs, err = DeclaredRequirements(context.Background(), dir) })
		if err != nil {
			return
		}
		for _, r := range rs {
			if s := r.String(); strings.HasPrefix(s, "-") || strings.Contains(s, "://") || strings.Contains(s, "@") {
				t.Fatalf("accepted %q", s)
			}
		}
	})
}
