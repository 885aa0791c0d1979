package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/loadgen"
	"github.com/speclaunch/speclaunch/internal/record"
)

// A load sweep (`bench --concurrency 1,2,4,8`, `speclaunch tune`) measures
// every arm at every load level under a server's traffic: N closed-loop
// clients rotating through a prompt set, started out of step, each
// sending its next request when its last one ends. N identical requests
// sent in step are the best case for a speculative width, not a server's
// traffic: at 4 clients on an H200 llama-server ran speculative widths
// about 1.6x slower under out-of-step clients than in step
// (docs/adaptive.md). Every arm runs on Engines fresh engines, visited in
// a rotating order, so the spread between engines is measured; a level's
// run is one window of the aggregate streamed tokens/s on one engine, and
// its Round is that engine's number, so the bootstrap resamples engines.

// Defaults of a load sweep. Three fresh engines per width: on the H200 two
// fresh engines at one width differed by up to 17 %
// (docs/benchmark_results/adaptive/h200-2026-12-03.md), so one engine per
// width measures the engine; three give the bootstrap over engines ten
// distinct draws. On a real engine a window of 5 s holds a few hundred
// tokens even at one client; the sim's windows can be shorter (tune sets
// them).
const (
	DefaultEngines    = 3
	MinEnginesPerArm  = evidence.MinEngines
	MaxEnginesPerArm  = 20
	DefaultLoadWarm   = 3 * time.Second
	DefaultLoadWindow = 5 * time.Second
	DefaultWindows    = 3
	// MaxLoadWindow bounds --window, as the record's bounds cap rounds: a
	// 5 s window already holds a few hundred tokens at one client, so a
	// longer one adds no precision, while every window runs arms × levels
	// × engines × DefaultWindows times (252 on a default tune: 10 min
	// windows take about two days; --window 9999h never ends).
	MaxLoadWindow = 10 * time.Minute
	// MinLoadWindow: a window must hold tokens to have a rate. The sim
	// streams one every few milliseconds (its end-to-end tune runs 150 ms
	// windows); under 100 ms a window holds a handful at best, and
	// --window 1ns ran a whole tune of windows that each said "no token
	// streamed in the window".
	MinLoadWindow = 100 * time.Millisecond
	MaxLevels     = record.MaxLevels
	// MaxLevel bounds one level: every client holds a connection.
	MaxLevel = MaxConcurrency
)

// LoadOptions configure RunLoad. Zero values take the defaults.
type LoadOptions struct {
	Arms      []ArmSpec // exactly one classic arm and one default arm, plus widths
	Levels    []int     // ascending, distinct, from 1
	Engines   int       // fresh engines per arm (default DefaultEngines)
	Warm      time.Duration
	Window    time.Duration
	Windows   int
	MaxTokens int
	Prompts   []Prompt // default: the shipped code and prose sets, mixed
	PromptSet string
	// Temperature 0 is greedy.
	Temperature float64
	// Slots and SlotsFrom say how the engines were sized for the levels
	// (0: unknown), for the record: a level past the slots queues
	// (QueueNote).
	Slots          int
	SlotsFrom      string
	BasePort       int
	RequestTimeout time.Duration
	APIKey         string
	Progress       io.Writer
	JSONProgress   bool
	IsTTY          bool
}

// engineCost is the time a load sweep spends on each engine besides its
// warm-ups and windows: starting it (ready on /health, its width checked)
// and stopping it. The estimate left it out and ran low by about that
// much per engine: beyond their warm-ups and windows, six tunes on the sim
// (2 to 6 engines, 1 to 3 levels, 100 to 500 ms windows, an idle 2-core
// machine) took 1.11 s per engine, whatever the levels and windows, most
// of it the sim's own 1 s start (--sim-warmup's default,
// internal/sim/args.go); the committed sim tune took 1.50 s per engine on a
// shared machine (157.5 s for 126 s of warm-ups and windows on 21 engines,
// docs/benchmark_results/tuned-mlxcel-5cea7275-180583d4-20261205-083609.json),
// and llama-server on the H200 0.94 s (199.5 s for 192 s on 8 engines,
// docs/benchmark_results/tuned-llama.cpp-e622b8f9-86de037f-20261205-135033.json).
// An engine slower to load makes the estimate low again; the time left then
// follows the steps measured (loadProgress.left).
const engineCost = 1100 * time.Millisecond

