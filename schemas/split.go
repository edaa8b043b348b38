package schemas

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"slices"
)

// TrainSplit is the split every row is in when the spec's split is empty, and the one that takes
// what the other splits leave.
const TrainSplit = "train"

// Forward starts of function-level forward trajectories (Spec.ForwardStart).
const (
	// ForwardStartFunction starts at the call of the function under study (the default).
	ForwardStartFunction = "function"
	// ForwardStartMain starts at the call of the main() wrapper, before the function is called.
	ForwardStartMain = "main"
)

// SplitSpec assigns rows to dataset splits by their function (Row.FunctionID): each split's name
// and the share of functions it holds. The shares sum to at most 1; train takes what the others
// leave (given, its share must make the sum 1). Empty: every row is in train.
type SplitSpec map[string]float64

// splitNameRE matches a split name as the Hugging Face Hub accepts it (a word: letters, digits,
// underscores).
var splitNameRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// splitEpsilon is the rounding the sum of the shares is allowed.
const splitEpsilon = 1e-9

// Validate checks the names and shares; errors name the field.
func (s SplitSpec) Validate() error {
	sum := 0.0
	for _, name := range s.names() {
		f := s[name]
		field := "split." + name
		if !splitNameRE.MatchString(name) {
			return fmt.Errorf("spec: split: %q is not a split name (letters, digits and underscores, at most 64)", name)
		}
		if math.IsNaN(f) || f <= 0 || f > 1 {
			return fmt.Errorf("spec: %s: %v is not a share of the functions in (0, 1]", field, f)
		}
		sum += f
	}
	if sum > 1+splitEpsilon {
		return fmt.Errorf("spec: split: the shares sum to %v, more than 1", sum)
	}
	if _, ok := s[TrainSplit]; ok && math.Abs(sum-1) > splitEpsilon {
		return fmt.Errorf("spec: split: the shares sum to %v; with %s given they must sum to 1 (or leave %s out: it takes the rest)", sum, TrainSplit, TrainSplit)
	}
	return nil
}

// names returns the split names in the order their ranges of [0, 1) are laid out: sorted, train
// last (it takes the rest).
func (s SplitSpec) names() []string {
	names := make([]string, 0, len(s))
	for name := range s {
		if name != TrainSplit {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if _, ok := s[TrainSplit]; ok {
		names = append(names, TrainSplit)
	}
	return names
}

// Names returns every split a row may be assigned: the spec's in layout order, and train.
func (s SplitSpec) Names() []string {
	names := s.names()
	if !slices.Contains(names, TrainSplit) {
		names = append(names, TrainSplit)
	}
	return names
}

// Assign returns the split of the rows of function functionID: the split whose range of [0, 1)
// holds the function's point (SplitPoint). It depends on the id and s alone (no seed, no run), so
// a function's rows are all in one split.
func (s SplitSpec) Assign(functionID string) string {
	if len(s) == 0 {
		return TrainSplit
	}
	u := SplitPoint(functionID)
	lo := 0.0
	for _, name := range s.names() {
		lo += s[name]
		if u < lo {
			return name
		}
	}
	return TrainSplit
}

// SplitPoint maps a function id to [0, 1): the first 8 bytes of SHA-256("ndtrace-split\x00" + id),
// 53 bits of it as a fraction.
func SplitPoint(functionID string) float64 {
	sum := sha256.Sum256([]byte("ndtrace-split\x00" + functionID))
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
}
