package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/speclaunch/speclaunch/adapt"
	"github.com/speclaunch/speclaunch/config"
	"github.com/speclaunch/speclaunch/plan"
	"github.com/speclaunch/speclaunch/proxy"
	"github.com/speclaunch/speclaunch/supervise"
	"github.com/speclaunch/speclaunch/watch"
	"github.com/speclaunch/speclaunch/width"
)

// server is serve's switcher: one engine serving, at most one starting, any
// number draining. Reloads, restarts after a crash and the adaptive width
// all become switch jobs here, and only the switcher routes the proxy.
type server struct {
	launched bool
	e        *Env
	in       config.Input
	log      *slog.Logger
	files    []string
	wasEmpty map[string]bool // files that were empty when serve started

	px  *proxy.Proxy // nil in direct mode (--proxy=false)
	pub *public      // the public listener (proxy mode)

	adaptReq chan adaptRequest // from the adaptive loop
	runCtx   context.Context   // engines live on it; a job's own context only interrupts their start
	st       *serveStatus
	gens     uint64 // engines started so far

	// adapted is the width the adaptive loop switched to (1 = speculation
	// off), 0 before it has; a reload keeps it, or every profile edit (a
	// comment, a SIGHUP) would put the policy's width back.
	adapted     int
	adaptReason string
	// stopAdapt stops the adaptive loop, nil when none runs: a reload that
	// sets an operator width ends it (an operator width always wins).
	stopAdapt func()
}

// inst is one engine process the switcher started.
type inst struct {
	r       *running
	plan    *plan.Plan // the plan as the operator sees it (public address)
	backend *proxy.Backend
	port    int // the engine's own port
	check   widthCheck
	since   time.Time
	gen     uint64 // 1, 2, …: which engine process this is, for the adaptive loop
}

func (in *inst) width() int {
	if in.plan.Resolution.Source == width.Off {
		return 1
	}
	return in.plan.Resolution.Width
}

// job is one engine start: a switch, a restart, or the first start.
type job struct {
	kind     string // "start", "reload", "restart", "adapt"
	reason   string
	mode     string // overlap | drain | direct | restart
	plan     *plan.Plan
	fallback *plan.Plan // started when plan fails and nothing serves; nil = none
	old      *inst      // drain/direct: the engine this job stops first
	began    time.Time
	cancel   context.CancelFunc
	done     chan jobResult
	reply    chan error // adaptive requests wait for the outcome
}

type jobResult struct {
	in          *inst
	err         error // the start of job.plan failed (in may still come from the fallback)
	fellBack    bool
	drained     time.Duration // drain: time spent letting the old engine finish
	leftInside  int           // drain: requests still in flight when the drain timed out
	interrupted bool
}

type adaptRequest struct {
	width  int
	reason string
	reply  chan error
}

// startInst starts p's engine: on a loopback port of its own behind the
// proxy, or on the public address in direct mode.
func (sv *server) startInst(ctx context.Context, p *plan.Plan, what string, interrupt context.Context) (*inst, error) {
	ep, port := p, p.Settings.Port.Value
	if sv.px != nil {
		var err error
		if port, err = loopbackPort(); err != nil {
			return nil, fmt.Errorf("pick a loopback port for the engine: %w", err)
		}
		if ep, err = rebind(p, "127.0.0.1", port, sv.e.deps().Environ); err != nil {
			return nil, err
		}
	}
	r, chk, err := sv.launch(ctx, ep, what, interrupt)
	if err != nil {
		return nil, err
	}
	sv.gens++
	in := &inst{r: r, plan: p, port: port, check: chk, since: time.Now(), gen: sv.gens}
	if sv.px != nil {
		b, err := proxy.NewBackend(ep.Launch.BaseURL, fmt.Sprintf("pid %d", r.proc.PID()))
		if err != nil {
			r.proc.Stop(p.Settings.StopTimeout.Value)
			return nil, err
		}
		in.backend = b
	}
	return in, nil
}

