package simcost

import (
	"math"
	"math/rand/v2"
)

// Window is one fixed-width run in virtual time: n clients, each sending
// its next request of reqTokens the moment the last one ends, against one
// engine at width w. Every round the sequences decoding draw their
// accepted drafts from the model's acceptance (S(k)/S(k−1) for each next
// token), a request first waits its pickup rounds, and each round costs
// CycleMS times the engine's effect (drawn from seed) and 1 + Noise·N(0,1).
// It returns the clients' tokens/s over ms of virtual time.
func (c Model) Window(w, n, reqTokens int, ms float64, seed uint64) float64 {
	rng := rand.New(rand.NewPCG(seed, 11))
	n = max(1, n)
	z := EngineDraw(seed)
	cycle := c.CycleMS(w, n) * c.EngineFactor(z, w, n)
	left := make([]int, n)
	wait := make([]float64, n) // pickup rounds still to wait
	for i := range left {
		left[i] = reqTokens
		// clients out of step: each starts part-way through a request
		left[i] = 1 + rng.IntN(reqTokens)
	}
	tokens, t := 0.0, 0.0
	for t < ms {
		t += cycle * math.Max(0.05, 1+c.Noise*rng.NormFloat64())
		for i := range left {
			if wait[i] > 0 {
				wait[i]--
				continue
			}
			k := c.drawTokens(w, rng)
			k = min(k, left[i])
			tokens += float64(k)
			if left[i] -= k; left[i] == 0 {
				left[i] = reqTokens
				wait[i] = c.PickupRounds(w, n) + rng.Float64() - 0.5 // a fraction of a round either way
			}
		}
	}
	return 1000 * tokens / t
}

// drawTokens is one sequence's tokens from one cycle at width w.
func (c Model) drawTokens(w int, rng *rand.Rand) int {
	if w < 2 {
		return 1
	}
	k := 1
	if len(c.Accept) > 0 {
		prev := 1.0
		for j := 1; j < w; j++ {
			s := ProfileAt(c.Accept, j)
			if prev <= 0 || rng.Float64() >= s/prev {
				break
			}
			prev = s
			k++
		}
		return k
	}
	p := AcceptProb(w, c.EmittedPerVerify(w))
	for j := 1; j < w && rng.Float64() < p; j++ {
		k++
	}
	return k
}
