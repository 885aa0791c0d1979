package cli

import (
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/quote"
	"github.com/speclaunch/speclaunch/internal/secret"
)

// servingLine says what --host/--port are and where the engine listens:
// behind the proxy they are the public address and the engine gets a
// loopback port of its own (internal/serve/launcher.go startInst).
func servingLine(p *plan.Plan) string {
	s := p.Settings
	addr := net.JoinHostPort(s.Host.Value, strconv.Itoa(s.Port.Value))
	if s.Proxy.Value {
		return "speclaunch's proxy on " + addr + " (--host/--port: the public address); the engine on 127.0.0.1:PORT behind it, PORT a free loopback port picked at start"
	}
	return "the engine directly on " + addr + " (proxy off)"
}

// engineArgv is the engine's command as the engine will get it: behind the
// proxy its listen address is the loopback one serve fills in at start
// (engine.Launch.At), not the public address.
func engineArgv(p *plan.Plan) []string {
	if p.Settings.Proxy.Value {
		if argv, ok := p.Launch.ArgvAt("127.0.0.1", "PORT"); ok {
			return argv
		}
	}
	return slices.Clone(p.Launch.Argv)
}

// writeLaunch prints the engine's command and environment as the engine
// will get them: what speclaunch sets, the engine's own variables it
// inherits (LLAMA_ARG_CTX_SIZE=8192 reaches llama-server as it is), and
// what speclaunch keeps out. Secrets are masked (secret.MaskEnvMap).
func writeLaunch(w io.Writer, p *plan.Plan) {
	if len(p.Launch.Argv) > 0 {
		fmt.Fprintln(w, "command:")
		fmt.Fprintln(w, "  "+plan.ShellJoin(engineArgv(p)))
	}
	inherited := inheritedEnv(p)
	if len(p.Launch.EnvSet) == 0 && len(p.Launch.EnvRemoved) == 0 && len(inherited) == 0 {
		return
	}
	fmt.Fprintln(w, "environment:")
	set := secret.MaskEnvMap(p.Launch.EnvSet)
	for _, k := range sortedKeys(set) {
		fmt.Fprintf(w, "  %s=%s\n", k, envValue(set[k]))
	}
	inherited = shownInherited(p)
	for _, k := range sortedKeys(inherited) {
		if config.EnvTypo(k) != "" {
			fmt.Fprintf(w, "  %s=%s  # inherited; a mistyped name (notes), its value not printed\n", k, inherited[k])
			continue
		}
		fmt.Fprintf(w, "  %s=%s  # inherited\n", k, envValue(inherited[k]))
	}
	for _, k := range p.Launch.EnvRemoved {
		fmt.Fprintf(w, "  unset %s\n", k)
	}
}

// envValue is a variable's value as the environment section shows it:
// shell-quoted, as one would type it; one too long for a line, or with a
// character that is not printable (a newline would forge a line), as the
// notes quote a value (config.Quoted: "a/a/..."... (100000 bytes)).
func envValue(v string) string {
	if len(v) > config.MaxQuoted || strings.ContainsFunc(v, func(r rune) bool { return !quote.Printable(r) }) {
		return config.Quoted(v)
	}
	return plan.ShellQuote(v)
}

// shownInherited is inheritedEnv as resolve shows it, in its text and in
// its JSON (env_inherited) alike: secrets masked (secret.MaskEnvMap), and
// a mistyped name's value not shown at all (****; the notes warn of the
// name).
func shownInherited(p *plan.Plan) map[string]string {
	out := secret.MaskEnvMap(inheritedEnv(p))
	for k := range out {
		if config.EnvTypo(k) != "" {
			out[k] = secret.Masked
		}
	}
	return out
}

// engineEnvPrefixes are the variable families an engine reads itself; a
// dry run shows those the engine inherits, not the whole environment.
var engineEnvPrefixes = map[key.Engine][]string{
	key.LlamaCpp: {"LLAMA_ARG_", "LLAMA_API_KEY"},
	key.MLXCEL:   {"LLAMA_ARG_", "LLAMA_API_KEY", "MLXCEL_", "RUST_LOG"},
	key.Sim:      {"LLAMA_ARG_", "LLAMA_API_KEY", "MLXCEL_"},
	key.VLLM:     {"VLLM_"},
	key.SGLang:   {"SGLANG_", "SGL_"},
}

// inheritedEnv is the engine's variables in its environment that speclaunch
// passes on unchanged (not set by speclaunch, not kept out).
func inheritedEnv(p *plan.Plan) map[string]string {
	prefixes := append([]string{"CUDA_VISIBLE_DEVICES"}, engineEnvPrefixes[p.Settings.Engine.Value]...)
	out := map[string]string{}
	for _, kv := range p.Launch.Env {
		k, v, ok := strings.Cut(kv, "=")
		if _, set := p.Launch.EnvSet[k]; !ok || set || slices.Contains(p.Launch.EnvRemoved, k) {
			continue
		}
		if slices.ContainsFunc(prefixes, func(pre string) bool { return strings.HasPrefix(k, pre) }) {
			out[k] = v
		}
	}
	return out
}
