package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/adapt"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/exitcode"
	"github.com/speclaunch/speclaunch/internal/instance"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/metrics"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/proxy"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/supervise"
	"github.com/speclaunch/speclaunch/internal/waitlog"
	"github.com/speclaunch/speclaunch/internal/watch"
	"github.com/speclaunch/speclaunch/internal/width"
)

// launcher is serve's face on the runtime (package server): it builds plans
// from the files, starts engines for the runtime, turns reloads and the
// adaptive loop's choices into switch jobs, and keeps the status page.
type launcher struct {
	// Set by Run and run before any goroutine starts; read-only after.
	c   Config
	log *slog.Logger
	px  *proxy.Proxy // nil in direct mode (--no-proxy)
	pub *public      // the public listener (proxy mode)
	rt  *server.Runtime
	st  *serveStatus
	met *metrics.Metrics

	// launched: an engine has started (the first one logs init_to_exec).
	// The engine starts' own: the runtime starts one engine at a time.
	launched bool

	w     watched     // the reload loop's files; its goroutine's, no lock
	force inForce     // the plan in force; one lock (state.go)
	ctl   controllers // the adaptive loop and the follower; one lock

	submitMu sync.Mutex // one submit at a time (submit)
	// keptSaid holds the reply channels of reloads the reload loop said
	// keep the engine command: adopted does not say it a second time.
	keptSaid sync.Map
	busy     busyWatch // how long switches have waited on an engine beside the serving one

	// unbuilt is the last error of the files on disk a switch's rebuild
	// said (rebuild): the same one is not said again at every switch.
	unbuiltMu sync.Mutex
	unbuilt   string
}

// switchedLoad is the load in force once a switch ended with to serving:
// its job's when the job's plan serves, nil (the load in force stays) when
// it failed and the previous plan serves again.
func switchedLoad(s server.Switched, to *server.Instance) Load {
	if !s.OK || to.Plan != s.Job.Plan {
		return nil
	}
	return origin(s.Job)
}

// origin is the load of the files a job's plan was built from (submit
// gives it to the job), nil for a job the runtime made (a restart).
func origin(j *server.Job) Load {
	l, _ := j.Origin.(Load)
	return l
}

// infoOf is the engine handle behind a runtime instance.
func infoOf(in *server.Instance) *instance.Engine {
	i, _ := in.Info.(*instance.Engine)
	return i
}

// widthOf is the width a plan runs (1 = speculation off).
func widthOf(p *plan.Plan) int {
	if p.Resolution.Source == width.Off {
		return 1
	}
	return p.Resolution.Width
}

// widthSourceOf is where the width a plan runs came from, as the status
// page's width_source and speclaunch_width's source label both say it:
// the resolution's source, off where the schedule's bucket in force is
// width 1 (width_reason says whose schedule that is). The metric said
// the schedule's source there while the status said off.
func widthSourceOf(p *plan.Plan) string { return string(p.Resolution.Source) }

// startWhat is the start line's message for a start of kind; fallback: it
// restarts the settings in force after the new ones failed (a drain
// switch), which "starting engine for the new settings" misnamed.
func startWhat(kind server.Kind, fallback bool) string {
	if fallback {
		return "restarting engine with the previous settings (the new ones failed to start)"
	}
	return map[server.Kind]string{server.KindStart: "starting engine", server.KindRestart: "restarting engine",
		server.KindReload: "starting engine for the new settings", server.KindAdapt: "starting engine for the adapted width",
		server.KindFollow: "starting engine for the schedule's bucket"}[kind]
}

func (sv *launcher) plan() *plan.Plan { return sv.force.get() }

// briefStart says whether the start of p, of kind, may leave out the facts
// of the plan in force (logPlan's brief): a width switch's (the adaptive
// loop's or the schedule's) where they are the same. Such a switch builds
// its plan from the files on disk, so an edited drafter or target can
// start with it before the watcher's reload: its facts are then said.
func briefStart(kind server.Kind, cur, p *plan.Plan) bool {
	if kind != server.KindAdapt && kind != server.KindFollow || cur == nil {
		return false
	}
	a, b := cur.Facts, p.Facts
	return cur.Settings.Engine.Value == p.Settings.Engine.Value && a.Drafter == b.Drafter && a.DrafterFrom == b.DrafterFrom &&
		a.CapabilityStr == b.CapabilityStr && a.Quant == b.Quant
}

