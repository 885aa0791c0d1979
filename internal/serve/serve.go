// Package serve is the launcher behind `speclaunch serve`: it builds a plan
// once per switch, drives package server's pure machine (server.Step,
// through server.Runtime), owns the public listener, the reload and watch
// loop, the status page and the metrics, and runs the adaptive width loop
// beside them. cli turns flags into a Config and a first plan and calls
// Run; nothing here parses a flag.
//
// The life of a switch: a file change or SIGHUP (feed) reloads the files
// through the Loader and builds the plan (reload); submit checks what
// needs no engine (checkSwitch), picks the switch mode and hands the plan
// to the runtime as a server.Job; the machine asks the launcher to start
// the engine through server.Launcher (runtimeSide: Launch is startInst,
// BeforeTraffic the adaptive probe, Notify what happened: serving,
// switched, adopted, stopping, exited, phase), routes to it and stops the
// old one; the launcher then takes the plan in force (adopt).
//
// A controller beside the runtime (the adaptive width loop; the schedule
// follower, follow.go) talks to it through Runtime, which the launcher
// implements: SwitchWidth(ctx, w, reason) asks for a switch to width w
// (1 = speculation off) and waits for its outcome; Load() and Generating()
// read the proxy's count of clients' generation requests, the server's and
// the serving engine's (SwitchLoad, beside them, switches to the
// schedule's bucket for a load). The launcher drives a
// controller through Controller: a probe of each new engine before it
// takes traffic, and Run once the first engine serves.
//
// The launcher's state is grouped by owner (state.go): what Run wires up
// is read-only after; the reload loop's files are its goroutine's alone;
// the plan in force and the loops beside the runtime each have one lock.
// The engine command is built once per plan (plan.Build); a start behind
// the proxy fills in its loopback port (engine.Launch.At).
package serve

import (
	"context"
	"log/slog"
	"time"

	"github.com/speclaunch/speclaunch/internal/adapt"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/instance"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/secret"
)

// Runtime is what a controller beside serve's runtime asks of it and reads.
type Runtime interface {
	// SwitchWidth switches to the plan in force rebuilt at width w (1 =
	// speculation off) for reason, and returns once the switch ended.
	// took is the switch's own time, as the runtime recorded it.
	SwitchWidth(ctx context.Context, w int, reason string) (took time.Duration, err error)
	// Generating is the clients' generation requests on the serving
	// engine now.
	Generating() int
	// Load is the server's clients' generation requests: on every engine
	// (a draining one's included) and those the proxy holds. Other
	// requests (/v1/models, /metrics, tokenize calls, the launcher's own)
	// fill no batch and are not the load.
	Load() int
	// Busy says why no switch can start now ("" when one can).
	Busy() string
}

// Controller is a loop beside the runtime that asks it for switches: the
// adaptive width (the shell of internal/control, control.go).
type Controller interface {
	// BeforeTraffic probes a new engine before the proxy routes to it
	// (bounded by ctx); an error is logged and the engine serves anyway.
	// held says requests wait meanwhile (no engine serves), else the
	// engine it replaces serves them.
	BeforeTraffic(ctx context.Context, t adapt.Target, held bool) error
	// BeforeTrafficLine says the probe before traffic under way at now,
	// for a switch asked for meanwhile, which waits for it: the engine,
	// the bound, the time left ("" when none runs).
	BeforeTrafficLine(now time.Time) string
	// Run runs until ctx ends or the loop gives up (adapt.ErrNotAdapting).
	Run(ctx context.Context) error
}

var _ Runtime = (*launcher)(nil)

// Loader reads the profile and policy files as they are now: cli's one
// path from flags, environment, profile and policy to settings.
type Loader interface {
	// Load reads the files. Where the settings load and a policy file they
	// name does not, it returns beside the error a Load whose Files name
	// them (Build is then not called), so that their fix is watched.
	Load() (Load, error)
}

// Load is one reading of the files.
type Load interface {
	// Files are the profile and policy files read (the ones watched).
	Files() []string
	// Settings are the settings read.
	Settings() config.Settings
	// Build makes the plan of this reading.
	Build(o plan.Options) (*plan.Plan, error)
	// LogNotices logs what this reading says of the files as they are now
	// (an empty tuned layer), as the start logged it: a reload says it
	// again, where the settings' other notices were said once at start.
	LogNotices(log *slog.Logger)
}

// Config is what serve runs with, besides the first plan.
type Config struct {
	Loader Loader
	// First is the reading the first plan was built from.
	First Load
	Log   *slog.Logger
	// Engine is how engine n of settings s is started: where its output
	// goes and how its lines look, the client of the launcher's own
	// requests to it.
	Engine func(s config.Settings, n int) instance.Options
	// Secrets masks the status page.
	Secrets *secret.Redactor
	// Done ends serve as SIGTERM does (the parent context).
	Done <-chan struct{}
	// MayVanish are watched files whose deletion is a reload (the tuned
	// layer), where a profile deleted is an edit under way.
	MayVanish []string
}

// Run starts p's engine and serves until a signal, a fatal exit or Done.
func Run(c Config, p *plan.Plan) error {
	if c.Secrets == nil {
		c.Secrets = &secret.Redactor{}
	}
	sv := &launcher{c: c, log: c.Log, w: watched{wasEmpty: map[string]bool{}}, force: inForce{load: c.First}}
	if c.First != nil {
		sv.followFiles(c.First.Files()) // no watcher yet: the files and which were empty
	}
	return sv.run(p)
}
