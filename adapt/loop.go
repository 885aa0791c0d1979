package adapt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/defaults"
)

// Target is the engine serving now. Width 1 means speculation off. Gen
// changes whenever another engine process takes over (a switch or a
// restart), so the loop knows its counters start again.
type Target struct {
	BaseURL string
	Width   int
	Gen     uint64
}

// Config holds the loop's settings; zero fields take the defaults.
type Config struct {
	Rule
	Interval       time.Duration // between /metrics scrapes (2s)
	Window         time.Duration // at most one switch per window (60s)
	ReexploreEvery time.Duration // at most one wider exploration per this (10m)
	DriftZ         float64       // z of the drift test between epochs (4)
	W0             int           // exploration width; 0: from the curve (ExplorationWidth)
	ProbeReps      int           // repetitions per row count (7)
	ProbeTimeout   time.Duration // bound on one probe (30s)
	// MaxTrials bounds the trials (Decision.Trial) per drift period: the
	// widths measured before they are judged, each at most once, counted
	// again from zero when the traffic drifts or the concurrency changes.
	// 0 means the default (2); a negative value turns trials off. Trials
	// are held by the window like any switch, so at the production 60 s
	// window two trials end about two minutes after the first decision
	// that stays (one window and one trial epoch each).
	MaxTrials int
	// Curve, when set, is the verify cost by rows to use instead of
	// probing (from a policy entry, or an engine that cannot be probed).
	Curve *Curve
}

// Loop defaults.
const (
	DefaultInterval       = 2 * time.Second
	DefaultWindow         = defaults.AdaptWindow
	DefaultReexploreEvery = 10 * time.Minute
	DefaultDriftZ         = 4.0
	DefaultMaxTrials      = defaults.AdaptMaxTrials
)

// trialEpochs is how many MinCycles a trial's epoch takes before its
// decision: the width is judged from that one epoch of its own, and a
// longer epoch covers more of the traffic's mix (easy and hard stretches
// come in runs, which is why S per cycle depends on the width); the
// incumbent, served for longer, has more.
const trialEpochs = 2

