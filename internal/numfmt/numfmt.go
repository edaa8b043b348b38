// Package numfmt formats the numbers that ndtrace's reports and dashboard show: counts with
// thousands separators, means with one decimal, percentages and "key=count" lists.
package numfmt

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Thousands formats n with comma thousands separators ("1,234,567").
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Decimal formats x with thousands separators and at most one decimal ("37.5", "1,024", "86.7").
func Decimal(x float64) string {
	r := math.Round(x*10) / 10
	whole := int64(math.Trunc(r))
	frac := math.Abs(r - float64(whole))
	s := Thousands(whole)
	if whole == 0 && r < 0 {
		s = "-0"
	}
	if frac >= 0.05 {
		s += "." + strconv.Itoa(int(math.Round(frac*10)))
	}
	return s
}

// RatioPercent formats the ratio x as a percentage with one decimal, rounded down ("99.9%", never
// "100.0%" short of 1).
func RatioPercent(x float64) string {
	p := math.Floor(x*1000) / 10
	return fmt.Sprintf("%.1f%%", p)
}

// Counts formats counts as "k=v k=v" in key order, the values with thousands separators, or empty
// if there are none.
func Counts[N int | int64](counts map[string]N, empty string) string {
	if len(counts) == 0 {
		return empty
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + Thousands(int64(counts[k]))
	}
	return strings.Join(parts, " ")
}
