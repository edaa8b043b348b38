package pyreq

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in, want string // want "" with refused set: refused
		refused  string // a part of the reason
	}{
		{in: "requests", want: "requests"},
		{in: "  Requests_OAuthlib.x  ", want: "Requests_OAuthlib.x"},
		{in: "requests[security, socks] >= 2.8.1, == 2.8.*", want: "requests[security,socks]>=2.8.1,==2.8.*"},
		{in: "name (>=1.0,<2)", want: "name>=1.0,<2"},
		{in: "pytest~=7.0; python_version >= '3.8'", want: "pytest~=7.0; python_version >= '3.8'"},
		{in: `typing-extensions ; (python_version<"3.10" and os_name=="posix") or extra == "test"`,
			want: `typing-extensions; ( python_version < "3.10" and os_name == "posix" ) or extra == "test"`},
		{in: "foo===1.0+local", want: "foo===1.0+local"},
		{in: "pkg; 'linux' not in sys_platform", want: "pkg; 'linux' not in sys_platform"},
		{in: "-e .", refused: "pip options are refused"},
		{in: "-r other.txt", refused: "pip options are refused"},
		{in: "--index-url https://evil.example/simple", refused: "pip options are refused"},
		{in: "--extra-index-url=https://evil.example/simple", refused: "pip options are refused"},
		{in: "-f https://evil.example/", refused: "pip options are refused"},
		{in: "pkg --hash=sha256:00", refused: "unexpected"},
		{in: "pkg @ https://evil.example/pkg.whl", refused: "direct references"},
		{in: "pkg@file:///etc/passwd", refused: "direct references"},
		{in: "https://evil.example/pkg-1.0.tar.gz", refused: "URLs are refused"},
		{in: "git+https://github.com/x/y", refused: "URLs are refused"},
		{in: "git+ssh://git@github.com/x/y", refused: "URLs are refused"},
		{in: "./vendor/pkg", refused: "local paths"},
		{in: "/abs/pkg", refused: "local paths"},
		{in: "vendor/pkg", refused: "local paths"},
		{in: "pkg-1.0-py3-none-any.whl", refused: "archive files"},
		{in: "pkg.tar.gz", refused: "archive files"},
		{in: "pkg; __import__('os')", refused: "marker"},
		{in: "pkg; python_version >= ", refused: "marker"},
		{in: "pkg; os.system('x')", refused: "marker"},
		{in: "pkg ==", refused: "expected a version"},
		{in: "pkg[", refused: "extras"},
		{in: "pkg\x00", refused: "control"},
		{in: "pkg\n--index-url x", refused: "control"},
		{in: "pkg ${HOME}", refused: "unexpected"},
		{in: "", refused: "empty"},
		{in: strings.Repeat("a", MaxLength+1), refused: "longer"},
	}
	for _, tc := range tests {
		r, err := Parse(tc.in)
		if tc.refused != "" {
			if err == nil || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("Parse(%q) = %v, %v; want refused with %q", tc.in, r, err, tc.refused)
			}
			continue
		}
		if err != nil || r.String() != tc.want {
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.in, r, err, tc.want)
		}
	}
}

func TestParseFile(t *testing.T) {
	good := "# deps\nrequests>=2  # http\n\nnumpy \\\n  ==1.26.*\npytest; python_version>'3'\n"
	rs, err := ParseFile("requirements.txt", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.String())
	}
	if strings.Join(got, "|") != "requests>=2|numpy==1.26.*|pytest; python_version > '3'" {
		t.Errorf("got %q", got)
	}
	for in, want := range map[string]string{
		"requests\n--extra-index-url https://evil.example/simple\n": "requirements.txt line 2",
		"-r base.txt\n":                   "pip options are refused",
		"pkg @ https://x.example/p.whl\n": "direct references",
		"ok\n-e git+https://x/y#egg=y\n":  "line 2",
	} {
		if _, err := ParseFile("requirements.txt", []byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseFile(%q): %v, want an error with %q", in, err, want)
		}
	}
	if _, err := ParseFile("r.txt", []byte(strings.Repeat("a\n", MaxRequirements+1))); err == nil {
		t.Error("too many requirements accepted")
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{"Foo_Bar": "foo-bar", "a.-_b": "a-b", "x": "x"} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParse checks that what Parse accepts renders to a requirement that parses to itself, starts
// with a name, and holds nothing that pip reads as an option, a URL or a path.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"requests", "a[b,c]>=1,<2; python_version >= '3.8'", "-e .", "p @ https://x",
		"x (==1)", "y; (os_name == 'nt' or extra == \"t\")", "z===a+b!c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			return
		}
		out := r.String()
		if strings.HasPrefix(out, "-") || strings.Contains(out, "://") || strings.ContainsAny(out, "@/\\\n\r\x00$") {
			t.Fatalf("Parse(%q) accepted %q", s, out)
		}
		r2, err := Parse(out)
		if err != nil || r2.String() != out {
			t.Fatalf("Parse(%q) = %q, which parses to %q, %v", s, out, r2, err)
		}
	})
}

// FuzzParseFile checks that ParseFile never panics and that every requirement it returns is one
// Parse accepts.
func FuzzParseFile(f *testing.F) {
	f.Add([]byte("a\n# c\nb>=1 \\\n ,<2\n"))
	f.Add([]byte("-r x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := ParseFile("f", data)
		if err != nil {
			return
		}
		for _, r := range rs {
			if _, err := Parse(r.String()); err != nil {
				t.Fatalf("ParseFile gave %q, which Parse refuses: %v", r, err)
			}
		}
	})
}