// rebind returns p with the engine bound to host:port instead of the
// public address; the resolution and everything else stay.
func rebind(p *plan.Plan, host string, port int, environ []string) (*plan.Plan, error) {
	np := *p
	s := p.Settings
	s.Host = config.Field[string]{Value: host, Src: config.Source{Name: "speclaunch proxy"}}
	s.Port = config.Field[int]{Value: port, Src: config.Source{Name: "speclaunch proxy"}}
	np.Settings = s
	l, err := p.Adapter.Command(s, p.Resolution, p.Facts.Drafter, environ, p.Facts.Caps)
	if err != nil {
		return nil, &badInput{err}
	}
	np.Launch = l
	return &np, nil
}

// loopbackPort asks the kernel for a free loopback port. Another process
// could take it before the engine binds it; the engine then fails to start
// and the switch fails over like any failed start.
func loopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launch starts, waits for ready and verifies. A verification problem under
// --strict-width stops the engine and returns exit code 3.
func (sv *server) launch(ctx context.Context, p *plan.Plan, what string, interrupt context.Context) (*running, widthCheck, error) {
	logPlan(sv.log, p, what)
	o := sv.opts(p.Settings)
	o.Interrupt = interrupt
	r, err := startEngine(ctx, p, o)
	if err != nil {
		// An engine that exits while starting: the launcher exits with the
		// engine's code, after showing its last lines.
		var ee *supervise.ExitedError
		if errors.As(err, &ee) && ee.Code > 0 {
			return nil, widthCheck{}, exitCode(ee.Code, err)
		}
		return nil, widthCheck{}, err
	}

	attrs := []any{"url", p.Launch.BaseURL, "after", r.ready.Round(time.Millisecond).String(), "pid", r.proc.PID()}
	if !sv.launched {
		// The launcher's own cost after the Go runtime has started (package
		// init to the engine's exec); the runtime's start itself is not
		// visible from inside the process.
		attrs = append(attrs, "init_to_exec", r.execAt.Sub(processStart).Round(10*time.Microsecond).String())
		sv.launched = true
	}
	sv.log.Info("ready", attrs...)
	chk := r.verify(ctx, p.Settings.Probe.Value)
	switch {
	case chk.Problem != "":
		sv.log.Error("width check failed: "+chk.Problem, "resolved", p.Resolution.Width, "engine_says", chk.Observed.Line)
		if p.Settings.StrictWidth.Value {
			r.proc.Stop(p.Settings.StopTimeout.Value)
			return nil, chk, exitCode(exitWidthMismatch, fmt.Errorf("--strict-width: %s", chk.Problem))
		}
	case chk.Verified:
		sv.log.Info("width verified", "width", chk.Observed.Width, "resolved_from", string(p.Resolution.Source), "read_from", chk.ReadFrom)
	case chk.Note != "" && p.Resolution.Source != "off":
		// Not a mismatch, but the width is unproven: say so louder than info.
		sv.log.Warn("width not verified: " + chk.Note)
	case chk.Note != "":
		sv.log.Info("width check: " + chk.Note)
	}
	return r, chk, nil
}

// runJob does one job's work off the switcher's loop: for drain and direct
// switches it first holds requests, drains and stops the old engine; then
// it starts the new one, and the fallback if that fails.
func (sv *server) runJob(ctx context.Context, j *job) jobResult {
	var res jobResult
	if j.old != nil {
		if sv.px != nil {
			sv.px.Hold()
			t0 := time.Now()
			dctx, cancel := context.WithTimeout(ctx, j.old.plan.Settings.DrainTimeout.Value)
			res.leftInside = j.old.backend.Drain(dctx)
			cancel()
			res.drained = time.Since(t0)
			if res.leftInside > 0 && ctx.Err() == nil {
				sv.log.Warn("drain timed out; stopping the old engine with requests still in flight", "in_flight", res.leftInside, "after", res.drained.Round(time.Millisecond).String(), "pid", j.old.r.proc.PID())
			}
		}
		sv.log.Info("stopping the old engine", "pid", j.old.r.proc.PID(), "why", j.kind)
		j.old.r.proc.Stop(j.old.plan.Settings.StopTimeout.Value)
		sv.st.exited(j.old, j.old.r.proc.ExitCode()) // the status shows no engine until the new one serves
	}
	if ctx.Err() != nil {
		res.interrupted = true
		return res
	}
	what := map[string]string{"start": "starting engine", "restart": "restarting engine", "reload": "starting engine for the new settings", "adapt": "starting engine for the adapted width"}[j.kind]
	res.in, res.err = sv.startInst(sv.runCtx, j.plan, what, ctx)
	if ctx.Err() != nil {
		res.interrupted = true
		if res.in != nil {
			res.in.r.proc.Stop(j.plan.Settings.StopTimeout.Value)
			res.in = nil
		}
		return res
	}
	if res.err != nil && j.fallback != nil {
		sv.log.Error("engine with the new settings failed; going back to the previous ones", "err", res.err)
		in, err := sv.startInst(sv.runCtx, j.fallback, "restarting engine", ctx)
		if ctx.Err() != nil {
			res.interrupted = true
			if in != nil {
				in.r.proc.Stop(j.fallback.Settings.StopTimeout.Value)
			}
			return res
		}
		if err == nil {
			res.in, res.fellBack = in, true
		} else {
			res.err = err
		}
	}
	return res
}

