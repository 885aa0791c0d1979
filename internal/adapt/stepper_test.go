package adapt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The stepper, fed scrapes by hand: no engine, no network. Each case
// builds a loop in a state, feeds observations, and checks the last
// action.
func TestStep(t *testing.T) {
	curve := func() Curve {
		c := Curve{VerifyMS: map[int]float64{}, Source: "probe"}
		for r := 1; r <= 17; r++ {
			c.VerifyMS[r] = verify(r)
		}
		return c
	}
	// snap is cumulative counters after c cycles at width w with S(k) =
	// 0.8^k, each cycle costing ms, n requests processing.
	snap := func(c float64, w int, ms float64, n int, perPos bool) Snapshot {
		s := Snapshot{Cycles: c, HasSpec: true, HasPerPos: perPos, PredictSeconds: c * ms / 1000, Processing: float64(n), Predicted: c}
		p := 1.0
		for k := 1; k < w; k++ {
			p *= 0.8
			s.PerPos = append(s.PerPos, c*p)
			s.Predicted += c * p
		}
		return s
	}
	now := time.Unix(1_800_000_000, 0)
	cases := []struct {
		name  string
		setup func(l *Loop)
		obs   []Observation
		kind  ActionKind
		check func(t *testing.T, a Action)
	}{
		{
			name: "baseline of a new engine",
			obs:  []Observation{{Target: Target{Gen: 1, Width: 4}, Snap: snap(10, 4, 5, 1, true)}},
			kind: ActWait,
		},
		{
			name:  "the starting width's epoch, then the exploration",
			setup: func(l *Loop) { l.exploreFirst = true },
			obs: []Observation{{Target: Target{Gen: 1, Width: 4}, Snap: snap(0, 4, 5, 1, true)},
				{Target: Target{Gen: 1, Width: 4}, Snap: snap(300, 4, 5, 1, true)}},
			kind: ActSwitch,
			check: func(t *testing.T, a Action) {
				if a.Width != 8 || !a.Explore || a.Trial {
					t.Errorf("%+v: want an exploration to W0 8", a)
				}
			},
		},
		{
			name: "no per-position counters: stop for good",
			obs: []Observation{{Target: Target{Gen: 1, Width: 4}, Snap: snap(0, 4, 5, 1, false)},
				{Target: Target{Gen: 1, Width: 4}, Snap: snap(300, 4, 5, 1, false)}},
			kind: ActStop,
			check: func(t *testing.T, a Action) {
				if !errors.Is(a.Err, ErrNotAdapting) {
					t.Errorf("err %v", a.Err)
				}
			},
		},
		{
			name: "counters backwards: a new baseline",
			obs: []Observation{{Target: Target{Gen: 1, Width: 4}, Snap: snap(500, 4, 5, 1, true)},
				{Target: Target{Gen: 1, Width: 4}, Snap: snap(100, 4, 5, 1, true)}},
			kind: ActWait,
			check: func(t *testing.T, a Action) {
				if !strings.Contains(a.Reason, "backwards") {
					t.Errorf("reason %q", a.Reason)
				}
			},
		},
		{
			name:  "4 sequences, rows missing: probe them first",
			setup: func(l *Loop) { l.curve.VerifyMS = map[int]float64{1: 3, 2: 3.2, 17: 7} },
			obs: []Observation{{Target: Target{Gen: 1, Width: 4}, Snap: snap(0, 4, 5, 4, true)},
				{Target: Target{Gen: 1, Width: 4}, Snap: snap(300, 4, 5, 4, true)}},
			kind: ActProbe,
			check: func(t *testing.T, a Action) {
				if a.N != 4 {
					t.Errorf("%+v: want the rows of 4 sequences", a)
				}
			},
		},
		{
			// Width 2 switched to from 4 (the model's choice) measures far
			// worse than 4 did: back to 4, and 2 is avoided.
			name: "a worse switch is undone",
			setup: func(l *Loop) {
				l.check, l.ownN = &switchCheck{from: 4, to: 2}, 1
				l.own[4] = Counts{Cycles: 4000, AtLeast: []float64{3200, 2560, 2048}}
				l.deliv[4] = [2]float64{4000 * 3.44, 4000}
				l.measured[4] = Measure{MS: 3.95 + 1.5, Cycles: 4000, N: 1}
			},
			obs: []Observation{{Target: Target{Gen: 1, Width: 2}, Snap: snap(0, 2, 20, 1, true)},
				{Target: Target{Gen: 1, Width: 2}, Snap: snap(2000, 2, 20, 1, true)}},
			kind: ActSwitch,
			check: func(t *testing.T, a Action) {
				if a.Width != 4 || !strings.HasPrefix(a.Reason, "undo: width 2 measured") {
					t.Errorf("%+v: want an undo to 4", a)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := New(LoopDeps{Current: func() Target { return Target{} }, Switch: func(context.Context, int, string) error { return nil },
				Log: quietLog(), Cfg: Config{Rule: Rule{MinCycles: 256}, MaxTrials: -1}})
			l.curve, l.w0 = curve(), 8
			if c.setup != nil {
				c.setup(l)
			}
			var a Action
			for i, o := range c.obs {
				o.Now = now.Add(time.Duration(i) * 2 * time.Second)
				a = l.Step(o)
			}
			if a.Kind != c.kind {
				t.Fatalf("action %+v, want kind %d", a, c.kind)
			}
			if c.check != nil {
				c.check(t, a)
			}
		})
	}
}

// A re-check of the widest width frees the widths undone: a traffic
// change the positions below the running width do not show (collapsing
// to flat at width 4) shows only in the far positions it observes.
func TestRecheckFreesUndoneWidths(t *testing.T) {
	l := New(LoopDeps{Current: func() Target { return Target{} }, Switch: func(context.Context, int, string) error { return nil },
		Log: quietLog(), Cfg: Config{Rule: Rule{MinCycles: 256}}})
	l.width, l.explored = 4, 1
	l.avoid[17], l.avoid[16], l.tried[5] = true, true, true
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	l.lastExplore = now.Add(-2 * l.cfg.ReexploreEvery)
	a := l.act(now, Decision{Running: 4, Choice: 4, Recheck: 17})
	if a.Kind != ActSwitch || a.Width != 17 || !a.Explore {
		t.Fatalf("action %+v: want a re-check of 17", a)
	}
	if len(l.avoid) != 0 || len(l.tried) != 0 {
		t.Errorf("avoid %v, tried %v: want both cleared", l.avoid, l.tried)
	}
}

// The re-check's first decision bars the widths undone before it again,
// unless its look saw the acceptance change: on steady traffic a re-check
// does not send the loop back to widths it undid.
func TestRecheckKeepsUndoneWidthsOnSteadyTraffic(t *testing.T) {
	before := Counts{Cycles: 4000, AtLeast: []float64{2800, 1960, 1372}} // S = .7, .49, .34 at width 4
	e, h := easyEpoch, hardEpoch
	mixed := []Acceptance{e.Obs(), h.Obs(), e.Obs(), h.Obs(), e.Obs(), h.Obs(), e.Obs(), h.Obs()}
	for _, c := range []struct {
		name      string
		epochs    []Acceptance // the epochs before the look (nil: alike)
		look      Counts       // the re-check engine's epochs
		exploring bool         // false: the look's switch failed
		barred    bool
	}{
		{"the same acceptance", nil, Counts{Cycles: 600, AtLeast: []float64{420, 294, 206, 144}}, true, true},
		{"a far position changed", nil, Counts{Cycles: 600, AtLeast: []float64{420, 294, 206, 200}}, true, false},
		{"a near position changed", nil, Counts{Cycles: 600, AtLeast: []float64{540, 430, 340, 270}}, true, false},
		{"no look: the switch failed", nil, Counts{}, false, true},
		// Traffic of two classes in runs: the look's one epoch of the
		// easy class is within the spread of the epochs before it.
		{"one easy epoch of a mix", mixed, Counts{Cycles: 256, AtLeast: []float64{230.4, 204.8, 179.2}}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := New(LoopDeps{Current: func() Target { return Target{} }, Switch: func(context.Context, int, string) error { return nil },
				Log: quietLog(), Cfg: Config{Rule: Rule{MinCycles: 256}}})
			l.width, l.explored, l.base = 4, 1, before
			if c.epochs != nil { // the same mean, S = .7, .55, .45
				l.base, l.pendObs = Counts{Cycles: 2048, AtLeast: []float64{1433.6, 1126.4, 921.6}}, c.epochs
			}
			l.wide = Counts{Cycles: 4000, AtLeast: []float64{2800, 1960, 1372, 960}}.Obs() // S(4) = .24, from an earlier look
			l.avoid[5], l.avoid[3] = true, true
			now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
			l.lastExplore = now.Add(-2 * l.cfg.ReexploreEvery)
			if a := l.act(now, Decision{Running: 4, Choice: 4, Recheck: 17}); a.Kind != ActSwitch || a.Width != 17 {
				t.Fatalf("action %+v: want a re-check of 17", a)
			}
			if got := l.avoided(); len(got) != 2 {
				t.Errorf("during the look: widths saved as undone %v, want [3 5]", got)
			}
			l.width, l.exploring, l.base = 17, c.exploring, c.look
			l.prevObs, l.pendObs = nil, []Acceptance{c.look.Obs()}
			l.keepBarred()
			if got := l.avoid[5] && l.avoid[3]; got != c.barred {
				t.Errorf("avoid %v: barred %v, want %v", l.avoid, got, c.barred)
			}
			if l.barred != nil {
				t.Error("the re-check is still open after its first decision")
			}
		})
	}
}

