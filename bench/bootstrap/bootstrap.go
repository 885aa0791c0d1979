// Package bootstrap states how sure a bench record is that one arm's median
// throughput beats another's. A record has few samples per arm (5 rounds,
// a few prompts), so a bare median ratio hides how much of it is noise: two
// identical configurations measured on an H200 differed by up to 6.5% by
// median. The bootstrap resamples the units the samples were drawn in, with
// a fixed seed so that a record re-analysed anywhere gives the same figures.
//
// Units: prompts are drawn with replacement, then, within each drawn prompt,
// rounds with replacement; both arms take their samples from the same drawn
// (prompt, round) units, so the comparison is paired: drift that moves a
// whole round moves both arms alike. Classic's two samples per round (the
// first and last brackets) both belong to their round's unit.
package bootstrap

import (
	"math/rand/v2"
	"slices"

	"github.com/speclaunch/speclaunch/record"
)

// Defaults of the method, stated in every record that uses them.
const (
	DefaultResamples = 4000
	DefaultSeed      = 1
	// Level is the share of resamples an entry needs its width to win
	// against the engine's default (docs/policy.md).
	Level = 0.95
)

// Sample is one measured value and the unit it was drawn in.
type Sample struct {
	Prompt string
	Round  int
	Value  float64
}

// Result compares arm a with arm b.
type Result struct {
	// Ratio is median(a) / median(b) over the samples as measured.
	Ratio float64
	// Lo and Hi bound the central 95% of the resampled ratios.
	Lo, Hi float64
	// PBetter is the share of resamples in which a's median is above b's.
	PBetter float64
	// Resamples is how many resamples had samples of both arms.
	Resamples int
}

type unit struct {
	prompt string
	round  int
}

// Compare bootstraps median(a)/median(b). ok is false when either side has
// fewer than two samples, or no unit holds samples of both arms.
func Compare(a, b []Sample, resamples int, seed uint64) (Result, bool) {
	if len(a) < 2 || len(b) < 2 || resamples < 1 {
		return Result{}, false
	}
	ma, mb := Median(values(a)), Median(values(b))
	if mb <= 0 {
		return Result{}, false
	}
	// index both arms by unit; prompts and rounds in first-seen order so
	// that the draw sequence depends on the data only
	byUnit := map[unit][2][]float64{}
	var prompts []string
	rounds := map[string][]int{}
	add := func(side int, xs []Sample) {
		for _, s := range xs {
			u := unit{s.Prompt, s.Round}
			v, seen := byUnit[u]
			if !seen {
				if _, ok := rounds[s.Prompt]; !ok {
					prompts = append(prompts, s.Prompt)
				}
				rounds[s.Prompt] = append(rounds[s.Prompt], s.Round)
			}
			v[side] = append(v[side], s.Value)
			byUnit[u] = v
		}
	}
	add(0, a)
	add(1, b)
	shared := false
	for _, v := range byUnit {
		if len(v[0]) > 0 && len(v[1]) > 0 {
			shared = true
			break
		}
	}
	if !shared {
		return Result{}, false
	}
	for _, p := range prompts {
		slices.Sort(rounds[p])
	}

	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	ratios := make([]float64, 0, resamples)
	wins := 0
	var xa, xb []float64
	for i := 0; i < resamples; i++ {
		xa, xb = xa[:0], xb[:0]
		for range prompts {
			p := prompts[r.IntN(len(prompts))]
			rs := rounds[p]
			for range rs {
				v := byUnit[unit{p, rs[r.IntN(len(rs))]}]
				xa = append(xa, v[0]...)
				xb = append(xb, v[1]...)
			}
		}
		if len(xa) == 0 || len(xb) == 0 {
			continue
		}
		da, db := Median(xa), Median(xb)
		if db <= 0 {
			continue
		}
		ratios = append(ratios, da/db)
		if da > db {
			wins++
		}
	}
	if len(ratios) == 0 {
		return Result{}, false
	}
	slices.Sort(ratios)
	return Result{
		Ratio:     ma / mb,
		Lo:        quantile(ratios, 0.025),
		Hi:        quantile(ratios, 0.975),
		PBetter:   float64(wins) / float64(len(ratios)),
		Resamples: len(ratios),
	}, true
}

func values(xs []Sample) []float64 {
	out := make([]float64, len(xs))
	for i, s := range xs {
		out[i] = s.Value
	}
	return out
}

// Median of xs (the mean of the middle two for an even count); xs is not
// modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// quantile of sorted xs by the nearest-rank method.
func quantile(sorted []float64, q float64) float64 {
	i := int(q * float64(len(sorted)))
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

// Units names the resampling units in records.
const Units = "prompts, then rounds within each prompt, with replacement; paired: both arms take the drawn units' samples"

// Method is the record's statement of the defaults.
func Method() *record.BootstrapMethod {
	return &record.BootstrapMethod{Resamples: DefaultResamples, Seed: DefaultSeed, Units: Units}
}

// ArmSamples are an arm's measured, successful requests as samples of its
// end-to-end tokens/s.
func ArmSamples(a *record.Arm) []Sample {
	var out []Sample
	for _, r := range a.Runs {
		if r.Phase == "measured" && r.Error == "" {
			out = append(out, Sample{Prompt: r.Prompt, Round: r.Round, Value: r.TokPerS})
		}
	}
	return out
}

// CompareArms bootstraps arm a's median against arm b's with the defaults;
// against names b in the result.
func CompareArms(a, b *record.Arm, against string) (*record.Comparison, bool) {
	r, ok := Compare(ArmSamples(a), ArmSamples(b), DefaultResamples, DefaultSeed)
	if !ok {
		return nil, false
	}
	return &record.Comparison{Against: against, Ratio: r.Ratio, Lo: r.Lo, Hi: r.Hi, PBetter: r.PBetter, Resamples: r.Resamples}, true
}