// run starts the first engine and switches engines until a signal, a fatal
// exit or the parent context ends it.
func (sv *server) run(p *plan.Plan) error {
	ctx := sv.e.Ctx
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// The launcher's own lifetime context: signals are handled below, so
	// the engine is not cancelled by Main's signal context behind our back.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	sv.runCtx = runCtx

	sv.adaptReq = make(chan adaptRequest)
	sv.st = newServeStatus(p)
	if p.Settings.Proxy.Value {
		sv.px = proxy.New(proxy.Options{
			QueueSize:   p.Settings.QueueSize.Value,
			HoldTimeout: p.Settings.HoldTimeout.Value,
			Status:      sv.st.handler(sv),
			Log:         sv.log,
		})
		pub, err := listenPublic(p, sv.px, sv.log)
		if err != nil {
			return err
		}
		sv.pub = pub
		defer sv.pub.close()
		defer sv.px.Close() // before the listener closes: held requests get 503, not a reset
		sv.log.Info("proxy listening; the engine gets a loopback port of its own", "addr", pub.addr, "switch", p.Settings.Switch.Value)
	}

	// SIGHUP is caught from here on: during the first load (minutes for a
	// real model) its default action would end the launcher and its engine.
	// One that arrives while loading reloads once the engine serves.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	// The watcher starts before the first engine, so that its baseline is
	// the content just loaded: an edit made while the model loads (which
	// can take minutes) waits in its queue and is applied once the engine
	// serves, instead of being taken for the baseline and lost.
	var changes <-chan watch.Change
	if p.Settings.Watch.Value && len(sv.files) > 0 {
		w, err := watch.New(sv.files, watch.Options{Debounce: 150 * time.Millisecond, Poll: 5 * time.Second, Signals: true, Logger: sv.log})
		if err != nil {
			sv.log.Warn("cannot watch for changes; reload with SIGHUP", "err", err)
		} else {
			defer w.Close()
			changes = w.Changes()
		}
	}
	// Without a watcher SIGHUP reloads through hup (watching is about
	// files, not signals); with one, the watcher reports SIGHUP.
	if changes != nil {
		signal.Stop(hup)
	}

	first, err := sv.startInst(runCtx, p, "starting engine", ctx)
	if err != nil {
		return err
	}
	cur := first
	sv.route(cur)
	sv.st.serving(cur)
	if changes != nil {
		sv.log.Info("watching for changes", "files", strings.Join(sv.files, ", "))
	}

	sv.stopAdapt = sv.startAdapt(runCtx, p)
	defer func() {
		if sv.stopAdapt != nil {
			sv.stopAdapt()
		}
	}()

	backoff := supervise.Backoff{Initial: time.Second, Max: 30 * time.Second, Reset: time.Minute}
	var (
		running   *job
		pending   *job // a reload that arrived while a job ran: applied after it
		restartC  <-chan time.Time
		lastCode  int
		draining  sync.WaitGroup
		drainStop = make(chan struct{})
	)
	defer func() {
		close(drainStop)
		draining.Wait()
	}()

	begin := func(j *job) {
		jctx, cancel := context.WithCancel(runCtx)
		j.cancel, j.done, j.began = cancel, make(chan jobResult, 1), time.Now()
		if j.old != nil && cur == j.old {
			cur = nil
		}
		running = j
		go func() { j.done <- sv.runJob(jctx, j) }()
	}
	// drainOld lets an engine that no longer gets new requests finish its
	// requests, then stops it; overlap switches only.
	drainOld := func(old *inst) {
		draining.Add(1)
		go func() {
			defer draining.Done()
			dctx, cancel := context.WithTimeout(context.Background(), old.plan.Settings.DrainTimeout.Value)
			defer cancel()
			go func() {
				select {
				case <-drainStop:
					cancel()
				case <-dctx.Done():
				}
			}()
			t0 := time.Now()
			left := old.backend.Drain(dctx)
			if left > 0 {
				sv.log.Warn("drain ended with requests still in flight; stopping the old engine", "in_flight", left, "after", time.Since(t0).Round(time.Millisecond).String(), "pid", old.r.proc.PID())
			}
			old.r.proc.Stop(old.plan.Settings.StopTimeout.Value)
			sv.log.Info("old engine stopped", "pid", old.r.proc.PID(), "drained_in", time.Since(t0).Round(time.Millisecond).String())
			sv.st.drained(old, time.Since(t0))
		}()
	}
	// request turns a new plan into a switch job, or queues it behind the
	// running job (the latest wins).
	request := func(kind, reason string, np *plan.Plan, reply chan error) {
		j := &job{kind: kind, reason: reason, plan: np, reply: reply}
		if running != nil {
			if pending != nil && pending.reply != nil {
				pending.reply <- errors.New("superseded by a later switch")
			}
			pending = j
			sv.log.Info("a switch is under way; the new settings apply after it", "why", reason)
			return
		}
		if cur == nil {
			// Nothing serves (restarting after a crash): start the new
			// settings now; the restart timer is moot.
			restartC = nil
			j.mode, j.fallback = "restart", p
			begin(j)
			return
		}
		if err := sv.checkSwitch(p, np); err != nil {
			sv.log.Error("new settings cannot start; the engine keeps running with the previous ones", "err", err)
			if reply != nil {
				reply <- err
			}
			return
		}
		j.mode = sv.switchMode(np, cur)
		if j.mode != config.SwitchOverlap {
			j.old, j.fallback = cur, p
		}
		sv.log.Info("switching engines", "mode", j.mode, "why", reason, "changed", diffArgv(p.Launch.Argv, np.Launch.Argv))
		begin(j)
	}

	shutdown := func(sig os.Signal, why string) error {
		// The adaptive loop goes first: stopping the engine under a probe
		// or a scrape would read as an engine that cannot be probed.
		if sv.stopAdapt != nil {
			sv.stopAdapt()
			sv.stopAdapt = nil
		}
		if running != nil {
			running.cancel()
			res := <-running.done
			if res.in != nil {
				res.in.r.proc.Stop(p.Settings.StopTimeout.Value)
			}
			if running.old != nil && cur == nil {
				running.old.r.proc.Stop(p.Settings.StopTimeout.Value)
			}
			running = nil
		}
		if sv.pub != nil {
			sv.pub.stopAccepting()
		}
		if cur == nil {
			sv.log.Info("stopped while no engine was serving", "why", why)
			return codeOf(lastCode)
		}
		if sig == nil {
			sv.log.Info("stopping engine", "why", why)
			cur.r.proc.Stop(p.Settings.StopTimeout.Value)
		} else {
			sv.log.Info("stopping engine", "signal", sig.String())
			cur.r.proc.Signal(sig)
			select {
			case <-cur.r.proc.Done():
			case <-time.After(p.Settings.StopTimeout.Value):
				sv.log.Warn("engine did not stop in time; killing it", "after", p.Settings.StopTimeout.Value.String())
				cur.r.proc.Stop(0)
			}
		}
		<-cur.r.proc.Done()
		code := cur.r.proc.ExitCode()
		sv.log.Info("engine stopped", "exit_code", code)
		return codeOf(code)
	}

	parentDone := sv.e.parent.Done()
	for {
		var curDone <-chan struct{}
		if cur != nil {
			curDone = cur.r.proc.Done()
		}
		var jobDone chan jobResult
		if running != nil {
			jobDone = running.done
		}
		select {
		case <-parentDone:
			return shutdown(nil, "context cancelled")
		case sig := <-sigs:
			return shutdown(sig, "signal")

		case <-curDone:
			code := cur.r.proc.ExitCode()
			ranFor := time.Since(cur.r.start)
			lastCode = code
			dead := cur
			cur = nil
			if sv.px != nil {
				sv.px.Hold() // requests wait for the next engine
			}
			sv.st.exited(dead, code)
			switch {
			case running != nil:
				sv.log.Error("engine exited during a switch; requests wait for the new engine", "exit_code", code, "last", lastLine(dead.r.proc.Tail()))
			case code != 0 && p.Settings.Restart.Value == config.RestartOnFailure:
				wait := backoff.Next(ranFor)
				sv.log.Error("engine exited; restarting", "exit_code", code, "ran_for", ranFor.Round(time.Second).String(), "backoff", wait.String(), "last", lastLine(dead.r.proc.Tail()))
				restartC = time.After(wait)
			case code != 0:
				sv.log.Error("engine exited", "exit_code", code, "last", lastLine(dead.r.proc.Tail()))
				return codeOf(code)
			default:
				sv.log.Info("engine exited", "exit_code", 0)
				return nil
			}

		case <-restartC:
			restartC = nil
			begin(&job{kind: "restart", reason: "the engine exited", mode: "restart", plan: p})

		case res := <-jobDone:
			j := running
			running = nil
			j.cancel()
			sv.finishJob(j, res, &cur, &p, drainOld)
			if cur == nil && !res.interrupted {
				// Nothing serves and nothing could start.
				if p.Settings.Restart.Value == config.RestartOnFailure {
					wait := backoff.Next(time.Since(j.began))
					sv.log.Error("engine failed to start; retrying", "err", res.err, "backoff", wait.String())
					restartC = time.After(wait)
				} else {
					return res.err
				}
			}
			if pending != nil {
				next := pending
				pending = nil
				if cur != nil && slices.Equal(next.plan.Launch.Argv, p.Launch.Argv) && slices.Equal(next.plan.Launch.Env, p.Launch.Env) {
					// It was diffed against the settings the switch replaced;
					// against what serves now it changes nothing (a reload
					// caught during a switch to the same edit): no second
					// engine start.
					sv.log.Info("the settings that arrived during the switch are the ones now serving; nothing to do", "why", next.reason)
					sv.applyServing(p, next.plan)
					p = next.plan
					if next.reply != nil {
						next.reply <- nil
					}
				} else {
					request(next.kind, next.reason, next.plan, next.reply)
				}
			}

		case <-hup:
			if len(sv.files) == 0 {
				sv.log.Info("SIGHUP: nothing to reload (no profile or policy file is given; settings come from flags and the environment)")
				continue
			}
			if np, changed, err := sv.reload(p, watch.Change{Reason: watch.ReasonSIGHUP}); err == nil && (changed || running != nil) {
				// During a switch even the settings now serving are a change
				// of target: they queue behind it (the latest wins).
				request("reload", "SIGHUP", np, nil)
			} else if err == nil {
				sv.log.Info("reload: engine command unchanged; nothing to do", "width", np.Resolution.Width)
				sv.applyServing(p, np)
				p = np
			}
		case ch, ok := <-changes:
			if !ok {
				changes = nil
				continue
			}
			np, changed, err := sv.reload(p, ch)
			if err != nil {
				continue
			}
			if !changed && running == nil {
				sv.log.Info("reload: engine command unchanged; nothing to do", "width", np.Resolution.Width)
				sv.applyServing(p, np)
				p = np // same engine command; the proxy's and the switch's own settings may differ
				continue
			}
			// During a switch a reload is compared with what the switch
			// leaves serving, once it has: it queues behind it (the latest
			// wins), even when it equals the settings the switch replaces.
			why := ch.Reason
			if ch.Path != "" {
				why = ch.Path + " (" + ch.Reason + ")"
			}
			request("reload", "reload: "+why, np, nil)
		case ar := <-sv.adaptReq:
			np, err := sv.adaptedPlan(p, ar.width, ar.reason)
			if err != nil {
				ar.reply <- err
				continue
			}
			request("adapt", ar.reason, np, ar.reply)
		}
	}
}

