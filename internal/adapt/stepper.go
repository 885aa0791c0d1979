package adapt

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// The stepper: what the loop does with one scrape, without I/O. The shell
// (Loop.step, Loop.perform) scrapes /metrics, hands the snapshot to Step
// with the clock and the serving engine, and carries out the Action it
// returns: a switch (LoopDeps.Switch, timed), a probe of the rows of
// concurrent decoding, or the end of adapting. Step and Resume call no
// engine; they log and publish through LoopDeps only.

// Observation is one scrape as the shell saw it.
type Observation struct {
	Now    time.Time
	Target Target   // the engine serving when the scrape was made
	Snap   Snapshot // its counters
	Err    error    // the scrape failed: Snap is empty
}

// ActionKind is what the shell is asked to do.
type ActionKind int

// Actions.
const (
	ActWait   ActionKind = iota // nothing: the next scrape
	ActSwitch                   // switch to Width
	ActProbe                    // probe the rows N sequences verify, then Resume
	ActStop                     // stop adapting for good: Err says why
)

// Action is the stepper's answer to an observation.
type Action struct {
	Kind    ActionKind
	Width   int    // ActSwitch: the width to serve
	Reason  string // why, as logged
	Explore bool   // ActSwitch: the width observes rather than is chosen
	Trial   bool   // ActSwitch: a width the rule named to measure (Decision.Trial)
	N       int    // ActProbe: sequences decoding together
	Err     error  // ActStop
}

func wait(why string) Action { return Action{Kind: ActWait, Reason: why} }

// notePaused is the status note while another engine runs beside the
// serving one (Target.Shared).
const notePaused = "measuring paused: another engine runs beside the serving one (a switch's old engine draining, or a new one starting)"

// Step takes one scrape: counter deltas since the last scrape of the same
// engine fill the epoch; a full epoch is closed and decided (endEpoch).
func (l *Loop) Step(o Observation) Action {
	t := o.Target
	if t.Gen != l.gen {
		l.pair = cmp.Or(l.pair, t.Pair)
		l.reset(t)
	}
	if t.Shared {
		// While another engine runs beside this one no scrape counts,
		// nor the first one after: the time since the last was shared.
		// Before a failed scrape too, so that a shared stretch of failed
		// scrapes still ends in a baseline.
		if l.sharedSince.IsZero() {
			l.sharedSince = o.Now
			l.d.Log.Info("adapt: another engine runs beside the serving one; measuring paused until it stops")
			l.status.Note = notePaused
			l.publish()
		}
		l.fresh = true
		return wait("another engine runs beside this one")
	}
	if o.Err != nil {
		l.d.Log.Debug("adapt: scrape failed", "err", o.Err)
		return wait("scrape failed")
	}
	if a, taken := l.baseline(o); taken {
		return a
	}
	delta, ok := o.Snap.Since(l.prev)
	l.prev = o.Snap
	if !ok {
		l.d.Log.Info("adapt: engine counters went backwards (restarted); starting over")
		l.reset(t)
		l.countFrom(o.Snap) // a restart in place: a new engine, warm-up too
		return wait("counters went backwards")
	}
	if l.width >= 2 && delta.Cycles > 0 && !o.Snap.HasPerPos {
		return Action{Kind: ActStop, Err: fmt.Errorf("%w: the engine reports no acceptance by draft position (%s); only the width it was given is served", ErrNotAdapting, famPerPos)}
	}
	l.epoch.Add(delta, l.width)
	l.tokens += delta.Predicted
	if delta.Predicted > 0 {
		l.live.add(math.Max(1, delta.Processing))
	}
	l.epSecs += delta.Secs()
	if delta.HasServed {
		l.epServed += delta.Served
		l.epOwn += delta.PredictSeconds
	}
	if l.width < 2 {
		l.epCycles += delta.Predicted // a classic step is a cycle of one token
	} else {
		l.epCycles += delta.Cycles
	}

	need := l.cfg.MinCycles
	if l.trial {
		need *= trialEpochs
	}
	ready := l.epoch.Cycles >= need
	if l.width < 2 {
		ready = l.tokens >= l.cfg.MinCycles
	}
	if !ready {
		return wait("filling the epoch")
	}
	return l.endEpoch(o.Now)
}