// While another engine runs beside the serving one (Target.Shared: the
// one it replaced draining), no scrape counts, nor the first one after,
// also when the scrapes meanwhile failed: the width's cost is read from the
// engine alone. The shared stretch here runs 20 ms a cycle, the engine
// alone 5.
func TestStepSharedEngineIsNotMeasured(t *testing.T) {
	snap := func(cycles, predS float64) Snapshot {
		s := servedSnap(cycles)
		s.PredictSeconds = predS
		return s
	}
	shared, alone := Target{Gen: 1, Width: 4, Shared: true}, Target{Gen: 1, Width: 4}
	failed := errors.New("GET /metrics: connection refused")
	for _, tc := range []struct {
		name string
		obs  []Observation // then one scrape alone, 300 cycles at 5 ms
	}{
		{"shared from the engine's start", []Observation{
			{Target: shared, Snap: snap(0, 0)},
			{Target: shared, Snap: snap(300, 6)},
			{Target: shared, Snap: snap(600, 12)},
			{Target: alone, Snap: snap(900, 18)}, // the last 300 cycles were shared
		}},
		{"scrapes failing while shared", []Observation{
			{Target: alone, Snap: snap(0, 0)},
			{Target: shared, Err: failed},
			{Target: shared, Err: failed},
			{Target: alone, Snap: snap(900, 18)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := stepLoop()
			now := time.Unix(1_800_000_000, 0)
			for i, o := range tc.obs {
				o.Now = now.Add(time.Duration(i) * 2 * time.Second)
				if a := l.Step(o); a.Kind != ActWait {
					t.Fatalf("scrape %d: %+v, want a wait", i, a)
				}
				if o.Target.Shared && !strings.HasPrefix(l.status.Note, "measuring paused") {
					t.Errorf("scrape %d, shared: status note %q", i, l.status.Note)
				}
			}
			if l.epoch.Cycles != 0 || l.epSecs != 0 {
				t.Fatalf("shared cycles counted: epoch %v cycles, %v s", l.epoch.Cycles, l.epSecs)
			}
			if l.status.Note != "" {
				t.Errorf("status note %q after the engine serves alone", l.status.Note)
			}
			l.Step(Observation{Now: now.Add(8 * time.Second), Target: alone, Snap: snap(1200, 19.5)})
			if m := l.measured[4]; !near(m.MS, 5, 1e-9) || m.Cycles != 300 {
				t.Errorf("width 4 measured %+v, want 5 ms over the 300 cycles alone", m)
			}
		})
	}
}

// After a failed switch no switch follows within a window, of any kind
// (an undo or a return home is not held by the window otherwise, and in
// drain mode each try holds the traffic for a model load), counted from
// when it failed (here after a 90 s model load), and nothing is decided
// meanwhile: the first exploration, held, comes after the window. A
// switch that succeeds clears it.
func TestSwitchHeldAfterAFailure(t *testing.T) {
	snap := func(c float64) Snapshot {
		return Snapshot{Cycles: c, HasSpec: true, HasPerPos: true, PredictSeconds: c * 5 / 1000, Processing: 1, Predicted: c * 1.8, PerPos: []float64{c * 0.5, c * 0.2, c * 0.1}}
	}
	now := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		name   string
		failed time.Duration // before the decision; 0: none
		want   ActionKind
	}{
		{"no failure", 0, ActSwitch},
		{"failed 10 s before", 10 * time.Second, ActWait},
		{"failed a window before", 61 * time.Second, ActSwitch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := now.Add(-tc.failed - 90*time.Second)
			fail := errors.New("the engine did not start")
			l := New(LoopDeps{Current: func() Target { return Target{} }, Now: func() time.Time { return clock },
				Switch: func(context.Context, int, string) error { clock = clock.Add(90 * time.Second); return fail },
				Log:    quietLog(), Cfg: Config{Rule: Rule{MinCycles: 256}, MaxTrials: -1}})
			l.curve = Curve{VerifyMS: map[int]float64{}, Source: "probe"}
			for r := 1; r <= 17; r++ {
				l.curve.VerifyMS[r] = verify(r)
			}
			l.w0 = 8
			if tc.failed > 0 {
				l.switchTrial(context.Background(), 8, "explore", true, false)
				if !l.failedAt.Equal(now.Add(-tc.failed)) {
					t.Fatalf("failed switch recorded at %v, want when it failed, %v", l.failedAt, now.Add(-tc.failed))
				}
			}
			l.exploreFirst = true // the starting width's epoch, then the exploration
			l.Step(Observation{Now: now, Target: Target{Gen: 1, Width: 4}, Snap: snap(0)})
			if a := l.Step(Observation{Now: now.Add(2 * time.Second), Target: Target{Gen: 1, Width: 4}, Snap: snap(300)}); a.Kind != tc.want {
				t.Fatalf("action %+v, want kind %d", a, tc.want)
			}
			if tc.want == ActWait {
				a := l.Step(Observation{Now: now.Add(70 * time.Second), Target: Target{Gen: 1, Width: 4}, Snap: snap(600)})
				if a.Kind != ActSwitch || a.Width != 8 || !a.Explore {
					t.Errorf("after the window: %+v, want the held exploration to 8", a)
				}
			}
			l.d.Switch = func(context.Context, int, string) error { return nil }
			l.switchTrial(context.Background(), 8, "explore", true, false)
			if !l.failedAt.IsZero() {
				t.Errorf("a switch that succeeded left failedAt %v", l.failedAt)
			}
		})
	}
}