func (c Config) withDefaults() Config {
	c.Rule = c.Rule.withDefaults()
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.ReexploreEvery <= 0 {
		c.ReexploreEvery = DefaultReexploreEvery
	}
	if c.DriftZ <= 0 {
		c.DriftZ = DefaultDriftZ
	}
	if c.ProbeReps <= 0 {
		c.ProbeReps = DefaultProbeReps
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.MaxTrials == 0 {
		c.MaxTrials = DefaultMaxTrials
	}
	return c
}

// LoopDeps is what Run needs from serve.
type LoopDeps struct {
	Current func() Target // which engine serves now
	// Switch blocks until an engine at width serves (Current then reports
	// it, with a new Gen), or fails, the old engine still serving.
	Switch   func(ctx context.Context, width int, reason string) error
	HTTP     *http.Client
	Log      *slog.Logger
	Publish  func(Status) // latest state for /speclaunch/status; may be nil
	CacheDir string       // "" disables the curve cache
	CacheKey CacheKey
	Cfg      Config
	Now      func() time.Time // nil: time.Now (tests pin it)
}

// Loop states.
const (
	StateProbing     = "probing"
	StateExploring   = "exploring"
	StateWatching    = "watching"
	StateNotAdapting = "not adapting"
	StateStopped     = "stopped"
)

// Status is the loop's state as /speclaunch/status shows it.
type Status struct {
	State       string    `json:"state"`
	Note        string    `json:"note,omitempty"`
	Width       int       `json:"width"`
	W0          int       `json:"exploration_width,omitempty"`
	Curve       *Curve    `json:"verify_curve,omitempty"`
	ProbeTime   float64   `json:"probe_s,omitempty"`
	Concurrency int       `json:"concurrency,omitempty"`
	Switches    int       `json:"switches"`
	Decision    *Decision `json:"last_decision,omitempty"`
	Updated     time.Time `json:"updated"`
}

// ErrNotAdapting wraps every reason Run gives up adapting; serve keeps
// serving at the width it has.
var ErrNotAdapting = errors.New("not adapting")

// Run adapts the width until ctx is done (then it returns nil) or it finds
// it cannot (an error wrapping ErrNotAdapting that says why). It gets the
// verify-cost curve (Cfg.Curve, the cache, or a probe of the serving
// engine), switches to the exploration width W0 if the engine runs
// narrower, then scrapes /metrics every Interval: counter deltas since the
// last engine change build epochs of at least MinCycles cycles; each epoch
// either joins the acceptance seen so far or, when S moved by more than
// DriftZ standard errors, replaces it (the traffic changed); then Decide
// runs, and its switch (or a wider exploration) is made, at most one per
// Window (explorations at most one per ReexploreEvery).
func Run(ctx context.Context, d LoopDeps) error {
	l := &loop{d: d, cfg: d.Cfg.withDefaults(), measured: map[int]Measure{}, own: map[int]Counts{}, tried: map[int]bool{}}
	if l.d.HTTP == nil {
		l.d.HTTP = http.DefaultClient
	}
	if l.d.Log == nil {
		l.d.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if l.d.Now == nil {
		l.d.Now = time.Now
	}
	if d.Current == nil || d.Switch == nil {
		return fmt.Errorf("%w: the loop needs Current and Switch", ErrNotAdapting)
	}
	err := l.run(ctx)
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		l.status.State = StateStopped
		l.publish()
		return nil
	}
	if err != nil {
		l.status.State, l.status.Note = StateNotAdapting, err.Error()
		l.publish()
		l.d.Log.Warn("adapt: " + err.Error())
	}
	return err
}

type loop struct {
	d      LoopDeps
	cfg    Config
	status Status

	curve    Curve
	w0       int
	measured map[int]Measure

	gen    uint64
	width  int
	fresh  bool // no baseline scrape yet for this engine
	prev   Snapshot
	base   Counts     // consistent epochs since this engine started
	epoch  Counts     // the epoch being filled
	wide   Acceptance // the widest observation: far positions for Decide
	tokens float64    // tokens in this epoch (width 1 has no cycles)
	nLive  []float64  // concurrency samples, the last liveScrapes of this engine
	lastN  int        // the concurrency of the last epoch; 0 before one
	// predict seconds and cycles: of the epoch being filled, and of this
	// engine's epochs since the concurrency last changed
	epPredS, epCycles float64
	predS, cycles     float64

	lastSwitch, lastExplore time.Time
	// home: the width served before the current exploration, which the
	// rule must beat (Inputs.Home); 0 when the width serving was chosen.
	home int
	// exploring: the engine serving was started to observe, not chosen;
	// its first decision may switch at once, without waiting a window.
	exploring bool
	// own: each width's acceptance from its own epochs, since the last
	// drift, at concurrency ownN (Inputs.Own); tried: the widths a trial
	// measured in that period; trial: the engine serving is a trial, its
	// epoch takes trialEpochs·MinCycles cycles.
	own     map[int]Counts
	ownN    int
	tried   map[int]bool
	trial   bool
	probedN map[int]bool
	probeN  map[int]*probeState // concurrent rows' probes under way
	probeEr map[int]error       // why the rows of n sequences could not be probed
	// noCostNote is the Status note published while the running width
	// could not be judged at concurrency noCostN (Decision.NoCost); it is
	// logged at warn once, and cleared by a decision at another
	// concurrency.
	noCostNote string
	noCostWhy  string // the note without the width serving
	noCostN    int
}

// publish hands serve a copy it may keep: the loop goes on changing its
// own curve and decision.
func (l *loop) publish() {
	l.status.Updated = l.d.Now()
	if l.d.Publish == nil {
		return
	}
	s := l.status
	if s.Curve != nil {
		c := Curve{VerifyMS: maps.Clone(s.Curve.VerifyMS), Source: s.Curve.Source}
		s.Curve = &c
	}
	if s.Decision != nil {
		d := *s.Decision
		s.Decision = &d
	}
	l.d.Publish(s)
}

func (l *loop) run(ctx context.Context) error {
	cur := l.d.Current()
	l.status = Status{State: StateProbing, Width: cur.Width}
	l.publish()
	if err := l.getCurve(ctx); err != nil {
		return err
	}
	covered := l.curve.ExplorationWidth(l.cfg.MaxWidth)
	if covered < 2 {
		return fmt.Errorf("%w: the verify-cost curve does not cover widths 1 and 2 (%s)", ErrNotAdapting, curveString(l.curve))
	}
	l.w0 = l.cfg.W0
	if l.w0 <= 0 {
		l.w0 = covered
	}
	l.w0 = max(2, min(l.w0, l.cfg.MaxWidth))
	l.status.W0, l.status.Curve = l.w0, &l.curve
	l.d.Log.Info("adapt: verify-cost curve ready", "source", l.curve.Source, "exploration_width", l.w0, "curve_ms", curveString(l.curve))
	l.reset(cur)
	l.lastExplore = l.d.Now() // the first epoch explores: re-checks wait a full period
	if cur.Width < l.w0 {
		l.status.State = StateExploring
		l.publish()
		if err := l.switchTo(ctx, l.w0, fmt.Sprintf("explore: observe acceptance at positions 1-%d", l.w0-1), true); err != nil {
			return err
		}
	}
	l.status.State = StateWatching
	l.publish()

	tick := time.NewTicker(l.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if err := l.step(ctx); err != nil {
			return err
		}
	}
}

// getCurve takes the curve from the config, the cache or a probe. The
// probe before traffic takes rows 1..MaxWidth and the rows that up to
// upFrontMaxN sequences verify together, as many as the engine has slots
// (GET /props total_slots); a cached curve that lacks some of those (one
// cached before they were probed up front) gets them probed now.
func (l *loop) getCurve(ctx context.Context) error {
	if l.cfg.Curve != nil && len(l.cfg.Curve.VerifyMS) > 0 {
		l.curve = *l.cfg.Curve
		if l.curve.Source == "" {
			l.curve.Source = "config"
		}
		return nil
	}
	slots, err := totalSlots(ctx, l.d.HTTP, l.d.Current().BaseURL)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.d.Log.Debug("adapt: the engine's slots are unknown; probing the rows of one sequence before traffic", "err", err)
	}
	rows := upFrontRows(l.cfg.MaxWidth, slots)
	if l.cacheable() {
		if c, ok := LoadCurve(l.d.CacheDir, l.d.CacheKey, l.d.Log); ok {
			l.curve = c
			missing := c.missing(rows)
			if len(missing) == 0 {
				return nil
			}
			l.d.Log.Info("adapt: the cached verify-cost curve lacks rows of concurrent decoding; probing them before traffic", "slots", slots, "rows", len(missing))
			samples, err := l.probeBeforeTraffic(ctx, missing)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				// The cached curve still serves; the under-load probe
				// (probeConcurrency) tries the rows again when they are needed.
				l.d.Log.Warn("adapt: could not probe the rows of concurrent decoding before traffic; using the cached curve", "err", err)
				return nil
			}
			l.curve = c.with(samples)
			l.saveCurve()
			return nil
		}
	}
	samples, err := l.probeBeforeTraffic(ctx, rows)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: no verify-cost curve: %w (this engine could not be probed: serve keeps its width; set one to silence this)", ErrNotAdapting, err)
	}
	l.curve = curveOf(samples)
	l.saveCurve()
	return nil
}

