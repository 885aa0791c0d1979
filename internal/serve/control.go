package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/speclaunch/speclaunch/internal/adapt"
	"github.com/speclaunch/speclaunch/internal/control"
	"github.com/speclaunch/speclaunch/internal/follow"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/probe"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/sim"
)

// controlShell drives internal/control's pure controller for serve: every
// interval it scrapes the serving engine's /metrics and reads the proxy's
// in-flight count, every follow.Tick it samples that count (the
// controller follows its learnt schedule by internal/follow's rule, as a
// tuned schedule is followed: one switching path), and it carries out
// what the controller asks. A switch and a probe run beside the loop and
// answer it when they end, so neither holds the other, nor a reload: only
// the first engine of a pair is probed before it takes traffic, within
// its bound (probeBefore), and a probe under load is bounded (probeBound)
// and says so in the log when it starts and when it gives up.
type controlShell struct {
	c       control.Controller
	rt      Runtime
	eng     engines
	client  *http.Client
	log     *slog.Logger
	publish func(control.Status)
	// first is the status shown before the controller's first step,
	// shown again with Resumed once keyed read a state.
	first control.Status
	file  string // where the pair's knowledge is saved; "" not saved
	key   adapt.CacheKey
	// dir is where the state is kept ("" not kept); keyOnce reads the
	// first engine's slots into key, names file and reads the state.
	dir     string
	keyOnce sync.Once
	every   time.Duration
	// resumed: when the state resumed was saved ("" none); saved: a save
	// succeeded (said once).
	resumed string
	saved   bool
	dirSaid bool // a directory at file was said (dirAtState)
	// reslotted: the latest engine has other slots than the key's, said
	// (reslot); what the controller learns under them is not saved (save).
	reslotted atomic.Bool
	// probing counts the shell's own probes in flight (a scrape that spans
	// one says so; the load never counts their requests: they are not
	// clients'); pre is a probe made before traffic, for the loop to take;
	// hasCurve says the controller has a verify cost, so no new engine is
	// probed before traffic.
	probing  atomic.Int32
	probed   atomic.Bool  // a probe ran since the last scrape
	switches atomic.Int64 // switches begun: a probe that saw one was cut by it
	mu       sync.Mutex
	pre      map[int]float64
	hasCurve atomic.Bool
	// preTried: the pairs (adapt.Target.Pair) whose engine was probed
	// before traffic, cut short or not (mu); before: that probe while it
	// runs, for a switch asked for meanwhile to say what it waits for.
	preTried map[string]bool
	slots    map[uint64]int // engines' total_slots by generation (mu; slotsOf)
	before   atomic.Pointer[preRun]
	initial  control.Pair // what was resumed (start)
	// started is how long the first engine took to start: it prices the
	// first switch until one is measured (0 = unknown). chose records the
	// bucket and the load a switch serves, for the status and metrics.
	started func() time.Duration
	chose   func(w int, bucket string, load float64)
	// inForce is the plan in force (nil: only the serving engine's is
	// read): a reload's resolved schedule is the controller's safe answer.
	inForce func() *plan.Plan
	serving *plan.Plan // the serving engine's plan at the last sample (Run's goroutine)
	// judged is the pair of plans (serving, in force) followDefault last
	// judged: plans do not change, so the same pair needs no new look on
	// each of the samples, four a second (Run's goroutine).
	judged [2]*plan.Plan
}

// start reads the saved state: before the first engine takes traffic, so
// that one that resumed a verify cost is not probed before traffic.
func (sh *controlShell) start() {
	sh.initial = sh.load()
	sh.hasCurve.Store(len(sh.initial.Verify) > 0)
}

// slotsOf reads engine t's slots (its /props total_slots; 0 when it does
// not say) once, before it takes traffic, for the key and for the scrapes
// of it: requests beyond them wait in its queue, counted as the controller
// prices them (control.Observation.Slots).
func (sh *controlShell) slotsOf(ctx context.Context, t adapt.Target) (int, error) {
	n, err := engineSlots(ctx, sh.client, t.BaseURL)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.slots == nil {
		sh.slots = map[uint64]int{}
	}
	sh.slots[t.Gen] = n
	return n, err
}

// engineSlotsOf is the slots slotsOf read for engine gen, the serving one
// (0: not read); the engines before it are dropped, as none of them
// serves again. Dropped by the newest start instead, a serving engine
// that outlived failed starts read 0 and counted its queue's seconds (a
// review).
func (sh *controlShell) engineSlotsOf(gen uint64) int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for g := range sh.slots {
		if g < gen {
			delete(sh.slots, g)
		}
	}
	return sh.slots[gen]
}

