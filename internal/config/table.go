package config

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/defaults"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/record"
	"github.com/speclaunch/speclaunch/profiles"
)

// Scope is which commands read a row.
type Scope int

const (
	ScopeLaunch Scope = iota // resolve, serve, bench, profile show and validate
	ScopeServe               // serve (resolve asks about --adapt and --proxy too)
	ScopeBench               // bench's own options: a flag or the profile's [bench] table
)

// Row is one setting: every place it can be set, its default, and how its
// raw value is read. Load, LoadBench, `profile show`, the variable names in
// --help and the tables of docs/environment-variables.md all come from Rows,
// so a new setting is one row (and its fields in Settings and
// profiles.Profile).
type Row struct {
	Name    string   // as `profile show` lists it
	Flag    string   // long flag name and key of Input.Flags; "" = none
	Envs    []string // environment names, highest precedence first
	Key     string   // the profile's dotted key; "" = none
	Scope   Scope    // which commands read it
	Default string   // the default as --help and the docs say it; "" = none
	Doc     string   // one line for the docs (Markdown)
	// HelpOn names the flag whose --help lists this flagless row's
	// variables (the adapt.* tuning on --adapt).
	HelpOn string
	// Retired marks a row still read and validated but no longer used
	// (docs/adaptive.md: adapt.explore_width, adapt.margin): no --help
	// names its variables, since they tune nothing (--adapt's help said
	// "tuned by" them).
	Retired bool
	// ShownAs names the row `profile show` lists this one under, where
	// it has no line of its own.
	ShownAs string

	literal  bool                                     // Default is a value (docs quote it as code)
	duration bool                                     // the value is a time.Duration (profiles tags its key kind:"duration")
	blank    bool                                     // an empty flag value counts as not given
	apply    func(r Row, l *layer, s *Settings) error // nil: another row's apply layers it; r is the row as built
	show     func(s *Settings) (any, string)          // value and source for `profile show`
	check    func(s *Settings) error                  // run on the value as layered
	// reads names the rows above whose values check compares this one
	// with: where one of them was bad, the check is not run (Load says
	// every bad value, not those a bad one caused). A bad engine, whose
	// value decides how the rows below it read theirs, ends the layering.
	reads []string
}

// Show is the row's value and source as `profile show` prints them; false
// for a row shown under another (ShownAs) or in the header (profile).
func (r Row) Show(s *Settings) (any, string, bool) {
	if r.show == nil {
		return nil, "", false
	}
	v, src := r.show(s)
	return v, src, true
}

// Env names the launcher reads, highest first, shared by the two rows of the
// width and by width().
var (
	blockEnvs = []string{"LLAMA_ARG_DRAFT_BLOCK_SIZE", "MLXCEL_DRAFT_BLOCK_SIZE"}
	nmaxEnvs  = []string{"LLAMA_ARG_SPEC_DRAFT_N_MAX", "LLAMA_ARG_DRAFT_MAX"}
)

// Defaults for settings config owns. The adaptive loop's and bench's are
// theirs, in internal/defaults.
const (
	DefaultHost         = "127.0.0.1"
	DefaultPort         = 8080
	DefaultReadyTimeout = 15 * time.Minute
	DefaultStopTimeout  = 20 * time.Second
	DefaultDrainTimeout = 2 * time.Minute
	DefaultHoldTimeout  = 2 * time.Minute
	DefaultQueueSize    = 1024
	MaxQueueSize        = 1 << 20
	// DefaultShutdownTimeout stays under Kubernetes' default grace period
	// (terminationGracePeriodSeconds 30).
	DefaultShutdownTimeout = 25 * time.Second
	DefaultHangTimeout     = 30 * time.Second
)

// profileRow names the profile; Load reads it before any other row, and
// `profile show` prints it as its first line.
var profileRow = Row{Name: "profile", Flag: "profile", Envs: []string{"MLXCEL_PROFILE"}, Default: "none", Doc: "a path, or a NAME looked up in `./profiles`, `$XDG_CONFIG_HOME/speclaunch/profiles` (else `~/.config/…`), `/etc/speclaunch/profiles`"}

// The rows the engine's inference (infer.go) peeks at before they layer.
var (
	engineBinaryRow = pathRow(Row{Name: "engine-binary", Flag: "engine-binary", Envs: []string{"MLXCEL_ENGINE_BINARY"}, Key: "engine.binary", Default: "`mlxcel-server` / `llama-server` / `vllm` / `python3` (sglang) on `PATH`; for sim, this speclaunch", Doc: "for sim, a speclaunch binary, which the sim engine runs as its engine; for sglang, the Python interpreter it is installed in"},
		func(s *Settings) *Field[string] { return &s.EngineBinary }, false)
	modelRow = pathRow(Row{Name: "model", Flag: "model", Envs: []string{"LLAMA_ARG_MODEL", "MLXCEL_MODEL"}, Key: "model.path", Default: "none", Doc: "MLX checkpoint directory or GGUF file (flag also `-m`); for vllm/sglang also a Hugging Face repo id"},
		func(s *Settings) *Field[string] { return &s.Model }, true)
	draftKindRow = checked(value(Row{Name: "draft-kind", Flag: "draft-kind", Envs: []string{"LLAMA_ARG_DRAFT_KIND", "LLAMA_ARG_SPEC_TYPE", "MLXCEL_DRAFT_KIND"}, Key: "draft.kind", Default: "detected from the drafter's `config.json`, else the engine's default (`dflash` for mlxcel/sim, `draft` for llama.cpp, vllm, sglang)", Doc: "mlxcel/sim: `dflash`, `mtp`; llama.cpp: `draft` (= `draft-simple`), `mtp`, `dflash`, `dspark`, `eagle3`; vllm, sglang: `draft` (= vLLM `draft_model`, SGLang `STANDALONE`), `eagle`, `eagle3`, `mtp` (= `NEXTN`), `ngram`, `dflash`; `internal-mtp` is detected, never selectable. Every value may also be spelled as llama-server's `--spec-type` (below), the flag's alias"},
		"", asIs, func(s *Settings) *Field[string] { return &s.DraftKind }), checkKind)
)

