package serve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/speclaunch/speclaunch/internal/adapt"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/control"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/modelhash"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/proxy"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/waitlog"
)

// AdaptOff says why serve does not adapt for a plan, "" when it may.
func AdaptOff(p *plan.Plan, proxied bool) string {
	if why := adaptCannot(p, proxied); why != "" {
		return why
	}
	if p.Resolution.IsOperator() {
		return operatorWins(p.Settings)
	}
	return ""
}

// adaptCannot says why serve cannot adapt for a plan whatever the width:
// with one of these, an operator width removed leaves the loop off for
// this reason, not for the width.
func adaptCannot(p *plan.Plan, proxied bool) string {
	switch {
	case !p.Settings.Adapt.Value:
		return "not asked for (--adapt, adapt.enabled, MLXCEL_ADAPT)"
	case !plan.HasDrafter(p.Settings):
		return "no draft model: speculation is off"
	case !proxied:
		return "the proxy is off (--no-proxy): a switch would fail requests"
	case p.Settings.Engine.Value == key.MLXCEL:
		return "mlxcel-server exposes no per-position acceptance counters and no verify-cost probe"
	case p.Settings.Engine.Value != key.LlamaCpp && p.Settings.Engine.Value != key.Sim:
		return string(p.Settings.Engine.Value) + ": the loop reads llama-server's per-position counters and probes its /completion timings, which this engine does not expose (docs/engines.md)"
	}
	return ""
}

// operatorWins says which operator setting overrides the policy
// (Resolution.IsOperator), with its source, the schedule or the width,
// and that it wins over the adaptive width: every message that turns the
// loop off for it says it so. A schedule was named as a width "(default)".
func operatorWins(s config.Settings) string {
	if s.Schedule.Value != nil {
		return "an operator schedule is set (" + s.Schedule.Src.String() + "); it always wins"
	}
	return "an operator width is set (" + s.Width.Src.String() + "); it always wins"
}

// adaptCache is where the controller's state is kept: its key (without
// the engine's slots) and directory ("" when it is not kept).
type adaptCache struct {
	key adapt.CacheKey
	dir string
}

// newAdaptCache is p's adaptCache, made once a start (the models are
// hashed for the key).
func (sv *launcher) newAdaptCache(p *plan.Plan) *adaptCache {
	key, dir := sv.adaptCache(p)
	return &adaptCache{key, dir}
}

// resumeStart is the first engine's plan at the width an earlier run
// learnt for one request in flight (resumedWidth), nil where none was
// learnt, p runs it already, or no plan at it can be built (said).
func (sv *launcher) resumeStart(p *plan.Plan, c *adaptCache) *plan.Plan {
	if c.dir == "" {
		return nil
	}
	w, why := resumedWidth(c.dir, c.key, time.Now())
	if w == 0 || w == widthOf(p) || w > p.Settings.AdaptMaxWidth.Value {
		return nil // above adapt.max_width: lowered since it was learnt
	}
	np, l, err := sv.adaptedPlan(p, w, why)
	if err != nil {
		sv.log.Info(fmt.Sprintf("adapt: the first engine starts at width %d, not at the width %d an earlier run learnt", widthOf(p), w), "err", err)
		return nil
	}
	sv.force.take(np, l)
	sv.ctl.adaptedTo(w) // a reload keeps it, as an adaptive switch's
	return np
}

// newAdapt makes the adaptive width controller when it is asked for (nil
// when not); it runs once the first engine serves. c is p's cache (nil
// when adapt was off at the start's check).
func (sv *launcher) newAdapt(p *plan.Plan, c *adaptCache) Controller {
	if why := AdaptOff(p, sv.px != nil); why != "" {
		if p.Settings.Adapt.Value {
			if adaptCannot(p, sv.px != nil) == "" {
				sv.ctl.overrule() // the operator's: a reload that removes it starts no loop
				why += staysOff   // said as when a reload's operator width ends the loop
			}
			sv.log.Info("adaptive width off: " + why)
			sv.showAdapt(adapt.Status{State: adapt.StateNotAdapting, Note: why, Width: widthOf(p), Updated: time.Now()}, adapt.StateNotAdapting)
		}
		return nil
	}
	if s := p.Settings; s.AdaptExplore.Value != 0 || s.AdaptMargin.Src.Origin != config.Default {
		sv.log.Info("adaptive width: adapt.explore_width and adapt.margin are read but no longer used: the controller tries the widths its model predicts, and moves when the measured gain passes the noise between engines and repays the switch (docs/adaptive.md)")
	}
	if c == nil {
		c = sv.newAdaptCache(p)
	}
	key, dir := c.key, c.dir
	sh := &controlShell{c: control.New(controlConfig(p)), rt: sv, eng: sv.rt, key: key,
		client: secret.Client(sv.probeClient(60*time.Second), sv.engineKey), log: sv.log.With("component", "adapt"),
		publish: func(s control.Status) {
			sv.showAdapt(s, s.State)
			if s.PredictionError != nil {
				sv.met.PredictionError(*s.PredictionError)
			}
		}, every: controlEvery,
		started: func() time.Duration {
			_, d := sv.ctl.forFollower()
			return d
		},
		chose: sv.st.chosenAdapt, inForce: sv.plan}
	sh.dir = dir // the state is read at the first engine, once its slots are known (keyed)
	sh.first = control.Status{State: "watching", Width: p.Resolution.Width, Note: "starting with the first engine"}
	sv.showAdapt(withTime(sh.first, sh.resumed), "watching")
	return sh
}

