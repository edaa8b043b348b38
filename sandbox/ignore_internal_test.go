package sandbox

import (
	"slices"
	"strings"
	"testing"
)

func TestCheckIgnore(t *testing.T) {
	tests := []struct {
		ignore []string
		want   []string // nil: refused
	}{
		{nil, []string{}},
		{[]string{"tests/test_gc.py", "pkg"}, []string{"/r/tests/test_gc.py", "/r/pkg"}},
		{[]string{"/etc/passwd"}, nil},
		{[]string{"../x.py"}, nil},
		{[]string{"a/../../x.py"}, nil},
		{[]string{"./a.py"}, nil},
		{[]string{"."}, nil},
		{[]string{""}, nil},
		{[]string{"a\x00b"}, nil},
		{[]string{"a//b"}, nil},
	}
	for _, tc := range tests {
		got, err := checkIgnore("/r", tc.ignore)
		if tc.want == nil {
			if err == nil {
				t.Errorf("checkIgnore(%q) = %q, want an error", tc.ignore, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("checkIgnore(%q) = %q, %v; want %q", tc.ignore, got, err, tc.want)
		}
	}
}

func TestRelativeFiles(t *testing.T) {
	files := []string{"/r/tests/test_a.py", "/elsewhere/x.py", "/r", "/r/", "/rr/y.py", "/r/a/../../etc/z.py",
		"/r/" + strings.Repeat("d", 5000), "/r/pkg/m.py", "/r/b.py"}
	got := relativeFiles("/r", files, 2)
	if want := []string{"tests/test_a.py", "pkg/m.py"}; !slices.Equal(got, want) {
		t.Errorf("relativeFiles = %q, want %q", got, want)
	}
}
