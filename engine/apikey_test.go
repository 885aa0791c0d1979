package engine

import (
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

// The proxy answers an early 401 by llama-server's key rule only for the
// engines that check keys by it: vLLM serves /tokenize, /score, /pooling
// and /invocations without a key, and SGLang has its own rule.
func TestChecksKeysAsLlama(t *testing.T) {
	for _, tc := range []struct {
		e    key.Engine
		want bool
	}{
		{key.LlamaCpp, true},
		{key.MLXCEL, true},
		{key.Sim, true},
		{key.VLLM, false},
		{key.SGLang, false},
	} {
		if got := ChecksKeysAsLlama(tc.e); got != tc.want {
			t.Errorf("ChecksKeysAsLlama(%s) = %v, want %v", tc.e, got, tc.want)
		}
	}
}
