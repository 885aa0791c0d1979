package simcost

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestCycleMS(t *testing.T) {
	m := Model{ClassicMS: 3, Verify: map[int]float64{1: 3.2, 2: 3.5, 4: 4, 8: 5, 16: 6},
		DraftMS: 0.3, DraftTokenMS: 0.5, Batch: Batch{SeqMS: 0.4, SeqTokenMS: 0.2, ClassicLive: 1.5}}
	cases := []struct {
		name string
		w, n int
		want float64
	}{
		{"classic alone is one classic step", 1, 1, 3},
		{"n below 1 counts as one", 0, 0, 3},
		{"classic of four rows, live", 1, 4, 4 * 1.5},
		{"width 4 alone: drafting and verify of 4 rows", 4, 1, 0.3 + 1.5 + 4},
		{"width 2 of two: 4 rows and one more sequence", 2, 2, 0.3 + 0.5 + 4 + (0.4 + 0.2)},
		{"width 4 of four: 16 rows and three more sequences", 4, 4, 0.3 + 1.5 + 6 + 3*(0.4+0.6)},
	}
	for _, c := range cases {
		if got := m.CycleMS(c.w, c.n); !near(got, c.want) {
			t.Errorf("%s: CycleMS(%d, %d) = %v, want %v", c.name, c.w, c.n, got, c.want)
		}
	}
	m.Batch = Batch{}
	if got := m.CycleMS(1, 4); !near(got, 4) {
		t.Errorf("no Batch: classic of four rows is the probe's 4 rows, got %v", got)
	}
	if got := m.CycleMS(4, 4); !near(got, 0.3+1.5+6) {
		t.Errorf("no Batch: width 4 of four is the rows alone, got %v", got)
	}
}

func TestPickupSpreadShared(t *testing.T) {
	m := Model{Batch: Batch{PickupClassic: 3, PickupSpec: 6}, Spread: Spread{Single: 0.01, MultiClassic: 0.02, MultiSpec: 0.05},
		Drain: Drain{MS: 2000, Contention: 0.35}}
	for _, c := range []struct {
		w, n          int
		pickup, sigma float64
	}{{1, 1, 0, 0.01}, {4, 1, 0, 0.01}, {1, 4, 3, 0.02}, {4, 4, 6, 0.05}, {2, 2, 6, 0.05}} {
		if got := m.PickupRounds(c.w, c.n); got != c.pickup {
			t.Errorf("PickupRounds(%d, %d) = %v, want %v", c.w, c.n, got, c.pickup)
		}
		if got := m.SpreadSigma(c.w, c.n); got != c.sigma {
			t.Errorf("SpreadSigma(%d, %d) = %v, want %v", c.w, c.n, got, c.sigma)
		}
	}
	if got := m.EngineFactor(2, 4, 4); !near(got, math.Exp(0.1)) {
		t.Errorf("EngineFactor(z=2) = %v, want exp(0.1)", got)
	}
	if got := (Model{}).EngineFactor(2, 4, 4); got != 1 {
		t.Errorf("no spread: EngineFactor = %v, want 1", got)
	}
	for _, c := range []struct{ ms, want float64 }{{-1, 1}, {0, 1.35}, {1999, 1.35}, {2000, 1}, {1e6, 1}} {
		if got := m.SharedFactor(c.ms); !near(got, c.want) {
			t.Errorf("SharedFactor(%v) = %v, want %v", c.ms, got, c.want)
		}
	}
	if EngineDraw(7) != EngineDraw(7) || EngineDraw(7) == EngineDraw(8) {
		t.Error("EngineDraw: one seed, one engine; another seed, another")
	}
}

