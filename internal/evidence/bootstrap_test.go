package evidence

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

func rounds(vals ...float64) []Sample {
	out := make([]Sample, len(vals))
	for i, v := range vals {
		out[i] = Sample{Round: i + 1, Value: v}
	}
	return out
}

func TestCompareCases(t *testing.T) {
	for _, tc := range []struct {
		name       string
		a, b       []Sample
		ok         bool
		pLo, pHi   float64
		ratio      float64
		loAboveOne bool
	}{
		{name: "clearly faster", a: rounds(110, 111, 112, 113, 114), b: rounds(100, 101, 102, 103, 104), ok: true, pLo: 1, pHi: 1, ratio: 112.0 / 102, loAboveOne: true},
		{name: "identical", a: rounds(100, 101, 102, 103, 104), b: rounds(100, 101, 102, 103, 104), ok: true, pLo: 0, pHi: 0, ratio: 1},
		// the H200 Q8_0 pair-1234 record: width 6 against the default
		{name: "h200 q8_0 width 6 vs default", a: rounds(419.07, 445.80, 463.39, 457.59, 430.70), b: rounds(411.57, 451.02, 437.48, 427.64, 428.81),
			ok: true, pLo: 0.90, pHi: 0.95, ratio: 445.80 / 428.81},
		{name: "one sample", a: rounds(1), b: rounds(1, 2), ok: false},
		{name: "no shared unit", a: []Sample{{Prompt: "x", Round: 1, Value: 2}, {Prompt: "x", Round: 2, Value: 2}},
			b: []Sample{{Prompt: "y", Round: 1, Value: 1}, {Prompt: "y", Round: 2, Value: 1}}, ok: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := compare(tc.a, tc.b, DefaultResamples, DefaultSeed)
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if r.PBetter < tc.pLo || r.PBetter > tc.pHi {
				t.Errorf("P(better) %.3f, want %.2f-%.2f", r.PBetter, tc.pLo, tc.pHi)
			}
			if d := r.Ratio - tc.ratio; d > 1e-9 || d < -1e-9 {
				t.Errorf("ratio %.6f, want %.6f", r.Ratio, tc.ratio)
			}
			if tc.loAboveOne != (r.Lo > 1) || r.Lo > r.Hi {
				t.Errorf("interval %.3f-%.3f", r.Lo, r.Hi)
			}
			if r.Resamples != DefaultResamples {
				t.Errorf("resamples %d", r.Resamples)
			}
		})
	}
}

// The bootstrap is paired by round: drift that moves a whole round moves
// both arms, so an arm 2% faster in every round wins although its range
// overlaps the other's by far.
func TestComparePairedByRound(t *testing.T) {
	drift := []float64{100, 120, 90, 130, 110}
	var a, b []Sample
	for i, d := range drift {
		a = append(a, Sample{Round: i + 1, Value: d * 1.02})
		b = append(b, Sample{Round: i + 1, Value: d})
	}
	r, ok := compare(a, b, DefaultResamples, DefaultSeed)
	if !ok || r.PBetter != 1 {
		t.Errorf("paired comparison: P %.3f ok %v", r.PBetter, ok)
	}
}

// Prompts are units too: an arm that wins on one prompt and loses on the
// other is not sure to win.
func TestCompareOverPrompts(t *testing.T) {
	var a, b []Sample
	for r := 1; r <= 5; r++ {
		a = append(a, Sample{"code", r, 120}, Sample{"prose", r, 80})
		b = append(b, Sample{"code", r, 100}, Sample{"prose", r, 100})
	}
	res, ok := compare(a, b, DefaultResamples, DefaultSeed)
	if !ok || res.PBetter > 0.5 || res.PBetter == 0 {
		t.Errorf("mixed prompts: P %.3f (want some but not most resamples)", res.PBetter)
	}
}

func TestCompareIsDeterministic(t *testing.T) {
	a, b := rounds(5, 7, 6, 8, 5.5), rounds(6, 6.5, 5.8, 7, 6.1)
	r1, _ := compare(a, b, 1000, 7)
	r2, _ := compare(a, b, 1000, 7)
	r3, _ := compare(a, b, 1000, 8)
	if r1 != r2 {
		t.Errorf("same seed, different results: %+v %+v", r1, r2)
	}
	if r1 == r3 {
		t.Log("a different seed gave the same figures (possible, but unlikely)")
	}
}

func BenchmarkCompare(b *testing.B) {
	x, y := rounds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), rounds(2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
	for b.Loop() {
		compare(x, y, DefaultResamples, DefaultSeed)
	}
}

