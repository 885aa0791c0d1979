package control

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/follow"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// Controller is the pure controller; Step is its only move.
type Controller struct{ cfg Config }

// New makes the controller for cfg.
func New(cfg Config) Controller { return Controller{cfg: cfg.withDefaults()} }

// Config is the controller's settings with the defaults applied.
func (c Controller) Config() Config { return c.cfg }

// Init is the state to start from: pair is what a saved state restored
// (Pair{} for none). Its buckets are the configured ones; a saved bucket
// whose range differs is dropped.
func (c Controller) Init(pair Pair) State {
	s := State{Pair: pair, Load: Load{Bucket: -1}}
	s.Pair = c.fitBuckets(s.Pair)
	s.Follow.State = follow.New(follow.Config{Schedule: s.Pair.Schedule}, 0, 0)
	return s
}

// Step takes one observation and returns the new state and what to do.
// It never writes into in.
func (c Controller) Step(in State, o Observation) (State, []Action) {
	s := in.clone()
	s.Pair = c.fitBuckets(s.Pair)
	switch o.Kind {
	case Scrape:
		return s, c.scrape(&s, o)
	case Probed:
		return s, c.probed(&s, o)
	case Switched:
		return s, c.switched(&s, o)
	case Sample:
		return s, c.sample(&s, o)
	}
	return s, nil
}

// fitBuckets is Fit without its note (Init and Step; serve logs the note
// once when it reads a saved state).
func (c Controller) fitBuckets(p Pair) Pair {
	p, _ = c.Fit(p)
	return p
}

// Fit makes p's buckets the configured ones and its schedule one width per
// bucket. A saved bucket of the same range is kept with its learnt width.
// Where the ranges differ (the state was saved under another starting
// schedule, whose edges split the buckets otherwise), a saved bucket's
// measurements go to the configured bucket inside it that holds its mean
// load, and the rest is learnt again from the default; note says so once
// ("" when p's buckets were the configured ones, or it had none).
func (c Controller) Fit(p Pair) (Pair, string) {
	if c.fits(p) {
		return p, ""
	}
	same, old, oldSched := c.sameRanges(p), p.Buckets, p.Schedule
	from := make([]int, len(c.cfg.Buckets)) // the saved bucket each takes, -1 none
	p.Buckets, p.Schedule = nil, nil
	var kept, mapped, fresh []string
	for i, r := range c.cfg.Buckets {
		nb := schedule.Bucket{Lo: r[0], Hi: r[1], Width: c.defaultAt(r[0]), Source: "default"}
		b := Bucket{Lo: r[0], Hi: r[1], Runs: map[int][]Run{}, Tried: map[int]time.Time{}}
		from[i] = -1
		for j, o := range old {
			if o.Lo == r[0] && o.Hi == r[1] {
				from[i], b = j, o
				if j < len(oldSched) && oldSched[j].Lo == o.Lo && oldSched[j].Hi == o.Hi && !safeAnswer(oldSched[j].Source) {
					nb = oldSched[j] // decided; the default's width otherwise (the default may have changed)
				}
			}
		}
		for j, o := range old {
			if from[i] < 0 && o.NSamples > 0 && within(r, o) && nb.Contains(max(1, int(math.Round(o.N)))) {
				from[i], b = j, Bucket{Lo: r[0], Hi: r[1], N: o.N, NSamples: o.NSamples, Runs: maps.Clone(o.Runs), Tried: maps.Clone(o.Tried),
					Acc: slices.Clone(o.Acc), Cycles: slices.Clone(o.Cycles)}
				mapped = append(mapped, fmt.Sprintf("%s's for %s (its mean load %.1f)", schedule.Bucket{Lo: o.Lo, Hi: o.Hi}.Range(), nb.Range(), o.N))
			}
		}
		switch {
		case from[i] < 0:
			fresh = append(fresh, nb.Range())
		case b.Lo == old[from[i]].Lo && b.Hi == old[from[i]].Hi:
			kept = append(kept, nb.Range())
		}
		p.Buckets, p.Schedule = append(p.Buckets, b), append(p.Schedule, nb)
	}
	p.Regimes = fitRegimes(p.Regimes, len(old), from)
	if len(old) == 0 || same {
		return p, ""
	}
	var saved, now []string
	for _, o := range old {
		saved = append(saved, schedule.Bucket{Lo: o.Lo, Hi: o.Hi}.Range())
	}
	for _, b := range p.Schedule {
		now = append(now, b.Range())
	}
	note := fmt.Sprintf("adapt: the saved state's load buckets (%s) are not this run's (%s: the fixed buckets split at the starting schedule's edges)", strings.Join(saved, ", "), strings.Join(now, ", "))
	for _, part := range []struct {
		what string
		l    []string
	}{{"kept", kept}, {"measurements taken", mapped}, {"learnt again", fresh}} {
		if len(part.l) > 0 {
			note += "; " + part.what + ": " + strings.Join(part.l, ", ")
		}
	}
	return p, note
}

