package adapt

import (
	"context"
	"testing"
)

// Two classes of requests: an easy one (S = .9, .8, .7) and a hard one
// (S = .5, .3, .2), in epochs of 256 cycles.
var (
	easyEpoch = Counts{Cycles: 256, AtLeast: []float64{230.4, 204.8, 179.2}}
	hardEpoch = Counts{Cycles: 256, AtLeast: []float64{128, 76.8, 51.2}}
)

// Requests of different acceptance alternating within each pool are not a
// drift, however unevenly two pools split them; nor is one pool of one
// class amid the other (a run), which the next pool does not confirm. Two
// pools of other traffic in a row are, and they lift the bar on widths
// undone before them. Before Dispersion a pool of three easy epochs and
// one hard against one of three hard and one easy read as z ≈ 10 at
// S(1), and each such drift dropped the far positions and the trials.
func TestLoopDriftAcrossMixedPools(t *testing.T) {
	e, h := easyEpoch, hardEpoch
	m := Counts{Cycles: 256, AtLeast: []float64{179.2, 140.8, 115.2}} // half of each
	cases := []struct {
		name   string
		epochs []Counts // pools of driftPool epochs
		drift  bool
	}{
		{"the same mix, split unevenly", []Counts{e, e, h, e, h, h, e, h}, false},
		{"the same mix, split evenly", []Counts{e, h, e, h, h, e, h, e}, false},
		{"one class, then the other", []Counts{e, e, e, e, h, h, h, h, h, h, h, h}, true},
		{"one class, a pool of the other, the first again", []Counts{e, e, e, e, h, h, h, h, e, e, e, e}, false},
		{"one class throughout", []Counts{e, e, e, e, e, e, e, e}, false},
		// Two runs the opposite ways each drift from the mix (m: epochs
		// that each hold both classes); together they are the mix.
		{"a mix, then a pool of each class", []Counts{m, m, m, m, m, m, m, m, h, h, h, h, e, e, e, e, m, m, m, m}, false},
		// The mix's own spread hides the change at the first pool of the
		// hard class alone; the next two pools show it.
		{"a mix, then the hard class alone", []Counts{e, h, e, h, h, h, h, h, h, h, h, h, h, h, h, h}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := New(LoopDeps{Current: func() Target { return Target{Width: 4} }, Switch: func(context.Context, int, string) error { return nil },
				Log: quietLog(), Cfg: testCfg()})
			l.width, l.ownN, l.lastN = 4, 1, 1
			l.tried[3], l.avoid[5] = true, true
			for _, ep := range c.epochs {
				l.epoch = Counts{Cycles: ep.Cycles, AtLeast: append([]float64(nil), ep.AtLeast...)}
				l.epCycles, l.epSecs = ep.Cycles, ep.Cycles*0.005
				l.closeEpoch(1)
			}
			all := float64(len(c.epochs)) * 256
			if dropped := l.base.Cycles < all; dropped != c.drift {
				t.Errorf("base holds %.0f of %.0f cycles, tried %v: drift %v, want %v", l.base.Cycles, all, l.tried, dropped, c.drift)
			}
			// A width undone under the old traffic may be tried under the new.
			if avoided := l.avoid[5]; avoided == c.drift {
				t.Errorf("after drift=%v width 5 avoided=%v", c.drift, avoided)
			}
		})
	}
}

// Dispersion is 1 for epochs that spread as binomial sampling does (here
// not at all), large for epochs of two classes within one group, and not
// raised by a change between the groups.
func TestDispersion(t *testing.T) {
	e, h := easyEpoch.Obs(), hardEpoch.Obs()
	cases := []struct {
		name   string
		groups [][]Acceptance
		min    float64 // phi at S(1) at least
		max    float64 // and at most
	}{
		{"one class", [][]Acceptance{{e, e, e, e}}, 1, 1},
		{"a change between the groups", [][]Acceptance{{e, e}, {h, h}}, 1, 1},
		{"two classes within a group", [][]Acceptance{{e, h, e, h}}, 64, 66}, // (.2·256)²/(256·.7·.3) · 4/3
		{"one epoch: no degree of freedom", [][]Acceptance{{e}}, 1, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			phi := Dispersion(c.groups...)
			if len(phi) != 3 || phi[0] < c.min || phi[0] > c.max {
				t.Errorf("phi %v, want S(1)'s in [%g, %g] over 3 positions", phi, c.min, c.max)
			}
		})
	}
	if phi := Dispersion(); len(phi) != 0 {
		t.Errorf("no epochs: phi %v, want none", phi)
	}
}

