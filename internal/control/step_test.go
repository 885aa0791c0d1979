package control

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/follow"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/simcost"
)

var t0 = time.Unix(1_800_000_000, 0)

// fakeEngine makes the scrapes of one engine: each scrape adds cycles
// cycles at acceptance s per position, over 2 s, n requests in flight,
// at msPerCycle.
type fakeEngine struct {
	gen       uint64
	width     int
	s         float64 // S(k) at every position
	ms        float64 // ms per cycle
	n         float64
	c         Counters
	now       time.Time
	noiseFlip bool // alternate ±1 % per scrape, so that runs have a spread
}

func (e *fakeEngine) scrape() Observation {
	e.now = e.now.Add(2 * time.Second)
	ms := e.ms
	if e.noiseFlip = !e.noiseFlip; e.noiseFlip {
		ms *= 1.01
	} else {
		ms *= 0.99
	}
	cycles := e.n * 2000 / ms
	tokens := cycles
	for len(e.c.AtLeast) < e.width-1 {
		e.c.AtLeast = append(e.c.AtLeast, 0)
	}
	for k := 1; k < e.width; k++ {
		e.c.AtLeast[k-1] += cycles * e.s
		tokens += cycles * e.s
	}
	if e.width < 2 {
		cycles = 0
	}
	e.c.Cycles += cycles
	e.c.Tokens += tokens
	e.c.Secs += e.n * 2
	c := e.c
	c.AtLeast = append([]float64(nil), e.c.AtLeast...)
	return Observation{Kind: Scrape, Now: e.now, Engine: e.gen, Width: e.width, InFlight: e.n, Counters: c}
}

// run feeds k scrapes of e, each after the eight in-flight samples of its
// 2 s (follow.Tick apart), and returns the state and every action.
func run(c Controller, s State, e *fakeEngine, k int) (State, []Action) {
	var all []Action
	for range k {
		var acts []Action
		for i := range 8 {
			s, acts = c.Step(s, Observation{Kind: Sample, Now: e.now.Add(time.Duration(i+1) * follow.Tick), Width: e.width, InFlight: e.n})
			all = append(all, acts...)
		}
		s, acts = c.Step(s, e.scrape())
		all = append(all, acts...)
	}
	return s, all
}

// logged says whether any of acts logs a line containing sub.
func logged(acts []Action, sub string) bool {
	return slices.ContainsFunc(acts, func(a Action) bool { return a.Op == Log && strings.Contains(a.Msg, sub) })
}

func switches(acts []Action) []int {
	var ws []int
	for _, a := range acts {
		if a.Op == SwitchTo {
			ws = append(ws, a.Width)
		}
	}
	return ws
}

// measuredState is a state whose bucket 1 holds a run of width w at rate
// (tokens per s per request) for each engine given.
func measuredState(c Controller, runs map[int][]float64) State {
	s := c.Init(Pair{})
	s.Load = Load{Bucket: 0, Samples: []float64{1, 1, 1, 1, 1, 1, 1, 1}}
	for w, rates := range runs {
		for i, r := range rates {
			s.Pair.Buckets[0].Runs[w] = append(s.Pair.Buckets[0].Runs[w], rateRun(uint64(100*w+i), r))
		}
	}
	return s
}

// rateRun is one engine's run of 600 s at rate r (tokens per s per
// request), 30 scrapes of nearly no spread.
func rateRun(engine uint64, r float64) Run {
	return Run{Engine: engine, Tokens: r * 600, Secs: 600, Cycles: 10_000, Scrapes: 30, SumR: 30 * r, SumR2: 30 * r * r * 1.0001, SumT: 30 * 3, SumT2: 30 * 9}
}

func TestStepChoice(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "engine default"), SwitchS: 1})
	cases := []struct {
		name     string
		runs     map[int][]float64 // width → each engine's rate (the serving engine's run is added)
		serving  int
		want     []int  // switches asked for
		wantWhy  string // in the bucket's schedule source
		wantSche int    // the bucket's width in the schedule
	}{
		{"a width 4 % faster is within the noise: stay at the default", map[int][]float64{3: {104}}, 4, nil, "the safe answer", 4},
		{"a width 30 % faster on two engines: switch", map[int][]float64{6: {130, 131}}, 4, []int{6}, "measured +", 6},
		{"on a width within the noise: back to the default", map[int][]float64{3: {104}}, 3, []int{4}, "the safe answer", 4},
		{"the faster width kept against a slightly faster one", map[int][]float64{6: {130, 130}, 8: {133}}, 6, nil, "kept", 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := measuredState(c, tc.runs)
			if tc.serving == 4 {
				s.Pair.Buckets[0].Runs[4] = nil
			} else {
				s.Pair.Buckets[0].Runs[4] = measuredState(c, map[int][]float64{4: {100}}).Pair.Buckets[0].Runs[4]
			}
			rate := map[int]float64{4: 100, 3: 104, 6: 130}[tc.serving]
			e := &fakeEngine{gen: 1, width: tc.serving, s: 0.7, n: 1, now: t0}
			e.ms = 1000 * (1 + 0.7*float64(tc.serving-1)) / rate
			s, acts := run(c, s, e, 40)
			if got := switches(acts); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("switches %v, want %v (actions %+v)", got, tc.want, acts)
			}
			if b := s.Pair.Schedule[0]; b.Width != tc.wantSche || !strings.Contains(b.Source, tc.wantWhy) {
				t.Errorf("schedule bucket %+v, want width %d with %q", b, tc.wantSche, tc.wantWhy)
			}
		})
	}
}

// TestSafeAnswerNamesItsNoise: the stay line names the noise the rule
// used: the between-engine spread where it applies, the runs' own where
// the engine's fresh engines do not differ (the sim's default model,
// WithSpread(0, 0)), not the H200's spread the rule did not use.
func TestSafeAnswerNamesItsNoise(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       Config
		want, not string
	}{
		{"the H200's spread", Config{Default: schedule.Flat(4, "engine default"), SwitchS: 1}, "), a lower bound within the noise of 3.4% between engines", "its runs"},
		{"no spread", Config{Default: schedule.Flat(4, "engine default"), SwitchS: 1}.WithSpread(0, 0), "), a lower bound within the noise of its runs", "between engines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.cfg)
			s := measuredState(c, map[int][]float64{3: {100.1}})
			e := &fakeEngine{gen: 1, width: 4, s: 0.7, n: 1, now: t0}
			e.ms = 1000 * (1 + 0.7*3) / 100
			s, _ = run(c, s, e, 40)
			if src := s.Pair.Schedule[0].Source; !strings.Contains(src, tc.want) || strings.Contains(src, tc.not) {
				t.Errorf("the bucket's source %q, want %q and no %q", src, tc.want, tc.not)
			}
		})
	}
}

func TestStepCounting(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	cases := []struct {
		name string
		scr  int
		want float64 // cycles counted in the engine's run
	}{
		{"the warm-up is not counted", 2, 0},
		{"past the warm-up the first scrape is the base", 5, 1 * 1000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := c.Init(Pair{})
			s.Load = Load{Bucket: 0, Samples: []float64{1, 1, 1, 1}}
			e := &fakeEngine{gen: 7, width: 4, s: 0.5, ms: 2, n: 1, now: t0}
			s, _ = run(c, s, e, tc.scr)
			var got float64
			for _, r := range s.Pair.Buckets[0].Runs[4] {
				got += r.Cycles
			}
			if got < tc.want*0.98 || got > tc.want*1.02 {
				t.Errorf("counted %.0f cycles, want %.0f", got, tc.want)
			}
		})
	}
}

func TestStepLoadFollowsSchedule(t *testing.T) {
	// No decision (MinCycles out of reach): the schedule stays as set.
	c := New(Config{Default: schedule.Flat(4, "default"), SwitchS: 1, MinCycles: 1e12})
	s := c.Init(Pair{})
	s.Pair.Schedule[0].Width, s.Pair.Schedule[0].Source = 6, "measured"
	e := &fakeEngine{gen: 1, width: 6, s: 0.8, ms: 5, n: 1, now: t0}
	s, acts := run(c, s, e, 20)
	if got := switches(acts); len(got) != 0 {
		t.Fatalf("switched %v at the load the schedule's width serves", got)
	}
	e.n = 4
	s, acts = run(c, s, e, 20)
	if got := switches(acts); !reflect.DeepEqual(got, []int{4}) {
		t.Fatalf("switches %v when the load moved to 4, want [4]", got)
	}
	for _, a := range acts {
		if a.Op == SwitchTo && (a.Bucket != "2-4" || a.Load < 3 || !strings.Contains(a.Reason, "requests in flight")) {
			t.Errorf("the switch names no load or bucket: %+v", a)
		}
	}
	if s.Follow.State.Pending != 4 || s.Load.Bucket != 1 {
		t.Errorf("follow %+v, load %+v: want a switch pending and bucket 2-4", s.Follow.State, s.Load)
	}
	// 1.4 in flight stays in bucket 2-4 (the slack), and 3.3 too.
	s, _ = c.Step(s, Observation{Kind: Switched, Now: e.now, Took: 5 * time.Second})
	if s.Follow.State.Width != 4 || s.Follow.State.Pending != 0 {
		t.Errorf("after the switch the follower runs %d (pending %d), want 4", s.Follow.State.Width, s.Follow.State.Pending)
	}
	e.gen, e.width, e.n = 2, 4, 1.4
	for _, n := range []float64{1.4, 3.3} {
		e.n = n
		s, acts = run(c, s, e, 8)
		for _, a := range acts {
			if a.Op == Log && strings.Contains(a.Msg, "load moved") {
				t.Errorf("at %.1f requests in flight: %s", n, a.Msg)
			}
		}
		if s.Load.Bucket != 1 {
			t.Errorf("at %.1f requests in flight the bucket is %d, want 1 (2-4)", n, s.Load.Bucket)
		}
	}
}

func TestStepSwitchOutcome(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default"), SwitchS: 1})
	s := measuredState(c, map[int][]float64{4: {100}, 6: {130, 131}})
	s.Follow.State.Width, s.Follow.State.Pending = 4, 6
	failed, acts := c.Step(s, Observation{Kind: Switched, Now: t0, Err: "the engine did not start"})
	if failed.Exp.HoldUntil != t0.Add(DefaultHold) || failed.Follow.State.Pending != 0 || failed.Follow.State.Width != 4 || len(acts) != 1 || acts[0].Op != Log {
		t.Fatalf("after a failed switch: %+v, %+v, %+v", failed.Exp, failed.Follow.State, acts)
	}
	e := &fakeEngine{gen: 1, width: 4, s: 0.7, ms: 30, n: 1, now: t0}
	if _, acts := run(c, failed, e, 25); len(switches(acts)) != 0 {
		t.Errorf("switched %v within the hold after a failed switch", switches(acts))
	}
	if _, acts := run(c, failed, e, 40); len(switches(acts)) != 1 {
		t.Errorf("switches %v after the hold, want one to 6", switches(acts))
	}
	done, _ := c.Step(s, Observation{Kind: Switched, Now: t0, Took: 12 * time.Second})
	if done.Exp.Kind != NoExp || done.Pair.SwitchS != 12 || done.Follow.State.Width != 6 {
		t.Errorf("after a switch: %+v, switch time %v, follower %+v", done.Exp, done.Pair.SwitchS, done.Follow.State)
	}
}