// keyed completes the key with the first engine's slots (n, read by
// slotsOf; err why they are unknown), names the state's file by it and
// reads the state, once: the key was made before any engine ran, and its
// slots were never set, so a state learnt under -np 4 was resumed under
// -np 8 (an operator's pass on the sim).
func (sh *controlShell) keyed(n int, err error) {
	first := false
	sh.keyOnce.Do(func() {
		first = true
		if sh.dir != "" { // else nothing is saved: the key names no file
			if err != nil {
				sh.log.Info("adapt: the engine does not say its slots; its saved state is keyed without them", "err", err)
			}
			sh.key.Slots = n
			sh.file = controlFile(sh.dir, sh.key)
		}
		sh.start()
		if sh.resumed != "" && sh.publish != nil {
			// The state is read at the first engine now, after the
			// status was first shown: a restart's status said nothing
			// of the state it resumed until the controller's first step.
			sh.publish(withTime(sh.first, sh.resumed))
		}
	})
	if !first {
		sh.reslot(n, err)
	}
}

// reslot compares a later engine's slots (n, err as keyed's) with the
// key's and says when they part (a reload changed -np: what is learnt
// from then on is not saved under the key, so that the next start under
// the key's slots does not resume a state learnt under others; a review:
// the key was read from the first engine only) and when they meet again
// (saving resumes: a user pass's run went back to -np 4 and saved nothing
// more). Whether a save is made is the state's own slots' call (save).
func (sh *controlShell) reslot(n int, err error) {
	if sh.file == "" || sh.key.Slots == 0 || err != nil {
		return // the first engine said no slots: nothing to compare with
	}
	if n != sh.key.Slots && sh.reslotted.CompareAndSwap(false, true) {
		sh.log.Warn(fmt.Sprintf("adapt: the new engine has %d slots where the saved state is keyed by %d: what is learnt from now on is not saved; restart speclaunch to learn under %d", n, sh.key.Slots, n), "file", sh.file)
	}
	if n == sh.key.Slots && sh.reslotted.CompareAndSwap(true, false) {
		sh.log.Info(fmt.Sprintf("adapt: the new engine has %d slots again, as the saved state is keyed: what it learns is saved again", n), "file", sh.file)
	}
}

// withTime is st as shown now, with the state resumed ("" none).
func withTime(st control.Status, resumed string) control.Status {
	st.Resumed, st.Updated = resumed, time.Now()
	return st
}

// engineSlots asks an engine its slot count (/props total_slots), bounded
// by scrapeBound.
func engineSlots(ctx context.Context, client *http.Client, base string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, scrapeBound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/props", nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/props: %s", resp.Status)
	}
	return propsSlots(io.LimitReader(resp.Body, 1<<20))
}

// propsSlots reads total_slots from a /props body; a count below 1 or
// none is an error (the key's 0 is "unknown").
func propsSlots(r io.Reader) (int, error) {
	var p struct {
		TotalSlots *int `json:"total_slots"`
	}
	if err := json.NewDecoder(r).Decode(&p); err != nil {
		return 0, fmt.Errorf("/props: %w", err)
	}
	if p.TotalSlots == nil || *p.TotalSlots < 1 {
		return 0, errors.New("/props: no total_slots of 1 or more")
	}
	return *p.TotalSlots, nil
}

// Bounds of the shell's I/O.
const (
	controlEvery = 2 * time.Second  // between scrapes (the old loop's, and adaptsim's)
	scrapeBound  = 5 * time.Second  // one /metrics request
	probeBound   = 30 * time.Second // one probe under load (probe.DefaultTimeout)
	beforeBound  = 10 * time.Second // the probe of a first engine while requests wait (issue 30)
	saveEvery    = 10 * time.Second // between two saves
)

// savedPair is the file the shell keeps the pair's knowledge in.
type savedPair struct {
	Key   adapt.CacheKey `json:"key"`
	Saved time.Time      `json:"saved"`
	Pair  control.Pair   `json:"pair"`
	// Counted is how a queued request's seconds were counted: shareCounted
	// ("" in a state saved before: every second, control.DropQueued).
	Counted string `json:"counted,omitempty"`
}

// shareCounted marks a state whose runs count a request that waited in
// the engine's queue by its share of the time (proxy.Backend.Served).
const shareCounted = "slot share"

