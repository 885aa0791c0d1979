package sim

import (
	"context"
	"math"
	"testing"
)

// The default model must show what the GB10 record showed: widths 2-4 beat
// classic by about 1.17-1.20x, 5 is level, 16 loses at about 0.72x.
func TestDefaultCostModelOrdering(t *testing.T) {
	c := DefaultCostModel()
	classic := c.ExpectedRate(0)
	if math.Abs(classic-58.23) > 0.01 {
		t.Errorf("classic %.2f tok/s, want 58.23", classic)
	}
	for _, w := range []int{2, 3, 4} {
		r := c.ExpectedRate(w) / classic
		if r < 1.12 || r > 1.25 {
			t.Errorf("width %d: %.3fx classic, want about 1.17-1.20x", w, r)
		}
	}
	if r := c.ExpectedRate(5) / classic; math.Abs(r-1) > 0.03 {
		t.Errorf("width 5: %.3fx classic, want about 1.00x", r)
	}
	if r := c.ExpectedRate(16) / classic; r < 0.68 || r > 0.76 {
		t.Errorf("width 16: %.3fx classic, want about 0.72x", r)
	}
	if !(c.ExpectedRate(3) > c.ExpectedRate(16)) || !(c.ExpectedRate(4) > classic) || !(classic > c.ExpectedRate(16)) {
		t.Error("ordering 2-4 > classic > 16 broken")
	}
}

func TestInterpolation(t *testing.T) {
	c := DefaultCostModel()
	cases := []struct {
		w             int
		verify, emitd float64
	}{
		{4, 30.0, 2.58},
		{12, (56.4 + 69.0) / 2, (3.16 + 3.32) / 2}, // between 8 and 16
		{20, 69.0 + 4*(69.0-56.4)/8, 3.32 + 4*(3.32-3.16)/8},
	}
	for _, cs := range cases {
		if v := c.VerifyMS(cs.w); math.Abs(v-cs.verify) > 1e-9 {
			t.Errorf("VerifyMS(%d) = %v, want %v", cs.w, v, cs.verify)
		}
		if e := c.EmittedPerVerify(cs.w); math.Abs(e-cs.emitd) > 1e-9 {
			t.Errorf("EmittedPerVerify(%d) = %v, want %v", cs.w, e, cs.emitd)
		}
	}
	// Never more than W per round, even when a table says so.
	c.Emitted = map[int]float64{2: 5}
	if e := c.EmittedPerVerify(2); e != 2 {
		t.Errorf("emitted clamps to W: got %v", e)
	}
	if a := DefaultCostModel().Acceptance(2); math.Abs(a-0.75) > 1e-9 {
		t.Errorf("acceptance(2) = %v", a)
	}
}

func TestAcceptProbSolvesMean(t *testing.T) {
	for _, w := range []int{2, 3, 4, 8, 16, 32} {
		mean := DefaultCostModel().EmittedPerVerify(w)
		p := acceptProb(w, mean)
		got, term := 1.0, 1.0
		for range w - 1 {
			term *= p
			got += term
		}
		if math.Abs(got-mean) > 1e-9 {
			t.Errorf("w=%d: p=%v gives mean %v, want %v", w, p, got, mean)
		}
	}
	if acceptProb(4, 1) != 0 || acceptProb(4, 4) != 1 {
		t.Error("edge means")
	}
}

// Over a long request the drawn rounds must average the table's
// emitted-per-verify, and the clock must advance by the modelled cost.
func TestDecodeMatchesModel(t *testing.T) {
	c := DefaultCostModel()
	c.Noise = 0
	for _, w := range []int{2, 4, 16} {
		clk := newFakeClock()
		n := 20001
		res, err := decode(context.Background(), clk, plan{width: w, cost: c, seed: 1, slow: 1}, "prompt", n, func([]token) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		got := float64(n-1) / float64(res.Rounds)
		if want := c.EmittedPerVerify(w); math.Abs(got-want)/want > 0.03 {
			t.Errorf("w=%d: emitted/verify %.3f, want %.3f", w, got, want)
		}
		if wantMS := float64(res.Rounds) * c.RoundMS(w); math.Abs(res.PredictedMS-wantMS) > 1 {
			t.Errorf("w=%d: predicted_ms %.1f, want %.1f", w, res.PredictedMS, wantMS)
		}
	}
}

// A bench request is short (200 tokens): each prompt's rounds must still
// average close to the table, or a width's rate would depend on the prompt
// more than on the width.
func TestShortRequestsStayNearTable(t *testing.T) {
	c := DefaultCostModel()
	c.Noise = 0
	for _, w := range []int{2, 4, 8, 16} {
		want := c.EmittedPerVerify(w)
		for i := range 50 {
			res, err := decode(context.Background(), newFakeClock(), plan{width: w, cost: c, seed: int64(i), slow: 1},
				"prompt "+string(rune('a'+i%26))+string(rune('a'+i/26)), 200, func([]token) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if got := 199 / float64(res.Rounds); math.Abs(got-want)/want > 0.12 {
				t.Errorf("w=%d prompt %d: emitted/verify %.3f, table %.3f", w, i, got, want)
			}
			if res.PerPos[0] < res.PerPos[len(res.PerPos)-1] {
				t.Errorf("w=%d: later positions accepted more often than the first: %v", w, res.PerPos)
			}
			sum := 0
			for j, n := range res.PerPos {
				sum += n
				if j > 0 && n > res.PerPos[j-1] {
					t.Errorf("w=%d: per-position acceptances not non-increasing: %v", w, res.PerPos)
					break
				}
			}
			if sum != res.Accepted || res.Proposed != res.Rounds*(w-1) || res.Accepted != 199-res.Rounds {
				t.Errorf("w=%d: counters %+v", w, res)
			}
		}
	}
}
