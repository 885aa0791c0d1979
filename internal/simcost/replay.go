package simcost

import (
	"maps"
	"math"
	"slices"
)

// ReplayCell is one committed H200 adapteval cell as the sim replays it:
// what the loop measured there (the probe's verify curve, the acceptance
// by draft position) and what fixed widths gave its clients.
type ReplayCell struct {
	Name    string // the fixed file's name without its directory and -fixed.json
	Clients int
	// Verify is the probe's verify ms by rows; Accept is S(k) by draft
	// position, both from the cell's decisions file.
	Verify map[int]float64
	Accept []float64
	// Fixed is each width's client tokens/s, one value per window (each
	// on a fresh server), from the cell's fixed file.
	Fixed map[int][]float64
	// ReqTokens is the tokens a request (adapteval -max-tokens).
	ReqTokens int
}

// Base is the cell's cost model before fitting: its probe and acceptance
// with the H200 drafting fit, batching cost, spread and drain. Its rates
// are the cost model's own prediction of the cell.
func (c ReplayCell) Base() Model {
	m := H200Q8()
	m.Verify = maps.Clone(c.Verify)
	if v, ok := c.Verify[1]; ok {
		m.ClassicMS = v
	}
	m.Accept = extend(Monotone(c.Accept))
	return m
}

// Model is Base with each recorded width's cycle scaled so that its
// closed-form client rate is the mean of the cell's windows (WidthScale;
// widths between recorded ones are interpolated).
func (c ReplayCell) Model() Model {
	m := c.Base()
	scale := map[int]float64{}
	for w, xs := range c.Fixed {
		if len(xs) == 0 {
			continue
		}
		scale[w] = m.RateAt(w, c.Clients, c.ReqTokens) / mean(xs)
	}
	m.WidthScale = scale
	return m
}

// Widths are the cell's recorded widths, in order.
func (c ReplayCell) Widths() []int { return slices.Sorted(maps.Keys(c.Fixed)) }

// Monotone clamps S into [0, 1] and makes it non-increasing.
func Monotone(s []float64) []float64 {
	out := slices.Clone(s)
	prev := 1.0
	for i, v := range out {
		v = max(0, min(v, prev))
		out[i], prev = v, v
	}
	return out
}

// extend carries a profile to maxProfilePositions, its last value repeated.
func extend(s []float64) []float64 {
	if len(s) == 0 {
		return nil
	}
	return fill(func(k int) float64 { return ProfileAt(s, k) })
}

func mean(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// LogSD is the sample standard deviation of log xs (0 for fewer than 2).
func LogSD(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m := 0.0
	for _, x := range xs {
		m += math.Log(x)
	}
	m /= float64(len(xs))
	ss := 0.0
	for _, x := range xs {
		d := math.Log(x) - m
		ss += d * d
	}
	return math.Sqrt(ss / float64(len(xs)-1))
}