// A switch not tried (a reload replaced it, or serve is stopping) is no
// failure: no hold, and an exploration dropped is not counted as made.
func TestDroppedSwitchIsNoFailure(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := New(LoopDeps{Current: func() Target { return Target{Gen: 1, Width: 4} }, Now: func() time.Time { return now },
		Switch: func(context.Context, int, string) error {
			return fmt.Errorf("%w: superseded by a later switch", ErrSwitchDropped)
		},
		Log: quietLog(), Cfg: Config{Rule: Rule{MinCycles: 256}, MaxTrials: -1}})
	if err := l.switchTrial(context.Background(), 17, "explore wider", true, false); err != nil {
		t.Fatal(err)
	}
	if !l.failedAt.IsZero() || l.explored != 0 || !l.lastExplore.IsZero() {
		t.Errorf("a dropped switch counted: failed at %v, explored %d, last exploration %v", l.failedAt, l.explored, l.lastExplore)
	}
}

// A width's measured cost is what clients wait for when the proxy says
// (Target.Served): here the engine's own timings say 5 ms a cycle and the
// clients' requests took 6, as on the H200 where llama-server's queue and
// hand-back grew with the cycle. Without served seconds, or across a drop
// in them, the engine's own count. The first scrapes are the baseline and
// the warm-up (one slot, one request ended).
func TestStepMeasuresServedTime(t *testing.T) {
	for _, tc := range []struct {
		name   string
		served []float64 // served seconds at each scrape (nil: no proxy)
		slots  []int     // the slots they were read for (nil: 0 each)
		want   float64
		cycles float64
	}{
		{"served seconds win", []float64{0, 0.5, 2.3}, nil, 6, 300},
		{"no proxy: the engine's own, and no warm-up", nil, nil, 5, 400},
		{"served seconds went down: the engine's own for that delta", []float64{0, 3, 1}, nil, 5, 300},
		{"the slots they were read for changed: the engine's own", []float64{0, 0.5, 9}, []int{8, 8, 16}, 5, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := stepLoop()
			now := time.Unix(1_800_000_000, 0)
			for i, c := range []float64{0, 100, 400} {
				s := servedSnap(c)
				if tc.served != nil {
					s.Served, s.Ended, s.HasServed = tc.served[i], float64(2*i), true
					if tc.slots != nil {
						s.ServedSlots = tc.slots[i]
					}
				}
				l.Step(Observation{Now: now.Add(time.Duration(i) * 2 * time.Second), Target: Target{Gen: 1, Width: 4}, Snap: s})
			}
			if m := l.measured[4]; !near(m.MS, tc.want, 1e-9) || m.Cycles != tc.cycles {
				t.Errorf("width 4 measured %+v, want %g ms a cycle over %g cycles", m, tc.want, tc.cycles)
			}
		})
	}
}

