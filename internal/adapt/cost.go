package adapt

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
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

// Measure is a width's time per cycle as clients wait for it: Δ served
// seconds (Target.Served: the proxy's time on clients' requests) /
// Δ spec_decode_num_drafts_total, or, without a proxy, Δ
// tokens_predicted_seconds (the engine's own, the method the bench
// records use). Both are summed over slots and so are cycles, so under
// concurrency the ratio is still one sequence's wall time per cycle.
type Measure struct {
	MS     float64 `json:"ms_per_cycle"`
	Cycles float64 `json:"cycles"`
	N      int     `json:"concurrency"` // sequences decoding together when measured
	// SE is the standard error of MS from the spread between its epochs
	// (batch means; 0 with fewer than 3 epochs).
	SE float64 `json:"se_ms,omitempty"`
}

// Cost is one candidate's modelled time per cycle at N sequences together.
type Cost struct {
	MS       float64 `json:"ms"`
	VerifyMS float64 `json:"verify_ms"`
	DraftMS  float64 `json:"draft_ms"`        // per cycle: fixed part + per-token part × (W−1)
	SE       float64 `json:"se_ms,omitempty"` // standard error of MS when modelled (0: measured or probed)
	From     string  `json:"from"`            // "measured", "probe+draft fit(W,…)", "probe+draft@W", "probe"
}

// costNoise is the relative standard error taken for one width's measured
// ms per cycle when the drafting model is fitted from it: the measured
// means move by about this much between epochs of one width (the text
// decoded changes what a cycle costs a little), and a fit to exact points
// would claim a precision it does not have.
const costNoise = 0.02

// costSE is the standard error of a measured ms per cycle: the spread of
// its epochs' means where there are three or more, else costNoise of it.
func (m Measure) costSE() float64 {
	if m.SE > 0 {
		return m.SE
	}
	return costNoise * m.MS
}

// CycleCost models ms per cycle for width w with n sequences decoding
// together: a cycle verifies n·w rows (rows add up across slots), plus
// drafting. Width 1 is classic decode: n rows, no drafting. A width
// measured at this concurrency uses its measurement. Others take drafting
// from DraftFit: a fixed part per cycle plus a part per drafted token,
// fitted to the drafting cost (measured ms − probed verify ms) of every
// width measured, with its standard error. ok is false when the curve does
// not cover n·w rows or no width ≥ 2 was measured.
func CycleCost(curve Curve, measured map[int]Measure, w, n int) (Cost, bool) {
	n = max(1, n)
	v, ok := curve.At(n * w)
	if !ok {
		return Cost{}, false
	}
	if m, ok := measured[w]; ok && m.N == n && m.MS > 0 {
		d := math.Max(0, m.MS-v)
		if w == 1 {
			d = 0 // classic drafts nothing: the difference is live load
		}
		return Cost{MS: m.MS, VerifyMS: v, DraftMS: d, From: "measured"}, true
	}
	if w == 1 {
		return Cost{MS: v, VerifyMS: v, From: "probe"}, true
	}
	f, ok := FitDraft(curve, measured, n)
	if !ok {
		return Cost{}, false
	}
	d, se := f.At(w)
	return Cost{MS: v + d, VerifyMS: v, DraftMS: d, SE: se, From: f.from()}, true
}

// DraftFit is drafting ms per cycle = FixedMS + PerTokenMS·(W−1), fitted
// to the widths measured. Drafting has a large fixed part per cycle (the
// drafter's own forward setup and the host-side walk): on the H200 record
// h200-llamacpp-d32676d-q4_0-pair8642L36-code-c4 the drafting cost per
// drafted token was 3.39 ms at width 2, 1.70 at 4 and 0.65 at 17, so a
// cost per token taken at one width and applied to another is wrong by
// that ratio; a line through two or more widths is not.
type DraftFit struct {
	FixedMS    float64 `json:"fixed_ms"`
	PerTokenMS float64 `json:"per_token_ms"`
	Widths     []int   `json:"widths"` // the measured widths it was fitted to
	// cov is the covariance of (FixedMS, PerTokenMS): [var a, cov ab, var b].
	cov [3]float64
	// one: fitted to one width only (see FitDraft).
	one bool
}

