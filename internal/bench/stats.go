package bench

import (
	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/record"
)

// describe summarises what there is (evidence.Describe).
func describe(xs []float64) record.Stats { return evidence.Describe(xs) }

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