// A new engine's cycles count once as many requests as decode together
// (here 4 of 8 slots busy) have ended after the baseline: those first
// requests ran slower (here 20 ms a cycle, then 5), and on an H200 the
// loop undid its best width on them.
func TestStepWarmUpSkipsTheFirstRequestOfEachSlot(t *testing.T) {
	l := stepLoop()
	l.slots = 8
	now := time.Unix(1_800_000_000, 0)
	steps := []struct {
		cycles, secs, ended float64
		want                string // the wait's reason
	}{
		{0, 0, 0, "baseline"},
		{300, 6, 3, "warming up"}, // 3 of 4 slots' first requests ended, at 20 ms a cycle
		{400, 8, 5, "warming up"}, // the fourth: the baseline moves here
		{700, 9.5, 9, ""},         // 300 cycles at 5 ms
	}
	for i, st := range steps {
		s := servedSnap(st.cycles)
		s.Served, s.Ended, s.HasServed, s.Processing = st.secs, st.ended, true, 4
		a := l.Step(Observation{Now: now.Add(time.Duration(i) * 2 * time.Second), Target: Target{Gen: 1, Width: 4}, Snap: s})
		if st.want != "" && (a.Kind != ActWait || !strings.Contains(a.Reason, st.want)) {
			t.Fatalf("scrape %d: %+v, want a wait: %s", i, a, st.want)
		}
	}
	if m := l.measured[4]; !near(m.MS, 5, 1e-9) || m.Cycles != 300 {
		t.Errorf("width 4 measured %+v, want 5 ms a cycle over the 300 cycles after the warm-up", m)
	}
}