// BeforeTraffic probes a new engine's verify cost while it is idle, but
// only for the first engine of a pair while the controller has none (the
// first engine of a run that resumed nothing: probeBefore) and for at
// most beforeBound, said in the log with who serves meanwhile (held:
// requests wait; else the engine it replaces): what it lacks is probed
// under load later. A later engine of the pair is not probed before
// traffic though that probe was cut short: a reload saved during it
// waited for it, then for a second one of the replacement engine, 20 s in
// all. It never fails the engine's start.
func (sh *controlShell) BeforeTraffic(ctx context.Context, t adapt.Target, held bool) error {
	if t.BaseURL == "" {
		return nil
	}
	slots, err := sh.slotsOf(ctx, t)
	sh.keyed(slots, err)
	sh.mu.Lock()
	if !probeBefore(sh.hasCurve.Load(), sh.preTried, t.Pair) {
		sh.mu.Unlock()
		return nil
	}
	if sh.preTried == nil {
		sh.preTried = map[string]bool{}
	}
	sh.preTried[t.Pair] = true
	sh.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, beforeBound)
	defer cancel()
	meanwhile := "requests wait meanwhile"
	if !held {
		meanwhile = "the engine it replaces serves meanwhile"
	}
	sh.log.Info(fmt.Sprintf("adapt: probing the new engine's verify cost before it takes traffic (at most %s; %s)", beforeBound, meanwhile))
	sh.before.Store(&preRun{engine: t.Gen, began: time.Now()})
	defer sh.before.Store(nil)
	sh.mu.Lock()
	maxW := sh.c.Config().MaxWidth // Run may give the controller a new default meanwhile
	sh.mu.Unlock()
	start := time.Now()
	v := map[int]float64{}
	for _, rows := range control.BeforeRows(slots, maxW, t.Width) {
		c, err := probe.Run(ctx, sh.client, t.BaseURL, rows, probe.DefaultReps)
		if err != nil {
			next := "the engine serves, and what it lacks is probed under load if needed"
			if errors.Is(ctx.Err(), context.Canceled) { // not the bound: the start itself ended
				next = "the engine's start was called off (a stop, or a newer switch)"
			}
			sh.log.Info(fmt.Sprintf("adapt: the probe before traffic stopped after %s (%v); %s", time.Since(start).Round(time.Millisecond), err, next))
			break
		}
		maps.Copy(v, c.VerifyMS)
	}
	sh.mu.Lock()
	sh.pre = v
	sh.mu.Unlock()
	return nil
}

// probeBefore says whether a new engine of pair is probed before it
// takes traffic: only while the controller has no verify cost, and only
// the first engine of a pair (tried: the pairs whose engine was probed
// before traffic, cut short or not). No later engine is (docs/adaptive.md,
// "The probe never holds you up"): a switch or reload would wait for it.
func probeBefore(hasCurve bool, tried map[string]bool, pair string) bool {
	return !hasCurve && !tried[pair]
}

// preRun is a probe before traffic under way: the engine it probes and
// when it began.
type preRun struct {
	engine uint64
	began  time.Time
}

// BeforeTrafficLine says the probe before traffic under way, "" when
// none runs (preLine).
func (sh *controlShell) BeforeTrafficLine(now time.Time) string {
	return preLine(sh.before.Load(), now)
}

// preLine is the line of a switch asked for while a probe before traffic
// runs: it waits for that probe, which it names with its bound and the
// time left (the runtime's own line says only that an engine is starting).
func preLine(p *preRun, now time.Time) string {
	if p == nil {
		return ""
	}
	left := min(max(beforeBound-now.Sub(p.began), 0), beforeBound)
	return fmt.Sprintf("the new settings wait for engine %d's verify-cost probe before it takes traffic (at most %s, %s left), then apply", p.engine, beforeBound, left.Round(100*time.Millisecond))
}

// takePre is the probe made before traffic, once (nil when none).
func (sh *controlShell) takePre(now time.Time) *control.Observation {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.pre) == 0 {
		return nil
	}
	o := &control.Observation{Kind: control.Probed, Now: now, Verify: sh.pre, Before: true}
	sh.pre = nil
	return o
}

