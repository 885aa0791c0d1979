package config

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/speclaunch/speclaunch/adapt"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/key"
	"github.com/speclaunch/speclaunch/profiles"
)

// Input is everything Load layers. It is plain data so that Load is a pure
// function of it (plus reading the profile file).
type Input struct {
	// Flags holds the raw values of flags given on the command line, keyed by
	// long name without dashes ("draft-block-size"). Absent = not given.
	Flags map[string]string
	// Policies are the --policy values, in order.
	Policies []string
	// Passthrough are the engine args after "--".
	Passthrough []string
	// Getenv reads the environment; a set-but-empty variable counts as unset.
	Getenv func(string) string
	// Profile, when non-nil, is used instead of finding one from Flags/env.
	Profile *profiles.Profile
	// Ctx stops reading the profile (Ctrl-C); nil is context.Background.
	Ctx context.Context
}

// Env names per setting, highest precedence first. Where mlxcel-server or
// llama-server has a LLAMA_ARG_ name it comes first: it wins over the
// MLXCEL_ alias, as in mlxcel.
var Envs = map[string][]string{
	"profile":           {"MLXCEL_PROFILE"},
	"policy":            {"MLXCEL_POLICY"},
	"engine":            {"MLXCEL_ENGINE"},
	"engine-binary":     {"MLXCEL_ENGINE_BINARY"},
	"model":             {"LLAMA_ARG_MODEL", "MLXCEL_MODEL"},
	"draft-model":       {"LLAMA_ARG_SPEC_DRAFT_MODEL", "LLAMA_ARG_MODEL_DRAFT", "MLXCEL_DRAFT_MODEL"},
	"draft-kind":        {"LLAMA_ARG_DRAFT_KIND", "LLAMA_ARG_SPEC_TYPE", "MLXCEL_DRAFT_KIND"},
	"draft-block-size":  {"LLAMA_ARG_DRAFT_BLOCK_SIZE", "MLXCEL_DRAFT_BLOCK_SIZE"},
	"spec-draft-n-max":  {"LLAMA_ARG_SPEC_DRAFT_N_MAX", "LLAMA_ARG_DRAFT_MAX"},
	"capability":        {"MLXCEL_CUDA_CAPABILITY"},
	"quant":             {"MLXCEL_QUANT"},
	"host":              {"LLAMA_ARG_HOST", "MLXCEL_HOST"},
	"port":              {"LLAMA_ARG_PORT", "MLXCEL_PORT"},
	"log-format":        {"MLXCEL_LOG_FORMAT"},
	"log-level":         {"MLXCEL_LOG_LEVEL"},
	"ready-timeout":     {"MLXCEL_READY_TIMEOUT"},
	"stop-timeout":      {"MLXCEL_STOP_TIMEOUT"},
	"restart":           {"MLXCEL_RESTART"},
	"strict-width":      {"MLXCEL_STRICT_WIDTH"},
	"probe":             {"MLXCEL_PROBE"},
	"watch":             {"MLXCEL_WATCH"},
	"raw-engine-output": {"MLXCEL_RAW_ENGINE_OUTPUT"},
	"proxy":             {"MLXCEL_PROXY"},
	"switch":            {"MLXCEL_SWITCH"},
	"drain-timeout":     {"MLXCEL_DRAIN_TIMEOUT"},
	"shutdown-timeout":  {"MLXCEL_SHUTDOWN_TIMEOUT"},
	"hang-timeout":      {"MLXCEL_HANG_TIMEOUT"},
	"hold-timeout":      {"MLXCEL_HOLD_TIMEOUT"},
	"queue-size":        {"MLXCEL_QUEUE_SIZE"},
	"adapt":             {"MLXCEL_ADAPT"},
	"adapt-max-width":   {"MLXCEL_ADAPT_MAX_WIDTH"},
	"adapt-explore":     {"MLXCEL_ADAPT_EXPLORE_WIDTH"},
	"adapt-margin":      {"MLXCEL_ADAPT_MARGIN"},
	"adapt-min-cycles":  {"MLXCEL_ADAPT_MIN_CYCLES"},
	"adapt-window":      {"MLXCEL_ADAPT_WINDOW"},
	"adapt-trials":      {"MLXCEL_ADAPT_TRIALS"},
}