// probeBeforeTraffic probes rows, resuming an attempt cut short by the
// bound (traffic may already be there) while attempts take samples.
func (l *loop) probeBeforeTraffic(ctx context.Context, rows []int) (map[int][]float64, error) {
	start := l.d.Now()
	var st probeState
	for {
		again, err := st.try(ctx, l.cfg.ProbeTimeout, l.d.HTTP, l.d.Current().BaseURL, rows, l.cfg.ProbeReps)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !again {
			l.status.Note = ""
			return nil, err
		}
		l.status.Note = fmt.Sprintf("probe attempt %d cut short after %d of %d samples: resuming", st.attempts, st.done(), len(rows)*l.cfg.ProbeReps)
		l.publish()
		l.d.Log.Warn("adapt: the verify-cost probe did not finish within its bound (the engine is busy); resuming where it stopped",
			"attempt", st.attempts, "attempts", probeAttempts, "samples", st.done(), "wanted", len(rows)*l.cfg.ProbeReps, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(l.cfg.Interval):
		}
	}
	l.status.ProbeTime = l.d.Now().Sub(start).Seconds()
	l.status.Note = ""
	return st.samples, nil
}

// probeAttempts bounds a probe's resumptions: each attempt runs for at most
// Config.ProbeTimeout (10 minutes in all at the default 30 s), and one that
// takes no sample ends the probe. On the demo profile (the sim's GB10
// model, one slot) under one client of 200-token requests the probe took 9
// attempts (283 s): about 13 of the 119 requests it then sent per attempt.
const probeAttempts = 20