// Run steps the controller until ctx ends (nil) or the engine cannot be
// adapted (an error wrapping adapt.ErrNotAdapting).
func (sh *controlShell) Run(ctx context.Context) error {
	if d := sh.startedIn(); d > 0 && sh.initial.SwitchS <= 0 {
		cfg := sh.c.Config()
		cfg.SwitchS = d.Seconds() // a switch starts one engine beside the serving one
		sh.c = control.New(cfg)
	}
	s := sh.c.Init(sh.initial)
	obs := make(chan control.Observation, 8)
	tick := time.NewTicker(sh.every)
	defer tick.Stop()
	sample := time.NewTicker(follow.Tick)
	defer sample.Stop()
	var lastSave time.Time
	for {
		var o control.Observation
		select {
		case <-ctx.Done():
			sh.save(s, time.Now(), true)
			return nil
		case o = <-obs:
		case now := <-sample.C:
			o = sh.sample(now)
		case now := <-tick.C:
			if pre := sh.takePre(now); pre != nil {
				s, _ = sh.c.Step(s, *pre)
			}
			var err error
			if o, err = sh.scrape(ctx, now); err != nil {
				if errors.Is(err, adapt.ErrNotAdapting) {
					return err
				}
				sh.log.Debug("adapt: scrape failed", "err", err)
				continue
			}
		}
		var acts []control.Action
		s, acts = sh.step(s, o)
		sh.hasCurve.Store(len(s.Pair.Verify) > 0)
		for _, a := range acts {
			switch a.Op {
			case control.SwitchTo:
				go sh.switchTo(ctx, a, obs)
			case control.Probe:
				go sh.probe(ctx, a, obs)
			case control.Log:
				sh.log.Info(a.Msg)
			case control.Warn:
				sh.log.Warn(a.Msg)
			case control.Save:
				if o.Now.Sub(lastSave) >= saveEvery {
					sh.save(s, o.Now, false)
					lastSave = o.Now
				}
			}
		}
		sh.publish(statusShown(s, o.Now, sh.resumed))
	}
}

// statusShown is the controller's status as /speclaunch/status shows it: with
// the state resumed, and the follower's word where the controller's is
// empty (followWord).
func statusShown(s control.State, now time.Time, resumed string) control.Status {
	st := s.Status(now)
	st.Resumed = resumed
	st.Follow = followWord(st)
	return st
}

// followWord is the follower's last word: the controller's (why it
// switches, or what it waits for), else, once the follower has read a
// full window (Bucket), that the load sits at the running width, which
// internal/follow's decision leaves unsaid (an empty Reason): the status
// showed no follow in 25 polls under steady load, after switches and in a
// trial, where docs/adaptive.md promises it (an operator's pass on the
// sim). Before the first full window there is no word.
func followWord(st control.Status) string {
	if st.Follow != "" || st.Bucket == "" {
		return st.Follow
	}
	return fmt.Sprintf("the load sits at %s (mean %.1f), where width %d runs: no switch", schedule.InFlightAt(st.Bucket, st.Load), st.Load, st.Width)
}

func (sh *controlShell) startedIn() time.Duration {
	if sh.started == nil {
		return 0
	}
	return sh.started()
}

// sample is the server's load (Runtime.Load), whether a switch can
// start, and the serving width, for the follower.
func (sh *controlShell) sample(now time.Time) control.Observation {
	o := control.Observation{Kind: control.Sample, Now: now, InFlight: float64(sh.rt.Load()), Busy: sh.rt.Busy()}
	if in := sh.eng.Current(); in != nil {
		o.Width, sh.serving = widthOf(in.Plan), in.Plan
	}
	return o
}

// step takes one observation through the controller; a sample first
// gives it the safe answer in force (followDefault).
func (sh *controlShell) step(s control.State, o control.Observation) (control.State, []control.Action) {
	if o.Kind == control.Sample {
		s = sh.followDefault(s, sh.serving)
	}
	return sh.c.Step(s, o)
}

// followDefault gives the controller the safe answer a reload resolved
// (a policy edit, another GPU capability), said once, and returns s fitted
// to it (control.Redefault: what the controller decided stays; where it
// had decided nothing the new default serves, which the reload's switch
// started, so one edit is one switch). The safe answer is the schedule
// the width precedence gave the plan in force once the serving engine
// runs it, else the serving engine's own (a switch routed to it, not yet
// taken in). Run's goroutine only.
func (sh *controlShell) followDefault(s control.State, serving *plan.Plan) control.State {
	if serving == nil {
		return s
	}
	var f *plan.Plan
	if sh.inForce != nil {
		f = sh.inForce()
	}
	if sh.judged == [2]*plan.Plan{serving, f} {
		return s
	}
	sh.judged = [2]*plan.Plan{serving, f}
	p := serving
	if f != nil && plan.SameEngine(f, serving) {
		p = f
	}
	d, was := defaultOf(p), sh.c.Config().Default
	if len(d) == 0 || d.String() == was.String() {
		return s
	}
	c, s := sh.c.Redefault(s, d)
	sh.mu.Lock()
	sh.c = c
	sh.mu.Unlock()
	sh.log.Info(fmt.Sprintf("adapt: the settings now resolve %s, the safe answer from now on (was %s); what the controller decided stays: schedule %s", d.Describe(), was.Describe(), s.Pair.Schedule.String()))
	return s
}

