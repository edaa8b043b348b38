package pyreq

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ndtrace/ndtrace/internal/costbound"
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
	rs, err := ParseFile(context.Background(), "requirements.txt", []byte(good))
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
		if _, err := ParseFile(context.Background(), "requirements.txt", []byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseFile(%q): %v, want an error with %q", in, err, want)
		}
	}
	if _, err := ParseFile(context.Background(), "r.txt", []byte(strings.Repeat("a\n", MaxRequirements+1))); err == nil {
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
		rs, err := ParseFile(context.Background(), "f", data)
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

// parseFileCost bounds what ParseFile allocates per byte of a requirements file: the lines (a
// string header each, 16 bytes, at most one per byte), the joined continuations and one
// Requirement per accepted line (at most MaxRequirements of them).
var parseFileCost = costbound.Bound{PerByte: 64, Fixed: 1 << 20}

// TestParseFileCost feeds ParseFile the hostile shapes of a requirements file up to its cap
// (MaxFileBytes): it must parse or refuse each with work linear in its size (joining continued
// lines by repeated concatenation was quadratic: 350k continuation lines allocated some 60 GB),
// and refuse a larger file by the cap, naming the file, before looking at its lines.
func TestParseFileCost(t *testing.T) {
	fill := func(unit string) []byte { return []byte(strings.Repeat(unit, MaxFileBytes/len(unit))) }
	tests := []struct {
		name    string
		data    []byte
		refused string // a part of the error, "" when it parses
	}{
		{"continuation lines", fill("a\\\n"), "longer than"},
		{"bare backslashes", fill("\\\n"), ""},
		{"blank lines", fill("\n"), ""},
		{"CRLF blank lines", fill("\r\n"), ""},
		{"comments", fill("# c\n"), ""},
		{"one long line", fill("a"), "longer than"},
		{"requirements up to the count", []byte(strings.Repeat("a\n", MaxRequirements) + strings.Repeat("\n", MaxFileBytes-2*MaxRequirements)), ""},
		{"one too many", []byte(strings.Repeat("abc>=1\n", MaxRequirements+1)), "more than"},
		{"over the cap", append(fill("\n"), '\n'), "larger than 1048576 bytes"},
		{"over the cap, continued", []byte(strings.Repeat("a\\\n", MaxFileBytes)), "larger than 1048576 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			n := costbound.Check(t, "ParseFile", len(tc.data), parseFileCost, func() {
				_, err = ParseFile(context.Background(), "requirements.txt", tc.data)
			})
			t.Logf("%d bytes allocated, %.1f per byte", n, float64(n)/float64(len(tc.data)))
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "requirements.txt")):
				t.Errorf("got %v, want an error naming requirements.txt with %q", err, tc.refused)
			}
		})
	}
}

// TestParseFileCancel checks that a cancelled context stops ParseFile within its lines, joined
// or not.
func TestParseFileCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, data := range []string{strings.Repeat("a\n", 5000), strings.Repeat("\\\n", 5000), strings.Repeat("\n", 5000)} {
		if _, err := ParseFile(ctx, "r.txt", []byte(data)); !errors.Is(err, context.Canceled) {
			t.Errorf("%.6q...: %v, want context.Canceled", data, err)
		}
	}
}

// BenchmarkParseFileContinuations parses a requirements file of backslash-continued lines up to
// MaxFileBytes (349k lines): joined by concatenation, it took 1 min 46 s.
func BenchmarkParseFileContinuations(b *testing.B) {
	data := []byte(strings.Repeat("a\\\n", MaxFileBytes/3))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		ParseFile(context.Background(), "requirements.txt", data)
	}
}