func TestStepTrialAndProbe(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	s := c.Init(Pair{})
	e := &fakeEngine{gen: 1, width: 4, s: 0.9, ms: 5, n: 1, now: t0}
	s, acts := run(c, s, e, 4)
	var probe *Action
	for i := range acts {
		if acts[i].Op == Probe {
			probe = &acts[i]
		}
	}
	if probe == nil || probe.Rows[0] != 1 || probe.Rows[len(probe.Rows)-1] != DefaultMaxWidth {
		t.Fatalf("no probe of rows 1-%d when the load first settled: %+v", DefaultMaxWidth, acts)
	}
	v := map[int]float64{}
	for _, r := range probe.Rows {
		v[r] = 3 + 0.1*float64(r)
	}
	s, _ = c.Step(s, Observation{Kind: Probed, Now: e.now, Verify: v})
	s, acts = run(c, s, e, 30)
	if got := switches(acts); len(got) != 1 || got[0] <= 4 || s.Exp.Kind != Trialing || s.Exp.Width != got[0] || s.Follow.State.Pending != got[0] {
		t.Fatalf("with S = 0.9 at every position the model should try a wider width: switches %v, exp %+v", got, s.Exp)
	}
	for _, a := range acts {
		if a.Op == SwitchTo && !strings.Contains(a.Reason, "trial: ") {
			t.Errorf("a trial's switch does not say so: %s", a.Reason)
		}
	}
	// The trial's engine serves, slower than the default: the decision
	// that ends the trial says what it measured and where it goes.
	trial := s.Exp.Width
	s, _ = c.Step(s, Observation{Kind: Switched, Now: e.now, Took: time.Second})
	e.gen, e.width, e.ms = 2, trial, 60
	s, acts = run(c, s, e, 40)
	var ended string
	for _, a := range acts {
		if a.Op == Log && strings.Contains(a.Msg, "ended:") {
			ended = a.Msg
		}
	}
	want := fmt.Sprintf("adapt: trial of width %d at 1 request in flight ended: measured -", trial)
	if !strings.HasPrefix(ended, want) || !strings.Contains(ended, "against width 4, the width it left; back to width 4 (default width 4") {
		t.Errorf("the trial's end said %q, want %q… against width 4, the width it left; back to width 4 (default width 4…)", ended, want)
	}
	// The model overpredicted the trial: its error is kept with the pair
	// and shown.
	if te, pe := s.Pair.TrialError, s.Status(e.now).PredictionError; te >= 0 || pe == nil || *pe != te {
		t.Errorf("trial error %v (status %v), want below zero after a trial slower than predicted", te, pe)
	}
}

func TestStepDrift(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	s := measuredState(c, map[int][]float64{6: {130, 131}})
	e := &fakeEngine{gen: 1, width: 4, s: 0.8, ms: 5, n: 1, now: t0}
	s, _ = run(c, s, e, 40)
	s.Pair.Aside = map[int][]Slotted{8: {{Lo: 1, Hi: 1, Width: 6}}} // set aside under eight slots, the old traffic's
	e.s = 0.3                                                       // the traffic changed
	s, acts := run(c, s, e, 60)
	found := false
	for _, a := range acts {
		found = found || a.Op == Log && strings.Contains(a.Msg, "traffic changed")
	}
	if !found || len(s.Pair.Buckets[0].Runs[6]) != 0 || s.Pair.Aside != nil {
		t.Errorf("drift not found, or width 6's runs or what was set aside kept: %v, %v", s.Pair.Buckets[0].Runs[6], s.Pair.Aside)
	}
}

// TestStepDriftByLoad: the drift test reads a bucket against its own
// acceptance, so an acceptance that moves with the load is no change of
// traffic (on an H100 it ran 11-15 % higher at four clients than at one,
// docs/benchmark_results/h100-follow-2026-12-05.md), while a change
// within a bucket still is one.
func TestStepDriftByLoad(t *testing.T) {
	cases := []struct {
		name   string
		off    bool
		n1, n2 float64 // requests in flight before and after
		s1, s2 float64 // the acceptance before and after
		want   bool    // a change of traffic found
	}{
		{"the acceptance moves with the load: no change", false, 1, 4, 0.6, 0.7, false},
		{"the rule off: the load's acceptance read as a change", true, 1, 4, 0.6, 0.7, true},
		{"the acceptance moves within a bucket: a change", false, 4, 4, 0.7, 0.4, true},
		{"the same acceptance at both loads: no change", false, 1, 4, 0.6, 0.6, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newWithOff(Config{Default: schedule.Flat(4, "default")}, "bucket acceptance", tc.off)
			s := measuredState(c, nil)
			e := &fakeEngine{gen: 1, width: 4, s: tc.s1, ms: 5, n: tc.n1, now: t0}
			s, _ = run(c, s, e, 40)
			e.n, e.s = tc.n2, tc.s2
			_, acts := run(c, s, e, 60)
			if found := logged(acts, "traffic changed"); found != tc.want {
				t.Errorf("a change of traffic found: %v, want %v", found, tc.want)
			}
		})
	}
}

// TestDriftWeighsItsReference: the drift test weighs the uncertainty of
// the acceptance it reads against, so a bucket's acceptance learnt over
// one scrape (as on the H100 of 2026-12-07b, a few scrapes of another
// width at a new load) does not call the next scrapes a change of
// traffic, while the same difference against minutes of scrapes does.
func TestDriftWeighsItsReference(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cycles float64 // the cycles the bucket's acceptance was learnt over
		want   bool
	}{
		{"learnt over one scrape: no change", 400, false},
		{"learnt over minutes: a change", 100_000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{Default: schedule.Flat(4, "default")})
			s := measuredState(c, nil)
			bk := &s.Pair.Buckets[0]
			bk.Acc = []float64{0.6 * tc.cycles, 0.6 * tc.cycles, 0.6 * tc.cycles} // S 0.6 at every position
			bk.Cycles = []float64{tc.cycles, tc.cycles, tc.cycles}
			s.Pair.Acc, s.Pair.Cycles = slices.Clone(bk.Acc), slices.Clone(bk.Cycles)
			e := &fakeEngine{gen: 1, width: 4, s: 0.66, ms: 5, n: 1, now: t0} // 0.18 tokens a cycle more
			_, acts := run(c, s, e, 9)
			if found := logged(acts, "traffic changed"); found != tc.want {
				t.Errorf("a change of traffic found: %v, want %v", found, tc.want)
			}
		})
	}
}

// TestStepDriftUnderCheck: a bucket without an acceptance of its own
// (width 1 served it since the last change) is read against the pair's
// while the default is checked there, so the check can find a change; a
// trial there is not tested until the bucket learns its own.
func TestStepDriftUnderCheck(t *testing.T) {
	for _, tc := range []struct {
		name      string
		predicted float64 // 0: a check
		want      bool
	}{
		{"a check under width 1 finds the change", 0, true},
		{"a trial waits for the bucket's own acceptance", 120, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{Default: schedule.Flat(4, "default")})
			s := measuredState(c, nil)
			s.Pair.Acc, s.Pair.Cycles = []float64{8000, 6400, 5120}, []float64{10000, 10000, 10000} // S 0.8, 0.64, 0.51
			s.Exp = Experiment{Kind: Trialing, Width: 4, From: 1, Bucket: 0, Since: t0, Predicted: tc.predicted}
			e := &fakeEngine{gen: 1, width: 4, s: 0.3, ms: 5, n: 1, now: t0}
			_, acts := run(c, s, e, 40)
			if found := logged(acts, "traffic changed"); found != tc.want {
				t.Errorf("a change of traffic found: %v, want %v", found, tc.want)
			}
		})
	}
}

func TestStepPure(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	s := measuredState(c, map[int][]float64{4: {100}, 6: {130, 131}})
	s.Pair.Acc, s.Pair.Cycles = []float64{500, 400, 300}, []float64{1000, 1000, 1000}
	s.Pair.Buckets[0].Acc, s.Pair.Buckets[0].Cycles = []float64{500, 400, 300}, []float64{1000, 1000, 1000}
	e := &fakeEngine{gen: 1, width: 4, s: 0.7, ms: 30, n: 1, now: t0}
	for i := range 60 { // each step's input, along a run that measures
		before := fmt.Sprintf("%+v", s) // not s.clone(): that would share what clone forgets
		next, _ := c.Step(s, e.scrape())
		if after := fmt.Sprintf("%+v", s); after != before {
			t.Fatalf("step %d wrote into its argument", i)
		}
		s = next
	}
}

func TestCountersSince(t *testing.T) {
	cases := []struct {
		name     string
		cur, old Counters
		ok       bool
	}{
		{"grows", Counters{Cycles: 10, Tokens: 20, Secs: 1, Busy: 0.5, AtLeast: []float64{5, 2}}, Counters{Cycles: 5, Tokens: 8, Busy: 0.25, AtLeast: []float64{2}}, true},
		{"restarted", Counters{Cycles: 1}, Counters{Cycles: 5}, false},
		{"a family shrank", Counters{Cycles: 10, AtLeast: []float64{1}}, Counters{Cycles: 5, AtLeast: []float64{1, 1}}, false},
		{"a position went back", Counters{Cycles: 10, AtLeast: []float64{1}}, Counters{Cycles: 5, AtLeast: []float64{2}}, false},
		{"the engine's own seconds went back", Counters{Cycles: 10, Secs: 5, Busy: 1}, Counters{Cycles: 5, Secs: 2, Busy: 2}, false},
	}
	for _, tc := range cases {
		d, ok := tc.cur.since(tc.old)
		if ok != tc.ok {
			t.Errorf("%s: ok %v, want %v", tc.name, ok, tc.ok)
		}
		if ok && d.Busy != tc.cur.Busy-tc.old.Busy {
			t.Errorf("%s: busy %v, want %v", tc.name, d.Busy, tc.cur.Busy-tc.old.Busy)
		}
	}
}

// drive runs the combined rule on a fake clock for k scrapes: the load at
// each sample is load(elapsed), and every switch asked for is answered at
// once (took 1 s) with a fresh engine at its width. It returns the
// elapsed time of each switch and the switches.
func drive(c Controller, s State, e *fakeEngine, k int, load func(time.Duration) float64) (State, []time.Duration, []Action) {
	var at []time.Duration
	var sw []Action
	start := e.now
	for range k {
		for i := range 8 {
			now := e.now.Add(time.Duration(i+1) * follow.Tick)
			e.n = load(now.Sub(start))
			var acts []Action
			s, acts = c.Step(s, Observation{Kind: Sample, Now: now, Width: e.width, InFlight: e.n})
			for _, a := range acts {
				if a.Op == SwitchTo {
					at, sw = append(at, now.Sub(start)), append(sw, a)
					s, _ = c.Step(s, Observation{Kind: Switched, Now: now, Took: time.Second})
					e.gen, e.width = e.gen+1, a.Width
				}
			}
		}
		s, _ = c.Step(s, e.scrape())
	}
	return s, at, sw
}

