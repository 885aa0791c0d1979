// Package follow decides when serve moves a one-width engine (llama.cpp,
// mlxcel, sim) to another bucket of its width schedule. It is a pure
// state machine over explicit state: the shell samples the proxy's own
// count of clients' generation requests in flight (the engine's batch:
// polls of its state are not the load) and reports the switches it ran;
// Step says when to switch and why. Where the schedule came from (the
// operator, a policy entry, `speclaunch tune`, the adaptive controller) is
// not its business: Config.Schedule is whichever is in force. A schedule
// whose width changes at the bucket the load sits in (the adaptive
// controller learnt another width there) is followed by the same rule: the
// load has sat there since it entered the bucket, which the switch must
// repay.
package follow

import (
	"fmt"
	"math"
	"time"

	"github.com/speclaunch/speclaunch/internal/schedule"
)

// Constants of the rule, each from a measurement in this repository.
const (
	// Tick is how often the shell samples the in-flight count. A
	// one-client request on the H200 took about 0.27 s
	// (docs/benchmark_results/h200-llamacpp-d32676d-summary-2026-12-03.md,
	// row D: 171 requests in 45.5 s): about one sample a request.
	Tick = 250 * time.Millisecond
	// Window is how much history the load is read over: the bucket the
	// count sat in longest. About seven one-client requests of the slowest
	// pair that summary measured (row P: 160 requests in 240 s, 1.5 s
	// each): the gap between one client's requests, or a fifth request
	// meeting four, does not move the load.
	Window = 10 * time.Second
	// PriorGain is the gain a switch is assumed to bring where none was
	// measured for the pair: the smallest gain of the best width over the
	// engine's default among the H200 cells where they differed (0.965 of
	// the best for the default in row C of the summary above: 3.6 %).
	// Small, so an unmeasured switch waits longer before it is made.
	PriorGain = 0.036
	// PriorSwitch is the switch time assumed before this engine's own was
	// measured: the slowest switch the H200 summary measured (9.49-10.34 s
	// for the 20 GB target, row P). After one switch, the engine's own.
	PriorSwitch = 10340 * time.Millisecond
	// DefaultMaxPerHour caps switches per hour: 12 is one switch per load
	// change of traffic that changes every 5 minutes; above it the engine
	// would spend more than 12 × 10.34 s = 2 % of the hour switching at the
	// slowest measured switch (row P above).
	DefaultMaxPerHour = 12
)

// Config is what the rule reads besides its state.
type Config struct {
	Schedule schedule.Schedule
	// Gain is the measured fraction by which to's width beats from's width
	// at to's loads (0.25 = 25 % faster); ok false where none was measured
	// (PriorGain applies). A measured gain of 0 or below holds the switch:
	// to's width is not faster there. Nil: nothing measured.
	Gain func(from, to schedule.Bucket) (float64, bool)
	// MaxPerHour caps switches in any hour; 0 is DefaultMaxPerHour.
	MaxPerHour int
	// NotBefore holds every switch until then (after a failed switch, the
	// adaptive width's adapt.window); zero holds none.
	NotBefore time.Time
}

// State is the follower's memory. The zero value is not usable: New.
type State struct {
	Width   int           // the width the engine runs now
	Pending int           // the width a switch is under way to, 0 = none
	Switch  time.Duration // this engine's measured switch time, 0 = none yet

	ring   []int // bucket index of each sample over the last Window
	next   int   // where the next sample goes
	filled int   // samples in ring
	sum    int   // requests in flight summed over the ring (its mean load)
	counts []int // samples per bucket index over the ring

	cand      int       // the bucket the load has sat in since candSince; -1 none
	candSince time.Time // when the load moved into cand (or a failed switch)
	recent    []time.Time
	capped    bool // the cap held a switch back (said once per hold)
	busy      bool // the last sample came while an engine was beside the serving one
}

// New is the state of an engine running width w under cfg. started is how
// long that engine took to start (0 = not measured): a switch starts one
// engine beside the serving one, so it prices the first switch until a
// switch has been measured.
func New(cfg Config, w int, started time.Duration) State {
	n := int(Window / Tick)
	return State{Width: w, Switch: max(started, 0), ring: make([]int, n), counts: make([]int, len(cfg.Schedule)), cand: -1}
}

// Observation is one sample: the server's generation requests in flight
// at Now (on every engine, a draining one's included, and those the proxy
// holds), and Busy, why no switch can start now ("" when one can): an
// engine still drains or starts beside the serving one, so a switch asked
// now would wait behind it and run on a load read before.
type Observation struct {
	Now      time.Time
	InFlight int
	Busy     string
}