// finishJob applies a job's outcome: route to the new engine and drain the
// old (overlap), or keep the old one serving when the new one failed.
func (sv *server) finishJob(j *job, res jobResult, cur **inst, p **plan.Plan, drainOld func(*inst)) {
	rec := switchRecord{Kind: j.kind, Reason: j.reason, Mode: j.mode, At: j.began, StartMS: ms(time.Since(j.began))}
	if *cur != nil {
		rec.FromWidth = (*cur).width()
	} else if j.old != nil {
		rec.FromWidth = j.old.width()
	}
	if res.drained > 0 {
		rec.DrainMS = ms(res.drained)
	}
	reply := func(err error) {
		if j.reply != nil {
			j.reply <- err
		}
	}
	if res.interrupted {
		reply(errors.New("interrupted"))
		return
	}
	if res.in == nil {
		rec.Error = errString(res.err)
		sv.st.switched(rec)
		if *cur != nil {
			sv.log.Error("the new engine failed to start; the old one keeps serving", "why", j.reason, "err", res.err)
		}
		reply(res.err)
		return
	}
	old := *cur
	*cur = res.in
	sv.route(res.in)
	if res.fellBack {
		rec.Error = "new settings failed (" + errString(res.err) + "); the previous settings serve again"
		*p = j.fallback
		reply(res.err)
	} else {
		*p = j.plan
		reply(nil)
		switch {
		case j.kind == "adapt":
			sv.adapted, sv.adaptReason = res.in.width(), j.reason
		case !j.plan.Settings.Adapt.Value || j.plan.Resolution.Source == width.Override:
			sv.adapted, sv.adaptReason = 0, ""
		}
		sv.operatorWidthEndsAdapt(j.plan, res.in.width())
	}
	sv.st.settings(*p)
	rec.ToWidth = res.in.width()
	rec.OK = !res.fellBack
	sv.st.switched(rec)
	sv.st.serving(res.in)
	if old != nil {
		drainOld(old)
	}
	if j.kind != "start" {
		sv.log.Info("switched", "to_pid", res.in.r.proc.PID(), "width", res.in.width(), "mode", j.mode, "took", time.Since(j.began).Round(time.Millisecond).String())
	}
}

