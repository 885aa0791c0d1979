package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/speclaunch/speclaunch/config"
	"github.com/speclaunch/speclaunch/plan"
	"github.com/speclaunch/speclaunch/supervise"
	"github.com/speclaunch/speclaunch/watch"
)

// ServeCmd starts and supervises the engine.
type ServeCmd struct {
	LaunchFlags `embed:""`

	DryRun          bool   `help:"Print what would run (resolution, command, environment) and exit: 0 when it could start, 2 when it says it would fail."`
	ReadyTimeout    string `help:"How long to wait for the engine's /health (env: $MLXCEL_READY_TIMEOUT; default 15m)." placeholder:"DUR" group:"Serve"`
	StopTimeout     string `help:"SIGTERM grace before SIGKILL when stopping the engine (env: $MLXCEL_STOP_TIMEOUT; default 20s)." placeholder:"DUR" group:"Serve"`
	Restart         string `help:"Restart policy: no or on-failure (capped exponential backoff) (env: $MLXCEL_RESTART)." placeholder:"POLICY" group:"Serve"`
	StrictWidth     bool   `help:"Stop with exit code 3 when the engine runs another width than resolved, or declines speculation (env: $MLXCEL_STRICT_WIDTH)." group:"Serve"`
	NoProbe         bool   `help:"Skip the llama.cpp verification request (the width is then not verified) (env: $MLXCEL_PROBE=false)." group:"Serve"`
	Watch           bool   `help:"Reload on profile/policy changes; --watch=false turns it off (env: $MLXCEL_WATCH; default true when a profile or policy file is given)." group:"Serve"`
	RawEngineOutput bool   `help:"Pass the engine's output through untouched instead of prefixing its lines (env: $MLXCEL_RAW_ENGINE_OUTPUT)." group:"Serve"`
}

// exitWidthMismatch is serve's exit code under --strict-width.
const exitWidthMismatch = 3

func (c *ServeCmd) input(e *Env) config.Input {
	extra := map[string]string{}
	if c.NoProbe {
		extra["probe"] = "false"
	}
	in := c.LaunchFlags.input(e.kctx, e.Getenv, extra, e.Passthrough)
	return in
}

// Run implements `speclaunch serve`.
func (c *ServeCmd) Run(e *Env) error {
	if err := c.checkArgs(); err != nil {
		return err
	}
	in := c.input(e)
	l, err := e.load(in)
	if err != nil {
		return err
	}
	s := l.Settings
	log := newLogger(e.Stderr, s.LogFormat.Value, s.LogLevel.Value, e.Getenv)
	for _, n := range l.Notices {
		log.Info(n.Msg)
	}
	if !c.DryRun {
		// Once, at start: what every setting is and where it came from,
		// as `profile show` prints them.
		log.Info("effective settings", settingsAttrs(settingsMap(s), s.LogFormat.Value)...)
	}
	p, err := build(e, l, plan.Options{})
	if err != nil {
		return err
	}
	if c.DryRun {
		writeResolution(e.Stdout, p, l.Notices)
		if err := checkLaunchable(p, false); err != nil {
			fmt.Fprintf(e.Stdout, "would fail: %v\n", err)
			return usage(fmt.Errorf("dry run: the launch would fail: %w", err), "")
		}
		return nil
	}
	if err := checkLaunchable(p, true); err != nil {
		return err
	}
	sv := &server{e: e, in: in, log: log, files: l.Files}
	return sv.run(p)
}

type server struct {
	launched bool
	e        *Env
	in       config.Input
	log      *slog.Logger
	files    []string
}

func (sv *server) opts(s config.Settings) startOptions {
	prefix := "engine | "
	if s.RawEngineOutput.Value {
		prefix = ""
	}
	return startOptions{Out: sv.e.Stderr, Prefix: prefix, Raw: s.RawEngineOutput.Value, ReadyTimeout: s.ReadyTimeout.Value, StopTimeout: s.StopTimeout.Value, Interrupt: sv.e.Ctx}
}

// launch starts, waits for ready and verifies. A verification problem under
// --strict-width stops the engine and returns exit code 3.
func (sv *server) launch(ctx context.Context, p *plan.Plan, what string) (*running, error) {
	logPlan(sv.log, p, what)
	r, err := startEngine(ctx, p, sv.opts(p.Settings))
	if err != nil {
		// An engine that exits while starting: the launcher exits with the
		// engine's code, after showing its last lines.
		var ee *supervise.ExitedError
		if errors.As(err, &ee) && ee.Code > 0 {
			return nil, exitCode(ee.Code, err)
		}
		return nil, err
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
			return nil, exitCode(exitWidthMismatch, fmt.Errorf("--strict-width: %s", chk.Problem))
		}
	case chk.Verified:
		sv.log.Info("width verified", "width", chk.Observed.Width, "resolved_from", string(p.Resolution.Source), "read_from", chk.ReadFrom)
	case chk.Note != "" && p.Resolution.Source != "off":
		// Not a mismatch, but the width is unproven: say so louder than info.
		sv.log.Warn("width not verified: " + chk.Note)
	case chk.Note != "":
		sv.log.Info("width check: " + chk.Note)
	}
	return r, nil
}