// Decision is what Step asks of the shell. Switch: run To's width, logged
// with Reason and the load that caused it.
type Decision struct {
	Switch bool
	From   schedule.Bucket // the bucket in force (its width is running)
	To     schedule.Bucket // the bucket the load sits in
	Load   float64         // mean requests in flight over the window, to a tenth (roundLoad)
	Reason string          // why, or why not yet ("" when the load is where the width is)
	// Capped: the hourly cap began to hold a switch back at this step
	// (once per hold), for the shell to log.
	Capped bool
}

// Step takes one sample and says whether to switch now.
func Step(cfg Config, s State, o Observation) (State, Decision) {
	if o.Busy != "" {
		s.busy = true
	} else if s.busy {
		// The spell an engine drained or started beside the serving one
		// ended: the load is read again from now. The window held that
		// spell's requests, which its drain timeout may just have cut (a
		// campaign saw a switch at "load 2" the second a stuck request
		// was cut, and one back 30 s later).
		s = s.restart()
	}
	s = s.sample(cfg, o)
	d := Decision{Load: roundLoad(s.load())}
	if len(cfg.Schedule) == 0 || s.filled < len(s.ring) {
		return s, d // a full window first: a fresh engine's first seconds say little
	}
	i := s.mode()
	if s.cand != i {
		s.cand, s.candSince = i, o.Now
	}
	d.From, d.To = s.bucketOf(cfg), cfg.Schedule[i]
	switch {
	case s.Pending != 0:
		d.Reason = fmt.Sprintf("a switch to width %d is under way", s.Pending)
		return s, d
	case d.To.Width == s.Width:
		s.capped = false
		return s, d
	}
	g, out := ruledOut(cfg, d.From, d.To)
	if out {
		s.capped = false
		d.Reason = fmt.Sprintf("the load is at %s (mean %.1f), where width %d was measured %+.1f%% against width %d: no switch for it", schedule.InFlightAt(d.To.Range(), d.Load), d.Load, d.To.Width, 100*g, s.Width)
		return s, d
	}
	need := s.dwell(g)
	stayed := o.Now.Sub(s.candSince) + Window/2 // the window saw the load move half a window before the mode did
	if stayed < need {
		d.Reason = fmt.Sprintf("the load has been at %s for %s (mean %.1f); width %d repays a %s switch after %s", schedule.InFlightAt(d.To.Range(), d.Load), stayed.Round(time.Second), d.Load, d.To.Width, s.switchTime().Round(100*time.Millisecond), need.Round(time.Second))
		if math.IsInf(g, 1) { // a rule's switch: no gain repays it (see below)
			d.Reason = fmt.Sprintf("the load has been at %s for %s (mean %.1f); width %d follows after %s", schedule.InFlightAt(d.To.Range(), d.Load), stayed.Round(time.Second), d.Load, d.To.Width, need.Round(time.Second))
		}
		return s, d
	}
	var held bool
	if s, d, held = s.held(cfg, o, d); held {
		return s, d
	}
	d.Switch, s.Pending, s.capped = true, d.To.Width, false
	s.recent = append(s.recent, o.Now)
	d.Reason = fmt.Sprintf("the load has sat at %s for %s (mean %.1f): width %d (%s) for width %d", schedule.InFlightAt(d.To.Range(), d.Load), stayed.Round(time.Second), d.Load, d.To.Width, d.To.Source, s.Width)
	switch g, measured := gain(cfg, d.From, d.To); {
	case math.IsInf(g, 1):
		// A rule's switch, taken within a window (the caller's gain names
		// the rule): no gain is claimed to repay it (a user pass read
		// "repays" on the way back to a width measured 11 % slower).
	case !measured:
		// Nothing measured says it repays: a user pass read
		// "repays" of a default no run had measured as a measurement.
		d.Reason += fmt.Sprintf(" repays a %s switch if it gains the %.1f%% assumed where none is measured", s.switchTime().Round(100*time.Millisecond), 100*PriorGain)
	default:
		d.Reason += fmt.Sprintf(" repays a %s switch", s.switchTime().Round(100*time.Millisecond))
	}
	return s, d
}

