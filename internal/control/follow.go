package control

import (
	"fmt"
	"math"
	"time"

	"github.com/speclaunch/speclaunch/internal/follow"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// sample is serve following the schedule in force (the learnt one, a
// trial's width at its bucket) by internal/follow's rule, the same one a
// tuned or policy schedule is followed by: the load's mode over
// follow.Window, a stay that repays this engine's measured switch time at
// the measured (or, for a trial, predicted) gain, the cap per hour, and no
// switch before a failed one's hold ends. It is the one place a switch is
// asked for.
func (c Controller) sample(s *State, o Observation) []Action {
	f := &s.Follow
	if f.State.Pending == 0 && o.Width > 0 {
		f.State.Width = o.Width // a reload or a restart may have moved it
	}
	if s.Exp.Back != 0 && f.State.Width == s.Exp.Back {
		s.Exp.Back = 0 // the way back ran
	}
	if s.Exp.Stray != 0 && f.State.Width != s.Exp.Stray {
		s.Exp.Stray = 0 // the stray width no longer serves
	}
	if s.Exp.Kind == Trialing && f.State.Width == s.Exp.Width && s.Load.Bucket == s.Exp.Bucket {
		s.Exp.Ran = true // at its bucket: served elsewhere it measured nothing for the trial
	}
	f.State.Switch = time.Duration(c.switchS(s) * float64(time.Second))
	cfg := follow.Config{Schedule: s.InForce(), Gain: c.gainOf(s), MaxPerHour: c.cfg.MaxPerHour, NotBefore: s.Exp.HoldUntil}
	var d follow.Decision
	f.State, d = follow.Step(cfg, f.State, follow.Observation{Now: o.Now, InFlight: int(math.Round(o.InFlight)), Busy: o.Busy})
	if d.To.Lo > 0 {
		f.Read = d
	}
	if !d.Switch {
		f.Last = d
		return nil
	}
	if _, _, rule := c.gain(s, d.From, d.To); rule != "" {
		d.Reason += "; " + rule // which rule took it within a window
	}
	f.Last = d
	return []Action{{Op: SwitchTo, Width: d.To.Width, Reason: d.Reason, Bucket: d.To.Range(), Load: d.Load}}
}

// gainOf is the follower's gain of to's width over from's at to's bucket.
// Both widths measured there: the measured gain, which at 0 or below holds
// the switch (to's width was measured no faster there). Else the model's
// prediction where a width lacks a measure, as a trial's is chosen by; ok
// false (follow.PriorGain applies) when either is unknown or the
// prediction is no gain. A switch to the default or to a trial is not
// made for a gain: the default (or the width in its place, standsIn) is
// the safe answer the rule returns to when another width's gain is within
// the noise (a measured loss of the default is within it too), and a
// trial is switched to to be measured
// (the check under width 1 measured the default slower before); both take
// the prediction or the prior. Infinite (the follower's shortest stay, one
// window) for a judged trial's way back (Experiment.Back), a trial's width
// the load has left (strayTrial) and a width with no measure where the
// load sits (unmeasuredHere).
func (c Controller) gainOf(s *State) func(from, to schedule.Bucket) (float64, bool) {
	return func(from, to schedule.Bucket) (float64, bool) {
		g, ok, _ := c.gain(s, from, to)
		return g, ok
	}
}

// gain is gainOf's answer, with the rule that made it infinite in the
// words of the switch line ("" for none).
func (c Controller) gain(s *State, from, to schedule.Bucket) (float64, bool, string) {
	b := -1
	for i, r := range c.cfg.Buckets {
		if r[0] == to.Lo && r[1] == to.Hi {
			b = i
		}
	}
	if b < 0 {
		return 0, false, ""
	}
	if s.Exp.Back != 0 && s.Exp.Bucket == b && s.Exp.Back == to.Width {
		return math.Inf(1), true, "the way back from a judged trial, taken within a window"
	}
	safe := to.Width == c.defaultAt(to.Lo) || s.Exp.Kind == Trialing && s.Exp.Bucket == b && s.Exp.Width == to.Width || c.standsIn(s, b, from.Width, to.Width)
	ef, okF := c.estimate(s, b, from.Width)
	et, okT := c.estimate(s, b, to.Width)
	if c.strayTrial(s, b, from.Width, to.Width, okF, okT) {
		return math.Inf(1), true, fmt.Sprintf("width %d was on trial for another load: left within a window", from.Width)
	}
	if c.unmeasuredHere(s, b, from.Width, to.Width, okF, okT || safe) {
		return math.Inf(1), true, fmt.Sprintf("width %d has no measure at this load: left within a window", from.Width)
	}
	if okF && okT && ef.Rate > 0 && !safe {
		return et.Rate/ef.Rate - 1, true, ""
	}
	rf, okF := c.rateAt(s, b, from.Width)
	rt, okT := c.rateAt(s, b, to.Width)
	if !okF || !okT || rf <= 0 || rt <= rf {
		return 0, false, ""
	}
	return rt/rf - 1, true, ""
}

// rateAt is width w's measured rate at bucket b, else the model's.
func (c Controller) rateAt(s *State, b, w int) (float64, bool) {
	if e, ok := c.estimate(s, b, w); ok {
		return e.Rate, true
	}
	return c.predict(s, b, w)
}

// strayTrial says whether the width running is a trial's that the load
// has left for bucket b, where nothing measured it: the trial was chosen
// for its own bucket, and here only the model's prediction keeps it.
// Serve then takes b's width within one window (an infinite gain:
// follow's shortest stay), not after the stay a predicted or prior gain
// asks, where b's width was measured there or the model puts it no
// slower. On an H100 two four-client trials (widths 15, then 2) ran on
// about 21 and 24 s into the one-client load that followed (19 and 23 s
// after it settled), and those 40 s phases
// ran 7 % and 12 % below the same phase of the fixed default's cells
// (docs/benchmark_results/h100-follow-2026-12-06h.md, cells 4 and 5, and
// their serve logs). A width the model puts far slower (mlxcel's flat 16
// on the sim's GB10, unmeasured at four clients) keeps the longer stay.
func (c Controller) strayTrial(s *State, b, from, to int, fromMeasured, toMeasured bool) bool {
	w, eb := s.Exp.Width, s.Exp.Bucket
	if s.Exp.Kind != Trialing {
		w, eb = s.Exp.Stray, s.Exp.StrayBucket // a trial ended unjudged while it served here
	}
	if !c.on("stray trial") || w == 0 || eb == b || w != from || fromMeasured {
		return false
	}
	if toMeasured {
		return true
	}
	rf, okF := c.predict(s, b, from)
	rt, okT := c.predict(s, b, to)
	return okF && okT && rt >= rf
}

// loadReversal is the largest fall of a width's gain over llama.cpp's
// default from one client to four among the committed H200 cells that ran
// fixed widths at both loads on one pair: width 5 of pair 5023L36 (Q8_0),
// +1.6 % at one client on prose prompts, −26.5 % at four on code (one
// run of width 5 there), 28 points
// (docs/benchmark_results/adapteval/h200-llamacpp-d32676d-q8_0-pair5023L36-prose-c1-2026-12-03c-fixed.json
// against …-code-c4-2026-12-03c-fixed.json; the same pair in Q4_K_M on one
// prompt set fell by at most 15 points).
const loadReversal = 0.28

// unmeasuredHere says whether serve should leave the running width within
// one window at bucket b, where the load now sits and nothing measured
// that width, for b's width, which has evidence there (measured there, or
// the default, the safe answer): wherever both were measured, the running
// width was ahead by no more than a change of load has been seen to take
// back (loadReversal). On an H100 width 7, learnt at one client at +9 %
// over width 4, served each four-client phase of 40 s to its end, and
// those phases ran 3.7 % below the fixed default's
// (docs/benchmark_results/h100-follow-2026-12-07.md). A default far behind
// where both ran (mlxcel's flat 16, half the rate of width 3 on the sim's
// GB10) keeps the stay; so does a pair of widths never measured together.
func (c Controller) unmeasuredHere(s *State, b, from, to int, fromMeasured, toBacked bool) bool {
	if !c.on("unmeasured here") || fromMeasured || !toBacked || from == to {
		return false
	}
	lead, _, seen := c.leadElsewhere(s, b, from, to)
	return seen && lead <= loadReversal
}

// leadElsewhere is width w's largest lead over width ref at a bucket other
// than b where both were measured (at: that bucket), and whether one was.
func (c Controller) leadElsewhere(s *State, b, w, ref int) (lead float64, at int, seen bool) {
	for j := range s.Pair.Buckets {
		ew, okW := c.estimate(s, j, w)
		er, okR := c.estimate(s, j, ref)
		if j == b || !okW || !okR || er.Rate <= 0 {
			continue
		}
		if l := ew.Rate/er.Rate - 1; !seen || l > lead {
			lead, at, seen = l, j, true
		}
	}
	return lead, at, seen
}
