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
	"sync"
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
	// Pair names the target and draft models (empty: unknown). The
	// adaptation state (acceptance, measured cycles, the curve) belongs
	// to one pair: it survives a new engine of the same pair (a switch, a
	// reload, a restart) and is dropped when the pair changes.
	Pair string
	// Shared: another engine of this server runs beside this one (the one
	// it replaced, still draining, or one starting for a switch or a
	// reload), on the same GPU. What this engine measures meanwhile is not
	// its own cost: on an H200 (4 clients) a classic engine whose whole
	// 3 s stint overlapped its predecessor's drain ran a median 6.59 ms
	// per token by llama-server's timings, 4.93 on an engine alone; the
	// loop read 7.33 a step and undid it at -36 %, where the means of
	// three windows each put it 2.1 % behind the width it went back to.
	Shared bool
	// Served, when known, is what the proxy saw of clients' requests for
	// work on this engine (proxy.Backend.Served). A width's cost is then
	// what clients wait for: llama-server's own timings leave out its queue
	// and the hand-back, which grow with the cycle (on an H200 under 4
	// clients, clients got 0.97-0.98 of the engine's rate at classic and
	// 0.85-0.93 at widths 2-8). nil: the engine's timings alone.
	Served func(slots int) Served
}

// Served is what clients' requests that ended on an engine took there:
// Secs from the proxy's hand-over to the last byte of each answer, summed
// (each counted for its share of slots), and how many ended.
type Served struct {
	Secs  float64
	Ended int
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
	// NoiseFloor is how much worse than the width it left a width
	// switched to may measure and be kept (default 1%): within it the two
	// are the same width as far as the counters can tell.
	NoiseFloor float64
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
	DefaultNoiseFloor     = 0.01
)

// checkEpochs is how many MinCycles of its own a width switched to may
// take before its check against the width it left is decided by the
// point estimate: 2048 cycles at the default, where one width's tokens
// per cycle has a standard error of about 1% (its accepted length's
// standard deviation is about 1 token at widths 3 to 8).
const checkEpochs = 8

