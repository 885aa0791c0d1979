package follow

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/schedule"
)

var t0 = time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)

func demo(t *testing.T) schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse("1:6,2-3:4,4+:1", "tuned")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run drives the rule with a fake clock: load(at) is the in-flight count
// at each tick, and every switch it asks for completes after took.
type run struct {
	switches []Decision
	at       []time.Duration
	held     []string
	final    State
}

func drive(cfg Config, st State, span, took time.Duration, load func(time.Duration) int) run {
	var r run
	doneAt := time.Duration(-1)
	for at := time.Duration(0); at <= span; at += Tick {
		if doneAt >= 0 && at >= doneAt {
			st, doneAt = Done(st, true, took), -1
		}
		var d Decision
		st, d = Step(cfg, st, Observation{Now: t0.Add(at), InFlight: load(at)})
		if d.Switch {
			r.switches, r.at = append(r.switches, d), append(r.at, at)
			doneAt = at + took
		} else if strings.Contains(d.Reason, "cap") {
			r.held = append(r.held, d.Reason)
		}
	}
	r.final = st
	return r
}

// clients is a closed-loop load of n clients: each request runs 1.2 s
// and the next starts 50 ms after, so the count dips briefly below n.
func clients(n int) func(time.Duration) int {
	return func(at time.Duration) int {
		if n > 0 && at%(1250*time.Millisecond) < Tick && at/Tick%5 == 0 {
			return n - 1
		}
		return n
	}
}

func alternating(a, b int, phase time.Duration) func(time.Duration) int {
	return func(at time.Duration) int {
		if at/phase%2 == 0 {
			return clients(a)(at)
		}
		return clients(b)(at)
	}
}

func TestStep(t *testing.T) {
	sec := time.Second
	cases := []struct {
		name      string
		cfg       func(Config) Config
		start     int           // the width running at start
		started   time.Duration // the engine's measured start
		span      time.Duration
		load      func(time.Duration) int
		switches  int
		firstTo   int           // width of the first switch
		firstBy   time.Duration // the first switch no later than
		firstFrom time.Duration // and no earlier than
		held      bool
	}{
		{name: "steady at its bucket: never", start: 6, started: sec, span: 10 * time.Minute, load: clients(1)},
		{name: "idle plans for one request: never", start: 6, started: sec, span: 5 * time.Minute, load: clients(0)},
		{name: "idle after four clients: back to the width for one", start: 6, started: sec, span: 5 * time.Minute, load: func(at time.Duration) int {
			if at < time.Minute {
				return 4
			}
			return 0
		}, switches: 2, firstTo: 1, firstFrom: Window, firstBy: 40 * sec},
		{name: "four clients stay: one switch to off", start: 6, started: sec, span: 5 * time.Minute, load: clients(4), switches: 1, firstTo: 1, firstFrom: Window, firstBy: 40 * sec},
		{name: "a 4 s burst of four: never", start: 6, started: sec, span: 5 * time.Minute, load: func(at time.Duration) int {
			if at >= time.Minute && at < time.Minute+4*sec {
				return 4
			}
			return clients(1)(at)
		}},
		{name: "two clients: width 4", start: 6, started: sec, span: 3 * time.Minute, load: clients(2), switches: 1, firstTo: 4, firstFrom: Window, firstBy: 40 * sec},
		{name: "unmeasured engine waits for the slow prior switch", start: 6, span: 4 * time.Minute, load: clients(4), switches: 0},
		{name: "unmeasured engine switches once the prior repays", start: 6, span: 6 * time.Minute, load: clients(4), switches: 1, firstTo: 1, firstFrom: 280 * sec, firstBy: 300 * sec},
		{name: "a measured gain shortens the wait", cfg: func(c Config) Config {
			c.Gain = func(from, to schedule.Bucket) (float64, bool) { return 0.5, true }
			return c
		}, start: 6, started: sec, span: 3 * time.Minute, load: clients(4), switches: 1, firstTo: 1, firstFrom: Window, firstBy: 16 * sec},
		{name: "a measured loss holds the switch (not the prior)", cfg: func(c Config) Config {
			c.Gain = func(from, to schedule.Bucket) (float64, bool) { return -0.05, true }
			return c
		}, start: 6, started: sec, span: 10 * time.Minute, load: clients(4)},
		{name: "a measured gain of 0 holds the switch", cfg: func(c Config) Config {
			c.Gain = func(from, to schedule.Bucket) (float64, bool) { return 0, true }
			return c
		}, start: 6, started: sec, span: 10 * time.Minute, load: clients(4)},
		{name: "no measure for the pair: the prior switches", cfg: func(c Config) Config {
			c.Gain = func(from, to schedule.Bucket) (float64, bool) { return 0, false }
			return c
		}, start: 6, span: 6 * time.Minute, load: clients(4), switches: 1, firstTo: 1, firstFrom: 280 * sec, firstBy: 300 * sec},
		{name: "alternating 1 and 4 every 2 min for 12 min: one switch per change", start: 6, started: sec, span: 12 * time.Minute, load: alternating(1, 4, 2*time.Minute), switches: 5, firstTo: 1, firstFrom: 2*time.Minute + Window, firstBy: 2*time.Minute + 40*sec},
		{name: "cap holds switches", cfg: func(c Config) Config { c.MaxPerHour = 2; return c }, start: 6, started: sec, span: 12 * time.Minute, load: alternating(1, 4, 2*time.Minute), switches: 2, firstTo: 1, firstFrom: 2 * time.Minute, firstBy: 3 * time.Minute, held: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Schedule: demo(t)}
			if c.cfg != nil {
				cfg = c.cfg(cfg)
			}
			r := drive(cfg, New(cfg, c.start, c.started), c.span, sec, c.load)
			if len(r.switches) != c.switches {
				t.Fatalf("%d switches at %v (%v), want %d", len(r.switches), r.at, r.switches, c.switches)
			}
			if c.held != (len(r.held) > 0) {
				t.Errorf("held = %q", r.held)
			}
			if c.switches == 0 {
				return
			}
			d, at := r.switches[0], r.at[0]
			if d.To.Width != c.firstTo || at < c.firstFrom || at > c.firstBy {
				t.Errorf("first switch to %d at %v, want %d between %v and %v", d.To.Width, at, c.firstTo, c.firstFrom, c.firstBy)
			}
			if d.From.Width == d.To.Width || d.Load <= 0 || !strings.Contains(d.Reason, "requests in flight") {
				t.Errorf("decision %+v", d)
			}
		})
	}
}