// startInst starts p's engine for the runtime: on a loopback port of its
// own behind the proxy, or on the public address in direct mode. The
// command is the plan's, built once with the plan; behind the proxy only
// its listen address is filled in (engine.Launch.At).
func (sv *launcher) startInst(ctx context.Context, p *plan.Plan, id server.EngineID, kind server.Kind, interrupt context.Context) (*server.Instance, error) {
	ep, port := p, p.Settings.Port.Value
	if sv.px != nil {
		var err error
		if port, err = LoopbackPort(); err != nil {
			return nil, fmt.Errorf("pick a loopback port for the engine: %w", err)
		}
		if ep, err = atLoopback(p, port); err != nil {
			return nil, err
		}
	}
	// A switch's start with the plan in force is its fallback: the new
	// settings failed and the previous ones start again.
	what := startWhat(kind, kind != server.KindStart && kind != server.KindRestart && p == sv.plan())
	t0 := time.Now()
	r, err := sv.launch(ctx, ep, int(id), what, briefStart(kind, sv.plan(), p), interrupt)
	if err != nil {
		if r != nil && r.Proc != nil { // stopped: its exit code is said (server.Launcher)
			return &server.Instance{Plan: p, Proc: r.Proc}, err
		}
		return nil, err
	}
	sv.ctl.startTook(time.Since(t0))
	in := &server.Instance{Plan: p, Proc: r.Proc, BaseURL: ep.Launch.BaseURL, Port: port, Since: time.Now(), Info: r}
	if sv.px != nil {
		b, err := proxy.NewBackend(ep.Launch.BaseURL, fmt.Sprintf("pid %d", r.Proc.PID()))
		if err != nil {
			r.Stop()
			return nil, err
		}
		in.Backend = b
	}
	return in, nil
}

// limits are the runtime's settings of a plan.
func limits(p *plan.Plan) server.Limits {
	s := p.Settings
	return server.Limits{Restart: s.Restart.Value == config.RestartOnFailure, DrainTimeout: s.DrainTimeout.Value, ShutdownTimeout: s.ShutdownTimeout.Value,
		StopTimeout: s.StopTimeout.Value, HangTimeout: s.HangTimeout.Value}
}

// runtimeSide is the launcher as the runtime sees it (server.Launcher).
type runtimeSide struct{ sv *launcher }

func (r runtimeSide) Launch(ctx context.Context, p *plan.Plan, id server.EngineID, kind server.Kind, interrupt context.Context) (*server.Instance, error) {
	return r.sv.startInst(ctx, p, id, kind, interrupt)
}

func (r runtimeSide) BeforeTraffic(ctx context.Context, in *server.Instance) error {
	return r.sv.beforeTraffic(ctx, in)
}

// Notify takes in what the runtime tells.
func (r runtimeSide) Notify(n server.Note) {
	sv := r.sv
	switch n := n.(type) {
	case server.NoteServing:
		sv.serving(n.In)
	case server.NoteSwitched:
		sv.switched(n.Switched, n.To)
	case server.NoteAdopted:
		sv.adopted(n.Job)
	case server.NoteStopping:
		sv.endAdapt()
	case server.NoteExited:
		sv.st.exited(n.In, n.Code)
	case server.NotePhase:
		sv.met.Phase(n.Phase.String())
		sv.force.setPhase(n.Phase)
	}
}

// run starts the first engine and serves until a signal, a fatal exit or
// the parent context ends it.
func (sv *launcher) run(p *plan.Plan) error {
	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	sv.force.take(p, nil)
	var cache *adaptCache
	if AdaptOff(p, p.Settings.Proxy.Value) == "" {
		cache = sv.newAdaptCache(p)
		if np := sv.resumeStart(p, cache); np != nil {
			p = np
		}
	}
	sv.st = newServeStatus(p)
	sv.met = metrics.New(sv.metricSources())
	if p.Settings.Proxy.Value {
		sv.px = proxy.New(proxy.Options{
			QueueSize:    p.Settings.QueueSize.Value,
			HoldTimeout:  p.Settings.HoldTimeout.Value,
			Status:       sv.st.handler(sv),
			Metrics:      sv.met.Text,
			Log:          sv.log,
			APIKeys:      p.APIKeys,
			LlamaKeyRule: engine.ChecksKeysAsLlama(p.Settings.Engine.Value),
		})
	}
	changes, hup, closeWatch := sv.watchFiles(p)
	defer closeWatch()
	sv.rt = server.New(server.Options{
		Plan: p, Limits: limits(p), Proxy: sv.px, Log: sv.log,
		Signals: sigs, Done: sv.c.Done, Launcher: runtimeSide{sv},
	})
	sv.ctl.loop = sv.newAdapt(p, cache) // its client counts through the runtime
	if sv.px != nil {
		// Listening once the runtime exists: a request or a scrape
		// arriving at once finds it.
		pub, err := listenPublic(p, sv.px, sv.px.ShedConn, sv.log)
		if err != nil {
			return err
		}
		sv.pub = pub
		defer sv.px.SayHeld() // after the listener closes (defers run last first)
		defer sv.pub.close()
		sv.log.Info("proxy listening; the engine gets a loopback port of its own", "addr", pub.addr, "switch", p.Settings.Switch.Value)
	}
	stopFeed := make(chan struct{})
	fed := make(chan struct{})
	go func() { defer close(fed); sv.feed(changes, hup, stopFeed) }()
	code, err := sv.rt.Run()
	close(stopFeed)
	<-fed
	sv.endAdapt()
	sv.endFollow()
	cut, why := sv.rt.Cut()
	code, err = cutExit(code, err, cut, why)
	return runErr(code, err)
}

