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
	// s[w][k-1] is S(k) at width w, and sd[w] the standard deviation of
	// the draft tokens one cycle accepts.
	s  [][]float64
	sd []float64
}

// classB is the second class of the two-class traffic: each conditional
// acceptance times this (the earlier harness's, internal/adapt's
// matrixClassB), a harder mix of prompts.
const classB = 0.75

// mixedScale are the classes a mixed phase's requests draw from (classes
// 2 and up): each conditional acceptance times one of these, at most 1.
// Calibrated so that one engine's requests at width 4 spread as on the
// H100 under followeval's rotation of code and prose prompts (2.89 ± 0.71
// tokens a cycle over 140 requests, a coefficient of variation of 0.25:
// docs/benchmark_results/h100-follow-2026-12-05.md): on the matrix's
// profiles these give 0.21-0.26.
var mixedScale = []float64{0.6, 0.8, 1.0, 1.2}

// classes is how many acceptance classes a run holds: 0, 1 (classB) and
// the mixed ones.
var classes = 2 + len(mixedScale)

// classScale is class cls's factor on each conditional acceptance.
func classScale(cls int) float64 {
	switch {
	case cls == 1:
		return classB
	case cls >= 2:
		return mixedScale[cls-2]
	}
	return 1
}

// newAccept builds an acceptance of model m up to maxWidth, each
// conditional acceptance times scale (a class's and a load's: classScale,
// Profile.LoadAccept), at most 1. A model with Accept (a pair's S(k)) has one acceptance at every width; one
// given as mean tokens a cycle by width (GB10) draws each width's tokens
// with the p of simcost.AcceptProb, as the sim does.
func newAccept(m simcost.Model, scale float64, maxWidth int) accept {
	a := accept{cond: make([][]float64, maxWidth+1), tpc: make([]float64, maxWidth+1), s: make([][]float64, maxWidth+1), sd: make([]float64, maxWidth+1)}
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
			p = math.Min(1, p*scale)
			a.cond[w][k] = p
			s *= p
			t += s
			a.s[w] = append(a.s[w], s)
		}
		a.tpc[w] = t
		// A = Σ 1[A ≥ k]: E[A²] = Σ (2k−1)·S(k).
		e2 := 0.0
		for k, sk := range a.s[w] {
			e2 += float64(2*k+1) * sk
		}
		a.sd[w] = math.Sqrt(math.Max(0, e2-(t-1)*(t-1)))
	}
	return a
}

// engine is one engine process in virtual time. Its counters are what
// its /metrics shows: llama-server adds a request's counts when the
// request ends, so a request's counts are credited to its engine then.
type engine struct {
	gen      uint64
	width    int
	z        float64 // its draw (simcost.EngineDraw)
	takeover float64 // virtual ms it began to serve (simcost.Model.SharedFactor counts from here)
	c        Counters
	// warm is its slots whose cache holds a prompt; stall the ms of cold
	// prefills (simcost.Model.ColdPrefillMS) it has still to run.
	warm  int
	stall float64
}

// started notes a request starting on e with k sequences on it: a slot
// never used before evaluates the whole prompt first.
func (e *engine) started(m simcost.Model, k int) {
	if k > e.warm {
		e.warm++
		e.stall += m.ColdPrefillMS
	}
}

// cycleMS is one round of e with k sequences at virtual ms now, priced
// in closed form: the model's CycleMS, the engine's own effect, the GPU
// shared while the engine a switch replaced drains (from cur's
// takeover), and the model's per-cycle noise averaged over a step of dt.
func (e *engine) cycleMS(m simcost.Model, k int, sharedSince, now, dt float64, rng *rand.Rand) float64 {
	k = max(1, k)
	cyc := m.CycleMS(e.width, k) * m.EngineFactor(e.z, e.width, k) * m.SharedFactor(now-sharedSince)
	if e.gen > 1 {
		cyc *= m.SwitchedFactor(e.width, k, now-e.takeover)
	}
	return cyc * math.Max(0.5, 1+m.Noise*rng.NormFloat64()/math.Sqrt(math.Max(1, dt/cyc)))
}

// client is one closed-loop client: the engine its request runs on and
// where the request is (rounds still to wait before it decodes, tokens
// left, then the rounds of its last cycle cut at its end), and its
// counts so far.
type client struct {
	eng              *engine
	wait, left, tail float64
	acc              Counters
	cls              int // its request's class (Phase.Mixed)
}