// engineRow is the engine; when no layer names one it is inferred
// (InferEngine): a GGUF target means llama.cpp.
var engineRow = inferred(value(Row{Name: "engine", Flag: "engine", Envs: []string{"MLXCEL_ENGINE"}, Key: "engine.name", Default: "inferred: `llama.cpp` for a GGUF target (or `-ngl`, `--spec-type draft-…`, a llama.cpp `LLAMA_ARG_*` variable, or `llama-server` alone on `PATH`), else `mlxcel`", Doc: "`mlxcel`, `llama.cpp` (also `llama-server`, `llamacpp`), `vllm`, `sglang`, `sim`"},
	key.MLXCEL, parseEngine, func(s *Settings) *Field[key.Engine] { return &s.Engine }))

// inferred makes the engine row infer its value when no layer sets it.
func inferred(r Row) Row {
	apply := r.apply
	r.apply = func(r Row, l *layer, s *Settings) error {
		if err := apply(r, l, s); err != nil || s.Engine.Set() {
			return err
		}
		e, why := InferEngine(l.hints())
		s.Engine = Field[key.Engine]{e, Source{Default, why}}
		return nil
	}
	return r
}

// Rows is the table of settings, in the order Load layers them (a row may
// read one above it: the drafter kind is checked against the engine).
var Rows = []Row{
	profileRow,
	policyRow,
	engineRow,
	engineBinaryRow,
	engineArgsRow,
	modelRow,
	pathRow(Row{Name: "draft-model", Flag: "draft-model", Envs: []string{"LLAMA_ARG_SPEC_DRAFT_MODEL", "LLAMA_ARG_MODEL_DRAFT", "MLXCEL_DRAFT_MODEL"}, Key: "draft.model", Default: "none", Doc: "without a draft model speculation is off, except on llama.cpp with drafter kind `mtp` (`--spec-type draft-mtp`), where the target's own MTP layers draft; flag also `-md`, `--spec-draft-model`, `--model-draft`; `LLAMA_ARG_MODEL_DRAFT` is llama.cpp's legacy name"},
		func(s *Settings) *Field[string] { return &s.DraftModel }, true),
	draftKindRow,
	{Name: "draft-block-size", Flag: "draft-block-size", Envs: blockEnvs, Key: "draft.block_size", Default: "resolved", Doc: "the **width**: verify rows = draft tokens + 1, from 2 to 256; resolved (below) when unset",
		apply: func(_ Row, l *layer, s *Settings) (err error) {
			s.Width, s.WidthNote, err = l.width(s.Engine.Value)
			return err
		},
		show: func(s *Settings) (any, string) {
			if s.Width.Value == 0 {
				return "(resolved)", s.Width.Src.String()
			}
			return s.Width.Value, s.Width.Src.String()
		}},
	scheduleRow,
	{Name: "spec-draft-n-max", Flag: "spec-draft-n-max", Envs: nmaxEnvs, Default: "resolved", ShownAs: "draft-block-size", Doc: "llama.cpp's unit, draft tokens N (flag also `--draft-max`, `--draft`, `--draft-n`; `LLAMA_ARG_DRAFT_MAX` is the legacy name); converted to width N+1. The variables apply to the llama.cpp engine only (for mlxcel, `LLAMA_ARG_SPEC_DRAFT_N_MAX` is the classic draft cap and does not set the width: the launcher logs that it ignored it)"},
	value(Row{Name: "capability", Flag: "capability", Envs: []string{"MLXCEL_CUDA_CAPABILITY"}, Key: "gpu.capability", Default: "probed with `nvidia-smi`", Doc: "`9.0`, `12.1` or `sm_90`; for containers without `nvidia-smi` and for \"what would this host get\""},
		"", parseCapability, func(s *Settings) *Field[string] { return &s.Capability }),
	value(Row{Name: "quant", Flag: "quant", Envs: []string{"MLXCEL_QUANT"}, Key: "model.quant", Default: "read from `config.json` / the GGUF header", Doc: "`affine`, `nvfp4`, `other`, `f16`, `bf16`, `q4_0`, `q4_k` (also `Q4_K_M`), `q8_0`, …"},
		"", parseQuant, func(s *Settings) *Field[string] { return &s.Quant }),
	value(Row{Name: "host", Flag: "host", Envs: []string{"LLAMA_ARG_HOST", "MLXCEL_HOST"}, Key: "server.host", Doc: "the public address: the proxy's, or the engine's with `--no-proxy`; an IP address (`0.0.0.0`, `::1`) or a host name, without scheme or port"},
		DefaultHost, parseHost, func(s *Settings) *Field[string] { return &s.Host }),
	value(Row{Name: "port", Flag: "port", Envs: []string{"LLAMA_ARG_PORT", "MLXCEL_PORT"}, Key: "server.port", Doc: "likewise; behind the proxy the engine gets a loopback port of its own"},
		DefaultPort, parsePort, func(s *Settings) *Field[int] { return &s.Port }),
	value(Row{Name: "log-format", Flag: "log-format", Envs: []string{"MLXCEL_LOG_FORMAT"}, Key: "log.format", Doc: "`auto` = colour on a terminal unless `NO_COLOR` is set or `TERM=dumb`; `text`, `color`, `json`. A text line keeps within about 200 characters: a message longer than a line is wrapped at spaces; attributes that do not fit (a command line, the settings, an engine's output) follow on lines of their own, cut to fit, except an error (`err`), which is wrapped at spaces so that its fix shows (over 12 lines, its first lines and its last two); an engine's own line (`engine N | …`) and the last engine lines a failed start shows are cut too, saying so (`… (+312 chars; whole at --log-level debug, --log-format json)`); at `--log-level debug` the engine's lines are whole. With `json` every line on stderr is one JSON object: the launcher's (`\"source\":\"speclaunch\"`, `msg`, attributes) and the engine's (`\"source\":\"engine\"`, `stream`, `text`, and `level` where the engine's line shows one: llama.cpp's `I`/`W`/`E`, mlxcel's `INFO`/`WARN`/`ERROR`), and the error that ends the command (`\"level\":\"ERROR\"`, `msg`, `hint`, `exit_code`). `serve.raw_engine_output` still passes the engine's bytes as they come, API keys masked"},
		"auto", oneOf("log format", "auto", "text", "color", "json"), func(s *Settings) *Field[string] { return &s.LogFormat }),
	value(Row{Name: "log-level", Flag: "log-level", Envs: []string{"MLXCEL_LOG_LEVEL"}, Key: "log.level", Doc: "`debug`, `info`, `warn`, `error`"},
		"info", oneOf("log level", "debug", "info", "warn", "error"), func(s *Settings) *Field[string] { return &s.LogLevel }),

	value(Row{Name: "ready-timeout", Flag: "ready-timeout", Envs: []string{"MLXCEL_READY_TIMEOUT"}, Key: "serve.ready_timeout", Scope: ScopeServe, Doc: "bounded wait for `/health`; connection refused and 503 mean \"not yet\" (bench: for each arm's engine); past it the engine is stopped, and with no other engine serving, serve exits 2 (docs/serving.md, \"Exit codes of serve\")"},
		DefaultReadyTimeout, parseDuration, func(s *Settings) *Field[time.Duration] { return &s.ReadyTimeout }),
	value(Row{Name: "stop-timeout", Flag: "stop-timeout", Envs: []string{"MLXCEL_STOP_TIMEOUT"}, Key: "serve.stop_timeout", Scope: ScopeServe, Doc: "SIGTERM to the engine's process group, SIGKILL after this"},
		DefaultStopTimeout, parseDuration, func(s *Settings) *Field[time.Duration] { return &s.StopTimeout }),
	value(Row{Name: "restart", Flag: "restart", Envs: []string{"MLXCEL_RESTART"}, Key: "serve.restart", Scope: ScopeServe, Doc: "`on-failure`: restart a crashed engine with capped exponential backoff (1 s to 30 s; reset after a minute of running)"},
		RestartNo, oneOf("restart policy", RestartNo, RestartOnFailure), func(s *Settings) *Field[string] { return &s.Restart }),
	value(Row{Name: "strict-width", Flag: "strict-width", Envs: []string{"MLXCEL_STRICT_WIDTH"}, Key: "serve.strict_width", Scope: ScopeServe, Doc: "stop with exit code 3 when the engine runs another width or declines speculation"},
		false, ParseBool, func(s *Settings) *Field[bool] { return &s.StrictWidth }),
	value(Row{Name: "probe", Flag: "probe", Envs: []string{"MLXCEL_PROBE"}, Key: "serve.probe", Scope: ScopeServe, Doc: "llama.cpp: one short greedy request after ready verifies the running width; `--no-probe` turns it off"},
		true, ParseBool, func(s *Settings) *Field[bool] { return &s.Probe }),
	value(Row{Name: "watch", Flag: "watch", Envs: []string{"MLXCEL_WATCH"}, Key: "serve.watch", Scope: ScopeServe, Doc: "reload on profile/policy changes when a file is in use (`--no-watch` turns it off)"},
		true, ParseBool, func(s *Settings) *Field[bool] { return &s.Watch }),
	value(Row{Name: "raw-engine-output", Flag: "raw-engine-output", Envs: []string{"MLXCEL_RAW_ENGINE_OUTPUT"}, Key: "serve.raw_engine_output", Scope: ScopeServe, Doc: "pass engine output through as it comes (API keys it prints still masked) instead of prefixing `engine N | ` (N numbers the engines: two run during an overlap switch)"},
		false, ParseBool, func(s *Settings) *Field[bool] { return &s.RawEngineOutput }),
	value(Row{Name: "proxy", Flag: "proxy", Envs: []string{"MLXCEL_PROXY"}, Key: "server.proxy", Scope: ScopeServe, Doc: "serve through speclaunch's front proxy on `--host`/`--port`; `false` (`--no-proxy`) runs the engine on that address directly, and a switch then stops the old engine before starting the new one (docs/serving.md)"},
		true, ParseBool, func(s *Settings) *Field[bool] { return &s.Proxy }),
	value(Row{Name: "switch", Flag: "switch", Envs: []string{"MLXCEL_SWITCH"}, Key: "server.switch", Scope: ScopeServe, Doc: "`overlap` (new engine beside the old), `drain` (hold requests while one engine is swapped), `auto` (drain when two copies would not fit in GPU memory, overlap otherwise; the log says why)"},
		key.SwitchAuto, parseSwitch, func(s *Settings) *Field[key.Switch] { return &s.Switch }),
	value(Row{Name: "drain-timeout", Flag: "drain-timeout", Envs: []string{"MLXCEL_DRAIN_TIMEOUT"}, Key: "server.drain_timeout", Scope: ScopeServe, Doc: "how long an old engine may finish its requests before it is stopped"},
		DefaultDrainTimeout, parseDuration, func(s *Settings) *Field[time.Duration] { return &s.DrainTimeout }),
	value(Row{Name: "hold-timeout", Flag: "hold-timeout", Envs: []string{"MLXCEL_HOLD_TIMEOUT"}, Key: "server.hold_timeout", Scope: ScopeServe, Doc: "how long a request may wait during a switch before it gets `503` with `Retry-After`"},
		DefaultHoldTimeout, parseDuration, func(s *Settings) *Field[time.Duration] { return &s.HoldTimeout }),
	value(Row{Name: "shutdown-timeout", Flag: "shutdown-timeout", Envs: []string{"MLXCEL_SHUTDOWN_TIMEOUT"}, Key: "server.shutdown_timeout", Scope: ScopeServe, Doc: "after SIGTERM, how long requests in flight and held may finish before the engine is stopped (docs/serving.md, \"Stopping\"); above 0"},
		DefaultShutdownTimeout, parseDuration, func(s *Settings) *Field[time.Duration] { return &s.ShutdownTimeout }),
	value(Row{Name: "hang-timeout", Flag: "hang-timeout", Envs: []string{"MLXCEL_HANG_TIMEOUT"}, Key: "server.hang_timeout", Scope: ScopeServe, Doc: "an engine that answers nothing (not even `/health`) this long is taken as failed: killed, and `serve.restart` applies; `0` or `off` turns hang detection off"},
		DefaultHangTimeout, parseDurationOrOff, func(s *Settings) *Field[time.Duration] { return &s.HangTimeout }),
	value(Row{Name: "queue-size", Flag: "queue-size", Envs: []string{"MLXCEL_QUEUE_SIZE"}, Key: "server.queue_size", Scope: ScopeServe, Doc: "requests held at most during a switch (1 to 1048576); more get `503` at once"},
		DefaultQueueSize, parseQueueSize, func(s *Settings) *Field[int] { return &s.QueueSize }),
	value(Row{Name: "adapt", Flag: "adapt", Envs: []string{"MLXCEL_ADAPT"}, Key: "adapt.enabled", Scope: ScopeServe, Doc: "learn the width schedule from live traffic (llama.cpp and the sim; docs/adaptive.md); an operator width turns it off"},
		false, ParseBool, func(s *Settings) *Field[bool] { return &s.Adapt }),
	value(Row{Name: "adapt-max-width", Envs: []string{"MLXCEL_ADAPT_MAX_WIDTH"}, Key: "adapt.max_width", Scope: ScopeServe, HelpOn: "adapt", Doc: "widest width the loop may try (2 to 256)"},
		defaults.AdaptMaxWidth, wholeIn("the widest width the adaptive loop may try", key.MinWidth, key.MaxWidth), func(s *Settings) *Field[int] { return &s.AdaptMaxWidth }),
	checked(value(Row{Name: "adapt-explore-width", Envs: []string{"MLXCEL_ADAPT_EXPLORE_WIDTH"}, Key: "adapt.explore_width", Scope: ScopeServe, Retired: true, Default: "0 (unset)", Doc: "read and validated (at most `adapt.max_width`), no longer used: the log says so when it is set"},
		0, zeroOr(wholeIn("the exploration width W0", key.MinWidth, key.MaxWidth)), func(s *Settings) *Field[int] { return &s.AdaptExplore }), checkExplore, "adapt-max-width"),
	value(Row{Name: "adapt-min-cycles", Envs: []string{"MLXCEL_ADAPT_MIN_CYCLES"}, Key: "adapt.min_cycles", Scope: ScopeServe, HelpOn: "adapt", Doc: "draft cycles behind every position used before a decision (16 or more)"},
		defaults.AdaptMinCycles, wholeIn("the draft cycles observed before a decision", 16, 1<<30), func(s *Settings) *Field[int] { return &s.AdaptMinCycles }),
	value(Row{Name: "adapt-trials", Envs: []string{"MLXCEL_ADAPT_TRIALS"}, Key: "adapt.trials", Scope: ScopeServe, HelpOn: "adapt", Doc: "0 turns trials off (only widths already measured are chosen); 1 to 8 leave them on"},
		defaults.AdaptMaxTrials, wholeIn("adapt.trials, the widths the adaptive loop may try out (0 turns trials off)", 0, MaxAdaptTrials), func(s *Settings) *Field[int] { return &s.AdaptTrials }),
	value(Row{Name: "adapt-margin", Envs: []string{"MLXCEL_ADAPT_MARGIN"}, Key: "adapt.margin", Scope: ScopeServe, Retired: true, Doc: "read and validated (above 0, below 1), no longer used: the log says so when it is set"},
		defaults.AdaptMargin, parseMargin, func(s *Settings) *Field[float64] { return &s.AdaptMargin }),
	value(Row{Name: "adapt-window", Envs: []string{"MLXCEL_ADAPT_WINDOW"}, Key: "adapt.window", Scope: ScopeServe, HelpOn: "adapt", Doc: "after a switch that failed, no switch for this long"},
		defaults.AdaptWindow, parseDuration, func(s *Settings) *Field[time.Duration] { return &s.AdaptWindow }),

	value(Row{Name: "bench-widths", Flag: "widths", Key: "bench.widths", Scope: ScopeBench, Doc: "widths to sweep, comma-separated, each 2 to 256, none twice"},
		defaults.BenchWidths(), parseWidths, func(s *Settings) *Field[[]int] { return &s.Bench.Widths }),
	value(Row{Name: "bench-rounds", Flag: "rounds", Key: "bench.rounds", Scope: ScopeBench, Doc: "measured rounds per arm, at least 3"},
		defaults.BenchRounds, parseRounds, func(s *Settings) *Field[int] { return &s.Bench.Rounds }),
	value(Row{Name: "bench-warmup", Flag: "warmup", Key: "bench.warmup", Scope: ScopeBench, Doc: "discarded warm-up requests per server start, 0 for none; at least one per prompt of a set"},
		defaults.BenchWarmup, parseWarmup, func(s *Settings) *Field[int] { return &s.Bench.Warmup }),
	value(Row{Name: "bench-max-tokens", Flag: "max-tokens", Key: "bench.max_tokens", Scope: ScopeBench, Doc: "tokens per request, 1 to 65536"},
		defaults.BenchMaxTokens, parseMaxTokens, func(s *Settings) *Field[int] { return &s.Bench.MaxTokens }),
	randomWhenUnset(checked(value(Row{Name: "bench-base-port", Flag: "base-port", Key: "bench.base_port", Scope: ScopeBench, Default: randomArmPorts, Doc: "first loopback port for arm servers (arm i on base+i); without it each arm gets a free loopback port drawn at random below the ephemeral range, so two benches on one host never collide"},
		defaults.BenchBasePort, wholeNumber("base port"), func(s *Settings) *Field[int] { return &s.Bench.BasePort }), checkBasePort, "bench-widths")),
	value(Row{Name: "bench-schedule", Flag: "schedule", Key: "bench.schedule", Scope: ScopeBench, Doc: "`restart`: one server at a time, each round restarts every arm; `resident`: every arm's server up at once"},
		defaults.BenchSchedule, parseSchedule, func(s *Settings) *Field[string] { return &s.Bench.Schedule }),
	pathRow(Row{Name: "bench-prompt-file", Flag: "prompt-file", Key: "bench.prompt_file", Scope: ScopeBench, Default: "the shipped ~160-token Python prompt", Doc: "one prompt file; not with a prompt set"},
		func(s *Settings) *Field[string] { return &s.Bench.PromptFile }, false).blankUnset(),
	checked(value(Row{Name: "bench-prompts", Flag: "prompts", Key: "bench.prompts", Scope: ScopeBench, Default: "none", Doc: "a prompt set: a directory of prompt files (relative to the profile), or a shipped set, `code` or `prose`; every arm runs every prompt"},
		"", asIs, func(s *Settings) *Field[string] { return &s.Bench.Prompts }), checkPrompts, "bench-prompt-file"),
	value(Row{Name: "bench-temperature", Flag: "temperature", Key: "bench.temperature", Scope: ScopeBench, Doc: "0 (greedy) up to 5; above 0 every request samples with a fixed seed"},
		0.0, parseTemperature, func(s *Settings) *Field[float64] { return &s.Bench.Temperature }),
	value(Row{Name: "bench-concurrency", Flag: "concurrency", Key: "bench.concurrency", Scope: ScopeBench, Doc: "requests in flight per measured run, 1 to 256; the engine gets `--parallel N` unless you set its slot count (docs/bench.md, \"Load\"). A list of levels, ascending (`1,2,4,8`; in a profile also `[1, 2, 4, 8]`), is a load sweep (docs/schedule.md)"},
		[]int{1}, parseConcurrency, func(s *Settings) *Field[[]int] { return &s.Bench.Concurrency }),
	value(Row{Name: "bench-request-timeout", Flag: "request-timeout", Scope: ScopeBench, Doc: "per request, stalled streams included"},
		defaults.BenchRequestTimeout, parseRequestTimeout, func(s *Settings) *Field[time.Duration] { return &s.Bench.RequestTimeout }).blankUnset(),
	value(Row{Name: "bench-out", Flag: "out", Key: "bench.out", Scope: ScopeBench, Default: "`speclaunch-bench-ENGINE-TIME`", Doc: "output path without extension, in an existing directory: writes OUT.md, OUT.json, OUT.svg"},
		"", asIs, func(s *Settings) *Field[string] { return &s.Bench.Out }).blankUnset(),
}