// A switch under way holds every other decision; a failed one leaves the
// width and makes the load sit in its bucket anew.
func TestPendingAndFailure(t *testing.T) {
	cfg := Config{Schedule: demo(t)}
	st := New(cfg, 6, time.Second)
	var d Decision
	at := time.Duration(0)
	for ; !d.Switch; at += Tick {
		st, d = Step(cfg, st, Observation{Now: t0.Add(at), InFlight: 4})
		if at > time.Minute {
			t.Fatal("no switch")
		}
	}
	for i := 0; i < 400; i++ {
		st, d = Step(cfg, st, Observation{Now: t0.Add(at), InFlight: 2})
		at += Tick
		if d.Switch || (i > 50 && !strings.Contains(d.Reason, "under way")) {
			t.Fatalf("decision while pending: %+v", d)
		}
	}
	st = Done(st, false, 0)
	if st.Width != 6 || st.Pending != 0 || st.Switch != time.Second {
		t.Fatalf("after a failed switch: %+v", st)
	}
	st, d = Step(cfg, st, Observation{Now: t0.Add(at), InFlight: 2})
	if d.Switch {
		t.Fatal("switched again at once after a failure")
	}
	st = Done(State{Width: 6, Pending: 4}, true, 3*time.Second)
	if st.Width != 4 || st.Switch != 3*time.Second {
		t.Fatalf("after a switch: %+v", st)
	}
}