// One switching path: the learnt schedule's width at the load's bucket,
// a trial, and a load that moves between buckets are all followed by
// internal/follow's rule: the wait repays this engine's measured switch
// time at the measured gain, and the cap per hour holds every kind.
func TestStepOneSwitchingPath(t *testing.T) {
	steady := func(n float64) func(time.Duration) float64 { return func(time.Duration) float64 { return n } }
	alt := func(d time.Duration) float64 {
		if d/time.Minute%2 == 0 {
			return 1
		}
		return 4
	}
	cases := []struct {
		name     string
		cfg      Config
		switchS  float64 // the pair's measured switch time (0: none)
		learnt   string  // a schedule set in the pair (no decisions: MinCycles out of reach); "" measured runs
		start    int
		load     func(time.Duration) float64
		scrapes  int
		want     []int
		firstMin time.Duration
		firstMax time.Duration
	}{
		{name: "measured +30 %, a 1 s switch: at once after the decision", switchS: 1, start: 4, load: steady(1), scrapes: 60,
			want: []int{6}, firstMin: 14 * time.Second, firstMax: 20 * time.Second},
		{name: "measured +30 %, a 30 s switch: after the load's stay repays it (30 s / 0.3)", switchS: 30, start: 4, load: steady(1), scrapes: 90,
			want: []int{6}, firstMin: 90 * time.Second, firstMax: 110 * time.Second},
		{name: "the load moves every minute: each move followed", cfg: Config{MinCycles: 1e12}, switchS: 1, learnt: "1:6,2-4:1,5-8:1,9+:1", start: 6,
			load: alt, scrapes: 150, want: []int{1, 6, 1, 6}, firstMin: 60 * time.Second, firstMax: 95 * time.Second},
		{name: "the cap holds the moves", cfg: Config{MinCycles: 1e12, MaxPerHour: 2}, switchS: 1, learnt: "1:6,2-4:1,5-8:1,9+:1", start: 6,
			load: alt, scrapes: 150, want: []int{1, 6}, firstMin: 60 * time.Second, firstMax: 95 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Default = schedule.Flat(4, "default")
			c := New(cfg)
			s := measuredState(c, map[int][]float64{6: {130, 131}})
			if tc.learnt != "" {
				s = c.Init(Pair{})
				sc, err := schedule.Parse(tc.learnt, "learnt")
				if err != nil {
					t.Fatal(err)
				}
				s.Pair.Schedule = sc
			}
			s.Pair.SwitchS = tc.switchS
			e := &fakeEngine{gen: 1, width: tc.start, s: 0.7, n: 1, now: t0}
			e.ms = 1000 * (1 + 0.7*float64(tc.start-1)) / 100 // the default runs at 100
			_, at, sw := drive(c, s, e, tc.scrapes, tc.load)
			var got []int
			for _, a := range sw {
				got = append(got, a.Width)
				if a.Bucket == "" || a.Load <= 0 || !strings.Contains(a.Reason, fmt.Sprintf("(mean %.1f)", a.Load)) {
					t.Errorf("a switch without its load: %+v", a)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("switches %v at %v, want %v", got, at, tc.want)
			}
			if at[0] < tc.firstMin || at[0] > tc.firstMax {
				t.Errorf("first switch at %v, want between %v and %v", at[0], tc.firstMin, tc.firstMax)
			}
		})
	}
}

// A change of traffic keeps what was measured under the old one (a
// Regime); when the serving width's tokens per cycle say that traffic is
// back, it is taken back instead of learnt again.
func TestStepRegimes(t *testing.T) {
	one := func(time.Duration) float64 { return 1 }
	old := func(s State) bool { // a run measured before the first change (engines 600, 601)
		for _, r := range s.Pair.Buckets[0].Runs[6] {
			if r.Engine >= 600 {
				return true
			}
		}
		return false
	}
	for _, off := range []bool{false, true} {
		cfg := Config{Default: schedule.Flat(4, "default"), SwitchS: 1, MaxPerHour: 1000, Off: map[string]bool{"trials": true}}
		if off {
			cfg.Off["regimes"] = true
		}
		c := New(cfg)
		s := measuredState(c, map[int][]float64{4: {60}, 6: {130, 131}})
		e := &fakeEngine{gen: 1, width: 6, s: 0.8, ms: 5, n: 1, now: t0}
		s, _, _ = drive(c, s, e, 40, one) // width 6 learnt under the first traffic
		e.s = 0.3                         // another traffic
		s, _, _ = drive(c, s, e, 40, one)
		if len(s.Pair.Regimes) != map[bool]int{false: 1, true: 0}[off] || old(s) {
			t.Fatalf("off %v: %d regimes, width 6's runs %v after the change", off, len(s.Pair.Regimes), s.Pair.Buckets[0].Runs[6])
		}
		e.s = 0.8 // the first traffic again
		s, _, _ = drive(c, s, e, 40, one)
		if old(s) == off {
			t.Errorf("off %v: width 6's runs %v: the first traffic's taken back %v", off, s.Pair.Buckets[0].Runs[6], old(s))
		}
	}
}

// Width 1 drafts nothing, so no change of traffic shows while it serves:
// where the traffic has been seen to change, the default is measured again
// (a check) once its last measure is older than the last gap between
// changes, unless every traffic seen before served width 1 here too.
func TestStepCheckUnderClassic(t *testing.T) {
	fiveAgo := t0.Add(-5 * time.Minute)
	classic := Regime{At: fiveAgo, Runs: []map[int][]Run{{1: {{Engine: 9, Tokens: 600 * 150, Secs: 600, Cycles: 600 * 150, Scrapes: 30}}, 4: {{Engine: 8, Tokens: 600 * 100, Secs: 600, Cycles: 20_000, Scrapes: 30}}}, {}, {}, {}}}
	cases := []struct {
		name    string
		changes []time.Time
		regimes []Regime
		off     bool
		want    []int
	}{
		{"a change seen: the default checked", []time.Time{fiveAgo}, nil, false, []int{4}},
		{"no change seen: no check", nil, nil, false, nil},
		{"the rule off: no check", []time.Time{fiveAgo}, nil, true, nil},
		{"the other traffic served width 1 here too: no check", []time.Time{fiveAgo}, []Regime{classic}, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Default: schedule.Flat(4, "default"), SwitchS: 1, Off: map[string]bool{"trials": true, "check": tc.off}}
			c := New(cfg)
			s := measuredState(c, map[int][]float64{4: {100}, 1: {150, 151}})
			s.Pair.Changes, s.Pair.Regimes = tc.changes, tc.regimes
			s.Load.Since = t0.Add(-10 * time.Minute)
			e := &fakeEngine{gen: 1, width: 1, ms: 1000.0 / 150, n: 1, now: t0}
			_, _, sw := drive(c, s, e, 30, func(time.Duration) float64 { return 1 })
			var got []int
			if len(sw) > 0 {
				got = []int{sw[0].Width}
				if !strings.Contains(sw[0].Reason, "check: ") {
					t.Errorf("the switch does not say it is a check: %s", sw[0].Reason)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("switches %v, want %v", got, tc.want)
			}
		})
	}
}

// A probe that stopped early is said once, with why (as the shell put it)
// and how much it measured, its count in the right number; the load it
// was asked for is said with the count's own number too.
func TestProbeStoppedSaidOnce(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	s := c.Init(Pair{})
	e := &fakeEngine{gen: 1, width: 4, s: 0.9, ms: 5, n: 1, now: t0}
	s, acts := run(c, s, e, 4)
	for _, a := range acts {
		if a.Op == Probe && !strings.HasSuffix(a.Reason, "for 1 request in flight") {
			t.Errorf("the probe's reason %q does not say 1 request in flight", a.Reason)
		}
	}
	for _, n := range []int{0, 1, 3} {
		v := map[int]float64{}
		for r := 1; r <= n; r++ {
			v[r] = 3
		}
		_, acts = c.Step(s, Observation{Kind: Probed, Now: e.now, Verify: v, Err: "cut by a switch of the serving engine (EOF)"})
		var said []string
		for _, a := range acts {
			if a.Op == Log {
				said = append(said, a.Msg)
			}
		}
		want := map[int]string{0: "with 0 row counts measured", 1: "with 1 row count measured", 3: "with 3 row counts measured"}[n]
		if len(said) != 1 || !strings.Contains(said[0], "the probe stopped, cut by a switch of the serving engine (EOF), "+want) {
			t.Errorf("%d rows measured: logged %q, want one line saying it was cut by a switch %s", n, said, want)
		}
	}
}

// A probe that a switch of the serving engine cut is no probe tried: the
// rows it lacks are asked for again at once, of the engine that serves
// now; one that failed on its own waits RetryAfter (a user pass on the sim:
// after a cut, no untried width could be priced for half an hour).
func TestProbeCutBySwitchIsAskedAgain(t *testing.T) {
	isProbe := func(a Action) bool { return a.Op == Probe }
	for _, cut := range []bool{true, false} {
		c := New(Config{Default: schedule.Flat(4, "default")})
		s := c.Init(Pair{})
		e := &fakeEngine{gen: 1, width: 4, s: 0.9, ms: 5, n: 1, now: t0}
		s, acts := run(c, s, e, 4)
		if !slices.ContainsFunc(acts, isProbe) {
			t.Fatalf("no probe asked for: %v", acts)
		}
		_, acts = c.Step(s, Observation{Kind: Probed, Now: e.now, Err: "cut by a switch of the serving engine (EOF)", Cut: cut})
		if asked := slices.ContainsFunc(acts, isProbe); asked != cut {
			t.Errorf("cut %v: probe asked for again %v, want %v; %v", cut, asked, cut, acts)
		}
		if cut && !logged(acts, "the rows it lacks are probed again on the engine that serves now") {
			t.Errorf("the cut probe's line does not say it is asked for again: %v", acts)
		}
	}
}

// The end of an experiment is said: a trial or a check judged, with what
// it measured against the width it left, or one a decision elsewhere came
// before.
func TestExperimentEndIsSaid(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default"), SwitchS: 1})
	cases := []struct {
		name    string
		runs    map[int][]float64
		serving int
		exp     Experiment
		want    string
	}{
		{"a trial judged slower", map[int][]float64{4: {100}, 8: {90}}, 8, Experiment{Kind: Trialing, Width: 8, From: 4, Predicted: 130},
			"adapt: trial of width 8 at 1 request in flight ended: measured -10.0% against width 4, the width it left; back to width 4"},
		{"a trial judged faster", map[int][]float64{4: {100}, 8: {130, 131}}, 8, Experiment{Kind: Trialing, Width: 8, From: 4, Predicted: 130},
			"adapt: trial of width 8 at 1 request in flight ended: measured +30.5% against width 4, the width it left; width 8 stays"},
		{"a check under classic", map[int][]float64{1: {120, 121}, 4: {100}}, 4, Experiment{Kind: Trialing, Width: 4, From: 1},
			"adapt: check of width 4 at 1 request in flight ended: measured -17.0% against width 1, the width it left; back to width 1"},
		{"a trial another decision came before", map[int][]float64{4: {100}}, 4, Experiment{Kind: Trialing, Width: 8, From: 4, Predicted: 130, Ran: true},
			"adapt: trial of width 8 at 1 request in flight ended unjudged: a decision at 1 request in flight with width 4 serving came first"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := measuredState(c, tc.runs)
			s.Engine.Width, s.Exp = tc.serving, tc.exp
			var got []string
			for _, a := range c.decide(&s, 0, t0) {
				if a.Op == Log && strings.Contains(a.Msg, "ended") {
					got = append(got, a.Msg)
				}
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
				t.Errorf("said %q, want %q", got, tc.want)
			}
			if s.Exp.Kind == Trialing && s.Exp.Width == tc.exp.Width {
				t.Errorf("the experiment is still under way: %+v", s.Exp)
			}
		})
	}
}

