package adaptsim

import (
	"math"
	"math/rand/v2"

	"github.com/speclaunch/speclaunch/internal/simcost"
)

// Counters are one engine's cumulative counters since it started, as a
// scrape of llama-server's /metrics and the proxy's accounting show them.
type Counters struct {
	// Cycles are draft-and-verify cycles summed over sequences (0 at
	// width 1); AtLeast[k-1] the cycles that accepted at least k draft
	// tokens; Drafted the draft tokens proposed; Accepted those accepted.
	Cycles, Drafted, Accepted float64
	AtLeast                   []float64
	// Tokens generated; EngineSecs the engine's own time generating them,
	// summed over sequences (llama-server's tokens_predicted_seconds: no
	// wait before decoding); Decodes the engine's forward passes.
	Tokens, EngineSecs, Decodes float64
	// Served is the seconds clients' requests were in flight on this
	// engine, summed over requests (the proxy's, wait included); Ended
	// the requests that ended on it.
	Served float64
	Ended  int
}

func (c Counters) clone() Counters {
	c.AtLeast = append([]float64(nil), c.AtLeast...)
	return c
}

// accept is a traffic class's acceptance: cond[w][k] is P(draft token k
// accepted | k−1 were) at width w, and tpc[w] the mean tokens a cycle.
type accept struct {
	cond [][]float64
	tpc  []float64
}

// classB is the second class of the two-class traffic: each conditional
// acceptance times this (the earlier harness's, internal/adapt's
// matrixClassB), a harder mix of prompts.
const classB = 0.75

// newAccept builds class cls (0 or 1) of model m up to maxWidth. A model
// with Accept (a pair's S(k)) has one acceptance at every width; one
// given as mean tokens a cycle by width (GB10) draws each width's tokens
// with the p of simcost.AcceptProb, as the sim does.
func newAccept(m simcost.Model, cls, maxWidth int) accept {
	a := accept{cond: make([][]float64, maxWidth+1), tpc: make([]float64, maxWidth+1)}
	for w := 1; w <= maxWidth; w++ {
		a.cond[w] = make([]float64, w)
		t, s := 1.0, 1.0
		for k := 1; k < w; k++ {
			var p float64
			if len(m.Accept) > 0 {
				prev := 1.0
				if k > 1 {
					prev = simcost.ProfileAt(m.Accept, k-1)
				}
				if prev > 0 {
					p = math.Min(1, simcost.ProfileAt(m.Accept, k)/prev)
				}
			} else {
				p = simcost.AcceptProb(w, m.EmittedPerVerify(w))
			}
			if cls == 1 {
				p *= classB
			}
			a.cond[w][k] = p
			s *= p
			t += s
		}
		a.tpc[w] = t
	}
	return a
}

// engine is one engine process in virtual time, priced in closed form
// over short steps: each step's cycles at the model's CycleMS under the
// sequences in flight, times its own effect (drawn once), the sharing
// while the engine it replaced drains, and the model's per-cycle noise
// averaged over the step's cycles.
type engine struct {
	gen      uint64
	width    int
	z        float64 // its draw (simcost.EngineDraw)
	takeover float64 // virtual ms it began to serve (simcost.Model.SharedFactor counts from here)
	c        Counters
	ended    float64 // requests ended, fractional
}

// stepOut is what one step of an engine gave the clients.
type stepOut struct {
	tokens   float64
	decoding float64 // share of each client's time spent decoding (not waiting before it)
}

// serve runs e for dt ms from virtual ms now under n clients of class a;
// rng draws the noise and the acceptance.
func (e *engine) serve(m simcost.Model, a *accept, reqTokens, n int, now, dt float64, rng *rand.Rand) stepOut {
	if n <= 0 || dt <= 0 {
		return stepOut{}
	}
	w := e.width
	cyc := m.CycleMS(w, n) * m.EngineFactor(e.z, w, n) * m.SharedFactor(now-e.takeover)
	steps := dt / cyc // engine rounds in the step
	cyc *= math.Max(0.5, 1+m.Noise*rng.NormFloat64()/math.Sqrt(math.Max(1, steps)))
	steps = dt / cyc
	// Each client's request: reqTokens/E cycles (and, at a speculative
	// width, half a cycle cut at its end), then its wait before the next
	// one decodes (simcost.Model.PickupRounds), as simcost.Model.RateAt.
	tpc := 1.0
	var atLeast []float64
	if w >= 2 {
		// The acceptance of this step's cycles, drawn position by position
		// (each a binomial of the last in its normal approximation).
		perReq := float64(reqTokens)/a.tpc[w] + 0.5
		share := perReq / (perReq + m.PickupRounds(w, n))
		cycles := float64(n) * steps * share
		atLeast = make([]float64, w-1)
		prev, sum := cycles, 0.0
		for k := 1; k < w; k++ {
			p := a.cond[w][k]
			x := prev*p + math.Sqrt(math.Max(0, prev*p*(1-p)))*rng.NormFloat64()
			x = math.Max(0, math.Min(prev, x))
			atLeast[k-1], prev = x, x
			sum += x
		}
		if cycles > 0 {
			tpc = 1 + sum/cycles
		}
	}
	perReq := float64(reqTokens) / tpc
	if w >= 2 {
		perReq += 0.5
	}
	pickup := m.PickupRounds(w, n)
	share := perReq / (perReq + pickup)
	reqs := float64(n) * steps / (perReq + pickup)
	tokens := reqs * float64(reqTokens)
	if w >= 2 {
		for len(e.c.AtLeast) < w-1 {
			e.c.AtLeast = append(e.c.AtLeast, 0)
		}
		cycles := float64(n) * steps * share
		e.c.Cycles += cycles
		e.c.Drafted += cycles * float64(w-1)
		for k, x := range atLeast {
			e.c.AtLeast[k] += x
			e.c.Accepted += x
		}
	}
	e.c.Tokens += tokens
	e.c.EngineSecs += float64(n) * share * dt / 1000
	e.c.Decodes += steps
	e.c.Served += float64(n) * dt / 1000
	e.ended += reqs
	e.c.Ended = int(e.ended)
	return stepOut{tokens: tokens, decoding: share}
}

// rate is the mean engine's client tokens/s at width w under n clients
// of class a: simcost.Model.RateAt with the class's tokens a cycle.
func rate(m simcost.Model, a *accept, w, n, reqTokens int) float64 {
	n = max(1, n)
	e := 1.0
	if w >= 2 {
		e = a.tpc[w]
	}
	cycles := float64(reqTokens)/e + m.PickupRounds(w, n)
	if w >= 2 {
		cycles += 0.5
	}
	return float64(n) * float64(reqTokens) * 1000 / (cycles * m.CycleMS(w, n))
}
