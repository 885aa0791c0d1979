package evidence

import (
	"fmt"

	"github.com/speclaunch/speclaunch/internal/record"
)

// DriftTolerance is how close two of classic's ranges may come apart, as a
// fraction of their medians, and still count as overlapping: a run whose
// samples barely vary (the sim with its noise off gives point ranges) would
// otherwise be called drifted for a 0.2% difference. The drifts seen on real
// hardware were about 3%.
const DriftTolerance = 0.005

// DriftOverlap is whether two ranges share a point, with a gap of up to
// DriftTolerance forgiven.
func DriftOverlap(a, b record.Stats) bool {
	tol := DriftTolerance * (a.Median + b.Median) / 2
	return a.Min <= b.Max+tol && b.Min <= a.Max+tol
}

// bracketRates returns classic's measured rates for one bracket ("" = all),
// in the order taken.
func bracketRates(classic *record.Arm, bracket string) []float64 {
	var xs []float64
	for j := range classic.Runs {
		r := &classic.Runs[j]
		if r.Measured() && (bracket == "" || r.Bracket == bracket) {
			xs = append(xs, r.TokPerS)
		}
	}
	return xs
}

// Drift compares classic's first-of-round samples with its last-of-round
// samples: a machine that warms, throttles or gains a neighbour between
// the two shows as disjoint brackets. Drift is noted, not a rule of its
// own: the margin already takes classic over both brackets.
func Drift(classic *record.Arm) record.Drift {
	if classic == nil {
		return record.Drift{Verdict: "no classic arm: drift not checked"}
	}
	first, last := bracketRates(classic, record.BracketFirst), bracketRates(classic, record.BracketLast)
	d := record.Drift{First: Describe(first), Last: Describe(last)}
	if len(first) < 2 || len(last) < 2 {
		d.Verdict = fmt.Sprintf("drift not checked: %d first and %d last classic samples (need 2 of each)", len(first), len(last))
		return d
	}
	d.Overlap = DriftOverlap(d.First, d.Last)
	if !d.Overlap {
		d.Verdict = fmt.Sprintf("the run drifted (classic first %.1f–%.1f vs last %.1f–%.1f): treat every middle arm as suspect",
			d.First.Min, d.First.Max, d.Last.Min, d.Last.Max)
		return d
	}
	// The brackets compare within rounds; a steady slide across the whole
	// run widens both brackets alike and hides from them. Compare the first
	// half of classic's samples, in the order they were taken, with the
	// second half too.
	all := bracketRates(classic, "")
	if h := len(all) / 2; h >= 2 {
		d.Early, d.Late = Describe(all[:h]), Describe(all[len(all)-h:])
		if !DriftOverlap(d.Early, d.Late) {
			d.Overlap = false
			d.Verdict = fmt.Sprintf("the run drifted across rounds (classic's first half %.1f–%.1f vs second half %.1f–%.1f): treat every middle arm as suspect",
				d.Early.Min, d.Early.Max, d.Late.Min, d.Late.Max)
			return d
		}
	}
	d.Verdict = "classic brackets overlap: no drift detected"
	return d
}