// Defaults for settings that have one.
const (
	DefaultHost         = "127.0.0.1"
	DefaultPort         = 8080
	DefaultReadyTimeout = 15 * time.Minute
	DefaultStopTimeout  = 20 * time.Second
	DefaultDrainTimeout = 2 * time.Minute
	DefaultHoldTimeout  = 2 * time.Minute
	// DefaultShutdownTimeout matches Kubernetes' default grace period
	// (terminationGracePeriodSeconds 30).
	DefaultShutdownTimeout = 25 * time.Second
	DefaultHangTimeout     = 30 * time.Second
	DefaultQueueSize       = 1024
	MaxQueueSize           = 1 << 20
)

type layer struct {
	in      Input
	prof    *profiles.Profile
	notices []Notice
}

// raw picks the winning raw value of a setting: flag, then env (first set
// name wins; a disagreement with a lower name is an info notice), then the
// profile (value and dotted key), then nothing.
func (l *layer) raw(name, profVal, profKey string) (string, Source, bool) {
	if v, ok := l.in.Flags[name]; ok {
		l.shadowed(name, "flag --"+name, v, 0)
		return v, Source{Flag, "--" + name}, true
	}
	envs := Envs[name]
	for i, e := range envs {
		if v := l.in.Getenv(e); v != "" {
			l.shadowed(name, e, v, i+1)
			return v, Source{Env, e}, true
		}
	}
	if profVal != "" && l.prof != nil {
		return profVal, Source{Profile, l.prof.Where(profKey)}, true
	}
	return "", Source{}, false
}

// shadowed records an info notice for each lower-precedence env name that is
// set to a different value than the winner.
func (l *layer) shadowed(name, winner, val string, from int) {
	for _, e := range Envs[name][from:] {
		if v := l.in.Getenv(e); v != "" && v != val && !sameKind(name, v, val) {
			l.notices = append(l.notices, Notice{"info", fmt.Sprintf("%s=%s differs from %s=%s; keeping %s", e, quoted(v), winner, quoted(val), winner)})
		}
	}
}