// probeBackoffMax bounds the wait between two attempts of a probe that
// failed for a reason that may pass (the engine restarting under a
// reload, a timeout, a 503): 150 intervals, 5 minutes at the default.
const probeBackoffMax = 150

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
	if c.NoiseFloor <= 0 {
		c.NoiseFloor = DefaultNoiseFloor
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
	State       string  `json:"state"`
	Note        string  `json:"note,omitempty"`
	Width       int     `json:"width"`
	W0          int     `json:"exploration_width,omitempty"`
	Curve       *Curve  `json:"verify_curve,omitempty"`
	ProbeTime   float64 `json:"probe_s,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	Switches    int     `json:"switches"`
	// Decisions counts the decisions made (one per epoch).
	Decisions int       `json:"decisions"`
	Decision  *Decision `json:"last_decision,omitempty"`
	// SwitchS is the measured seconds of the last switch: from the
	// request to the new engine serving.
	SwitchS float64 `json:"switch_s,omitempty"`
	// Prediction is how far the modelled ms per cycle of the widths
	// switched to were from what they then measured.
	Prediction PredictionError `json:"prediction"`
	// Resumed is when an earlier run saved what this loop started from
	// (RFC 3339; see Learnt); empty when it learnt from scratch.
	Resumed string `json:"resumed,omitempty"`
	// Checking is the switch under check against the width it left
	// ("width 3 against width 4"); empty when none.
	Checking string    `json:"checking,omitempty"`
	Updated  time.Time `json:"updated"`
}

// PredictionError is the loop's running error on ms per cycle: each width
// switched to whose cost was modelled (not measured before) is compared,
// at its first epoch, with what it measured.
type PredictionError struct {
	N       int     `json:"n"`
	MeanAbs float64 `json:"mean_abs"` // mean |measured/predicted − 1|
	RMS     float64 `json:"rms"`      // root mean square of measured/predicted − 1
	Last    float64 `json:"last"`     // the latest measured/predicted − 1
}

// Loop is the adaptive width loop of one serve process. Run drives it;
// BeforeTraffic probes each new engine before it takes traffic, and may
// be called while Run runs.
type Loop struct {
	d      LoopDeps
	cfg    Config
	status Status

	// mu guards shared: the verify-cost curve BeforeTraffic and Run both
	// extend (Run works on its own copy, curve, refreshed each step), and
	// the pair it was probed for.
	mu         sync.Mutex
	shared     Curve
	sharedPair string
	keyPair    string // the pair the cache key names: the first seen
	slots      int    // the engine's total_slots, last asked (0: unknown)
	sharedSlot int    // the slots shared was probed with

	curve    Curve
	pair     string // the model pair the state below belongs to ("" unknown)
	w0       int
	measured map[int]Measure

	gen   uint64
	width int
	fresh bool // no baseline scrape yet for this engine, or none since it served alone
	// warmUntil: the requests ended (Snapshot.Ended) at which this engine's
	// warm-up ends, and the baseline is taken again (0: none); warmFrom:
	// the scrape the warm-up began at.
	warmUntil float64
	warmFrom  Snapshot
	// sharedSince: when the serving engine was first seen sharing the GPU
	// (Target.Shared); zero while it serves alone.
	sharedSince time.Time
	prev        Snapshot
	base        Counts // consistent epochs since this engine started
	pend        Counts // epochs not yet tested for a drift (driftPool)
	// pendTok and pendEp: the tokens pend's cycles delivered, and per
	// epoch the tokens a cycle delivered; they join deliv with pend.
	pendTok float64
	pendEp  []float64
	// baseTok and baseEp: the same for base. base and pend are what the
	// decisions at this engine saw, and a switch from it is checked
	// against them (switchCheck.left).
	baseTok float64
	baseEp  []float64
	suspect *heldPool    // a pool that drifted, until the next one confirms it (commit)
	pendObs []Acceptance // each epoch's acceptance in pend, for the drift test's Dispersion
	prevObs []Acceptance // and in the pool before it on this engine
	epoch   Counts       // the epoch being filled
	wide    Acceptance   // the widest observation: far positions for Decide
	tokens  float64      // tokens in this epoch (width 1 has no cycles)
	classic float64      // tokens this engine decoded at width 1, for a check
	live    liveLoad     // requests-processing samples across engines, and the concurrency from them
	lastN   int          // the concurrency of this engine's last epoch; 0 before one
	// seconds (served, or the engine's predict seconds: Delta.Secs) and
	// cycles: of the epoch being filled, and of this engine's epochs since
	// the concurrency last changed
	epSecs, epCycles float64
	// epServed, epOwn: of the epoch's deltas with served seconds, those
	// and the engine's own over the same scrapes (Loop.epochSecs)
	epServed, epOwn float64
	// aroundLogged: the engine was seen taking requests around the proxy
	// (logged once an engine)
	aroundLogged bool
	secs, cycles float64
	// msEp: ms per cycle of each epoch in secs/cycles, whose spread is
	// the measured cost's standard error (Measure.SE)
	msEp []float64

	lastSwitch, lastExplore time.Time
	// failedAt: when the last switch failed (zero after one succeeded);
	// Resume holds every switch for a window after it.
	failedAt time.Time
	// recheckEvery is the period between two re-checks (Decision.Recheck):
	// ReexploreEvery, doubled after each up to reexploreMaxDoublings
	// times, and back to ReexploreEvery when the traffic drifts.
	recheckEvery time.Duration
	// exploreFirst: the starting width serves one epoch (its own measured
	// rate, which every later switch is checked against) before the
	// exploration to W0.
	exploreFirst bool
	explored     int // explorations made (a trial is not one)
	// home: the width served before the current exploration, which the
	// rule must beat (Inputs.Home); 0 when the width serving was chosen.
	home int
	// homeRate: home's rate over its engine's cycles when the exploration
	// left it (stintRate, at concurrency homeRateN), for the check of the
	// width chosen after it; homeRateOK when there is one.
	homeRate   rateObs
	homeRateOK bool
	homeRateN  int
	// exploring: the engine serving was started to observe, not chosen;
	// its first decision may switch at once, without waiting a window.
	exploring bool
	// own: each width's acceptance from its own epochs, since the last
	// drift, over concurrencies ownN..ownHi (Inputs.Own; voided when that
	// range spans half again, loadChanged); tried: the widths a trial
	// measured in that period; trial: the engine serving is a trial, its
	// epoch takes trialEpochs·MinCycles cycles; avoid: widths a check
	// undid (Inputs.Avoid).
	own     map[int]Counts
	deliv   map[int][2]float64 // width → tokens delivered, cycles: what a check compares
	delivEp map[int][]float64  // width → tokens a cycle delivered, epoch by epoch (batch means)
	ownN    int
	ownHi   int
	tried   map[int]bool
	avoid   map[int]bool
	// barred: the widths undone before a re-check (avoid), and the
	// acceptance they were undone under; the re-check's first decision
	// bars them again unless its look saw that acceptance change
	// (keepBarred). nil outside a re-check.
	barred  *barredWidths
	trial   bool
	check   *switchCheck    // the switch under check, nil when none
	predict map[int]float64 // width → ms per cycle the switch to it predicted
	switchS float64         // measured seconds of the last switch
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
	// resumed: the saved state was looked for (resume); savedAt and
	// lastSave: the decisions counted and the time at the last save.
	resumed  bool
	savedAt  int
	lastSave time.Time
	// saveFailing: the last save failed (said once until one succeeds);
	// savedOnce: a save succeeded (where is said once)
	saveFailing, savedOnce bool
}

// Run adapts the width with a new Loop until ctx is done; see Loop.Run.
func Run(ctx context.Context, d LoopDeps) error { return New(d).Run(ctx) }

// New makes the loop for d; Run starts it.
func New(d LoopDeps) *Loop {
	l := &Loop{d: d, cfg: d.Cfg.withDefaults()}
	l.clearState()
	if l.d.HTTP == nil {
		l.d.HTTP = http.DefaultClient
	}
	if l.d.Log == nil {
		l.d.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if l.d.Now == nil {
		l.d.Now = time.Now
	}
	return l
}

// clearState drops what the loop learnt of a model pair.
func (l *Loop) clearState() {
	l.measured, l.own, l.tried, l.avoid, l.predict = map[int]Measure{}, map[int]Counts{}, map[int]bool{}, map[int]bool{}, map[int]float64{}
	l.deliv, l.delivEp = map[int][2]float64{}, map[int][]float64{}
	l.wide, l.base, l.pend, l.home, l.exploring, l.trial, l.check = nil, Counts{}, Counts{}, 0, false, false, nil
	l.barred, l.suspect = nil, nil
	l.homeRateOK = false
	l.pendTok, l.pendEp, l.pendObs, l.prevObs = 0, nil, nil, nil
	l.baseTok, l.baseEp = 0, nil
	l.recheckEvery, l.exploreFirst, l.explored = 0, false, 0
	l.failedAt = time.Time{}
	l.probedN, l.probeN, l.probeEr = nil, nil, nil
	l.noCostNote, l.noCostWhy, l.noCostN = "", "", 0
	l.resumed, l.status.Resumed = false, ""
	l.status.Prediction = PredictionError{} // the errors of another pair's widths
}

// ErrNotAdapting wraps every reason Run gives up adapting for good; serve
// keeps serving at the width it has.
var ErrNotAdapting = errors.New("not adapting")

// ErrSwitchDropped wraps a Switch error where no switch was tried: a later
// one (a reload) replaced it before it ran, or serve is stopping. It is
// not a failure: no hold follows, and an exploration dropped is not
// counted as made.
var ErrSwitchDropped = errors.New("switch not tried")

// errPairChanged: a new engine serves another model pair; what was
// learnt is dropped and the loop starts over.
var errPairChanged = errors.New("the model pair changed")

// Run adapts the width until ctx is done (then it returns nil) or it finds
// it cannot, for good (an error wrapping ErrNotAdapting that says why:
// an engine without the counters or the probe, or a switch refused for
// good). A failure that may pass (a probe cut off by a reload, a timeout)
// is logged, shown in the status, and retried with a backoff. It gets the
// verify-cost curve (Cfg.Curve, BeforeTraffic, the cache, or a probe of
// the serving engine), switches to the exploration width W0 if the engine
// runs narrower, then scrapes /metrics every Interval: counter deltas
// since the last engine change build epochs of at least MinCycles cycles;
// each epoch either joins the acceptance seen so far or, when S moved by
// more than DriftZ standard errors, replaces it (the traffic changed);
// then Decide runs, and its switch (or a wider exploration) is made, at
// most one per Window (explorations at most one per ReexploreEvery); a
// switch is then checked against the width it left.
func (l *Loop) Run(ctx context.Context) error {
	if l.d.Current == nil || l.d.Switch == nil {
		return fmt.Errorf("%w: the loop needs Current and Switch", ErrNotAdapting)
	}
	err := l.run(ctx)
	l.saveLearnt(true)
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

// publish hands serve a copy it may keep: the loop goes on changing its
// own curve and decision.
func (l *Loop) publish() {
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

func (l *Loop) run(ctx context.Context) error {
	for {
		err := l.start(ctx)
		if err == nil {
			err = l.watch(ctx)
		}
		if !errors.Is(err, errPairChanged) {
			return err
		}
	}
}

// start gets the curve (retrying what may pass), picks W0 and explores.
func (l *Loop) start(ctx context.Context) error {
	cur := l.d.Current()
	l.pair = cur.Pair
	l.status.State, l.status.Width = StateProbing, cur.Width
	l.publish()
	if err := l.curveWithBackoff(ctx); err != nil {
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
	l.d.Log.Info("adapt: verify-cost curve ready", "curve_from", l.curve.Source, "exploration_width", l.w0, "curve_ms", curveString(l.curve))
	l.resume()
	cur = l.d.Current()
	l.reset(cur)
	l.lastExplore = l.d.Now() // the first epoch explores: re-checks wait a full period
	l.exploreFirst = cur.Width < l.w0 && len(l.wide) < l.w0-1
	if l.exploreFirst {
		l.status.State = StateExploring
		l.publish()
		return nil
	}
	l.status.State = StateWatching
	l.publish()
	return nil
}

// watch scrapes every Interval and decides at each epoch.
func (l *Loop) watch(ctx context.Context) error {
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

// curveWithBackoff is getCurve, retried after a failure that may pass,
// the wait doubling from Interval to probeBackoffMax intervals; the
// status says why and when.
func (l *Loop) curveWithBackoff(ctx context.Context) error {
	wait := l.cfg.Interval
	for attempt := 1; ; attempt++ {
		err := l.getCurve(ctx)
		if err == nil || ctx.Err() != nil || errors.Is(err, ErrNotAdapting) {
			return err
		}
		l.status.Note = fmt.Sprintf("verify-cost probe failed (%v); retrying in %s (attempt %d)", err, wait, attempt)
		l.publish()
		l.d.Log.Warn("adapt: the verify-cost probe failed; retrying later", "err", err, "in", wait, "attempt", attempt)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, probeBackoffMax*l.cfg.Interval)
	}
}

// getCurve takes the curve from the config, from BeforeTraffic, the cache
// or a probe. The probe takes rows 1..MaxWidth and the rows that up to
// upFrontMaxN sequences verify together, as many as the engine has slots
// (GET /props total_slots); a known curve that lacks some of those gets
// them probed now. An error wraps ErrNotAdapting when the engine cannot
// be probed at all; any other may pass.
func (l *Loop) getCurve(ctx context.Context) error {
	if l.cfg.Curve != nil && len(l.cfg.Curve.VerifyMS) > 0 {
		l.curve = *l.cfg.Curve
		if l.curve.Source == "" {
			l.curve.Source = "config"
		}
		return nil
	}
	t := l.d.Current()
	rows := l.rowsFor(ctx, t.BaseURL)
	c, known := l.knownCurve(t.Pair)
	if !known {
		// Rows 1..MaxWidth first, on their own: a busy engine may refuse
		// the rows of concurrent decoding (a live request takes the slot
		// between the probe's prefix and its request) and the loop can
		// start without them.
		samples, err := l.probeResuming(ctx, ProbeRows(l.cfg.MaxWidth, 0))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, ErrNoProbe) {
				return fmt.Errorf("%w: no verify-cost curve: %w (this engine could not be probed: serve keeps its width; set one to silence this)", ErrNotAdapting, err)
			}
			return fmt.Errorf("no verify-cost curve yet: %w", err)
		}
		c = l.addCurve(t.Pair, samples)
	}
	l.curve = c
	missing := c.missing(rows)
	if len(missing) == 0 {
		return nil
	}
	l.d.Log.Info("adapt: the verify-cost curve lacks rows of concurrent decoding; probing them", "rows", len(missing))
	samples, err := l.probeResuming(ctx, missing)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The curve still serves; the under-load probe (probeConcurrency)
		// tries the rows again when they are needed.
		l.d.Log.Warn("adapt: could not probe the rows of concurrent decoding; using the curve without them", "err", err)
		return nil
	}
	l.curve = l.addCurve(t.Pair, samples)
	return nil
}

// rowsFor is the rows the engine at base needs probed for its slots.
func (l *Loop) rowsFor(ctx context.Context, base string) []int {
	slots, err := totalSlots(ctx, l.d.HTTP, base)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		// The slots last known stand (an engine of the same command line
		// has the same): a /props that fails for a moment must not drop
		// the curve probed for them and probe the rows of one sequence.
		if ctx.Err() == nil {
			l.d.Log.Debug("adapt: the engine's slots are unknown; keeping the last known", "slots", l.slots, "err", err)
		}
		return upFrontRows(l.cfg.MaxWidth, l.slots)
	}
	l.slots = slots // part of the cache key
	return upFrontRows(l.cfg.MaxWidth, slots)
}

// probeResuming probes rows, resuming an attempt cut short by the bound
// (traffic may already be there) while attempts take samples.
func (l *Loop) probeResuming(ctx context.Context, rows []int) (map[int][]float64, error) {
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
func (l *Loop) cacheable() bool {
	return l.d.CacheDir != "" && l.d.CacheKey.Engine != "" && len(l.d.CacheKey.Models) > 0
}

// reset starts a new engine's life: its counters are a new baseline.
func (l *Loop) reset(t Target) {
	if l.width >= 2 && (l.pend.Cycles > 0 || l.suspect != nil) {
		l.dropStaleOwn()
		l.commit(false) // a part of a pool: too little of the traffic's mix to test
	}
	l.gen, l.width, l.fresh = t.Gen, t.Width, true
	l.sharedSince = time.Time{}
	l.base, l.pend, l.epoch, l.pendTok, l.pendEp = Counts{}, Counts{}, Counts{}, 0, nil
	l.baseTok, l.baseEp = 0, nil
	l.pendObs, l.prevObs = nil, nil
	// live is kept: the clients' load does not change with the engine
	// serving them.
	l.tokens, l.classic, l.lastN = 0, 0, 0
	l.epSecs, l.epCycles, l.secs, l.cycles, l.msEp = 0, 0, 0, 0, nil
	l.epServed, l.epOwn, l.aroundLogged = 0, 0, false
	l.status.Width = t.Width
}

// switchTrial asks for width and records when, and how long the switch
// took; a failure leaves the old engine serving and is only logged, unless
// Switch says adapting is off for good (an error wrapping ErrNotAdapting,
// e.g. a reload set an operator width), which it returns. explore marks a
// width started to observe; trial one the rule named to measure
// (Decision.Trial), checked against the width it left.
func (l *Loop) switchTrial(ctx context.Context, width int, reason string, explore, trial bool) error {
	from := l.width
	now := l.d.Now()
	// A failed switch counts like one made: it holds the window, and a
	// failed exploration waits for the re-check period, so a width whose
	// engine cannot start is not tried at every window (in drain mode each
	// try holds the traffic for a model load).
	l.lastSwitch = now
	lastExplore, explored := l.lastExplore, l.explored
	if explore {
		l.lastExplore = now
		if !trial {
			l.explored++
		}
	}
	l.d.Log.Info("adapt: switching width", "from", l.width, "to", width, "reason", reason)
	if err := l.d.Switch(ctx, width, reason); err != nil {
		if errors.Is(err, ErrNotAdapting) {
			return err
		}
		if errors.Is(err, ErrSwitchDropped) {
			l.lastExplore, l.explored = lastExplore, explored
			l.d.Log.Info("adapt: switch not tried", "to", width, "why", err)
			return nil
		}
		if ctx.Err() == nil {
			// From when it failed: a switch can fail after a model load,
			// or two in drain mode, past a window.
			l.failedAt = l.d.Now()
			l.d.Log.Warn("adapt: switch failed; the engine serving keeps serving, and no switch follows for a window", "to", width, "window", l.cfg.Window, "err", err)
		}
		return nil
	}
	l.failedAt = time.Time{}
	// The switch's own time: from the request to the new engine serving
	// (Switch returns then). It prices the next switches (Inputs.SwitchS).
	l.switchS = l.d.Now().Sub(now).Seconds()
	l.status.SwitchS = l.switchS
	l.status.Switches++
	homeNow := explore && !trial && l.home == 0 // a wider exploration from an exploration keeps the first home
	if homeNow {
		// The width left becomes home: its rate over its engine's cycles,
		// before reset drops them, for the check of the width chosen after.
		l.homeRate, l.homeRateOK = l.stintRate(l.lastN)
		l.homeRateN = l.lastN
	}
	l.reset(l.d.Current())
	l.exploring, l.trial = explore && !trial, trial && l.width == width
	switch {
	case trial, !explore:
		l.home = 0
	case homeNow:
		l.home = from
	}
	l.publish()
	return nil
}

// step is one scrape of the shell: the serving engine's counters go to
// Step, and its action is carried out here.
func (l *Loop) step(ctx context.Context) error {
	l.refreshCurve()
	t := l.d.Current()
	if t.Gen != l.gen && t.Pair != "" && l.pair != "" && t.Pair != l.pair {
		l.d.Log.Info("adapt: another model pair serves; starting over", "was", l.pair, "now", t.Pair)
		l.saveLearnt(true) // what the old pair taught, under its key
		l.clearState()
		l.curve = Curve{}
		return errPairChanged
	}
	snap, err := l.scrape(ctx, t.BaseURL)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil && t.Served != nil {
		slots := l.knownSlots()
		s := t.Served(slots)
		snap.Served, snap.Ended, snap.ServedSlots, snap.HasServed = s.Secs, float64(s.Ended), slots, true
	}
	err = l.perform(ctx, l.Step(Observation{Now: l.d.Now(), Target: t, Snap: snap, Err: err}))
	l.saveLearnt(false)
	return err
}

// perform carries out an action of the stepper: a switch (Switch, timed),
// a probe of the rows of concurrent decoding (then the decision it held),
// or the end of adapting.
func (l *Loop) perform(ctx context.Context, a Action) error {
	switch a.Kind {
	case ActStop:
		return a.Err
	case ActProbe:
		l.probeConcurrency(ctx, a.N)
		return l.perform(ctx, l.Resume(l.d.Now()))
	case ActSwitch:
		return l.switchTrial(ctx, a.Width, a.Reason, a.Explore, a.Trial)
	}
	return nil
}

func (l *Loop) scrape(ctx context.Context, base string) (Snapshot, error) {
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

// knownSlots is the engine's total_slots as last asked (0: unknown).
func (l *Loop) knownSlots() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slots
}

// concurrency is the number of sequences the loop prices and measures at
// (liveLoad), at most the engine's slots: samples of an earlier engine
// with more slots age out only over a window.
func (l *Loop) concurrency() int {
	n := l.live.value()
	if slots := l.knownSlots(); slots > 0 { // BeforeTraffic may be asking a new engine for them
		n = min(n, slots)
	}
	return n
}

// closeEpoch folds the epoch into the acceptance (or, on a drift, starts
// it again), each width's own counts and the running width's measured
// cost, at concurrency n.
func (l *Loop) closeEpoch(n int) {
	l.status.Concurrency = n
	if n != l.lastN { // a cycle's time is measured at one concurrency
		l.secs, l.cycles, l.msEp = 0, 0, nil
	}
	epSecs := l.epochSecs()
	if l.epCycles > 0 {
		l.msEp = append(l.msEp, 1000*epSecs/l.epCycles)
	}
	l.secs, l.cycles, l.lastN = l.secs+epSecs, l.cycles+l.epCycles, n
	l.epSecs, l.epCycles, l.epServed, l.epOwn = 0, 0, 0, 0
	lo, hi := min(l.ownN, n), max(l.ownHi, l.ownN, n)
	switch {
	case l.ownN < 1:
		l.ownN, l.ownHi = n, n
	case loadChanged(lo, hi): // the loads the trials were taken at, and this one
		l.resetTrials()
	default:
		l.ownN, l.ownHi = lo, hi
	}
	if l.width >= 2 {
		if l.epoch.Cycles > 0 {
			l.pendTok += l.tokens
			l.pendEp = append(l.pendEp, l.tokens/l.epoch.Cycles)
		}
		l.foldAcceptance()
	}
	// Every width's cost is measured live, classic too (a step per token):
	// under independent clients on the H200 a classic step at 4
	// sequences cost 7 % more than the idle probe of 4 rows, and a check
	// of a switch to classic against the probe was no check.
	if l.cycles > 0 {
		l.measured[l.width] = Measure{MS: 1000 * l.secs / l.cycles, Cycles: l.cycles, N: n, SE: batchSE(l.msEp)}
		l.scorePrediction(l.width)
	}
	if l.width < 2 {
		l.classic += l.tokens
	}
	l.epoch, l.tokens = Counts{}, 0
}

// epochSecs is the epoch's seconds: served ones where the proxy timed
// them, unless over the epoch it timed under a quarter of the engine's
// own (aroundProxy): then the engine's seconds stand for those scrapes.
// Without this, requests sent straight to the engine made its cycles
// look free (adapteval -direct: served seconds stood still while the
// cycles grew).
func (l *Loop) epochSecs() float64 {
	if !aroundProxy(l.epServed, l.epOwn) {
		return l.epSecs
	}
	if !l.aroundLogged {
		l.aroundLogged = true
		l.d.Log.Warn("adapt: the engine decodes requests the proxy did not send (a client on its loopback port?); its cycles are timed by the engine's own seconds meanwhile, which leave out what clients wait for outside them",
			"served_s", l.epServed, "engine_s", l.epOwn)
	}
	return l.epSecs - l.epServed + l.epOwn
}

// driftPool is how many MinCycles of epochs are pooled before they are
// tested for a drift: 1024 cycles at the default, about 20 requests of
// 128 tokens. A pool covers the traffic's mix where one epoch did not: on
// the sim matrix with two classes of requests alternating every 8, one
// epoch held one class or the other, the test found a drift nearly every
// epoch, and each drift dropped the far positions and sent the loop
// exploring again (50 switches in 30 minutes).
const driftPool = 4

// foldAcceptance adds the epoch to the pending pool, and commits the pool
// once it holds driftPool·MinCycles cycles.
func (l *Loop) foldAcceptance() {
	l.pend.Merge(l.epoch)
	l.pendObs = append(l.pendObs, l.epoch.Obs())
	if l.pend.Cycles >= driftPool*l.cfg.MinCycles {
		l.commit(true)
	}
}

// commit joins the pending pool to this engine's acceptance and to the
// running width's own counts, or, when tested and the traffic drifted,
// replaces them with it. A pool that drifts is held (suspect) until the
// next one: a drift is taken when that one drifts too and the two
// together still do (two runs the opposite ways are no drift), and both
// start the new acceptance; otherwise the held pool joins as any other. On
// steady traffic of two kinds of requests in runs (the sim matrix's two
// classes; four clients' mix of code prompts on the H200, where S(1)
// moved between 0.58 and 0.68 and the loop took 12 drifts in 7 minutes)
// one pool in a run of one kind passed the test for a drift, and each
// drift dropped the far positions, the trials and the widths undone.
func (l *Loop) commit(test bool) {
	ep := l.pend.Obs()
	phi := Dispersion(l.prevObs, l.pendObs)
	kBase, kOwn := 0, 0
	if test && l.base.Cycles > 0 {
		kBase = Drift(l.base.Obs(), ep, l.cfg.DriftZ, phi)
	}
	// This width's own acceptance may be from an earlier engine at it,
	// before a traffic change no epoch of one engine showed (one past the
	// width served meanwhile): the same test, at one width.
	if o := l.own[l.width]; test && kBase == 0 && o.Cycles > 0 {
		kOwn = Drift(o.Obs(), ep, l.cfg.DriftZ, phi)
	}
	if s := l.suspect; s != nil {
		l.suspect = nil
		both := Counts{Cycles: s.pool.Cycles, AtLeast: slices.Clone(s.pool.AtLeast)}
		both.Merge(l.pend)
		if kBase > 0 {
			kBase = Drift(l.base.Obs(), both.Obs(), l.cfg.DriftZ, phi)
		}
		if kOwn > 0 {
			kOwn = Drift(l.own[l.width].Obs(), both.Obs(), l.cfg.DriftZ, phi)
		}
		if kBase > 0 || kOwn > 0 { // confirmed: the two pools together moved
			l.pend, l.pendTok, l.pendEp = both, s.tok+l.pendTok, append(s.ep, l.pendEp...)
		} else { // runs of the old traffic's mix (or two runs the other way round)
			l.join(*s)
		}
	} else if kBase > 0 || kOwn > 0 {
		l.d.Log.Debug("adapt: acceptance moved; the next pool confirms a drift or not", "position", max(kBase, kOwn))
		l.suspect = &heldPool{pool: l.pend, tok: l.pendTok, ep: l.pendEp}
		l.pend, l.pendTok, l.pendEp = Counts{}, 0, nil
		l.prevObs, l.pendObs = l.pendObs, nil
		return
	}
	ep = l.pend.Obs()
	switch {
	case kBase > 0:
		l.d.Log.Info("adapt: acceptance drifted; deciding from the latest epochs", "position", kBase,
			"was", l.base.Obs().S(kBase), "now", ep.S(kBase))
		l.base, l.baseTok, l.baseEp = Counts{}, 0, nil
		l.wide = nil // far positions observed under other traffic
		// Each width's own acceptance is of the older traffic too;
		// its ms per cycle (measured) is not: cost does not move
		// with the traffic.
		l.resetTrials()
		l.recheckEvery = 0
	case kOwn > 0:
		l.d.Log.Info("adapt: acceptance at this width drifted since it was last measured; dropping the widths measured", "width", l.width, "position", kOwn,
			"was", l.own[l.width].Obs().S(kOwn), "now", ep.S(kOwn))
		l.resetTrials()
	}
	l.join(heldPool{pool: l.pend, tok: l.pendTok, ep: l.pendEp})
	l.pend, l.pendTok, l.pendEp = Counts{}, 0, nil
	l.prevObs, l.pendObs = l.pendObs, nil
}

// heldPool is a pool that drifted, held until the next one confirms it.
type heldPool struct {
	pool Counts
	tok  float64
	ep   []float64
}

// join adds a pool to this engine's acceptance and the running width's
// own counts.
func (l *Loop) join(p heldPool) {
	l.base.Merge(p.pool)
	l.baseTok += p.tok
	l.baseEp = append(l.baseEp, p.ep...)
	o := l.own[l.width]
	o.Merge(p.pool)
	l.own[l.width] = o
	d := l.deliv[l.width]
	l.deliv[l.width] = [2]float64{d[0] + p.tok, d[1] + p.pool.Cycles}
	l.delivEp[l.width] = append(l.delivEp[l.width], p.ep...)
	// The far positions are not tested against this width's S: S per
	// cycle depends on the width when easy text comes in runs (a wide
	// cycle takes a run at once), so S(k) at width 8 can sit several
	// standard errors above S(k) at width 16 on the same traffic (H200,
	// 2026-12-01: 0.34 against 0.22 at k = 7), and dropping them for it
	// made the loop explore the wide width again every few seconds. A
	// traffic change shows between epochs of one width, above.
	if obs := l.base.Obs(); len(obs) >= len(l.wide) {
		l.wide = obs
	}
}

// dropStaleOwn drops the running width's own counts when the partial pool
// it leaves with drifted from them: they are of other traffic, and the
// rule would price this width by them (Inputs.Own). A visit shorter than a
// pool is never tested otherwise: on the sim's flat → collapse test, width
// 16's own counts of the flat stretch priced it +54.7 % over 4 under the
// collapse, and the loop went 4 → 16 → 4 four times. Only this width's
// counts go: a partial pool is too little of the traffic's mix to drop
// every width's (that undid a right switch to width 1).
func (l *Loop) dropStaleOwn() {
	o := l.own[l.width]
	if o.Cycles <= 0 || len(l.pendObs) < 2 {
		// One epoch shows no spread of its own: the drift test would take
		// requests of different acceptance in runs for a drift.
		return
	}
	ep := l.pend.Obs()
	if k := Drift(o.Obs(), ep, l.cfg.DriftZ, Dispersion(l.prevObs, l.pendObs)); k > 0 {
		l.d.Log.Info("adapt: acceptance at this width drifted since it was last measured; dropping its own counts", "width", l.width, "position", k,
			"was", o.Obs().S(k), "now", ep.S(k))
		delete(l.own, l.width)
		delete(l.deliv, l.width)
		delete(l.delivEp, l.width)
	}
}

// scorePrediction compares the ms per cycle the switch to w predicted
// with what w measured, once, and keeps the running error in the status.
func (l *Loop) scorePrediction(w int) {
	p, ok := l.predict[w]
	if !ok {
		return
	}
	delete(l.predict, w)
	m := l.measured[w].MS
	e := m/p - 1
	if math.IsNaN(e) || math.IsInf(e, 0) {
		return
	}
	pe := &l.status.Prediction
	pe.MeanAbs = (pe.MeanAbs*float64(pe.N) + math.Abs(e)) / float64(pe.N+1)
	pe.RMS = math.Sqrt((pe.RMS*pe.RMS*float64(pe.N) + e*e) / float64(pe.N+1))
	pe.N, pe.Last = pe.N+1, e
	l.d.Log.Info(fmt.Sprintf("adapt: width %d predicted %.2f ms per cycle, measured %.2f (%+.1f%%)", w, p, m, 100*e),
		"mean_abs_error", pe.MeanAbs, "predictions", pe.N)
}

// decide runs the rule on what the loop knows.
func (l *Loop) decide(n int) Decision {
	acc := l.acceptance()
	live := 0
	if l.width >= 2 {
		live = min(len(acc), l.width-1)
	}
	trials := 0
	if l.cfg.MaxTrials > 0 {
		trials = max(0, l.cfg.MaxTrials-len(l.tried))
	}
	return Decide(Inputs{Running: l.width, N: n, Acc: acc, Curve: l.curve, Measured: maps.Clone(l.measured), Rule: l.cfg.Rule, Live: live, Home: l.home,
		Own: l.ownCopy(), Trials: trials, Tried: maps.Clone(l.tried), Avoid: maps.Clone(l.avoid), SwitchS: l.switchS,
		PredErr: l.status.Prediction.RMS})
}

// clearNoCostNote drops the no-cost note when the loop decides at another
// concurrency, or names the width serving in it.
func (l *Loop) clearNoCostNote(n int) {
	switch {
	case l.noCostNote == "":
	case n != l.noCostN: // a concurrency the curve covers: deciding again
		if l.status.Note == l.noCostNote {
			l.status.Note = ""
		}
		l.d.Log.Info("adapt: the running width is judged again", "concurrency", n, "was", l.noCostNote)
		l.noCostNote, l.noCostN, l.noCostWhy = "", 0, ""
	case l.status.Note == l.noCostNote:
		// Still at that concurrency, deciding among the widths the curve
		// covers (after going home): the note names the width serving.
		l.noCostNote = fmt.Sprintf("%s; serving width %d", l.noCostWhy, l.width)
		l.status.Note = l.noCostNote
	}
}

// judge checks the switch under check (if any) against the width it left
// (judgeSwitch): undo is the width to go back to (0: none), hold says
// the width is still being measured, so dec is not acted on. dec's reason
// says which.
func (l *Loop) judge(n int, dec *Decision) (undo int, hold bool) {
	c := l.check
	if c == nil || c.to != l.width {
		l.check = nil
		l.status.Checking = ""
		return 0, false
	}
	// The width switched to is read over its engine's cycles only: its own
	// counts from an earlier visit may be of other traffic (the sim's
	// collapse: width 16's counts of the flat stretch kept a switch to it
	// at +42 % in its first epoch).
	to, ok1 := l.stintRate(n)
	if c.to < 2 {
		to, ok1 = l.ownRateOf(1, n)
	}
	// The width left as the decision saw it: its own counts reach back to
	// other traffic (H200 sim, flat then collapsing traffic: width 17's
	// own rate, mostly of the flat stretch, undid a right switch to 4, and
	// the loop ended at 3, 0.88 of the best).
	from, ok2 := c.left, c.hasLeft && c.leftN == n
	if !ok2 {
		from, ok2 = l.ownRateOf(c.from, n)
	}
	if !ok2 {
		// The width left has no measured rate of its own here (the loop
		// explored before it served a whole epoch, or at another
		// concurrency): its predicted rate stands in, without doubt.
		for _, cd := range dec.Candidates {
			if cd.Width == c.from {
				from, ok2 = rateObs{T: cd.TokensPerCycle, MS: cd.Cost.MS, MSSE: math.Max(cd.Cost.SE, costNoise*cd.Cost.MS), Cycles: math.Inf(1)}, true
			}
		}
	}
	if !ok1 || !ok2 {
		// The width left lost its own counts (the traffic drifted, or the
		// load changed): nothing to compare with; the rule decides.
		l.check, l.status.Checking = nil, ""
		return 0, false
	}
	v, gain, half := judgeSwitch(to, from, l.cfg.Z, l.cfg.NoiseFloor, driftPool*l.cfg.MinCycles, checkEpochs*l.cfg.MinCycles)
	what := fmt.Sprintf("width %d measured %+.1f%% ± %.1f%% against width %d, the width it replaced", c.to, 100*gain, 100*half, c.from)
	switch v {
	case checkUndo:
		l.avoid[c.to] = true
		l.check, l.status.Checking = nil, ""
		dec.Choice, dec.Switch, dec.Trial = c.from, true, 0
		why := "worse beyond the noise"
		if gain+half >= 0 {
			why = fmt.Sprintf("worse after %d epochs of its own, within the noise", checkEpochs)
		}
		dec.Reason = "undo: " + what + ": " + why + "; not tried again until the traffic changes"
		return c.from, false
	case checkWait:
		l.status.Checking = c.String()
		dec.Choice, dec.Switch, dec.Trial, dec.Explore, dec.Recheck = l.width, false, 0, 0, 0
		dec.Reason = "checking: " + what + ": measuring on (" + dec.Reason + ")"
		return 0, true
	}
	l.d.Log.Info("adapt: switch kept: " + what)
	l.check, l.status.Checking = nil, ""
	return 0, false
}

// ownRateOf is width w's own measured rate at concurrency n, if it has one.
func (l *Loop) ownRateOf(w, n int) (rateObs, bool) {
	if w < 2 {
		// Measured live at this concurrency where it was served; else the
		// probe's idle cost, with the noise of a model.
		v, ok := l.curve.At(max(1, n))
		ms, se := v*float64(boolInt(ok)), costNoise*v
		if m, okm := l.measured[1]; okm && m.N == n && m.MS > 0 {
			ms, se = m.MS, m.costSE()
		}
		r, ok2 := ownRate(1, Counts{}, ms)
		r.MSSE = se
		if w == l.width {
			r.Cycles = l.classic // its own steps, for the check's cap
		}
		return r, ok2
	}
	own := l.own[w]
	d, eps := l.deliv[w], l.delivEp[w]
	if w == l.width { // with the epochs not yet committed
		own = l.ownCopy()[w]
		wt := l.waiting()
		d = [2]float64{d[0] + wt.tok, d[1] + wt.pool.Cycles}
		eps = append(slices.Clone(eps), wt.ep...)
	}
	return l.measuredRate(w, n, own, d, eps)
}

// stintRate is the running width's rate over this engine's epochs since
// it started or the traffic drifted (base and pend): the cycles the
// decisions here saw, at least MinCycles of them, as a decision needs.
func (l *Loop) stintRate(n int) (rateObs, bool) {
	if l.width < 2 {
		return rateObs{}, false
	}
	c := l.engineCounts()
	wt := l.waiting()
	d := [2]float64{l.baseTok + wt.tok, c.Cycles}
	return l.measuredRate(l.width, n, c, d, append(slices.Clone(l.baseEp), wt.ep...))
}

// measuredRate is width w's rate at concurrency n from its counts, the
// tokens its cycles delivered (d: tokens, cycles) and their epochs' means,
// at its measured cost.
func (l *Loop) measuredRate(w, n int, own Counts, d [2]float64, eps []float64) (rateObs, bool) {
	m, ok := l.measured[w]
	if !ok || m.N != n || own.Cycles < l.cfg.MinCycles {
		return rateObs{}, false
	}
	r, ok := ownRate(w, own, m.MS)
	r.MSSE = m.costSE()
	// The tokens a cycle delivered (Δ tokens_predicted / Δ cycles), where
	// known: a request's last cycle delivers only what the request still
	// wants, which the acceptance counters do not see, and it tells
	// widths apart when a request is a few cycles long (the sim's flat
	// profile: 128 tokens at 15.4 or 14.5 tokens a cycle both take 9
	// cycles, so width 16 beats 17, which the counters rank first).
	if ok && d[1] >= l.cfg.MinCycles && d[0] > 0 {
		r.T = d[0] / d[1]
		r.SE = math.Max(r.SE, batchSE(eps))
	}
	return r, ok
}

// batchSE is the standard error of the mean of epoch means (batch
// means), 0 with fewer than 3. Cycles are not independent when requests
// of different acceptance come in runs: the spread between epochs shows
// what one cycle's spread does not (on the sim matrix's two alternating
// classes a width measured +16 % ± 5 % over one run of easy requests was
// 8 % worse over the mix).
func batchSE(means []float64) float64 {
	k := float64(len(means))
	if k < 3 {
		return 0
	}
	var m, v float64
	for _, x := range means {
		m += x
	}
	m /= k
	for _, x := range means {
		v += (x - m) * (x - m)
	}
	return math.Sqrt(v / (k - 1) / k)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reexploreMaxFactor bounds the re-check period: 8 × ReexploreEvery,
// 80 minutes at the default.
const reexploreMaxFactor = 8

// recheckPeriod is the wait between two re-checks.
func (l *Loop) recheckPeriod() time.Duration {
	if l.recheckEvery <= 0 {
		return l.cfg.ReexploreEvery
	}
	return l.recheckEvery
}

// expect records what the switch to w predicted (its modelled ms per
// cycle, scored when w has measured an epoch) and puts the switch under
// check against from, the width it leaves.
func (l *Loop) expect(dec Decision, w, from int) {
	for _, c := range dec.Candidates {
		if c.Width == w && c.Cost.From != "measured" {
			l.predict[w] = c.Cost.MS
			l.d.Log.Info(fmt.Sprintf("adapt: width %d predicted %.2f ms per cycle (%s)", w, c.Cost.MS, c.Cost.From))
		}
	}
	c := &switchCheck{from: from, to: w}
	switch {
	case from == l.width:
		c.left, c.hasLeft = l.stintRate(dec.N)
		c.leftN = dec.N
	case from == l.home && l.homeRateOK: // an exploration's home, as it left it
		c.left, c.hasLeft, c.leftN = l.homeRate, true, l.homeRateN
	}
	l.check = c
}

// unprobed says why the rows n sequences verify at the running width are
// not in the curve, and whether the under-load probe may still get them.
func (l *Loop) unprobed(n int) (why string, pending bool) {
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

// resetTrials drops each width's own acceptance, the trials taken and the
// widths undone: the traffic drifted, or the load changed (loadChanged);
// the trials from now are of the load now (ownN). A width
// undone under one traffic can be the best of the next (the sim's flat
// traffic undid width 4 against 17; collapsing traffic then has its best
// at 4, and the loop, barred from it, kept 5 at 0.90 of it).
func (l *Loop) resetTrials() {
	l.ownN, l.ownHi = l.lastN, l.lastN
	if l.check != nil {
		l.check.hasLeft = false // the rate of the width left is of the older traffic too
	}
	l.homeRateOK = false
	clear(l.own)
	clear(l.deliv)
	clear(l.delivEp)
	clear(l.tried)
	clear(l.avoid)
	l.barred = nil // undone under the older traffic
}

// ownCopy is l.own for Decide, which must not share the loop's slices.
func (l *Loop) ownCopy() map[int]Counts {
	m := make(map[int]Counts, len(l.own)+1)
	for w, c := range l.own {
		m[w] = Counts{Cycles: c.Cycles, AtLeast: slices.Clone(c.AtLeast)}
	}
	if wt := l.waiting(); l.width >= 2 && wt.pool.Cycles > 0 { // the running width's epochs not yet committed
		o := m[l.width]
		o.Merge(wt.pool)
		m[l.width] = o
	}
	return m
}

// acceptance is the running width's positions from this engine's epochs,
// and farther positions from the widest observation, when it agrees.
func (l *Loop) acceptance() Acceptance {
	if l.width < 2 {
		return l.wide
	}
	acc := l.engineCounts().Obs()
	if len(l.wide) > len(acc) {
		acc = append(acc, l.wide[len(acc):]...)
	}
	return acc
}

// engineCounts is this engine's acceptance counts since it started or the
// traffic drifted: base and the pools not yet committed (waiting).
func (l *Loop) engineCounts() Counts {
	c := l.base
	c.AtLeast = slices.Clone(c.AtLeast)
	c.Merge(l.waiting().pool)
	return c
}

// waiting is the cycles not yet joined: a pool held for a drift (commit)
// and the pending one. Decisions, checks and saves read them with the
// joined ones; only the drift test leaves the held pool out. Without it a
// new engine's first pool, held, left the decision with "no acceptance
// observed yet" for a pool more.
func (l *Loop) waiting() heldPool {
	w := heldPool{pool: Counts{Cycles: l.pend.Cycles, AtLeast: slices.Clone(l.pend.AtLeast)}, tok: l.pendTok, ep: slices.Clone(l.pendEp)}
	if s := l.suspect; s != nil {
		w.pool.Merge(s.pool)
		w.tok += s.tok
		w.ep = append(slices.Clone(s.ep), w.ep...)
	}
	return w
}

// probeConcurrency extends a probed curve to the rows n sequences verify
// together, once per n.
func (l *Loop) probeConcurrency(ctx context.Context, n int) {
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
	l.saveCurve(st.samples)
	l.status.Curve = &l.curve
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