// servedSecs are a scrape's seconds served and the engine's own within
// them (the wait before decoding is the difference, which the controller
// prices): the proxy's and llama-server's tokens_predicted_seconds; where
// the proxy counted none (requests sent around it), the engine's own, and
// no wait known.
func servedSecs(proxy, engine float64) (secs, busy float64) {
	if proxy <= 0 {
		return engine, 0
	}
	return proxy, engine
}

// scrape reads the serving engine's counters and its load
// (Runtime.Generating).
func (sh *controlShell) scrape(ctx context.Context, now time.Time) (control.Observation, error) {
	in := sh.eng.Current()
	if in == nil || in.Backend == nil {
		return control.Observation{}, errors.New("no engine serves")
	}
	ctx, cancel := context.WithTimeout(ctx, scrapeBound)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.Backend.URL.String()+"/metrics", nil)
	if err != nil {
		return control.Observation{}, err
	}
	resp, err := sh.client.Do(req)
	if err != nil {
		return control.Observation{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return control.Observation{}, fmt.Errorf("/metrics: %s", resp.Status)
	}
	snap, err := adapt.ParseMetrics(resp.Body)
	if err != nil {
		return control.Observation{}, err
	}
	w := widthOf(in.Plan)
	if w >= 2 && snap.Cycles > 0 && !snap.HasPerPos {
		return control.Observation{}, fmt.Errorf("%w: the engine reports no acceptance by draft position; only the width it was given is served", adapt.ErrNotAdapting)
	}
	slots := sh.engineSlotsOf(uint64(in.ID))
	served, _ := in.Backend.Served(slots) // a request queued beyond the slots counts its share
	secs, busy := servedSecs(served, snap.PredictSeconds)
	probed := sh.probed.Swap(false) || sh.probing.Load() > 0
	return control.Observation{Kind: control.Scrape, Now: now, Engine: uint64(in.ID), Width: w, Probing: probed, Slots: slots,
		InFlight: float64(sh.rt.Generating()), Counters: control.Counters{Cycles: snap.Cycles, AtLeast: snap.PerPos, Tokens: snap.Predicted, Secs: secs, Busy: busy}}, nil
}

// switchTo asks the runtime for the switch and answers the loop.
func (sh *controlShell) switchTo(ctx context.Context, a control.Action, obs chan<- control.Observation) {
	sh.log.Info(fmt.Sprintf("adapt: switch to width %d at %s: %s", a.Width, schedule.InFlight(a.Bucket), a.Reason)) // its reason gives the load
	if sh.chose != nil {
		sh.chose(a.Width, a.Bucket, a.Load)
	}
	sh.switches.Add(1)
	took, err := sh.rt.SwitchWidth(ctx, a.Width, a.Reason)
	o := control.Observation{Kind: control.Switched, Now: time.Now(), Took: took}
	if err != nil {
		o.Err = err.Error()
	}
	select {
	case obs <- o:
	case <-ctx.Done():
	}
}

// probe probes the serving engine's verify cost under load, bounded by
// probeBound, and answers the loop; the loop and any switch go on
// meanwhile, and a switch ends it (endWhenReplaced).
func (sh *controlShell) probe(ctx context.Context, a control.Action, obs chan<- control.Observation) {
	in := sh.eng.Current()
	o := control.Observation{Kind: control.Probed}
	if in == nil || in.Backend == nil {
		o.Err = "no engine serves"
	} else {
		sh.log.Info(fmt.Sprintf("adapt: probing %s (at most %s; serving, switches and reloads go on meanwhile)", a.Reason, probeBound))
		pctx, cancel := context.WithTimeout(ctx, probeBound)
		sh.probing.Add(1)
		sh.probed.Store(true)
		before := sh.switches.Load()
		replaced := sh.endWhenReplaced(pctx, in, cancel)
		c, err := probe.Run(pctx, sh.client, in.Backend.URL.String(), a.Rows, probe.DefaultReps)
		sh.probed.Store(true) // the scrape after its end still spans it
		sh.probing.Add(-1)
		timedOut := errors.Is(pctx.Err(), context.DeadlineExceeded)
		cancel()
		if err != nil { // the controller logs it, once
			o.Cut = sh.switches.Load() != before || replaced.Load()
			o.Err = probeStopped(err, probeBound, o.Cut, timedOut, ctx.Err() != nil)
		}
		o.Verify = c.VerifyMS
		if c.Bare {
			sh.log.Info("adapt: live traffic kept taking the probe's slot, so it measured its rows without a cached prefix, on any free slot and batched with that traffic (a price of this load)")
		}
	}
	o.Now = time.Now()
	select {
	case obs <- o:
	case <-ctx.Done():
	}
}