// While the load has not yet stayed the window a rule's switch (an
// infinite gain) waits for, the reason says when it follows, not that a
// gain repays it.
func TestRuleSwitchWaits(t *testing.T) {
	sched, _ := schedule.Parse("1:4,2-4:6", "x")
	for _, tc := range []struct {
		name string
		gain float64
		want string
	}{
		{"a rule's switch", math.Inf(1), "; width 6 follows after 10s"},
		{"a measured gain", 0.05, "; width 6 repays a 1s switch after 20s"},
	} {
		cfg := Config{Schedule: sched, Gain: func(_, _ schedule.Bucket) (float64, bool) { return tc.gain, true }}
		st := New(cfg, 4, time.Second)
		var d Decision
		at := time.Duration(0)
		for ; at < Window; at += Tick {
			st, _ = Step(cfg, st, Observation{Now: t0.Add(at), InFlight: 1})
		}
		for d.To.Width != 6 && at < 3*Window { // the load moves to three in flight: the first step whose mode follows
			st, d = Step(cfg, st, Observation{Now: t0.Add(at), InFlight: 3})
			at += Tick
		}
		if d.Switch || !strings.HasSuffix(d.Reason, tc.want) {
			t.Errorf("%s: %+v, want a wait ending %q", tc.name, d, tc.want)
		}
	}
}

// A switch whose stay has run out as the load leaves its bucket waits:
// the window's mode still reads the old bucket, its mean no longer does
// (the demo profile's one-client width was switched in as four clients
// came, and out again). Once the mean is back the switch is made.
func TestNoSwitchAsTheLoadLeaves(t *testing.T) {
	sched, _ := schedule.Parse("1:6,2-4:4", "x")
	cfg := Config{Schedule: sched, Gain: func(_, _ schedule.Bucket) (float64, bool) { return 0.1, true }} // 10 s / 0.1: a 100 s stay
	st := New(cfg, 4, 10*time.Second)
	var d Decision
	at := time.Duration(0)
	for ; at < 103*time.Second; at += Tick { // one in flight: short of the stay, counted from the full window at 10 s
		st, d = Step(cfg, st, Observation{Now: t0.Add(at), InFlight: 1})
	}
	if d.Switch {
		t.Fatalf("switched before the stay: %+v", d)
	}
	for end := at + 4*time.Second; at < end; at += Tick { // four come: the mode is still 1, the mean is not
		if st, d = Step(cfg, st, Observation{Now: t0.Add(at), InFlight: 4}); d.Switch {
			t.Fatalf("switched to width 6 as the load left its bucket (mean %.1f): %+v", d.Load, d)
		}
	}
	if !strings.Contains(d.Reason, "its mean (2.2) has left it; width 6 waits for the load to settle") {
		t.Errorf("reason %q, want the wait said", d.Reason)
	}
	switched := false
	for end := at + 20*time.Second; at < end && !switched; at += Tick { // one again: the switch is made
		st, d = Step(cfg, st, Observation{Now: t0.Add(at), InFlight: 1})
		switched = d.Switch && d.To.Width == 6
	}
	if !switched {
		t.Errorf("no switch once the load came back: %+v", d)
	}
}

// Traffic that comes and goes (two in flight, then none, in turn, a little
// more often two) sits at 2-4 by the window's mode, and its mean over the
// busy samples is 2: the switch is made, where the mean over every sample
// (about 1.1) would hold it for ever.
func TestOnAndOffTrafficSwitches(t *testing.T) {
	sched, _ := schedule.Parse("1:6,2-4:4", "x")
	cfg := Config{Schedule: sched, Gain: func(_, _ schedule.Bucket) (float64, bool) { return 0.5, true }}
	st := New(cfg, 6, time.Second)
	switched := false
	for at, i := time.Duration(0), 0; at < 2*time.Minute && !switched; at, i = at+Tick, i+1 {
		n := 2
		if i%20 >= 11 { // 11 samples of 2, 9 of none
			n = 0
		}
		var d Decision
		st, d = Step(cfg, st, Observation{Now: t0.Add(at), InFlight: n})
		switched = d.Switch && d.To.Width == 4
	}
	if !switched {
		t.Errorf("no switch to width 4 for traffic of two in flight that comes and goes: %+v", st)
	}
}

