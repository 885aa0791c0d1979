package control

import (
	"fmt"
	"math"
	"time"

	"github.com/speclaunch/speclaunch/internal/follow"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// Status is the controller's state as /speclaunch/status shows it.
type Status struct {
	State string `json:"state"` // "watching", "switching", "trial", "holding"
	Width int    `json:"width"` // serving now
	// Schedule is the learnt schedule in its text form, Describe's words,
	// and each bucket with the evidence for its width (Source).
	Schedule string            `json:"schedule"`
	Describe string            `json:"describe"`
	Buckets  []schedule.Bucket `json:"buckets"`
	// Bucket is the load's bucket of the schedule in force where its
	// width runs (none while another serves there), Load the mean requests
	// in flight over the follower's window (the last read while it is
	// read again after a switch), and
	// Follow the follower's last word (why it switched or waits); ""
	// before its first full window. Measuring is the load bucket the
	// scrapes measure now.
	Bucket    string  `json:"bucket,omitempty"`
	Load      float64 `json:"load"`
	Follow    string  `json:"follow,omitempty"`
	Measuring string  `json:"measuring,omitempty"`
	SwitchS   float64 `json:"switch_s,omitempty"`
	// Slots is the serving engine's total_slots (omitted: unknown): a
	// load above them is priced at them, the rest waiting in its queue.
	Slots int `json:"slots,omitempty"`
	// PredictionError is the latest judged trial's measured / predicted
	// rate − 1 (Pair.TrialError): below zero, the model was too hopeful;
	// null until a trial is judged, so that "none yet" never reads as a
	// perfect prediction.
	PredictionError *float64 `json:"prediction_error"`
	Note            string   `json:"note,omitempty"`
	// Decisions counts the decisions; LastDecision is the serving
	// engine's latest (nil before one), with the running width among its
	// candidates when it judged that width (what scripts/adapteval's
	// settle rule reads).
	Decisions    int           `json:"decisions"`
	LastDecision *lastDecision `json:"last_decision,omitempty"`
	// Resumed is when an earlier run saved what this one started from
	// (RFC 3339; set by the shell); empty when it learnt from scratch.
	Resumed string    `json:"resumed,omitempty"`
	Updated time.Time `json:"updated"`
}

// Status summarises s at now.
func (s State) Status(now time.Time) Status {
	st := Status{State: "watching", Width: s.Engine.Width, Slots: s.Engine.Slots, Schedule: s.Pair.Schedule.String(), Describe: s.Pair.Schedule.Describe(),
		Buckets: append(schedule.Schedule(nil), s.Pair.Schedule...), SwitchS: s.Pair.SwitchS, Updated: now}
	if te := s.Pair.TrialError; te != 0 {
		st.PredictionError = &te
	}
	if d := s.Engine.Last; d.Running > 0 {
		st.LastDecision = &lastDecision{Decision: d}
		if d.Judged {
			st.LastDecision.Candidates = []candidate{{Width: d.Running}}
		}
	}
	st.Decisions = s.Pair.Decisions
	if b := s.Load.Bucket; b >= 0 && b < len(s.Pair.Schedule) {
		st.Measuring = s.Pair.Schedule[b].Range()
	}
	// The serving width as the follower sees it (its samples come four
	// times a second; the scrapes that set Engine every 2 s, and none
	// before the first: a pass saw width 0 for a second after the probe).
	if w := s.Follow.State.Width; w > 0 {
		st.Width = w
	}
	d := s.Follow.Last
	switch r := s.Follow.Read; {
	case d.To.Lo > 0: // a full window read: the load, the follower's word, and the load's bucket where its width runs
		st.Load, st.Follow = d.Load, d.Reason
		if d.To.Width == st.Width {
			st.Bucket = d.To.Range()
		}
	case r.To.Lo > 0: // read again since the engine changed: the load last read
		st.Load = r.Load
		st.Follow = fmt.Sprintf("the load is read again over a %s window since the engine changed (%.1f requests in flight when last read)", follow.Window, r.Load)
	}
	switch {
	case s.Follow.State.Pending != 0:
		st.State, st.Note = "switching", fmt.Sprintf("switching to width %d: %s", s.Follow.State.Pending, s.Follow.Last.Reason)
	case s.Exp.Kind == Trialing:
		st.State, st.Note = "trial", s.trialNote(st.Width)
	case now.Before(s.Exp.HoldUntil):
		st.State, st.Note = "holding", "a switch failed; none before "+s.Exp.HoldUntil.Format(time.RFC3339)
	}
	return st
}

// trialNote says what a trial under way is doing, serving width w:
// measured at its bucket, waiting for the follower's switch to it, or
// paused (the load left its bucket, or the follower left its width).
func (s State) trialNote(w int) string {
	e := s.Exp
	at := schedule.InFlight(s.Pair.Schedule[e.Bucket].Range())
	here := s.Load.Bucket == e.Bucket
	switch {
	case w == e.Width && here:
		return fmt.Sprintf("measuring width %d at %s before judging it: %s", e.Width, at, e.Reason)
	case here && !e.Ran:
		return fmt.Sprintf("width %d is to be tried at %s: waiting for the switch to it (%s)", e.Width, at, e.Reason)
	case here:
		return fmt.Sprintf("the trial of width %d at %s is paused: width %d serves, and the next decision there judges or ends it", e.Width, at, w)
	}
	return fmt.Sprintf("the trial of width %d at %s is paused: the load left %s, and width %d serves", e.Width, at, at, w)
}

type lastDecision struct {
	Decision
	Candidates []candidate `json:"candidates"`
}

type candidate struct {
	Width int `json:"width"`
}

// Bounds of a saved Pair: far past anything an engine serves, near enough
// that a hostile file cannot make the controller allocate or loop much.
const (
	maxSavedWidth   = schedule.MaxWidth
	maxSavedBuckets = schedule.MaxBuckets
	maxSavedRows    = 4096
	// maxSavedDecisions: one decision a scrape (2 s) for a thousand years
	// is 1.6e10; more is no count a run made.
	maxSavedDecisions = 1 << 40
)

// clockSkew is how far past now a saved time may lie and still be taken:
// a clock stepped back by NTP after the save, or a cache shared by hosts
// whose clocks differ a little, not a file from the future. It is a
// tolerance, not a measurement; a state refused for it is learnt again,
// which costs trials, never a wrong width.
const clockSkew = 5 * time.Minute

// Resume says whether a Pair read from a file written at saved is taken
// at now. why names what is wrong with it, by the file's field ("" when
// nothing: Check, and the file's own time); one that passes but holds
// nothing learnt ("pair": null, a run stopped before it measured) is not
// taken either, with no why: there is nothing to resume.
func Resume(saved time.Time, p Pair, now time.Time) (take bool, why string) {
	if why := later("saved", saved, now); why != "" {
		return false, why
	}
	if why := p.Check(now); why != "" {
		return false, why
	}
	return p.Learnt(), ""
}

// Learnt says whether p holds anything measured or decided: acceptance, a
// verify cost, a run, a width tried, a switch time, a kept traffic or a
// width decided (the default's widths, which Init gives every Pair, are
// not).
func (p Pair) Learnt() bool {
	if len(p.Acc) > 0 || len(p.Verify) > 0 || p.SwitchS > 0 || len(p.Regimes) > 0 || len(p.Changes) > 0 || p.TrialError != 0 {
		return true
	}
	for _, b := range p.Buckets {
		if len(b.Acc) > 0 || len(b.Tried) > 0 {
			return true
		}
		for _, rs := range b.Runs {
			if len(rs) > 0 {
				return true
			}
		}
	}
	for _, sb := range p.Schedule {
		if !safeAnswer(sb.Source) {
			return true
		}
	}
	return false
}

// LearntAt is the width p's schedule decided for n requests in flight,
// 0 where its bucket holds the default's (nothing was decided there).
func (p Pair) LearntAt(n int) int {
	if b := p.Schedule.At(n); b.Width > 0 && !safeAnswer(b.Source) {
		return b.Width
	}
	return 0
}

// later says what is wrong with a saved time t, the field what, at now
// ("" when nothing): one past now by more than clockSkew.
func later(what string, t, now time.Time) string {
	if t.After(now.Add(clockSkew)) {
		return fmt.Sprintf("%s %s is later than now (%s)", what, t.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	return ""
}

// Check says what is wrong with a Pair read from a file at now ("" when
// nothing), naming the field: the controller takes a saved Pair only when
// it passes.
func (p Pair) Check(now time.Time) string {
	switch {
	case p.Decisions < 0 || p.Decisions > maxSavedDecisions:
		return fmt.Sprintf("Decisions %d, below 0 or above %d", p.Decisions, maxSavedDecisions)
	case len(p.Schedule) > 0 && len(p.Buckets) != len(p.Schedule):
		return fmt.Sprintf("a schedule of %d buckets beside %d load buckets", len(p.Schedule), len(p.Buckets))
	case len(p.Verify) > maxSavedRows:
		return fmt.Sprintf("%d probed row counts, more than %d", len(p.Verify), maxSavedRows)
	case len(p.Changes) > maxChanges:
		return fmt.Sprintf("%d changes of traffic, more than %d", len(p.Changes), maxChanges)
	case len(p.Regimes) > maxRegimes:
		return fmt.Sprintf("%d traffic regimes, more than %d", len(p.Regimes), maxRegimes)
	case len(p.Buckets) > maxSavedBuckets:
		return fmt.Sprintf("%d buckets, more than %d", len(p.Buckets), maxSavedBuckets)
	case !finite(p.SwitchS, 0, 1e5):
		return fmt.Sprintf("switch time %v s", p.SwitchS)
	case !finite(p.TrialError, -1, 1e3):
		return fmt.Sprintf("trial prediction error %v", p.TrialError)
	}
	if len(p.Schedule) > 0 {
		if err := p.Schedule.Validate(); err != nil {
			return "the schedule: " + err.Error()
		}
	}
	if why := checkAcc(p.Acc, p.Cycles); why != "" {
		return why
	}
	if why := p.checkTimes(now); why != "" {
		return why
	}
	for r, v := range p.Verify {
		if r < 1 || r > maxSavedRows || !finite(v, 1e-6, 1e6) {
			return fmt.Sprintf("verify cost %v ms at %d rows", v, r)
		}
	}
	if len(p.Buckets) > 0 { // their ranges by the schedule's own rule: from 1, in order, no gaps
		ranges := make(schedule.Schedule, len(p.Buckets))
		for i, b := range p.Buckets {
			ranges[i] = schedule.Bucket{Lo: b.Lo, Hi: b.Hi, Width: 1}
		}
		if err := ranges.Validate(); err != nil {
			return "the load buckets: " + err.Error()
		}
	}
	for _, b := range p.Buckets {
		if why := checkBucket(b); why != "" {
			return why
		}
	}
	for _, r := range p.Regimes {
		if len(r.Runs) > maxSavedBuckets {
			return "a traffic regime out of bounds"
		}
		for _, runs := range r.Runs {
			if why := checkRuns(0, 0, runs); why != "" {
				return "a traffic regime: " + why
			}
		}
		if why := checkAcc(r.Acc, r.Cycles); why != "" {
			return "a traffic regime's " + why
		}
	}
	return ""
}

// checkBucket is Check of one load bucket: its trial widths, its runs,
// its load and samples, and its acceptance.
func checkBucket(b Bucket) string {
	for w := range b.Tried {
		if w < 0 || w > maxSavedWidth {
			return fmt.Sprintf("bucket %d-%d: Tried of width %d, not 0 (the probe) to %d", b.Lo, b.Hi, w, maxSavedWidth)
		}
	}
	if len(b.Runs) > maxSavedWidth {
		return fmt.Sprintf("bucket %d-%d: runs of %d widths, more than the %d a state holds", b.Lo, b.Hi, len(b.Runs), maxSavedWidth)
	}
	if !finite(b.N, 0, 1e6) {
		return fmt.Sprintf("bucket %d-%d: load %v, below 0 or out of bounds", b.Lo, b.Hi, b.N) // it named the width count first (a user pass)
	}
	if !finite(b.NSamples, 0, 1e15) {
		return fmt.Sprintf("bucket %d-%d: NSamples %v, below 0 or out of bounds", b.Lo, b.Hi, b.NSamples)
	}
	if why := checkRuns(b.Lo, b.Hi, b.Runs); why != "" {
		return why
	}
	if why := checkAcc(b.Acc, b.Cycles); why != "" {
		return fmt.Sprintf("bucket %d-%d: %s", b.Lo, b.Hi, why)
	}
	return ""
}

// checkTimes says which of p's saved times lies past now (later): when
// its knowledge changed, the changes of traffic, a bucket's trials and
// every run's and kept traffic's. A time to come would hold a width back
// from a trial, or keep a run fresh, for as long as it is ahead.
func (p Pair) checkTimes(now time.Time) string {
	if why := later("Saved", p.Saved, now); why != "" {
		return why
	}
	for _, t := range p.Changes {
		if why := later("Changes", t, now); why != "" {
			return why
		}
	}
	for _, b := range p.Buckets {
		for w, t := range b.Tried {
			if why := later(fmt.Sprintf("Tried of width %d", w), t, now); why != "" {
				return fmt.Sprintf("bucket %d-%d: %s", b.Lo, b.Hi, why)
			}
		}
		if why := runsLater(b.Runs, now); why != "" {
			return fmt.Sprintf("bucket %d-%d: %s", b.Lo, b.Hi, why)
		}
	}
	for _, r := range p.Regimes {
		if why := later("At", r.At, now); why != "" {
			return "a traffic regime: " + why
		}
		for _, runs := range r.Runs {
			if why := runsLater(runs, now); why != "" {
				return "a traffic regime: " + why
			}
		}
	}
	return ""
}

// runsLater says which run's time lies past now ("" when none).
func runsLater(runs map[int][]Run, now time.Time) string {
	for w, rs := range runs {
		for _, r := range rs {
			if why := later(fmt.Sprintf("At of a run of width %d", w), r.At, now); why != "" {
				return why
			}
		}
	}
	return ""
}

// checkAcc says what is wrong with an acceptance by position ("" when
// nothing): as many cycle counts as positions, at most maxSavedWidth, each
// accepted count within its cycles.
func checkAcc(acc, cycles []float64) string {
	if len(acc) != len(cycles) || len(acc) > maxSavedWidth {
		return fmt.Sprintf("%d acceptance positions over %d cycle counts (at most %d)", len(acc), len(cycles), maxSavedWidth)
	}
	for k := range acc {
		if !finite(cycles[k], 0, 1e15) || !finite(acc[k], 0, cycles[k]) {
			return fmt.Sprintf("position %d: %v of %v cycles", k+1, acc[k], cycles[k])
		}
	}
	return ""
}

// checkRuns says what is wrong with one bucket's runs ("" when nothing).
func checkRuns(lo, hi int, runs map[int][]Run) string {
	if len(runs) > maxSavedWidth {
		return fmt.Sprintf("bucket %d-%d: %d widths", lo, hi, len(runs))
	}
	for w, rs := range runs {
		if w < 1 || w > maxSavedWidth || len(rs) > maxRuns {
			return fmt.Sprintf("bucket %d-%d: width %d with %d runs", lo, hi, w, len(rs))
		}
		for _, r := range rs {
			if !finite(r.Tokens, 0, 1e15) || !finite(r.Secs, 0, 1e12) || !finite(r.Busy, 0, 1e12) || !finite(r.Cycles, 0, 1e15) || r.Scrapes < 0 || r.Scrapes > runWindow ||
				!finite(r.SumR, 0, 1e12) || !finite(r.SumR2, 0, 1e18) || !finite(r.SumT, 0, 1e9) || !finite(r.SumT2, 0, 1e12) {
				return fmt.Sprintf("bucket %d-%d: a run of width %d out of bounds", lo, hi, w)
			}
		}
	}
	return ""
}

func finite(x, lo, hi float64) bool { return !math.IsNaN(x) && x >= lo && x <= hi }