// probeWatch is how often a probe under load checks that its engine still
// serves. A switch leaves the old engine draining, and on an H100 one kept
// answering the probe for 5 s beside the new engine, in the first seconds
// of a trial, and took 16 s to exit (docs/benchmark_results/
// h100-follow-2026-12-05b.md); the load is sampled as often.
const probeWatch = 250 * time.Millisecond

// endWhenReplaced cancels a probe of engine in once another engine serves
// (a switch of the controller's, or a reload's), and says whether it did.
// It stops with ctx.
func (sh *controlShell) endWhenReplaced(ctx context.Context, in *server.Instance, cancel context.CancelFunc) *atomic.Bool {
	replaced := new(atomic.Bool)
	go func() {
		t := time.NewTicker(probeWatch)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if sh.eng.Current() != in {
					replaced.Store(true)
					cancel()
					return
				}
			}
		}
	}()
	return replaced
}

// probeStopped says why a probe ended before its end, for the
// controller's one log line: a switch began meanwhile (the probe is
// cancelled once another engine serves, endWhenReplaced, so the error is
// mostly "context canceled"; where its engine stopped under it first,
// whatever the cut connection gave, such as EOF), the bound ran out,
// serve is stopping, or the probe failed on its own.
func probeStopped(err error, bound time.Duration, switched, timedOut, stopping bool) string {
	switch {
	case switched:
		return fmt.Sprintf("cut by a switch of the serving engine (%v)", err)
	case timedOut:
		return fmt.Sprintf("timed out: it did not finish within %s", bound)
	case stopping:
		return "serve is stopping"
	default:
		return fmt.Sprintf("failed: %v", err)
	}
}

// load reads the saved pair (Pair{} when none or unusable, said once).
func (sh *controlShell) load() control.Pair {
	if sh.file == "" {
		return control.Pair{}
	}
	sh.noteOldState()
	p, found, learnt := sh.read(sh.file)
	if !found || !learnt {
		// None under this key, or one that holds nothing learnt (a run
		// that measured nothing still saves): one saved for the same
		// curve under another name is read.
		if other := sh.otherKey(); other != "" {
			p, _, _ = sh.read(other)
		}
	}
	return p
}

// read resumes the state in file: found says the file was there (an
// error or a refusal is said), learnt that it held something to resume.
func (sh *controlShell) read(file string) (p control.Pair, found, learnt bool) {
	if isDir(file) {
		sh.dirSaid = true
		sh.log.Warn("adapt: "+dirAtState+"; learning again", "file", file)
		return control.Pair{}, true, true
	}
	sp, err := readSaved(file)
	if errors.Is(err, os.ErrNotExist) {
		return control.Pair{}, false, false
	}
	if err != nil {
		sh.log.Warn("adapt: the saved state is not read; learning again", "file", file, "err", err)
		return control.Pair{}, true, true
	}
	// What it holds first: one that holds nothing learnt ("pair": null)
	// is nothing to resume, whatever its key says ("key": null read as
	// written for another engine or GPU).
	take, why := control.Resume(sp.Saved, sp.Pair, time.Now())
	if why != "" {
		sh.log.Warn("adapt: the saved state is not read ("+why+"); learning again", "file", file)
		return control.Pair{}, true, true
	}
	if !take {
		return control.Pair{}, true, false // nothing learnt to resume
	}
	if sp.Key.GPU != sh.key.GPU || sp.Key.Engine != sh.key.Engine || sp.Key.Capability != sh.key.Capability {
		sh.log.Warn("adapt: the saved state was written for another engine or GPU; learning again", "file", file)
		return control.Pair{}, true, true
	}
	sh.resumed = sp.Saved.Format(time.RFC3339)
	p, note := sh.c.Fit(sp.Pair) // saved under other load buckets: mapped, the rest learnt again
	if note != "" {
		sh.log.Info(note, "file", file)
	}
	if sp.Counted != shareCounted {
		var n int
		if p, n = sh.c.DropQueued(p, sh.key.Slots); n > 0 {
			sh.log.Info(fmt.Sprintf("adapt: what was measured at loads above the engine's slots (%d) is learnt again: that state counted every second its requests waited in the engine's queue", sh.key.Slots), "file", file)
		}
	}
	sh.log.Info("adapt: resuming what an earlier run learnt", "file", file, "saved", sh.resumed, "schedule", p.Schedule.String())
	return p, true, true
}