// perEngine is how long one engine takes: its start and stop, and at each
// level a warm-up and the windows.
func (o LoadOptions) perEngine() time.Duration {
	return engineCost + time.Duration(len(o.Levels))*(o.Warm+time.Duration(o.Windows)*o.Window)
}

// Estimate is how long the sweep takes: every arm's engines one after
// another, each started, measured at every level and stopped.
func (o LoadOptions) Estimate() time.Duration {
	return time.Duration(len(o.Arms)*o.Engines) * o.perEngine()
}

// WithDefaults fills zero options and refuses a plan that cannot earn a
// schedule, before anything starts.
func (o LoadOptions) WithDefaults() (LoadOptions, error) {
	if o.Engines == 0 {
		o.Engines = DefaultEngines
	}
	if o.Warm == 0 {
		o.Warm = DefaultLoadWarm
	}
	if o.Window == 0 {
		o.Window = DefaultLoadWindow
	}
	if o.Windows == 0 {
		o.Windows = DefaultWindows
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.BasePort == 0 {
		o.BasePort = DefaultBasePort
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if len(o.Prompts) == 0 {
		for _, set := range ShippedSets {
			ps, err := ShippedSet(set)
			if err != nil {
				return o, err
			}
			o.Prompts = append(o.Prompts, ps...)
		}
		o.PromptSet = strings.Join(ShippedSets, "+")
	}
	return o, o.check()
}

func (o LoadOptions) check() error {
	switch {
	case len(o.Levels) == 0:
		return errors.New("a load sweep needs at least one level")
	case len(o.Levels) > MaxLevels:
		return fmt.Errorf("%d levels, above the %d a record may hold", len(o.Levels), MaxLevels)
	case o.Engines < MinEnginesPerArm || o.Engines > MaxEnginesPerArm:
		return fmt.Errorf("--engines %d: want %d to %d fresh engines per width (with fewer than %d the spread between engines is assumed, not measured)", o.Engines, MinEnginesPerArm, MaxEnginesPerArm, MinEnginesPerArm)
	case o.Windows < 1 || o.Warm < 0 || o.Window <= 0:
		return errors.New("a load sweep needs a window above 0, at least one window and a warm-up of 0 or more")
	}
	prev := 0
	for _, l := range o.Levels {
		if l <= prev || l > MaxLevel {
			return fmt.Errorf("levels must ascend without repeats, from 1 to %d (got %v)", MaxLevel, o.Levels)
		}
		prev = l
	}
	if err := checkArms(o.Arms); err != nil {
		return err
	}
	if !slices.ContainsFunc(o.Arms, func(a ArmSpec) bool { return a.Kind == KindDefault }) {
		return errors.New("a load sweep needs a default arm: every bucket is judged against the engine's default")
	}
	runs := len(o.Arms) * len(o.Levels) * o.Engines * o.Windows
	if runs > record.MaxRuns || len(o.Arms)*len(o.Levels) > record.MaxArms {
		return fmt.Errorf("the sweep would hold %d runs in %d arms, above what a record may hold (%d runs, %d arms); use fewer widths, levels, engines or windows", runs, len(o.Arms)*len(o.Levels), record.MaxRuns, record.MaxArms)
	}
	return nil
}

// loadRun is one sweep in progress.
type loadRun struct {
	o     LoadOptions
	start Starter
	rec   *record.Record
	p     *loadProgress
	// declined marks arms whose engine declined speculation.
	declined []bool
	failed   []bool
}

// RunLoad measures every arm at every level on o.Engines fresh engines
// and fills rec's method, levels, their buckets and the earned schedule
// (the caller fills Key, Host, Engine, Models, Launcher and Name). An arm
// that fails to start is recorded and the others go on. On ctx cancel it
// stops the engine it runs, records what it has with Complete = false and
// returns ctx.Err().
func RunLoad(ctx context.Context, o LoadOptions, start Starter, rec *record.Record) (err error) {
	if start == nil || rec == nil {
		return errors.New("bench: a load sweep needs a starter and a record")
	}
	if o, err = o.WithDefaults(); err != nil {
		return err
	}
	h := &loadRun{o: o, start: start, rec: rec, p: newLoadProgress(o), declined: make([]bool, len(o.Arms)), failed: make([]bool, len(o.Arms))}
	h.prepare()
	h.p.begin(o)
	defer func() {
		h.finish(ctx, err)
		h.p.finish(rec, causeOf(ctx, err))
	}()
	for e := 0; e < o.Engines; e++ {
		for k := range o.Arms {
			i := (k + e) % len(o.Arms) // rotate: drift spreads across the arms
			if h.failed[i] {
				h.p.skip()
				continue
			}
			if err := h.engine(ctx, i, e+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h *loadRun) prepare() {
	rec, o := h.rec, h.o
	if rec.Schema == 0 {
		rec.Schema = record.Schema
	}
	rec.Simulated = rec.Simulated || rec.Key.Engine == "sim" || rec.Engine.Name == "sim"
	if rec.Date == "" {
		rec.Date = time.Now().UTC().Format("2006-01-02")
	}
	if rec.Title == "" {
		rec.Title = DefaultTitle(rec) + fmt.Sprintf(" under load (%s clients)", joinInts(o.Levels))
	}
	rec.Complete, rec.Arms = false, nil
	rec.Levels = make([]record.Level, len(o.Levels))
	var widths []int
	for li, l := range o.Levels {
		arms := make([]record.Arm, len(o.Arms))
		for i, a := range o.Arms {
			label := a.Label
			if label == "" {
				label = a.Kind
				if a.Kind == KindWidth {
					label = fmt.Sprintf("width %d", a.Width)
				}
			}
			arms[i] = record.Arm{Label: label, Kind: a.Kind, Width: a.Width, WidthSource: a.WidthSource, Runs: []record.Run{}}
			if li == 0 && a.Kind != KindClassic && !slices.Contains(widths, a.Width) {
				widths = append(widths, a.Width)
			}
		}
		rec.Levels[li] = record.Level{Concurrency: l, Arms: arms}
	}
	slices.Sort(widths)
	names := make([]string, len(o.Prompts))
	for i, p := range o.Prompts {
		names[i] = p.Name
	}
	rec.Method = record.Method{
		Schedule: "load", Rounds: o.Engines, MaxTokens: o.MaxTokens, Widths: widths, Endpoint: "POST /v1/completions (streamed)",
		PromptSet: o.PromptSet, Sampling: "greedy", Concurrency: o.Levels[0], Slots: o.Slots, SlotsFrom: o.SlotsFrom, Bootstrap: evidence.Method(),
		Load: &record.LoadMethod{Levels: o.Levels, Engines: o.Engines, WarmS: o.Warm.Seconds(), WindowS: o.Window.Seconds(), Windows: o.Windows,
			Traffic: fmt.Sprintf("closed-loop clients, one per level step, started out of step (client k after k·warm-up/(2·level)), rotating through the prompts %s; each prompt's max_tokens fixed between %.1f and %.1f times %d, so that requests end apart",
				strings.Join(names, ", "), 1-loadLengthSpread, 1+loadLengthSpread, o.MaxTokens)},
	}
	if o.Temperature > 0 {
		rec.Method.Sampling, rec.Method.Temperature = "sampled", o.Temperature
	}
	rec.Method.Description = fmt.Sprintf("Each arm ran on %d fresh engines, visited in a rotating order. On each engine, every level in turn: after a %s warm-up under the level's load, %d windows of %s, each one run of the aggregate streamed tokens/s of all clients. A run's round is its engine: the bootstrap resamples engines, so the spread between engines enters every comparison.",
		o.Engines, o.Warm, o.Windows, o.Window)
}

// engine starts arm i's engine number e, measures every level on it and
// stops it. A failed start marks the arm failed; only ctx ending stops
// the sweep.
func (h *loadRun) engine(ctx context.Context, i, e int) error {
	spec := h.o.Arms[i]
	h.p.starting(spec, e)
	srv, err := h.start(ctx, spec, h.o.BasePort+i)
	if err == nil && srv == nil {
		err = errors.New("starter returned no server")
	}
	if err != nil {
		if ctx.Err() != nil {
			if srv != nil {
				_ = srv.Stop()
			}
			return ctx.Err()
		}
		h.failArm(i, e, srv, err)
		return nil
	}
	defer func() {
		if serr := srv.Stop(); serr != nil {
			h.rec.Notes = append(h.rec.Notes, fmt.Sprintf("stopping %s engine %d: %v", spec.Label, e, serr))
		}
	}()
	if spec.Kind != KindClassic {
		if w := srv.EngineWidth(); w > 0 {
			for li := range h.rec.Levels {
				h.rec.Levels[li].Arms[i].EngineWidth = w
			}
		}
		h.declined[i] = h.declined[i] || srv.Declined()
	}
	for li, l := range h.o.Levels {
		runs, err := h.level(ctx, srv, l, e)
		a := &h.rec.Levels[li].Arms[i]
		a.Runs = append(a.Runs, runs...)
		if err != nil {
			return err
		}
		h.p.level(spec, e, l, runs)
	}
	return nil
}

func (h *loadRun) failArm(i, e int, srv Server, err error) {
	h.failed[i] = true
	for li := range h.rec.Levels {
		a := &h.rec.Levels[li].Arms[i]
		a.Status, a.StatusReason = record.StatusFailed, fmt.Sprintf("engine %d failed to start: %v", e, err)
		if srv != nil {
			a.LastLog = srv.Tail()
		}
	}
	if srv != nil {
		_ = srv.Stop()
	}
	h.p.armFailed(h.o.Arms[i], err)
}

// loadLengthSpread varies each prompt's max_tokens from 0.5 to 1.5 times
// MaxTokens (loadgen.Lengths), as a server's requests vary: with one
// length classic's four clients looked 1.24 times faster a token than
// with lengths that varied, while width 4 ran the same (an H100,
// docs/benchmark_results/h100-outofstep-2026-12-06f.md).
const loadLengthSpread = 0.5

// level runs one level's load on srv: a warm-up, then the windows, each
// one run. Requests still in flight at the end are cut (the engine serves
// the next level or stops). Only ctx ending is an error.
func (h *loadRun) level(ctx context.Context, srv Server, clients, engine int) ([]record.Run, error) {
	o := h.o
	lctx, cancel := context.WithCancel(ctx)
	live := &loadgen.Live{}
	var failed atomic.Int64
	prompts := make([]string, len(o.Prompts))
	for i, p := range o.Prompts {
		prompts[i] = p.Text
	}
	lo := loadgen.Options{URL: srv.BaseURL(), Clients: clients, Duration: 24 * time.Hour, Stream: true, MaxTokens: o.MaxTokens, Spread: loadLengthSpread,
		Prompts: prompts, Params: map[string]any{"temperature": o.Temperature}, Model: srv.ModelID(), Timeout: o.RequestTimeout,
		Live: live, Stagger: o.Warm / time.Duration(2*clients),
		OnDone: func(s loadgen.Sample) {
			if !s.OK {
				failed.Add(1)
			}
		}}
	if o.APIKey != "" {
		lo.Header = http.Header{"Authorization": {"Bearer " + o.APIKey}}
	}
	done := make(chan struct{})
	go func() { defer close(done); _, _ = loadgen.Run(lctx, lo) }()
	defer func() { cancel(); <-done }()
	if !sleepCtx(ctx, o.Warm) {
		return nil, ctx.Err()
	}
	var runs []record.Run
	for w := 0; w < o.Windows; w++ {
		t0, tok0, f0 := time.Now(), live.Tokens.Load(), failed.Load()
		if !sleepCtx(ctx, o.Window) {
			return runs, ctx.Err()
		}
		secs := time.Since(t0).Seconds()
		tok, bad := live.Tokens.Load()-tok0, failed.Load()-f0
		r := record.Run{Round: engine, Phase: record.PhaseMeasured, WallS: secs, TokPerS: float64(tok) / secs, CompletionTokens: int(tok), Requests: clients}
		switch {
		case bad > 0:
			r.Error = fmt.Sprintf("%d requests failed in the window", bad)
		case tok == 0:
			r.Error = "no token streamed in the window"
		}
		runs = append(runs, r)
	}
	return runs, nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// finish fills every level's figures, buckets and the earned schedule
// from the runs taken (all of them, or those before an interruption).
func (h *loadRun) finish(ctx context.Context, runErr error) {
	rec := h.rec
	rec.Complete = runErr == nil
	for li := range rec.Levels {
		for i := range rec.Levels[li].Arms {
			h.armFigures(&rec.Levels[li].Arms[i], i)
		}
		lv := rec.AtLevel(li)
		ev := evidence.Of(lv)
		for j := range ev.Arms {
			a := &ev.Arms[j]
			a.Arm.BeatsClassic = a.Kind != KindClassic && ev.Classic != nil && ev.BeatsClassic(a)
		}
		// The comparisons are figures of the record; a signal already
		// received must not leave them out, so they run to completion.
		compareLevel(context.WithoutCancel(ctx), lv)
	}
	spreads, buckets, earned, err := evidence.Earn(context.WithoutCancel(ctx), rec)
	for li := range rec.Levels {
		if li < len(spreads) {
			rec.Levels[li].Spread, rec.Levels[li].Bucket = spreads[li], buckets[li]
		}
	}
	rec.Earned = earned
	rec.Verdict = record.Verdict{}
	switch {
	case err != nil:
		rec.Verdict.Why = "no schedule earned: " + err.Error()
	case earned != nil:
		rec.Verdict.Why = "the levels earn the schedule " + earned.Text + " (" + earned.Describe + ")"
		rec.Verdict.NoEntryReason = strings.Join(evidence.Of(rec).RecordFails(), "; ")
		if prop, err := ProposeSchedule(context.WithoutCancel(ctx), rec); err == nil && prop.Entry != "" {
			rec.Verdict.EarnsEntry, rec.Verdict.Entry = true, prop.Entry
		} else if err == nil && rec.Verdict.NoEntryReason == "" {
			rec.Verdict.NoEntryReason = prop.Why
		}
	}
}

// armFigures fills one level's arm: its statistics and its status.
func (h *loadRun) armFigures(a *record.Arm, i int) {
	rates := evidence.Rates(a)
	a.Stats = evidence.Describe(rates)
	switch {
	case a.Status == record.StatusFailed:
	case h.declined[i]:
		a.Status, a.StatusReason = record.StatusNotMeasurement, "the engine declined speculation: NOT A MEASUREMENT"
	case len(rates) == 0:
		a.Status, a.StatusReason = record.StatusFailed, "no window measured"
	default:
		a.Status = record.StatusOK
	}
}

// compareLevel fills each arm's speedup and bootstraps against classic and
// the default at one level (lv is the level as a one-level record).
func compareLevel(ctx context.Context, lv *record.Record) {
	classic, def := lv.ClassicArm(), lv.DefaultArm()
	for i := range lv.Arms {
		a := &lv.Arms[i]
		if a.Status != record.StatusOK {
			continue
		}
		if classic != nil && a != classic && classic.Status == record.StatusOK && classic.Stats.Median > 0 {
			a.SpeedupVsClassic = a.Stats.Median / classic.Stats.Median
			a.VsClassic, _ = evidence.CompareArms(ctx, a, classic, "classic")
		}
		if def != nil && a != def && def.Status == record.StatusOK {
			a.VsDefault, _ = evidence.CompareArms(ctx, a, def, evidence.DefaultLabel(def))
		}
	}
}