// A visit shorter than a pool is tested against the width's own counts
// when the loop leaves it: of other traffic, they go (and only they);
// of the same, the visit joins them. One epoch is not tested: it shows no
// spread of its own, and requests in runs would read as a drift.
func TestLeavingAWidthDropsItsStaleOwnCounts(t *testing.T) {
	e, h := easyEpoch, hardEpoch
	for _, c := range []struct {
		name  string
		visit []Counts
		want  float64 // the width's own cycles after the switch away
	}{
		{"other traffic", []Counts{h, h}, 512},
		{"the same traffic", []Counts{e, e}, 4*256 + 512},
		{"one epoch of other traffic", []Counts{h}, 4*256 + 256},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := New(LoopDeps{Current: func() Target { return Target{} }, Switch: func(context.Context, int, string) error { return nil },
				Log: quietLog(), Cfg: Config{Rule: Rule{MinCycles: 256}}})
			l.width, l.gen, l.ownN = 4, 1, 1
			own := Counts{}
			for range 4 {
				own.Merge(e)
			}
			l.own[4], l.own[8] = own, own
			l.deliv[4] = [2]float64{own.Cycles * 3.4, own.Cycles}
			for _, ep := range c.visit {
				l.pend.Merge(ep)
				l.pendObs = append(l.pendObs, ep.Obs())
				l.pendTok += ep.Cycles * 2
			}
			l.reset(Target{Gen: 2, Width: 8})
			if got := l.own[4].Cycles; got != c.want {
				t.Errorf("width 4's own cycles %v, want %v", got, c.want)
			}
			if got := l.deliv[4][1]; got != c.want {
				t.Errorf("width 4's delivered cycles %v, want %v", got, c.want)
			}
			if got := l.own[8].Cycles; got != 4*256 {
				t.Errorf("width 8's own cycles %v: another width's counts must stay", got)
			}
		})
	}
}

// A pool held for a drift (commit) when the engine changes joins the
// width it was measured at, as an untested part of a pool does: it is not
// carried to the next engine, and the drift it suggested is not taken.
func TestHeldPoolJoinsAtAnEngineChange(t *testing.T) {
	l := New(LoopDeps{Current: func() Target { return Target{Width: 4} }, Switch: func(context.Context, int, string) error { return nil },
		Log: quietLog(), Cfg: testCfg()})
	l.width, l.ownN, l.lastN = 4, 1, 1
	l.avoid[5] = true
	for _, ep := range []Counts{easyEpoch, easyEpoch, easyEpoch, easyEpoch, hardEpoch, hardEpoch, hardEpoch, hardEpoch} {
		l.epoch = Counts{Cycles: ep.Cycles, AtLeast: append([]float64(nil), ep.AtLeast...)}
		l.epCycles, l.epSecs = ep.Cycles, ep.Cycles*0.005
		l.closeEpoch(1)
	}
	if l.suspect == nil || l.pend.Cycles != 0 {
		t.Fatalf("held %v, pending %.0f cycles: want the hard pool held", l.suspect, l.pend.Cycles)
	}
	l.reset(Target{Gen: 2, Width: 5})
	if l.suspect != nil || l.own[4].Cycles != 8*256 || !l.avoid[5] {
		t.Errorf("held %v, own %+v, avoid %v: want both pools in width 4's own counts, nothing held, width 5 still undone", l.suspect, l.own, l.avoid)
	}
}