// cutExit turns a clean exit with requests cut into exitcode.RequestsCut
// (docs/serving.md, "Exit codes"); any other exit keeps its code. why is
// the cut's cause, said in place of a list of the possible ones.
func cutExit(code int, err error, cut int, why string) (int, error) {
	if code != 0 || cut == 0 {
		return code, err
	}
	if why == "" {
		why = "the engines were stopped under them"
	}
	return exitcode.RequestsCut, fmt.Errorf("stopped with %d request(s) in flight cut (%s)", cut, why)
}

// watchFiles catches SIGHUP and watches the profile and policy files.
// SIGHUP is caught from here on: during the first load (minutes for a
// real model) its default action would end the launcher and its engine.
// The watcher starts before the first engine, so that its baseline is the
// content just loaded: an edit made while the model loads waits in its
// queue and is applied once the engine serves. With a watcher, SIGHUP
// comes through it.
func (sv *launcher) watchFiles(p *plan.Plan) (<-chan watch.Change, <-chan os.Signal, func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	closeAll := func() { signal.Stop(hup) }
	if !p.Settings.Watch.Value || len(sv.w.files) == 0 {
		return nil, hup, closeAll
	}
	w, err := watch.New(sv.w.files, watch.Options{Debounce: 150 * time.Millisecond, Poll: 5 * time.Second, Signals: true, Logger: sv.log, MayVanish: sv.c.MayVanish})
	if err != nil {
		sv.log.Warn("cannot watch for changes; reload with SIGHUP", "err", err)
		return nil, hup, closeAll
	}
	signal.Stop(hup)
	sv.w.watcher = w
	sv.log.Info("watching for changes", "files", strings.Join(sv.w.files, ", "))
	return w.Changes(), hup, func() { w.Close() }
}

// followFiles makes the files a load named the ones watched (and the ones
// a SIGHUP reloads), noting those that were empty then: a policy file the
// profile names now is watched from here on, one it no longer names is
// not. Before, the set was the one serve started with, and an edit of a
// policy file added by a reload went unseen. Runs at start and then on the
// feed's goroutine, as reload does.
func (sv *launcher) followFiles(files []string) {
	if slices.Equal(files, sv.w.files) {
		return
	}
	for _, f := range files {
		if !slices.Contains(sv.w.files, f) {
			if fi, err := os.Stat(f); err == nil && fi.Size() == 0 {
				sv.w.wasEmpty[f] = true // loaded empty: an empty file is its content
			}
		}
	}
	sv.w.files = slices.Clone(files)
	if sv.w.watcher != nil && sv.w.watcher.Watch(files) == nil {
		sv.log.Info("watching for changes", "files", strings.Join(files, ", "))
	}
}

// runErr is serve's error for the runtime's exit code and reason.
func runErr(code int, err error) error {
	switch {
	case code == 0:
		return nil
	case err == nil:
		return codeOf(code)
	case errors.As(err, new(*exitcode.Error)), errors.As(err, new(*exitcode.BadInput)):
		return err
	default:
		return exitcode.New(code, err)
	}
}