// Envs maps each row's name to its environment names, highest first.
var Envs = func() map[string][]string {
	m := map[string][]string{}
	for _, r := range Rows {
		if len(r.Envs) > 0 {
			m[r.Name] = r.Envs
		}
	}
	return m
}()

// value makes a row whose one raw value parse reads into the field at
// returns: def when no layer sets it, else the winning layer's value.
func value[T any](r Row, def T, parse func(string) (T, error), at func(*Settings) *Field[T]) Row {
	if r.Default == "" {
		r.Default, r.literal = defaultText(def), true
	}
	_, r.duration = any(def).(time.Duration)
	r.apply = func(r Row, l *layer, s *Settings) error {
		f := at(s)
		*f = Field[T]{Value: def}
		v, src, ok := l.raw(r)
		if !ok {
			return nil
		}
		x, err := parse(v)
		if err != nil {
			return sourced(src, err) // Row.layer names the key
		}
		if err := l.shadowedParse(r, src, s.Engine.Value, func(v string) error { _, err := parse(v); return err }); err != nil {
			return err
		}
		*f = Field[T]{x, src}
		return nil
	}
	r.show = func(s *Settings) (any, string) {
		f := at(s)
		if d, ok := any(f.Value).(time.Duration); ok { // exact: 400ms, never a rounded 0s
			return d.String(), f.Src.String()
		}
		return f.Value, f.Src.String()
	}
	return r
}