// Load layers flag > env > profile > default into Settings. The returned
// profile is the one in use (nil when none). Every error names its source.
func Load(in Input) (Settings, *profiles.Profile, []Notice, error) {
	if in.Getenv == nil {
		in.Getenv = func(string) string { return "" }
	}
	if in.Flags == nil {
		in.Flags = map[string]string{}
	}
	l := &layer{in: in, prof: in.Profile}
	var s Settings

	if l.prof == nil {
		if ref, src, ok := l.raw("profile", "", ""); ok {
			path, err := profiles.Find(ref, in.Getenv)
			if err != nil {
				return s, nil, nil, &Error{Src: src, Msg: "cannot use profile", Err: err}
			}
			ctx := in.Ctx
			if ctx == nil {
				ctx = context.Background()
			}
			p, err := profiles.Load(ctx, path)
			var se *safefile.Error
			if errors.As(err, &se) {
				return s, nil, nil, &Error{Src: src, Msg: "cannot use profile", Err: err}
			}
			if err != nil {
				return s, nil, nil, err
			}
			l.prof = p
		}
	}
	p := l.prof
	if p == nil {
		p = &profiles.Profile{}
	} else {
		s.ProfilePath = p.Path
	}

	var err error
	fail := func(e error) (Settings, *profiles.Profile, []Notice, error) { return Settings{}, nil, nil, e }

	// engine
	s.Engine = Field[key.Engine]{Value: key.MLXCEL}
	if v, src, ok := l.raw("engine", p.Engine.Name, "engine.name"); ok {
		e, err := key.ParseEngine(v)
		if err != nil {
			return fail(&Error{Src: src, Msg: "bad engine", Err: err})
		}
		s.Engine = Field[key.Engine]{e, src}
	}
	s.EngineBinary = str(l.raw("engine-binary", p.Engine.Binary, "engine.binary"))
	if s.EngineBinary.Value != "" && p.Path != "" && s.EngineBinary.Src.Origin == Profile {
		s.EngineBinary.Value = RelTo(p.Path, s.EngineBinary.Value)
	}
	args := append([]string(nil), p.Engine.Args...)
	argsSrc := Source{}
	if len(p.Engine.Args) > 0 {
		argsSrc = Source{Profile, p.Where("engine.args")}
	}
	if len(in.Passthrough) > 0 {
		args = append(args, in.Passthrough...)
		argsSrc = Source{Flag, "--"}
	}
	s.EngineArgs = Field[[]string]{args, argsSrc}
	if len(p.Engine.Env) > 0 {
		s.EngineEnv = Field[map[string]string]{p.Engine.Env, Source{Profile, p.Where("engine.env")}}
	}

	// models
	s.Model = str(l.raw("model", p.Model.Path, "model.path"))
	draft := ""
	if p.Draft.Model != nil {
		draft = *p.Draft.Model
	}
	s.DraftModel = str(l.raw("draft-model", draft, "draft.model"))
	s.DraftKind = str(l.raw("draft-kind", p.Draft.Kind, "draft.kind"))
	if s.DraftKind.Value != "" {
		d, err := ParseKind(s.DraftKind.Value)
		if err != nil {
			return fail(&Error{Src: s.DraftKind.Src, Msg: "bad drafter kind", Err: err})
		}
		if err := key.CheckSelectable(s.Engine.Value, d); err != nil {
			return fail(&Error{Src: s.DraftKind.Src, Msg: "bad drafter kind", Err: err})
		}
	}

	// width
	if s.Width, s.WidthNote, err = l.width(s.Engine.Value, p); err != nil {
		return fail(err)
	}

	// facts overrides
	s.Capability = str(l.raw("capability", p.GPU.Capability, "gpu.capability"))
	if s.Capability.Value != "" {
		if _, err := key.ParseCapability(s.Capability.Value); err != nil {
			return fail(&Error{Src: s.Capability.Src, Msg: "bad compute capability", Err: err})
		}
	}
	s.Quant = str(l.raw("quant", p.Model.Quant, "model.quant"))
	if s.Quant.Value != "" {
		if _, err := key.ParseQuant(s.Quant.Value); err != nil {
			return fail(&Error{Src: s.Quant.Src, Msg: "bad quantization", Err: err})
		}
	}

	// server
	s.Host = Field[string]{Value: DefaultHost}
	if v, src, ok := l.raw("host", p.Server.Host, "server.host"); ok {
		s.Host = Field[string]{v, src}
	}
	portProf := ""
	if p.Server.Port != nil {
		portProf = strconv.Itoa(*p.Server.Port)
	}
	s.Port = Field[int]{Value: DefaultPort}
	if v, src, ok := l.raw("port", portProf, "server.port"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > 65535 {
			return fail(&Error{Src: src, Msg: fmt.Sprintf("bad port %s: want a number from 1 to 65535", quoted(v))})
		}
		s.Port = Field[int]{n, src}
	}

	// logging
	if s.LogFormat, err = l.choice("log-format", p.Log.Format, "log.format", "log format", "auto", "auto", "text", "color", "json"); err != nil {
		return fail(err)
	}
	if s.LogLevel, err = l.choice("log-level", p.Log.Level, "log.level", "log level", "info", "debug", "info", "warn", "error"); err != nil {
		return fail(err)
	}

	// policies: profile files, then MLXCEL_POLICY, then --policy (later wins)
	for _, f := range p.Policy.Files {
		s.Policies = append(s.Policies, Field[string]{RelTo(p.Path, f), Source{Profile, p.Where("policy.files")}})
	}
	if v := in.Getenv("MLXCEL_POLICY"); v != "" {
		for _, f := range filepath.SplitList(v) {
			if f != "" {
				s.Policies = append(s.Policies, Field[string]{f, Source{Env, "MLXCEL_POLICY"}})
			}
		}
	}
	for _, f := range in.Policies {
		s.Policies = append(s.Policies, Field[string]{f, Source{Flag, "--policy"}})
	}

	// serve
	if s.ReadyTimeout, err = l.duration("ready-timeout", p.Serve.ReadyTimeout, "serve.ready_timeout", DefaultReadyTimeout); err != nil {
		return fail(err)
	}
	if s.StopTimeout, err = l.duration("stop-timeout", p.Serve.StopTimeout, "serve.stop_timeout", DefaultStopTimeout); err != nil {
		return fail(err)
	}
	if s.Restart, err = l.choice("restart", p.Serve.Restart, "serve.restart", "restart policy", RestartNo, RestartNo, RestartOnFailure); err != nil {
		return fail(err)
	}
	if s.StrictWidth, err = l.boolean("strict-width", p.Serve.StrictWidth, "serve.strict_width", false); err != nil {
		return fail(err)
	}
	if s.Probe, err = l.boolean("probe", p.Serve.Probe, "serve.probe", true); err != nil {
		return fail(err)
	}
	if s.Watch, err = l.boolean("watch", p.Serve.Watch, "serve.watch", true); err != nil {
		return fail(err)
	}
	if s.RawEngineOutput, err = l.boolean("raw-engine-output", p.Serve.RawEngineOutput, "serve.raw_engine_output", false); err != nil {
		return fail(err)
	}

	// front proxy and switches
	if s.Proxy, err = l.boolean("proxy", p.Server.Proxy, "server.proxy", true); err != nil {
		return fail(err)
	}
	if s.Switch, err = l.choice("switch", p.Server.Switch, "server.switch", "switch mode", SwitchAuto, SwitchOverlap, SwitchDrain, SwitchAuto); err != nil {
		return fail(err)
	}
	if s.DrainTimeout, err = l.duration("drain-timeout", p.Server.DrainTimeout, "server.drain_timeout", DefaultDrainTimeout); err != nil {
		return fail(err)
	}
	if s.HoldTimeout, err = l.duration("hold-timeout", p.Server.HoldTimeout, "server.hold_timeout", DefaultHoldTimeout); err != nil {
		return fail(err)
	}
	if s.ShutdownTimeout, err = l.duration("shutdown-timeout", p.Server.ShutdownTimeout, "server.shutdown_timeout", DefaultShutdownTimeout); err != nil {
		return fail(err)
	}
	if s.HangTimeout, err = l.durationOrOff("hang-timeout", p.Server.HangTimeout, "server.hang_timeout", DefaultHangTimeout); err != nil {
		return fail(err)
	}
	qProf := ""
	if p.Server.QueueSize != nil {
		qProf = strconv.Itoa(*p.Server.QueueSize)
	}
	s.QueueSize = Field[int]{Value: DefaultQueueSize}
	if v, src, ok := l.raw("queue-size", qProf, "server.queue_size"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > MaxQueueSize {
			return fail(&Error{Src: src, Msg: fmt.Sprintf("bad queue size %s: want the number of requests to hold during a switch, from 1 to %d", quoted(v), MaxQueueSize)})
		}
		s.QueueSize = Field[int]{n, src}
	}
	if s.Adapt, err = l.boolean("adapt", p.Adapt.Enabled, "adapt.enabled", false); err != nil {
		return fail(err)
	}
	if s.AdaptMaxWidth, err = l.intIn("adapt-max-width", p.Adapt.MaxWidth, "adapt.max_width", 2, key.MaxWidth, "the widest width the adaptive loop may try"); err != nil {
		return fail(err)
	}
	if s.AdaptExplore, err = l.intIn("adapt-explore", p.Adapt.ExploreWidth, "adapt.explore_width", 2, key.MaxWidth, "the exploration width W0"); err != nil {
		return fail(err)
	}
	if s.AdaptMinCycles, err = l.intIn("adapt-min-cycles", p.Adapt.MinCycles, "adapt.min_cycles", 16, 1<<30, "the draft cycles observed before a decision"); err != nil {
		return fail(err)
	}
	if s.AdaptTrials, err = l.intIn("adapt-trials", p.Adapt.Trials, "adapt.trials", 0, MaxAdaptTrials, "the trial widths measured per drift period (0 turns trials off)"); err != nil {
		return fail(err)
	}
	// Unset: the loop's defaults, so that the effective settings show them
	// (docs/adaptive.md); the exploration width stays 0, "from the probed
	// cost curve".
	if s.AdaptMaxWidth.Src.Origin == Default {
		s.AdaptMaxWidth.Value = adapt.DefaultMaxWidth
	}
	if s.AdaptMinCycles.Src.Origin == Default {
		s.AdaptMinCycles.Value = adapt.DefaultMinCycles
	}
	if s.AdaptTrials.Src.Origin == Default {
		s.AdaptTrials.Value = adapt.DefaultMaxTrials
	}
	if s.AdaptExplore.Value > 0 && s.AdaptExplore.Value > s.AdaptMaxWidth.Value {
		return fail(&Error{Src: s.AdaptExplore.Src, Msg: fmt.Sprintf("exploration width %d is wider than adapt.max_width %d: lower it or raise adapt.max_width", s.AdaptExplore.Value, s.AdaptMaxWidth.Value)})
	}
	mProf := ""
	if p.Adapt.Margin != nil {
		mProf = strconv.FormatFloat(*p.Adapt.Margin, 'g', -1, 64)
	}
	if v, src, ok := l.raw("adapt-margin", mProf, "adapt.margin"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f > 0 && f < 1) { // NaN fails both
			return fail(&Error{Src: src, Msg: fmt.Sprintf("bad margin %s: want the predicted gain needed to switch as a fraction above 0 and below 1, e.g. 0.03 for 3%%", quoted(v))})
		}
		s.AdaptMargin = Field[float64]{f, src}
	}
	if s.AdaptMargin.Src.Origin == Default {
		s.AdaptMargin.Value = adapt.DefaultMargin
	}
	if s.AdaptWindow, err = l.duration("adapt-window", p.Adapt.Window, "adapt.window", adapt.DefaultWindow); err != nil {
		return fail(err)
	}

	// In a vLLM or SGLang profile "owner/name" is a Hugging Face repo id and
	// "ngram" is n-gram drafting: both stay as written (a directory beside
	// the profile is written "./owner/name").
	if s.Model.Value != "" && s.Model.Src.Origin == Profile && !key.FetchesModel(s.Engine.Value, s.Model.Value) {
		s.Model.Value = RelTo(p.Path, s.Model.Value)
	}
	if s.DraftModel.Value != "" && s.DraftModel.Src.Origin == Profile && !key.FetchesModel(s.Engine.Value, s.DraftModel.Value) {
		s.DraftModel.Value = RelTo(p.Path, s.DraftModel.Value)
	}
	return s, l.prof, l.notices, nil
}

