package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckBinds(t *testing.T) {
	host := t.TempDir() // never mounted here: only checked
	if strings.HasPrefix(host, "/tmp/") {
		host = filepath.Join("/var/tmp", filepath.Base(host))
		if err := os.MkdirAll(host, 0o755); err != nil {
			t.Skip(err)
		}
		defer os.RemoveAll(host)
	}
	file := filepath.Join(host, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		cfg   Config
		wantE string
	}{
		{"ok", Config{Binds: []Bind{{host, "/checkout"}}, ReadOnly: []string{host}, PythonPath: []string{host}}, ""},
		{"relative host", Config{Binds: []Bind{{"rel", "/checkout"}}}, "not absolute"},
		{"host under /tmp", Config{Binds: []Bind{{"/tmp/x", "/checkout"}}}, "under /tmp"},
		{"missing host", Config{Binds: []Bind{{host + "/nope", "/checkout"}}}, "no such file"},
		{"host a file", Config{Binds: []Bind{{file, "/checkout"}}}, "not a directory"},
		{"at /", Config{Binds: []Bind{{host, "/"}}}, "other than /"},
		{"at relative", Config{Binds: []Bind{{host, "checkout"}}}, "clean absolute"},
		{"at unclean", Config{Binds: []Bind{{host, "/checkout/../usr"}}}, "clean absolute"},
		{"at /usr", Config{Binds: []Bind{{host, "/usr/lib/x"}}}, "sandbox's own /usr"},
		{"around /tmp", Config{Binds: []Bind{{host, "/tmp"}}}, "sandbox's own /tmp"},
		{"at the support mount", Config{Binds: []Bind{{host, supportMount}}}, "sandbox's own"},
		{"nested binds", Config{Binds: []Bind{{host, "/checkout"}, {host, "/checkout/x"}}}, "overlap"},
		{"around a same-path mount", Config{Binds: []Bind{{host, "/var"}}, ReadOnly: []string{"/var/lib"}}, "overlap"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.checkBinds()
			switch {
			case c.wantE == "" && err != nil:
				t.Fatalf("checkBinds: %v", err)
			case c.wantE != "" && (err == nil || !strings.Contains(err.Error(), c.wantE)):
				t.Fatalf("checkBinds: %v, want an error with %q", err, c.wantE)
			}
		})
	}
}

func TestInsideAndHost(t *testing.T) {
	c := Config{Binds: []Bind{{"/var/w/repo-1/src", "/checkout"}, {"/var/w/envs/ab", "/envs/ab"}}}
	for _, tc := range []struct{ host, in string }{
		{"/var/w/repo-1/src", "/checkout"},
		{"/var/w/repo-1/src/", "/checkout"},
		{"/var/w/repo-1/src/pkg/a.py", "/checkout/pkg/a.py"},
		{"/var/w/repo-1/srcx", "/var/w/repo-1/srcx"},
		{"/var/w/repo-1", "/var/w/repo-1"},
		{"/var/w/envs/ab/lib/site-packages", "/envs/ab/lib/site-packages"},
		{"/usr/lib", "/usr/lib"},
	} {
		if got := c.inside(tc.host); got != tc.in {
			t.Errorf("inside(%s) = %s, want %s", tc.host, got, tc.in)
		}
		if want := filepath.Clean(tc.host); c.host(tc.in) != want {
			t.Errorf("host(%s) = %s, want %s", tc.in, c.host(tc.in), want)
		}
	}
	in := Config{ReadOnly: []string{"/var/w/repo-1/src", "/opt/v"}, PythonPath: []string{"/var/w/repo-1/src/lib", "/var/w/envs/ab/sp"},
		Binds: c.Binds}.insideConfig()
	if strings.Join(in.ReadOnly, " ") != "/checkout /opt/v" || strings.Join(in.PythonPath, " ") != "/checkout/lib /envs/ab/sp" {
		t.Errorf("insideConfig: %v %v", in.ReadOnly, in.PythonPath)
	}
	if got := strings.Join(c.insideTargets([]string{"/var/w/repo-1/src/", "/var/w/repo-1/src/a.py", "main.py", "/opt/x/"}), " "); got != "/checkout/ /checkout/a.py main.py /opt/x/" {
		t.Errorf("insideTargets: %s", got)
	}
	// Below a bind, bytecode never loads from the checkout (pycPythonPath), as before.
	if p := in.pycPythonPath(); strings.Join(p, " ") != "/envs/ab/sp" {
		t.Errorf("pycPythonPath: %v", p)
	}
}

// TestBoundSource: the verifier reads a bound folder's files from the host, and only the files
// below the bound path: a name outside it (.., another folder, a relative name) is no file of the
// run, whatever the host holds.
func TestBoundSource(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "a.py"), []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(host), "outside.py"), []byte("y = 1\n"), 0o644); err == nil {
		defer os.Remove(filepath.Join(filepath.Dir(host), "outside.py"))
	}
	c := Config{Binds: []Bind{{host, "/checkout"}}}
	src := boundSource("/checkout", c.host)
	if txt, ok := src("/checkout/a.py"); !ok || txt == nil {
		t.Fatal("/checkout/a.py not read from the host folder")
	}
	for _, name := range []string{"/checkout/../outside.py", host + "/a.py", "a.py", "/checkout/b.py", "/checkoutx/a.py", "/checkout/a.py\x00"} {
		if _, ok := src(name); ok {
			t.Errorf("%q read as a file of the run", name)
		}
	}
	// Without binds, the folder is read where it is.
	if _, ok := boundSource(host, nil)(host + "/a.py"); !ok {
		t.Error("an unbound folder's file not read")
	}
}
