package cli

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/instance"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/watch"
)

// ServeCmd starts and supervises the engine.
type ServeCmd struct {
	LaunchFlags `embed:""`

	DryRun          bool   `help:"Print what would run (resolution, command, environment) and exit: 0 when it could start, 2 when it says it would fail."`
	ReadyTimeout    string `help:"How long to wait for the engine's /health." placeholder:"DUR" group:"Serve"`
	StopTimeout     string `help:"SIGTERM grace before SIGKILL when stopping the engine." placeholder:"DUR" group:"Serve"`
	Restart         string `help:"Restart policy: no or on-failure (capped exponential backoff)." placeholder:"POLICY" group:"Serve"`
	StrictWidth     bool   `help:"Stop with exit code 3 when the engine runs another width than resolved, or declines speculation." group:"Serve"`
	Probe           bool   `negatable:"" default:"true" help:"Verify the running width with one short llama.cpp request; --no-probe skips it (the width is then not verified)." group:"Serve"`
	Watch           bool   `help:"Reload on profile/policy changes; --watch=false turns it off; it watches when a profile or policy file is given." group:"Serve"`
	RawEngineOutput bool   `help:"Pass the engine's output through untouched instead of prefixing its lines." group:"Serve"`

	Proxy           bool   `help:"Serve through speclaunch's own front proxy on --host/--port, the engine on a loopback port, so engine switches fail no request; --proxy=false runs the engine on --host/--port directly." group:"Proxy"`
	Switch          string `help:"How an engine is replaced (reload, restart, adaptive width): overlap (new engine beside the old), drain (hold requests while one engine is swapped) or auto (drain when two copies would not fit in GPU memory)." placeholder:"MODE" group:"Proxy"`
	DrainTimeout    string `help:"How long an old engine may finish its requests before it is stopped." placeholder:"DUR" group:"Proxy"`
	HoldTimeout     string `help:"How long a request may wait while the engine is switched before it gets 503." placeholder:"DUR" group:"Proxy"`
	ShutdownTimeout string `help:"After SIGTERM, how long requests in flight and held may finish before the engine is stopped; /health answers 503 at once and new requests get 503; the default stays under Kubernetes' 30s grace period." placeholder:"DUR" group:"Proxy"`
	HangTimeout     string `help:"An engine that answers nothing (not even /health) for this long is taken as failed: killed, and the restart policy applies; 0 or off turns it off." placeholder:"DUR" group:"Proxy"`
	QueueSize       string `help:"Requests held at most during a switch; more get 503 at once." placeholder:"N" group:"Proxy"`
	Adapt           bool   `help:"Learn the width from live traffic and switch to the best one (llama.cpp, and the sim); an operator width turns it off; tuned in the profile's [adapt] table or by variables; see docs/adaptive.md." group:"Proxy"`
}

// exitWidthMismatch is serve's exit code under --strict-width.
const exitWidthMismatch = 3

func (c *ServeCmd) input(e *Env) config.Input {
	return c.LaunchFlags.input(e, nil, e.Passthrough)
}

// Run implements `speclaunch serve`.
func (c *ServeCmd) Run(e *Env) error {
	if err := c.checkArgs(); err != nil {
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
	sv := &launcher{e: e, in: in, log: log, wasEmpty: map[string]bool{}, good: l}
	sv.followFiles(l.Files) // no watcher yet: the files and which were empty
	return sv.run(p)
}

// opts are the start options of engine n: its lines are prefixed
// "engine n | " (in JSON, "engine": n), so that two engines of an overlap
// switch can be told apart.
func (sv *launcher) opts(s config.Settings, n int) instance.Options {
	prefix := fmt.Sprintf("engine %d | ", n)
	if s.RawEngineOutput.Value {
		prefix = ""
	}
	o := instance.Options{Out: sv.e.Stderr, Prefix: prefix, Raw: s.RawEngineOutput.Value, ReadyTimeout: s.ReadyTimeout.Value, StopTimeout: s.StopTimeout.Value, Interrupt: sv.e.Ctx, Client: engineClient}
	if s.LogFormat.Value == "json" {
		o.Format = func(stream, line string) []byte { return engineLineJSON(n, stream, line) }
	}
	return o
}

// reload re-reads profile and policy files and rebuilds the plan. A bad
// file is logged with its file and line and changes nothing.
func (sv *launcher) reload(cur *plan.Plan, ch watch.Change) (*plan.Plan, *loaded, bool, error) {
	if ch.Path == "" {
		sv.log.Info("reloading", "files", strings.Join(sv.files, ", "), "why", ch.Reason)
	} else {
		sv.log.Info("reloading", "file", ch.Path, "why", ch.Reason)
	}
	// The watcher skips an empty file, but the file is read again here: a
	// truncate-then-write can be caught halfway after the watcher's read,
	// or by a SIGHUP. A profile that had content and is empty now would
	// load as all defaults. (One that was empty when serve started stays
	// a valid, empty profile.)
	for _, f := range sv.files {
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 && !sv.wasEmpty[f] {
			sv.log.Warn("reload: the file is empty (a write caught halfway?); not applied: waiting for the next write", "file", f)
			return nil, nil, false, fmt.Errorf("%s is empty", f)
		}
	}
	l, err := sv.e.loadNamed(sv.in)
	if err != nil {
		if l != nil {
			sv.followFiles(l.Files) // a policy file named but missing or bad: its fix is a change
		}
		sv.log.Error("reload rejected; the engine keeps running with the previous settings", "err", err)
		return nil, nil, false, err
	}
	np, err := build(sv.e, l, plan.Options{})
	sv.mu.Lock() // the runtime's goroutine sets them after an adaptive switch
	adapted, why := sv.adapted, sv.adaptReason
	sv.mu.Unlock()
	if err == nil && adapted > 0 && np.Settings.Adapt.Value {
		// The width the adaptive loop chose stays (an operator width still wins).
		np, err = build(sv.e, l, plan.Options{Adapted: adapted, AdaptReason: why})
	}
	if err == nil {
		err = checkLaunchable(np, false)
	}
	if err != nil {
		sv.log.Error("reload rejected; the engine keeps running with the previous settings", "err", err)
		return nil, nil, false, err
	}
	if a, b := cur.Settings, np.Settings; a.Adapt.Value != b.Adapt.Value || a.AdaptMaxWidth.Value != b.AdaptMaxWidth.Value ||
		a.AdaptExplore.Value != b.AdaptExplore.Value || a.AdaptMargin.Value != b.AdaptMargin.Value ||
		a.AdaptMinCycles.Value != b.AdaptMinCycles.Value || a.AdaptWindow.Value != b.AdaptWindow.Value ||
		a.AdaptTrials.Value != b.AdaptTrials.Value {
		sv.log.Warn("reload: adapt.* settings apply when speclaunch starts; restart it for this change to take effect")
	}
	if cur.Settings.Proxy.Value != np.Settings.Proxy.Value {
		sv.log.Warn("reload: server.proxy applies when speclaunch starts; restart it to turn the proxy on or off")
	}
	if slices.Equal(np.Launch.Argv, cur.Launch.Argv) && slices.Equal(np.Launch.Env, cur.Launch.Env) {
		return np, l, false, nil
	}
	return np, l, true, nil
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

// diffArgv says what changed between two engine command lines, flag by
// flag: "--draft-block-size 4 → 3", "+--no-mmap", "-(--spec-draft-n-max 3)"
// (removed).
func diffArgv(a, b []string) string {
	pa, pb := argPairs(a), argPairs(b)
	var out []string
	for _, f := range pb.order {
		va, ok := pa.vals[f]
		switch {
		case !ok:
			out = append(out, "+"+strings.TrimSpace(f+" "+pb.vals[f]))
		case va != pb.vals[f]:
			out = append(out, fmt.Sprintf("%s %s → %s", f, va, pb.vals[f]))
		}
	}
	for _, f := range pa.order {
		if _, ok := pb.vals[f]; !ok {
			out = append(out, "-("+strings.TrimSpace(f+" "+pa.vals[f])+")")
		}
	}
	if len(out) == 0 {
		return "environment"
	}
	return strings.Join(out, ", ")
}

type pairs struct {
	order []string
	vals  map[string]string
}

// argPairs reads argv as flags with their values (a flag followed by a
// word that is not a flag); the program and bare words are keyed by
// position.
func argPairs(argv []string) pairs {
	p := pairs{vals: map[string]string{}}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		key, val := a, ""
		switch {
		case strings.HasPrefix(a, "-") && strings.Contains(a, "="):
			key, val, _ = strings.Cut(a, "=")
		case strings.HasPrefix(a, "-") && i+1 < len(argv) && !isFlag(argv[i+1]):
			val = argv[i+1]
			i++
		case !strings.HasPrefix(a, "-"):
			key, val = fmt.Sprintf("arg %d", i), a
		}
		if _, dup := p.vals[key]; !dup {
			p.order = append(p.order, key)
		}
		p.vals[key] = val
	}
	return p
}

// isFlag: "-x" or "--xy", not a negative number.
func isFlag(s string) bool {
	return strings.HasPrefix(s, "-") && len(s) > 1 && (s[1] < '0' || s[1] > '9') && s[1] != '.'
}
