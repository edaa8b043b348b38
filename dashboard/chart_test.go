package dashboard

import (
	"slices"
	"testing"
)

func TestAxis(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{0, "0"}, {950, "950"}, {1500, "1,500"}, {16000, "16k"}, {16100, "16,100"}, {2300000, "2.3M"}, {0.25, "0.25"}} {
		if got := compactNum(tc.v); got != tc.want {
			t.Errorf("compactNum(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	for _, tc := range []struct {
		lo, hi float64
		n      int
		want   []float64
	}{{0, 1, 4, []float64{0, 0.5, 1}}, {0, 1500, 6, []float64{0, 500, 1000, 1500}}, {992, 1024, 6, []float64{1000, 1010, 1020}}} {
		if got := axisTicks(tc.lo, tc.hi, tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("axisTicks(%v, %v, %d) = %v, want %v", tc.lo, tc.hi, tc.n, got, tc.want)
		}
	}
	if got := axisCeil(0.3333); got != 0.4 {
		t.Errorf("axisCeil(0.3333) = %v", got)
	}
}