// FitDraft fits DraftFit by weighted least squares to the drafting cost
// d(W) = measured ms − probed verify ms of every width ≥ 2 measured at
// concurrency n (or, when none was, at the concurrency with the most
// widths measured), each with a standard error of costNoise of its ms.
// Negative parts are not physical: a negative per-token part is refitted
// as fixed only, a negative fixed part through the origin. From one width
// W1 the split is unknown: it takes the middle of the two extremes (all
// fixed, all per token) and a standard error that puts each extreme at
// 1.96 of them, so a width far from W1 is priced with the doubt it
// deserves. ok is false when no width ≥ 2 was measured.
func FitDraft(curve Curve, measured map[int]Measure, n int) (DraftFit, bool) {
	type pt struct{ x, d, se float64 }
	byN := map[int][]pt{}
	widths := map[int][]int{}
	for w, m := range measured {
		if w < 2 || m.MS <= 0 {
			continue
		}
		v, ok := curve.At(max(1, m.N) * w)
		if !ok {
			continue
		}
		byN[m.N] = append(byN[m.N], pt{float64(w - 1), math.Max(0, m.MS-v), math.Max(costNoise*m.MS, 1e-6)})
		widths[m.N] = append(widths[m.N], w)
	}
	pick, ok := n, len(byN[n]) > 0
	if !ok {
		for nn, ps := range byN {
			if !ok || len(ps) > len(byN[pick]) || len(ps) == len(byN[pick]) && abs(nn-n) < abs(pick-n) {
				pick, ok = nn, true
			}
		}
	}
	if !ok {
		return DraftFit{}, false
	}
	ps := byN[pick]
	f := DraftFit{Widths: slices.Sorted(slices.Values(widths[pick]))}
	if len(ps) == 1 {
		p := ps[0]
		f.FixedMS, f.PerTokenMS, f.one = p.d/2, p.d/(2*p.x), true
		h := p.d / 2 / DefaultZ // each extreme 1.96 standard errors from the middle, at x = 0 and x = 2·x1
		f.cov = [3]float64{h*h + p.se*p.se/4, -h * h / p.x, h * h / (p.x * p.x)}
		return f, true
	}
	// Weighted least squares on (1, x): normal equations.
	var s0, s1, s2, t0, t1 float64
	for _, p := range ps {
		wt := 1 / (p.se * p.se)
		s0, s1, s2 = s0+wt, s1+wt*p.x, s2+wt*p.x*p.x
		t0, t1 = t0+wt*p.d, t1+wt*p.x*p.d
	}
	det := s0*s2 - s1*s1
	if det <= 1e-12*s0*s2 { // one distinct width, measured at several concurrencies
		f.FixedMS = t0 / s0
		f.cov = [3]float64{1 / s0, 0, 0}
		return f, true
	}
	f.FixedMS, f.PerTokenMS = (s2*t0-s1*t1)/det, (s0*t1-s1*t0)/det
	f.cov = [3]float64{s2 / det, -s1 / det, s0 / det}
	switch {
	case f.PerTokenMS < 0:
		f.FixedMS, f.PerTokenMS, f.cov = t0/s0, 0, [3]float64{1 / s0, 0, 0}
	case f.FixedMS < 0:
		f.FixedMS, f.PerTokenMS, f.cov = 0, t1/s2, [3]float64{0, 0, 1 / s2}
	}
	if len(ps) > 2 { // a misfit widens the doubt: scale by the reduced χ²
		var chi float64
		for _, p := range ps {
			r := (p.d - f.FixedMS - f.PerTokenMS*p.x) / p.se
			chi += r * r
		}
		if k := chi / float64(len(ps)-2); k > 1 {
			for i := range f.cov {
				f.cov[i] *= k
			}
		}
	}
	return f, true
}

// At is the fitted drafting ms per cycle at width w and its standard error.
func (f DraftFit) At(w int) (ms, se float64) {
	x := float64(w - 1)
	ms = math.Max(0, f.FixedMS+f.PerTokenMS*x)
	return ms, math.Sqrt(math.Max(0, f.cov[0]+2*x*f.cov[1]+x*x*f.cov[2]))
}

func (f DraftFit) from() string {
	ws := make([]string, len(f.Widths))
	for i, w := range f.Widths {
		ws[i] = strconv.Itoa(w)
	}
	if f.one {
		return "probe+draft@" + ws[0]
	}
	return "probe+draft fit(" + strings.Join(ws, ",") + ")"
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func sortedKeys(m map[int]float64) []int { return slices.Sorted(maps.Keys(m)) }
