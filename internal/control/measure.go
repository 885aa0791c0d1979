package control

import (
	"math"
	"slices"
	"time"
)

// maxRuns bounds the runs kept per width and bucket (memory, and the
// weight of old engines in a mean).
const maxRuns = 8

// runWindow is the scrapes a run's sums forget over (exponentially): a
// run is the engine's recent rate, about two minutes at 2 s scrapes, so
// that a change of traffic shows in it within a few minutes.
const runWindow = 64

// unlike says whether tokens per cycle t, with variance v, is unlike
// want: beyond DriftZ standard errors, and beyond rounding. Where every
// draft token is accepted (t = want = the width) v is 0, and a last-digit
// difference is no change of traffic (the sim's flat shape, with its
// acceptance raised at four clients as on an H100, took one for a change
// at every decision: BenchmarkHardwareEffects).
func (c Controller) unlike(t, want, v float64) bool {
	return math.Abs(t-want) > max(c.cfg.DriftZ*math.Sqrt(v), 1e-9*math.Abs(want))
}

// before is an acceptance by position (accepted, cycles) without the
// engine's latest scrapes: what a bucket had learnt before the scrapes the
// drift test reads (they restart when the load moves; a reference made of
// them could never look unlike them), or a traffic's without the scrapes
// its change was found in.
func (e Engine) before(acc, cycles []float64) Pair {
	p := Pair{Acc: slices.Clone(acc), Cycles: slices.Clone(cycles)}
	for i, pos := range e.RecentPos {
		for k := 0; k < len(pos) && k < len(p.Acc); k++ {
			p.Acc[k] = math.Max(0, p.Acc[k]-pos[k])
			p.Cycles[k] = math.Max(p.Acc[k], p.Cycles[k]-e.RecentCycles[i])
		}
	}
	return p
}

// addAcc adds one scrape's per-position counts at width w to an
// acceptance by position (accepted, cycles).
func addAcc(acc, cycles []float64, d Counters, w int) ([]float64, []float64) {
	for k := 0; k < min(len(d.AtLeast), w-1); k++ {
		for len(acc) <= k {
			acc, cycles = append(acc, 0), append(cycles, 0)
		}
		acc[k] += d.AtLeast[k]
		cycles[k] += d.Cycles
	}
	return acc, cycles
}

// minScrapes is the fewest scrapes a run's rate is read from: its own
// standard error comes from the spread of its scrapes (batch means), which
// needs a few.
const minScrapes = 5

// addRun adds one scrape's delta d to the serving engine's run at bucket
// b and to the pair's acceptance, and returns the run.
func (c Controller) addRun(s *State, b int, d Counters, now time.Time) Run {
	w := s.Engine.Width
	cycles := d.Cycles
	if w < 2 {
		cycles = d.Tokens // a classic step is a cycle of one token
	}
	s.Pair.Acc, s.Pair.Cycles = addAcc(s.Pair.Acc, s.Pair.Cycles, d, w)
	if bk := &s.Pair.Buckets[b]; c.on("bucket acceptance") {
		bk.Acc, bk.Cycles = addAcc(bk.Acc, bk.Cycles, d, w)
	}
	if w >= 2 && d.Cycles > 0 {
		e := &s.Engine
		// From the per-position counts, as the acceptance learnt is: the
		// tokens also count a request's last cycle cut short by its length.
		t := 1.0
		for k := 0; k < min(len(d.AtLeast), w-1); k++ {
			t += d.AtLeast[k] / d.Cycles
		}
		e.Recent, e.RecentCycles = append(e.Recent, t), append(e.RecentCycles, d.Cycles)
		e.RecentPos = append(e.RecentPos, slices.Clone(d.AtLeast[:min(len(d.AtLeast), w-1)]))
		if len(e.Recent) > driftScrapes {
			e.Recent, e.RecentCycles, e.RecentPos = e.Recent[1:], e.RecentCycles[1:], e.RecentPos[1:]
		}
	}
	bk := &s.Pair.Buckets[b]
	rs := bk.Runs[w]
	i := slices.IndexFunc(rs, func(r Run) bool { return r.Engine == s.Engine.Gen })
	if i < 0 {
		rs = append(rs, Run{Engine: s.Engine.Gen})
		if len(rs) > maxRuns {
			rs = rs[len(rs)-maxRuns:]
		}
		i = len(rs) - 1
	}
	r := &rs[i]
	if r.Scrapes >= runWindow {
		f := float64(runWindow-1) / runWindow
		r.Tokens, r.Secs, r.Cycles, r.Busy = f*r.Tokens, f*r.Secs, f*r.Cycles, f*r.Busy
		r.SumR, r.SumR2, r.SumT, r.SumT2 = f*r.SumR, f*r.SumR2, f*r.SumT, f*r.SumT2
		r.Scrapes--
	}
	rate, tpc := d.Tokens/d.Secs, d.Tokens/math.Max(cycles, 1e-9)
	r.Tokens, r.Secs, r.Cycles, r.Scrapes = r.Tokens+d.Tokens, r.Secs+d.Secs, r.Cycles+cycles, r.Scrapes+1
	r.Busy += min(d.Busy, d.Secs)
	r.SumR, r.SumR2, r.SumT, r.SumT2 = r.SumR+rate, r.SumR2+rate*rate, r.SumT+tpc, r.SumT2+tpc*tpc
	r.At = now
	bk.Runs[w] = rs
	return *r
}