// operatorWidthEndsAdapt stops the adaptive loop when a reload's plan,
// now serving, has an operator width: it always wins. The loop stays off
// until speclaunch restarts (adapt.* settings apply at start).
func (sv *server) operatorWidthEndsAdapt(p *plan.Plan, w int) {
	if p.Resolution.Source != width.Override || sv.stopAdapt == nil {
		return
	}
	why := "an operator width is set (" + p.Settings.Width.Src.String() + "); it always wins"
	sv.log.Info("adaptive width off: " + why + "; it stays off until speclaunch restarts")
	stop := sv.stopAdapt
	sv.stopAdapt = nil
	go func() { // the loop may be waiting on the switcher's goroutine
		stop()
		sv.st.setAdapt(adapt.Status{State: adapt.StateNotAdapting, Note: why, Width: w, Updated: time.Now()})
	}()
}

// applyServing takes in a reload's proxy settings that need no engine
// switch: the queue bound and the hold timeout (the switch mode, drain
// timeout and adaptive settings are read from the plan when used).
func (sv *server) applyServing(cur, np *plan.Plan) {
	sv.st.settings(np)
	sv.operatorWidthEndsAdapt(np, np.Resolution.Width)
	if sv.px == nil {
		return
	}
	a, b := cur.Settings, np.Settings
	if a.QueueSize.Value != b.QueueSize.Value || a.HoldTimeout.Value != b.HoldTimeout.Value {
		sv.px.SetLimits(b.QueueSize.Value, b.HoldTimeout.Value)
		sv.log.Info("proxy limits changed", "queue_size", b.QueueSize.Value, "hold_timeout", b.HoldTimeout.Value.String())
	}
}

