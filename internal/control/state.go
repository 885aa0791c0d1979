package control

import (
	"maps"
	"slices"
	"time"

	"github.com/speclaunch/speclaunch/internal/follow"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// State is everything the controller knows. Each part is reset by one
// assignment: s.Pair = Pair{} when the model pair changes, s.Engine =
// Engine{} when another engine serves, s.Exp = Experiment{} when an
// experiment ends. Load is the clients' and outlives all three; Follow is
// serve following the schedule in force (InForce) by the load; Probe is
// the probe under way, s.Probe = Probing{} at its answer.
type State struct {
	Pair   Pair
	Engine Engine
	Exp    Experiment
	Load   Load
	Follow Follow
	Probe  Probing
}

// Probing is the probe the controller asked for, from the Probe action to
// its answer (Probed): at most one runs at a time, because two probes of
// one engine evict each other's prefix from its cache and both fail (the
// demo's sim under a ramp of 1 to 6 clients ran three at once).
type Probing struct {
	Since  time.Time // when it was asked for; zero when none runs
	Bucket int       // the load bucket it is for
	// Skipped are the buckets the load entered meanwhile whose probe
	// waits for this one (each said once); the bucket the load is in when
	// it ends is probed then.
	Skipped []int
}

// Follow is internal/follow's rule over the schedule in force: its state
// (the width running, a switch under way, the load's recent samples, the
// switches of the last hour) and its last decision, for the status.
type Follow struct {
	State follow.State
	Last  follow.Decision
	// Read is the last decision made over a full window: after a
	// switch the window is read again, and the status shows the load
	// last read meanwhile, not 0 (a review: "load": 0 with four clients
	// in flight for 8-10 s after each switch).
	Read follow.Decision
}

// Pair is what belongs to the model pair on this host: saved, it survives
// restarts (see Saved).
type Pair struct {
	// Acc is the acceptance by draft position since the traffic last
	// changed: Acc[k-1] counts the cycles that accepted at least k draft
	// tokens, of Cycles[k-1] cycles that drafted position k.
	Acc, Cycles []float64
	// Verify is the probed verify cost by rows (ms for one target forward
	// over that many new tokens); read between probed rows linearly,
	// never extrapolated.
	Verify map[int]float64
	// Buckets is what was measured at each load bucket (Config.Buckets).
	Buckets []Bucket
	// SwitchS is the measured seconds of one switch (0: none measured;
	// Config.SwitchS is taken meanwhile).
	SwitchS float64
	// Schedule is the learnt schedule: per bucket the width and, in its
	// Source, the evidence.
	Schedule schedule.Schedule
	// Regimes are what was measured under traffic that changed, kept for
	// when it comes back (at most maxRegimes, the newest).
	Regimes []Regime `json:",omitempty"`
	// Relearning: the traffic changed and the next decision tries to take
	// a regime back (recall).
	Relearning bool `json:",omitempty"`
	// Changes are when the drift test last found the traffic changed (at
	// most maxChanges): their gap is how long this traffic stays put.
	Changes []time.Time `json:",omitempty"`
	// TrialError is the latest judged trial's error of the model's
	// prediction of its rate (measured / predicted − 1), shown in the
	// status and /metrics. It does not enter a decision: dividing later
	// trials' predictions by 1 + TrialError made the calibrated matrix
	// worse (docs/benchmark_results/h200-follow-2026-12-05.md).
	TrialError float64 `json:",omitempty"`
	// Decisions counts the decisions made.
	Decisions int
	// Saved is when the pair's knowledge last changed in a way worth
	// saving (the shell writes it on Save).
	Saved time.Time
	// Aside is what the buckets learnt under another slot count, by that
	// count, set aside while an engine of other slots serves (reslot) and
	// taken back when one of that count serves again: a user pass
	// reloaded -np 4 → 8 → 4 and the run's state, saved under the key of
	// four, had lost what it learnt at four. Not saved: a start under
	// other slots reads its own key's file.
	Aside map[int][]Slotted `json:"-"`
}

// Slotted is what one bucket learnt under one slot count: what setAside
// clears, but for the regimes' runs (a drift meanwhile may have changed
// the regimes).
type Slotted struct {
	Lo, Hi int // the bucket's range: taken back only into the same range
	Runs   map[int][]Run
	Tried  map[int]time.Time
	Why    string
	// Width and Source are the bucket's entry of the learnt schedule.
	Width  int
	Source string
}

// Bucket is one load bucket's measurements.
type Bucket struct {
	Lo, Hi int // concurrency range, Hi 0 = no upper bound
	// N is the mean requests in flight while the load was in this bucket
	// (the rows of one cycle are N·W).
	N, NSamples float64
	// Runs holds each width's runs, one per engine that served it here.
	Runs map[int][]Run
	// Tried is when each width was last tried here (a trial), so that a
	// width is not tried again before Config.RetryAfter.
	Tried map[int]time.Time
	// Acc and Cycles are the acceptance by position learnt while the load
	// was in this bucket, as Pair's: the drift test compares a bucket with
	// itself, because the acceptance can move with the load (on an H100 it
	// ran 11-15 % higher at four clients than at one, and a test against
	// the pair's read the load change as a change of traffic:
	// docs/benchmark_results/h100-follow-2026-12-05.md).
	Acc, Cycles []float64 `json:",omitempty"`
	// Why is the last decision's reason, for the status.
	Why string
}

// Run is one engine's measurement of its width at one bucket.
type Run struct {
	Engine uint64    // the engine's generation
	At     time.Time // last updated
	// Tokens generated, Secs served (summed over requests), Cycles
	// (summed over requests; for width 1 every token is one), over
	// Scrapes scrapes.
	Tokens, Secs, Cycles float64
	// Busy is the engine's own seconds generating within Secs (0 where
	// the engine does not say).
	Busy    float64
	Scrapes int
	// SumR, SumR2: the sum and the sum of squares of each scrape's rate
	// (tokens/secs), for the run's own standard error (batch means).
	SumR, SumR2 float64
	// SumT, SumT2: the same of each scrape's tokens per cycle, for the
	// drift test (tokens per cycle does not depend on the engine).
	SumT, SumT2 float64
}

// Engine is what belongs to the engine serving now.
type Engine struct {
	Gen   uint64
	Width int
	Slots int // its total_slots (0: unknown)
	// Since is when it was first seen.
	Since time.Time
	// Base is the scrape its counting starts from; HasBase false until
	// the first scrape after its warm-up.
	Base    Counters
	HasBase bool
	// Recent holds the tokens per cycle of its latest scrapes (at most
	// driftScrapes), and RecentCycles their cycles: the drift test's.
	Recent       []float64
	RecentCycles []float64
	// RecentPos holds the same scrapes' cycles accepting at least k draft
	// tokens, by k: a regime kept at a change leaves them out (they span
	// the change).
	RecentPos [][]float64
	// Last is its last decision.
	Last Decision
	// Counted is the scrapes it has counted; Decided is Counted at its
	// last decision.
	Counted, Decided int
	// Stays are the stay lines logged lately, by shape (stayShape): the
	// same stay is not logged again within stayRepeat, also where stays at
	// two loads alternate (an operator's pass saw one stay every 90 s,
	// with the other load's between). At most maxStays, the oldest dropped.
	Stays []StayMark
}

// StayMark is a stay line's shape and when it was last logged.
type StayMark struct {
	Shape string
	At    time.Time
}

// maxStays bounds Engine.Stays: a stay a bucket, for the few buckets a
// schedule has, and their alternatives.
const maxStays = 16

// Decision is one decision, as the status shows it.
type Decision struct {
	Running int    `json:"running"`
	Choice  int    `json:"choice"` // the width asked for (a trial's too); Running when staying
	Switch  bool   `json:"switch"`
	Reason  string `json:"reason"`
	// Judged: the running width had a measure of its own at this load.
	Judged bool `json:"judged"`
}

// ExpKind is the kind of experiment under way.
type ExpKind int

// Experiments.
const (
	NoExp    ExpKind = iota
	Trialing         // a width served at one bucket to be measured before it is judged
)

// Experiment is the experiment under way.
type Experiment struct {
	Kind   ExpKind
	Width  int // the width on trial
	From   int // the width it leaves
	Bucket int // the bucket it is for
	Since  time.Time
	Reason string
	// Predicted is the model's rate for the trial's width (0 for a check,
	// which is not chosen by the model).
	Predicted float64
	// Ran: the trial's width has served since the trial began. Until it
	// has, a decision at its bucket leaves the trial be (decide).
	Ran bool
	// HoldUntil: after a failed switch no other is asked for until then.
	HoldUntil time.Time
	// Back is the width a judged trial went back to at Bucket (Kind
	// NoExp), until serve runs it: the trial's second switch, which the
	// hourly cap kept for it (capped), taken within one window.
	Back int
	// Stray is the width of a trial for StrayBucket that a decision at
	// another bucket ended unjudged while it served there, until it stops
	// serving: the follower leaves it as it leaves a trial's (strayTrial),
	// where the trial's end would otherwise have kept it on at the prior's
	// stay (a campaign on the sim: a whole four-client phase).
	Stray, StrayBucket int
}

// Load is the clients' load as the proxy counts it.
type Load struct {
	Samples []float64 // the latest in-flight samples, at most Config.LoadWindow
	Bucket  int       // the settled bucket (index into Config.Buckets), -1 before one
	// Since is the first scrape's time: the traffic held from then until
	// the first change found (Pair.Changes).
	Since time.Time
	// IdleSince is the first scrape of the idle spell under way (nothing
	// in flight, nothing generated); zero while there is load. Gap: the
	// window started again after an idle gap and no bucket has settled
	// since.
	IdleSince time.Time
	Gap       bool
}

// mean is the load window's mean requests in flight (0: no sample).
func (l Load) mean() float64 {
	if len(l.Samples) == 0 {
		return 0
	}
	sum := 0.0
	for _, v := range l.Samples {
		sum += v
	}
	return sum / float64(len(l.Samples))
}

// clone deep-copies s, so that Step never writes into its argument.
func (s State) clone() State {
	p := s.Pair
	p.Acc, p.Cycles = slices.Clone(p.Acc), slices.Clone(p.Cycles)
	p.Verify = maps.Clone(p.Verify)
	p.Regimes = slices.Clone(p.Regimes) // nor a Regime's: recall clones what it takes
	p.Changes = slices.Clone(p.Changes)
	p.Schedule = slices.Clone(p.Schedule)
	p.Aside = maps.Clone(p.Aside) // its entries are replaced, never written in place
	p.Buckets = slices.Clone(p.Buckets)
	for i, b := range p.Buckets {
		b.Runs = maps.Clone(b.Runs)
		for w, rs := range b.Runs {
			b.Runs[w] = slices.Clone(rs)
		}
		b.Tried = maps.Clone(b.Tried)
		b.Acc, b.Cycles = slices.Clone(b.Acc), slices.Clone(b.Cycles)
		p.Buckets[i] = b
	}
	s.Pair = p
	s.Engine.Base.AtLeast = slices.Clone(s.Engine.Base.AtLeast)
	s.Engine.Recent, s.Engine.RecentCycles = slices.Clone(s.Engine.Recent), slices.Clone(s.Engine.RecentCycles)
	s.Engine.RecentPos = slices.Clone(s.Engine.RecentPos) // its rows are never written in place
	s.Engine.Stays = slices.Clone(s.Engine.Stays)
	s.Load.Samples = slices.Clone(s.Load.Samples)
	s.Follow.State = s.Follow.State.Clone()
	s.Probe.Skipped = slices.Clone(s.Probe.Skipped)
	return s
}

// InForce is the schedule serve follows: the learnt one, with a trial's
// width at its bucket while the trial is under way.
func (s State) InForce() schedule.Schedule {
	in := slices.Clone(s.Pair.Schedule)
	if e := s.Exp; e.Kind == Trialing && e.Bucket >= 0 && e.Bucket < len(in) {
		in[e.Bucket].Width, in[e.Bucket].Source = e.Width, "trial: "+e.Reason
	}
	return in
}

// DropQueued clears, from a state saved before the shell counted a queued
// request by its share of the time (proxy.Backend.Served at the engine's
// slots), the runs of the buckets whose mean load was above slots (in
// the regimes kept too), and their learnt widths: their seconds held the
// whole queue, so a width's rate there read lower the longer its requests
// waited. It returns how many buckets it cleared.
func (c Controller) DropQueued(p Pair, slots int) (Pair, int) {
	if slots <= 0 {
		return p, 0
	}
	var clear []int
	for i, b := range p.Buckets {
		if b.N > float64(slots) && len(b.Runs) > 0 {
			clear = append(clear, i)
		}
	}
	return c.setAside(p, clear), len(clear)
}

// setAside is p without the runs, the trial times and the learnt widths
// of the buckets at idx, in the regimes kept too (recall would bring them
// back); the acceptance and the verify cost stay. It writes nothing of p.
func (c Controller) setAside(p Pair, idx []int) Pair {
	if len(idx) == 0 {
		return p
	}
	p.Buckets, p.Schedule, p.Regimes = slices.Clone(p.Buckets), slices.Clone(p.Schedule), slices.Clone(p.Regimes)
	for _, i := range idx {
		p.Buckets[i].Runs, p.Buckets[i].Tried, p.Buckets[i].Why = map[int][]Run{}, map[int]time.Time{}, ""
		if i < len(p.Schedule) {
			p.Schedule[i].Width, p.Schedule[i].Source = c.defaultAt(p.Buckets[i].Lo), "default"
		}
		for r := range p.Regimes {
			if i < len(p.Regimes[r].Runs) {
				p.Regimes[r].Runs = slices.Clone(p.Regimes[r].Runs)
				p.Regimes[r].Runs[i] = map[int][]Run{}
			}
		}
	}
	return p
}