// blankUnset makes an empty value of the row's flag count as not given, as
// an empty variable does (bench's --prompt-file, --out and
// --request-timeout always read so: `--out "$OUT"` with OUT unset keeps
// the profile's).
func (r Row) blankUnset() Row {
	r.blank = true
	return r
}

// randomArmPorts is bench.base_port's default as the help, the docs and
// `profile show` say it: no base port, a port drawn per arm.
var randomArmPorts = fmt.Sprintf("none: a free loopback port per arm, drawn at random in %d-%d", defaults.BenchArmPortLo, defaults.BenchArmPortHi-1)

// randomWhenUnset makes `profile show` say randomArmPorts while no layer
// gives the row (bench.base_port): its built-in number is only a fallback
// for when no port is drawn, not the port an arm gets.
func randomWhenUnset(r Row) Row {
	show := r.show
	r.show = func(s *Settings) (any, string) {
		v, src := show(s)
		if s.Bench.BasePort.Set() {
			return v, src
		}
		return randomArmPorts, src
	}
	return r
}

// checked adds a check of the layered value against the settings above
// it, the rows it reads named (Row.reads).
func checked(r Row, check func(s *Settings) error, reads ...string) Row {
	r.check, r.reads = check, reads
	return r
}

// pathRow is a string row whose value, when the profile gives it, is
// relative to the profile's directory. model: in a vLLM or SGLang profile
// "owner/name" is a Hugging Face repo id and "ngram" n-gram drafting, kept
// as written (a directory beside the profile is written "./owner/name").
func pathRow(r Row, at func(*Settings) *Field[string], model bool) Row {
	r = value(r, "", asIs, at)
	apply := r.apply
	r.apply = func(r Row, l *layer, s *Settings) error {
		if err := apply(r, l, s); err != nil {
			return err
		}
		f := at(s)
		if err := blankPath(f.Src, f.Value); err != nil {
			return err
		}
		if f.Value != "" && f.Src.Origin == Profile && !(model && key.FetchesModel(s.Engine.Value, f.Value)) {
			f.Value = RelTo(l.prof.Path, f.Value)
		}
		return nil
	}
	return r
}

