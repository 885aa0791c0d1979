package engine

import (
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
			Env: []string{"LLAMA_API_KEY"}, FileEnv: []string{"LLAMA_ARG_API_KEY_FILE"}, Split: true}
	case key.VLLM:
		return secret.Spec{Flags: []string{"--api-key"}, Env: []string{"VLLM_API_KEY"}, Multi: true}
	case key.SGLang:
		return secret.Spec{Flags: []string{"--api-key"}}
	}
	return secret.Spec{}
}
