package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/config"
	"github.com/speclaunch/speclaunch/plan"
	"github.com/speclaunch/speclaunch/profiles"
	"github.com/speclaunch/speclaunch/secret"
)

// ProfileCmd groups the profile subcommands.
type ProfileCmd struct {
	Init     ProfileInitCmd     `cmd:"" help:"Write a commented example profile."`
	Show     ProfileShowCmd     `cmd:"" help:"Show the effective settings, each with where it came from (flag, env, profile file:line, default)."`
	Validate ProfileValidateCmd `cmd:"" help:"Check a profile: syntax, unknown keys, types, values, its policy entries."`
}

// ProfileInitCmd writes an embedded example.
type ProfileInitCmd struct {
	Path  string `arg:"" optional:"" help:"Where to write it (default profiles/NAME.toml for --from, else profiles/example.toml); - for stdout." placeholder:"PATH"`
	From  string `help:"Example to start from: example (every key, commented), demo (sim), qwen35-4b-dflash (mlxcel), llama-draft (llama.cpp)." default:"example"`
	Force bool   `help:"Overwrite an existing file."`
}

// Run implements `profile init`.
func (c *ProfileInitCmd) Run(e *Env) error {
	data, err := profiles.Example(c.From)
	if err != nil {
		return usage(err, "")
	}
	path := c.Path
	if path == "" {
		path = filepath.Join("profiles", c.From+".toml")
	}
	if path == "-" {
		_, err := e.Stdout.Write(data)
		return err
	}
	if _, err := os.Stat(path); err == nil && !c.Force {
		// Run twice, or in this repository (which ships the examples), the
		// default path already holds the very example: that is done, not
		// an error. Anything else there is someone's work.
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
			fmt.Fprintf(e.Stdout, "%s already holds that example (--from %s); edit it, then: speclaunch resolve --profile %s\n", path, c.From, path)
			return nil
		}
		return usage(fmt.Errorf("%s already exists", path), "pass --force to overwrite it, or give another path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "wrote %s; edit it, then: speclaunch resolve --profile %s\n", path, path)
	return nil
}

// ProfileShowCmd prints the effective settings.
type ProfileShowCmd struct {
	LaunchFlags `embed:""`
	JSON        bool `help:"Print JSON."`
}

// Run implements `profile show`.
func (c *ProfileShowCmd) Run(e *Env) error {
	if err := c.checkArgs(); err != nil {
		return err
	}
	l, err := e.load(c.input(e.kctx, e.Getenv, nil, e.Passthrough))
	if err != nil {
		return err
	}
	m := settingsMap(l.Settings)
	if c.JSON {
		return writeJSON(e.Stdout, map[string]any{"profile": l.Settings.ProfilePath, "settings": m, "policy_layers": l.Policy.Layers})
	}
	if l.Settings.ProfilePath != "" {
		fmt.Fprintf(e.Stdout, "profile %s\n", l.Settings.ProfilePath)
	} else {
		fmt.Fprintln(e.Stdout, "no profile (set --profile or MLXCEL_PROFILE)")
	}
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(e.Stdout, "  %-18s %-40s %s\n", k, fmt.Sprint(m[k].Value), m[k].Source)
	}
	fmt.Fprintf(e.Stdout, "policy layers: %s\n", strings.Join(l.Policy.Layers, " < "))
	for _, n := range l.Notices {
		fmt.Fprintf(e.Stdout, "%s: %s\n", n.Level, n.Msg)
	}
	return nil
}

// ProfileValidateCmd checks one profile.
type ProfileValidateCmd struct {
	LaunchFlags `embed:""`
}

