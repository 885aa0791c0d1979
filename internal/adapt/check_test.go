package adapt

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"
)

// judgeSwitch: worse beyond the noise is undone, within the floor kept
// once a pool's worth of cycles covers the traffic's mix, in between
// measured on until the cap, where the point estimate decides.
func TestJudgeSwitch(t *testing.T) {
	// from: 2.5 tokens a cycle at 10 ms, known to ±0.5%.
	from := rateObs{T: 2.5, SE: 0.0125 / DefaultZ, MS: 10, Cycles: 4000}
	for _, c := range []struct {
		name string
		to   rateObs
		want int
	}{
		{"clearly worse", rateObs{T: 2.5, SE: 0.01, MS: 11, Cycles: 512}, checkUndo},  // −9%
		{"clearly better", rateObs{T: 2.5, SE: 0.01, MS: 9, Cycles: 1024}, checkKeep}, // +11%
		{"equal, tight", rateObs{T: 2.5, SE: 0.002, MS: 10, Cycles: 1024}, checkKeep}, // 0 ± 0.4%
		{"better, but too little of the mix", rateObs{T: 2.5, SE: 0.01, MS: 9, Cycles: 512}, checkWait},
		{"slightly worse, loose", rateObs{T: 2.47, SE: 0.04, MS: 10, Cycles: 512}, checkWait},
		{"slightly worse at the cap", rateObs{T: 2.47, SE: 0.04, MS: 10, Cycles: 2048}, checkUndo},
		{"slightly better at the cap", rateObs{T: 2.53, SE: 0.06, MS: 10, Cycles: 2048}, checkKeep},
		// Classic emits exactly one token a step; its cost's spread is
		// the only noise on its side, and it counts: +4 % ± 5.6 %.
		{"classic better, its cost loose", rateObs{T: 1, MS: 3.85, MSSE: 0.11, Cycles: 1024}, checkWait},
		{"classic better, its cost tight", rateObs{T: 1, MS: 3.85, MSSE: 0.01, Cycles: 1024}, checkKeep},
		{"classic worse beyond its cost's spread", rateObs{T: 1, MS: 4.4, MSSE: 0.1, Cycles: 1024}, checkUndo},
	} {
		got, gain, half := judgeSwitch(c.to, from, DefaultZ, DefaultNoiseFloor, 1024, 2048)
		if got != c.want {
			t.Errorf("%s: verdict %d (gain %+.3f ± %.3f), want %d", c.name, got, gain, half, c.want)
		}
	}
}

// Decide never picks a width a check undid, and does not switch when the
// measured switch time is not repaid over the payback horizon.
func TestDecideAvoidAndPayback(t *testing.T) {
	flat := Curve{VerifyMS: map[int]float64{1: 2, 2: 2, 3: 2, 4: 2}}
	base := Inputs{Running: 4, N: 1, Acc: acc(1000, 0.5, 0.25, 0.125), Curve: flat, Measured: perToken4(),
		Rule: Rule{MinCycles: 100, MaxWidth: 4}} // width 2 +20%, width 3 +12% (TestDecide)
	for _, c := range []struct {
		name   string
		mod    func(in *Inputs)
		choice int
		reason string
	}{
		{"as before", func(*Inputs) {}, 2, "width 2 predicted +20.0%"},
		{"2 undone: the next best", func(in *Inputs) { in.Avoid = map[int]bool{2: true} }, 3, "width 3 predicted +12.0%"},
		{"a switch of 60 s repays in 10 min", func(in *Inputs) { in.SwitchS = 60 }, 2, "width 2 predicted +20.0%"},
		{"a switch of 200 s does not", func(in *Inputs) { in.SwitchS = 200 }, 4, "does not repay a 200.0s switch within 10m0s"},
	} {
		in := base
		c.mod(&in)
		d := Decide(in)
		if d.Choice != c.choice || !strings.Contains(d.Reason, c.reason) {
			t.Errorf("%s: choice %d reason %q, want %d ~%q", c.name, d.Choice, d.Reason, c.choice, c.reason)
		}
	}
}

// The self-correction on a closed-form engine whose acceptance at width 2
// is lower than the other widths' S predicts (S per cycle depends on the
// width): the model sends the loop from 4 to 2, width 2 then measures
// worse, the check undoes it, and 2 is not tried again.
func TestLoopUndoesAWorseSwitch(t *testing.T) {
	m := newModelEngine(t, 1, 4, nil)
	m.draft = 0.1
	m.sw = func(w, k int) float64 {
		switch {
		case w == 2:
			return 0.35 // width 2's own cycles accept half as often
		case k == 1:
			return 0.7
		}
		return 0.05 / float64(k)
	}
	m.s = func(k int) float64 { return m.sw(4, k) }
	r, _, ctx, cancel := startModelLoop(t, m, -1)
	if !waitFor(5*time.Second, func() bool {
		d := r.status().Decision
		return d != nil && strings.HasPrefix(d.Reason, "undo: width 2 measured")
	}) {
		t.Fatalf("no undo; switches %v; last %v", switchedOf(m), r.status().Decision)
	}
	// Many decisions later: never 2 again.
	n := r.status().Decisions
	if !waitFor(5*time.Second, func() bool { return r.status().Decisions >= n+20 }) {
		t.Fatalf("the loop stopped deciding")
	}
	sw := switchedOf(m)
	twos := 0
	for _, w := range sw {
		if w == 2 {
			twos++
		}
	}
	if twos != 1 || m.Current().Width == 2 {
		t.Errorf("switches %v: want width 2 once, undone", sw)
	}
	if p := r.status().Prediction; p.N < 1 {
		t.Errorf("no prediction scored: %+v", p)
	}
	cancel()
	if err := <-r.done; err != nil {
		t.Fatal(err)
	}
	_ = ctx
}

