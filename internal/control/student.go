package control

import "math"

// studentZ is the bound, in standard errors, that has the tail of z
// standard normal errors when the variance is estimated from df+1 values
// (Student's t with df degrees of freedom): the drift test reads the
// spread of 5-10 scrapes, and a spread from that few is itself uncertain.
// At z 4 it is 17.4 for 4 degrees of freedom and 7.0 for 9 (the recent
// scrapes' range). On an H100 under mixed-prompt traffic
// (docs/benchmark_results/h100-follow-2026-12-05.md) the test at a plain 4
// took one steady traffic for a change; on the calibrated matrix this
// bound made no figure worse (docs/benchmark_results/control-matrix-2026-12-05c.md).
func studentZ(z float64, df int) float64 {
	if df < 1 {
		return math.Inf(1)
	}
	tail := math.Erfc(z/math.Sqrt2) / 2 // one side
	lo, hi := z, z
	for studentSF(hi, df) > tail {
		hi *= 2
		if hi > 1e9 {
			return math.Inf(1)
		}
	}
	for range 100 {
		m := (lo + hi) / 2
		if studentSF(m, df) > tail {
			lo = m
		} else {
			hi = m
		}
	}
	return (lo + hi) / 2
}

// studentSF is P(T > t) for t ≥ 0, Student's t with df degrees of
// freedom: half the regularized incomplete beta I_x(df/2, 1/2) at
// x = df/(df+t²).
func studentSF(t float64, df int) float64 {
	n := float64(df)
	return betaInc(n/2, 0.5, n/(n+t*t)) / 2
}

// betaInc is the regularized incomplete beta I_x(a, b), by the continued
// fraction (modified Lentz), on the side where it converges fast.
func betaInc(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a + b)
	lb, _ := math.Lgamma(a)
	lc, _ := math.Lgamma(b)
	front := math.Exp(la - lb - lc + a*math.Log(x) + b*math.Log(1-x))
	if x < (a+1)/(a+b+2) {
		return front * betaCF(a, b, x) / a
	}
	return 1 - front*betaCF(b, a, 1-x)/b
}

func betaCF(a, b, x float64) float64 {
	const tiny = 1e-300
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 300; m++ {
		fm := float64(m)
		for _, aa := range []float64{
			fm * (b - fm) * x / ((a + 2*fm - 1) * (a + 2*fm)),
			-(a + fm) * (a + b + fm) * x / ((a + 2*fm) * (a + 2*fm + 1)),
		} {
			d = 1 + aa*d
			if math.Abs(d) < tiny {
				d = tiny
			}
			c = 1 + aa/c
			if math.Abs(c) < tiny {
				c = tiny
			}
			d = 1 / d
			h *= d * c
		}
		if math.Abs(d*c-1) < 1e-15 {
			break
		}
	}
	return h
}