// baseline takes the scrapes a new engine's counting starts from: the
// first one alone, and those of its warm-up; taken is false once they are
// behind.
func (l *Loop) baseline(o Observation) (a Action, taken bool) {
	if l.fresh {
		l.countFrom(o.Snap)
		if !l.sharedSince.IsZero() {
			l.d.Log.Info("adapt: the engine serves alone now", "shared_s", o.Now.Sub(l.sharedSince).Seconds())
			l.sharedSince = time.Time{}
			if l.status.Note == notePaused {
				l.status.Note = ""
				l.publish()
			}
		}
		return wait("baseline scrape of a new engine"), true
	}
	if l.warmUntil > 0 {
		// Warm-up: the requests a new engine takes first run slower than
		// its later ones (some began beside the engine it replaced, which
		// the pause while Shared covers by time only; its prompt cache is
		// empty). On an H200 under 4 clients the first request of each
		// slot of every classic engine that replaced another ran 11-49 %
		// slower a token than its later ones by llama-server's timings,
		// and the loop undid classic, the best width there, on them. So
		// the baseline moves on until as many requests as are decoding
		// together (the live concurrency, at most the slots) have ended
		// after it served alone.
		// It ends as well when the engine ends requests the proxy did not
		// send (aroundProxy): their ends are not counted.
		l.prev = o.Snap
		if !o.Snap.HasServed || o.Snap.Ended >= l.warmUntil ||
			aroundProxy(o.Snap.Served-l.warmFrom.Served, o.Snap.PredictSeconds-l.warmFrom.PredictSeconds) {
			l.warmUntil = 0
			l.d.Log.Debug("adapt: the engine's first requests ended; its cycles count from here", "ended", o.Snap.Ended)
		}
		return wait("warming up: the first request of each slot"), true
	}
	return Action{}, false
}

// countFrom takes snap as the baseline of an engine's counting, and starts
// its warm-up (baseline) when the proxy's served requests are known: as
// many requests as decode together, by the live load or, before it has
// samples, the engine's gauge now; at most its slots.
func (l *Loop) countFrom(snap Snapshot) {
	l.prev, l.fresh, l.warmUntil, l.warmFrom = snap, false, 0, snap
	if !snap.HasServed {
		return
	}
	n := max(l.concurrency(), int(math.Round(snap.Processing)))
	if slots := l.knownSlots(); slots > 0 {
		n = min(n, slots)
	}
	l.warmUntil = snap.Ended + float64(max(1, n))
}

// endEpoch closes the epoch at the live concurrency and decides, unless
// the rows that concurrency verifies must be probed first (ActProbe; the
// shell then calls Resume).
func (l *Loop) endEpoch(now time.Time) Action {
	n := l.concurrency()
	l.closeEpoch(n)
	if l.needsProbe(n) {
		// The probe holds a slot and the clients' requests meanwhile wait
		// for it: the engine is counted afresh after it.
		l.fresh = true
		return Action{Kind: ActProbe, N: n, Reason: fmt.Sprintf("the verify cost of %d sequences' rows", n)}
	}
	return l.Resume(now)
}

// Resume decides on the epoch just closed: the rule, the check of the last
// switch against the width it left, and what to do. No switch follows a
// failed one within a window, of any kind: an undo or a return home is
// not held by the window otherwise, and each try may cost a model load
// (in drain mode, with the traffic held).
func (l *Loop) Resume(now time.Time) Action {
	if !l.failedAt.IsZero() && now.Sub(l.failedAt) < l.cfg.Window {
		// Nothing is decided meanwhile: a decision has effects (the first
		// exploration taken, a trial counted, a check expected) that a
		// switch held would leave behind without the switch.
		return wait("the last switch failed less than a window ago")
	}
	return l.decideEpoch(now)
}

// decideEpoch is Resume's decision, outside the hold after a failed switch.
func (l *Loop) decideEpoch(now time.Time) Action {
	n := l.lastN
	if l.exploreFirst {
		// The starting width has its own epoch now: explore.
		l.exploreFirst = false
		l.status.State = StateWatching
		return Action{Kind: ActSwitch, Width: l.w0, Explore: true, Reason: fmt.Sprintf("explore: observe acceptance at positions 1-%d", l.w0-1)}
	}
	l.keepBarred()
	dec := l.decide(n)
	if dec.NoCost {
		return l.noCost(dec, n)
	}
	l.clearNoCostNote(n)
	// Decided: the width serving now is the choice (a trial is named only
	// then); not when an exploration asks to explore wider, which keeps
	// the first home. Before, the width explored first became home: on the
	// sim matrix's two classes the loop went 4 → 8 → 17, chose 4 "over
	// width 8", checked 4 against 8's one easy epoch (−16.6 %) and left
	// its best width for good.
	if (!dec.Switch || dec.Trial > 0) && len(dec.Candidates) > 0 && !(l.exploring && dec.Explore > 0) {
		l.home = 0
	}
	undo, hold := l.judge(n, &dec)
	dec.ExploreIn = l.exploreHeld(now, dec)
	l.status.Decision = &dec
	l.status.Decisions++
	l.publish()
	l.d.Log.Info(dec.String())
	switch {
	case undo > 0:
		return Action{Kind: ActSwitch, Width: undo, Reason: dec.Reason}
	case hold:
		l.exploring, l.trial = false, false
		return wait("checking the last switch")
	}
	return l.act(now, dec)
}

