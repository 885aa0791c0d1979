// Package evidence holds the rule that earns a policy entry, once: the
// statistics of an arm, the paired bootstrap, "beats classic", "beats the
// default", the ranking of widths across records with its fallback to the
// next-ranked width, and the check of a record's stored figures against its
// raw runs. `speclaunch bench` uses it to propose an entry and `policy
// check` to verify one; docs/policy.md states the rule in prose.
//
// It is pure: records in, findings out; the bootstrap alone takes a context
// so that a signal stops it.
package evidence

import (
	"errors"
	"fmt"
	"slices"

	"github.com/speclaunch/speclaunch/internal/record"
)

// The margins of the rule (docs/policy.md, "How an entry is earned").
const (
	// MinRuns is the floor of measured runs for a range, in the arm and in
	// classic: fewer cannot show one.
	MinRuns = 3
	// Level is the share of bootstrap resamples in which an entry's width
	// must beat the engine's default.
	Level = 0.95
)

// ErrTooFewSamples says why an arm of fewer than two successful runs has
// no range: one request has no range, and a range is what a verdict
// compares.
var ErrTooFewSamples = errors.New("a range needs at least 2 samples")

// Describe returns n, min, median, max and mean of xs (zero for none).
func Describe(xs []float64) record.Stats {
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
	return record.Stats{N: n, Min: s[0], Median: sortedMedian(s), Max: s[n-1], Mean: sum / float64(n)}
}

func sortedMedian(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Median of xs (the mean of the middle two for an even count); xs is not
// modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return selectMedian(slices.Clone(xs))
}

// selectMedian is the median of xs by selection, linear on average; it
// reorders xs. The bootstrap takes one per resample, so a sort there would
// make it n log n.
func selectMedian(xs []float64) float64 {
	n := len(xs)
	hi := selectKth(xs, n/2)
	if n%2 == 1 {
		return hi
	}
	// after selection every value left of n/2 is <= hi: the lower middle
	// is their maximum
	lo := xs[0]
	for _, x := range xs[1 : n/2] {
		lo = max(lo, x)
	}
	return (lo + hi) / 2
}

// selectKth moves the k-th smallest value of xs to xs[k], smaller ones to
// its left and larger ones to its right (Hoare's selection with a
// median-of-three pivot), and returns it.
func selectKth(xs []float64, k int) float64 {
	lo, hi := 0, len(xs)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if xs[mid] < xs[lo] {
			xs[mid], xs[lo] = xs[lo], xs[mid]
		}
		if xs[hi] < xs[lo] {
			xs[hi], xs[lo] = xs[lo], xs[hi]
		}
		if xs[hi] < xs[mid] {
			xs[hi], xs[mid] = xs[mid], xs[hi]
		}
		pivot := xs[mid]
		i, j := lo, hi
		for i <= j {
			for xs[i] < pivot {
				i++
			}
			for xs[j] > pivot {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return xs[k]
		}
	}
	return xs[k]
}

// BeatsClassic is the margin: every measured run of the arm above every
// measured run of classic (disjoint ranges), with at least MinRuns of each.
// classic is the classic arm's range over all its runs, so both the opening
// and the closing bracket count.
func BeatsClassic(arm, classic record.Stats) bool {
	return arm.N >= MinRuns && classic.N >= MinRuns && arm.Min > classic.Max
}

// classicShortfall says why arm does not beat classic ("" when it does).
func classicShortfall(arm, classic record.Stats) string {
	switch {
	case classic.N < MinRuns:
		return fmt.Sprintf("classic has n = %d; the floor is %d runs", classic.N, MinRuns)
	case arm.N < MinRuns:
		return fmt.Sprintf("n = %d; the floor is %d runs", arm.N, MinRuns)
	case !(arm.Min > classic.Max):
		return fmt.Sprintf("its min %.2f is not above classic's max %.2f", arm.Min, classic.Max)
	}
	return ""
}

// Rates are the arm's measured, successful requests' end-to-end tokens/s,
// in the order taken.
func Rates(a *record.Arm) []float64 {
	var xs []float64
	for j := range a.Runs {
		if r := &a.Runs[j]; r.Measured() {
			xs = append(xs, r.TokPerS)
		}
	}
	return xs
}