// leg is what one engine's rounds cost a client over one step.
type leg struct {
	m         simcost.Model
	a         *accept
	reqTokens int
	k         int     // sequences on the engine
	cyc       float64 // its ms a round
}

// next starts the client's next request at width w: it waits the
// model's PickupRounds (a fraction of a round either way, as
// simcost.Model.Window), decodes reqTokens, and at a speculative width
// its last cycle is cut at half (as simcost.Model.RateAt).
func (cl *client) next(g leg, w int, rng *rand.Rand) {
	cl.wait = max(0, g.m.PickupRounds(w, g.k)+rng.Float64()-0.5)
	if g.m.PickupRounds(w, g.k) == 0 {
		cl.wait = 0
	}
	cl.left, cl.tail = float64(g.reqTokens), 0
	if w >= 2 {
		cl.tail = 0.5
	}
}

// run advances the client by up to dt ms on its engine and returns the
// tokens it got and the ms used: less than dt when its request ended,
// the request's counts then credited to the engine.
func (cl *client) run(g leg, dt float64, rng *rand.Rand) (tokens, used float64, ended bool) {
	w := cl.eng.width
	r := dt / g.cyc // rounds available
	a := &cl.acc
	waited := min(r, cl.wait)
	cl.wait -= waited
	r -= waited
	decoded := 0.0
	if cl.left > 0 && r > 0 {
		c, atLeast := r, cl.draw(g, w, r, rng)
		got := c
		for _, x := range atLeast {
			got += x
		}
		f := 1.0
		if got >= cl.left {
			f = cl.left / got
		}
		c, tokens = f*c, f*got
		if w >= 2 {
			for len(a.AtLeast) < w-1 {
				a.AtLeast = append(a.AtLeast, 0)
			}
			a.Cycles += c
			a.Drafted += c * float64(w-1)
			for k, x := range atLeast {
				a.AtLeast[k] += f * x
				a.Accepted += f * x
			}
		}
		cl.left -= tokens
		if cl.left < 1e-9 {
			cl.left = 0
		}
		a.Tokens += tokens
		decoded += c
		r -= c
	}
	if cl.left == 0 && r > 0 {
		t := min(r, cl.tail)
		cl.tail -= t
		decoded += t
		r -= t
		ended = cl.tail <= 1e-12
	}
	used = dt - r*g.cyc
	a.EngineSecs += decoded * g.cyc / 1000
	a.Served += used / 1000
	if ended {
		a.Ended = 1
		cl.eng.c.add(*a)
		cl.acc = Counters{}
	}
	return tokens, used, ended
}

// draw is the acceptance of c cycles at width w: the cycles accepting
// at least k draft tokens, for k = 1..w−1. Their sum, the draft tokens
// accepted, is drawn in its normal approximation (c cycles of the
// class's variance) and spread over the positions as S(k): unbiased, and
// never rising with k, where a clipped draw per position was 3 % low at
// width 8 over 250 ms steps.
func (cl *client) draw(g leg, w int, c float64, rng *rand.Rand) []float64 {
	if w < 2 {
		return nil
	}
	mean := c * (g.a.tpc[w] - 1)
	f := 1.0
	if mean > 0 {
		f = math.Max(0, 1+g.a.sd[w]*math.Sqrt(c)*rng.NormFloat64()/mean)
	}
	out := make([]float64, w-1)
	for k := range out {
		out[k] = f * c * g.a.s[w][k]
	}
	return out
}

// decoding says whether the client's request is past its wait: the
// engine counts it as processing.
func (cl *client) decoding() bool { return cl.wait <= 0 }

func (c *Counters) add(o Counters) {
	for len(c.AtLeast) < len(o.AtLeast) {
		c.AtLeast = append(c.AtLeast, 0)
	}
	for k, x := range o.AtLeast {
		c.AtLeast[k] += x
	}
	c.Cycles += o.Cycles
	c.Drafted += o.Drafted
	c.Accepted += o.Accepted
	c.Tokens += o.Tokens
	c.EngineSecs += o.EngineSecs
	c.Decodes += o.Decodes
	c.Served += o.Served
	c.Ended += o.Ended
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
