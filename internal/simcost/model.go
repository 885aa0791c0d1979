package simcost

import (
	"maps"
	"math"
	"slices"
)

// GB10 affine figures (docs/benchmark_results/draft-block-width-default-gb10-2026-09-20.md,
// transcribed from upstream mlxcel: qwen3.5-4b-4bit with a DFlash drafter,
// sm_121). They are the default cost model so the sim reproduces the
// shape that motivated speclaunch: widths 2-4 beat classic, 16 loses.
const gb10ClassicTokPerSec = 58.23

// gb10SyncMS is the "sync ms/round" column: the wait for one verify round.
var gb10SyncMS = map[int]float64{2: 19.0, 3: 24.5, 4: 30.0, 5: 40.8, 6: 47.0, 7: 54.5, 8: 56.4, 16: 69.0}

// gb10Emitted is the "emitted/verify" column: mean tokens per verify round.
var gb10Emitted = map[int]float64{2: 1.75, 3: 2.24, 4: 2.58, 5: 2.84, 6: 3.06, 7: 3.11, 8: 3.16, 16: 3.32}

// The sync column alone is not a whole round: the measured e2e rates imply
// ~7-10 ms more per round (drafting and the host-side walk). A least-squares
// fit of E(W)/rate(W) − sync(W) over the table gives about 6.9 ms plus
// 0.24 ms per drafted token; with it the model lands within about 2% of every
// measured width (2: 1.15x, 3: 1.21x, 4: 1.18x, 5: 1.00x, 16: 0.72x).
const (
	gb10DraftMS      = 6.9
	gb10DraftTokenMS = 0.24
)

// Model is what a simulated request costs. All times are milliseconds.
// A speculative round at width W costs DraftMS + DraftTokenMS·(W−1) +
// VerifyMS(W) and emits between 1 and W tokens, EmittedPerVerify(W) on
// average; classic decode costs ClassicMS per token.
type Model struct {
	ClassicMS float64 // one classic decode step
	// Verify is the per-round verify (sync) cost by width. Missing widths
	// are interpolated linearly; beyond the largest, the last segment's
	// slope is extended (8→16 by default).
	Verify map[int]float64
	// Emitted is the mean tokens emitted per verify round by width,
	// interpolated like Verify and clamped to [1, W].
	Emitted       map[int]float64
	DraftMS       float64 // fixed drafting cost per round
	DraftTokenMS  float64 // drafting cost per drafted token (W−1 a round)
	PromptTokenMS float64 // prefill cost per prompt token; kept small so e2e and engine rates agree
	// Noise scales each round's (and each classic step's) cost by
	// 1 + Noise·N(0,1), from a PRNG seeded by (seed, request number).
	Noise float64
	// Accept, when set, is the acceptance by draft position, S(k) for
	// k = 1..len (see Profiles): it replaces Emitted, so that tokens per
	// cycle at width W is 1 + S(1) + … + S(W−1) whatever the width, as
	// with a real pair under greedy decoding. A prompt's profile marker
	// overrides it per request.
	Accept []float64
	// Batch, Spread and Drain are what several sequences, fresh engines
	// and a switch's drain cost (batch.go); zero values cost nothing.
	Batch  Batch
	Spread Spread
	Drain  Drain
	// ColdPrefillMS is what the first request on each slot of a fresh
	// engine stalls it: its prompt is not in the slot's cache yet, so
	// its whole prompt is evaluated in the batch (0: nothing).
	ColdPrefillMS float64
	// VariedLengths says the requests vary in length, as a server's do:
	// clients never run in step, and a classic step of several sequences
	// costs Batch.ClassicVaried more than under the one-length traffic
	// the committed H200 cells ran (a traffic's property, set after
	// ReplayCell.Model fits the recorded one-length rates).
	VariedLengths bool
	// WidthScale, when set, scales each width's cycle (key 1: classic) so
	// that a replay of a committed cell gives its recorded rates
	// (ReplayCell.Model): linear between keys, the edge value beyond.
	WidthScale map[int]float64
}

// Default returns the GB10 affine model with 1% noise.
func Default() Model {
	return Model{
		ClassicMS:     1000 / gb10ClassicTokPerSec,
		Verify:        maps.Clone(gb10SyncMS),
		Emitted:       maps.Clone(gb10Emitted),
		DraftMS:       gb10DraftMS,
		DraftTokenMS:  gb10DraftTokenMS,
		PromptTokenMS: 0.01,
		Noise:         0.01,
	}
}

