package adapt

import (
	"maps"
	"math"
	"slices"
	"strconv"
)

// Curve is the verify cost by rows: ms for one target forward over that
// many new tokens, probed on the running engine (or carried in a policy
// entry). It is read between probed rows by linear interpolation and never
// extrapolated: a width whose rows lie past the last probed point is no
// candidate.
type Curve struct {
	VerifyMS map[int]float64 `json:"verify_ms"` // rows → median ms
	Source   string          `json:"source"`    // "probe", "cache", "config"
}

// At is the verify cost of rows new tokens.
func (c Curve) At(rows int) (float64, bool) {
	if v, ok := c.VerifyMS[rows]; ok {
		return v, true
	}
	keys := slices.Sorted(maps.Keys(c.VerifyMS))
	i, _ := slices.BinarySearch(keys, rows)
	if i == 0 || i == len(keys) {
		return 0, false
	}
	lo, hi := keys[i-1], keys[i]
	f := float64(rows-lo) / float64(hi-lo)
	return c.VerifyMS[lo] + f*(c.VerifyMS[hi]-c.VerifyMS[lo]), true
}

// A kernel boundary is a step of the curve at least jumpFactor times its
// median step and at least jumpShare of its largest step. On the H200
// (llama-server d32676d) the 8 → 9 row step is 0.88 ms for Q8_0 and 1.05 ms
// for Q4_0, against median steps of about 0.24 and 0.30 ms; Q8_0's 2 → 3
// step (0.57 ms) passes the first test but not the second.
const (
	jumpFactor = 2.5
	jumpShare  = 0.75
)

// ExplorationWidth is the default W0: the widest width before the curve's
// first kernel boundary, capped at maxWidth; when the curve shows no
// boundary or is too short to tell, the widest width it covers, capped.
func (c Curve) ExplorationWidth(maxWidth int) int {
	covered := 0
	for w := 1; w <= maxWidth; w++ {
		if _, ok := c.At(w); !ok {
			break
		}
		covered = w
	}
	if covered < 2 {
		return 0
	}
	maxWidth = covered
	var steps []float64
	for w := 1; w < maxWidth; w++ {
		a, ok1 := c.VerifyMS[w]
		b, ok2 := c.VerifyMS[w+1]
		if !ok1 || !ok2 {
			break
		}
		steps = append(steps, b-a)
	}
	if len(steps) < 3 {
		return maxWidth
	}
	sorted := slices.Sorted(slices.Values(steps))
	med, top := sorted[len(sorted)/2], sorted[len(sorted)-1]
	for i, s := range steps {
		w := i + 1 // the step from w to w+1 rows
		if w >= 2 && s > 0 && s > jumpFactor*med && s >= jumpShare*top {
			return w
		}
	}
	return maxWidth
}

// Measure is the engine's own time per cycle at one width, from counter
// deltas: Δ tokens_predicted_seconds / Δ spec_decode_num_drafts_total (the
// method the bench records use). Predict seconds are summed over slots and
// so are cycles, so under concurrency the ratio is still one sequence's
// wall time per cycle.
type Measure struct {
	MS     float64 `json:"ms_per_cycle"`
	Cycles float64 `json:"cycles"`
	N      int     `json:"concurrency"` // sequences decoding together when measured
}

// Cost is one candidate's modelled time per cycle at N sequences together.
type Cost struct {
	MS       float64 `json:"ms"`
	VerifyMS float64 `json:"verify_ms"`
	DraftMS  float64 `json:"draft_ms"` // per cycle: per-token draft cost × (W−1)
	From     string  `json:"from"`     // "measured", "probe+draft@W", "probe"
}

// CycleCost models ms per cycle for width w with n sequences decoding
// together: a cycle verifies n·w rows (rows add up across slots), plus
// drafting w−1 tokens. Width 1 is classic decode: n rows, no drafting. A
// width measured at this concurrency uses its measurement; others take the
// per-drafted-token cost observed at the measured width nearest to w
// (measured ms − probed verify ms over w−1 drafted tokens), since that cost
// is not constant across widths. ok is false when the curve does not cover
// n·w rows or no width ≥ 2 was measured.
func CycleCost(curve Curve, measured map[int]Measure, w, n int) (Cost, bool) {
	n = max(1, n)
	v, ok := curve.At(n * w)
	if !ok {
		return Cost{}, false
	}
	if w == 1 {
		return Cost{MS: v, VerifyMS: v, From: "probe"}, true
	}
	if m, ok := measured[w]; ok && m.N == n && m.MS > 0 {
		return Cost{MS: m.MS, VerifyMS: v, DraftMS: math.Max(0, m.MS-v), From: "measured"}, true
	}
	at, perTok, ok := draftPerToken(curve, measured, w, n)
	if !ok {
		return Cost{}, false
	}
	d := perTok * float64(w-1)
	return Cost{MS: v + d, VerifyMS: v, DraftMS: d, From: "probe+draft@" + strconv.Itoa(at)}, true
}

// draftPerToken is (measured ms − probed verify ms) / (W−1) at the measured
// width nearest to w, preferring measurements at concurrency n.
func draftPerToken(curve Curve, measured map[int]Measure, w, n int) (at int, perTok float64, ok bool) {
	best := -1
	bestScore := math.Inf(1)
	for mw, m := range measured {
		if mw < 2 || m.MS <= 0 {
			continue
		}
		if _, ok := curve.At(max(1, m.N) * mw); !ok {
			continue
		}
		score := math.Abs(float64(mw - w))
		if m.N != n {
			score += 1000
		}
		if score < bestScore || (score == bestScore && mw < best) {
			best, bestScore = mw, score
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	m := measured[best]
	v, _ := curve.At(max(1, m.N) * best)
	return best, math.Max(0, m.MS-v) / float64(best-1), true
}

func sortedKeys(m map[int]float64) []int { return slices.Sorted(maps.Keys(m)) }