// Run implements `profile validate`: the same load serve does, so a profile
// that validates is one serve accepts.
func (c *ProfileValidateCmd) Run(e *Env) error {
	if err := c.checkArgs(); err != nil {
		return err
	}
	if c.Profile == "" && e.Getenv("MLXCEL_PROFILE") == "" {
		return usage(errors.New("no profile given"), "pass --profile PATH|NAME")
	}
	l, err := e.load(c.input(e.kctx, e.Getenv, nil, e.Passthrough))
	if err != nil {
		return err
	}
	if _, err := build(e, l, plan.Options{}); err != nil {
		return err
	}
	// The [bench] table is checked the way bench reads it.
	if _, _, _, _, err := (&BenchCmd{}).options(e.Ctx, l.Settings, l.Profile, nil); err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "%s: ok\n", l.Settings.ProfilePath)
	return nil
}

// settingsMap flattens Settings for show/--json.
func settingsMap(s config.Settings) map[string]Setting {
	m := map[string]Setting{}
	add := func(name string, v any, src config.Source) { m[name] = Setting{v, src.String()} }
	add("engine", s.Engine.Value, s.Engine.Src)
	add("engine-binary", s.EngineBinary.Value, s.EngineBinary.Src)
	add("engine-args", secret.MaskArgv(s.EngineArgs.Value), s.EngineArgs.Src)
	add("model", s.Model.Value, s.Model.Src)
	add("draft-model", s.DraftModel.Value, s.DraftModel.Src)
	add("draft-kind", s.DraftKind.Value, s.DraftKind.Src)
	w := any(s.Width.Value)
	if s.Width.Value == 0 {
		w = "(resolved)"
	}
	add("draft-block-size", w, s.Width.Src)
	add("capability", s.Capability.Value, s.Capability.Src)
	add("quant", s.Quant.Value, s.Quant.Src)
	add("host", s.Host.Value, s.Host.Src)
	add("port", s.Port.Value, s.Port.Src)
	add("log-format", s.LogFormat.Value, s.LogFormat.Src)
	add("log-level", s.LogLevel.Value, s.LogLevel.Src)
	add("ready-timeout", s.ReadyTimeout.Value.Round(time.Second).String(), s.ReadyTimeout.Src)
	add("stop-timeout", s.StopTimeout.Value.String(), s.StopTimeout.Src)
	add("restart", s.Restart.Value, s.Restart.Src)
	add("strict-width", s.StrictWidth.Value, s.StrictWidth.Src)
	add("probe", s.Probe.Value, s.Probe.Src)
	add("watch", s.Watch.Value, s.Watch.Src)
	add("raw-engine-output", s.RawEngineOutput.Value, s.RawEngineOutput.Src)
	add("proxy", s.Proxy.Value, s.Proxy.Src)
	add("switch", s.Switch.Value, s.Switch.Src)
	add("drain-timeout", s.DrainTimeout.Value.String(), s.DrainTimeout.Src)
	add("shutdown-timeout", s.ShutdownTimeout.Value.String(), s.ShutdownTimeout.Src)
	add("hang-timeout", s.HangTimeout.Value.String(), s.HangTimeout.Src)
	add("hold-timeout", s.HoldTimeout.Value.String(), s.HoldTimeout.Src)
	add("queue-size", s.QueueSize.Value, s.QueueSize.Src)
	add("adapt", s.Adapt.Value, s.Adapt.Src)
	add("adapt-max-width", s.AdaptMaxWidth.Value, s.AdaptMaxWidth.Src)
	add("adapt-explore-width", s.AdaptExplore.Value, s.AdaptExplore.Src)
	add("adapt-margin", s.AdaptMargin.Value, s.AdaptMargin.Src)
	add("adapt-min-cycles", s.AdaptMinCycles.Value, s.AdaptMinCycles.Src)
	add("adapt-window", s.AdaptWindow.Value.String(), s.AdaptWindow.Src)
	add("adapt-trials", s.AdaptTrials.Value, s.AdaptTrials.Src)
	pols := []string{}
	for _, p := range s.Policies {
		pols = append(pols, p.Value+" ("+p.Src.String()+")")
	}
	m["policy"] = Setting{pols, "layered"}
	return m
}
