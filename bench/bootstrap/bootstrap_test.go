package bootstrap

import (
	"testing"
)

func rounds(vals ...float64) []Sample {
	out := make([]Sample, len(vals))
	for i, v := range vals {
		out[i] = Sample{Round: i + 1, Value: v}
	}
	return out
}

func TestCompare(t *testing.T) {
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
			r, ok := Compare(tc.a, tc.b, DefaultResamples, DefaultSeed)
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
	r, ok := Compare(a, b, DefaultResamples, DefaultSeed)
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
	res, ok := Compare(a, b, DefaultResamples, DefaultSeed)
	if !ok || res.PBetter > 0.5 || res.PBetter == 0 {
		t.Errorf("mixed prompts: P %.3f (want some but not most resamples)", res.PBetter)
	}
}

func TestCompareIsDeterministic(t *testing.T) {
	a, b := rounds(5, 7, 6, 8, 5.5), rounds(6, 6.5, 5.8, 7, 6.1)
	r1, _ := Compare(a, b, 1000, 7)
	r2, _ := Compare(a, b, 1000, 7)
	r3, _ := Compare(a, b, 1000, 8)
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
		Compare(x, y, DefaultResamples, DefaultSeed)
	}
}