// held says whether a switch to d.To whose stay has run out waits all the
// same, with d's reason: the hourly cap, the hold after a failed switch,
// an engine busy beside the serving one, a load whose mean has left the
// bucket its mode still reads.
func (s State) held(cfg Config, o Observation, d Decision) (State, Decision, bool) {
	s.recent = since(s.recent, o.Now.Add(-time.Hour))
	switch limit := maxPerHour(cfg); {
	case len(s.recent) >= limit:
		d.Reason = fmt.Sprintf("held at width %d: %d switches in the last hour, the cap (%d)", s.Width, len(s.recent), limit)
		d.Capped, s.capped = !s.capped, true
	case o.Now.Before(cfg.NotBefore):
		d.Reason = fmt.Sprintf("held at width %d until %s: a switch failed", s.Width, cfg.NotBefore.Format(time.RFC3339))
	case o.Busy != "":
		d.Reason = fmt.Sprintf("the load is at %s (mean %.1f); width %d waits: %s", schedule.InFlightAt(d.To.Range(), d.Load), d.Load, d.To.Width, o.Busy)
	case !meanWithin(d.To, s.busyLoad()):
		// The mode still reads the bucket the load is leaving: on the
		// sim's demo profile a one-client width's stay ran out as four
		// clients came (mode 1, mean 2.1), and it was switched in and out
		// again within the phase.
		d.Reason = fmt.Sprintf("the load has been at %s, but its mean (%.1f) has left it; width %d waits for the load to settle", schedule.InFlightAt(d.To.Range(), d.Load), roundLoad(s.busyLoad()), d.To.Width)
	default:
		return s, d, false
	}
	return s, d, true
}

// Renew is s under a schedule a reload changed: the load is read again
// under the new buckets, and the engine's switch time and the switches of
// the last hour stay (the cap counts across reloads).
func Renew(cfg Config, s State, w int) State {
	n := New(cfg, w, s.Switch)
	n.recent, n.capped = append([]time.Time(nil), s.recent...), s.capped
	return n
}

// Done reports the end of the switch Step asked for: ok with the time it
// took (which prices the next switches), or failed (the engine stays at
// its width; the load must sit in the bucket anew before another try).
func Done(s State, ok bool, took time.Duration) State {
	if ok {
		s.Width = s.Pending
		if took > 0 {
			s.Switch = took
		}
	} else {
		s.cand = -1
	}
	s.Pending = 0
	return s
}

// Overtaken reports that the switch Step asked for did not run because a
// reload (or another switch) replaced it, and that width w serves now: it
// is not counted against the hourly cap, and the load must sit in its
// bucket anew under what now serves.
func Overtaken(s State, w int) State {
	if s.Pending != 0 && len(s.recent) > 0 {
		s.recent = append([]time.Time(nil), s.recent[:len(s.recent)-1]...)
	}
	s.Pending, s.cand, s.Width = 0, -1, w
	return s
}

// Clone is s with its own copies of what Step writes in place, for a
// caller whose state must not share them (a pure step over a copy).
func (s State) Clone() State {
	s.ring = append([]int(nil), s.ring...)
	s.counts = append([]int(nil), s.counts...)
	s.recent = append([]time.Time(nil), s.recent...)
	return s
}

// gain is the gain of a switch from from's width to to's at to's loads:
// the measured one (measured true, which may be 0 or below: to's width
// was measured no faster there, and no switch is made for it), else
// PriorGain (a schedule without measurements, a tuned or policy one).
func gain(cfg Config, from, to schedule.Bucket) (g float64, measured bool) {
	if cfg.Gain != nil {
		if m, ok := cfg.Gain(from, to); ok && !math.IsNaN(m) {
			return m, true
		}
	}
	return PriorGain, false
}

// ruledOut says whether the measured gains rule the switch from from's
// width to to's out (to's width measured no faster at its load), with
// the gain.
func ruledOut(cfg Config, from, to schedule.Bucket) (float64, bool) {
	g, measured := gain(cfg, from, to)
	return g, measured && g <= 0
}

// dwell is Dwell at this engine's switch time.
func (s State) dwell(g float64) time.Duration { return Dwell(s.switchTime(), g) }

// Dwell is how long the load must sit in a bucket before a switch taking
// sw that gains g (> 0): the switch time over the gain (the load is
// expected to stay about as long as it has: a switch made once it has
// stayed that long repays itself over its own stay), and never less than
// one window.
func Dwell(sw time.Duration, g float64) time.Duration {
	return max(Window, time.Duration(min(float64(sw)/g, math.MaxInt64/2))) // a tiny gain: never, without overflow
}

func (s State) switchTime() time.Duration {
	if s.Switch > 0 {
		return s.Switch
	}
	return PriorSwitch
}

// Left is how many switches the hourly cap still allows at now: an
// experiment that needs two (there, and back) is not begun with fewer.
func (s State) Left(cfg Config, now time.Time) int {
	return max(0, maxPerHour(cfg)-len(since(s.recent, now.Add(-time.Hour))))
}