// showAdapt shows the adaptive loop's status on the status page and its
// state in speclaunch_adapt_state, always both: the page said "not
// adapting" while the metric still said off, or watching.
func (sv *launcher) showAdapt(s any, state string) {
	sv.st.setAdapt(s)
	sv.met.Adapt(state)
}

// adaptCache is the key the controller's saved state is kept under and
// its directory ("" when it is not kept, said in the log).
func (sv *launcher) adaptCache(p *plan.Plan) (adapt.CacheKey, string) {
	key := adapt.CacheKey{Engine: engineIdentity(p), Capability: p.Facts.CapabilityStr}
	if len(p.Facts.GPUs) > 0 {
		key.GPU = p.Facts.GPUs[0].Name
	}
	var unstated error
	// The plan hashed the pair already when the policy holds tuned
	// entries; a multi-GB model is not read twice at a start.
	known := []string{p.Facts.Pair.Target, p.Facts.Pair.Draft}
	for i, m := range []string{p.Settings.Model.Value, p.Settings.DraftModel.Value} {
		if i == 1 && p.Facts.Embedded {
			continue // the target's own layers: the target names them
		}
		mf, err := adapt.StatModel(m)
		switch {
		case err == nil && known[i] != "":
			mf.SHA256 = known[i]
		case err == nil:
			mf.SHA256, err = modelhash.Sum(mf.Path)
		}
		if err != nil {
			unstated = err
			continue
		}
		key.Models = append(key.Models, mf)
	}
	dir, err := adapt.CacheDir()
	switch {
	case err != nil:
		sv.log.Warn("adaptive width: what is learnt will not be saved", "err", err)
		dir = ""
	case unstated != nil:
		// A model named by a repo id or a directory the engine resolves:
		// no size and time to tell a replaced model by.
		sv.log.Info("adaptive width: what is learnt will not be saved: a model is not a file here", "err", unstated)
		dir = ""
	case key.Engine == "":
		// State keyed by no version would outlive an engine upgrade.
		sv.log.Info("adaptive width: what is learnt will not be saved: the engine's version is unknown")
		dir = ""
	}
	return key, dir
}