// width layers the operator width: --draft-block-size or the engine-unit
// --spec-draft-n-max, then LLAMA_ARG_DRAFT_BLOCK_SIZE, MLXCEL_DRAFT_BLOCK_SIZE,
// then (llama.cpp) LLAMA_ARG_SPEC_DRAFT_N_MAX and the legacy
// LLAMA_ARG_DRAFT_MAX, converted, then the profile's draft.block_size.
func (l *layer) width(e key.Engine, p *profiles.Profile) (Field[int], string, error) {
	blockFlag, hasBlock := l.in.Flags["draft-block-size"]
	nmaxFlag, hasNmax := l.in.Flags["spec-draft-n-max"]
	if hasBlock && hasNmax {
		return Field[int]{}, "", &Error{Src: Source{Flag, "--spec-draft-n-max"}, Msg: "give the width once: --draft-block-size W (verify rows) or --spec-draft-n-max N (draft tokens, = width N+1), not both"}
	}
	if hasBlock {
		return blockWidth(blockFlag, Source{Flag, "--draft-block-size"})
	}
	if hasNmax {
		return nmaxWidth(nmaxFlag, Source{Flag, "--spec-draft-n-max"})
	}
	for i, name := range Envs["draft-block-size"] {
		if v := l.in.Getenv(name); v != "" {
			f, note, err := blockWidth(v, Source{Env, name})
			if err == nil {
				for _, lower := range Envs["draft-block-size"][i+1:] {
					if w := l.in.Getenv(lower); w != "" && strings.TrimSpace(w) != strings.TrimSpace(v) {
						l.notices = append(l.notices, Notice{"info", fmt.Sprintf("%s=%s is set but %s=%s already provides the width; keeping %s", lower, quoted(w), name, quoted(v), name)})
					}
				}
			}
			return f, note, err
		}
	}
	for _, name := range Envs["spec-draft-n-max"] {
		v := l.in.Getenv(name)
		if v == "" {
			continue
		}
		if e != key.LlamaCpp {
			l.notices = append(l.notices, Notice{"info", fmt.Sprintf("%s=%s is llama.cpp's draft-token cap; it does not set the %s width (use --draft-block-size)", name, quoted(v), e)})
			continue
		}
		return nmaxWidth(v, Source{Env, name})
	}
	if p != nil && p.Draft.BlockSize != nil {
		return blockWidth(strconv.Itoa(*p.Draft.BlockSize), Source{Profile, p.Where("draft.block_size")})
	}
	return Field[int]{}, "", nil
}

