package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"syscall"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/instance"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/serve"
)

// ServeCmd starts and supervises the engine.
type ServeCmd struct {
	LaunchFlags `embed:""`
	ListenFlags `embed:""`

	DryRun          bool   `help:"Print what would run (resolution, command, environment) and exit: 0 when it could start, 2 when it says it would fail. A port in use is noted, not a failure (a dry run often checks a profile beside the server that holds it)."`
	ReadyTimeout    string `help:"How long to wait for the engine's /health." placeholder:"DUR" group:"Serve"`
	StopTimeout     string `help:"SIGTERM grace before SIGKILL when stopping the engine." placeholder:"DUR" group:"Serve"`
	Restart         string `help:"Restart policy: no or on-failure (capped exponential backoff)." placeholder:"POLICY" group:"Serve"`
	StrictWidth     bool   `negatable:"" help:"Stop with exit code 3 when the engine runs another width than resolved, or declines speculation." group:"Serve"`
	Probe           bool   `negatable:"" default:"true" help:"Verify the running width with one short llama.cpp request; --no-probe skips it (the width is then not verified)." group:"Serve"`
	Watch           bool   `negatable:"" default:"true" help:"Reload on profile/policy changes; --no-watch turns it off; it watches when a profile or policy file is given." group:"Serve"`
	RawEngineOutput bool   `negatable:"" help:"Pass the engine's output through as it comes (API keys still masked) instead of prefixing its lines." group:"Serve"`

	Proxy           bool   `negatable:"" default:"true" help:"Serve through speclaunch's own front proxy on --host/--port, the engine on a loopback port, so engine switches fail no request; --no-proxy runs the engine on --host/--port directly." group:"Proxy"`
	Switch          string `help:"How an engine is replaced (reload, restart, adaptive width): overlap (new engine beside the old), drain (hold requests while one engine is swapped) or auto (drain when two copies would not fit in GPU memory)." placeholder:"MODE" group:"Proxy"`
	DrainTimeout    string `help:"How long an old engine may finish its requests before it is stopped." placeholder:"DUR" group:"Proxy"`
	HoldTimeout     string `help:"How long a request may wait while the engine is switched before it gets 503." placeholder:"DUR" group:"Proxy"`
	ShutdownTimeout string `help:"After SIGTERM, how long requests in flight and held may finish before the engine is stopped; /health answers 503 at once and new requests get 503; the default stays under Kubernetes' 30s grace period." placeholder:"DUR" group:"Proxy"`
	HangTimeout     string `help:"An engine that answers nothing (not even /health) for this long is taken as failed: killed, and the restart policy applies; 0 or off turns it off." placeholder:"DUR" group:"Proxy"`
	QueueSize       string `help:"Requests held at most during a switch; more get 503 at once." placeholder:"N" group:"Proxy"`
	Adapt           bool   `negatable:"" help:"Learn the width from live traffic and switch to the best one (llama.cpp, and the sim); an operator width turns it off; tuned in the profile's [adapt] table or by variables; see docs/adaptive.md." group:"Proxy"`
}

// exitWidthMismatch is serve's exit code under --strict-width.
const exitWidthMismatch = serve.ExitWidthMismatch

func (c *ServeCmd) input(e *Env) config.Input {
	return c.LaunchFlags.input(e, nil, e.Passthrough)
}