// safeAnswer says whether a bucket's width is the default's, undecided
// ("default") or decided to stay at the safe answer (choose's "default
// width 16…"): such a bucket serves the default in force, so a state saved
// under another default (a tune or a policy edit since) resumes at the new
// one, not at the old default's width.
func safeAnswer(source string) bool { return strings.HasPrefix(source, "default") }

// fits says whether p's buckets and schedule are the configured buckets,
// with the default's width where nothing was decided yet.
func (c Controller) fits(p Pair) bool {
	ok := c.sameRanges(p) && len(p.Schedule) == len(c.cfg.Buckets)
	for i := 0; ok && i < len(p.Schedule); i++ {
		sb := p.Schedule[i]
		ok = sb.Lo == p.Buckets[i].Lo && sb.Hi == p.Buckets[i].Hi && (!safeAnswer(sb.Source) || sb.Width == c.defaultAt(sb.Lo))
	}
	return ok
}

// sameRanges says whether p's buckets have the configured ranges.
func (c Controller) sameRanges(p Pair) bool {
	ok := len(p.Buckets) == len(c.cfg.Buckets)
	for i := 0; ok && i < len(p.Buckets); i++ {
		ok = p.Buckets[i].Lo == c.cfg.Buckets[i][0] && p.Buckets[i].Hi == c.cfg.Buckets[i][1]
	}
	return ok
}

// within says whether the range r lies inside the saved bucket o.
func within(r [2]int, o Bucket) bool {
	return o.Lo <= r[0] && (o.Hi == 0 || r[1] != 0 && r[1] <= o.Hi)
}

// fitRegimes maps each kept traffic's runs, saved per bucket of n, to the
// configured buckets (from: the saved bucket each takes); one saved with
// another count of buckets is dropped.
func fitRegimes(rs []Regime, n int, from []int) []Regime {
	var out []Regime
	for _, r := range rs {
		if len(r.Runs) != n {
			continue
		}
		runs := make([]map[int][]Run, len(from))
		for i, j := range from {
			runs[i] = map[int][]Run{}
			if j >= 0 {
				runs[i] = maps.Clone(r.Runs[j])
			}
		}
		r.Runs = runs
		out = append(out, r)
	}
	return out
}

// defaultAt is the safe answer at n requests in flight.
func (c Controller) defaultAt(n int) int { return max(1, c.cfg.Default.At(n).Width) }

// scrape takes one scrape of the serving engine.
func (c Controller) scrape(s *State, o Observation) []Action {
	if s.Load.Since.IsZero() {
		s.Load.Since = o.Now
	}
	var acts []Action
	if o.Engine != s.Engine.Gen { // first: the load is read at this engine's slots
		acts = c.reslot(s, o)
		s.Engine = Engine{Gen: o.Engine, Width: o.Width, Slots: o.Slots, Since: o.Now}
	}
	acts = append(acts, c.observeLoad(s, o)...)
	e := &s.Engine
	if c.on("warmup") && o.Now.Sub(e.Since) < c.cfg.WarmUp {
		return acts
	}
	d, ok := o.Counters.since(e.Base)
	if !e.HasBase || !ok {
		e.Base, e.HasBase = o.Counters, true
		return acts
	}
	e.Base = o.Counters
	b := s.Load.Bucket
	if b < 0 || d.Tokens <= 0 || d.Secs <= 0 || c.bucketOf(o.InFlight, b) != b {
		return acts // no load yet, idle, or this scrape's load is another bucket's
	}
	// The probe's requests take the engine's time from the traffic: on the
	// H100, width 4's requests at four clients ran 5.8 ms a token while the
	// probe ran, 5.0 just before, and classic's trial was judged against
	// that at −2.2 % where llama-server's timings say −13 %
	// (docs/benchmark_results/h100-follow-2026-12-05b.md).
	if o.Probing && c.on("probe apart") {
		return acts
	}
	run := c.addRun(s, b, d, o.Now)
	e.Counted++
	if s.Follow.State.Pending != 0 || run.Cycles < c.cfg.MinCycles || run.Scrapes < minScrapes || e.Counted-e.Decided < minScrapes {
		return acts
	}
	e.Decided = e.Counted
	return append(acts, c.decide(s, b, o.Now)...)
}