// Batch means: the standard error of the mean of epoch means.
func TestBatchSE(t *testing.T) {
	for _, c := range []struct {
		means []float64
		want  float64
	}{
		{nil, 0},
		{[]float64{1, 3}, 0}, // too few epochs to tell
		{[]float64{2, 2, 2}, 0},
		{[]float64{1, 2, 3}, 1 / math.Sqrt(3)}, // sd 1 over √3
	} {
		if got := batchSE(c.means); !near(got, c.want, 1e-12) {
			t.Errorf("batchSE(%v) = %v, want %v", c.means, got, c.want)
		}
	}
}

// Classic is measured live like any width: its steps under load, not the
// idle probe's rows (on the H200 under 4 clients, 7 % apart), and its
// spread between epochs is the check's noise on its side.
func TestLoopMeasuresClassicLive(t *testing.T) {
	l := New(LoopDeps{Current: func() Target { return Target{Width: 1} }, Switch: func(context.Context, int, string) error { return nil },
		Log: quietLog(), Cfg: testCfg()})
	l.curve = Curve{VerifyMS: map[int]float64{4: 4.82}}
	l.width, l.ownN, l.lastN = 1, 4, 4
	for _, ms := range []float64{5.0, 5.3, 5.15} { // three epochs of 1000 steps a sequence
		l.tokens, l.epCycles, l.epSecs = 1000, 1000, ms
		l.closeEpoch(4)
	}
	m := l.measured[1]
	if m.N != 4 || !near(m.MS, 5.15, 1e-9) || !near(m.SE, batchSE([]float64{5.0, 5.3, 5.15}), 1e-12) {
		t.Fatalf("measured classic %+v, want 5.15 ms at 4 sequences with the epochs' spread", m)
	}
	r, ok := l.ownRateOf(1, 4)
	if !ok || r.MS != m.MS || r.MSSE < m.SE || r.T != 1 {
		t.Errorf("classic's own rate %+v %v, want its measured 5.15 ms", r, ok)
	}
	if r, _ := l.ownRateOf(1, 2); r.MS == m.MS { // another concurrency: the probe
		t.Errorf("classic at 2 sequences priced by its 4-sequence measure %+v", r)
	}
}

// A switch is checked against the cycles that called for it: width 17's
// own counts are of flat traffic (14 tokens a cycle), its engine's latest
// cycles of collapsing traffic (4.1), which made the rule switch to 4.
// Against the older counts 4 looks 47 % worse and was undone (the sim's
// traffic-change test ended at 3); against the cycles the decision saw it
// is 80 % better and kept.
func TestCheckAgainstTheCyclesThatCalledForTheSwitch(t *testing.T) {
	var logged bytes.Buffer
	l := New(LoopDeps{Current: func() Target { return Target{} }, Switch: func(context.Context, int, string) error { return nil },
		Log: slog.New(slog.NewTextHandler(&logged, nil)), Cfg: Config{Rule: Rule{MinCycles: 256}, MaxTrials: -1}})
	l.curve, l.w0 = Curve{VerifyMS: map[int]float64{1: 3, 4: 4.3, 17: 8.5}, Source: "probe"}, 8
	l.width, l.gen, l.ownN = 17, 1, 1
	flat := []float64{0.94, 0.92, 0.9, 0.88, 0.87, 0.86, 0.85, 0.85, 0.84, 0.84, 0.83, 0.83, 0.83, 0.82, 0.82, 0.82}
	collapse := []float64{0.94, 0.9, 0.86, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03}
	l.own[17] = countsAt(8000, flat...)
	l.deliv[17] = [2]float64{8000 * 14, 8000}
	l.delivEp[17] = []float64{13.8, 14.1, 14, 13.9, 14.2, 14, 14.1, 13.9}
	l.base, l.baseTok, l.baseEp = countsAt(1024, collapse...), 1024*4.1, []float64{4.2, 4.0, 4.1, 4.1}
	l.measured[17] = Measure{MS: 9, Cycles: 9024, N: 1}

	l.expect(Decision{N: 1}, 4, 17)
	l.reset(Target{Gen: 2, Width: 4})
	// Width 4's engine: 2048 cycles of the collapse; its own counts
	// from an earlier visit, of the flat stretch, are not read.
	l.own[4] = countsAt(4096, 0.94, 0.92, 0.9)
	l.deliv[4] = [2]float64{4096 * 3.76, 4096}
	l.base, l.baseTok = countsAt(2048, 0.94, 0.9, 0.86), 2048*3.7
	l.baseEp = []float64{3.7, 3.72, 3.68, 3.7, 3.69, 3.71, 3.7, 3.7}
	l.measured[4] = Measure{MS: 4.5, Cycles: 2048, N: 1}

	dec := Decision{N: 1}
	undo, hold := l.judge(1, &dec)
	if undo != 0 || hold {
		t.Fatalf("undo %d, hold %v (%s): want the switch kept", undo, hold, dec.Reason)
	}
	if l.check != nil {
		t.Errorf("still checking %v", l.check)
	}
	if !strings.Contains(logged.String(), "switch kept: width 4 measured +") {
		t.Errorf("no check kept the switch; log:\n%s", logged.String())
	}
}

