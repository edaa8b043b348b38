package crawl

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestImportRoots lays out projects the ways real ones declare where their packages are, and
// checks the folders an editable install would add to sys.path.
func TestImportRoots(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"flat module", map[string]string{"mod.py": "", "tests/test_mod.py": ""}, nil},
		{"top-level package", map[string]string{"pkg/__init__.py": "", "src.txt": ""}, nil},
		{"src layout, undeclared", map[string]string{"src/pkg/__init__.py": "", "tests/test_pkg.py": ""}, []string{"src"}},
		{"src namespace package", map[string]string{"src/ns/mod.py": ""}, []string{"src"}},
		{"src module", map[string]string{"src/mod.py": ""}, []string{"src"}},
		{"src without python", map[string]string{"src/data.txt": ""}, nil},
		{"setuptools package-dir", map[string]string{"pyproject.toml": "[tool.setuptools]\npackage-dir = {\"\" = \"lib\"}\n", "lib/pkg/__init__.py": ""}, []string{"lib"}},
		{"setuptools find where", map[string]string{"pyproject.toml": "[tool.setuptools.packages.find]\nwhere = [\"code\"]\n", "code/pkg/__init__.py": ""}, []string{"code"}},
		{"poetry from", map[string]string{"pyproject.toml": "[tool.poetry]\nname = \"x\"\npackages = [{include = \"pkg\", from = \"source\"}]\n", "source/pkg/__init__.py": ""}, []string{"source"}},
		{"hatch packages", map[string]string{"pyproject.toml": "[tool.hatch.build.targets.wheel]\npackages = [\"python/pkg\"]\n", "python/pkg/__init__.py": ""}, []string{"python"}},
		{"pdm package-dir", map[string]string{"pyproject.toml": "[tool.pdm.build]\npackage-dir = \"srcdir\"\n", "srcdir/pkg/__init__.py": ""}, []string{"srcdir"}},
		{"setup.cfg package_dir", map[string]string{"setup.cfg": "[metadata]\nname = x\n\n[options]\npackage_dir =\n    =lib\npackages = find:\n", "lib/pkg/__init__.py": ""}, []string{"lib"}},
		{"setup.cfg package_dir inline", map[string]string{"setup.cfg": "[options]\npackage_dir = =src2\n", "src2/m.py": ""}, []string{"src2"}},
		{"setup.cfg find where", map[string]string{"setup.cfg": "[options.packages.find]\nwhere = lib2\n", "lib2/pkg/__init__.py": ""}, []string{"lib2"}},
		{"declared folder missing", map[string]string{"pyproject.toml": "[tool.setuptools]\npackage-dir = {\"\" = \"nowhere\"}\n", "src/pkg/__init__.py": ""}, []string{"src"}},
		{"declared folder escapes", map[string]string{"pyproject.toml": "[tool.setuptools]\npackage-dir = {\"\" = \"../..\"}\n"}, nil},
		{"per-package mapping is no root", map[string]string{"setup.cfg": "[options]\npackage_dir =\n    pkg = lib/pkg\n", "lib/pkg/__init__.py": ""}, nil},
		{"other pyproject tables", map[string]string{"pyproject.toml": "[project]\nname = \"x\"\n[tool.pytest.ini_options]\naddopts = \"-q\"\n"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				p := filepath.Join(dir, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ImportRoots(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ImportRoots = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestImportRootsMalformed(t *testing.T) {
	for name, content := range map[string]string{"pyproject.toml": "[tool.setuptools\n", "setup.cfg": "[options]\nthis is not a key value\n"} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ImportRoots(dir); err == nil {
			t.Errorf("%s %q: no error", name, content)
		}
	}
}

// FuzzSetupCfgRoots feeds arbitrary setup.cfg files to the parser: it never panics, and every root
// it returns is one of the file's values.
func FuzzSetupCfgRoots(f *testing.F) {
	f.Add("[options]\npackage_dir =\n    =src\n")
	f.Add("[options.packages.find]\nwhere = a, b\n")
	f.Add("[a]\n  x\n=\n")
	f.Fuzz(func(t *testing.T, content string) {
		dir := t.TempDir()
		p := filepath.Join(dir, "setup.cfg")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _ = setupCfgRoots(p)
	})
}
