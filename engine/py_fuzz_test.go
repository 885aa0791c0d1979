package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

func pySeed(f *testing.F, name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", "py", name))
	if err != nil {
		f.Fatal(err)
	}
	return string(b)
}

// vLLM's and SGLang's parsers must never panic, whatever the engine serves
// or prints, and what they accept must be self-consistent.

func FuzzParseVLLMMetrics(f *testing.F) {
	f.Add(pySeed(f, "vllm-metrics-eagle3.txt"))
	f.Add(pySeed(f, "vllm-metrics-off.txt"))
	f.Add(VLLMPerPosMetric + `{engine="0",position="99999999999"} 1`)
	f.Add(VLLMPerPosMetric + `{engine="0",position="-1"} 1`)
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVLLMMetrics(s)
		if err != nil {
			return
		}
		if v.NumSpecTokens < 0 || len(v.AcceptedByPos) != v.NumSpecTokens {
			t.Fatalf("positions %d, per-position %d", v.NumSpecTokens, len(v.AcceptedByPos))
		}
	})
}

func FuzzParseSGLangServerInfo(f *testing.F) {
	f.Add([]byte(pySeed(f, "sglang-server-info.json")))
	f.Add([]byte(`{"speculative_algorithm": 3}`))
	f.Add([]byte(`{"speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": -2}`))
	f.Add([]byte(`{"version": "x", "internal_states": [1, {"avg_spec_accept_length": "a"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		i, err := ParseSGLangServerInfo(b)
		if err == nil && i.Algorithm != "" && i.Width() < 1 {
			t.Fatalf("algorithm %q accepted with width %d", i.Algorithm, i.Width())
		}
	})
}

func FuzzPyObserveLine(f *testing.F) {
	for _, n := range []string{"vllm-startup.txt", "sglang-startup.txt"} {
		f.Add(pySeed(f, n))
	}
	f.Add("SpeculativeConfig(method='x', model=None, num_spec_tokens=99999999999999999999)")
	f.Fuzz(func(t *testing.T, line string) {
		for _, e := range []key.Engine{key.VLLM, key.SGLang} {
			a, _ := For(e)
			if o, ok := a.ObserveLine(line); ok && o.Width < 0 {
				t.Fatalf("%s: negative width from %q", e, line)
			}
		}
	})
}