func (sv *server) route(in *inst) {
	if sv.px != nil {
		sv.px.Route(in.backend)
	}
}

// checkSwitch refuses, before anything is stopped, a plan that cannot
// start: in direct mode a new public port that is taken; behind the proxy a
// new public address is bound first (the old one closes once it is).
func (sv *server) checkSwitch(cur, np *plan.Plan) error {
	samePublic := np.Settings.Port.Value == cur.Settings.Port.Value && np.Settings.Host.Value == cur.Settings.Host.Value
	if np.Settings.Proxy.Value != cur.Settings.Proxy.Value {
		return &badInput{errors.New("server.proxy cannot change under a running server: restart speclaunch to turn the proxy on or off")}
	}
	if samePublic {
		return nil
	}
	if sv.px == nil {
		return checkLaunchable(np, true)
	}
	return sv.pub.rebind(np, sv.px, sv.log)
}

// switchMode picks overlap or drain for a switch; direct mode has only
// stop-then-start.
func (sv *server) switchMode(np *plan.Plan, cur *inst) string {
	if sv.px == nil {
		return "direct"
	}
	mode, why := chooseSwitch(np.Settings.Switch.Value, sv.switchFacts(np, cur))
	if np.Settings.Switch.Value == config.SwitchAuto {
		sv.log.Info("switch mode", "mode", mode, "why", why)
	}
	return mode
}