// blankPath refuses a path of only whitespace (LLAMA_ARG_MODEL=" "): it
// names no file, and every other setting refuses a blank value as one that
// does not parse, where an empty one counts as unset. The one rule for
// every path a row, the profile's name or MLXCEL_POLICY gives.
func blankPath(src Source, v string) error { return blankIn(src, v, false) }

// blankIn is blankPath for a path that is one entry of a list (the
// entries of MLXCEL_POLICY, policy.files): the fix is to drop the entry,
// since unsetting the variable drops the others too.
func blankIn(src Source, v string, entry bool) error {
	if v == "" || strings.TrimSpace(v) != "" {
		return nil
	}
	unset := unsetFix(src.Origin)
	if entry && src.Origin != Flag {
		unset = "remove the blank entry from the list"
	}
	return &Error{Src: src, Msg: fmt.Sprintf("path %s is blank (only whitespace) and names no file: give a path, or %s", Quoted(v), unset)}
}

// unsetFix is how a value from origin is taken back, for a value that
// names nothing (only whitespace): every other layer then answers.
func unsetFix(o Origin) string {
	return map[Origin]string{Env: "unset the variable (or set it empty)", Flag: "leave the flag out", Profile: "remove the key"}[o]
}

// layer layers one row into s and runs its check.
func (r Row) layer(l *layer, s *Settings, check bool) error {
	if r.apply == nil {
		return nil
	}
	err := r.apply(r, l, s)
	if err == nil && check && r.check != nil {
		err = r.check(s)
	}
	// A row's error names its profile key, whichever step found it: the
	// width's and the checks' named the line alone.
	var e *Error
	if errors.As(err, &e) {
		keyed(r, e)
	}
	return err
}