// feed turns file changes and SIGHUP into reload jobs until stop.
func (sv *launcher) feed(changes <-chan watch.Change, hup <-chan os.Signal, stop <-chan struct{}) {
	for {
		var ch watch.Change
		select {
		case <-stop:
			return
		case <-hup:
			if len(sv.w.files) == 0 {
				sv.log.Info("SIGHUP: nothing to reload (no profile or policy file is given; settings come from flags and the environment)")
				continue
			}
			ch = watch.Change{Reason: watch.ReasonSIGHUP}
		case c, ok := <-changes:
			if !ok {
				changes = nil
				continue
			}
			ch = c
		}
		if ch.Err != nil {
			// It names the file and why (too large, a directory, a FIFO).
			sv.rejectReload(slog.LevelError, reloadRejected, "err", ch.Err)
			sv.reloaded(ch, ch.Err)
			continue
		}
		cur := sv.plan()
		np, l, changed, err := sv.reload(cur, ch)
		if err != nil {
			sv.reloaded(ch, err)
			continue
		}
		sv.followFiles(l.Files())
		// The runtime takes an unchanged engine in without a switch.
		// During one, or an engine's start, it applies after it (the
		// latest wins), and says so itself.
		kept := !changed && sv.force.settled()
		why := ch.Reason
		if ch.Path != "" {
			why = ch.Path + " (" + ch.Reason + ")"
		}
		reply := make(chan error, 1)
		if kept {
			sv.keptSaid.Store(reply, true) // before submit: the runtime may adopt at once
		}
		if err := sv.submit(server.KindReload, "reload: "+why, cur, np, l, reply); err != nil {
			sv.keptSaid.Delete(reply)
			sv.reloaded(ch, err)
			continue
		}
		if kept {
			// Said once submit took it: a front port refused there was
			// "nothing to do" and then an error in one reload.
			msg, attrs := keptEngine("reload: engine command unchanged", cur, np)
			sv.log.Info(msg, append([]any{"width", widthOf(np)}, attrs...)...)
		}
		// The outcome is the runtime's: a new engine that fails to start
		// leaves the old settings serving, which is a rejection.
		done := sv.reloading(ch)
		go func() {
			select {
			case err := <-reply:
				done(err)
			case <-stop: // the runtime has ended: no reply comes
			}
			sv.keptSaid.Delete(reply) // answered without an adoption: not kept for ever
		}()
	}
}

// submit hands a plan to the runtime as a switch job, after the checks
// that need no engine: a plan that cannot start is refused before anything
// is stopped (and returned: a reload counts it as rejected).
func (sv *launcher) submit(kind server.Kind, reason string, cur, np *plan.Plan, l Load, reply chan error) error {
	// One submission at a time, from the check to the runtime: reloads,
	// follow and adaptive switches come from goroutines of their own, and
	// the address bound ahead is for the latest plan the runtime gets.
	sv.submitMu.Lock()
	defer sv.submitMu.Unlock()
	mode := sv.switchMode(np, !plan.SameEngine(cur, np))
	// Before checkSwitch, which binds a new public address ahead.
	warn, err := knownToFail(cur, np, mode)
	if err == nil {
		err = sv.checkSwitch(cur, np)
	}
	if err != nil {
		const msg = "new settings cannot start; the engine keeps running with the previous ones"
		if kind == server.KindReload {
			sv.rejectReload(slog.LevelError, msg, "err", err)
		} else {
			sv.log.Error(msg, "err", err)
		}
		if reply != nil {
			reply <- err
		}
		return err
	}
	if warn != "" {
		sv.log.Warn(warn)
	}
	if kind == server.KindReload && !plan.SameEngine(cur, np) {
		sv.log.Info("engine command changed", "changed", diffArgv(secret.MaskArgv(plan.EngineArgv(cur)), secret.MaskArgv(plan.EngineArgv(np))))
	}
	if loop := sv.ctl.adaptive(); loop != nil {
		if line := loop.BeforeTrafficLine(time.Now()); line != "" {
			sv.log.Info(line, "why", reason)
		}
	}
	sv.rt.Submit(&server.Job{Kind: kind, Mode: mode, Plan: np, Limits: limits(np), Reason: reason, Reply: reply, Origin: l})
	return nil
}

// serving: the engine takes the traffic now. The adaptive loop starts
// with the first engine that serves.
func (sv *launcher) serving(in *server.Instance) {
	sv.st.serving(in)
	sv.publishServing(in, in.Plan)
	if sv.px != nil {
		// The status page asks for this engine's keys, and an early 401
		// follows this engine's rule.
		sv.px.SetAPIKeys(in.Plan.APIKeys, engine.ChecksKeysAsLlama(in.Plan.Settings.Engine.Value))
	}
	if sv.ctl.start() {
		sv.ctl.ran(sv.runAdapt(in.Plan), false)
		sv.ctl.ran(sv.runFollow(in.Plan), true)
	}
}

