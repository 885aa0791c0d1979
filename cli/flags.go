package cli

import (
	"fmt"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/speclaunch/speclaunch/config"
)

// LaunchFlags is the flag surface shared by resolve, serve and bench. Every
// value is taken as a string and parsed by config.Load, so that a bad value
// is reported once, the same way, naming its source, whether it came from a
// flag, a variable or a profile. Env names are shown in help but read by
// config.Load (Kong's own env handling lets an empty variable shadow the
// next name and puts config files above env).
type LaunchFlags struct {
	Profile        string   `help:"Profile: a TOML file path, or a NAME looked up in ./profiles, $$XDG_CONFIG_HOME/speclaunch/profiles, /etc/speclaunch/profiles (env: $MLXCEL_PROFILE)." placeholder:"PATH|NAME" group:"Launch"`
	Policy         []string `help:"Extra policy file layered over the embedded one; repeatable, later files win (env: $MLXCEL_POLICY, a :-separated list)." placeholder:"FILE" group:"Launch"`
	Engine         string   `help:"Engine: mlxcel, llama.cpp, vllm, sglang or sim (env: $MLXCEL_ENGINE; default mlxcel)." placeholder:"NAME" group:"Launch"`
	EngineBinary   string   `help:"Engine binary (default mlxcel-server / llama-server on PATH) (env: $MLXCEL_ENGINE_BINARY)." placeholder:"PATH" group:"Launch"`
	Model          string   `short:"m" help:"Target model: an MLX checkpoint directory or a GGUF file (env: $LLAMA_ARG_MODEL, $MLXCEL_MODEL)." placeholder:"PATH" group:"Launch"`
	DraftModel     string   `help:"Draft model; also -md (env: $LLAMA_ARG_SPEC_DRAFT_MODEL, $LLAMA_ARG_MODEL_DRAFT, $MLXCEL_DRAFT_MODEL). Without one, speculation is off." placeholder:"PATH" group:"Launch"`
	DraftKind      string   `help:"Drafter kind: dflash|mtp (mlxcel, sim), draft|mtp|dflash|dspark|eagle3 (llama.cpp), draft|eagle|eagle3|mtp|ngram|dflash (vllm, sglang); default detected from the drafter (env: $LLAMA_ARG_DRAFT_KIND, $MLXCEL_DRAFT_KIND)." placeholder:"KIND" group:"Launch"`
	DraftBlockSize string   `help:"Draft width = verify rows = draft tokens + 1; overrides the policy (env: $LLAMA_ARG_DRAFT_BLOCK_SIZE, $MLXCEL_DRAFT_BLOCK_SIZE)." placeholder:"W" group:"Launch"`
	SpecDraftNMax  string   `name:"spec-draft-n-max" help:"The width in llama.cpp's unit, draft tokens N (= width N+1) (env, llama.cpp engine: $LLAMA_ARG_SPEC_DRAFT_N_MAX, $LLAMA_ARG_DRAFT_MAX)." placeholder:"N" group:"Launch"`
	Capability     string   `help:"CUDA compute capability to resolve for instead of probing nvidia-smi, e.g. 9.0 or 12.1 (env: $MLXCEL_CUDA_CAPABILITY)." placeholder:"X.Y" group:"Launch"`
	Quant          string   `help:"Target quantization instead of reading it from the checkpoint: affine, nvfp4, other, q4_0, q4_k, q8_0, f16, ... (env: $MLXCEL_QUANT)." placeholder:"Q" group:"Launch"`
	Host           string   `help:"Address the engine listens on (env: $LLAMA_ARG_HOST, $MLXCEL_HOST; default 127.0.0.1)." placeholder:"HOST" group:"Launch"`
	Port           string   `help:"Port the engine listens on (env: $LLAMA_ARG_PORT, $MLXCEL_PORT; default 8080)." placeholder:"PORT" group:"Launch"`
	LogFormat      string   `help:"Log format: auto (colour on a terminal unless NO_COLOR), text, color, json (env: $MLXCEL_LOG_FORMAT)." placeholder:"FMT" group:"Logging"`
	LogLevel       string   `help:"Log level: debug, info, warn, error (env: $MLXCEL_LOG_LEVEL)." placeholder:"LEVEL" group:"Logging"`

	EngineArgs []string `arg:"" optional:"" passthrough:"" help:"Extra engine arguments after --, passed through verbatim." placeholder:"-- ENGINE-ARGS"`
}

// given returns the raw values of the flags that appeared on the command
// line, keyed by long name.
func given(kctx *kong.Context) map[string]string {
	out := map[string]string{}
	for _, p := range kctx.Path {
		if p.Flag == nil || p.Resolved {
			continue
		}
		if p.Flag.Name == "policy" {
			continue
		}
		out[p.Flag.Name] = fmt.Sprint(p.Flag.Value.Target.Interface())
	}
	return out
}

// input builds config.Input from parsed flags.
func (f *LaunchFlags) input(kctx *kong.Context, getenv func(string) string, extra map[string]string, pass []string) config.Input {
	flags := given(kctx)
	for k, v := range extra {
		flags[k] = v
	}
	return config.Input{Flags: flags, Policies: f.Policy, Passthrough: pass, Getenv: getenv}
}

// shortFlags are llama-style multi-letter single-dash flags. Kong (like
// clap) would read "-md" as "-m -d"; mlxcel rewrites them in an argv
// pre-pass, and so do we. Only our own flags are rewritten, only before
// "--".
var shortFlags = map[string]string{
	"-md": "--draft-model",
}

func isNegativeNumber(s string) bool {
	if len(s) < 2 || s[0] != '-' {
		return false
	}
	for _, r := range s[1:] {
		if (r < '0' || r > '9') && r != '.' {
			return false
		}
	}
	return true
}

func rewriteShort(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		// Kong reads "--rounds -1" as a flag followed by short flags; join a
		// negative number to its long flag so the value reaches validation
		// and gets the real message ("below 2", "at least 3").
		if strings.HasPrefix(a, "--") && !strings.Contains(a, "=") && i+1 < len(args) && isNegativeNumber(args[i+1]) {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		if long, ok := shortFlags[a]; ok {
			out = append(out, long)
			continue
		}
		if name, val, ok := strings.Cut(a, "="); ok {
			if long, ok := shortFlags[name]; ok {
				out = append(out, long+"="+val)
				continue
			}
		}
		out = append(out, a)
	}
	return out
}