// TestMeanWithin: a mean rounds into a bucket; below the first it counts
// as in it (idle).
func TestMeanWithin(t *testing.T) {
	for _, tc := range []struct {
		lo, hi int
		x      float64
		want   bool
	}{
		{1, 1, 1.0, true}, {1, 1, 1.49, true}, {1, 1, 1.5, false}, {1, 1, 0, true},
		{2, 4, 1.5, true}, {2, 4, 1.49, false}, {2, 4, 4.49, true}, {2, 4, 4.5, false},
		{9, 0, 8.5, true}, {9, 0, 100, true}, {9, 0, 8.4, false},
	} {
		if got := meanWithin(schedule.Bucket{Lo: tc.lo, Hi: tc.hi}, tc.x); got != tc.want {
			t.Errorf("mean %v in %d-%d: %v, want %v", tc.x, tc.lo, tc.hi, got, tc.want)
		}
	}
}

// Buckets of one width are one width: no switch between them.
func TestSameWidthBuckets(t *testing.T) {
	s, _ := schedule.Parse("1:4,2-3:4,4+:4", "x")
	cfg := Config{Schedule: s}
	r := drive(cfg, New(cfg, 4, time.Second), 5*time.Minute, time.Second, alternating(1, 4, time.Minute))
	if len(r.switches) != 0 {
		t.Fatalf("switches %v", r.switches)
	}
}

// A schedule whose width changes at the bucket the load has sat in (the
// adaptive controller learnt another width there) is followed once the
// load's stay there repays the switch, counted from when the load entered
// the bucket; NotBefore holds every switch until it passes.
func TestScheduleChangesUnderTheLoad(t *testing.T) {
	flat, _ := schedule.Parse("1:4,2-4:4,5+:4", "default")
	learnt, _ := schedule.Parse("1:6,2-4:4,5+:4", "learnt")
	sec := time.Second
	cases := []struct {
		name      string
		changeAt  time.Duration // when the schedule turns learnt
		notBefore time.Duration // Config.NotBefore after t0 (0: none)
		gain      float64       // measured gain of 6 over 4 (0: the prior)
		wantAt    time.Duration // the switch at or after the change, by
		wantNone  bool
	}{
		{name: "the load sat there long: at once", changeAt: 10 * time.Minute, wantAt: 10*time.Minute + Tick},
		{name: "the load just arrived: after the prior's dwell (10 s / 3.6 %, from the full window at 10 s)", changeAt: 15 * sec, wantAt: 285 * sec},
		{name: "a measured gain: sooner (10 s / 0.5 = 20 s)", changeAt: 15 * sec, gain: 0.5, wantAt: 25 * sec},
		{name: "a rule's switch (an infinite gain): within a window, nothing said to repay it", changeAt: 15 * sec, gain: math.Inf(1), wantAt: 15*sec + Window},
		{name: "held after a failed switch", changeAt: 10 * time.Minute, notBefore: 11 * time.Minute, wantAt: 11 * time.Minute},
		{name: "never changed: never", changeAt: time.Hour, wantNone: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Schedule: flat}
			st := New(cfg, 4, 10*sec)
			var got time.Duration = -1
			for at := time.Duration(0); at <= 12*time.Minute && got < 0; at += Tick {
				cfg := Config{Schedule: flat}
				if at >= c.changeAt {
					cfg.Schedule = learnt
				}
				if c.gain > 0 {
					cfg.Gain = func(_, _ schedule.Bucket) (float64, bool) { return c.gain, true }
				}
				if c.notBefore > 0 {
					cfg.NotBefore = t0.Add(c.notBefore)
				}
				var d Decision
				st, d = Step(cfg, st, Observation{Now: t0.Add(at), InFlight: 1})
				if math.IsInf(c.gain, 1) && strings.Contains(d.Reason, "repays") {
					t.Errorf("at %v, reason %q: a rule's switch said to be repaid", at, d.Reason)
				}
				if d.Switch {
					got = at
					if d.To.Width != 6 || d.Load != 1 {
						t.Errorf("switch %+v", d)
					}
					if assumed := strings.Contains(d.Reason, "if it gains the 3.6% assumed where none is measured"); assumed != (c.gain == 0) {
						t.Errorf("reason %q: says the prior gain %v, want %v", d.Reason, assumed, c.gain == 0)
					}
					if repays := strings.Contains(d.Reason, "repays a 10s switch"); repays == math.IsInf(c.gain, 1) {
						t.Errorf("reason %q: says it repays the switch %v, want %v", d.Reason, repays, !math.IsInf(c.gain, 1))
					}
				}
			}
			switch {
			case c.wantNone && got >= 0:
				t.Fatalf("switched at %v", got)
			case !c.wantNone && (got < c.changeAt || got > c.wantAt):
				t.Fatalf("switched at %v, want between %v and %v", got, c.changeAt, c.wantAt)
			}
		})
	}
}