// A judged trial the model over-predicted by more than a trial must gain
// (overPredicted) and that lost against the width it left is said at
// warn, with what to do; a near miss is not, nor one whose width won all
// the same or lost nothing (said at info).
func TestOverPredictedTrialWarns(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default"), SwitchS: 1})
	for _, tc := range []struct {
		name      string
		predicted float64
		measured  float64 // the trial's width; width 4 measured 100
		warn      bool
		kept      bool
		noLoss    bool // said at info: it lost nothing against width 4
		noBase    bool // width 4 has no measure: no loss is shown
	}{
		{"predicted 130, measured 90: -31%", 130, 90, true, false, false, false},
		{"predicted 95, measured 90: -5%", 95, 90, false, false, false, false},
		{"predicted 260, measured 130: -50%, kept", 260, 130, false, true, false, false},
		{"predicted 119.3, measured 104.5: -12%, no loss", 119.3, 104.5, false, false, true, false},
		{"predicted 130, measured 90, width 4 not measured: -31%", 130, 90, true, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := map[int][]float64{4: {100}, 8: {tc.measured}}
			if tc.noBase {
				delete(runs, 4)
			}
			s := measuredState(c, runs)
			s.Engine.Width, s.Exp = 8, Experiment{Kind: Trialing, Width: 8, From: 4, Predicted: tc.predicted}
			acts := c.decide(&s, 0, t0)
			warned := slices.ContainsFunc(acts, func(a Action) bool {
				return a.Op == Warn && strings.Contains(a.Msg, "over-predicted") && strings.Contains(a.Msg, "tune this pair")
			})
			kept := logged(acts, "width 8 is kept, though the model over-predicted its trial")
			noLoss := logged(acts, "though width 8 lost nothing against width 4")
			if warned != tc.warn || kept != tc.kept || noLoss != tc.noLoss {
				t.Errorf("warned %v, want %v; kept said %v, want %v; no loss said %v, want %v (trial error %.2f): %v", warned, tc.warn, kept, tc.kept, noLoss, tc.noLoss, s.Pair.TrialError, acts)
			}
		})
	}
}

// A trial whose width has not served yet (the follower's stay for its
// predicted gain not yet over) is not ended by a decision at its bucket:
// on the sim one predicted +2.2 % was dropped unjudged 10 s after it was
// chosen, its width barred for 30 minutes, and another chosen (a
// campaign). Once its width has served, a decision there judges it.
func TestTrialNotEndedBeforeItRuns(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default"), SwitchS: 1})
	s := measuredState(c, map[int][]float64{4: {100}})
	s.Engine.Width = 4
	s.Exp = Experiment{Kind: Trialing, Width: 3, From: 4, Bucket: 0, Since: t0, Reason: "width 3 predicted +2.2%", Predicted: 102.2}
	if acts := c.decide(&s, 0, t0); len(acts) != 0 || s.Exp.Kind != Trialing || s.Exp.Width != 3 {
		t.Fatalf("a decision before the trial's width served: %+v, exp %+v; want the trial left be", acts, s.Exp)
	}
	// Not for ever: past the follower's stay for it (1 s / 2.2 % = 45 s)
	// and a window, a decision ends it.
	late := s.clone()
	if acts := c.decide(&late, 0, t0.Add(2*time.Minute)); !logged(acts, "ended unjudged") || late.Exp.Kind == Trialing {
		t.Errorf("a decision 2 minutes on, the trial never served: %+v, exp %+v; want it ended", acts, late.Exp)
	}
	s, _ = c.Step(s, Observation{Kind: Sample, Now: t0.Add(follow.Tick), Width: 3, InFlight: 1})
	s.Engine.Width = 4 // served, then left
	acts := c.decide(&s, 0, t0.Add(time.Minute))
	if !logged(acts, "ended unjudged") || s.Exp.Kind == Trialing {
		t.Errorf("a decision after the trial's width served: %+v, exp %+v; want it ended", acts, s.Exp)
	}
}

// TestUnlike: beyond DriftZ standard errors is a change; where every
// draft token is accepted the variance is 0, and rounding is no change.
func TestUnlike(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	cases := []struct {
		t, want, v float64
		unlike     bool
	}{
		{4, 4, 0, false},
		{4 + 4e-12, 4, 0, false},
		{4.1, 4, 0, true},
		{3.0, 2.9, 0.0009, false}, // 0.1 within 4 × 0.03
		{3.0, 2.8, 0.0009, true},  // 0.2 beyond it
	}
	for _, tc := range cases {
		if got := c.unlike(tc.t, tc.want, tc.v); got != tc.unlike {
			t.Errorf("unlike(%v, %v, %v) = %v, want %v", tc.t, tc.want, tc.v, got, tc.unlike)
		}
	}
}

func TestTokensPerCycle(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	const n = 1000 // cycles observed at each position, past MinCycles
	pair := func(s ...float64) Pair {
		var p Pair
		for _, v := range s {
			p.Acc, p.Cycles = append(p.Acc, v*n), append(p.Cycles, n)
		}
		return p
	}
	cases := []struct {
		name        string
		p           Pair
		w           int
		extrapolate bool
		want        float64
		ok          bool
	}{
		{"observed only", pair(0.8, 0.6, 0.5), 4, false, 2.9, true},
		{"one past, not extrapolating", pair(0.8, 0.6, 0.5), 5, false, 0, false},
		// S(4) = 0.5 · 0.5/0.6, S(5) = S(4) · 0.5/0.6.
		{"the last ratio continues", pair(0.8, 0.6, 0.5), 6, true, 2.9 + 0.5*(5.0/6) + 0.5*(25.0/36), true},
		// One position: S(0) = 1, so S(k) = 0.8^k.
		{"one position is α", pair(0.8), 4, true, 1 + 0.8 + 0.64 + 0.512, true},
		// A ratio above 1 (noise) is held at 1: S(3) = 0.6, not 0.72.
		{"ratio at most 1", pair(0.5, 0.6), 4, true, 2.7, true},
		// Two zeros: the ratio is 0/0, and the tail is 0.
		{"a zero tail", pair(0.5, 0, 0), 5, true, 1.5, true},
		// A position seen over fewer than MinCycles cycles is not observed.
		{"too few cycles", Pair{Acc: []float64{800, 600, 5}, Cycles: []float64{1000, 1000, 10}}, 4, false, 0, false},
		{"too few cycles, extrapolated", Pair{Acc: []float64{800, 600, 5}, Cycles: []float64{1000, 1000, 10}}, 4, true, 2.85, true},
		{"nothing observed", Pair{}, 3, true, 0, false},
		{"classic needs none", Pair{}, 1, false, 1, true},
	}
	for _, tc := range cases {
		got, ok := c.tokensPerCycle(tc.p, tc.w, tc.extrapolate)
		if ok != tc.ok || !(math.Abs(got-tc.want) <= 1e-9) { // NaN fails
			t.Errorf("%s: tokensPerCycle(w=%d) = %v, %v; want %v, %v", tc.name, tc.w, got, ok, tc.want, tc.ok)
		}
	}
	off := New(Config{Default: schedule.Flat(4, "default"), Off: map[string]bool{"extrapolation": true}})
	if _, ok := off.tokensPerCycle(pair(0.8, 0.6), 5, true); ok {
		t.Error(`with "extrapolation" off, width 5 from 2 positions was predicted`)
	}
}

// Classic's prediction with several in flight carries ClassicLive, and
// ClassicLoad by how many, over the probe's rows, which run in step; with
// one in flight, without them, or with the rule off it is the probe's own
// (the H100 run of 2026-12-06f).
func TestClassicLoad(t *testing.T) {
	state := func(n float64, slots int) *State {
		return &State{Pair: Pair{Verify: map[int]float64{1: 3, 4: 4, 8: 6, 3: 4, 2: 4}, Buckets: []Bucket{{Lo: 1, Hi: 0, N: n}}}, Engine: Engine{Slots: slots}}
	}
	for _, tc := range []struct {
		name  string
		cfg   Config
		n     float64
		want  float64
		slots int
	}{
		{"both, four in flight on one slot: one decodes", Config{ClassicLive: LlamaClassicLive, ClassicLoad: LlamaClassicLoad}, 4, 1000.0 / 3, 1},
		{"both, eight in flight on four slots: four decode", Config{ClassicLive: LlamaClassicLive, ClassicLoad: LlamaClassicLoad}, 8, 1000 / (4 * LlamaClassicLive * LlamaClassicLoad), 4},
		{"four in flight", Config{ClassicLoad: LlamaClassicLoad}, 4, 1000 / (4 * LlamaClassicLoad), 0},
		{"one in flight", Config{ClassicLoad: LlamaClassicLoad}, 1, 1000.0 / 3, 0},
		{"two and a half in flight: half of it", Config{ClassicLoad: LlamaClassicLoad}, 2.5, 1000 / (4 * (1 + (LlamaClassicLoad-1)/2)), 0},
		{"eight in flight: all of it", Config{ClassicLoad: LlamaClassicLoad}, 8, 1000 / (6 * LlamaClassicLoad), 0},
		{"an engine without it", Config{}, 4, 1000.0 / 4, 0},
		{"the rule off", Config{ClassicLoad: LlamaClassicLoad, Off: map[string]bool{"classic load": true}}, 4, 1000.0 / 4, 0},
		{"both, four in flight", Config{ClassicLive: LlamaClassicLive, ClassicLoad: LlamaClassicLoad}, 4, 1000 / (4 * LlamaClassicLive * LlamaClassicLoad), 0},
		{"both, two and a half: the live one whole", Config{ClassicLive: LlamaClassicLive, ClassicLoad: LlamaClassicLoad}, 2.5, 1000 / (4 * LlamaClassicLive * (1 + (LlamaClassicLoad-1)/2)), 0},
		{"both, one in flight: none", Config{ClassicLive: LlamaClassicLive, ClassicLoad: LlamaClassicLoad}, 1, 1000.0 / 3, 0},
		{"both, the rule off", Config{ClassicLive: LlamaClassicLive, ClassicLoad: LlamaClassicLoad, Off: map[string]bool{"classic load": true}}, 4, 1000.0 / 4, 0},
	} {
		tc.cfg.Default = schedule.Flat(4, "default")
		got, ok := New(tc.cfg).predict(state(tc.n, tc.slots), 0, 1)
		if !ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: predict(classic) = %v, %v; want %v", tc.name, got, ok, tc.want)
		}
	}
}

// Classic under load is priced as the sim charges it, at every count in
// flight: the predicted time a token over the probe's rows is the sim's
// classic cycle of n sequences over its verify of n rows (varied
// lengths). With ClassicLoad alone it was 1.054 times faster at four.
func TestClassicPricedAsTheSim(t *testing.T) {
	m := simcost.H200Q8()
	m.VariedLengths = true
	c := New(Config{Default: schedule.Flat(4, "default"), ClassicLive: LlamaClassicLive, ClassicLoad: LlamaClassicLoad})
	for _, n := range []int{2, 3, 4, 6} {
		v := m.VerifyRowsMS(n)
		s := &State{Pair: Pair{Verify: map[int]float64{n: v}, Buckets: []Bucket{{Lo: 1, N: float64(n)}}}}
		rate, ok := c.predict(s, 0, 1)
		if got, want := 1000/rate, m.CycleMS(1, n); !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("%d in flight: classic priced %.4f ms a token, the sim's %.4f", n, got, want)
		}
	}
}