// otherStatesRead bounds the saved states read, the newest first, where
// none is saved under this run's key.
const otherStatesRead = 64

// otherKey looks, where no state is saved under this run's key, for one
// saved for the same model paths: one of the same curve saved under an
// earlier keying (the path and time were part of the key) is returned to
// be read; one whose engine, GPU, slots or model content changed is said,
// which without a word started from nothing after a new engine build or
// re-quantized weights.
func (sh *controlShell) otherKey() string {
	dir := filepath.Dir(sh.file)
	states, all := savedStates(dir)
	var said, from string
	for _, st := range states {
		sp, err := readSaved(st)
		if err != nil || !sh.key.SamePaths(sp.Key) {
			continue
		}
		changed := sh.key.Changed(sp.Key)
		if len(changed) == 0 && st != sh.file { // the same curve under another name (this run's own file is no fallback)
			return st
		}
		if len(changed) > 0 && said == "" { // the newest such, said if no same-curve state comes
			said, from = strings.Join(changed, ", "), st
		}
	}
	switch {
	case said != "":
		sh.log.Info("adapt: a state saved for these model files is not resumed: "+said+" changed since; learning again", "file", from)
	case all > otherStatesRead:
		sh.log.Info(fmt.Sprintf("adapt: no state saved for these model files among the newest %d of %d in the cache; the older ones are not read (delete the states of pairs this host no longer serves to bring them in reach); learning again", otherStatesRead, all), "dir", dir)
	}
	return ""
}

// savedStates are the controller's state files in dir, the newest first,
// otherStatesRead at most, and how many there are.
func savedStates(dir string) ([]string, int) {
	entries, _ := os.ReadDir(dir)
	type state struct {
		name string
		mod  time.Time
	}
	var states []state
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, "adapt-control-") && strings.HasSuffix(n, ".json") {
			if fi, err := e.Info(); err == nil {
				states = append(states, state{filepath.Join(dir, n), fi.ModTime()})
			}
		}
	}
	slices.SortFunc(states, func(a, b state) int { return b.mod.Compare(a.mod) })
	var names []string
	for _, st := range states[:min(len(states), otherStatesRead)] {
		names = append(names, st.name)
	}
	return names, len(states)
}

// readSaved reads one state file, bounded as the load reads it.
func readSaved(file string) (savedPair, error) {
	var sp savedPair
	f, err := safefile.Open(context.Background(), "adaptive state", file, 1<<20)
	if err != nil {
		return sp, err
	}
	defer f.Close()
	err = json.NewDecoder(f).Decode(&sp)
	return sp, err
}

// resumedWidth is the width a start on key's pair resumes at: the width
// learnt for one request in flight, the load a start meets, in the newest
// state saved in dir for these model files on this engine and GPU,
// whatever its slots (the key has none before an engine says them), with
// the reason the start line gives; 0 where none was learnt. A restart
// started at the default and switched to the learnt width a window later,
// with no traffic: on a GPU, a model loaded twice (a user pass on the sim).
// The state the controller then reads is the one of the engine's slots; if
// it holds another width, the follower takes it.
func resumedWidth(dir string, key adapt.CacheKey, now time.Time) (int, string) {
	key.Slots = 0
	states, _ := savedStates(dir)
	for _, st := range states {
		sp, err := readSaved(st)
		if err != nil {
			continue
		}
		sp.Key.Slots = 0 // by content, as the key is: the same weights moved are the same pair
		if len(key.Changed(sp.Key)) > 0 {
			continue
		}
		if take, _ := control.Resume(sp.Saved, sp.Pair, now); !take {
			return 0, ""
		}
		if w := sp.Pair.LearntAt(1); w > 0 {
			return w, fmt.Sprintf("resumed: learnt for 1 request in flight by an earlier run (saved %s)", sp.Saved.Format(time.RFC3339))
		}
		return 0, ""
	}
	return 0, ""
}