// Classic with several sequences costs ClassicVaried more when requests
// vary in length, and ClassicSwitched more on an engine a switch started
// under one-length requests; neither touches one sequence or a
// speculative width, nor each other (the H100 run of 2026-12-06f).
func TestClassicVariedAndSwitched(t *testing.T) {
	one := Model{ClassicMS: 3, Verify: map[int]float64{1: 3, 2: 3.2, 3: 3.5, 4: 4, 8: 5, 16: 6}, DraftMS: 0.3, DraftTokenMS: 0.4,
		Batch: Batch{ClassicLive: 1.05, ClassicVaried: 1.24, ClassicSwitched: 1.053, SwitchedMS: 20000}}
	varied := one
	varied.VariedLengths = true
	for _, c := range []struct {
		w, n              int
		ratio, switchedOn float64 // varied over one length; SwitchedFactor under one length, 1 s in
	}{
		{1, 4, 1.24, 1.053},
		{1, 2, 1 + 0.24/3, 1 + 0.053/3}, // measured at four, interpolated
		{1, 1, 1, 1},
		{4, 4, 1, 1},
		{2, 2, 1, 1},
	} {
		if got := varied.CycleMS(c.w, c.n) / one.CycleMS(c.w, c.n); !near(got, c.ratio) {
			t.Errorf("w %d n %d: varied over one length %v, want %v", c.w, c.n, got, c.ratio)
		}
		if got := one.SwitchedFactor(c.w, c.n, 1000); !near(got, c.switchedOn) {
			t.Errorf("w %d n %d: SwitchedFactor %v, want %v", c.w, c.n, got, c.switchedOn)
		}
		if got := varied.SwitchedFactor(c.w, c.n, 1000); got != 1 {
			t.Errorf("w %d n %d: SwitchedFactor under varied lengths %v, want 1 (ClassicVaried holds it)", c.w, c.n, got)
		}
	}
	// Past the span measured, nothing.
	if got := one.SwitchedFactor(1, 4, 20000); got != 1 {
		t.Errorf("SwitchedFactor at 20 s: %v, want 1", got)
	}
}

// RateAt: a request of R tokens takes R/E cycles and its pickup rounds.
func TestRateAt(t *testing.T) {
	m := Model{ClassicMS: 4, Verify: map[int]float64{1: 4, 2: 5, 4: 8}, Accept: []float64{0.5, 0.25, 0.125}, Batch: Batch{PickupClassic: 2, PickupSpec: 4}}
	if got, want := m.RateAt(1, 1, 100), 250.0; !near(got, want) {
		t.Errorf("classic alone: %v, want %v", got, want)
	}
	// Width 2, 2 sequences: E = 1.5, cycle = verify of 4 rows = 8 ms;
	// 100/1.5 + 0.5 (the cut last cycle) + 4 (pickup) cycles a request.
	want := 2 * 100 * 1000 / ((100/1.5 + 0.5 + 4) * 8)
	if got := m.RateAt(2, 2, 100); !near(got, want) {
		t.Errorf("width 2 of two: %v, want %v", got, want)
	}
}

// The demo pairing has the shape of the committed H200 cells: a mid-range
// width best with one client (5-8 in the recent cells, issue 29), classic
// or 2 with four, and classic far behind with one.
func TestDemoLoadShape(t *testing.T) {
	m := DemoLoad()
	b1, r1 := m.BestAt(1, 128, 17)
	if b1 < 4 || b1 > 8 {
		t.Errorf("one client: best width %d, want mid-range (4-8)", b1)
	}
	if c := m.RateAt(1, 1, 128); r1 < 1.3*c {
		t.Errorf("one client: best %.0f tok/s, classic %.0f: want speculation well ahead", r1, c)
	}
	b4, r4 := m.BestAt(4, 128, 17)
	if b4 > 2 {
		t.Errorf("four clients: best width %d, want classic or 2", b4)
	}
	for w := 3; w <= 17; w++ {
		if r := m.RateAt(w, 4, 128); r > 0.97*r4 {
			t.Errorf("four clients: width %d at %.0f tok/s is within 3%% of the best (%d, %.0f)", w, r, b4, r4)
		}
	}
	if m.RateAt(b1, 4, 128) >= r4 || m.RateAt(b4, 1, 128) >= r1 {
		t.Error("the best width at one load must lose at the other")
	}
}

func TestLookupPreset(t *testing.T) {
	if _, err := LookupPreset("demo-load"); err != nil {
		t.Fatal(err)
	}
	if _, err := LookupPreset("nope"); err == nil {
		t.Error("an unknown preset must be refused")
	}
}