// cacheable: a cache directory and a key that names an engine and model
// files; an empty key would hand one engine's curve to another.
func (l *loop) cacheable() bool {
	return l.d.CacheDir != "" && l.d.CacheKey.Engine != "" && len(l.d.CacheKey.Models) > 0
}

func (l *loop) saveCurve() {
	if !l.cacheable() || l.curve.Source != "probe" {
		return
	}
	if err := SaveCurve(l.d.CacheDir, l.d.CacheKey, l.curve, l.d.Now()); err != nil {
		l.d.Log.Warn("adapt: could not cache the verify-cost curve", "err", err)
	}
}

// reset starts a new engine's life: its counters are a new baseline.
func (l *loop) reset(t Target) {
	l.gen, l.width, l.fresh = t.Gen, t.Width, true
	l.base, l.epoch = Counts{}, Counts{}
	l.tokens, l.nLive, l.lastN = 0, nil, 0
	l.epPredS, l.epCycles, l.predS, l.cycles = 0, 0, 0, 0
	l.status.Width = t.Width
}

// switchTo asks for width and records when; a failure leaves the old
// engine serving and is only logged, unless Switch says adapting is off
// for good (an error wrapping ErrNotAdapting, e.g. a reload set an
// operator width), which it returns.
func (l *loop) switchTo(ctx context.Context, width int, reason string, explore bool) error {
	return l.switchTrial(ctx, width, reason, explore, false)
}

// switchTrial is switchTo; trial marks an exploration that measures a
// width the rule named (Decision.Trial).
func (l *loop) switchTrial(ctx context.Context, width int, reason string, explore, trial bool) error {
	from := l.width
	now := l.d.Now()
	l.lastSwitch = now
	if explore {
		l.lastExplore = now
	}
	l.d.Log.Info("adapt: switching width", "from", l.width, "to", width, "reason", reason)
	if err := l.d.Switch(ctx, width, reason); err != nil {
		if errors.Is(err, ErrNotAdapting) {
			return err
		}
		if ctx.Err() == nil {
			l.d.Log.Warn("adapt: switch failed; the engine serving keeps serving", "to", width, "err", err)
		}
		return nil
	}
	l.status.Switches++
	l.reset(l.d.Current())
	l.exploring, l.trial = explore, trial && l.width == width
	switch {
	case !explore:
		l.home = 0
	case l.home == 0: // a wider exploration from an exploration keeps the first home
		l.home = from
	}
	l.publish()
	return nil
}