// Clone shares nothing Step writes: stepping the clone leaves the
// original as it was.
func TestClone(t *testing.T) {
	cfg := Config{Schedule: demo(t)}
	st := New(cfg, 6, time.Second)
	for i := range 50 {
		st, _ = Step(cfg, st, Observation{Now: t0.Add(time.Duration(i) * Tick), InFlight: 1})
	}
	before := st.Clone()
	c := st.Clone()
	for i := range 50 {
		c, _ = Step(cfg, c, Observation{Now: t0.Add(time.Minute + time.Duration(i)*Tick), InFlight: 4})
	}
	if !reflect.DeepEqual(before, st) {
		t.Error("stepping a clone wrote into the original")
	}
}

// While an engine drains or starts beside the serving one, no switch is
// asked: it would wait behind that engine and then run on a load read
// before (a serve campaign saw a switch asked at load 0 while six streams
// drained on the old engine, run 34 s later under four clients). Once
// nothing is beside it, the switch comes on the window's load then.
func TestBusyHoldsTheSwitch(t *testing.T) {
	cfg := Config{Schedule: demo(t)}
	for _, tc := range []struct {
		name    string
		busyTil time.Duration // Busy until then
		wantAt  time.Duration // the switch, not before
	}{
		{"nothing beside", 0, 0},
		{"an engine drains for 40 s", 40 * time.Second, 40 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := New(cfg, 6, time.Second)
			got := time.Duration(-1)
			for at := time.Duration(0); at < 2*time.Minute && got < 0; at += Tick {
				o := Observation{Now: t0.Add(at), InFlight: 4}
				if at < tc.busyTil {
					o.Busy = "an engine drains beside the serving one"
				}
				var d Decision
				st, d = Step(cfg, st, o)
				if d.Switch {
					got = at
				} else if at < tc.busyTil && at > 35*time.Second && !strings.Contains(d.Reason, "width 1 waits: an engine drains") {
					t.Fatalf("at %v, busy: reason %q", at, d.Reason)
				}
			}
			if got < tc.wantAt || got > tc.wantAt+Window+time.Minute {
				t.Fatalf("switched at %v, want from %v", got, tc.wantAt)
			}
		})
	}
}

// The hourly cap is said once when it begins to hold (Decision.Capped:
// once per hold, not at every step it holds), and a reload that changes
// the schedule keeps the hour's switches (Renew): before, it started the
// count again and a campaign saw 16 switches in 8 minutes.
func TestCapSaidOnceAndKeptAcrossReloads(t *testing.T) {
	cfg := Config{Schedule: demo(t), MaxPerHour: 3}
	st := New(cfg, 6, time.Second)
	capped, held, switches := 0, false, 0
	load := alternating(1, 4, time.Minute)
	step := func(from, to time.Duration) {
		for at := from; at < to; at += Tick {
			var d Decision
			st, d = Step(cfg, st, Observation{Now: t0.Add(at), InFlight: load(at)})
			if d.Switch {
				switches++
				st = Done(st, true, time.Second)
			}
			holds := strings.Contains(d.Reason, "the cap")
			if d.Capped {
				capped++
				if held || !holds {
					t.Fatalf("at %v: Capped with the cap already holding (%v) or not holding (%q)", at, held, d.Reason)
				}
			}
			held = holds
		}
	}
	step(0, 5*time.Minute)
	if switches != 3 || capped == 0 {
		t.Fatalf("before the reload: %d switches, cap said %d times; want 3 and at least once", switches, capped)
	}
	other, _ := schedule.Parse("1:6,2-3:4,4-8:1,9+:1", "tuned")
	cfg = Config{Schedule: other, MaxPerHour: 3}
	st = Renew(cfg, st, st.Width)
	step(5*time.Minute, 10*time.Minute)
	if switches != 3 {
		t.Fatalf("after the reload: %d switches in all, want the cap's 3 kept", switches)
	}
}