// A scrape whose interval the probe shared adds nothing to the width's
// runs: the probe's requests took the engine's time from the traffic.
func TestStepProbeApart(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  bool
		want int // scrapes the probed one adds
	}{
		{"apart", false, 0},
		{"rule off", true, 1},
	} {
		c := newWithOff(Config{Default: schedule.Flat(4, "default")}, "probe apart", tc.off)
		e := &fakeEngine{gen: 1, width: 4, s: 0.7, ms: 5, n: 1, now: t0}
		s, _ := run(c, c.Init(Pair{}), e, 6)
		scrapes := func(s State) int {
			n := 0
			for _, r := range s.Pair.Buckets[s.Load.Bucket].Runs[4] {
				n += r.Scrapes
			}
			return n
		}
		before := scrapes(s)
		if before == 0 {
			t.Fatalf("%s: no run of width 4 after 6 scrapes", tc.name)
		}
		o := e.scrape()
		o.Probing = true
		s, _ = c.Step(s, o)
		if got := scrapes(s) - before; got != tc.want {
			t.Errorf("%s: a probed scrape added %d scrapes to the run, want %d", tc.name, got, tc.want)
		}
		s, _ = c.Step(s, e.scrape())
		if got := scrapes(s) - before; got != tc.want+1 {
			t.Errorf("%s: the next scrape left the run at +%d scrapes, want +%d", tc.name, got, tc.want+1)
		}
	}
}

// One probe at a time: as the load ramps through buckets while a probe
// runs, no second probe is asked for (two probes of one engine evict each
// other's prefix and both fail); each bucket passed is said once, carries
// no RetryAfter for a probe that never ran, and the bucket the load is in
// when the probe ends is probed then, not the ones it left.
func TestOneProbeAtATime(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	s := c.Init(Pair{})
	e := &fakeEngine{gen: 1, width: 4, s: 0.9, ms: 5, n: 1, now: t0}
	var all []Action
	for _, n := range []float64{1, 2, 4, 6} {
		e.n = n
		var acts []Action
		s, acts = run(c, s, e, 10)
		all = append(all, acts...)
	}
	var probes []Action
	for _, a := range all {
		if a.Op == Probe {
			probes = append(probes, a)
		}
	}
	if len(probes) != 1 || !strings.HasSuffix(probes[0].Reason, "for 1 request in flight") {
		t.Fatalf("probes asked for while one runs: %+v", probes)
	}
	for _, b := range []string{"2-4", "5-8"} {
		n := 0
		for _, a := range all {
			if a.Op == Log && strings.HasPrefix(a.Msg, "adapt: not probing") && strings.Contains(a.Msg, "for "+b+" requests in flight now: the probe for 1 request in flight is under way") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("the probe skipped for %s is said %d times, want once", b, n)
		}
	}
	for i, bk := range s.Pair.Buckets[1:] {
		if !bk.Tried[0].IsZero() {
			t.Errorf("bucket %d's probe never ran but waits out RetryAfter (tried %v)", i+1, bk.Tried[0])
		}
	}
	// The probe for 1 fails; the load sits at 5-8, which is probed now.
	s, acts := c.Step(s, Observation{Kind: Probed, Now: e.now, Err: "failed: prefix was not reused"})
	probes = nil
	for _, a := range acts {
		if a.Op == Probe {
			probes = append(probes, a)
		}
	}
	if len(probes) != 1 || !strings.HasSuffix(probes[0].Reason, "for 5-8 requests in flight") || s.Probe.Bucket != 2 {
		t.Fatalf("when the probe ends, the bucket the load is in (5-8) is not probed: %+v", acts)
	}
	// The probe before traffic answers no Probe action: the one under way goes on.
	if s2, _ := c.Step(s, Observation{Kind: Probed, Now: e.now, Verify: map[int]float64{1: 3}, Before: true}); s2.Probe.Since.IsZero() {
		t.Errorf("the probe before traffic ended the probe under load")
	}
	s, _ = c.Step(s, Observation{Kind: Probed, Now: e.now, Verify: map[int]float64{6: 3}})
	if !s.Probe.Since.IsZero() {
		t.Errorf("the probe's answer did not end it: %+v", s.Probe)
	}
}

// An idle gap starts the load window again: six clients, then the
// requests' tail with nothing in flight, then 20 s idle, then one client.
// Nothing moves the load while nothing is in flight, the idle spell
// measures no bucket, and the one client's scrapes are neither counted
// under the six clients' bucket nor averaged with it: the load moves
// straight to 1, and only 1 is probed.
func TestIdleGapStartsTheLoadWindowAgain(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	s := c.Init(Pair{})
	e := &fakeEngine{gen: 1, width: 4, s: 0.9, ms: 5, n: 6, now: t0}
	s, _ = run(c, s, e, 10)
	if s.Load.Bucket != 2 {
		t.Fatalf("six clients: bucket %d, want 2 (5-8)", s.Load.Bucket)
	}
	s, _ = c.Step(s, Observation{Kind: Probed, Now: e.now, Err: "failed: test"})
	var all []Action
	step := func(o Observation) {
		var acts []Action
		s, acts = c.Step(s, o)
		all = append(all, acts...)
	}
	e.n = 0.5 // the last requests end: tokens, but nothing in flight at the scrape
	o := e.scrape()
	o.InFlight = 0
	step(o)
	e.n = 0
	var acts []Action
	s, acts = run(c, s, e, 10) // 20 s idle
	all = append(all, acts...)
	if logged(all, "load moved") || len(slices.DeleteFunc(slices.Clone(all), func(a Action) bool { return !strings.HasPrefix(a.Msg, "adapt: no request in flight for 10s") })) != 1 {
		t.Errorf("the tail and the idle spell: logged %+v, want no move and the gap once", all)
	}
	idle := s
	all = nil
	if st := s.Status(e.now); s.Load.Bucket != -1 || st.Measuring != "" {
		t.Errorf("idle for 20 s: bucket %d, measuring %q; want none", s.Load.Bucket, st.Measuring)
	}
	runs := len(s.Pair.Buckets[2].Runs[4])
	e.n = 1
	for range 10 {
		s, acts = run(c, s, e, 1)
		all = append(all, acts...)
	}
	if got := len(s.Pair.Buckets[2].Runs[4]); got != runs || s.Pair.Buckets[2].Runs[4][runs-1].Scrapes != idle.Pair.Buckets[2].Runs[4][runs-1].Scrapes {
		t.Errorf("one client's scrapes were counted under 5-8")
	}
	var moved []string
	for _, a := range all {
		if a.Op == Log && strings.Contains(a.Msg, "load moved") {
			moved = append(moved, a.Msg)
		}
		if a.Op == Probe && !strings.HasSuffix(a.Reason, "for 1 request in flight") {
			t.Errorf("a probe for a bucket the load is not in: %s", a.Reason)
		}
	}
	if len(moved) != 1 || !strings.HasPrefix(moved[0], "adapt: load moved to 1 request in flight (mean 1.0)") {
		t.Errorf("one client after the gap: logged %q, want one move to 1", moved)
	}
	if !slices.ContainsFunc(all, func(a Action) bool { return a.Op == Probe }) {
		t.Errorf("no probe for 1 request in flight")
	}
}

// A new safe answer (a reload resolved another default) replaces the
// default where nothing was decided and keeps what was: the buckets keep
// their runs, and with the same edges the load's reading goes on.
func TestRedefaultKeepsWhatWasDecided(t *testing.T) {
	c := New(Config{Default: schedule.Flat(5, "default")})
	s := measuredState(c, map[int][]float64{6: {130, 131}})
	s.Pair.Schedule[0].Width, s.Pair.Schedule[0].Source = 6, "measured +30%"
	// A bucket decided at the old default ("default width 5", the safe
	// answer) takes the new one, as one never decided does: a campaign saw
	// a capability edit keep the old default and switch back to it.
	s.Pair.Schedule[1].Source = "default width 5"
	nc, ns := c.Redefault(s, schedule.Flat(16, "kind-default"))
	if got := ns.Pair.Schedule.String(); got != "1:6,2-4:16,5-8:16,9+:16" {
		t.Errorf("schedule %s after the new default, want 1:6,2-4:16,5-8:16,9+:16", got)
	}
	if len(ns.Pair.Buckets[0].Runs[6]) != 2 || ns.Load.Bucket != 0 || nc.Config().Default.String() != "1+:16" {
		t.Errorf("runs %v, load bucket %d, default %s", ns.Pair.Buckets[0].Runs, ns.Load.Bucket, nc.Config().Default)
	}
	if s.Pair.Schedule[1].Width != 5 {
		t.Errorf("Redefault wrote into its argument")
	}
	// A trial's way back pending at the old default is not taken into the
	// new one: the new default serves there (a review found Back kept).
	s.Exp.Back, s.Exp.Bucket = 5, 1
	if _, ns = c.Redefault(s, schedule.Flat(16, "kind-default")); ns.Exp.Back != 0 {
		t.Errorf("way back to width %d kept through a new default", ns.Exp.Back)
	}
	s.Exp.Back = 0
	// Another edge splits the buckets: the load is read again.
	_, ns = c.Redefault(s, schedule.Schedule{{Lo: 1, Hi: 2, Width: 8}, {Lo: 3, Width: 4}})
	if ns.Load.Bucket != -1 || len(ns.Pair.Buckets) != 5 {
		t.Errorf("new edges: load bucket %d, %d buckets; want -1 and 5", ns.Load.Bucket, len(ns.Pair.Buckets))
	}
}

// probed is s after e's first 4 scrapes at one request and the probe
// they ask for, each row r priced verify(r) ms.
func probed(c Controller, s State, e *fakeEngine, verify func(r int) float64) State {
	s, acts := run(c, s, e, 4)
	v := map[int]float64{}
	for _, a := range acts {
		for _, r := range a.Rows {
			v[r] = verify(r)
		}
	}
	s, _ = c.Step(s, Observation{Kind: Probed, Now: e.now, Verify: v})
	return s
}

// TestNoTrialSaysWhy: a stay line names what held every trial back.
func TestNoTrialSaysWhy(t *testing.T) {
	cases := []struct {
		n    noTrial
		want string
	}{
		{noTrial{width: 6, rate: 103, unpriced: 2}, "no trial: the fastest predicted, width 6, is +3.0% against width 4, short of the 5.0% a trial needs; 2 other widths not priced (the probe lacks their verify rows, or nothing measured at this load gives their drafting cost)"},
		{noTrial{unpriced: 16}, "no trial: no untried width can be priced yet (16 widths: the probe lacks their verify rows, or nothing measured at this load gives their drafting cost)"},
		{noTrial{unpriced: 1, tried: 2}, "no trial: no untried width can be priced yet (1 width: the probe lacks their verify rows, or nothing measured at this load gives their drafting cost); 2 tried lately"},
		{noTrial{tried: 2}, "no trial: no width is predicted faster than width 4; 2 tried lately"},
		{noTrial{width: 2, rate: 99, tried: 3}, "no trial: the fastest predicted, width 2, is -1.0% against width 4, short of the 5.0% a trial needs; 3 tried lately"},
	}
	for _, tc := range cases {
		if got := tc.n.String(4, 100, 0.05); got != tc.want {
			t.Errorf("%+v:\n got %q\nwant %q", tc.n, got, tc.want)
		}
	}
}