// compare is Compare with a live context.
func compare(a, b []Sample, resamples int, seed uint64) (Result, bool) {
	r, ok, err := Compare(context.Background(), a, b, resamples, seed)
	if err != nil {
		panic(err)
	}
	return r, ok
}

// The interval's ends are pinned to the nearest-rank quantiles: index
// floor(0.025 n) and floor(0.975 n) of the sorted resampled ratios.
func TestQuantile(t *testing.T) {
	var xs []float64
	for i := 1; i <= 4000; i++ {
		xs = append(xs, float64(i))
	}
	for _, tc := range []struct {
		xs   []float64
		q    float64
		want float64
	}{
		{xs, 0.025, 101}, // index 100
		{xs, 0.975, 3901},
		{xs, 0, 1},
		{xs, 1, 4000}, // past the end: the last
		{[]float64{1, 2, 3}, 0.975, 3},
		{[]float64{1, 2, 3}, 0.025, 1},
		{[]float64{7}, 0.5, 7},
	} {
		if got := quantile(tc.xs, tc.q); got != tc.want {
			t.Errorf("quantile(n=%d, %v) = %v, want %v", len(tc.xs), tc.q, got, tc.want)
		}
	}
}

// A bootstrap whose every resample is the same shows its quantiles at the
// one ratio, and a record's figures are pinned: the H200 Q8_0 pair-1234
// width 6 against the default gives these exact figures with the record
// method's seed (they are stored in the committed record).
func TestComparePinnedFigures(t *testing.T) {
	a := rounds(419.07, 445.80, 463.39, 457.59, 430.70)
	b := rounds(411.57, 451.02, 437.48, 427.64, 428.81)
	r, ok := compare(a, b, DefaultResamples, DefaultSeed)
	if !ok {
		t.Fatal("not compared")
	}
	// 3751 of 4000 resamples; the interval is sorted[100] and sorted[3900]
	want := Result{Ratio: 445.80 / 428.81, Lo: 0.9884262338698949, Hi: 1.070035543915443, PBetter: 0.93775, Resamples: 4000}
	for _, f := range []struct {
		name      string
		got, want float64
	}{{"ratio", r.Ratio, want.Ratio}, {"lo", r.Lo, want.Lo}, {"hi", r.Hi, want.Hi}, {"p", r.PBetter, want.PBetter}} {
		if d := f.got - f.want; d > 1e-12 || d < -1e-12 {
			t.Errorf("%s %.16g, want %.16g", f.name, f.got, f.want)
		}
	}
	if r.Resamples != want.Resamples {
		t.Errorf("resamples %d", r.Resamples)
	}
}

// Selection gives the sorted median for every length, duplicates included.
func TestSelectMedian(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 1; n <= 60; n++ {
		for range 20 {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = float64(rng.IntN(8)) // many ties
			}
			s := slices.Sorted(slices.Values(xs))
			if got, want := selectMedian(slices.Clone(xs)), sortedMedian(s); got != want {
				t.Fatalf("selectMedian(%v) = %v, want %v", xs, got, want)
			}
		}
	}
}

// cancelAfter is a context whose Err turns to Canceled after n looks: it
// cancels the bootstrap mid-way deterministically, with no timer.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// A context cancelled mid-bootstrap stops it at its next look: the error
// is the context's, after fewer looks than a whole run takes.
func TestCompareCancelled(t *testing.T) {
	a, b := rounds(1, 2, 3, 4, 5, 6, 7, 8), rounds(2, 3, 4, 5, 6, 7, 8, 9)
	ctx := &cancelAfter{Context: context.Background(), n: 3}
	_, ok, err := Compare(ctx, a, b, DefaultResamples, DefaultSeed)
	if !errors.Is(err, context.Canceled) || ok {
		t.Fatalf("err %v ok %v, want context.Canceled", err, ok)
	}
	if looks := 3 - ctx.n; looks != 4 || DefaultResamples/checkEvery < 10 {
		t.Errorf("stopped after %d looks at the context (a whole run looks %d times)", looks, DefaultResamples/checkEvery)
	}
}

// BenchmarkCompareLarge is the bootstrap on the largest arm a record may
// hold (record.MaxRunsPerArm runs in each of two arms, 10 prompts).
func BenchmarkCompareLarge(b *testing.B) {
	var x, y []Sample
	for i := range 1000 {
		p := string(rune('a' + i%10))
		x = append(x, Sample{Prompt: p, Round: i / 10, Value: 100 + float64(i%17)})
		y = append(y, Sample{Prompt: p, Round: i / 10, Value: 101 + float64(i%13)})
	}
	for b.Loop() {
		compare(x, y, DefaultResamples, DefaultSeed)
	}
}