// keyed names the profile's key in e, a value's error from a profile, whose
// file:line alone left the operator to find which setting the line holds
// ("bad duration \"banana\"" for adapt.window); a flag or a variable
// names itself, and a message that names the key already is left.
func keyed(r Row, e *Error) {
	if e.Src.Origin == Profile && r.Key != "" && !strings.Contains(e.Error(), r.Key) {
		e.Msg = r.Key + ": " + e.Msg
	}
}

// sourced names the source in a parser's error: a parser returns an *Error
// without one, or a plain error that is its message.
func sourced(src Source, err error) error {
	var e *Error
	if errors.As(err, &e) {
		e.Src = src
		return e
	}
	return &Error{Src: src, Msg: err.Error()}
}

func asIs(v string) (string, error) { return v, nil }

// parseSwitch reads server.switch into the one switch mode type.
func parseSwitch(v string) (key.Switch, error) {
	w, err := oneOf("switch mode", string(key.SwitchOverlap), string(key.SwitchDrain), string(key.SwitchAuto))(v)
	return key.Switch(w), err
}

func parseEngine(v string) (key.Engine, error) {
	e, err := key.ParseEngine(v)
	if err != nil {
		return "", &Error{Msg: "bad engine", Err: err}
	}
	return e, nil
}

func parseCapability(v string) (string, error) {
	if v != "" {
		if _, err := key.ParseCapability(v); err != nil {
			return "", &Error{Msg: "bad compute capability", Err: err}
		}
	}
	return v, nil
}

func parseQuant(v string) (string, error) {
	if v != "" {
		if _, err := key.ParseQuant(v); err != nil {
			return "", &Error{Msg: "bad quantization", Err: err}
		}
	}
	return v, nil
}

func parsePort(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > 65535 {
		msg := fmt.Sprintf("bad port %s: want a number from 1 to 65535", Quoted(v))
		if serviceLink.MatchString(strings.TrimSpace(v)) {
			msg += "; this looks like a Kubernetes service link (a Service named mlxcel makes Kubernetes set MLXCEL_PORT=tcp://IP:PORT in the pods beside it): set enableServiceLinks: false in the pod spec, or set the port with LLAMA_ARG_PORT or --port, which win over MLXCEL_PORT (docs/containers.md)"
		}
		return 0, errors.New(msg)
	}
	return n, nil
}

// serviceLink is the form of the variable NAME_PORT Kubernetes sets for
// each Service NAME in the pod's namespace (tcp://10.96.0.10:8080).
var serviceLink = regexp.MustCompile(`^(?:tcp|udp|sctp)://[^/:\s]+:[0-9]+$`)

func parseQueueSize(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > MaxQueueSize {
		return 0, fmt.Errorf("bad queue size %s: want the number of requests to hold during a switch, from 1 to %d", Quoted(v), MaxQueueSize)
	}
	return n, nil
}

func parseMargin(v string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(f > 0 && f < 1) { // NaN fails both
		return 0, fmt.Errorf("bad adapt.margin %s: want a fraction above 0 and below 1, e.g. 0.03; the setting is no longer used, so removing it is the simplest fix", Quoted(v))
	}
	return f, nil
}

