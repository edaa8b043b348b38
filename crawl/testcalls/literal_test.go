package testcalls

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
)

// literalCases are values IsLiteral must accept (true) or refuse (false): its table, and the seed
// corpus of its fuzz test.
var literalCases = []struct {
	s  string
	ok bool
}{
	{"1", true}, {"-1", true}, {"+1", true}, {"- 1", true}, {"0", true}, {"00", true}, {"1_000", true},
	{"0x1F", true}, {"0o17", true}, {"0b101", true}, {"1.5", true}, {".5", true}, {"1.", true},
	{"1e-5", true}, {"1.e5", true}, {"2j", true}, {"-2j", true}, {"(1+2j)", true}, {"(-1-2.5j)", true},
	{"'x'", true}, {`"x"`, true}, {`'a\'b'`, true}, {`'\x41\u0041\U00000041'`, true}, {`r'\d'`, true},
	{`b'\x00\xff'`, true}, {`Rb'\d'`, true}, {`u'x'`, true}, {"'''a\nb'''", true}, {"'a' 'b'", true},
	{"True", true}, {"False", true}, {"None", true}, {"()", true}, {"(1,)", true}, {"(1)", true},
	{"[]", true}, {"[1, [2, (3,)], {}]", true}, {"{}", true}, {"{1: 'a', 'b': [2]}", true},
	{"{1, 2}", true}, {"set()", true}, {"{(1, 2): 3}", true}, {"[1,\n 2]", true}, {"'é'", true},
	{" 1 ", true}, {"[1, 2,]", true},

	{"", false}, {"x", false}, {"inf", false}, {"nan", false}, {"Ellipsis", false}, {"...", false},
	{"PosixPath('x')", false}, {"typing.Optional[int]", false}, {"<object object at 0x7f>", false},
	{"P(x=1)", false}, {"P(...)", false}, {"[1, 2, ...]", false}, {"'abc...", false}, {"a.b", false},
	{"[1][0]", false}, {"f'x'", false}, {"F'{x}'", false}, {"ur'x'", false}, {"'a' b'b'", false},
	{"1 + 2", false}, {"1j + 2j", false}, {"--1", false}, {"-True", false}, {"-(1)", false},
	{"1 # c", false}, {"1,", false}, {"1, 2", false}, {"(1 2)", false}, {"{[1]: 2}", false},
	{"{[1], 2}", false}, {"{1: 2, 3}", false}, {"{1, 2: 3}", false}, {"'a", false}, {"'a\nb'", false},
	{`'\N{DASH}'`, false}, {`'\x4'`, false}, {`'\u004'`, false}, {`'\U00110000'`, false},
	{"b'é'", false}, {"'\x00'", false}, {"1\n", false}, {"1 \\\n", false}, {"0777", false}, {"1__0", false},
	{"1_", false}, {"0x", false}, {"1e", false}, {"0x1j", false}, {"1.5.5", false}, {"[", false},
	{"(1,", false}, {"frozenset()", false}, {"set(1)", false}, {"True1", false}, {"lambda: 1", false},
	{"__import__('os')", false}, {"[x for x in ()]", false}, {"not 1", false}, {"(1) (2)", false},
	{"\xff", false}, {"'\xff'", false}, {strings.Repeat("[", 150) + strings.Repeat("]", 150), false},
}

func TestIsLiteral(t *testing.T) {
	for _, tc := range literalCases {
		if got := IsLiteral(tc.s); got != tc.ok {
			t.Errorf("IsLiteral(%q) = %v, want %v", tc.s, got, tc.ok)
		}
	}
}

// TestIsLiteralPython checks that every value IsLiteral accepts in the table is one
// ast.literal_eval evaluates (with the value in a call's parentheses, as an item has it).
func TestIsLiteralPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	prog := `import ast, sys, json
for line in sys.stdin:
    s = json.loads(line)
    try:
        ast.literal_eval(s)
        ast.parse("f(" + s + ")", mode="eval")
        print("ok")
    except Exception as e:
        print("no")
`
	var in strings.Builder
	var accepted []string
	for _, tc := range literalCases {
		if IsLiteral(tc.s) {
			accepted = append(accepted, tc.s)
			in.WriteString(quoteJSON(tc.s) + "\n")
		}
	}
	cmd := exec.Command(py, "-c", prog)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for i := 0; sc.Scan(); i++ {
		if sc.Text() != "ok" {
			t.Errorf("IsLiteral accepts %q, which ast.literal_eval refuses", accepted[i])
		}
	}
}

func quoteJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// FuzzIsLiteral: IsLiteral never panics; what it accepts stays a literal inside a tuple or a
// list, and never with a name after it.
func FuzzIsLiteral(f *testing.F) {
	for _, tc := range literalCases {
		f.Add(tc.s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !IsLiteral(s) {
			return
		}
		if !IsLiteral("["+s+"]") && strings.Count(s, "[")+strings.Count(s, "(")+strings.Count(s, "{") < maxLiteralDepth/2 {
			t.Errorf("IsLiteral(%q) but not in a list", s)
		}
		if IsLiteral(s+" x") || IsLiteral(s+".x") || IsLiteral(s+"(1)") || IsLiteral(s+"[0]") {
			t.Errorf("IsLiteral(%q) with a name, call or subscript after it", s)
		}
	})
}

func TestModuleName(t *testing.T) {
	tests := []struct {
		rel   string
		roots []string
		want  string
	}{
		{"mod.py", nil, "mod"},
		{"pkg/mod.py", nil, "pkg.mod"},
		{"pkg/__init__.py", nil, "pkg"},
		{"pkg/sub/__init__.py", nil, "pkg.sub"},
		{"src/pkg/mod.py", []string{"src"}, "pkg.mod"},
		{"src/pkg/mod.py", []string{"src", "src/pkg"}, "mod"},
		{"lib/x.py", []string{"src"}, "lib.x"},
		{"__init__.py", nil, ""},
		{"my-pkg/mod.py", nil, ""},
		{"pkg/class.py", nil, ""},
		{"pkg/mod.pyx", nil, ""},
		{"pkg/2mod.py", nil, ""},
		{"src/__init__.py", []string{"src"}, ""},
	}
	for _, tc := range tests {
		if got := ModuleName(tc.rel, tc.roots); got != tc.want {
			t.Errorf("ModuleName(%q, %q) = %q, want %q", tc.rel, tc.roots, got, tc.want)
		}
	}
}