// noteOldState says, once, that the loop before this controller left a
// state file this one does not read.
func (sh *controlShell) noteOldState() {
	old, _ := filepath.Glob(filepath.Join(filepath.Dir(sh.file), "adapt-learnt-*.json"))
	if len(old) > 0 {
		sh.log.Info("adapt: the earlier adaptive loop's state files are not read by this controller (it keeps its own); they may be deleted", "files", old)
	}
}

// dirAtState says a directory sits at the state file's path: safefile's
// words ("give the path of the adaptive state itself") ask for a path the
// operator never gives, and the save's rename failed on it at every save.
const dirAtState = "a directory sits where speclaunch keeps its adaptive state file, so the state is neither read nor saved; remove that directory (the file is speclaunch's own)"

// isDir says a directory (not a link to one) is at path.
func isDir(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.IsDir()
}

// save writes the pair's knowledge (a failure is logged and the loop goes
// on); last: the save as the loop stops, whose first line says no "again".
func (sh *controlShell) save(s control.State, now time.Time, last bool) {
	if sh.file == "" || sh.key.Slots > 0 && s.Engine.Slots > 0 && s.Engine.Slots != sh.key.Slots {
		return // learnt under other slots than the key's (reslot)
	}
	if isDir(sh.file) {
		if !sh.dirSaid { // read said it at start; a directory made since is said once
			sh.dirSaid = true
			sh.log.Warn("adapt: "+dirAtState, "file", sh.file)
		}
		return
	}
	b, err := json.Marshal(savedPair{Key: sh.key, Saved: now, Pair: s.Pair, Counted: shareCounted})
	if err == nil {
		err = os.MkdirAll(filepath.Dir(sh.file), 0o755)
	}
	var link string
	if err == nil {
		// The cache is speclaunch's own: a symlink there is replaced, never
		// written through to whatever file it names.
		link, err = safefile.WriteOwn(sh.file, b, 0o600)
	}
	if link != "" {
		sh.log.Warn("adapt: the state file was a symbolic link; it is replaced by the file itself, and the file it pointed to is left as it was", "file", sh.file, "target", link)
	}
	switch {
	case err != nil:
		sh.log.Warn("adapt: the learnt state was not saved", "file", sh.file, "err", err)
	case !sh.saved && last:
		sh.saved = true
		sh.log.Info("adapt: what was learnt is saved; the next start on this model pair resumes it", "file", sh.file)
	case !sh.saved:
		sh.saved = true
		sh.log.Info("adapt: what was learnt is saved (and again as it learns)", "file", sh.file)
	}
}

// controlConfig turns the settings into the controller's: the safe answer
// is the plan's own schedule (the policy's or the engine's width).
func controlConfig(p *plan.Plan) control.Config {
	s := p.Settings
	c := control.Config{Default: defaultOf(p), MaxWidth: s.AdaptMaxWidth.Value, MinCycles: float64(s.AdaptMinCycles.Value), Hold: s.AdaptWindow.Value}
	if s.AdaptTrials.Value == 0 {
		c.Off = map[string]bool{"trials": true} // adapt.trials = 0: no width is tried unmeasured
	}
	switch s.Engine.Value {
	case key.LlamaCpp:
		c.ClassicLive, c.ClassicLoad = control.LlamaClassicLive, control.LlamaClassicLoad
	case key.Sim:
		// The sim's fresh engines differ by its cost model's spread (none
		// for the default gb10 model), not by the H200's.
		if sp, ok := sim.CostSpread(s.EngineArgs.Value); ok { // else the H200's, the cautious answer
			c = c.WithSpread(sp.Single, sp.MultiSpec)
		}
	}
	return c
}

// defaultOf is p's safe answer: the schedule the width precedence
// resolved (an adaptive width does not replace it), a flat one for a
// single width.
func defaultOf(p *plan.Plan) schedule.Schedule {
	if len(p.Resolved) > 0 {
		return p.Resolved
	}
	if len(p.Resolution.Schedule) > 0 {
		return p.Resolution.Schedule
	}
	if p.Resolution.Width < 1 {
		return nil // no width resolved (no draft model): the controller's own default
	}
	return schedule.Flat(p.Resolution.Width, string(p.Resolution.Source))
}

// controlFile is where the shell keeps the pair's knowledge: beside the
// old loop's files, named by the hash of the key.
func controlFile(dir string, k adapt.CacheKey) string {
	return filepath.Join(dir, "adapt-control-"+k.ID()+".json")
}