// Requests sent straight to the engine's loopback port (adapteval
// -direct, a local client) end on the engine but not through the proxy:
// its served seconds stand still while cycles grow. The warm-up does not
// wait for their ends, and the epoch is timed by the engine's own seconds
// (5 ms a cycle here), not as free; it is logged once.
func TestStepRequestsAroundTheProxy(t *testing.T) {
	var logged strings.Builder
	l := stepLoop()
	l.d.Log = slog.New(slog.NewTextHandler(&logged, nil))
	now := time.Unix(1_800_000_000, 0)
	for i, c := range []float64{0, 300, 700, 1000, 1300} {
		s := servedSnap(c)
		s.Served, s.Ended, s.HasServed = 0.1, 0, true
		a := l.Step(Observation{Now: now.Add(time.Duration(i) * 2 * time.Second), Target: Target{Gen: 1, Width: 4}, Snap: s})
		if i == 1 && (a.Kind != ActWait || !strings.Contains(a.Reason, "warming up")) {
			t.Fatalf("scrape 1: %+v, want the warm-up's last wait", a)
		}
	}
	if m := l.measured[4]; !near(m.MS, 5, 1e-9) || m.Cycles != 1000 {
		t.Errorf("width 4 measured %+v, want 5 ms a cycle over the 1000 cycles after the warm-up", m)
	}
	if n := strings.Count(logged.String(), "requests the proxy did not send"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, &logged)
	}
}