// Durations past what a time.Duration holds (about 292 years) are out of
// range, and said so: converted, a number of seconds that large wrapped
// negative and read as "must be above 0", and time.ParseDuration says only
// "invalid duration" of 9999999h.
const (
	maxDurationSeconds = float64(math.MaxInt64) / float64(time.Second)
)

var (
	errNotDuration  = errors.New("not a duration")
	errDurationLong = errors.New("far out of range")
	// durationForm is time.ParseDuration's grammar: a value of this form
	// that it refuses has overflowed.
	durationForm = regexp.MustCompile(`^[-+]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+$`)
)

// readDuration reads a Go duration or a number of seconds: errNotDuration
// when v is neither, errDurationLong when it is one too long to hold.
func readDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	d, err := time.ParseDuration(v)
	if err == nil {
		return d, nil
	}
	if durationForm.MatchString(v) {
		return 0, errDurationLong
	}
	secs, err := strconv.ParseFloat(v, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) || err == nil && math.Abs(secs) >= maxDurationSeconds: // ±Inf too
		return 0, errDurationLong
	case err != nil || math.IsNaN(secs):
		return 0, errNotDuration
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// DurationOverflows reports a value of a duration's form too long to
// hold (9999999999h): one rule for the messages that say so.
func DurationOverflows(v string) bool {
	_, err := readDuration(v)
	return errors.Is(err, errDurationLong)
}

func parseDuration(v string) (time.Duration, error) {
	d, err := readDuration(v)
	switch {
	case errors.Is(err, errDurationLong):
		return 0, fmt.Errorf("bad duration %s: far out of range; want %s, e.g. 30s, 10m or a number of seconds", Quoted(v), profiles.DurationRange(false))
	case err != nil:
		return 0, fmt.Errorf("bad duration %s: want e.g. 30s, 10m or a number of seconds", Quoted(v))
	case d <= 0:
		return 0, fmt.Errorf("bad duration %s: want %s, e.g. 30s, 10m or a number of seconds", Quoted(v), profiles.DurationRange(false))
	}
	return d, nil
}

// parseDurationOrOff is parseDuration where 0 (or "off") means off.
func parseDurationOrOff(v string) (time.Duration, error) {
	if strings.EqualFold(strings.TrimSpace(v), "off") {
		return 0, nil
	}
	d, err := readDuration(v)
	switch {
	case errors.Is(err, errDurationLong):
		return 0, fmt.Errorf("bad duration %s: far out of range; want %s, e.g. 30s, 10m or a number of seconds", Quoted(v), profiles.DurationRange(true))
	case err != nil:
		return 0, fmt.Errorf("bad duration %s: want e.g. 30s, 10m or a number of seconds, or 0 for off", Quoted(v))
	case d < 0:
		return 0, fmt.Errorf("bad duration %s: want %s, e.g. 30s, 10m or a number of seconds", Quoted(v), profiles.DurationRange(true))
	}
	return d, nil
}

// oneOf reads one of a few words (case-insensitive); what names the
// setting in the error ("bad log level \"x\": want debug, info, warn or
// error").
func oneOf(what string, opts ...string) func(string) (string, error) {
	return func(v string) (string, error) {
		if w := strings.ToLower(v); slices.Contains(opts, w) {
			return w, nil
		}
		want := strings.Join(opts, ", ")
		if n := len(opts); n > 1 {
			want = strings.Join(opts[:n-1], ", ") + " or " + opts[n-1]
		}
		// v as given: lowered, a byte that is no UTF-8 read as U+FFFD.
		return "", fmt.Errorf("bad %s %s: want %s", what, Quoted(v), want)
	}
}

// wholeIn reads a whole number in [lo, hi]; what names it in the error.
func wholeIn(what string, lo, hi int) func(string) (int, error) {
	return func(v string) (int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("bad value %s for %s: want a whole number from %d to %d", Quoted(v), what, lo, hi)
		}
		return n, nil
	}
}

// zeroOr takes 0 as well as what parse takes: the value a row shows as
// its default ("0 (unset)") is one an operator may write.
func zeroOr(parse func(string) (int, error)) func(string) (int, error) {
	return func(v string) (int, error) {
		if strings.TrimSpace(v) == "0" {
			return 0, nil
		}
		n, err := parse(v)
		if err != nil {
			return 0, fmt.Errorf("%w, or 0 (unset)", err)
		}
		return n, nil
	}
}

// wholeNumber reads any whole number (a flag's was read by the flag
// parser already; a profile's by the TOML decoder).
func wholeNumber(what string) func(string) (int, error) {
	return func(v string) (int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("bad %s %s: want a whole number", what, Quoted(v))
		}
		return n, nil
	}
}

// within reads a whole number and checks it with ok, else the error says.
func within(what string, ok func(n int) bool, msg func(n int) string) func(string) (int, error) {
	read := wholeNumber(what)
	return func(v string) (int, error) {
		n, err := read(v)
		if err == nil && !ok(n) {
			err = errors.New(msg(n))
		}
		return n, err
	}
}

var (
	parseRounds = within("rounds", func(n int) bool { return n >= defaults.BenchMinRounds }, func(n int) string {
		return fmt.Sprintf("%d rounds is below %d: ranges from fewer rounds cannot separate widths; use 5", n, defaults.BenchMinRounds)
	})
	parseWarmup = within("warm-up", func(n int) bool { return n >= 0 }, func(n int) string {
		return fmt.Sprintf("warm-up %d is negative; use 0 for none or 1", n)
	})
	parseMaxTokens = within("max tokens", func(n int) bool { return n >= 1 && n <= 65536 }, func(n int) string {
		return fmt.Sprintf("max tokens %d: want 1 to 65536 (200 is the usual)", n)
	})
	parseOneConcurrency = within("concurrency", func(n int) bool { return n >= 1 && n <= defaults.BenchMaxConcurrency }, func(n int) string {
		return fmt.Sprintf("concurrency %d: want 1 (one request at a time, the default) to %d", n, defaults.BenchMaxConcurrency)
	})
)

