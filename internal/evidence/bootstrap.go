package evidence

import (
	"context"
	"math/rand/v2"
	"slices"

	"github.com/speclaunch/speclaunch/internal/record"
)

// The bootstrap states how sure a record is that one arm's median
// throughput beats another's. A record has few samples per arm (5 rounds,
// a few prompts), so a bare median ratio hides how much of it is noise: two
// identical configurations measured on an H200 differed by up to 6.5% by
// median. It resamples the units the samples were drawn in, with a fixed
// seed so that a record re-analysed anywhere gives the same figures.
//
// Units: prompts are drawn with replacement, then, within each drawn
// prompt, rounds with replacement; both arms take their samples from the
// same drawn (prompt, round) units, so the comparison is paired: drift that
// moves a whole round moves both arms alike. Classic's two samples per
// round (the first and last brackets) both belong to their round's unit.

// Defaults of the method, stated in every record that uses them.
const (
	DefaultResamples = 4000
	DefaultSeed      = 1
)

// Units names the resampling units in records.
const Units = "prompts, then rounds within each prompt, with replacement; paired: both arms take the drawn units' samples"

// Method is the record's statement of the defaults.
func Method() *record.BootstrapMethod {
	return &record.BootstrapMethod{Resamples: DefaultResamples, Seed: DefaultSeed, Units: Units}
}

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

// unitSamples are one (prompt, round) unit's values, per arm.
type unitSamples struct{ a, b []float64 }

// units indexes both arms' samples by unit: prompts and their rounds in
// first-seen order (rounds ascending within a prompt), so that the draw
// sequence depends on the data only.
type units struct {
	byPrompt [][]unitSamples
	shared   bool // some unit holds samples of both arms
}

func index(a, b []Sample) units {
	type key struct {
		prompt string
		round  int
	}
	pos := map[key][2]int{}
	promptAt := map[string]int{}
	var us units
	var rounds [][]int
	add := func(side int, xs []Sample) {
		for _, s := range xs {
			k := key{s.Prompt, s.Round}
			p, seen := pos[k]
			if !seen {
				pi, ok := promptAt[s.Prompt]
				if !ok {
					pi = len(us.byPrompt)
					promptAt[s.Prompt] = pi
					us.byPrompt = append(us.byPrompt, nil)
					rounds = append(rounds, nil)
				}
				p = [2]int{pi, len(us.byPrompt[pi])}
				pos[k] = p
				us.byPrompt[pi] = append(us.byPrompt[pi], unitSamples{})
				rounds[pi] = append(rounds[pi], s.Round)
			}
			u := &us.byPrompt[p[0]][p[1]]
			if side == 0 {
				u.a = append(u.a, s.Value)
			} else {
				u.b = append(u.b, s.Value)
			}
			us.shared = us.shared || len(u.a) > 0 && len(u.b) > 0
		}
	}
	add(0, a)
	add(1, b)
	for pi, ps := range us.byPrompt {
		order := make([]int, len(ps))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(x, y int) int { return rounds[pi][x] - rounds[pi][y] })
		sorted := make([]unitSamples, len(ps))
		for i, o := range order {
			sorted[i] = ps[o]
		}
		us.byPrompt[pi] = sorted
	}
	return us
}

// checkEvery is how many resamples run between two looks at the context.
const checkEvery = 64

// Compare bootstraps median(a)/median(b). ok is false when either side has
// fewer than two samples, or no unit holds samples of both arms. Each
// resample costs time linear in the samples drawn (the medians are taken
// by selection); the context is checked every few resamples, and its error
// is returned when it ends.
func Compare(ctx context.Context, a, b []Sample, resamples int, seed uint64) (Result, bool, error) {
	if len(a) < 2 || len(b) < 2 || resamples < 1 {
		return Result{}, false, nil
	}
	ma, mb := Median(values(a)), Median(values(b))
	if mb <= 0 {
		return Result{}, false, nil
	}
	us := index(a, b)
	if !us.shared {
		return Result{}, false, nil
	}
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	ratios := make([]float64, 0, resamples)
	wins := 0
	xa := make([]float64, 0, len(a))
	xb := make([]float64, 0, len(b))
	for i := 0; i < resamples; i++ {
		if i%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return Result{}, false, err
			}
		}
		xa, xb = xa[:0], xb[:0]
		for range us.byPrompt {
			rs := us.byPrompt[r.IntN(len(us.byPrompt))]
			for range rs {
				u := &rs[r.IntN(len(rs))]
				xa = append(xa, u.a...)
				xb = append(xb, u.b...)
			}
		}
		if len(xa) == 0 || len(xb) == 0 {
			continue
		}
		da, db := selectMedian(xa), selectMedian(xb)
		if db <= 0 {
			continue
		}
		ratios = append(ratios, da/db)
		if da > db {
			wins++
		}
	}
	if len(ratios) == 0 {
		return Result{}, false, nil
	}
	slices.Sort(ratios)
	return Result{
		Ratio:     ma / mb,
		Lo:        quantile(ratios, 0.025),
		Hi:        quantile(ratios, 0.975),
		PBetter:   float64(wins) / float64(len(ratios)),
		Resamples: len(ratios),
	}, true, nil
}

func values(xs []Sample) []float64 {
	out := make([]float64, len(xs))
	for i, s := range xs {
		out[i] = s.Value
	}
	return out
}

// quantile of sorted xs by the nearest-rank method: the value at index
// floor(q*n), the last one when that is past the end.
func quantile(sorted []float64, q float64) float64 {
	i := int(q * float64(len(sorted)))
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

// ArmSamples are an arm's measured, successful requests as samples of its
// end-to-end tokens/s.
func ArmSamples(a *record.Arm) []Sample {
	var out []Sample
	for j := range a.Runs {
		if r := &a.Runs[j]; r.Measured() {
			out = append(out, Sample{Prompt: r.Prompt, Round: r.Round, Value: r.TokPerS})
		}
	}
	return out
}

// CompareArms bootstraps arm a's median against arm b's with the defaults;
// against names b in the result. nil when the arms cannot be compared (too
// few raw runs, or none in a shared unit).
func CompareArms(ctx context.Context, a, b *record.Arm, against string) (*record.Comparison, error) {
	r, ok, err := Compare(ctx, ArmSamples(a), ArmSamples(b), DefaultResamples, DefaultSeed)
	if err != nil || !ok {
		return nil, err
	}
	return &record.Comparison{Against: against, Ratio: r.Ratio, Lo: r.Lo, Hi: r.Hi, PBetter: r.PBetter, Resamples: r.Resamples}, nil
}