func maxPerHour(cfg Config) int {
	if cfg.MaxPerHour > 0 {
		return cfg.MaxPerHour
	}
	return DefaultMaxPerHour
}

// restart empties the window: the load is read from the next sample on.
func (s State) restart() State {
	s.ring, s.counts = make([]int, len(s.ring)), make([]int, len(s.counts))
	s.next, s.filled, s.sum, s.cand, s.busy = 0, 0, 0, -1, false
	return s
}

// sample puts one observation in the ring.
func (s State) sample(cfg Config, o Observation) State {
	if len(s.ring) == 0 {
		return s
	}
	i := cfg.Schedule.Index(o.InFlight)
	if i < 0 {
		return s
	}
	if len(s.counts) != len(cfg.Schedule) { // the schedule changed: start over
		s.counts, s.filled, s.sum, s.next, s.cand = make([]int, len(cfg.Schedule)), 0, 0, 0, -1
	}
	if s.filled == len(s.ring) {
		old := s.ring[s.next]
		s.counts[old&0xff]--
		s.sum -= old >> 8
	} else {
		s.filled++
	}
	n := min(max(o.InFlight, 0), 1<<20)
	s.ring[s.next] = n<<8 | i
	s.counts[i]++
	s.sum += n
	s.next = (s.next + 1) % len(s.ring)
	return s
}

// mode is the bucket the load sat in longest over the window; on a tie,
// the lower load (the cheaper mistake: a narrower schedule is closer to
// classic decoding's rate under load).
func (s State) mode() int {
	best := 0
	for i, c := range s.counts {
		if c > s.counts[best] {
			best = i
		}
	}
	return best
}

// busyLoad is the window's mean load over its samples with a request in
// flight (0 where none had one): on traffic that comes and goes, idle
// samples would pull the mean below the load the requests meet (two in
// flight half the time read 1.0), and meanWithin would hold the width for
// two back for ever.
func (s State) busyLoad() float64 {
	n := 0
	for _, v := range s.ring[:s.filled] {
		if v>>8 > 0 {
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(s.sum) / float64(n)
}

// meanWithin says whether the mean load x, rounded to a whole request,
// is in b; 0 is read as 1, as Schedule.Index reads an idle sample: an
// idle spell is not a load that left.
func meanWithin(b schedule.Bucket, x float64) bool {
	return b.Contains(max(1, int(math.Round(x))))
}

// roundLoad is a load as it is given anywhere, to a tenth: Step rounds
// Decision.Load once, and its reasons, the shell's log and the status page
// all give that figure. (A switch on a mean of 0.95 said "load 0.9" in its
// reason, %.1f, beside load=1 from the shell's own rounding.)
func roundLoad(x float64) float64 { return math.Round(x*10) / 10 }

func (s State) load() float64 {
	if s.filled == 0 {
		return 0
	}
	return float64(s.sum) / float64(s.filled)
}

// bucketOf is the bucket whose width runs: the one of the window's load
// if it has that width, else the first with it.
func (s State) bucketOf(cfg Config) schedule.Bucket {
	if b := cfg.Schedule[s.mode()]; b.Width == s.Width {
		return b
	}
	for _, b := range cfg.Schedule {
		if b.Width == s.Width {
			return b
		}
	}
	return schedule.Bucket{Width: s.Width, Source: "running"}
}

// since drops the times before cut (the list is in order).
func since(ts []time.Time, cut time.Time) []time.Time {
	i := 0
	for i < len(ts) && ts[i].Before(cut) {
		i++
	}
	return append(ts[:0:0], ts[i:]...)
}

// Refused says, for each switch between two of the schedule's buckets
// that the measured gains rule out (the record behind the schedule found
// the bucket's width no faster than the other's at its load), which
// switch the follower will never make: a schedule edited by hand can name
// a width its record measured slower, and the follower keeps to the
// record, so the operator hears it at start, not only in the status
// page's note once the load gets there.
func Refused(cfg Config) []string {
	if cfg.Gain == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, to := range cfg.Schedule {
		for _, from := range cfg.Schedule {
			once := fmt.Sprint(from.Width, to)
			if from.Width == to.Width || seen[once] {
				continue
			}
			seen[once] = true
			if g, no := ruledOut(cfg, from, to); no {
				out = append(out, fmt.Sprintf("at %s the schedule names width %d, which its record measured %+.1f%% against width %d: the follower will not switch from width %d to it (edit the schedule or tune again)", schedule.InFlight(to.Range()), to.Width, 100*g, from.Width, from.Width))
			}
		}
	}
	return out
}