// needsProbe says whether the rows n sequences verify must be probed
// (under load) before deciding: n > 1, a probed curve, not tried for this
// n yet, and rows missing.
func (l *Loop) needsProbe(n int) bool {
	if n <= 1 || l.curve.Source == "config" || l.probedN[n] {
		return false
	}
	if len(l.curve.missing(ProbeRows(0, l.cfg.MaxWidth, n))) == 0 {
		if l.probedN == nil {
			l.probedN = map[int]bool{}
		}
		l.probedN[n] = true
		return false
	}
	return true
}

// act turns the decision into the switch, trial or exploration to make,
// within the window.
func (l *Loop) act(now time.Time, dec Decision) Action {
	// The first decision after an exploration is not held: it goes home
	// or chooses the width it observed. A trial is held by the window like
	// any switch, also one named by the decision that ends an exploration
	// or another trial: it costs an engine start, and its return home
	// another (that one is not held). The trials are bounded (MaxTrials
	// per drift period), so they end a few windows after the first
	// decision that stays, and while one is named the decision says
	// switch, so nobody reading the status takes the loop as settled.
	inWindow := (!l.exploring || dec.Trial > 0) && !l.lastSwitch.IsZero() && now.Sub(l.lastSwitch) < l.cfg.Window
	from := l.width
	if l.exploring && l.home > 0 {
		from = l.home // an exploration observed; the width it left is home
	}
	chained := l.exploring // a wider exploration straight from one
	l.exploring, l.trial = false, false
	acc := dec.S
	switch {
	case dec.Switch && inWindow:
		l.d.Log.Info("adapt: switch held: one switch per window", "to", dec.Choice, "trial", dec.Trial > 0, "window", l.cfg.Window)
	case dec.Trial > 0:
		l.tried[dec.Trial] = true // counted when tried, even if the switch fails
		l.home = 0                // the width kept is the one the trial is checked against
		l.expect(dec, dec.Trial, l.width)
		return Action{Kind: ActSwitch, Width: dec.Trial, Reason: "explore: " + dec.Reason, Explore: true, Trial: true}
	case dec.Switch:
		if dec.Choice != from {
			l.expect(dec, dec.Choice, from)
		}
		return Action{Kind: ActSwitch, Width: dec.Choice, Reason: dec.Reason}
	case inWindow:
	case dec.Explore > 0 && (chained || l.exploreHeld(now, dec) == 0):
		// Past the first exploration (and a wider one straight after it),
		// at most one per re-check period: a drift drops the far
		// positions, and on mixed traffic drifts come often (the sim
		// matrix's two alternating classes sent the loop to width 17
		// every minute or so).
		k := len(acc)
		return Action{Kind: ActSwitch, Width: dec.Explore, Explore: true,
			Reason: fmt.Sprintf("explore wider: S(%d) = %.2f, the last position observed, suggests width %d could pay", k, acc[k-1].S, dec.Explore)}
	case dec.Recheck > 0 && now.Sub(l.lastExplore) >= l.recheckPeriod():
		// Each re-check that is asked for again waits twice as long: on
		// the sim's collapse profile the live tail at width 4 asks for one
		// every period, and each costs an epoch at the widest width.
		l.recheckEvery = min(2*l.recheckPeriod(), reexploreMaxFactor*l.cfg.ReexploreEvery)
		// A new look: widths measured better, under the margin, may be
		// tried again (Decide's trial), and widths undone may be chosen
		// again. An undone width stays barred only until the traffic
		// changes, and a change the positions below the running width do
		// not show (collapsing traffic to flat, at width 4: the first
		// three positions alike) shows only here, in the far positions:
		// barred from 15-17, the sim's loop sat at 14, 0.94 of the best.
		// Where the look sees the acceptance as it was, the widths undone
		// are barred again (keepBarred).
		if len(l.avoid) > 0 {
			l.barred = &barredWidths{widths: maps.Clone(l.avoid), under: l.acceptanceAll(),
				epochs: append(slices.Clone(l.prevObs), l.pendObs...)}
		}
		clear(l.tried)
		clear(l.avoid)
		live := min(len(acc), max(0, l.width-1))
		s := 0.0
		if live > 0 {
			s = acc[live-1].S
		}
		return Action{Kind: ActSwitch, Width: dec.Recheck, Explore: true,
			Reason: fmt.Sprintf("re-explore wider: S(%d) = %.2f at the running width suggests width %d could pay", live, s, dec.Recheck)}
	}
	return wait(dec.Reason)
}