// adaptedPlan rebuilds the serving plan at the width the adaptive loop
// chose (1 = speculation off).
func (sv *server) adaptedPlan(cur *plan.Plan, w int, reason string) (*plan.Plan, error) {
	// The files as they are now: what a reload would apply.
	l, err := sv.e.load(sv.in)
	if err != nil {
		return nil, err
	}
	np, err := build(sv.e, l, plan.Options{Adapted: w, AdaptReason: reason})
	if err != nil {
		return nil, err
	}
	if np.Resolution.Source == width.Override {
		// The loop stops on it: an operator width always wins.
		return nil, fmt.Errorf("%w: an operator width is set (%s); it always wins", adapt.ErrNotAdapting, np.Settings.Width.Src)
	}
	return np, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// public is the proxy's listening side.
type public struct {
	mu   sync.Mutex
	addr string
	srv  *httpServer
}

func listenPublic(p *plan.Plan, h *proxy.Proxy, log *slog.Logger) (*public, error) {
	addr := net.JoinHostPort(p.Settings.Host.Value, strconv.Itoa(p.Settings.Port.Value))
	srv, err := serveHTTP(addr, h, log)
	if err != nil {
		return nil, &badInput{fmt.Errorf("port %d on %s is not available (%v); stop what holds it or set --port / server.port / LLAMA_ARG_PORT", p.Settings.Port.Value, p.Settings.Host.Value, err)}
	}
	return &public{addr: addr, srv: srv}, nil
}

// rebind moves the public address: the new one is bound first, so a taken
// port rejects the reload and the old address keeps serving.
func (pb *public) rebind(np *plan.Plan, h *proxy.Proxy, log *slog.Logger) error {
	addr := net.JoinHostPort(np.Settings.Host.Value, strconv.Itoa(np.Settings.Port.Value))
	srv, err := serveHTTP(addr, h, log)
	if err != nil {
		return &badInput{fmt.Errorf("port %d on %s is not available (%v); the proxy stays on %s", np.Settings.Port.Value, np.Settings.Host.Value, err, pb.addr)}
	}
	pb.mu.Lock()
	old := pb.srv
	pb.srv, pb.addr = srv, addr
	pb.mu.Unlock()
	log.Info("proxy moved to a new address", "addr", addr)
	go old.shutdown(30 * time.Second)
	return nil
}

func (pb *public) stopAccepting() {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	pb.srv.closeListener()
}

func (pb *public) close() {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	pb.srv.shutdown(2 * time.Second)
}