// switched records a finished switch and takes its plan in.
func (sv *launcher) switched(s server.Switched, to *server.Instance) {
	j := s.Job
	defer sv.followAddress(j.Plan)
	rec := switchRecordOf(s, time.Now())
	sv.met.Switched(j.Kind.String(), j.Mode.String(), s.OK, s.Took)
	if to == nil {
		sv.st.switched(rec)
		return
	}
	rec.ToWidth = widthOf(to.Plan)
	if !s.OK {
		rec.Error = "new settings failed (" + errString(s.Err) + "); the previous settings serve again"
	}
	sv.st.switched(rec)
	sv.adopt(to.Plan, switchedLoad(s, to))
	if s.OK {
		switch {
		case j.Kind == server.KindAdapt:
			sv.ctl.adaptedTo(widthOf(to.Plan))
		case j.Kind == server.KindFollow: // its plan's load is the bucket it chose (a reload reads it there)
		case !j.Plan.Settings.Adapt.Value || j.Plan.Resolution.IsOperator():
			sv.ctl.adaptedTo(0)
		}
	}
	attrs := []any{"to_pid", to.Proc.PID(), "width", widthOf(to.Plan), "mode", j.Mode.String(), "took", s.Took.Round(time.Millisecond).String()}
	if s.Waited > 0 {
		attrs = append(attrs, "waited", s.Waited.Round(time.Millisecond).String())
	}
	sv.log.Info(switchedMsg(s.OK), attrs...)
}

// switchedMsg is the line a finished switch ends with. One that failed
// with an engine serving after it went back to the previous settings (a
// drain switch restarts them): "switched" read as success right after
// "engine with the new settings failed".
func switchedMsg(ok bool) string {
	if ok {
		return "switched"
	}
	return "switch failed; went back to the previous settings"
}

// switchRecordOf is a finished switch as the status history keeps it, at
// now: its took_ms the switch alone, the wait behind another apart.
func switchRecordOf(s server.Switched, now time.Time) switchRecord {
	j := s.Job
	rec := switchRecord{Kind: j.Kind.String(), Reason: j.Reason, Mode: j.Mode.String(), At: now.Add(-s.Took), StartMS: ms(s.Took),
		WaitedMS: ms(s.Waited), DrainMS: ms(s.Drain), OK: s.OK, Error: errString(s.Err)}
	if s.From != nil { // its instance may be gone: a drain switch stopped it first
		rec.FromWidth = widthOf(s.From.Plan)
	}
	return rec
}

// metricSources are the proxy's counters, read at scrape time.
func (sv *launcher) metricSources() metrics.Sources {
	stat := func(f func(proxy.Stats) float64) func() float64 {
		return func() float64 {
			if sv.px == nil {
				return 0
			}
			return f(sv.px.Stats())
		}
	}
	return metrics.Sources{
		InFlight: func() float64 { // every route's and the launcher's own: not the load (Load)
			if b := sv.servingBackend(); b != nil {
				return float64(b.InFlight())
			}
			return 0
		},
		HeldNow:  stat(func(s proxy.Stats) float64 { return float64(s.HeldNow) }),
		Held:     stat(func(s proxy.Stats) float64 { return float64(s.HeldTotal) }),
		Rejected: stat(func(s proxy.Stats) float64 { return float64(s.RejectedTotal) }),
		Retried:  stat(func(s proxy.Stats) float64 { return float64(s.RetriedTotal) }),
	}
}

// adopted: a reload that starts the engine command now serving (one
// that arrived during a switch to the same settings, or a comment edit),
// or the one a crashed engine restarts with after its back-off.
func (sv *launcher) adopted(j *server.Job) {
	// A crash's back-off adopts too, nothing serving: the runtime said
	// the restart runs these settings.
	_, said := sv.keptSaid.LoadAndDelete(j.Reply)
	if cur := sv.plan(); cur != j.Plan && sv.st.serves() && !said {
		msg, attrs := keptEngine("the engine asked for is the one now serving", cur, j.Plan)
		sv.log.Info(msg, append([]any{"why", j.Reason}, attrs...)...)
	}
	sv.adopt(j.Plan, origin(j))
	sv.followAddress(j.Plan)
	// The engine serving runs j.Plan now (a schedule edit that left its
	// width): the status page and the metrics describe it by j.Plan.
	if in := sv.st.keptBy(j.Plan); in != nil {
		sv.publishServing(in, j.Plan)
	}
}