// TestStayLineSaysWhyNoTrial: with every width priced and none predicted
// to clear the noise, the stay line says which came closest.
func TestStayLineSaysWhyNoTrial(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	s := c.Init(Pair{})
	e := &fakeEngine{gen: 1, width: 4, s: 0.5, ms: 5, n: 1, now: t0}
	s = probed(c, s, e, func(r int) float64 { return 3 + 1.5*float64(r) }) // each row costs: no other width pays
	_, acts := run(c, s, e, 30)
	if len(switches(acts)) != 0 {
		t.Fatalf("switched %v where no width should pay", switches(acts))
	}
	if !logged(acts, "adapt: stay at width 4 at 1 request in flight: default width 4; no trial: the fastest predicted, width ") {
		t.Errorf("no stay line says why no width was tried: %+v", acts)
	}
}

// The same stay is logged once, then again after stayRepeat, not at each
// decision, where its percentages move from one to the next (an operator
// campaign: the same line every 10 s); the status has every decision.
func TestStayLoggedOnceUntilRepeat(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	s := c.Init(Pair{})
	e := &fakeEngine{gen: 1, width: 4, s: 0.5, ms: 5, n: 1, now: t0}
	s = probed(c, s, e, func(r int) float64 { return 3 + 1.5*float64(r) })
	stays := func(acts []Action) (n int) {
		for _, a := range acts {
			if a.Op == Log && strings.HasPrefix(a.Msg, "adapt: stay at") {
				n++
			}
		}
		return n
	}
	s, acts := run(c, s, e, 60) // two minutes: several decisions
	if n := stays(acts); n != 1 || s.Pair.Decisions < 3 {
		t.Fatalf("%d stay lines over %d decisions, want 1", n, s.Pair.Decisions)
	}
	if !strings.Contains(s.Engine.Last.Reason, "no trial") {
		t.Errorf("the last decision %q, want its stay in the status", s.Engine.Last.Reason)
	}
	_, acts = run(c, s, e, int(stayRepeat/(2*time.Second))) // ten minutes more
	if n := stays(acts); n != 1 {
		t.Errorf("%d stay lines in the next %v, want 1", n, stayRepeat)
	}
}

// The shape of a stay keeps its widths and loads, not its measures.
func TestStayShape(t *testing.T) {
	a := stayShape(noTrialStay(17, 1.020))
	b := stayShape(noTrialStay(17, 1.021))
	c := stayShape(noTrialStay(12, 1.021)) // another width priced fastest: the same stay
	d := stayShape(noTrialStay(17, 0.999)) // the best prediction on the other side of the base: one shape
	e := stayShape(strings.Replace(noTrialStay(17, 1.020), "stay at width 16", "stay at width 12", 1))
	if a != b || a != c || a != d || a == e {
		t.Errorf("shapes:\n%s\n%s\n%s\n%s\n%s\nwant the first four equal, the fifth (another width staying) not", a, b, c, d, e)
	}
}

// noTrialStay is a stay line whose best prediction is width w at ratio r
// of width 16's rate.
func noTrialStay(w int, r float64) string {
	return "adapt: stay at width 16 at 1 request in flight: default width 16; " + noTrial{width: w, rate: 100 * r}.String(16, 100, 0.08)
}

// TestNoTrialTheCapCannotUndo: a trial is begun only where the hourly cap
// leaves the two switches it needs (there, and back); else the stay line
// says so and nothing is asked of the follower. Before, a check the cap
// held back was asked for again at every decision, and a trial the cap
// let in but not out stranded the engine at the width tried.
func TestNoTrialTheCapCannotUndo(t *testing.T) {
	for _, tc := range []struct {
		perHour int
		trial   bool
	}{{1, false}, {2, true}, {0, true}} {
		c := New(Config{Default: schedule.Flat(4, "default"), MaxPerHour: tc.perHour})
		s := c.Init(Pair{})
		e := &fakeEngine{gen: 1, width: 4, s: 0.9, ms: 5, n: 1, now: t0}
		s = probed(c, s, e, func(r int) float64 { return 3 + 0.1*float64(r) })
		s, acts := run(c, s, e, 30)
		if got := s.Exp.Kind == Trialing; got != tc.trial || (len(switches(acts)) > 0) != tc.trial {
			t.Errorf("cap %d an hour: trial %v, switches %v; want a trial %v", tc.perHour, got, switches(acts), tc.trial)
		}
		if !tc.trial && !logged(acts, "no trial: the hourly cap on switches leaves 1, and a trial needs 2 (there and back)") {
			t.Errorf("cap %d an hour: no stay line says the cap held the trial back: %+v", tc.perHour, acts)
		}
	}
}

// TestRetrialOfAWidthAheadInsideTheNoise: a trial of classic whose one
// engine ran ahead of the default, but inside the noise, is undone, then
// measured again on a second engine while the model (the verify cost of
// one row, which classic's own run does not move) still predicts it
// passes; with "retrial" off, it is not.
func TestRetrialOfAWidthAheadInsideTheNoise(t *testing.T) {
	for _, off := range []bool{false, true} {
		c := newWithOff(Config{Default: schedule.Flat(4, "default")}, "retrial", off)
		s := c.Init(Pair{})
		e := &fakeEngine{gen: 1, width: 4, s: 0.1, ms: 5, n: 1, now: t0}
		s = probed(c, s, e, func(r int) float64 { return 2 + 0.5*float64(r) })
		s, _ = run(c, s, e, 30)
		if s.Exp.Kind != Trialing || s.Exp.Width != 1 {
			t.Fatalf("no trial of classic to start from: %+v", s.Exp)
		}
		// Classic's engine runs 6 % ahead of width 4: above one engine's
		// spread at one request, inside the bound of one run against one.
		s, _ = c.Step(s, Observation{Kind: Switched, Now: e.now, Took: time.Second})
		e.gen, e.width, e.ms = 2, 1, 1/(1.3/5*1.06)
		s, acts := run(c, s, e, 20)
		if !logged(acts, "back to width 4") {
			t.Fatalf("the trial of classic was not undone inside the noise: %+v", acts)
		}
		s, _ = c.Step(s, Observation{Kind: Switched, Now: e.now, Took: time.Second})
		e.gen, e.width, e.ms = 3, 4, 5
		s, acts = run(c, s, e, 20)
		again := logged(acts, "adapt: trial of width 1 at 1 request in flight: width 1 measured +") && logged(acts, "a second engine measures it")
		if again == off {
			t.Errorf("retrial off %v: a second engine of classic asked for %v: %+v", off, again, acts)
		}
	}
}

// A width is tried again on a second engine once: while no trial of it
// began since its run ended, or RetryAfter after the last one began.
func TestRetrialOnce(t *testing.T) {
	ran := t0.Add(time.Minute)
	for _, c := range []struct {
		tried, now time.Time
		want       bool
	}{
		{t0, ran.Add(time.Second), true},                                       // the first trial made the run
		{ran.Add(time.Second), ran.Add(time.Minute), false},                    // a retrial began since: it ended unjudged
		{ran.Add(time.Second), ran.Add(time.Second + DefaultRetryAfter), true}, // RetryAfter later
		{time.Time{}, ran, true},                                               // never tried here (measured as served)
	} {
		if got := retryDue(c.tried, ran, c.now, DefaultRetryAfter); got != c.want {
			t.Errorf("tried %v, run ended %v, now %v: %v, want %v", c.tried, ran, c.now, got, c.want)
		}
	}
}

// TestResumeAtTheDefaultInForce: a state saved under another default (a
// tune since moved it from 16 to 6) resumes at the default in force where
// it had stayed at the safe answer or decided nothing, and keeps what it
// measured and chose elsewhere. Before, it switched to the old default's
// 16 and back once it decided again.
func TestResumeAtTheDefaultInForce(t *testing.T) {
	saved := New(Config{Default: schedule.Flat(16, "default")}).Init(Pair{}).Pair
	saved.Schedule[0].Width, saved.Schedule[0].Source = 16, "default width 16"
	saved.Schedule[1].Width, saved.Schedule[1].Source = 3, "width 3 measured +36.4% over default width 16 (lower bound +22.7% over 2 runs, above the 0.5% a switch costs)"
	saved.Schedule[2].Width, saved.Schedule[2].Source = 16, "default width 16 (the safe answer): width 5 +2.0% (lower bound -4.0%), within the noise"
	s := New(Config{Default: schedule.Flat(6, "tuned")}).Init(saved)
	got := []int{s.Pair.Schedule[0].Width, s.Pair.Schedule[1].Width, s.Pair.Schedule[2].Width, s.Pair.Schedule[3].Width}
	if want := []int{6, 3, 6, 6}; !slices.Equal(got, want) {
		t.Errorf("resumed widths %v (%s), want %v", got, s.Pair.Schedule, want)
	}
}

// withRow is v and row r.
func withRow(v map[int]float64, r int) map[int]float64 {
	out := maps.Clone(v)
	out[r] = 3 + 0.1*float64(r)
	return out
}

// TestProbeRowsBetweenProbed: a bucket asks the probe only for rows no
// probed row count lies on both sides of, at most maxReadGap apart. The probe before traffic (rows
// w, 2w and 4w for every width) prices every width up to four in flight,
// so nothing is probed under load there.
func TestProbeRowsBetweenProbed(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	before := map[int]float64{}
	for _, n := range []int{1, 2, 4} {
		for w := 1; w <= DefaultMaxWidth; w++ {
			before[n*w] = 3 + 0.1*float64(n*w)
		}
	}
	ones := map[int]float64{}
	for w := 1; w <= DefaultMaxWidth; w++ {
		ones[w] = 3 + 0.1*float64(w)
	}
	cases := []struct {
		name   string
		verify map[int]float64
		n      float64
		slots  int
		want   []int // nil: none asked; else the first and last row asked
	}{
		{"nothing probed, one in flight", nil, 1, 0, []int{1, DefaultMaxWidth}},
		{"probed before traffic, 2.1 in flight", before, 2.1, 0, nil},
		{"probed before traffic, 4.0 in flight", before, 4.0, 0, nil},
		{"probed before traffic, 3.3 in flight", before, 3.3, 0, nil},
		{"probed before traffic, 6 in flight", before, 6, 0, []int{72, 102}},
		{"probed before traffic, 6 in flight on four slots", before, 6, 4, nil},
		{"rows 1-17 only, 4 in flight", ones, 4, 0, []int{20, 68}},
		{"rows 1-17 only, 4 in flight on one slot: one decodes", ones, 4, 1, nil},
		{"rows 1-17 only, 4 in flight on two slots", ones, 4, 2, []int{18, 34}},
		{"rows 1-17 only, 4 in flight on eight slots", ones, 4, 8, []int{20, 68}},
		{"rows 1-17 and 68, 4 in flight: no line from 17 to 68", withRow(ones, 68), 4, 0, []int{20, 64}},
	}
	for _, tc := range cases {
		s := c.Init(Pair{Verify: tc.verify})
		s.Pair.Buckets[0].N = tc.n
		s.Engine.Slots = tc.slots
		got := c.probeRows(&s, 0)
		switch {
		case tc.want == nil && len(got) > 0:
			t.Errorf("%s: asked for rows %v, want none", tc.name, got)
		case tc.want != nil && (len(got) == 0 || got[0] != tc.want[0] || got[len(got)-1] != tc.want[1]):
			t.Errorf("%s: asked for rows %v, want %d-%d", tc.name, got, tc.want[0], tc.want[1])
		}
	}
}

