// Package config layers the launcher's settings: command-line flag, then
// environment variable, then profile TOML, then built-in default. Every value
// carries the Source it came from, so `profile show`, `resolve` and the
// startup log can say where each one was set.
package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// Origin is the layer a value came from, lowest first.
type Origin int

const (
	Default Origin = iota
	Profile
	Env
	Flag
)

// Source names where a value came from: the layer and, for all but
// defaults, the flag, variable or file:line that set it.
type Source struct {
	Origin Origin
	Name   string // "--draft-block-size", "LLAMA_ARG_PORT", "profiles/demo.toml:12"
}

func (s Source) String() string {
	switch s.Origin {
	case Flag:
		if !strings.HasPrefix(s.Name, "-") { // the engine arguments typed (typedArgs), no flag
			return s.Name
		}
		return "flag " + s.Name
	case Env:
		return "env " + s.Name
	case Profile:
		return "profile " + s.Name
	}
	if s.Name != "" { // a default chosen from what the operator gave (InferEngine)
		return "inferred: " + s.Name
	}
	return "default"
}

// Field is one setting with its source.
type Field[T any] struct {
	Value T
	Src   Source
}

// Set reports whether an operator set the value (anything but a default).
func (f Field[T]) Set() bool { return f.Src.Origin != Default }

// EnvSrc is where the profile's engine.env variable k was set: its own
// file:line, else the table's.
func (s Settings) EnvSrc(k string) Source {
	if src, ok := s.EngineEnvSrc[k]; ok {
		return src
	}
	return s.EngineEnv.Src
}

// ProfileEngineArgs is the profile's engine.args alone, with their
// file:line: ProfileArgs where typed engine arguments follow them, else
// EngineArgs where all of them are the profile's; none otherwise.
func (s Settings) ProfileEngineArgs() Field[[]string] {
	if s.ProfileArgs.Value != nil {
		return s.ProfileArgs
	}
	if s.EngineArgs.Src.Origin == Profile {
		return s.EngineArgs
	}
	return Field[[]string]{}
}

// EngineArgSrc is where EngineArgs' argument at was given: the profile's
// engine.args, by file:line, when at falls among them, else EngineArgs'
// own source (the command line once anything is typed after the
// profile's), so that an error in a profile's argument names its line.
func (s Settings) EngineArgSrc(at int) Source {
	if prof := s.ProfileEngineArgs(); at >= 0 && at < len(prof.Value) {
		return prof.Src
	}
	return s.EngineArgs.Src
}

// Restart policies for serve.
const (
	RestartNo        = "no"
	RestartOnFailure = "on-failure"
)

// Settings is the launcher's effective configuration.
type Settings struct {
	ProfilePath string // the profile file in use, "" when none

	Engine       Field[key.Engine]
	EngineBinary Field[string]   // "" = the engine's default binary name on PATH
	EngineArgs   Field[[]string] // pass-through engine args: profile engine.args, then those after --
	// ProfileArgs is the profile's engine.args alone, with its file:line,
	// when typed engine arguments follow them in EngineArgs: a bad one is
	// blamed on the profile, not on the command line.
	ProfileArgs Field[[]string]
	EngineEnv   Field[map[string]string] // Src: the table's file:line
	// EngineEnvSrc is where each engine.env variable was set: its own
	// file:line (EnvSrc reads it).
	EngineEnvSrc map[string]Source

	Model      Field[string] // target checkpoint (MLX directory or GGUF file)
	DraftModel Field[string] // drafter; "" = none (speculation off, but for llama.cpp's embedded MTP: plan.HasDrafter)
	DraftKind  Field[string] // raw kind as given; "" = detect from the drafter, else the engine default

	// Width is the operator's width override in the launcher's unit (verify
	// rows), already converted from an engine unit; 0 = not set.
	Width Field[int]
	// WidthNote explains a conversion, e.g. "LLAMA_ARG_SPEC_DRAFT_N_MAX=3 draft tokens = width 4".
	WidthNote string
	// Schedule is the operator's width schedule (--draft-schedule,
	// MLXCEL_DRAFT_SCHEDULE, draft.schedule); nil = not set. At most one
	// of Width and Schedule is set: the higher layer wins, and both at
	// one layer is an error.
	Schedule Field[schedule.Schedule]

	Capability Field[string] // override of the probed compute capability; "" = probe
	Quant      Field[string] // override of the detected target quantization; "" = detect

	Host Field[string]
	Port Field[int]

	LogFormat Field[string] // auto | text | json | color
	LogLevel  Field[string] // debug | info | warn | error

	Policies []Field[string] // user policy files, lowest first

	// serve
	ReadyTimeout    Field[time.Duration]
	StopTimeout     Field[time.Duration]
	Restart         Field[string]
	StrictWidth     Field[bool]
	Probe           Field[bool]
	Watch           Field[bool]
	RawEngineOutput Field[bool]

	// serve's front proxy and engine switches (docs/serving.md)
	Proxy        Field[bool]          // serve through the launcher's own public port
	Switch       Field[key.Switch]    // overlap | drain | auto
	DrainTimeout Field[time.Duration] // how long an old engine may finish its requests
	HoldTimeout  Field[time.Duration] // how long a held request may wait
	// ShutdownTimeout: after SIGTERM, how long requests in flight and
	// held may finish before the engine is stopped.
	ShutdownTimeout Field[time.Duration]
	// HangTimeout: an engine that answers nothing for this long is failed;
	// 0 turns hang detection off.
	HangTimeout Field[time.Duration]
	QueueSize   Field[int] // held requests at most

	// adaptive width (docs/adaptive.md); zero values take adapt's defaults
	Adapt          Field[bool]
	AdaptMaxWidth  Field[int]           // widest candidate and exploration
	AdaptExplore   Field[int]           // exploration width W0; 0 = from the probed cost curve
	AdaptMargin    Field[float64]       // predicted gain needed to switch (0.03 = 3%)
	AdaptMinCycles Field[int]           // cycles behind every position before a decision
	AdaptWindow    Field[time.Duration] // at most one switch per window
	AdaptTrials    Field[int]           // trial widths per drift period; 0 = none

	// Bench is bench's own options, layered by LoadBench (Load leaves it
	// zero: a bad [bench] table must not stop serve).
	Bench Bench
}

// Bench is bench's options: a flag or the profile's [bench] table, no env.
type Bench struct {
	Widths      Field[[]int]
	Rounds      Field[int]
	Warmup      Field[int] // 0 = none
	MaxTokens   Field[int]
	BasePort    Field[int]
	Schedule    Field[string]
	PromptFile  Field[string] // relative to the profile when it came from one
	Prompts     Field[string] // a directory or a shipped set's name, as given
	Temperature Field[float64]
	// Concurrency is the requests in flight per measured run; more than
	// one level is a load sweep's levels.
	Concurrency    Field[[]int]
	RequestTimeout Field[time.Duration]
	Out            Field[string] // "" = a name bench makes from the engine and the time
}

// MaxAdaptTrials bounds adapt.trials: each trial is an engine start and an
// epoch at a width that may be slower, so more than a handful per drift
// period is churn, not measurement.
const MaxAdaptTrials = 8

// Notice is something the layering decided that an operator should hear
// about (e.g. LLAMA_ARG_X and MLXCEL_X disagree), logged at Level.
type Notice struct {
	Level string // "info" | "warn"
	Msg   string
}

// Error is a bad setting value: it names the source and the fix.
type Error struct {
	Src Source
	Msg string
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Src, e.what()) }

// what is the error without its source: the message, and its cause.
func (e *Error) what() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }
