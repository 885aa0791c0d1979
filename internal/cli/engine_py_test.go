package cli

import (
	"slices"
	"strings"
	"testing"
)

// Bad vLLM/SGLang input is exit 2 before anything starts, and the message
// names where the bad value came from and the launcher's own setting.
func TestPyBadInputExit2(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no vllm, no python3: nothing is inspected
	vllm := []string{"--engine", "vllm", "-m", "org/model", "-md", "org/draft", "--draft-kind", "eagle3", "--capability", "9.0"}
	sglang := []string{"--engine", "sglang", "-m", "org/model", "-md", "org/draft", "--draft-kind", "eagle3", "--capability", "9.0"}
	with := func(base []string, extra ...string) []string { return append(slices.Clone(base), extra...) }
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"vllm unknown kind", []string{"--engine", "vllm", "-m", "org/model", "-md", "org/draft", "--draft-kind", "dspark"}, []string{"flag --draft-kind", `"dspark" is not supported by engine vllm`, "accepted: draft, eagle, eagle3, mtp, ngram, dflash"}},
		{"sglang internal-mtp", []string{"--engine", "sglang", "-m", "org/model", "-md", "org/draft", "--draft-kind", "internal-mtp"}, []string{"flag --draft-kind", "not user-selectable"}},
		{"vllm width 1", with(vllm, "--draft-block-size", "1"), []string{"flag --draft-block-size", "below 2"}},
		{"sglang width 1", with(sglang, "--draft-block-size", "1"), []string{"flag --draft-block-size", "below 2"}},
		{"vllm owned json key", with(vllm, "--", "--speculative-config", `{"num_speculative_tokens":5}`), []string{"flag engine arguments", `"num_speculative_tokens"`, "--draft-block-size"}},
		{"vllm dotted owned key", with(vllm, "--", "--speculative-config.num_speculative_tokens", "5"), []string{"flag engine arguments", `"num_speculative_tokens"`, "--draft-block-size"}},
		{"vllm short alias owned key", with(vllm, "--", "-sc", `{"method":"ngram"}`), []string{"flag engine arguments", `"method"`, "--draft-kind"}},
		{"vllm legacy flag", with(vllm, "--", "--num-speculative-tokens", "5"), []string{"flag engine arguments", "--draft-block-size"}},
		{"sglang steps", with(sglang, "--", "--speculative-num-steps", "5"), []string{"flag engine arguments", "--draft-block-size"}},
		{"sglang adaptive", with(sglang, "--", "--speculative-adaptive"), []string{"flag engine arguments", "num_steps", "--draft-block-size"}},
		{"ngram sentinel with eagle3", []string{"--engine", "vllm", "-m", "org/model", "-md", "ngram", "--draft-kind", "eagle3"}, []string{"flag --draft-model", "--draft-kind ngram"}},
	}
	for _, c := range cases {
		for _, cmd := range [][]string{{"resolve"}, {"serve", "--dry-run"}} {
			t.Run(c.name+"/"+strings.Join(cmd, " "), func(t *testing.T) {
				var stdout, stderr strings.Builder
				code := Main(append(cmd, c.args...), Embedded{Policy: policyTOML}, &stdout, &stderr)
				if code != 2 {
					t.Fatalf("exit %d, want 2; stderr %q", code, stderr.String())
				}
				for _, w := range c.want {
					if !strings.Contains(stderr.String(), w) {
						t.Errorf("stderr %q lacks %q", stderr.String(), w)
					}
				}
			})
		}
	}
}