func blockWidth(v string, src Source) (Field[int], string, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return Field[int]{}, "", &Error{Src: src, Msg: fmt.Sprintf("draft width %s is not a whole number; want a width from %d to %d (verify rows = draft tokens + 1)", quoted(v), key.MinWidth, key.MaxWidth)}
	}
	if err := key.CheckWidth(n); err != nil {
		return Field[int]{}, "", &Error{Src: src, Msg: err.Error()}
	}
	return Field[int]{n, src}, "", nil
}

func nmaxWidth(v string, src Source) (Field[int], string, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return Field[int]{}, "", &Error{Src: src, Msg: fmt.Sprintf("draft token count %s is not a whole number; want N from 1 to %d (width N+1)", quoted(v), key.MaxWidth-1)}
	}
	if n < 1 {
		return Field[int]{}, "", &Error{Src: src, Msg: fmt.Sprintf("draft token count %d means no drafting (width %d); to run without speculation, remove the draft model", n, n+1)}
	}
	if n > key.MaxWidth-1 { // checked before n+1, which would overflow for the largest ints
		return Field[int]{}, "", &Error{Src: src, Msg: fmt.Sprintf("draft token count %d is above %d (width %d), which no drafter runs; want N from 1 to %d (width N+1)", n, key.MaxWidth-1, key.MaxWidth, key.MaxWidth-1)}
	}
	name := strings.TrimPrefix(src.Name, "--")
	return Field[int]{n + 1, src}, fmt.Sprintf("%s=%d draft tokens = width %d", name, n, n+1), nil
}