// reslot sets aside the rates measured under other slots when a new
// engine has another count than the one before it (a reload changed -np):
// a width's rate depends on how many requests decode together, and runs
// of both counts were pooled in one estimate (a user pass on the sim).
// Every bucket's runs, trial times and learnt width go (setAside) into
// Pair.Aside under the old count, with the experiment under way; what was
// set aside under the new count earlier in the run comes back. The
// acceptance, the verify cost and a hold after a failed switch stay.
func (c Controller) reslot(s *State, o Observation) []Action {
	was := s.Engine.Slots
	if was <= 0 || o.Slots <= 0 || o.Slots == was {
		return nil
	}
	p := s.Pair
	all, kept := make([]int, len(p.Buckets)), make([]Slotted, len(p.Buckets))
	for i, b := range p.Buckets {
		all[i], kept[i] = i, Slotted{Lo: b.Lo, Hi: b.Hi, Runs: b.Runs, Tried: b.Tried, Why: b.Why}
		if i < len(p.Schedule) {
			kept[i].Width, kept[i].Source = p.Schedule[i].Width, p.Schedule[i].Source
		}
	}
	back := p.Aside[o.Slots]
	p = c.setAside(p, all)
	p.Aside = maps.Clone(p.Aside)
	if p.Aside == nil {
		p.Aside = map[int][]Slotted{}
	}
	p.Aside[was] = kept
	delete(p.Aside, o.Slots)
	took := 0
	for _, k := range back {
		for i := range p.Buckets {
			if p.Buckets[i].Lo == k.Lo && p.Buckets[i].Hi == k.Hi {
				p.Buckets[i].Runs, p.Buckets[i].Tried, p.Buckets[i].Why = k.Runs, k.Tried, k.Why
				if i < len(p.Schedule) {
					p.Schedule[i].Width, p.Schedule[i].Source = k.Width, k.Source
				}
				took++
			}
		}
	}
	msg := fmt.Sprintf("adapt: engine %d has %s where the engine before it had %d: the rates measured under %d are set aside (taken back if an engine of %d serves again) and learnt again (the acceptance and the verify cost are kept)", o.Engine, counted(o.Slots, "slot"), was, was, was)
	switch {
	case took > 0:
		msg = fmt.Sprintf("adapt: engine %d has %s where the engine before it had %d: the rates measured under %d are set aside, and those measured under %d earlier in this run are taken back, %d of %d buckets (schedule %s; the acceptance and the verify cost are kept)", o.Engine, counted(o.Slots, "slot"), was, was, o.Slots, took, len(p.Buckets), p.Schedule)
	case len(back) > 0:
		msg += fmt.Sprintf("; those measured under %d earlier in this run were for other load buckets (the schedule changed since) and are dropped", o.Slots)
	}
	s.Pair = p
	s.Exp = Experiment{HoldUntil: s.Exp.HoldUntil}
	return []Action{{Op: Log, Msg: msg}}
}

// since is cur − base, ok false when a counter went backwards (the
// engine restarted).
func (cur Counters) since(base Counters) (d Counters, ok bool) {
	d = Counters{Cycles: cur.Cycles - base.Cycles, Tokens: cur.Tokens - base.Tokens, Secs: cur.Secs - base.Secs, Busy: cur.Busy - base.Busy}
	if d.Cycles < 0 || d.Tokens < 0 || d.Secs < 0 || d.Busy < 0 || len(cur.AtLeast) < len(base.AtLeast) {
		return Counters{}, false
	}
	d.AtLeast = make([]float64, len(cur.AtLeast))
	for k, v := range cur.AtLeast {
		if k < len(base.AtLeast) {
			v -= base.AtLeast[k]
		}
		if v < 0 {
			return Counters{}, false
		}
		d.AtLeast[k] = v
	}
	return d, true
}