// VerifyMS is the modelled verify cost of one round at width w.
func (c Model) VerifyMS(w int) float64 { return math.Max(0, interpolate(c.Verify, w)) }

// DraftRoundMS is the modelled drafting cost of one round at width w.
func (c Model) DraftRoundMS(w int) float64 { return c.DraftMS + c.DraftTokenMS*float64(w-1) }

// RoundMS is the whole modelled cost of one speculative round at width w.
func (c Model) RoundMS(w int) float64 { return c.DraftRoundMS(w) + c.VerifyMS(w) }

// EmittedPerVerify is the mean tokens one round emits at width w, in [1, w].
func (c Model) EmittedPerVerify(w int) float64 {
	if len(c.Accept) > 0 {
		return EmittedFromProfile(c.Accept, w)
	}
	return math.Min(float64(w), math.Max(1, interpolate(c.Emitted, w)))
}

// EmittedFromProfile is 1 + S(1) + … + S(w−1); positions past the profile's
// end repeat its last value (a flat tail).
func EmittedFromProfile(s []float64, w int) float64 {
	e := 1.0
	for k := 1; k < w; k++ {
		e += ProfileAt(s, k)
	}
	return e
}

// ProfileAt is S(k), the last value repeated past the end; 0 for k < 1 or
// an empty profile.
func ProfileAt(s []float64, k int) float64 {
	if k < 1 || len(s) == 0 {
		return 0
	}
	return s[min(k, len(s))-1]
}

// VerifyRowsMS is the modelled cost of one target forward over rows new
// tokens: one row is a classic step (unless the verify table names row 1),
// more rows read the verify table. Prompt evaluation of a few new tokens
// after a cached prefix costs the same (the probe relies on it).
func (c Model) VerifyRowsMS(rows int) float64 {
	if v, ok := c.Verify[rows]; ok {
		return v
	}
	if rows <= 1 {
		return c.ClassicMS
	}
	return c.VerifyMS(rows)
}

// Acceptance is accepted/proposed draft tokens at width w, as mlxcel reports
// it: (E−1)/(W−1).
func (c Model) Acceptance(w int) float64 {
	if w < 2 {
		return 0
	}
	return (c.EmittedPerVerify(w) - 1) / float64(w-1)
}

// ExpectedRate is the steady-state decode rate in tokens/s the model implies
// at width w, without noise; w < 2 means classic. Tests and the docs use it to
// state what the sim should show, not what any hardware does.
func (c Model) ExpectedRate(w int) float64 {
	if w < 2 {
		return 1000 / c.ClassicMS
	}
	return 1000 * c.EmittedPerVerify(w) / c.RoundMS(w)
}

// ExpectedRateFor is ExpectedRate for a request whose prompt carries a
// profile marker (see Profiles); without one it equals ExpectedRate.
func (c Model) ExpectedRateFor(prompt string, w int) float64 {
	if s := PromptProfile(prompt); s != nil {
		c.Accept = s
	}
	return c.ExpectedRate(w)
}

// interpolate reads table at w: exact, linear between neighbours, or the
// nearest segment's slope extended outside the table.
func interpolate(table map[int]float64, w int) float64 {
	if v, ok := table[w]; ok {
		return v
	}
	keys := slices.Sorted(maps.Keys(table))
	switch len(keys) {
	case 0:
		return 0
	case 1:
		return table[keys[0]]
	}
	i, _ := slices.BinarySearch(keys, w) // keys[i-1] < w < keys[i]
	i = max(1, min(i, len(keys)-1))
	lo, hi := keys[i-1], keys[i]
	slope := (table[hi] - table[lo]) / float64(hi-lo)
	return table[lo] + slope*float64(w-lo)
}

// AcceptProb is the per-position acceptance p (each draft token accepted
// with probability p given the ones before it were) for which the mean
// emitted per round, 1 + p + p² + … + p^(w−1), equals mean. Drawing rounds
// this way keeps emission within [1, w] and gives earlier positions more
// acceptances, as real drafters do.
func AcceptProb(w int, mean float64) float64 {
	target := mean - 1
	if w < 2 || target <= 0 {
		return 0
	}
	if target >= float64(w-1) {
		return 1
	}
	lo, hi := 0.0, 1.0
	for range 60 {
		p := (lo + hi) / 2
		sum, term := 0.0, 1.0
		for range w - 1 {
			term *= p
			sum += term
		}
		if sum < target {
			lo = p
		} else {
			hi = p
		}
	}
	return (lo + hi) / 2
}