// durationOrOff is duration where 0 turns the feature off.
func (l *layer) durationOrOff(name, prof, profKey string, def time.Duration) (Field[time.Duration], error) {
	if v, src, ok := l.raw(name, prof, profKey); ok {
		if t := strings.TrimSpace(v); t == "0" || t == "0s" || t == "off" {
			return Field[time.Duration]{0, src}, nil
		}
	}
	return l.duration(name, prof, profKey, def)
}

func (l *layer) duration(name, prof, profKey string, def time.Duration) (Field[time.Duration], error) {
	v, src, ok := l.raw(name, prof, profKey)
	if !ok {
		return Field[time.Duration]{Value: def}, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		if secs, err2 := strconv.ParseFloat(strings.TrimSpace(v), 64); err2 == nil {
			d, err = time.Duration(secs*float64(time.Second)), nil
		}
	}
	if err != nil || d <= 0 {
		return Field[time.Duration]{}, &Error{Src: src, Msg: fmt.Sprintf("bad duration %s: want e.g. 30s, 10m or a number of seconds", quoted(v))}
	}
	return Field[time.Duration]{d, src}, nil
}

// intIn layers an optional whole number in [lo, hi]; unset is 0.
func (l *layer) intIn(name string, prof *int, profKey string, lo, hi int, what string) (Field[int], error) {
	pv := ""
	if prof != nil {
		pv = strconv.Itoa(*prof)
	}
	v, src, ok := l.raw(name, pv, profKey)
	if !ok {
		return Field[int]{}, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < lo || n > hi {
		return Field[int]{}, &Error{Src: src, Msg: fmt.Sprintf("bad value %s for %s: want a whole number from %d to %d", quoted(v), what, lo, hi)}
	}
	return Field[int]{n, src}, nil
}

func (l *layer) boolean(name string, prof *bool, profKey string, def bool) (Field[bool], error) {
	pv := ""
	if prof != nil {
		pv = strconv.FormatBool(*prof)
	}
	v, src, ok := l.raw(name, pv, profKey)
	if !ok {
		return Field[bool]{Value: def}, nil
	}
	b, err := ParseBool(v)
	if err != nil {
		return Field[bool]{}, &Error{Src: src, Msg: err.Error()}
	}
	return Field[bool]{b, src}, nil
}

// ParseBool accepts true/false, 1/0, yes/no, on/off, enabled/disabled.
func ParseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on", "enabled":
		return true, nil
	case "0", "false", "no", "off", "disabled":
		return false, nil
	}
	return false, errors.New("bad boolean " + strconv.Quote(v) + ": want true or false (also 1/0, yes/no, on/off)")
}