// Rate is tokens per second per request in flight.
func (r Run) Rate() float64 { return r.Tokens / r.Secs }

// relVar is the run's own sampling variance of Rate, relative: the spread
// of its scrapes' rates (batch means) over their count.
func (r Run) relVar() float64 {
	return batchVar(r.SumR, r.SumR2, r.Scrapes) / sq(r.Rate())
}

// driftScrapes is how many of the latest scrapes the drift test reads:
// 20 s at 2 s scrapes, so that a change of traffic shows within about
// that, against the acceptance learnt over everything before.
const driftScrapes = 10

// recent is the engine's tokens per cycle over its latest scrapes and the
// variance of its difference from what the acceptance ref predicts: the
// spread of the scrapes (batch means), at least varL/cycles, the variance
// of a mean of that many cycles' accepted lengths (ten scrapes' spread is
// itself too uncertain to stand alone); and ref's own, the same variance
// a cycle over the cycles ref was learnt from. A reference of a few
// seconds is no firmer than the scrapes read against it: on an H100 a
// bucket's acceptance learnt from a few scrapes of width 8 read width 4's
// next 17 s as a change of traffic, and the width learnt at one client was
// dropped, while the fixed cells' acceptance held within about 3.5 % at
// both loads (docs/benchmark_results/h100-follow-2026-12-07b.md).
func (e Engine) recent(varL float64, ref Pair) (t, v float64, ok bool) {
	var sum, sum2, cycles float64
	for i, x := range e.Recent {
		sum, sum2, cycles = sum+x, sum2+x*x, cycles+e.RecentCycles[i]
	}
	if len(e.Recent) < minScrapes || cycles <= 0 {
		return 0, 0, false
	}
	t = sum / float64(len(e.Recent))
	v = math.Max(batchVar(sum, sum2, len(e.Recent)), varL/cycles)
	if len(ref.Cycles) > 0 && ref.Cycles[0] > 0 {
		v *= 1 + cycles/ref.Cycles[0]
	}
	return t, v, true
}

// batchVar is the variance of the mean of n values from their sum and
// sum of squares; with fewer than 3 values it is taken as large.
func batchVar(sum, sum2 float64, n int) float64 {
	if n < 3 {
		return math.Inf(1)
	}
	m := sum / float64(n)
	return math.Max(0, sum2/float64(n)-m*m) / float64(n-1)
}

func sq(x float64) float64 { return x * x }

// Estimate is a width's measured rate at a bucket: the mean of its runs'
// rates (one per engine) and the relative variance of that mean, which
// counts the spread between fresh engines once per run.
type Estimate struct {
	Width  int
	Rate   float64
	RelVar float64
	Runs   int
}

// estimate is width w's Estimate at bucket b; ok false when no run of it
// has MinCycles.
func (c Controller) estimate(s *State, b, w int) (Estimate, bool) {
	sigma := c.spread(b)
	e := Estimate{Width: w}
	for _, r := range s.Pair.Buckets[b].Runs[w] {
		if r.Cycles < c.cfg.MinCycles || r.Scrapes < minScrapes || r.Secs <= 0 {
			continue
		}
		e.Rate += r.Rate()
		e.RelVar += sigma*sigma + math.Min(r.relVar(), 1)
		e.Runs++
	}
	if e.Runs == 0 {
		return e, false
	}
	e.Rate /= float64(e.Runs)
	e.RelVar /= float64(e.Runs * e.Runs)
	return e, true
}

// gainLo is the lower bound of a's gain over b: (a/b − 1) − Z standard
// errors of the two means together.
func (c Controller) gainLo(a, b Estimate) (gain, lo float64) {
	gain = a.Rate/b.Rate - 1
	return gain, gain - c.cfg.Z*math.Sqrt(a.RelVar+b.RelVar)
}

// S is the pair's acceptance at draft position k (1-based), and whether
// it was observed over MinCycles cycles.
func (p Pair) S(k int, minCycles float64) (float64, bool) {
	if k < 1 || k > len(p.Acc) || p.Cycles[k-1] < minCycles {
		return 0, false
	}
	return math.Max(0, math.Min(1, p.Acc[k-1]/p.Cycles[k-1])), true
}

// varL is the variance of one cycle's accepted length at width w from the
// pair's acceptance: with P(L ≥ k) = S(k), E[L] = Σ S(k) and E[L²] =
// Σ (2k−1)·S(k).
func (p Pair) varL(w int) float64 {
	var m1, m2 float64
	for k := 1; k < w && k <= len(p.Acc); k++ {
		if p.Cycles[k-1] > 0 {
			s := math.Min(1, p.Acc[k-1]/p.Cycles[k-1])
			m1, m2 = m1+s, m2+float64(2*k-1)*s
		}
	}
	return math.Max(m2-m1*m1, 0)
}