// SwitchWidth switches to the plan in force rebuilt at width w (1 =
// speculation off) for reason, and returns once the switch has ended: nil
// when an engine at w serves; adapt.ErrSwitchDropped (wrapping
// server.ErrSuperseded or server.ErrStopping) when a later switch replaced
// it or serve stops; adapt.ErrNotAdapting when an operator width is set
// (it always wins); ctx's error when ctx ends first (the switch goes on).
// took is the switch's own time as the runtime recorded it (not the wait
// for the reply, which a queued switch lengthens), 0 when none ran.
// Safe from any goroutine but the runtime's.
func (sv *launcher) SwitchWidth(ctx context.Context, w int, reason string) (took time.Duration, err error) {
	cur := sv.plan()
	np, l, err := sv.adaptedPlan(cur, w, reason)
	if err != nil {
		return 0, err
	}
	before := sv.st.switchCount()
	reply := make(chan error, 1)
	sv.submit(server.KindAdapt, reason, cur, np, l, reply)
	select {
	case err := <-reply:
		took, _ = sv.st.lastSwitch(server.KindAdapt.String(), before)
		return took, switchErr(err)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Generating is the clients' generation requests on the serving engine
// now (proxy.Backend.Generating: neither the launcher's own requests nor
// reads of the engine's state); 0 while none serves, and in direct mode
// (no proxy counts them).
func (sv *launcher) Generating() int {
	if b := sv.servingBackend(); b != nil {
		return b.Generating()
	}
	return 0
}

// servingBackend is the serving engine's backend; nil while none serves.
func (sv *launcher) servingBackend() *proxy.Backend {
	if sv.rt == nil {
		return nil
	}
	if in := sv.rt.Current(); in != nil {
		return in.Backend
	}
	return nil
}

// switchErr is a switch job's answer as the loop reads it: a job a later
// one replaced, or one asked for while serve stops, was not tried.
func switchErr(err error) error {
	if errors.Is(err, server.ErrSuperseded) || errors.Is(err, server.ErrStopping) {
		return fmt.Errorf("%w: %w", adapt.ErrSwitchDropped, err)
	}
	return err
}

// engines is what the adaptive loop reads of the runtime.
type engines interface {
	Current() *server.Instance
	Beside() int
}

// currentTarget is the serving engine as the loop sees it, Shared while
// another engine runs beside it (the one it replaced, draining).
func currentTarget(rt engines) adapt.Target {
	t := targetOf(rt.Current())
	t.Shared = rt.Beside() > 0
	return t
}

// targetOf is an engine as the adaptive loop sees it.
func targetOf(in *server.Instance) adapt.Target {
	if in == nil || in.Backend == nil {
		return adapt.Target{}
	}
	return adapt.Target{BaseURL: in.Backend.URL.String(), Width: widthOf(in.Plan), Gen: uint64(in.ID), Pair: modelPair(in.Plan),
		Served: func(slots int) adapt.Served {
			secs, n := in.Backend.Served(slots)
			return adapt.Served{Secs: secs, Ended: n}
		}}
}

// beforeTraffic probes a new engine for the adaptive loop before the
// proxy routes to it: it is idle then, so a busy server needs no idle
// moment. With nothing serving (the first start, a restart, a drain
// switch) requests are held meanwhile; in an overlap switch the old
// engine serves meanwhile. Either way the probe is bounded to beforeBound
// (what it lacks is probed later), the bound the wait's line says: it said
// 2m0s while the probe stopped at 10s.
func (sv *launcher) beforeTraffic(ctx context.Context, in *server.Instance) error {
	loop := sv.ctl.adaptive()
	if loop == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, beforeBound)
	defer cancel()
	defer waitlog.Start(sv.log, nil, waitlog.For(fmt.Sprintf("engine %d's verify-cost probe before it takes traffic", in.ID), beforeBound, ", then it serves all the same"))()
	return loop.BeforeTraffic(ctx, targetOf(in), sv.rt.Current() == nil)
}

// runAdapt runs the loop until the returned func stops it (and waits).
func (sv *launcher) runAdapt(p *plan.Plan) func() {
	loop := sv.ctl.adaptive()
	if loop == nil {
		return nil
	}
	sv.log.Info("adaptive width on: the width is learned from live traffic; experimental, not yet shown ahead of the default on hardware (docs/adaptive.md, \"Is it the default?\")", "starts_at", p.Resolution.Width)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := loop.Run(ctx)
		switch {
		case err == nil, ctx.Err() != nil: // stopped with serve
		case errors.Is(err, adapt.ErrNotAdapting):
			sv.log.Warn("adaptive width off: " + err.Error())
		default:
			sv.log.Error("adaptive width stopped", "err", err)
		}
	}()
	sv.ctl.ranAdapt(done)
	return func() { cancel(); <-done }
}

// engineIdentity names the engine build a probed curve belongs to, e.g.
// "llama.cpp 9749 (d32676d)"; "" when its version is unknown. The sim's
// cost model is the binary's own, so it needs none.
func engineIdentity(p *plan.Plan) string {
	name, c := string(p.Settings.Engine.Value), p.Facts.Caps
	switch {
	case c.Version != "" && c.Commit != "":
		return name + " " + c.Version + " (" + c.Commit + ")"
	case c.Version != "" || c.Commit != "":
		return name + " " + c.Version + c.Commit
	case p.Settings.Engine.Value == key.Sim:
		return name
	}
	return ""
}

// engineKey is the API key of the plan in force ("" for none):
// the adaptive loop's probe and scrapes carry it.
func (sv *launcher) engineKey() string {
	if p := sv.plan(); p != nil {
		return p.APIKey()
	}
	return ""
}

// modelPair names the target and draft models an engine serves, so that
// the loop keeps what it learnt across engines of one pair and starts over
// when a reload changes either.
func modelPair(p *plan.Plan) string {
	return p.Settings.Model.Value + "\x00" + p.Settings.DraftModel.Value
}
