package adapt

import "math"

// Counts accumulates acceptance over cycles of one width: AtLeast[k-1] is
// the number of cycles that accepted at least k draft tokens.
type Counts struct {
	Cycles  float64
	AtLeast []float64
}

// Add adds one scrape's delta. Positions at or past width−1 are dropped:
// llama-server keeps a family sized to the widest n_max it has run, and a
// position the running width does not draft carries no observation.
func (c *Counts) Add(d Delta, width int) {
	if d.Cycles <= 0 {
		return
	}
	c.Cycles += d.Cycles
	n := min(len(d.PerPos), max(0, width-1))
	for len(c.AtLeast) < n {
		c.AtLeast = append(c.AtLeast, 0)
	}
	for p := range n {
		c.AtLeast[p] += d.PerPos[p]
	}
}

// Merge adds another epoch of the same width.
func (c *Counts) Merge(o Counts) {
	c.Cycles += o.Cycles
	for len(c.AtLeast) < len(o.AtLeast) {
		c.AtLeast = append(c.AtLeast, 0)
	}
	for p, v := range o.AtLeast {
		c.AtLeast[p] += v
	}
}

// TokensPerCycle is the mean tokens per cycle these cycles gave: the bonus
// token plus the mean accepted length, 1 + Σ AtLeast[k-1]/Cycles.
func (c Counts) TokensPerCycle() float64 {
	t, _ := c.Obs().TokensPerCycle(len(c.AtLeast) + 1)
	return t
}

// TokensBounds bounds TokensPerCycle by z standard errors of the mean
// accepted length L per cycle, its variance from these cycles' own
// distribution: with P(L ≥ k) = AtLeast[k-1]/Cycles, E[L] = Σ P(L ≥ k) and
// E[L²] = Σ (2k−1)·P(L ≥ k). One interval for the sum is tighter than
// summing the positions' intervals: the positions of one cycle are not
// independent (a cycle accepting k tokens accepted every one before).
func (c Counts) TokensBounds(z float64) (lo, hi float64) {
	t := c.TokensPerCycle()
	if c.Cycles <= 0 {
		return 1, math.Inf(1)
	}
	var m1, m2 float64
	for i, v := range c.AtLeast {
		p := math.Max(0, math.Min(1, v/c.Cycles))
		m1 += p
		m2 += float64(2*(i+1)-1) * p
	}
	se := math.Sqrt(math.Max(0, m2-m1*m1) / c.Cycles)
	return math.Max(1, t-z*se), t + z*se
}

// TokensSE is TokensPerCycle and its standard error (see TokensBounds).
func (c Counts) TokensSE() (t, se float64) {
	_, hi := c.TokensBounds(1)
	t = c.TokensPerCycle()
	if math.IsInf(hi, 1) {
		return t, math.Inf(1)
	}
	return t, hi - t
}

// Obs returns the per-position observations, k = 1..len(AtLeast).
func (c Counts) Obs() Acceptance {
	a := make(Acceptance, len(c.AtLeast))
	for i, v := range c.AtLeast {
		a[i] = Obs{Count: v, Cycles: c.Cycles}
	}
	return a
}

// Obs is one draft position's observation: Count of Cycles accepted at
// least this many draft tokens.
type Obs struct {
	Count, Cycles float64
}

// S is the point estimate Count/Cycles, clamped to [0, 1].
func (o Obs) S() float64 {
	if o.Cycles <= 0 {
		return 0
	}
	return math.Max(0, math.Min(1, o.Count/o.Cycles))
}

// Bounds is the Wilson score interval at z standard errors: it stays inside
// [0, 1] and behaves at S near 0 or 1, where most positions of a flat or a
// collapsing profile sit.
func (o Obs) Bounds(z float64) (lo, hi float64) {
	return Wilson(o.Count, o.Cycles, z)
}

// Wilson is the Wilson score interval for x successes in n trials.
func Wilson(x, n, z float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	p := math.Max(0, math.Min(1, x/n))
	z2 := z * z
	den := 1 + z2/n
	centre := (p + z2/(2*n)) / den
	half := z * math.Sqrt(p*(1-p)/n+z2/(4*n*n)) / den
	return math.Max(0, centre-half), math.Min(1, centre+half)
}