func (sv *server) run(p *plan.Plan) error {
	ctx := sv.e.Ctx
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// The launcher's own lifetime context: signals are handled below, so
	// the engine is not cancelled by Main's signal context behind our back.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()

	r, err := sv.launch(runCtx, p, "starting engine")
	if err != nil {
		return err
	}

	var changes <-chan watch.Change
	if p.Settings.Watch.Value && len(sv.files) > 0 {
		w, err := watch.New(sv.files, watch.Options{Debounce: 150 * time.Millisecond, Poll: 5 * time.Second, Signals: true, Logger: sv.log})
		if err != nil {
			sv.log.Warn("cannot watch for changes; reload with a restart", "err", err)
		} else {
			defer w.Close()
			changes = w.Changes()
			sv.log.Info("watching for changes", "files", strings.Join(sv.files, ", "))
		}
	}
	// Without a watcher SIGHUP would still reach the launcher, whose default
	// action is to exit: answer it instead.
	var hup chan os.Signal
	if changes == nil {
		hup = make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}
	backoff := supervise.Backoff{Initial: time.Second, Max: 30 * time.Second, Reset: time.Minute}
	stopping := func(why string) error {
		sv.log.Info("stopping engine", "why", why)
		r.proc.Stop(p.Settings.StopTimeout.Value)
		code := r.proc.ExitCode()
		sv.log.Info("engine stopped", "exit_code", code)
		return codeOf(code)
	}
	parentDone := sv.e.parent.Done()
	for {
		select {
		case <-parentDone:
			return stopping("context cancelled")
		case sig := <-sigs:
			sv.log.Info("stopping engine", "signal", sig.String())
			r.proc.Signal(sig)
			select {
			case <-r.proc.Done():
			case <-time.After(p.Settings.StopTimeout.Value):
				sv.log.Warn("engine did not stop in time; killing it", "after", p.Settings.StopTimeout.Value.String())
				r.proc.Stop(0)
			}
			<-r.proc.Done()
			code := r.proc.ExitCode()
			sv.log.Info("engine stopped", "exit_code", code)
			return codeOf(code)
		case <-r.proc.Done():
			code := r.proc.ExitCode()
			ranFor := time.Since(r.start)
			if code != 0 && p.Settings.Restart.Value == config.RestartOnFailure {
				wait := backoff.Next(ranFor)
				sv.log.Error("engine exited; restarting", "exit_code", code, "ran_for", ranFor.Round(time.Second).String(), "backoff", wait.String(), "last", lastLine(r.proc.Tail()))
				select {
				case <-time.After(wait):
				case sig := <-sigs:
					sv.log.Info("not restarting", "signal", sig.String())
					return codeOf(code)
				}
				nr, err := sv.launch(runCtx, p, "restarting engine")
				if err != nil {
					sv.log.Error("restart failed", "err", err)
					return err
				}
				r = nr
				continue
			}
			if code != 0 {
				sv.log.Error("engine exited", "exit_code", code, "last", lastLine(r.proc.Tail()))
			} else {
				sv.log.Info("engine exited", "exit_code", 0)
			}
			return codeOf(code)
		case <-hup:
			sv.log.Info("SIGHUP: nothing to reload (no profile or policy file is watched; settings come from flags and the environment)")
		case ch, ok := <-changes:
			if !ok {
				changes = nil
				continue
			}
			np, changed, err := sv.reload(p, ch)
			if err != nil || !changed {
				continue
			}
			sv.log.Info("restarting engine for the new settings", "changed", diffArgv(p.Launch.Argv, np.Launch.Argv))
			r.proc.Stop(p.Settings.StopTimeout.Value)
			if np.Settings.Port.Value != p.Settings.Port.Value || np.Settings.Host.Value != p.Settings.Host.Value {
				if err := checkLaunchable(np, true); err != nil {
					sv.log.Error("new settings cannot start; restarting the old ones", "err", err)
					np = p
				}
			}
			nr, err := sv.launch(runCtx, np, "restarting engine")
			if err != nil {
				sv.log.Error("engine with the new settings failed; going back to the previous ones", "err", err)
				nr, err = sv.launch(runCtx, p, "restarting engine")
				if err != nil {
					return err
				}
				np = p
			}
			p, r = np, nr
		}
	}
}

// reload re-reads profile and policy files and rebuilds the plan. A bad
// file is logged with its file and line and changes nothing.
func (sv *server) reload(cur *plan.Plan, ch watch.Change) (*plan.Plan, bool, error) {
	sv.log.Info("reloading", "file", ch.Path, "why", ch.Reason)
	l, err := sv.e.load(sv.in)
	if err != nil {
		sv.log.Error("reload rejected; the engine keeps running with the previous settings", "err", err)
		return nil, false, err
	}
	np, err := build(sv.e, l, plan.Options{})
	if err == nil {
		err = checkLaunchable(np, false)
	}
	if err != nil {
		sv.log.Error("reload rejected; the engine keeps running with the previous settings", "err", err)
		return nil, false, err
	}
	if slices.Equal(np.Launch.Argv, cur.Launch.Argv) && slices.Equal(np.Launch.Env, cur.Launch.Env) {
		sv.log.Info("reload: engine command unchanged; nothing to do", "width", np.Resolution.Width)
		return np, false, nil
	}
	return np, true, nil
}

func codeOf(code int) error {
	if code == 0 {
		return nil
	}
	return exitCode(code, errors.New(""))
}

func lastLine(tail []string) string {
	if len(tail) == 0 {
		return ""
	}
	return tail[len(tail)-1]
}

// diffArgv summarises what changed between two command lines.
func diffArgv(a, b []string) string {
	var out []string
	for _, x := range b {
		if !slices.Contains(a, x) {
			out = append(out, "+"+x)
		}
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, "-"+x)
		}
	}
	if len(out) == 0 {
		return "environment"
	}
	return strings.Join(out, " ")
}
