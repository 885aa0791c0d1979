package control

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/speclaunch/speclaunch/internal/sim"
)

// The virtual-time engine of the matrix: closed form at scrape
// granularity, no HTTP, no goroutine. An engine at width W serving n
// requests runs cycles of (DraftRoundMS(W) + VerifyRowsMS(n·W)) ms, times
// the out-of-step batching cost under several requests, times its own
// random effect (a fresh engine's speed around its width's mean), times
// the contention while another engine runs beside it; each cycle accepts
// draft position k with S(k) of the phase's class, with binomial noise.

// vProfile is one engine and pair of the matrix.
type vProfile struct {
	name string
	cost sim.CostModel
	def  int // the default width (the policy's or engine's)
	// batch is what a speculative cycle [1] and a classic step [0] cost
	// under several out-of-step requests over the in-step rows the probe
	// and the sweep price (1: none).
	batch [2]float64
	// spread1, spreadN: the sd of a fresh engine's log speed at one
	// request and at several.
	spread1, spreadN float64
	switchS          float64 // seconds a switch takes, the old engine serving
	drainS, contend  float64 // the old engine drains beside the new for drainS, each cycle contend slower
	warmS, warmCost  float64 // a new engine's first warmS run warmCost slower
	onlyOne          bool    // a replay of a one-client record: no four-client cells
}

// phase is a stretch of traffic: n requests in flight of one class.
type phase struct {
	dur   time.Duration
	n     int
	class int
}

const classB = 0.75 // class B's conditional acceptance: class A's times this

// accept is S(k) of class cls for profile p (k from 1).
func (p vProfile) accept(cls, k int) float64 {
	s := func(k int) float64 {
		if k < 1 {
			return 1
		}
		if len(p.cost.Accept) > 0 {
			return p.cost.Accept[min(k, len(p.cost.Accept))-1]
		}
		// a model given as mean tokens per cycle by width: geometric with
		// the p of width 8's mean
		q := geomP(p.cost.EmittedPerVerify(8), 8)
		return math.Pow(q, float64(k))
	}
	if cls == 0 {
		return s(k)
	}
	v := 1.0
	for j := 1; j <= k; j++ {
		if s(j-1) <= 0 {
			return 0
		}
		v *= math.Min(1, s(j)/s(j-1)) * classB
	}
	return v
}

func geomP(mean float64, w int) float64 {
	lo, hi := 0.0, 1.0
	for range 60 {
		q := (lo + hi) / 2
		t, x := 0.0, 1.0
		for range w {
			t += x
			x *= q
		}
		if t < mean {
			lo = q
		} else {
			hi = q
		}
	}
	return (lo + hi) / 2
}

// cycleMS is the mean engine's ms per cycle at width w under n requests.
func (p vProfile) cycleMS(w, n int) float64 {
	if w < 2 {
		ms := p.cost.VerifyRowsMS(n)
		if n > 1 {
			ms *= p.batch[0]
		}
		return ms
	}
	ms := p.cost.DraftRoundMS(w) + p.cost.VerifyRowsMS(n*w)
	if n > 1 {
		ms *= p.batch[1]
	}
	return ms
}

// rate is the mean engine's tokens per second (all requests) at width w.
func (p vProfile) rate(w, n, cls int) float64 {
	t := 1.0
	for k := 1; k < w; k++ {
		t += p.accept(cls, k)
	}
	return float64(n) * 1000 * t / p.cycleMS(w, n)
}

// vEngine is one engine process of the matrix.
type vEngine struct {
	gen   uint64
	width int
	born  float64  // virtual s it started serving
	c     Counters // cumulative
	z     float64  // its N(0,1) draw
}

// serve runs the engine dt seconds under n requests of class cls; shared
// says another engine runs beside it. It returns the tokens made.
func (e *vEngine) serve(p vProfile, rng *rand.Rand, now, dt float64, n, cls int, shared bool) float64 {
	ms := p.cycleMS(e.width, n) * e.speed(p, n)
	if shared {
		ms *= 1 + p.contend
	}
	if now-e.born < p.warmS {
		ms *= 1 + p.warmCost
	}
	cycles := float64(n) * 1000 * dt / ms
	tokens := cycles
	if e.width >= 2 {
		for len(e.c.AtLeast) < e.width-1 {
			e.c.AtLeast = append(e.c.AtLeast, 0)
		}
		for k := 1; k < e.width; k++ {
			s := p.accept(cls, k)
			a := math.Max(0, cycles*s+math.Sqrt(cycles*s*(1-s))*rng.NormFloat64())
			e.c.AtLeast[k-1] += a
			tokens += a
		}
		e.c.Cycles += cycles
	} else {
		e.c.Cycles += tokens
	}
	e.c.Tokens += tokens
	e.c.Secs += float64(n) * dt
	return tokens
}

// speed is the engine's random effect at n requests: exp(z·spread).
func (e *vEngine) speed(p vProfile, n int) float64 {
	s := p.spreadN
	if n <= 1 {
		s = p.spread1
	}
	return math.Exp(e.z * s)
}
