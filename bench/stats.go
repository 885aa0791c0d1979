package bench

import (
	"errors"
	"fmt"
	"slices"

	"github.com/speclaunch/speclaunch/record"
)

// ErrTooFewSamples is returned for a sample of fewer than two values: one
// request has no range, and a range is what a verdict compares.
var ErrTooFewSamples = errors.New("a range needs at least 2 samples")

// Summarize returns n, min, median, max and mean of xs. It refuses n < 2.
func Summarize(xs []float64) (record.Stats, error) {
	if len(xs) < 2 {
		return describe(xs), fmt.Errorf("summarize %d sample(s): %w", len(xs), ErrTooFewSamples)
	}
	return describe(xs), nil
}

// describe is Summarize without the floor, for display of what there is.
func describe(xs []float64) record.Stats {
	if len(xs) == 0 {
		return record.Stats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return record.Stats{N: n, Min: s[0], Median: med, Max: s[n-1], Mean: sum / float64(n)}
}

// Range comparisons of an arm against classic.
const (
	RangeFaster   = "disjoint, faster"
	RangeOverlaps = "overlaps"
	RangeSlower   = "disjoint, slower"
)

// CompareRange places arm's [min, max] against classic's. Only disjoint
// ranges separate: n is small and medians of neighbouring widths swap
// between runs: on the H200 llama.cpp sweeps the run-1 medians of Q4_0
// widths 3 and 5 came out 9-17% below their run-2 and run-3 medians, while
// speculative arms spread about -20/+15% around their median.
func CompareRange(arm, classic record.Stats) string {
	switch {
	case arm.Min > classic.Max:
		return RangeFaster
	case arm.Max < classic.Min:
		return RangeSlower
	}
	return RangeOverlaps
}

// BeatsClassic reports whether every sample of arm is above every sample
// of classic.
func BeatsClassic(arm, classic record.Stats) bool {
	return arm.N >= 2 && classic.N >= 2 && arm.Min > classic.Max
}

// Overlap reports whether two ranges share a point.
func Overlap(a, b record.Stats) bool { return a.Min <= b.Max && b.Min <= a.Max }

// PairedDelta is arm's rate against the mean of the same round's classic
// samples, as a fraction (+0.08 = 8% faster). Pairing by round cancels
// drift that a pooled classic median would fold into the comparison.
func PairedDelta(arm float64, classicRound []float64) (float64, bool) {
	if len(classicRound) == 0 {
		return 0, false
	}
	m := 0.0
	for _, c := range classicRound {
		m += c
	}
	m /= float64(len(classicRound))
	if m <= 0 {
		return 0, false
	}
	return arm/m - 1, true
}

// ranked is one candidate for the verdict.
type ranked struct {
	width int
	stats record.Stats
	idx   int // arm index in the record
}

// better orders candidates: higher median, then higher min (the tighter
// floor), then the smaller width (cheaper and further from kernel cliffs).
func better(a, b ranked) bool {
	if a.stats.Median != b.stats.Median {
		return a.stats.Median > b.stats.Median
	}
	if a.stats.Min != b.stats.Min {
		return a.stats.Min > b.stats.Min
	}
	return a.width < b.width
}

// sortRanked sorts best first.
func sortRanked(rs []ranked) {
	slices.SortStableFunc(rs, func(a, b ranked) int {
		switch {
		case better(a, b):
			return -1
		case better(b, a):
			return 1
		}
		return 0
	})
}