// ParseKind reads a drafter kind in the launcher's words (dflash, draft)
// or llama-server's --spec-type / LLAMA_ARG_SPEC_TYPE words (draft-dflash,
// draft-simple). The spec types that name no drafter the launcher can size
// are refused with what to do instead.
func ParseKind(v string) (key.Drafter, error) {
	t := strings.ToLower(strings.TrimSpace(v))
	switch {
	case strings.Contains(t, ","):
		return "", fmt.Errorf("%s lists several speculative types; speclaunch runs one drafter: name one kind (draft-simple, draft-mtp, draft-dflash, draft-dspark, draft-eagle3 or dflash, mtp, draft, ...)", quoted(v))
	case t == "none":
		return "", fmt.Errorf("%s would turn speculation off; speclaunch turns it off when no draft model is set: unset the draft model and this value", quoted(v))
	case strings.HasPrefix(t, "ngram") && t != string(key.Ngram): // bare "ngram" is vLLM's and SGLang's kind
		return "", fmt.Errorf("%s is n-gram speculation, which drafts from the prompt without a draft model, so there is no drafter width for speclaunch to resolve: name a draft-model kind, or run llama-server with --spec-type %s directly", quoted(v), quoted(t))
	}
	return key.ParseDrafter(t)
}

// sameKind reports two drafter-kind spellings of one kind
// (LLAMA_ARG_SPEC_TYPE=draft-dflash and MLXCEL_DRAFT_KIND=dflash).
func sameKind(name, a, b string) bool {
	if name != "draft-kind" {
		return false
	}
	x, err1 := ParseKind(a)
	y, err2 := ParseKind(b)
	return err1 == nil && err2 == nil && x == y
}

// choice layers a setting that takes one of a few words (case-insensitive):
// def when unset, else the winning value, which must be one of opts; what
// names it in the error ("bad log level \"x\": want debug, info, warn or
// error").
func (l *layer) choice(name, prof, profKey, what, def string, opts ...string) (Field[string], error) {
	v, src, ok := l.raw(name, prof, profKey)
	if !ok {
		return Field[string]{Value: def}, nil
	}
	v = strings.ToLower(v)
	if !slices.Contains(opts, v) {
		want := strings.Join(opts, ", ")
		if n := len(opts); n > 1 {
			want = strings.Join(opts[:n-1], ", ") + " or " + opts[n-1]
		}
		return Field[string]{}, &Error{Src: src, Msg: fmt.Sprintf("bad %s %s: want %s", what, quoted(v), want)}
	}
	return Field[string]{v, src}, nil
}

func str(v string, src Source, _ bool) Field[string] { return Field[string]{v, src} }

// RelTo resolves a relative path in a profile against the profile's
// directory, so a profile means the same thing from any working directory.
// Values that are not local paths (an HF repo id "owner/name" that does not
// exist locally) are still joined: engines that accept repo ids should be
// given them by flag or env.
func RelTo(profilePath, p string) string {
	if p == "" || filepath.IsAbs(p) || profilePath == "" {
		return p
	}
	return filepath.Join(filepath.Dir(profilePath), p)
}

// maxQuoted is how much of a value an error or notice quotes: a value of
// kilobytes (a wrong variable, a pasted file) would bury the message.
const maxQuoted = 64

// quoted is v quoted as %q does, cut to maxQuoted bytes with its length said.
func quoted(v string) string {
	if len(v) <= maxQuoted {
		return strconv.Quote(v)
	}
	cut := v[:maxQuoted]
	for !utf8.ValidString(cut) && len(cut) > 0 {
		cut = cut[:len(cut)-1]
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(cut), len(v))
}