func (l *loop) step(ctx context.Context) error {
	t := l.d.Current()
	if t.Gen != l.gen {
		l.reset(t)
	}
	snap, err := l.scrape(ctx, t.BaseURL)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.d.Log.Debug("adapt: scrape failed", "err", err)
		return nil
	}
	if l.fresh {
		l.prev, l.fresh = snap, false
		return nil
	}
	delta, ok := snap.Since(l.prev)
	l.prev = snap
	if !ok {
		l.d.Log.Info("adapt: engine counters went backwards (restarted); starting over")
		l.reset(t)
		l.prev, l.fresh = snap, false
		return nil
	}
	if l.width >= 2 && delta.Cycles > 0 && !snap.HasPerPos {
		return fmt.Errorf("%w: the engine reports no acceptance by draft position (%s); only the width it was given is served", ErrNotAdapting, famPerPos)
	}
	l.epoch.Add(delta, l.width)
	l.tokens += delta.Predicted
	if delta.Predicted > 0 {
		l.nLive = append(l.nLive, math.Max(1, delta.Processing))
		if len(l.nLive) > liveScrapes {
			l.nLive = l.nLive[1:]
		}
	}
	l.epPredS += delta.PredictSeconds
	l.epCycles += delta.Cycles

	need := l.cfg.MinCycles
	if l.trial {
		need *= trialEpochs
	}
	ready := l.epoch.Cycles >= need
	if l.width < 2 {
		ready = l.tokens >= l.cfg.MinCycles
	}
	if !ready {
		return nil
	}
	return l.evaluate(ctx)
}

