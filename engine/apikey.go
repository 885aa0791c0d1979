package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/secret"
)

// APIKeySpec says where an engine reads the API keys it requires of every
// request: llama-server's --api-key (a comma-separated list) and
// LLAMA_API_KEY, its --api-key-file and LLAMA_ARG_API_KEY_FILE (one key
// per line, "#" comments), which mlxcel-server and the sim read as well;
// vLLM's --api-key (one or more values) and VLLM_API_KEY; SGLang's
// --api-key.
func APIKeySpec(e key.Engine) secret.Spec {
	switch e {
	case key.LlamaCpp, key.MLXCEL, key.Sim:
		return secret.Spec{Flags: []string{"--api-key"}, FileFlags: []string{"--api-key-file"},
			Env: []string{"LLAMA_API_KEY"}, FileEnv: []string{secret.LlamaKeyFileEnv}, Split: true}
	case key.VLLM:
		return secret.Spec{Flags: []string{"--api-key"}, Env: []string{"VLLM_API_KEY"}, Multi: true}
	case key.SGLang:
		return secret.Spec{Flags: []string{"--api-key"}}
	}
	return secret.Spec{}
}

// ChecksKeysAsLlama says e's server checks its API keys as llama-server
// does (secret.Refused: every path but the public ones, the key in
// Authorization or X-Api-Key, llama-server's 401 body): llama.cpp,
// mlxcel-server and the sim. vLLM guards only paths under /v1, SGLang by
// its own rule; the proxy leaves those engines to answer for themselves.
func ChecksKeysAsLlama(e key.Engine) bool {
	switch e {
	case key.LlamaCpp, key.MLXCEL, key.Sim:
		return true
	}
	return false
}

// keyEnv is the variable an engine reads the keys of its key flag from,
// and how several keys share it: llama-server's LLAMA_API_KEY (mlxcel-server
// and the sim read it too) is a comma list whose keys add to the flag's, so
// the two join; vLLM's VLLM_API_KEY holds one key, used when no --api-key
// is given (sep ""). SGLang reads none ("").
func keyEnv(e key.Engine) (name, sep string) {
	switch e {
	case key.LlamaCpp, key.MLXCEL, key.Sim:
		return "LLAMA_API_KEY", ","
	case key.VLLM:
		return "VLLM_API_KEY", ""
	}
	return "", ""
}

// keysToEnv moves an API key typed as an engine flag (--api-key K, in the
// pass-through arguments after the listen address) into the variable the
// engine reads it from, so that it is not on the engine's command line,
// which every user of the host sees in ps (issue 33). The engine requires
// the same keys. Where the engine reads no such variable (SGLang), or it
// cannot hold them all (several vLLM keys), the flag stays, with a warning
// that says what to do instead. A key flag with no value stays for
// secret.Keys to refuse.
func (l *Launch) keysToEnv(e key.Engine, engine string) {
	if l.portAt <= 0 || l.portAt >= len(l.Argv) {
		return
	}
	head, tail := l.Argv[:l.portAt+1], l.Argv[l.portAt+1:]
	rest, vals, ok := secret.TakeKeyFlags(APIKeySpec(e), tail)
	if !ok || len(vals) == 0 {
		return
	}
	name, sep := keyEnv(e)
	switch {
	case name == "":
		l.Warnings = append(l.Warnings, fmt.Sprintf("the API key given as --api-key is on %s's command line, which every user of this host sees in ps (%s reads no key from its environment): run it where other users cannot list its processes (a container)", engine, engine))
		return
	case sep == "" && len(vals) > 1:
		l.Warnings = append(l.Warnings, fmt.Sprintf("%d API keys given as --api-key are on %s's command line, which every user of this host sees in ps: %s holds one key; give one key there instead of the flag", len(vals), engine, name))
		return
	}
	env := parseEnviron(l.Env)
	v := strings.Join(vals, sep)
	if old, set := env.get(name); set && old != "" && sep != "" {
		v += sep + old // the variable's keys add to the flag's
	}
	env.set(name, v)
	l.Env = env.list(nil)
	if l.EnvSet == nil {
		l.EnvSet = map[string]string{}
	}
	l.EnvSet[name] = v
	l.Argv = append(slices.Clone(head), rest...)
}
