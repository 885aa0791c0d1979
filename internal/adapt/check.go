package adapt

import (
	"fmt"
	"math"
)

// A switch is checked against the width it left: the model picked the
// new width, and only the new width's own cycles say whether it was
// right. On the sim's demo pairing the model (a drafting cost per token
// through the origin) put width 2 at 21.89 ms a cycle; it ran 26.16, and
// the loop stayed there at 0.952 of the best width for want of a check.

// Verdicts of a switch check.
const (
	checkWait = iota // not enough cycles to tell: keep measuring
	checkKeep        // not worse than the width left beyond the noise floor
	checkUndo        // worse beyond the noise: go back
)

// rateObs is one width's measured rate: tokens per cycle with its standard
// error, and ms per cycle with its standard error.
type rateObs struct {
	T, SE, MS, MSSE float64
	Cycles          float64
}

// ownRate is width w's own rate from its own cycles and measured cost;
// width 1 (classic) emits one token a step, exactly, at the probed cost.
func ownRate(w int, own Counts, cost float64) (rateObs, bool) {
	if cost <= 0 {
		return rateObs{}, false
	}
	if w < 2 {
		return rateObs{T: 1, MS: cost, Cycles: math.Inf(1)}, true
	}
	if own.Cycles <= 0 || len(own.AtLeast) < w-1 {
		return rateObs{}, false
	}
	t, se := own.TokensSE()
	return rateObs{T: t, SE: se, MS: cost, Cycles: own.Cycles}, true
}

// judgeSwitch compares the width switched to with the width left, both by
// their own cycles: gain = rate(to)/rate(from) − 1, its half-width z
// relative standard errors of the two tokens per cycle and the two costs
// in quadrature (the four come from different cycles; a cost's error is
// the spread of its epochs' means, Measure.costSE). The costs' errors
// matter: on the H200 under 4 independent clients one width's ms per cycle
// moved by ±10 % between epochs, and a check of classic (tokens per cycle
// exactly 1) against a width of stood-in rate claimed ± 0.0 %. Worse
// beyond the noise (gain + half < 0): undo. Within the floor (gain − half
// > −floor), once the width has keepCycles of its own (enough to cover the
// traffic's mix: a width measured over one stretch of easy requests looks
// better than it is): keep. After capCycles of its own the point estimate
// decides. Otherwise wait.
func judgeSwitch(to, from rateObs, z, floor, keepCycles, capCycles float64) (verdict int, gain, half float64) {
	rt, rf := to.T/to.MS, from.T/from.MS
	gain = rt/rf - 1
	rel := math.Sqrt(sq(to.SE/to.T) + sq(from.SE/from.T) + sq(to.MSSE/to.MS) + sq(from.MSSE/from.MS))
	half = z * rel * (1 + gain)
	switch {
	case gain+half < 0:
		return checkUndo, gain, half
	case gain-half > -floor && to.Cycles >= keepCycles:
		return checkKeep, gain, half
	case to.Cycles >= capCycles && gain < 0:
		return checkUndo, gain, half
	case to.Cycles >= capCycles:
		return checkKeep, gain, half
	}
	return checkWait, gain, half
}

// switchCheck is a switch under check: the width it left, the width it
// went to, and left: the width left's rate over the cycles the decision
// saw there (its engine's since it started or the traffic drifted, at
// concurrency leftN; for an exploration's home, as the exploration left
// it), when they were at least MinCycles; a drift drops it. A width's own counts
// (Inputs.Own) reach back across engines to the last drift, and a drift
// shows only once a pool of the new traffic is in: a switch the latest
// cycles called for would be judged against a rate of the older traffic.
type switchCheck struct {
	from, to int
	left     rateObs
	hasLeft  bool
	leftN    int
}

func (c switchCheck) String() string {
	return fmt.Sprintf("width %d against width %d", c.to, c.from)
}

func sq(x float64) float64 { return x * x }