// keptEngine is what a reload that keeps the engine command says it does:
// nothing, or, where the front address changed, the proxy's move there.
// lead says the engine stays.
func keptEngine(lead string, cur, np *plan.Plan) (string, []any) {
	if cur == nil || np == nil {
		return lead + "; nothing to do", nil
	}
	var did []string
	var attrs []any
	if addrOf(cur) != addrOf(np) {
		did, attrs = append(did, "the front address moves"), []any{"from", addrOf(cur), "to", addrOf(np)}
	}
	// A schedule edited alone keeps the engine, and serve follows the new
	// one: an operator read "nothing to do" and took the edit for ignored.
	if a, b := cur.Resolution.Schedule.String(), np.Resolution.Schedule.String(); a != b {
		did = append(did, fmt.Sprintf("the width schedule is now %s (was %s)", b, a))
	}
	if a, b := cur.Settings, np.Settings; a.QueueSize.Value != b.QueueSize.Value || a.HoldTimeout.Value != b.HoldTimeout.Value {
		did = append(did, "the proxy's limits change")
	}
	if len(did) == 0 {
		return lead + "; nothing to do", nil
	}
	return lead + "; " + strings.Join(did, "; "), attrs
}

// followAddress moves the proxy to the address of the plan in force once
// the job of plan done has ended (switched, failed or taken in), and shows
// where it listens.
func (sv *launcher) followAddress(done *plan.Plan) {
	if sv.pub == nil {
		return
	}
	sv.pub.follow(sv.plan(), done)
	sv.st.setPublic(sv.pub.address())
}

// publishServing sets the width metrics for the engine in, described by
// p: its own plan, or the reloaded one it runs.
func (sv *launcher) publishServing(in *server.Instance, p *plan.Plan) {
	bucket, load := sv.st.bucketInForce(p)
	sv.met.ServingAt(widthOf(p), widthSourceOf(p), bucket, load, infoOf(in).Check.Verified)
}

// adopt takes a plan in force, built from the load from (nil: the plan
// already was in force, or the runtime made its job; the load in force
// stays): the status page, the proxy's limits, and an operator width ends
// the adaptive loop.
func (sv *launcher) adopt(np *plan.Plan, from Load) {
	cur := sv.force.take(np, from)
	sv.st.settings(np)
	sv.operatorWidthEndsAdapt(np)
	sv.followLater(np)
	if sv.px == nil || cur == nil {
		return
	}
	a, b := cur.Settings, np.Settings
	if a.QueueSize.Value != b.QueueSize.Value || a.HoldTimeout.Value != b.HoldTimeout.Value {
		sv.px.SetLimits(b.QueueSize.Value, b.HoldTimeout.Value)
		sv.log.Info("proxy limits changed", "queue_size", b.QueueSize.Value, "hold_timeout", b.HoldTimeout.Value.String())
	}
}

// endAdapt stops the adaptive loop (at shutdown: it must not probe an
// engine being stopped, nor ask for a switch) and waits for its end, its
// last save written, though another goroutine stopped it (a signal's
// NoteStopping): serve exited mid-save, the state lost and a temp file
// left.
func (sv *launcher) endAdapt() {
	if stop := sv.ctl.takeStopAdapt(false); stop != nil {
		stop()
	}
	sv.ctl.waitAdapt()
}

// probeClient is the client of the launcher's own requests to engines:
// they count in flight like a client's, so no engine is stopped under one.
func (sv *launcher) probeClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: sv.rt.Transport(nil)}
}

// atLoopback returns p with its engine command listening on
// 127.0.0.1:port instead of the public address: the plan's command with
// its listen address filled in, not built again from the settings.
func atLoopback(p *plan.Plan, port int) (*plan.Plan, error) {
	l, err := p.Launch.At("127.0.0.1", port)
	if err != nil {
		return nil, fmt.Errorf("the engine command on loopback port %d: %w", port, err)
	}
	np := *p
	np.Launch = l
	return &np, nil
}