// observeLoad samples the scrape's generation requests in flight and
// settles the load bucket the scrapes measure (serve follows the schedule
// by Sample). A scrape with nothing in flight is no sample and moves no
// bucket: the window is the load while there is one. Idle for idleGap
// (nothing in flight, nothing generated), the window starts again and no
// bucket is measured until the load settles anew, so that the first
// scrapes of the traffic after a pause are neither counted under the
// bucket before it nor averaged with it.
func (c Controller) observeLoad(s *State, o Observation) []Action {
	l := &s.Load
	if o.InFlight <= 0 {
		if o.Counters.Tokens != s.Engine.Base.Tokens {
			l.IdleSince = time.Time{} // requests ended since the last scrape
			return nil
		}
		if l.IdleSince.IsZero() {
			l.IdleSince = o.Now
		}
		if o.Now.Sub(l.IdleSince) < idleGap || len(l.Samples) == 0 && l.Bucket < 0 {
			return nil
		}
		l.Samples, l.Bucket, l.Gap = nil, -1, true
		return []Action{{Op: Log, Msg: fmt.Sprintf("adapt: no request in flight for %s: the load is measured again once requests come back", idleGap)}}
	}
	l.IdleSince = time.Time{}
	l.Samples = append(l.Samples, o.InFlight)
	if len(l.Samples) > c.cfg.LoadWindow {
		l.Samples = l.Samples[len(l.Samples)-c.cfg.LoadWindow:]
	}
	if 2*len(l.Samples) < c.cfg.LoadWindow {
		return nil
	}
	mean := l.mean()
	b := c.bucketOf(mean, l.Bucket)
	if bk := &s.Pair.Buckets[b]; true {
		bk.NSamples++
		bk.N += (math.Max(1, mean) - bk.N) / bk.NSamples
	}
	if b == l.Bucket {
		return nil
	}
	first := l.Bucket < 0 && !l.Gap
	l.Bucket, l.Gap = b, false
	s.Engine.Decided = s.Engine.Counted // a new bucket: its run starts
	if c.on("bucket acceptance") {      // and the drift test's window, read against this bucket's acceptance
		s.Engine.Recent, s.Engine.RecentCycles, s.Engine.RecentPos = nil, nil, nil
	}
	if first {
		return c.probeFor(s, b, o.Now)
	}
	acts := []Action{{Op: Log, Msg: fmt.Sprintf("adapt: load moved to %s (mean %.1f)", schedule.InFlight(s.Pair.Schedule[b].Range()), mean)}}
	return append(acts, c.probeFor(s, b, o.Now)...)
}

// idleGap is how long the load is idle before its window starts again:
// the span the follower reads the load over (follow.Window: about seven
// one-client requests of the slowest pair the H200 summary measured), so
// that a gap the follower would read as a change of load is one here too.
// A quiet shorter than that, between the requests of one traffic, keeps
// the window, as every idle scrape did before.
const idleGap = follow.Window

// loadSlack is how far outside its range the mean in-flight count may
// wander before the bucket changes. The calibrated matrix runs one and
// four clients, inside buckets, and shows no effect of it
// (docs/benchmark_results/control-matrix-2026-12-05.md); two clients on
// the sim (internal/cli's TestAdaptEvalReportsTheChosenWidth) kept a mean
// of 1.4 in flight, and without it the bucket flipped between 1 and 2-4.
const loadSlack = 0.75

// bucketOf is the bucket of a mean in-flight count, rounded; cur is kept
// while the mean is within loadSlack of it.
func (c Controller) bucketOf(mean float64, cur int) int {
	if cur >= 0 {
		r := c.cfg.Buckets[cur]
		if mean >= float64(r[0])-loadSlack && (r[1] == 0 || mean <= float64(r[1])+loadSlack) {
			return cur
		}
	}
	n := max(1, int(math.Round(mean)))
	for i, r := range c.cfg.Buckets {
		if n >= r[0] && (r[1] == 0 || n <= r[1]) {
			return i
		}
	}
	return len(c.cfg.Buckets) - 1
}

// on says whether a rule is on (all are, outside the ablation).
func (c Controller) on(rule string) bool { return !c.cfg.Off[rule] }

// Redefault is the controller whose safe answer is d (a reload resolved
// another schedule: a policy edit, another GPU capability), and s fitted
// to it (Fit): a bucket the controller decided keeps its width, one it had
// not takes d's, so the width the reload started is the schedule's and no
// switch undoes it. Where d's edges split the load otherwise, what was
// indexed by bucket starts again: the load's reading, a trial (judged
// against the old default), the probe's note of skipped buckets.
func (c Controller) Redefault(s State, d schedule.Schedule) (Controller, State) {
	cfg := c.cfg
	cfg.Default, cfg.Buckets = d, nil
	nc := New(cfg)
	s = s.clone()
	for i, b := range s.Pair.Schedule {
		if b.Width == c.defaultAt(b.Lo) {
			// Decided to stay at the safe answer ("default width 6"): the
			// new safe answer serves there, as where nothing was decided.
			s.Pair.Schedule[i].Source = "default"
		}
	}
	// A way back was to the old schedule's width: the new default serves
	// there now (a review: Back kept the old width through a reload).
	s.Exp.Back, s.Exp.Stray = 0, 0
	if !slices.Equal(nc.cfg.Buckets, c.cfg.Buckets) {
		s.Load = Load{Bucket: -1, Since: s.Load.Since}
		if s.Exp.Kind != NoExp {
			s.Exp = Experiment{HoldUntil: s.Exp.HoldUntil}
		}
		s.Probe.Bucket, s.Probe.Skipped = -1, nil
	}
	s.Pair = nc.fitBuckets(s.Pair)
	return nc, s
}
