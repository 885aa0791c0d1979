package adapt

import (
	"context"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// The runtime probes each new engine before it takes traffic: on a server
// busy from the first second (4 sequences, every probe of concurrent rows
// failing once traffic runs) the loop has the rows it needs and adapts;
// engines of the same pair after it are not probed again; an engine of
// another pair is probed in full, and the loop starts over for it.
func TestBeforeTraffic(t *testing.T) {
	m := newModelEngine(t, 4, 4, func(k int) float64 { return math.Pow(0.8, float64(k)) })
	m.slots, m.pair = 4, "a"
	var traffic atomic.Bool
	m.probeFail = func(rows int) bool { return rows > 17 && traffic.Load() } // m.mu held
	probes := func() int { m.mu.Lock(); defer m.mu.Unlock(); return len(m.probes) }
	cfg := testCfg()
	cfg.ReexploreEvery = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var l *Loop
	r := &loopRun{done: make(chan error, 1)}
	l = New(LoopDeps{Current: m.Current, Cfg: cfg, Log: quietLog(),
		Publish: func(st Status) { r.mu.Lock(); r.last = st; r.mu.Unlock() },
		Switch: func(ctx context.Context, w int, reason string) error {
			if err := m.Switch(ctx, w, reason); err != nil {
				return err
			}
			return l.BeforeTraffic(ctx, m.Current()) // as the runtime does, before routing to it
		}})
	if err := l.BeforeTraffic(ctx, m.Current()); err != nil {
		t.Fatal(err)
	}
	first := probes()
	m.mu.Lock()
	has68 := slices.Contains(m.probes, 68)
	m.mu.Unlock()
	if !has68 {
		t.Fatalf("68 rows (4 sequences at width 17) not probed before traffic")
	}
	traffic.Store(true)
	go func() { r.done <- l.Run(ctx) }()
	if !waitFor(5*time.Second, func() bool { s := r.status(); return settled(s) && len(switchedOf(m)) >= 2 }) {
		t.Fatalf("no settle under load; switches %v; last %+v", switchedOf(m), r.status())
	}
	if got := probes(); got != first {
		t.Errorf("%d probe requests after the first engine's (%d): the curve was known", got-first, first)
	}
	if s := r.status(); s.Note != "" || s.Decision.NoCost {
		t.Errorf("note %q, no cost %v", s.Note, s.Decision.NoCost)
	}
	// Another pair: probed in full before its traffic, and the loop
	// starts over (it explores again).
	before, sw := probes(), len(switchedOf(m))
	m.mu.Lock()
	m.pair, m.gen = "b", m.gen+1
	m.cycles, m.perPos, m.predS = 0, nil, 0
	m.mu.Unlock()
	traffic.Store(false)
	if err := l.BeforeTraffic(ctx, m.Current()); err != nil {
		t.Fatal(err)
	}
	traffic.Store(true)
	if got := probes() - before; got < first/2 {
		t.Errorf("another pair: %d probe requests, want the full set (%d)", got, first)
	}
	if !waitFor(5*time.Second, func() bool { return len(switchedOf(m)) > sw && switchedOf(m)[sw] == 8 }) {
		t.Errorf("another pair: no new exploration; switches %v", switchedOf(m))
	}
	cancel()
	if err := <-r.done; err != nil {
		t.Fatal(err)
	}
}

// A /props that fails for a moment (the engine's HTTP not quite up, a
// proxy's hiccup) leaves the slots last known: the curve probed for 4
// slots still serves the next engine of the pair, which is not probed
// again. Before, the slots fell to "unknown", the curve was dropped with
// them and the rows of one sequence were probed anew.
func TestBeforeTrafficKeepsSlotsWhenPropsFails(t *testing.T) {
	m := newModelEngine(t, 4, 4, func(k int) float64 { return math.Pow(0.8, float64(k)) })
	m.slots, m.pair = 4, "a"
	probes := func() int { m.mu.Lock(); defer m.mu.Unlock(); return len(m.probes) }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := New(LoopDeps{Current: m.Current, Cfg: testCfg(), Log: quietLog(),
		Switch: func(context.Context, int, string) error { return nil }})
	if err := l.BeforeTraffic(ctx, m.Current()); err != nil {
		t.Fatal(err)
	}
	first := probes()
	m.mu.Lock()
	m.slots, m.gen = 0, m.gen+1 // /props answers 404 now
	m.mu.Unlock()
	if err := l.BeforeTraffic(ctx, m.Current()); err != nil {
		t.Fatal(err)
	}
	if got := probes() - first; got != 0 {
		t.Errorf("%d probe requests for the next engine of the pair: want none", got)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := l.cacheKey(); k.Slots != 4 {
		t.Errorf("cache key slots %d, want 4, the last known", k.Slots)
	}
}

// With a verify-cost curve given (none probed) the engine's slots are read
// all the same: they bound the load a width is measured at and its
// warm-up (Target.Served).
func TestBeforeTrafficReadsSlotsWithAGivenCurve(t *testing.T) {
	m := newModelEngine(t, 4, 4, func(k int) float64 { return math.Pow(0.8, float64(k)) })
	m.slots, m.pair = 6, "a"
	cfg := testCfg()
	cfg.Curve = oneSequenceCurve()
	l := New(LoopDeps{Current: m.Current, Cfg: cfg, Log: quietLog(),
		Switch: func(context.Context, int, string) error { return nil }})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.BeforeTraffic(ctx, m.Current()); err != nil {
		t.Fatal(err)
	}
	if got := l.knownSlots(); got != 6 {
		t.Errorf("slots %d after BeforeTraffic with a given curve, want the engine's 6", got)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.probes) != 0 {
		t.Errorf("%d probe requests with a given curve, want none", len(m.probes))
	}
}

// A probe before traffic cut short keeps the row counts it probed whole:
// the probe under load then has only the rest to do (the demo's sim at 4
// slots lost 21 of 42 row counts to the 10 s bound and probed them all
// again under load, each sample waiting for a slot).
func TestBeforeTrafficKeepsTheRowsProbedWhole(t *testing.T) {
	m := newModelEngine(t, 4, 4, func(k int) float64 { return math.Pow(0.8, float64(k)) })
	m.slots, m.pair = 4, "a"
	m.probeFail = func(rows int) bool { return rows > 17 } // m.mu held
	l := New(LoopDeps{Current: m.Current, Cfg: testCfg(), Log: quietLog(),
		Switch: func(context.Context, int, string) error { return nil }})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.BeforeTraffic(ctx, m.Current()); err == nil {
		t.Fatal("a probe cut short reported no error")
	}
	c, ok := l.knownCurve("a")
	if !ok {
		t.Fatal("nothing kept of the probe cut short")
	}
	for r := 1; r <= 17; r++ {
		if _, ok := c.VerifyMS[r]; !ok {
			t.Errorf("row count %d, probed whole, not kept", r)
		}
	}
	for r := range c.VerifyMS {
		if r > 17 {
			t.Errorf("row count %d kept, but its probe failed", r)
		}
	}
}