// LoopbackPort asks the kernel for a free loopback port. Another process
// could take it before the engine binds it; the engine then fails to start
// and the switch fails over like any failed start.
func LoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launch starts, waits for ready and verifies. A verification problem under
// --strict-width stops the engine and returns exit code 3.
func (sv *launcher) launch(ctx context.Context, p *plan.Plan, n int, what string, brief bool, interrupt context.Context) (*instance.Engine, error) {
	logPlan(sv.log, p, what, brief, "engine_n", n)
	o := sv.c.Engine(p.Settings, n)
	o.Interrupt, o.Log, o.Name = interrupt, sv.log, fmt.Sprintf("engine %d", n)
	r, err := instance.Start(ctx, p, o)
	if err != nil {
		// An engine that exits while starting: the launcher exits with the
		// engine's code, after showing its last lines. The engine, stopped,
		// comes back with the error (instance.Start).
		var ee *supervise.ExitedError
		if errors.As(err, &ee) && ee.Code > 0 {
			return r, exitcode.New(ee.Code, err)
		}
		return r, StartErr(err)
	}

	attrs := []any{"url", p.Launch.BaseURL, "after", r.Ready.Round(time.Millisecond).String(), "pid", r.Proc.PID()}
	if !sv.launched {
		// The launcher's own cost after the Go runtime has started (package
		// init to the engine's exec); the runtime's start itself is not
		// visible from inside the process.
		attrs = append(attrs, "init_to_exec", r.ExecAt.Sub(processStart).Round(10*time.Microsecond).String())
		sv.launched = true
	}
	sv.log.Info("ready", attrs...)
	quiet := waitlog.Start(sv.log, nil, waitlog.For(fmt.Sprintf("engine %d's width check (its startup line, a probe request)", n), instance.CheckBound(p.Settings.Engine.Value), ", then it serves unverified"))
	chk := r.Verify(ctx, p.Settings.Probe.Value)
	quiet()
	switch {
	case chk.Problem != "":
		sv.log.Error("width check failed: "+chk.Problem, "resolved", p.Resolution.Width, "engine_says", chk.Observed.Line)
		if p.Settings.StrictWidth.Value {
			r.Stop()
			return nil, exitcode.New(ExitWidthMismatch, fmt.Errorf("--strict-width: %s", chk.Problem))
		}
	case chk.Off:
		sv.log.Info("width check: " + chk.Text())
	case chk.Verified:
		sv.log.Info("width verified", "width", chk.Observed.Width, "resolved_from", string(p.Resolution.Source), "read_from", chk.ReadFrom)
	case chk.Note != "":
		// Not a mismatch, but the width is unproven: say so louder than info.
		sv.log.Warn("width not verified: " + chk.Note)
	}
	return r, nil
}

// StartErr maps an engine start's errors to exit codes: a binary that
// cannot run is bad input (2); an interrupted load is 130, like a shell.
func StartErr(err error) error {
	var se *instance.StartError
	switch {
	case errors.As(err, &se):
		return exitcode.Bad(err)
	case errors.Is(err, instance.ErrInterrupted):
		return exitcode.New(130, err)
	}
	return err
}

// operatorWidthEndsAdapt stops the adaptive loop when a reload's plan,
// now serving, has an operator width: it always wins. The loop stays off
// until speclaunch restarts (adapt.* settings apply at start); once an
// operator setting turned it off, the status follows the plan in force,
// the operator's width removed or changed.
func (sv *launcher) operatorWidthEndsAdapt(p *plan.Plan) {
	if p.Resolution.IsOperator() {
		if stop := sv.ctl.takeStopAdapt(true); stop != nil {
			sv.ctl.overrule()
			sv.log.Info("adaptive width off: " + operatorWins(p.Settings) + staysOff)
			go func() { // the loop may be waiting on the runtime's goroutine
				stop()
				sv.showOverruled()
			}()
			return
		}
	}
	if sv.ctl.isOverruled() {
		sv.showOverruled()
	}
}

// staysOff ends what is said of an adaptive width an operator setting
// turned off.
const staysOff = "; it stays off until speclaunch restarts"

// showOverruled shows the adaptive width off for good by the plan in
// force: its operator width or schedule, or, that setting since removed,
// the width it serves. Before, the page kept the removed width and said
// it was set.
func (sv *launcher) showOverruled() {
	p := sv.plan()
	why := "an operator width or schedule turned it off, since removed"
	if p.Resolution.IsOperator() {
		why = operatorWins(p.Settings)
	}
	sv.showAdapt(adapt.Status{State: adapt.StateNotAdapting, Note: why + staysOff, Width: widthOf(p), Updated: time.Now()}, adapt.StateNotAdapting)
}

// checkSwitch refuses, before anything is stopped, a plan that cannot
// start: in direct mode a new public port that is taken; behind the proxy a
// new public address is bound first. With the engine kept the proxy moves
// there now; with a new engine the new address serves beside the old until
// the switch ends, and is kept only if the new engine took over
// (public.settle): a reload whose engine fails leaves the address as well.
func (sv *launcher) checkSwitch(cur, np *plan.Plan) error {
	samePublic := np.Settings.Port.Value == cur.Settings.Port.Value && np.Settings.Host.Value == cur.Settings.Host.Value
	if np.Settings.Proxy.Value != cur.Settings.Proxy.Value {
		return exitcode.Bad(errors.New("server.proxy cannot change under a running server: restart speclaunch to turn the proxy on or off"))
	}
	if sv.px == nil {
		if samePublic {
			return nil
		}
		return Launchable(np, true)
	}
	// The latest plan asked for is the one an address is bound ahead for
	// (its port refused now if taken); the proxy moves there once that
	// plan is in force (public.follow).
	return sv.pub.reserve(np)
}