// BeforeLoadsFor caps the loads probed before traffic at the engine's
// slots (a load above them decodes no more sequences together) and adds
// the slots where BeforeLoads stops short of them.
func TestBeforeLoadsFor(t *testing.T) {
	for _, tc := range []struct {
		slots int
		want  []int
	}{
		{0, []int{1, 2, 4}}, {1, []int{1}}, {2, []int{1, 2}}, {3, []int{1, 2, 3}}, {4, []int{1, 2, 4}}, {8, []int{1, 2, 4, 8}},
	} {
		if got := BeforeLoadsFor(tc.slots); !slices.Equal(got, tc.want) {
			t.Errorf("BeforeLoadsFor(%d) = %v, want %v", tc.slots, got, tc.want)
		}
	}
}

// BeforeRows: each load's rows once, and the serving width's where it is
// wider than the widest tried, last.
func TestBeforeRows(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		slots, maxWidth, serving int
		want                     [][]int
	}{
		{"one slot", 1, 4, 2, [][]int{{1, 2, 3, 4}}},
		{"one slot, serving wider: last", 1, 4, 16, [][]int{{1, 2, 3, 4}, {16}}},
		{"two slots", 2, 3, 3, [][]int{{1, 2, 3}, {4, 6}}},
		{"four slots, serving wider", 4, 2, 5, [][]int{{1, 2}, {4}, {8}, {5, 10, 20}}},
		{"two slots, serving 8 over 4: row 8 the load of two had", 2, 4, 8, [][]int{{1, 2, 3, 4}, {6, 8}, {16}}},
	} {
		if got := BeforeRows(tc.slots, tc.maxWidth, tc.serving); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: BeforeRows = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// No probe under load runs while the load leaves no slot free: its
// requests would queue behind the clients' (under four clients it ran its
// 30 s bound with 0 or 1 row measured on one, two and four slots). It is
// said, and it is no probe tried.
func TestNoProbeBehindAQueue(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	for _, tc := range []struct {
		name  string
		n     float64
		slots int
		probe bool
	}{
		{"four in flight on one slot", 4, 1, false},
		{"one in flight on one slot", 1, 1, false},
		{"four in flight on four slots", 4, 4, false},
		{"3.5 in flight on four slots", 3.5, 4, false},
		{"three in flight on four slots: one free", 3, 4, true},
		{"four in flight on eight slots", 4, 8, true},
		{"four in flight, slots unknown", 4, 0, true},
	} {
		s := c.Init(Pair{})
		s.Load.Samples, s.Engine.Slots = []float64{tc.n, tc.n}, tc.slots
		s.Pair.Buckets[0].N = 4 // the bucket's mean over its life: the window's is what counts
		acts := c.probeFor(&s, 0, time.Unix(0, 0))
		probed := slices.ContainsFunc(acts, func(a Action) bool { return a.Op == Probe })
		said := slices.ContainsFunc(acts, func(a Action) bool { return strings.Contains(a.Msg, "would wait in its queue") })
		if probed != tc.probe || said == tc.probe || !tc.probe && !s.Pair.Buckets[0].Tried[0].IsZero() {
			t.Errorf("%s: probe asked %v, queue said %v, tried %v; want a probe %v", tc.name, probed, said, s.Pair.Buckets[0].Tried[0], tc.probe)
		}
	}
}

// A scrape of a new engine takes its slots; where they differ from the
// engine's before it (both known), the runs, trial times, learnt widths
// and the trial under way are set aside, said; the acceptance, the verify
// cost and a hold after a failed switch are kept.
func TestScrapeTakesTheEngineSlots(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	t0 := time.Unix(0, 0)
	for _, tc := range []struct {
		name          string
		before, after int
		setAside      bool
	}{
		{"one slot, then four", 1, 4, true},
		{"four, then four", 4, 4, false},
		{"unknown, then four", 0, 4, false},
		{"four, then unknown", 4, 0, false},
	} {
		s := c.Init(Pair{Verify: map[int]float64{1: 3}})
		s, _ = c.Step(s, Observation{Kind: Scrape, Now: t0, Engine: 1, Width: 4, InFlight: 4, Slots: tc.before})
		if s.Engine.Slots != tc.before {
			t.Fatalf("%s: engine 1 slots %d, want %d", tc.name, s.Engine.Slots, tc.before)
		}
		s.Pair.Buckets[1].Runs[6] = []Run{{Engine: 1, Tokens: 100, Secs: 1}}
		s.Pair.Buckets[1].Tried[6] = t0
		s.Pair.Schedule[1].Width, s.Pair.Schedule[1].Source = 6, "measured"
		hold := t0.Add(time.Minute)
		s.Exp = Experiment{Kind: Trialing, Width: 6, Bucket: 1, HoldUntil: hold}
		var acts []Action
		s, acts = c.Step(s, Observation{Kind: Scrape, Now: t0.Add(2 * time.Second), Engine: 2, Width: 4, InFlight: 4, Slots: tc.after})
		said := slices.ContainsFunc(acts, func(a Action) bool { return strings.Contains(a.Msg, "are set aside (taken back if an engine of") })
		kept := len(s.Pair.Buckets[1].Runs) > 0 && len(s.Pair.Buckets[1].Tried) > 0 && s.Pair.Schedule[1].Width == 6 && s.Exp.Kind == Trialing
		if s.Engine.Slots != tc.after || said != tc.setAside || kept == tc.setAside || len(s.Pair.Verify) != 1 || !s.Exp.HoldUntil.Equal(hold) {
			t.Errorf("%s: engine 2 slots %d, said %v, runs, trial times, width and trial kept %v, verify %v, hold %v; want %d slots and set aside %v", tc.name, s.Engine.Slots, said, kept, s.Pair.Verify, s.Exp.HoldUntil, tc.after, tc.setAside)
		}
	}
}

// Slots that come back bring back what was learnt under them earlier in
// the run (-np 4 → 8 → 4 by reload): the runs, trial times and learnt
// widths measured at four, said; what was learnt at eight is set aside in
// turn, and comes back with eight.
func TestSlotsComeBack(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	t0 := time.Unix(0, 0)
	s := c.Init(Pair{Verify: map[int]float64{1: 3}})
	s, _ = c.Step(s, Observation{Kind: Scrape, Now: t0, Engine: 1, Width: 4, InFlight: 4, Slots: 4})
	s.Pair.Buckets[1].Runs[6] = []Run{{Engine: 1, Tokens: 100, Secs: 1}}
	s.Pair.Buckets[1].Tried[6] = t0
	s.Pair.Schedule[1].Width, s.Pair.Schedule[1].Source = 6, "measured at four"
	at := func(n int, engine uint64, slots int) []Action {
		var acts []Action
		s, acts = c.Step(s, Observation{Kind: Scrape, Now: t0.Add(time.Duration(n) * time.Second), Engine: engine, Width: 4, InFlight: 4, Slots: slots})
		return acts
	}
	at(2, 2, 8)
	if len(s.Pair.Buckets[1].Runs) != 0 || s.Pair.Schedule[1].Width != 4 {
		t.Fatalf("under eight slots: runs %v, width %d; want none and the default", s.Pair.Buckets[1].Runs, s.Pair.Schedule[1].Width)
	}
	s.Pair.Buckets[1].Runs[2] = []Run{{Engine: 2, Tokens: 50, Secs: 1}}
	s.Pair.Schedule[1].Width, s.Pair.Schedule[1].Source = 2, "measured at eight"
	acts := at(4, 3, 4)
	b := s.Pair.Buckets[1]
	if len(b.Runs[6]) != 1 || len(b.Runs[2]) != 0 || !b.Tried[6].Equal(t0) || s.Pair.Schedule[1].Width != 6 || s.Pair.Schedule[1].Source != "measured at four" || !logged(acts, "measured under 4 earlier in this run are taken back") {
		t.Errorf("four slots again: runs %v, tried %v, schedule %v, said %v; want width 6's run, its trial time and width 6 back, said", b.Runs, b.Tried, s.Pair.Schedule[1], acts)
	}
	at(6, 4, 8)
	if len(s.Pair.Buckets[1].Runs[2]) != 1 || s.Pair.Schedule[1].Width != 2 {
		t.Errorf("eight slots again: runs %v, schedule %v; want width 2's run and width 2 back", s.Pair.Buckets[1].Runs, s.Pair.Schedule[1])
	}
	// What was set aside under buckets a schedule change has since
	// redrawn is not taken back into other ranges: it is dropped, said.
	for i := range s.Pair.Aside[4] {
		s.Pair.Aside[4][i].Lo += 100
	}
	acts = at(8, 5, 4)
	if len(s.Pair.Buckets[1].Runs) != 0 || s.Pair.Schedule[1].Width != 4 || !logged(acts, "were for other load buckets") {
		t.Errorf("four slots, the buckets redrawn: runs %v, schedule %v, said %v; want none taken back, said", s.Pair.Buckets[1].Runs, s.Pair.Schedule[1], acts)
	}
}

// WithSpread: an engine whose fresh engines do not differ turns the
// spread off, keeping what else is off; one side's zero beside a spread
// stays none (a zero would take the H200's default).
func TestWithSpread(t *testing.T) {
	c := Config{Off: map[string]bool{"trials": true}}.WithSpread(0, 0)
	if !c.Off["spread"] || !c.Off["trials"] {
		t.Errorf("none: off %v, want spread and trials", c.Off)
	}
	c = Config{}.WithSpread(0.034, 0).withDefaults()
	if c.Off["spread"] || c.Spread1 != 0.034 || c.SpreadN > 1e-6 {
		t.Errorf("one side: off %v, spreads %v %v, want 0.034 and none", c.Off, c.Spread1, c.SpreadN)
	}
}

// Where the default has no measure at the load, a width that ran ahead of
// it at another load by more than a change of load has taken back
// (loadReversal) is the incumbent in its place: serve's follower leaves it
// for the default only at the prior gain's stay, and the decision named
// the default it did not go to and tried nothing (the sim's GB10: width 3
// served each four-client phase). Less far ahead, or with the rule off,
// the default stands; a trial's width is judged against the width it left.
func TestStandInForAnUnmeasuredDefault(t *testing.T) {
	for _, tc := range []struct {
		name          string
		at1, at4, at5 map[int][]float64 // runs at one request in flight, at four, at five to eight
		run, trialOf  int               // the width serving; the width a trial of it left (0: none)
		off           bool
		want          int
		why, not      string // in the reason, and not in it
	}{
		{"width 3 +64 % at one request: kept at four", map[int][]float64{16: {100}, 3: {164}}, map[int][]float64{3: {150}}, nil, 3, 0, false, 3, "width 3 in the default's place: default width 16 is not measured at this load yet, and width 3 ran +64% ahead of it at 1 request in flight, beyond the 28 points", ""},
		{"+20 % at one request: a change of load can take that back", map[int][]float64{16: {100}, 3: {120}}, map[int][]float64{3: {150}}, nil, 3, 0, false, 16, "default width 16: not measured at this load yet", ""},
		{"the largest lead elsewhere counts", map[int][]float64{16: {100}, 3: {164}}, map[int][]float64{3: {150}}, map[int][]float64{16: {100}, 3: {110}}, 3, 0, false, 3, "ran +64% ahead of it at 1 request in flight", ""},
		{"the rule off", map[int][]float64{16: {100}, 3: {164}}, map[int][]float64{3: {150}}, nil, 3, 0, true, 16, "default width 16: not measured at this load yet", ""},
		{"a width faster than it beyond the noise", map[int][]float64{16: {100}, 3: {164}}, map[int][]float64{3: {150}, 5: {200, 201}}, nil, 5, 0, false, 5, "width 5 measured +33.7% over width 3", ""},
		{"a width within its noise: back to it", map[int][]float64{16: {100}, 3: {164}}, map[int][]float64{3: {150}, 5: {151}}, nil, 5, 0, false, 3, "width 3 in the default's place", "the safe answer"},
		{"a trial's width far ahead too, slower here: back to the width it left", map[int][]float64{16: {100}, 3: {164}, 5: {170}}, map[int][]float64{3: {150}, 5: {147}}, nil, 5, 3, false, 3, "width 3 in the default's place", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newWithOff(Config{Default: schedule.Flat(16, "engine default"), SwitchS: 1}, "ahead elsewhere", tc.off)
			s := measuredState(c, tc.at1)
			for b, runs := range map[int]map[int][]float64{1: tc.at4, 2: tc.at5} {
				for w, rates := range runs {
					for i, r := range rates {
						s.Pair.Buckets[b].Runs[w] = append(s.Pair.Buckets[b].Runs[w], rateRun(uint64(1000*w+100*b+i), r))
					}
				}
			}
			if tc.trialOf != 0 {
				s.Exp = Experiment{Kind: Trialing, Width: tc.run, From: tc.trialOf, Bucket: 1, Predicted: 160}
			}
			got, why := c.choose(&s, 1, tc.run, 16)
			if got != tc.want || !strings.Contains(why, tc.why) || tc.not != "" && strings.Contains(why, tc.not) {
				t.Fatalf("choose: width %d (%s), want %d with %q, without %q", got, why, tc.want, tc.why, tc.not)
			}
			if tc.want == 16 || tc.want == tc.run {
				return
			}
			// The follower switches to it as to the default: without a
			// measured gain, which may be a loss within the noise.
			if !c.standsIn(&s, 1, tc.run, tc.want) {
				t.Errorf("width %d does not stand in for the follower", tc.want)
			}
		})
	}
}