// exploreHeld is how long the wider look dec asks for waits: past the
// first exploration (and a wider one straight after it), one a re-check
// period; 0 when it may be taken now, or none is asked for.
func (l *Loop) exploreHeld(now time.Time, dec Decision) time.Duration {
	if dec.Explore <= 0 || l.exploring || l.explored == 0 {
		return 0
	}
	return max(0, l.recheckPeriod()-now.Sub(l.lastExplore))
}

// noCost handles a decision that could not judge the running width: the
// curve lacks the n·W rows it verifies at this concurrency. While the
// under-load probe of those rows may still resume, it waits. Once they
// cannot be probed, an exploration (or a trial) goes back to its home
// width at once, not held by the window: an exploration width is a
// measuring device, and staying there because its cost is missing is
// inertia, not a choice (H200, 2026-12-02: the loop stayed at its
// exploration width 8 under 4 sequences for a whole run). In any case the
// Status says that the loop is not adapting at this concurrency and which
// width serves, logged at warn once; it keeps watching, and decides again
// when the concurrency changes to one the curve covers.
func (l *Loop) noCost(dec Decision, n int) Action {
	rows := n * l.width
	why, pending := l.unprobed(n)
	if pending {
		l.status.Decision = &dec
		l.status.Decisions++
		l.publish()
		l.d.Log.Info(dec.String())
		return wait("the rows of concurrent decoding are being probed")
	}
	home := l.home
	serving := l.width
	if home >= 1 && home != l.width {
		serving = home
		dec.Choice, dec.Switch = home, true
		dec.Reason = fmt.Sprintf("back from exploration width %d to width %d: %s, and they could not be probed", l.width, home, dec.Reason)
	}
	whyNote := fmt.Sprintf("not adapting at concurrency %d: the verify cost of %d rows could not be probed (%s)", n, rows, why)
	note := fmt.Sprintf("%s; serving width %d", whyNote, serving)
	l.status.Note = note
	l.status.Decision = &dec
	l.status.Decisions++
	l.publish()
	l.d.Log.Info(dec.String())
	if note != l.noCostNote {
		l.d.Log.Warn("adapt: " + note)
	}
	l.noCostNote, l.noCostN, l.noCostWhy = note, n, whyNote
	if dec.Switch {
		return Action{Kind: ActSwitch, Width: home, Reason: dec.Reason}
	}
	return wait(dec.Reason)
}

// barredWidths is what a re-check set aside: the widths undone, and the
// acceptance at every position observed when it began.
type barredWidths struct {
	widths map[int]bool
	under  Acceptance
	epochs []Acceptance // the epochs before the look, for the test's Dispersion
}

// keepBarred settles a re-check at its first decision: the widths undone
// before it are barred again unless its look (this engine's epochs) saw
// the acceptance drift at some position from what it was (a change the
// far positions alone show frees them; see the re-check in act). A look
// that did not happen (its switch failed) keeps them barred too. Without
// this every re-check on steady traffic freed them, and the loop could
// go back to a width its own check had undone on the strength of the
// model's prediction alone.
func (l *Loop) keepBarred() {
	b := l.barred
	if b == nil {
		return
	}
	l.barred = nil
	if l.exploring {
		// One epoch of a run of easy requests is not a change of a mix:
		// the test allows for the spread of the epochs before the look,
		// as commit's does.
		now := l.engineCounts().Obs()
		phi := Dispersion(b.epochs, append(slices.Clone(l.prevObs), l.pendObs...))
		if k := Drift(b.under, now, l.cfg.DriftZ, phi); k > 0 {
			l.d.Log.Info("adapt: the re-check saw the acceptance change; the widths undone may be chosen again", "position", k,
				"was", b.under.S(k), "now", now.S(k))
			return
		}
	}
	maps.Copy(l.avoid, b.widths)
	l.d.Log.Info("adapt: the re-check saw the acceptance as it was; the widths undone stay barred", "widths", slices.Sorted(maps.Keys(b.widths)))
}
