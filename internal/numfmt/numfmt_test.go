package numfmt

import "testing"

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestDecimal(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{{0, "0"}, {37.5, "37.5"}, {1024, "1,024"}, {86.666667, "86.7"}, {319.99, "320"}, {1234567.25, "1,234,567.3"}, {-0.4, "-0.4"}} {
		if got := Decimal(tc.in); got != tc.want {
			t.Errorf("Decimal(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRatioPercent(t *testing.T) {
	for x, want := range map[float64]string{0: "0.0%", 0.8: "80.0%", 0.9999: "99.9%", 1: "100.0%"} {
		if got := RatioPercent(x); got != want {
			t.Errorf("RatioPercent(%v) = %q, want %q", x, got, want)
		}
	}
}

func TestCounts(t *testing.T) {
	if got := Counts(map[string]int64{"timeout": 1200, "error": 3}, "-"); got != "error=3 timeout=1,200" {
		t.Errorf("Counts = %q", got)
	}
	if got := Counts(map[string]int{}, "none"); got != "none" {
		t.Errorf("Counts of none = %q", got)
	}
}