// The width switched to is read over its engine's cycles too: its own
// counts from a visit under older traffic (flat: 14 tokens a cycle) would
// keep a switch its engine measures at 4.1 tokens a cycle, 42 % worse
// than the width left.
func TestCheckReadsTheNewWidthOverItsEngine(t *testing.T) {
	l := New(LoopDeps{Current: func() Target { return Target{} }, Switch: func(context.Context, int, string) error { return nil },
		Log: quietLog(), Cfg: Config{Rule: Rule{MinCycles: 256}, MaxTrials: -1}})
	l.curve, l.w0 = Curve{VerifyMS: map[int]float64{1: 3, 4: 4.3, 16: 8.3}, Source: "probe"}, 8
	l.width, l.gen, l.ownN = 4, 1, 1
	collapse := []float64{0.94, 0.9, 0.86, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03}
	flat := []float64{0.94, 0.92, 0.9, 0.88, 0.87, 0.86, 0.85, 0.85, 0.84, 0.84, 0.83, 0.83, 0.83, 0.82, 0.82}
	l.base, l.baseTok, l.baseEp = countsAt(2048, 0.94, 0.9, 0.86), 2048*3.7, []float64{3.7, 3.72, 3.68, 3.7, 3.69, 3.71, 3.7, 3.7}
	l.measured[4] = Measure{MS: 4.5, Cycles: 2048, N: 1}
	l.expect(Decision{N: 1}, 16, 4)
	l.reset(Target{Gen: 2, Width: 16})
	l.own[16] = countsAt(4096, flat...)
	l.deliv[16] = [2]float64{4096 * 14, 4096}
	l.base, l.baseTok, l.baseEp = countsAt(2048, collapse...), 2048*4.1, []float64{4.1, 4.0, 4.2, 4.1, 4.1, 4.0, 4.2, 4.1}
	l.measured[16] = Measure{MS: 8.6, Cycles: 2048, N: 1}
	dec := Decision{N: 1}
	if undo, _ := l.judge(1, &dec); undo != 4 {
		t.Fatalf("undo %d (%s): want back to 4", undo, dec.Reason)
	}
}

// countsAt is cycles whose draft positions were accepted at the rates s.
func countsAt(cycles float64, s ...float64) Counts {
	c := Counts{Cycles: cycles}
	for _, v := range s {
		c.AtLeast = append(c.AtLeast, v*cycles)
	}
	return c
}

// An exploration's home is read as the exploration left it: the width
// chosen after it is checked against the home engine's cycles (3.7
// tokens a cycle), not the home's own counts of older traffic (14).
func TestExplorationHomeIsCheckedAsItWasLeft(t *testing.T) {
	gen := uint64(1)
	l := New(LoopDeps{Current: func() Target { return Target{Gen: gen, Width: 17} },
		Switch: func(context.Context, int, string) error { gen = 2; return nil },
		Log:    quietLog(), Cfg: Config{Rule: Rule{MinCycles: 256}, MaxTrials: -1}})
	l.width, l.gen, l.ownN, l.lastN = 4, 1, 1, 1
	l.own[4] = countsAt(8000, 0.94, 0.92, 0.9)
	l.deliv[4] = [2]float64{8000 * 14, 8000}
	l.base, l.baseTok = countsAt(1024, 0.94, 0.9, 0.86), 1024*3.7
	l.measured[4] = Measure{MS: 4.5, Cycles: 9024, N: 1}
	if err := l.switchTrial(context.Background(), 17, "explore wider", true, false); err != nil {
		t.Fatal(err)
	}
	if l.home != 4 {
		t.Fatalf("home %d, want 4", l.home)
	}
	l.expect(Decision{N: 1}, 5, 4)
	if c := l.check; c == nil || !c.hasLeft || math.Abs(c.left.T-3.7) > 1e-9 {
		t.Errorf("check %+v: want width 4 at 3.7 tokens a cycle, as the exploration left it", l.check)
	}
}
