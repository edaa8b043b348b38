package execute

import "testing"

func TestToExclude(t *testing.T) {
	tests := []struct {
		name           string
		files, ignored []string
		want           string
	}{
		{"none", nil, nil, ""},
		{"the module", []string{"tests/test_gc.py"}, nil, "tests/test_gc.py"},
		{"outermost first", []string{"tests/test_a.py", "pkg/gcutil.py"}, nil, "tests/test_a.py"},
		{"already left out", []string{"pkg/gcutil.py", "tests/test_a.py"}, []string{"pkg/gcutil.py"}, "tests/test_a.py"},
		{"below a folder left out", []string{"tests/sub/test_a.py", "x.py"}, []string{"tests"}, "x.py"},
		{"a prefix is no folder", []string{"tests2/test_a.py"}, []string{"tests"}, "tests2/test_a.py"},
		{"conftest never", []string{"conftest.py", "tests/conftest.py", "tests/test_a.py"}, nil, "tests/test_a.py"},
		{"only conftest", []string{"tests/conftest.py"}, nil, ""},
		{"package init is its folder", []string{"tests/__init__.py", "tests/test_a.py"}, nil, "tests"},
		{"top init", []string{"__init__.py", "a.py"}, nil, "a.py"},
		{"all left out", []string{"a.py", "b.py"}, []string{"a.py", "b.py"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := toExclude(tc.files, tc.ignored); got != tc.want {
				t.Errorf("toExclude(%q, %q) = %q, want %q", tc.files, tc.ignored, got, tc.want)
			}
		})
	}
}