// Acceptance is S(k) by position: Acceptance[k-1] observes S(k), the share
// of cycles accepting at least k draft tokens. Positions may come from
// different epochs (near positions from the running width, far ones from
// the last exploration), so each carries its own cycle count.
type Acceptance []Obs

// S is S(k); 0 outside the observed positions.
func (a Acceptance) S(k int) float64 {
	if k < 1 || k > len(a) {
		return 0
	}
	return a[k-1].S()
}

// TokensPerCycle is 1 + S(1) + … + S(w−1): the bonus token plus the
// expected accepted drafts of a cycle at width w. ok is false when w needs a
// position not observed.
func (a Acceptance) TokensPerCycle(w int) (float64, bool) {
	if w < 1 || w-1 > len(a) {
		return 0, false
	}
	t := 1.0
	for k := 1; k < w; k++ {
		t += a.S(k)
	}
	return t, true
}

// MinCycles returns the fewest cycles behind any of positions 1..w−1.
func (a Acceptance) MinCycles(w int) float64 {
	m := math.Inf(1)
	for k := 1; k < w && k <= len(a); k++ {
		m = math.Min(m, a[k-1].Cycles)
	}
	if math.IsInf(m, 1) {
		return 0
	}
	return m
}

// Drift compares two acceptance observations position by position with a
// two-proportion z test and returns the first position whose difference
// exceeds z standard errors (0 when none): the traffic changed. phi[k-1]
// (see Dispersion; 1 where missing) scales the variance of position k:
// cycles are not independent draws when requests of different acceptance
// come in runs.
func Drift(old, now Acceptance, z float64, phi []float64) int {
	for k := 1; k <= min(len(old), len(now)); k++ {
		a, b := old[k-1], now[k-1]
		if a.Cycles <= 0 || b.Cycles <= 0 {
			continue
		}
		p1, p2 := a.S(), b.S()
		p := (a.Count + b.Count) / (a.Cycles + b.Cycles)
		se := math.Sqrt(p * (1 - p) * (1/a.Cycles + 1/b.Cycles))
		if k <= len(phi) {
			se *= math.Sqrt(phi[k-1])
		}
		if se == 0 {
			if p1 != p2 {
				return k
			}
			continue
		}
		if math.Abs(p1-p2)/se > z {
			return k
		}
	}
	return 0
}

// Dispersion is, per position, how much more S(k) spreads between the
// epochs of each group than binomial sampling of their cycles explains:
// Pearson's χ² of the epochs around their group's pooled S(k), summed over
// the groups, over its degrees of freedom; at least 1, and 1 with no
// degree of freedom. Each group is one stretch of the traffic (the pool
// under test, the pool before it), so a change between the groups (a
// drift) does not inflate it, while requests of different acceptance
// alternating within a stretch do. On the sim matrix with two classes of
// requests alternating every 8, a 1024-cycle pool at width 4 held about 3
// runs of one class, two of one and one of the other in turn; the test
// took that for a drift at nearly every pool, dropped the far positions
// and the trials they named, and the loop stayed at 4 (0.95 of the best).
func Dispersion(groups ...[]Acceptance) []float64 {
	var phi []float64
	for k := 1; ; k++ {
		chi, df, any := 0.0, 0, false
		for _, g := range groups {
			var x, c float64
			var at []Obs
			for _, a := range g {
				if k <= len(a) && a[k-1].Cycles > 0 {
					at = append(at, a[k-1])
					x, c = x+a[k-1].Count, c+a[k-1].Cycles
				}
			}
			any = any || len(at) > 0
			p := x / c
			if len(at) < 2 || p <= 0 || p >= 1 {
				continue
			}
			for _, o := range at {
				d := o.Count - o.Cycles*p
				chi += d * d / (o.Cycles * p * (1 - p))
			}
			df += len(at) - 1
		}
		if !any {
			return phi
		}
		f := 1.0
		if df > 0 {
			f = math.Max(1, chi/float64(df))
		}
		phi = append(phi, f)
	}
}