// A request's wait outside the engine's own time is priced in the engine's
// cycles per token, from the speculative widths measured at the bucket
// (served − busy seconds per token over busy seconds per cycle), so that
// a wide width's longer cycle carries it: on the sim's H200 cost width 10
// runs ahead of 17 at four clients only with it. Not at one request in
// flight, not from classic, not where the engine gives no time of its
// own, and not with the rule off.
func TestWaitPerToken(t *testing.T) {
	run := func(secs, busy float64) Run { // 1000 cycles of 15.4 tokens
		return Run{Engine: 1, Tokens: 15_400, Cycles: 1000, Secs: secs, Busy: busy, Scrapes: 10}
	}
	for _, tc := range []struct {
		name   string
		bucket int
		w      int
		r      Run
		off    bool
		want   float64
		slots  int
	}{
		{"four clients: 20.9 s of wait over 30 s busy", 1, 17, run(50.9, 30), false, 20.9 / 15_400 / (30.0 / 1000), 0},
		{"four clients on four slots", 1, 17, run(50.9, 30), false, 20.9 / 15_400 / (30.0 / 1000), 4},
		{"four clients on one slot: no turns", 1, 17, run(50.9, 30), false, 0, 1},
		{"one request in flight", 0, 17, run(50.9, 30), false, 0, 0},
		{"classic's runs", 1, 1, run(50.9, 30), false, 0, 0},
		{"no time of the engine's own", 1, 17, run(50.9, 0), false, 0, 0},
		{"no wait", 1, 17, run(30, 30), false, 0, 0},
		{"the rule off", 1, 17, run(50.9, 30), true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newWithOff(Config{Default: schedule.Flat(4, "engine default")}, "wait", tc.off)
			s := c.Init(Pair{})
			s.Engine.Slots = tc.slots
			s.Pair.Buckets[tc.bucket].Runs[tc.w] = []Run{tc.r}
			if got := c.waitPerToken(&s, tc.bucket); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("waitPerToken = %v, want %v", got, tc.want)
			}
		})
	}
}

// Runs of two widths whose requests wait the same 5.8 rounds of their own
// width's cycle give that wait, 5.8 rounds over 128 tokens (pooling their
// seconds and cycles first gave 37 % more); a run without the engine's
// own time is left out of the drafting fit, where its wait would count
// twice.
func TestWaitAcrossWidths(t *testing.T) {
	const rounds, reqTokens, reqs = 5.8, 128.0, 100.0
	mk := func(engine uint64, t, cycleMS float64, busy bool) Run {
		cycles := reqs * reqTokens / t
		r := Run{Engine: engine, Tokens: reqs * reqTokens, Cycles: cycles, Busy: cycles * cycleMS / 1000, Scrapes: 10}
		r.Secs = r.Busy + reqs*rounds*cycleMS/1000
		if !busy {
			r.Busy = 0
		}
		return r
	}
	c := New(Config{Default: schedule.Flat(4, "engine default"), MinCycles: 16})
	s := c.Init(Pair{})
	s.Pair.Buckets[1].Runs[2] = []Run{mk(1, 1.9, 10, true)}
	s.Pair.Buckets[1].Runs[17] = []Run{mk(2, 15.4, 30, true)}
	if got, want := c.waitPerToken(&s, 1), rounds/reqTokens; math.Abs(got-want) > 1e-12 {
		t.Errorf("waitPerToken = %v, want %v", got, want)
	}
	idle := mk(4, 15.4, 30, true)
	idle.Secs = idle.Busy // a third run of as many tokens that waited nothing: a third less wait a token
	s.Pair.Buckets[1].Runs[17] = append(s.Pair.Buckets[1].Runs[17], idle)
	if got, want := c.waitPerToken(&s, 1), rounds/reqTokens*2/3; math.Abs(got-want) > 1e-12 {
		t.Errorf("waitPerToken with a run that waited nothing = %v, want %v", got, want)
	}
	s.Pair.Buckets[1].Runs[17] = s.Pair.Buckets[1].Runs[17][:1]
	s.Pair.Verify = map[int]float64{8: 6, 68: 20}
	s.Pair.Buckets[1].N = 4
	a0, s0, _ := c.draftFit(&s, 1)
	s.Pair.Buckets[1].Runs[17] = append(s.Pair.Buckets[1].Runs[17], mk(3, 15.4, 30, false))
	if a1, s1, _ := c.draftFit(&s, 1); math.Abs(a1-a0) > 1e-9 || math.Abs(s1-s0) > 1e-9 {
		t.Errorf("draftFit with a run without the engine's time: %v + %v·x, want %v + %v·x", a1, s1, a0, s0)
	}
}

// Stays at two loads that alternate are each logged once until
// stayRepeat, where one remembered shape logged each at every turn; the
// marks are bounded.
func TestStayDue(t *testing.T) {
	var e Engine
	for i, tc := range []struct {
		shape string
		at    time.Duration
		want  bool
	}{
		{"stay at 1", 0, true},
		{"stay at 2-4", 40 * time.Second, true},
		{"stay at 1", 80 * time.Second, false},
		{"stay at 2-4", 120 * time.Second, false},
		{"stay at 1", stayRepeat, true},
		{"stay at 1", stayRepeat + time.Second, false},
	} {
		if got := e.stayDue(tc.shape, t0.Add(tc.at)); got != tc.want {
			t.Errorf("step %d: %q at %v logged %v, want %v", i, tc.shape, tc.at, got, tc.want)
		}
	}
	for i := range 3 * maxStays {
		e.stayDue(fmt.Sprint("shape ", i), t0)
	}
	if len(e.Stays) != maxStays {
		t.Errorf("%d marks, want at most %d", len(e.Stays), maxStays)
	}
}

// With the wait priced, the model ranks widths at four requests as the
// sim's cost does (simcost's h200 drafting and pickup: width 10 ahead of
// 17), from runs of widths 4 and 17 whose requests each wait 5.8 rounds;
// without it, the wait folded into the drafting cost puts 17 ahead.
func TestPredictPricesTheWait(t *testing.T) {
	const rounds, reqTokens, reqs = 5.8, 128.0, 100.0
	verify := map[int]float64{16: 6.0, 40: 7.83, 68: 9.93}
	tpc := func(w int) float64 { return 1 + 0.9*float64(w-1) }
	cycle := func(w int) float64 { return 1.5 + 1.16*float64(w-1) + verify[4*w] } // engine ms a cycle of four
	truth := func(w int) float64 { return 1000 / (cycle(w) * (1/tpc(w) + rounds/reqTokens)) }
	for _, off := range []bool{false, true} {
		c := newWithOff(Config{Default: schedule.Flat(4, "engine default")}, "wait", off)
		s := c.Init(Pair{})
		s.Pair.Verify = verify
		for range 16 {
			s.Pair.Acc, s.Pair.Cycles = append(s.Pair.Acc, 0.9e6), append(s.Pair.Cycles, 1e6)
		}
		s.Pair.Buckets[1].N = 4
		for i, w := range []int{4, 17} {
			cycles := reqs * reqTokens / tpc(w)
			r := Run{Engine: uint64(i + 1), Tokens: reqs * reqTokens, Cycles: cycles, Busy: cycles * cycle(w) / 1000, Scrapes: 30}
			r.Secs = r.Busy + reqs*rounds*cycle(w)/1000
			rate := r.Tokens / r.Secs
			r.SumR, r.SumR2 = 30*rate, 30*rate*rate*1.0001
			s.Pair.Buckets[1].Runs[w] = []Run{r}
		}
		p10, ok10 := c.predict(&s, 1, 10)
		p17, ok17 := c.predict(&s, 1, 17)
		if !ok10 || !ok17 {
			t.Fatalf("wait off %v: no prediction (%v, %v)", off, ok10, ok17)
		}
		switch {
		case !off && (math.Abs(p10/truth(10)-1) > 1e-9 || math.Abs(p17/truth(17)-1) > 1e-9):
			t.Errorf("with the wait: width 10 %.1f, 17 %.1f tokens/s a request, want the cost's %.1f and %.1f", p10, p17, truth(10), truth(17))
		case off && p10 >= p17:
			t.Errorf("without the wait: width 10 %.1f ahead of 17 %.1f; the test no longer shows what the wait changes", p10, p17)
		}
	}
}

// newWithOff is the controller of cfg with rule turned off where off says.
func newWithOff(cfg Config, rule string, off bool) Controller {
	if off {
		cfg.Off = map[string]bool{rule: true}
	}
	return New(cfg)
}