func (l *loop) scrape(ctx context.Context, base string) (Snapshot, error) {
	sctx, cancel := context.WithTimeout(ctx, max(l.cfg.Interval, time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, strings.TrimRight(base, "/")+"/metrics", nil)
	if err != nil {
		return Snapshot{}, err
	}
	resp, err := l.d.HTTP.Do(req)
	if err != nil {
		return Snapshot{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Snapshot{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return ParseMetrics(io.LimitReader(resp.Body, 4<<20))
}

// liveScrapes is how many of the latest scrapes the concurrency is taken
// over: 32 s at the default interval, so a change of load shows within
// about a minute however long the engine has served (a mean over its life
// took as long again as the load had lasted).
const liveScrapes = 16

// concurrency is the mean number of requests processing while tokens were
// generated over the latest scrapes, rounded: the sequences whose verify
// rows add up in a cycle.
func (l *loop) concurrency() int {
	if len(l.nLive) == 0 {
		return 1
	}
	var sum float64
	for _, v := range l.nLive {
		sum += v
	}
	return max(1, int(math.Round(sum/float64(len(l.nLive)))))
}

// evaluate closes an epoch and applies the rule.
func (l *loop) evaluate(ctx context.Context) error {
	n := l.concurrency()
	l.status.Concurrency = n
	if n != l.lastN { // a cycle's time is measured at one concurrency
		l.predS, l.cycles = 0, 0
	}
	l.predS, l.cycles, l.lastN = l.predS+l.epPredS, l.cycles+l.epCycles, n
	l.epPredS, l.epCycles = 0, 0
	if n != l.ownN { // each width's own acceptance is taken at one concurrency
		l.resetTrials()
		l.ownN = n
	}
	if l.width >= 2 {
		ep := l.epoch.Obs()
		drifted := false
		if l.base.Cycles > 0 {
			if k := Drift(l.base.Obs(), ep, l.cfg.DriftZ); k > 0 {
				drifted = true
				l.d.Log.Info("adapt: acceptance drifted; deciding from the latest epoch", "position", k,
					"was", l.base.Obs().S(k), "now", ep.S(k))
				l.base = Counts{}
				l.wide = nil // far positions observed under other traffic
				// Each width's own acceptance is of the older traffic too;
				// its ms per cycle (measured) is not: cost does not move
				// with the traffic.
				l.resetTrials()
			}
		}
		// This width's own acceptance may be from an earlier engine at
		// it, before a traffic change no epoch of one engine showed (one
		// past the width served meanwhile): the same test, at one width.
		if o := l.own[l.width]; !drifted && o.Cycles > 0 {
			if k := Drift(o.Obs(), ep, l.cfg.DriftZ); k > 0 {
				l.d.Log.Info("adapt: acceptance at this width drifted since it was last measured; dropping the widths measured", "width", l.width, "position", k,
					"was", o.Obs().S(k), "now", ep.S(k))
				l.resetTrials()
			}
		}
		l.base.Merge(l.epoch)
		o := l.own[l.width]
		o.Merge(l.epoch)
		l.own[l.width] = o
		obs := l.base.Obs()
		// The far positions are not tested against this width's S: S per
		// cycle depends on the width when easy text comes in runs (a wide
		// cycle takes a run at once), so S(k) at width 8 can sit several
		// standard errors above S(k) at width 16 on the same traffic (H200,
		// 2026-12-01: 0.34 against 0.22 at k = 7), and dropping them for it
		// made the loop explore the wide width again every few seconds.
		// A traffic change shows between epochs of one width, above.
		if len(obs) >= len(l.wide) {
			l.wide = obs
		}
		if l.cycles > 0 {
			l.measured[l.width] = Measure{MS: 1000 * l.predS / l.cycles, Cycles: l.cycles, N: n}
		}
	}
	l.epoch, l.tokens = Counts{}, 0
	l.probeConcurrency(ctx, n)

	acc := l.acceptance()
	live := 0
	if l.width >= 2 {
		live = min(len(acc), l.width-1)
	}
	trials := 0
	if l.cfg.MaxTrials > 0 {
		trials = max(0, l.cfg.MaxTrials-len(l.tried))
	}
	dec := Decide(Inputs{Running: l.width, N: n, Acc: acc, Curve: l.curve, Measured: maps.Clone(l.measured), Rule: l.cfg.Rule, Live: live, Home: l.home,
		Own: l.ownCopy(), Trials: trials, Tried: maps.Clone(l.tried)})
	if dec.NoCost {
		return l.noCost(ctx, dec, n)
	}
	if l.noCostNote != "" && n != l.noCostN { // a concurrency the curve covers: deciding again
		if l.status.Note == l.noCostNote {
			l.status.Note = ""
		}
		l.d.Log.Info("adapt: the running width is judged again", "concurrency", n, "was", l.noCostNote)
		l.noCostNote, l.noCostN, l.noCostWhy = "", 0, ""
	} else if l.noCostNote != "" && l.status.Note == l.noCostNote {
		// Still at that concurrency, deciding among the widths the curve
		// covers (after going home): the note names the width serving.
		l.noCostNote = fmt.Sprintf("%s; serving width %d", l.noCostWhy, l.width)
		l.status.Note = l.noCostNote
	}
	if (!dec.Switch || dec.Trial > 0) && len(dec.Candidates) > 0 {
		l.home = 0 // decided: the width serving now is the choice (a trial is named only then)
	}
	l.status.Decision = &dec
	l.publish()
	l.d.Log.Info(dec.String())

	now := l.d.Now()
	// The first decision after an exploration is not held: it goes home
	// or chooses the width it observed. A trial is held by the window like
	// any switch, also one named by the decision that ends an exploration
	// or another trial: it costs an engine start, and its return home
	// another (that one is not held). The trials are bounded (MaxTrials
	// per drift period), so they end a few windows after the first
	// decision that stays, and while one is named the decision says
	// switch, so nobody reading the status takes the loop as settled.
	inWindow := (!l.exploring || dec.Trial > 0) && !l.lastSwitch.IsZero() && now.Sub(l.lastSwitch) < l.cfg.Window
	l.exploring, l.trial = false, false
	switch {
	case dec.Switch && inWindow:
		l.d.Log.Info("adapt: switch held: one switch per window", "to", dec.Choice, "trial", dec.Trial > 0, "window", l.cfg.Window)
	case dec.Trial > 0:
		l.tried[dec.Trial] = true // counted when tried, even if the switch fails
		l.home = 0                // the width kept is the home the trial must beat
		return l.switchTrial(ctx, dec.Trial, "explore: "+dec.Reason, true, true)
	case dec.Switch:
		return l.switchTo(ctx, dec.Choice, dec.Reason, false)
	case inWindow:
	case dec.Explore > 0:
		return l.switchTo(ctx, dec.Explore, fmt.Sprintf("explore wider: S(%d) = %.2f, the last position observed, suggests width %d could pay", len(acc), acc.S(len(acc)), dec.Explore), true)
	case dec.Recheck > 0 && now.Sub(l.lastExplore) >= l.cfg.ReexploreEvery:
		return l.switchTo(ctx, dec.Recheck, fmt.Sprintf("re-explore wider: S(%d) = %.2f at the running width suggests width %d could pay", live, acc.S(live), dec.Recheck), true)
	}
	return nil
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
func (l *loop) noCost(ctx context.Context, dec Decision, n int) error {
	rows := n * l.width
	why, pending := l.unprobed(n)
	if pending {
		l.status.Decision = &dec
		l.publish()
		l.d.Log.Info(dec.String())
		return nil
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
	l.publish()
	l.d.Log.Info(dec.String())
	if note != l.noCostNote {
		l.d.Log.Warn("adapt: " + note)
	}
	l.noCostNote, l.noCostN, l.noCostWhy = note, n, whyNote
	if dec.Switch {
		return l.switchTo(ctx, home, dec.Reason, false)
	}
	return nil
}

// unprobed says why the rows n sequences verify at the running width are
// not in the curve, and whether the under-load probe may still get them.
func (l *loop) unprobed(n int) (why string, pending bool) {
	switch {
	case l.curve.Source == "config":
		return "the curve was given in the config; the loop does not probe it", false
	case n <= 1 || l.width > l.cfg.MaxWidth:
		return fmt.Sprintf("the probe covers widths up to %d", l.cfg.MaxWidth), false
	case !l.probedN[n]:
		return "", true
	case l.probeEr[n] != nil:
		return l.probeEr[n].Error(), false
	}
	return "the probe did not cover them", false
}

// resetTrials drops each width's own acceptance and the trials taken: the
// traffic drifted, or the concurrency changed.
func (l *loop) resetTrials() {
	clear(l.own)
	clear(l.tried)
}

// ownCopy is l.own for Decide, which must not share the loop's slices.
func (l *loop) ownCopy() map[int]Counts {
	m := make(map[int]Counts, len(l.own))
	for w, c := range l.own {
		m[w] = Counts{Cycles: c.Cycles, AtLeast: slices.Clone(c.AtLeast)}
	}
	return m
}

// acceptance is the running width's positions from this engine's epochs,
// and farther positions from the widest observation, when it agrees.
func (l *loop) acceptance() Acceptance {
	if l.width < 2 {
		return l.wide
	}
	acc := l.base.Obs()
	if len(l.wide) > len(acc) {
		acc = append(acc, l.wide[len(acc):]...)
	}
	return acc
}

// probeConcurrency extends a probed curve to the rows n sequences verify
// together, once per n.
func (l *loop) probeConcurrency(ctx context.Context, n int) {
	if n <= 1 || l.curve.Source == "config" || l.probedN[n] {
		return
	}
	if l.probedN == nil {
		l.probedN, l.probeN, l.probeEr = map[int]bool{}, map[int]*probeState{}, map[int]error{}
	}
	missing := l.curve.missing(ProbeRows(0, l.cfg.MaxWidth, n))
	if len(missing) == 0 {
		l.probedN[n] = true
		return
	}
	// These rows are probed under the load that needs them: a probe cut
	// short resumes at the next epoch while it makes progress, at most
	// probeAttempts times.
	st := l.probeN[n]
	if st == nil {
		st = &probeState{}
		l.probeN[n] = st
	}
	if again, err := st.try(ctx, l.cfg.ProbeTimeout, l.d.HTTP, l.d.Current().BaseURL, missing, l.cfg.ProbeReps); err != nil {
		if ctx.Err() != nil {
			return
		}
		if !again {
			l.probedN[n] = true
			l.probeEr[n] = err
		}
		l.d.Log.Warn("adapt: could not probe the rows of concurrent decoding", "concurrency", n, "attempt", st.attempts, "resume", again, "err", err)
		return
	}
	l.probedN[n] = true
	l.curve = l.curve.with(st.samples)
	l.status.Curve = &l.curve
	l.saveCurve()
}

func curveString(c Curve) string {
	var b strings.Builder
	for _, r := range sortedKeys(c.VerifyMS) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%.2f", r, c.VerifyMS[r])
	}
	return b.String()
}