// switchMode picks overlap or drain for a switch (auto's choice and why
// are logged where a switch may follow, say); direct mode has only
// stop-then-start.
func (sv *launcher) switchMode(np *plan.Plan, say bool) key.Switch {
	mode, why := sv.pickSwitch(np)
	if say && sv.px != nil && np.Settings.Switch.Value == key.SwitchAuto {
		sv.log.Info("switch mode", "mode", mode, "why", why)
	}
	return mode
}

// pickSwitch is the mode a switch to np takes now, and why; only auto
// reads the facts (nvidia-smi, file sizes).
func (sv *launcher) pickSwitch(np *plan.Plan) (key.Switch, string) {
	switch m := np.Settings.Switch.Value; {
	case sv.px == nil:
		return key.SwitchDirect, "no proxy"
	case m != key.SwitchAuto:
		return chooseSwitch(m, switchFacts{})
	}
	return chooseSwitch(key.SwitchAuto, sv.switchFacts(np, sv.rt.Current()))
}

// adaptedPlan rebuilds the serving plan at the width the adaptive loop
// chose (1 = speculation off).
func (sv *launcher) adaptedPlan(cur *plan.Plan, w int, reason string) (*plan.Plan, Load, error) {
	np, l, err := sv.rebuild(plan.Options{Adapted: w, AdaptReason: reason}, "adaptive switch")
	if err != nil {
		return nil, nil, err
	}
	if np.Resolution.IsOperator() {
		// The loop stops on it: an operator width always wins.
		return nil, nil, fmt.Errorf("%w: %s", adapt.ErrNotAdapting, operatorWins(np.Settings))
	}
	return np, l, nil
}

// rebuild builds the serving plan anew with opts from the files as they
// are now: what a reload would apply. While they do not make a plan that
// can start (an edit the reload rejected, still on disk), from the
// settings in force: a switch must not stall on, nor start, a file the
// engine does not run. what names the switch in the log.
func (sv *launcher) rebuild(opts plan.Options, what string) (*plan.Plan, Load, error) {
	l, err := sv.c.Loader.Load()
	var np *plan.Plan
	if err == nil {
		np, err = l.Build(opts)
	}
	if err == nil {
		err = Launchable(np, false)
	}
	if err == nil {
		err = unprovenErr(sv.plan(), np)
	}
	if err != nil {
		good := sv.force.loadInForce()
		if good == nil {
			return nil, nil, err
		}
		sv.sayUnbuilt(what, err)
		if np, err = good.Build(opts); err != nil {
			return nil, nil, err
		}
		return np, good, nil
	}
	sv.builtAgain()
	return np, l, nil
}

// builtAgain notes that the files on disk make a plan again: a later
// fault is said, the same as before included.
func (sv *launcher) builtAgain() {
	sv.unbuiltMu.Lock()
	sv.unbuilt = ""
	sv.unbuiltMu.Unlock()
}

// sayUnbuilt says that the files on disk do not make a plan (err), once
// for each error: the reload that met it said it already, and each
// adaptive switch repeated it in full (a user pass: the same four problems
// at every switch); the same again is at debug.
func (sv *launcher) sayUnbuilt(what string, err error) {
	sv.unbuiltMu.Lock()
	again := sv.unbuilt == err.Error()
	sv.unbuilt = err.Error()
	sv.unbuiltMu.Unlock()
	msg := what + ": the files on disk do not make a plan that can start; switching on the settings in force"
	if again {
		sv.log.Debug(msg+" (as said before)", "err", err)
		return
	}
	sv.log.Warn(msg, "err", err)
}

// unprovenErr refuses np where its engine arguments hold a flag the
// engine is known to refuse and the serving engine does not run: a
// reload tries one in overlap (submit), a width switch never does. The
// edit on disk stays there after its start failed, and every width switch
// built on it would fail the same way, stalling the width.
func unprovenErr(cur, np *plan.Plan) error {
	if us := unproven(cur, np); len(us) > 0 {
		return fmt.Errorf("%s: %s; the serving engine does not run it", argsSource(np.Settings, us[0].Name), us[0].Why())
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