// A switch a reload overtook is not counted against the cap, and the
// load must sit anew under the width that serves: with a cap of 1, the
// next switch still comes.
func TestOvertakenIsNotCounted(t *testing.T) {
	cfg := Config{Schedule: demo(t), MaxPerHour: 1}
	st := New(cfg, 6, time.Second)
	var d Decision
	at := time.Duration(0)
	for ; !d.Switch; at += Tick {
		st, d = Step(cfg, st, Observation{Now: t0.Add(at), InFlight: 4})
	}
	st = Overtaken(st, 16) // a reload to width 16 replaced the switch to 1
	if st.Pending != 0 || st.Width != 16 {
		t.Fatalf("after Overtaken: %+v", st)
	}
	if got := st.load(); got < 3.5 {
		t.Fatalf("the window's load was dropped: %v", got)
	}
	for d.Switch = false; !d.Switch && at < 5*time.Minute; at += Tick {
		st, d = Step(cfg, st, Observation{Now: t0.Add(at), InFlight: 4})
	}
	if !d.Switch || d.To.Width != 1 {
		t.Fatalf("no switch after an overtaken one under a cap of 1: %+v", d)
	}
}

// Once nothing is beside the serving engine any more, the load is read
// again: the requests of the busy spell (one its drain timeout cut, here)
// do not carry a switch made the moment it ends.
func TestBusyEndReadsTheLoadAgain(t *testing.T) {
	cfg := Config{Schedule: demo(t)}
	st := New(cfg, 6, time.Second)
	var switches []Decision
	for at := time.Duration(0); at < 3*time.Minute; at += Tick {
		o := Observation{Now: t0.Add(at), InFlight: 1}
		if at < 2*time.Minute {
			// a stuck request drains on the old engine beside one client
			o.InFlight, o.Busy = 2, "1 engine(s) still draining"
		}
		var d Decision
		st, d = Step(cfg, st, o)
		if d.Switch {
			switches = append(switches, d)
			st = Done(st, true, time.Second)
		}
	}
	if len(switches) != 0 {
		t.Fatalf("switched to width %d at load %.1f as the busy spell ended", switches[0].To.Width, switches[0].Load)
	}
}

// TestRefused: a bucket whose width the record measured no faster than
// another bucket's width there is named, once per such switch.
func TestRefused(t *testing.T) {
	sched := schedule.Schedule{{Lo: 1, Hi: 3, Width: 6}, {Lo: 4, Width: 1}}
	cases := []struct {
		name string
		gain func(from, to schedule.Bucket) (float64, bool)
		want []string
	}{
		{"no record", nil, nil},
		{"the record agrees", func(from, to schedule.Bucket) (float64, bool) { return 0.05, true }, nil},
		{"unmeasured", func(from, to schedule.Bucket) (float64, bool) { return 0, false }, nil},
		{"width 1 measured slower at 4+", func(from, to schedule.Bucket) (float64, bool) {
			if to.Width == 1 {
				return -0.013, true
			}
			return 0.2, true
		}, []string{"at 4+ requests in flight the schedule names width 1, which its record measured -1.3% against width 6: the follower will not switch from width 6 to it (edit the schedule or tune again)"}},
	}
	for _, tc := range cases {
		got := Refused(Config{Schedule: sched, Gain: tc.gain})
		twice := schedule.Schedule{{Lo: 1, Hi: 3, Width: 6}, {Lo: 4, Hi: 8, Width: 1}, {Lo: 9, Width: 6}}
		if again := Refused(Config{Schedule: twice, Gain: tc.gain}); len(again) != len(got) {
			// width 6 twice (1-3 and 9+): the switch from 6 to 4-8's width 1 is said once
			t.Errorf("%s: a width named twice says its switch %d times, want %d: %q", tc.name, len(again), len(got), again)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
