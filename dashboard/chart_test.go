package dashboard

import (
	"slices"
	"strings"
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

func TestLabelRows(t *testing.T) {
	actions := []string{"step_into", "step_over", "step_return", "breakpoint", "continue", "inv_step_into", "inv_step_over", "inv_step_call"}
	events := []string{"call", "line", "return", "exception"}
	for _, tc := range []struct {
		labels []string
		want   int
	}{
		{actions, 2},                            // 66 units a type: "inv_step_into" needs two
		{events, 1},                             // 132 units a type
		{nil, 1},                                // nothing to place
		{[]string{strings.Repeat("x", 400)}, 4}, // capped
	} {
		slot := float64(plotW) / float64(max(len(tc.labels), 1))
		if got := labelRows(tc.labels, slot); got != tc.want {
			t.Errorf("labelRows(%d labels, slot %.0f) = %d, want %d", len(tc.labels), slot, got, tc.want)
		}
	}
}