func stepLoop() *Loop {
	l := New(LoopDeps{Current: func() Target { return Target{} }, Switch: func(context.Context, int, string) error { return nil },
		Log: quietLog(), Cfg: Config{Rule: Rule{MinCycles: 256}, MaxTrials: -1}})
	l.curve = Curve{VerifyMS: map[int]float64{}, Source: "probe"}
	for r := 1; r <= 17; r++ {
		l.curve.VerifyMS[r] = verify(r)
	}
	l.w0 = 8
	return l
}

// servedSnap is a width-4 engine's counters after cycles, at 5 ms a cycle
// by its own timings.
func servedSnap(cycles float64) Snapshot {
	s := Snapshot{Cycles: cycles, HasSpec: true, HasPerPos: true, PredictSeconds: cycles * 0.005, Processing: 1, Predicted: cycles}
	p := 1.0
	for k := 1; k < 4; k++ {
		p *= 0.8
		s.PerPos = append(s.PerPos, cycles*p)
		s.Predicted += cycles * p
	}
	return s
}

// A wider look past the first exploration waits for the re-check period,
// and the decision says how long, so that neither the log nor the status
// reads as exploring meanwhile (H200, 2026-12-03e: "wider could pay:
// explore 16" every 2 s for 7 minutes, and no exploration).
func TestExploreHeld(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		name      string
		explore   int
		explored  int
		exploring bool
		since     time.Duration // since the last exploration
		want      time.Duration
	}{
		{"nothing asked", 0, 1, false, time.Minute, 0},
		{"the first exploration", 17, 0, false, 0, 0},
		{"straight from an exploration", 17, 1, true, time.Second, 0},
		{"within the period", 16, 1, false, 3 * time.Minute, 7 * time.Minute},
		{"the period over", 16, 1, false, 11 * time.Minute, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := stepLoop()
			l.explored, l.exploring, l.lastExplore = tc.explored, tc.exploring, t0
			dec := Decision{Running: 4, Choice: 4, Explore: tc.explore}
			if got := l.exploreHeld(t0.Add(tc.since), dec); got != tc.want {
				t.Errorf("held %s, want %s", got, tc.want)
			}
			dec.ExploreIn = tc.want
			if s := dec.String(); tc.want > 0 && !strings.Contains(s, "explore 16 in 7m0s") {
				t.Errorf("decision %q does not say when", s)
			}
		})
	}
}

// After a probe under load the engine is counted afresh: the probe holds a
// slot, and the clients' requests meanwhile wait for it. Here the first
// epoch at 4 sequences needs the rows of 4 sequences probed.
func TestProbeUnderLoadRestartsTheCount(t *testing.T) {
	l := stepLoop()
	now := time.Unix(1_800_000_000, 0)
	var a Action
	for i, c := range []float64{0, 300} {
		s := servedSnap(c)
		s.Processing = 4
		a = l.Step(Observation{Now: now.Add(time.Duration(i) * 2 * time.Second), Target: Target{Gen: 1, Width: 4}, Snap: s})
	}
	if a.Kind != ActProbe || a.N != 4 {
		t.Fatalf("%+v, want a probe of 4 sequences' rows", a)
	}
	if !l.fresh {
		t.Error("the engine's count goes on across a probe under load: want a new baseline")
	}
	if a := l.Step(Observation{Now: now.Add(6 * time.Second), Target: Target{Gen: 1, Width: 4}, Snap: servedSnap(600)}); a.Reason != "baseline scrape of a new engine" {
		t.Errorf("the scrape after the probe: %+v, want a new baseline", a)
	}
}