// parseConcurrency reads bench.concurrency: one level, or a load sweep's
// levels (whole numbers of concurrent clients, ascending, without
// repeats, at most record.MaxLevels of them).
func parseConcurrency(v string) ([]int, error) {
	if !strings.Contains(v, ",") {
		n, err := parseOneConcurrency(v)
		return []int{n}, err
	}
	return ParseLevels(v)
}

// ParseLevels reads a list of load levels ("1,2,4,8": concurrent
// clients, ascending), for bench's --concurrency and tune's --levels; the
// error says which level breaks which rule.
func ParseLevels(v string) ([]int, error) {
	const want = "give whole numbers of concurrent clients, ascending, e.g. 1,2,4,8"
	fields := strings.Split(v, ",")
	if len(fields) > record.MaxLevels {
		return nil, fmt.Errorf("%d levels, above the %d a sweep may measure; give at most %d, e.g. 1,2,4,8", len(fields), record.MaxLevels, record.MaxLevels)
	}
	var out []int
	for i, f := range fields {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		switch {
		case f == "":
			return nil, fmt.Errorf("%q has an empty level (number %d): %s", v, i+1, want)
		case len(f) >= 2 && f[0] == '"' && f[len(f)-1] == '"':
			return nil, fmt.Errorf("%q: level %s is a string, not a whole number: write it without quotes", v, f)
		case errors.Is(err, strconv.ErrRange):
			return nil, fmt.Errorf("%q: level %s is outside 1 to %d clients: %s", v, f, defaults.BenchMaxConcurrency, want)
		case err != nil:
			return nil, fmt.Errorf("%q: level %s is not a whole number: %s", v, Quoted(f), want)
		case n < 1 || n > defaults.BenchMaxConcurrency:
			return nil, fmt.Errorf("%q: level %d is outside 1 to %d clients: %s", v, n, defaults.BenchMaxConcurrency, want)
		case len(out) > 0 && n == out[len(out)-1]:
			return nil, fmt.Errorf("%q: level %d is listed twice: %s", v, n, want)
		case len(out) > 0 && n < out[len(out)-1]:
			return nil, fmt.Errorf("%q: level %d comes after %d, not ascending: %s", v, n, out[len(out)-1], want)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseWidths(v string) ([]int, error) {
	var widths []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number; give widths like 2,3,4,6,8,16", f)
		}
		widths = append(widths, n)
	}
	seen := map[int]bool{}
	for _, w := range widths {
		// bench and tune measure classic as an arm of their own, so
		// key.CheckWidth's "remove the draft model" is the wrong fix here.
		if w < key.MinWidth {
			return nil, fmt.Errorf("width %d is below %d: classic decoding (width 1) is always measured as an arm of its own, so leave it out; give widths from %d to %d", w, key.MinWidth, key.MinWidth, key.MaxWidth)
		}
		if err := key.CheckWidth(w); err != nil {
			return nil, err
		}
		if seen[w] {
			return nil, fmt.Errorf("width %d is listed twice", w)
		}
		seen[w] = true
	}
	return widths, nil
}

func parseSchedule(v string) (string, error) {
	if v != "restart" && v != "resident" {
		return "", fmt.Errorf("schedule %q: want restart or resident", v)
	}
	return v, nil
}

func parseTemperature(v string) (float64, error) {
	t, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(t >= 0 && t <= 5) {
		return 0, fmt.Errorf("temperature %s: want 0 (greedy, the default) up to 5, e.g. 0.7", strings.TrimSpace(v))
	}
	return t, nil
}

func parseRequestTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want a duration %s, e.g. 120s", v, profiles.DurationRange(false))
	}
	return d, nil
}

// checkKind refuses a drafter kind the engine does not take.
func checkKind(s *Settings) error {
	if s.DraftKind.Value == "" {
		return nil
	}
	d, err := ParseKind(s.DraftKind.Value)
	if err == nil {
		err = key.CheckSelectable(s.Engine.Value, d)
	}
	if err != nil {
		return &Error{Src: s.DraftKind.Src, Msg: "bad drafter kind", Err: err}
	}
	return nil
}

func checkExplore(s *Settings) error {
	if w, top := s.AdaptExplore.Value, s.AdaptMaxWidth.Value; w > 0 && w > top {
		return &Error{Src: s.AdaptExplore.Src, Msg: fmt.Sprintf("exploration width %d is wider than adapt.max_width %d: lower it or raise adapt.max_width", w, top)}
	}
	return nil
}

func checkBasePort(s *Settings) error {
	b := s.Bench
	if p := b.BasePort.Value; p < 1 || p+len(b.Widths.Value)+2 > 65535 {
		return &Error{Src: b.BasePort.Src, Msg: fmt.Sprintf("base port %d: want a port with room for one per arm below 65536", p)}
	}
	return nil
}

func checkPrompts(s *Settings) error {
	b := s.Bench
	if b.Prompts.Value != "" && b.PromptFile.Value != "" {
		return &Error{Src: b.Prompts.Src, Msg: fmt.Sprintf("a prompt set and a prompt file (%s) were both given; keep one", b.PromptFile.Src)}
	}
	return nil
}

// defaultText is a default as help and the docs say it.
func defaultText(v any) string {
	switch x := v.(type) {
	case string:
		if x == "" {
			return ""
		}
	case time.Duration:
		s := x.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	case []int:
		return strings.Trim(strings.Join(strings.Fields(fmt.Sprint(x)), ","), "[]")
	}
	return fmt.Sprint(v)
}

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
