package simcost

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
)

// Batch is what decoding several sequences together costs beyond the rows
// its verify pass computes: on llama-server d32676d with clients out of
// step, each sequence drafts on its own, a request waits for a turn of the
// server loop, and classic steps of several rows run a little above the
// idle probe's rows. The zero value costs nothing (one sequence, or the sim
// as it was).
type Batch struct {
	// SeqMS and SeqTokenMS are what each sequence beyond the first adds to
	// a speculative cycle: a fixed part and a part per drafted token (its
	// own draft pass, not batched with the others').
	SeqMS, SeqTokenMS float64
	// ClassicLive scales a classic step of several rows over the probe's
	// verify cost of those rows (0 or 1: none).
	ClassicLive float64
	// PickupClassic and PickupSpec are how many engine rounds a request
	// waits while other sequences decode, in flight for its client but
	// outside the engine's own timings (the next turn of the server loop,
	// the drafted prompt), at classic and at a speculative width.
	PickupClassic, PickupSpec float64
	// ClassicVaried scales a classic step of four sequences when the
	// requests vary in length (Model.VariedLengths); ClassicSwitched one
	// on an engine that took over by a switch under one-length requests,
	// whose clients arrive out of step, for its first SwitchedMS. Both
	// were measured at four; between one and four sequences they are
	// interpolated (FourShare), an assumption. 0 or 1: none.
	ClassicVaried, ClassicSwitched, SwitchedMS float64
}

// FourShare is how much of an effect measured at four sequences applies
// with n: none with one, all from four, linear between (an assumption,
// as adaptsim's Profile.LoadAccept makes).
func FourShare(n int) float64 {
	return math.Min(1, math.Max(0, float64(n-1)/3))
}

// Spread is the random effect of one engine on its speed: each fresh
// engine's times are scaled by exp(σ·z), z ~ N(0, 1) drawn once per engine,
// σ by load and width. Zero: every engine alike.
type Spread struct {
	Single       float64 // σ with one sequence decoding
	MultiClassic float64 // σ at classic with several
	MultiSpec    float64 // σ at a speculative width with several
}

// Drain is the GPU shared with the engine a switch replaced while it
// finishes its requests: the new engine's rounds cost 1 + Contention times
// as much for its first MS milliseconds. Zero: no sharing.
type Drain struct {
	MS, Contention float64
}

// CycleMS is one cycle of n sequences decoding together at width w (below
// 2: a classic step), before noise and the engine's own effect: the
// drafting of one sequence, the verify of n·w rows, and what each further
// sequence adds (Batch).
func (c Model) CycleMS(w, n int) float64 {
	return c.cycleMS(w, max(1, n)) * c.scaleAt(w)
}

func (c Model) cycleMS(w, n int) float64 {
	if w < 2 {
		if n == 1 {
			return c.ClassicMS
		}
		live := c.Batch.ClassicLive
		if live <= 0 {
			live = 1
		}
		if c.VariedLengths && c.Batch.ClassicVaried > 0 {
			live *= 1 + (c.Batch.ClassicVaried-1)*FourShare(n)
		}
		return c.VerifyRowsMS(n) * live
	}
	verify := c.VerifyMS(w)
	if n > 1 {
		verify = c.VerifyRowsMS(n * w)
	}
	extra := float64(n-1) * (c.Batch.SeqMS + c.Batch.SeqTokenMS*float64(w-1))
	return c.DraftRoundMS(w) + verify + extra
}

// PickupRounds is how many rounds a request waits outside the engine's
// timings at width w with n sequences decoding; none when it decodes alone.
func (c Model) PickupRounds(w, n int) float64 {
	switch {
	case n <= 1:
		return 0
	case w < 2:
		return c.Batch.PickupClassic
	default:
		return c.Batch.PickupSpec
	}
}

// SpreadSigma is σ of the engine effect at width w with n sequences.
func (c Model) SpreadSigma(w, n int) float64 {
	switch {
	case n <= 1:
		return c.Spread.Single
	case w < 2:
		return c.Spread.MultiClassic
	default:
		return c.Spread.MultiSpec
	}
}

// EngineDraw is the z of one engine, drawn from its seed: the same seed
// gives the same engine.
func EngineDraw(seed uint64) float64 {
	return rand.New(rand.NewPCG(seed, 0x5eed)).NormFloat64()
}

// EngineFactor is the time multiplier of an engine whose draw is z at
// width w with n sequences: exp(σ·z), 1 when Spread is zero.
func (c Model) EngineFactor(z float64, w, n int) float64 {
	return math.Exp(c.SpreadSigma(w, n) * z)
}

// SwitchedFactor is the time multiplier of a classic round of n
// sequences on an engine that took over by a switch ms milliseconds ago,
// under one-length requests (Batch.ClassicSwitched, for its first
// Batch.SwitchedMS); 1 otherwise.
func (c Model) SwitchedFactor(w, n int, ms float64) float64 {
	if w < 2 && n > 1 && !c.VariedLengths && c.Batch.ClassicSwitched > 0 && ms >= 0 && ms < c.Batch.SwitchedMS {
		return 1 + (c.Batch.ClassicSwitched-1)*FourShare(n)
	}
	return 1
}

// SharedFactor is the time multiplier of a new engine's round at ms
// milliseconds after it took over, while the old one drains beside it.
func (c Model) SharedFactor(ms float64) float64 {
	if ms >= 0 && ms < c.Drain.MS {
		return 1 + c.Drain.Contention
	}
	return 1
}

// TokensPerCycle is the mean tokens one sequence's cycle emits at width w:
// 1 at classic.
func (c Model) TokensPerCycle(w int) float64 {
	if w < 2 {
		return 1
	}
	return c.EmittedPerVerify(w)
}

// RateAt is the steady rate in tokens/s that clients get from n
// sequences at width w with requests of reqTokens tokens, without noise
// and with the engine effect at 1: each request takes reqTokens/E cycles,
// half a cycle more at a speculative width (its last cycle is cut at the
// request's end), plus its pickup rounds.
func (c Model) RateAt(w, n, reqTokens int) float64 {
	n = max(1, n)
	e := c.TokensPerCycle(w)
	cycles := float64(reqTokens)/e + c.PickupRounds(w, n)
	if w >= 2 {
		cycles += 0.5
	}
	return float64(n) * float64(reqTokens) * 1000 / (cycles * c.CycleMS(w, n))
}

// BestAt is the width in 1..maxWidth with the highest RateAt, the
// narrowest on a tie, and its rate.
func (c Model) BestAt(n, reqTokens, maxWidth int) (int, float64) {
	best, rate := 1, c.RateAt(1, n, reqTokens)
	for w := 2; w <= maxWidth; w++ {
		if r := c.RateAt(w, n, reqTokens); r > rate {
			best, rate = w, r
		}
	}
	return best, rate
}

// scaleAt is WidthScale at width w (below 2: classic, key 1), 1 when unset.
func (c Model) scaleAt(w int) float64 {
	if len(c.WidthScale) == 0 {
		return 1
	}
	w = max(1, w)
	keys := slices.Sorted(maps.Keys(c.WidthScale))
	if w <= keys[0] {
		return c.WidthScale[keys[0]]
	}
	if w >= keys[len(keys)-1] {
		return c.WidthScale[keys[len(keys)-1]]
	}
	return interpolate(c.WidthScale, w)
}