// Run implements `speclaunch serve`.
func (c *ServeCmd) Run(e *Env) error {
	if err := c.checkArgs(e); err != nil {
		return err
	}
	in := c.input(e)
	// Until the settings load, --log-format or MLXCEL_LOG_FORMAT as given
	// decides whether an error is a JSON line; then the effective setting.
	e.logJSON = logsJSON(c.LogFormat, e.Getenv)
	l, err := e.load(in)
	if err != nil {
		return err
	}
	s := l.Settings
	e.logJSON = s.LogFormat.Value == "json"
	log := newLogger(e.logTo(), e.secrets, s.LogFormat.Value, s.LogLevel.Value, e.Getenv)
	if !c.DryRun {
		// A dry run says the notices once, in its notes (writeResolution),
		// as resolve does: it logged them as well.
		logNotices(log, l.Notices)
		// Once, at start: what every setting is and where it came from,
		// as `profile show` prints them.
		log.Info("effective settings", settingsAttrs(settingsMap(s), s.LogFormat.Value)...)
	}
	p, err := build(e, l, plan.Options{})
	if err != nil {
		if c.DryRun {
			logNotices(log, l.Notices) // no notes come: the notices said before the error
		}
		return err
	}
	if c.DryRun {
		writeResolution(e.Stdout, p, l.Notices)
		if err := serve.Launchable(p, false); err != nil {
			fmt.Fprintf(e.Stdout, "would fail: %v\n", err)
			return usage(fmt.Errorf("dry run: the launch would fail: %w", err), "")
		}
		// A port in use is not a reason to fail a dry run: it is most
		// often run beside the server it checks a new profile for. Any
		// other refusal (an address this host lacks, a privileged port) is.
		if err := serve.PortFree(s.Host.Value, s.Port.Value); errors.Is(err, syscall.EADDRINUSE) {
			fmt.Fprintf(e.Stdout, "note: port %d on %s is in use now: serve would refuse it until what holds it stops\n", s.Port.Value, s.Host.Value)
		} else if err != nil {
			if err := serve.Launchable(p, true); err != nil {
				fmt.Fprintf(e.Stdout, "would fail: %v\n", err)
				return usage(fmt.Errorf("dry run: the launch would fail: %w", err), "")
			}
		}
		return nil
	}
	if err := serve.Launchable(p, true); err != nil {
		return err
	}
	return serve.Run(serve.Config{
		Loader:  serveLoader{e, in},
		First:   serveLoad{e, l},
		Log:     log,
		Engine:  func(s config.Settings, n int) instance.Options { return engineOptions(e, s, n) },
		Secrets: e.secrets,
		Done:    e.parent.Done(),
		// No tuned layer is a setting of its own: deleting it drops its
		// schedules (docs/schedule.md). A --policy file is named on
		// purpose, the default layer too when --policy names it: one
		// deleted is waited for.
		MayVanish: []string{tunedOwn(tunedLayer(e.Getenv), l.Settings)},
	}, p)
}

// engineOptions are the start options of engine n: its lines are prefixed
// "engine n | " (in JSON, "engine": n), so that two engines of an overlap
// switch can be told apart. In text they are cut to a screen's width
// (engineLineText), except at --log-level debug; JSON and
// --raw-engine-output keep them whole.
func engineOptions(e *Env, s config.Settings, n int) instance.Options {
	prefix := fmt.Sprintf("engine %d | ", n)
	if s.RawEngineOutput.Value {
		prefix = ""
	}
	o := instance.Options{Out: e.Stderr, Secrets: e.secrets, Prefix: prefix, Raw: s.RawEngineOutput.Value, ReadyTimeout: s.ReadyTimeout.Value, StopTimeout: s.StopTimeout.Value, Interrupt: e.Ctx, Client: engineClient}
	switch {
	case s.LogFormat.Value == "json":
		o.Format = func(stream, line string) []byte { return engineLineJSON(n, stream, line) }
	case s.LogLevel.Value != "debug":
		o.Format = func(_, line string) []byte { return engineLineText(prefix, line) } // redacted before (Secrets)
	}
	return o
}

// serveLoader is serve's way to the files: load and build, as at start.
type serveLoader struct {
	e  *Env
	in config.Input
}

func (sl serveLoader) Load() (serve.Load, error) {
	l, err := sl.e.loadNamed(sl.in)
	if l == nil {
		return nil, err
	}
	return serveLoad{sl.e, l}, err
}

// serveLoad is one reading of the files, for serve.
type serveLoad struct {
	e *Env
	l *loaded
}

func (sl serveLoad) Files() []string { return sl.l.Files }

func (sl serveLoad) Settings() config.Settings { return sl.l.Settings }

func (sl serveLoad) Build(o plan.Options) (*plan.Plan, error) { return build(sl.e, sl.l, o) }

// LogNotices logs the notices of the files as this reading found them,
// as the start logged them (logNotices): a tuned layer emptied under a
// running serve is said on the reload that reads it.
func (sl serveLoad) LogNotices(log *slog.Logger) { logNotices(log, sl.l.FileNotices) }
