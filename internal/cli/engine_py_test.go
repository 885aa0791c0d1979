package cli

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
)

// Bad vLLM/SGLang input is exit 2 before anything starts, and the message
// names where the bad value came from and the launcher's own setting.
func TestPyBadInputExit2(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no vllm, no python3: nothing is inspected
	vllm := []string{"--engine", "vllm", "-m", "org/model", "-md", "org/draft", "--draft-kind", "eagle3", "--capability", "9.0"}
	sglang := []string{"--engine", "sglang", "-m", "org/model", "-md", "org/draft", "--draft-kind", "eagle3", "--capability", "9.0"}
	with := func(base []string, extra ...string) []string { return append(slices.Clone(base), extra...) }
	// The heading names the engine's own arguments, not llama-server's.
	vlArgs, sgArgs := "engine arguments for vLLM on the command line (after --, and any engine flag typed before it): engine argument ", "engine arguments for SGLang on the command line (after --, and any engine flag typed before it): engine argument "
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"vllm unknown kind", []string{"--engine", "vllm", "-m", "org/model", "-md", "org/draft", "--draft-kind", "dspark"}, []string{"flag --draft-kind", `"dspark" is not supported by engine vllm`, "accepted: draft, eagle, eagle3, mtp, ngram, dflash"}},
		{"sglang internal-mtp", []string{"--engine", "sglang", "-m", "org/model", "-md", "org/draft", "--draft-kind", "internal-mtp"}, []string{"flag --draft-kind", "not user-selectable"}},
		{"vllm width 1", with(vllm, "--draft-block-size", "1"), []string{"flag --draft-block-size", "below 2"}},
		{"sglang width 1", with(sglang, "--draft-block-size", "1"), []string{"flag --draft-block-size", "below 2"}},
		{"vllm owned json key", with(vllm, "--", "--speculative-config", `{"num_speculative_tokens":5}`), []string{vlArgs, `"num_speculative_tokens"`, "--draft-block-size"}},
		{"vllm dotted owned key", with(vllm, "--", "--speculative-config.num_speculative_tokens", "5"), []string{vlArgs, `"num_speculative_tokens"`, "--draft-block-size"}},
		{"vllm short alias owned key", with(vllm, "--", "-sc", `{"method":"ngram"}`), []string{vlArgs, `"method"`, "--draft-kind"}},
		{"vllm schedule json key", with(vllm, "--", "--speculative-config", `{"num_speculative_tokens_per_batch_size":[[1,4,7],[5,1048576,0]]}`), []string{vlArgs, `"num_speculative_tokens_per_batch_size"`, "--draft-schedule"}},
		{"vllm dotted schedule key", with(vllm, "--", "--speculative-config.num_speculative_tokens_per_batch_size", "[[1,4,7],[5,1048576,0]]"), []string{vlArgs, `"num_speculative_tokens_per_batch_size"`, "--draft-schedule"}},
		{"vllm legacy flag", with(vllm, "--", "--num-speculative-tokens", "5"), []string{vlArgs, "--draft-block-size"}},
		{"sglang steps", with(sglang, "--", "--speculative-num-steps", "5"), []string{sgArgs, "--draft-block-size"}},
		{"sglang adaptive", with(sglang, "--", "--speculative-adaptive"), []string{sgArgs, "num_steps", "--draft-block-size"}},
		{"ngram sentinel with eagle3", []string{"--engine", "vllm", "-m", "org/model", "-md", "ngram", "--draft-kind", "eagle3"}, []string{"flag -md", "--draft-kind ngram"}},
		{"ngram sentinel with eagle3, by the long name", []string{"--engine", "vllm", "-m", "org/model", "--draft-model", "ngram", "--draft-kind", "eagle3"}, []string{"flag --draft-model", "--draft-kind ngram"}},
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

// resolve on an engine that runs one width for a schedule of several
// (SGLang, a vLLM older than 0.24) headlines the width it runs, lists the
// schedule as not run, and warns, the width at one request off included:
// before, "width off at 1 request, 4 at 2+" came with no warning and a
// command that never drafts, and an old vLLM's rows said vLLM picks the
// width itself.
func TestResolveOneWidthEngineSchedule(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, c := range []struct {
		name    string
		engine  string
		version string
		sched   string
		want    []string
	}{
		{"sglang off at one", "sglang", "0.5.6", "1:1,2+:4", []string{"speculation off (", "sglang runs one width at every load", "SGLang takes no width schedule", "is off at one request, so speculation is off at every load"}},
		{"sglang 6 at one", "sglang", "0.5.6", "1:6,2+:4", []string{"draft width 6 (", "sglang takes no schedule: it runs the width for one request in flight", "SGLang takes no width schedule"}},
		{"old vllm off at one", "vllm", "0.20.1", "1:1,2+:4", []string{"speculation off (", "vllm runs one width at every load", "predates num_speculative_tokens_per_batch_size", "is off at one request"}},
		{"old vllm 6 at one", "vllm", "0.20.1", "1:6,2+:4", []string{"draft width 6 (", "vllm takes no schedule: it runs the width for one request in flight", "predates num_speculative_tokens_per_batch_size"}},
	} {
		d := plan.RealDeps()
		d.LookPath = func(string) (string, error) { return "/bin/true", nil }
		d.DetectEngine = func(context.Context, key.Engine, string) (engine.Caps, error) {
			return engine.Caps{Version: c.version, Spelling: engine.VLLMSpellingFor(c.version)}, nil
		}
		r := envRun{getenv: os.Getenv, deps: &d}
		for _, json := range []bool{false, true} {
			args := []string{"resolve", "--engine", c.engine, "-m", "org/model", "-md", "org/draft", "--draft-kind", "eagle3", "--capability", "9.0", "--draft-schedule", c.sched}
			if json {
				args = append(args, "--json")
			}
			code, o, e := r.cli(args...)
			head, _, _ := strings.Cut(o, "\n")
			if code != 0 || strings.Contains(head, "4 at 2+") || json && !strings.Contains(o, `"headline": "`+c.want[0]) || !json && !strings.HasPrefix(head, c.want[0]) {
				t.Errorf("%s (json %v): exit %d, a headline that promises the schedule:\n%s%s", c.name, json, code, o, e)
			}
			for _, w := range c.want[1:] {
				if json && strings.Contains(w, "takes no schedule:") {
					continue // the text output's schedule rows
				}
				if !strings.Contains(o, w) {
					t.Errorf("%s (json %v): no %q in:\n%s%s", c.name, json, w, o, e)
				}
			}
		}
	}
}

// resolve's headline says what left the quantization unknown, as the
// target line does: a repo-id target's is not read here (it said "a
// target whose config.json could not be read" beside a target line that
// said repo id); a local directory's config.json could not be read.
func TestResolveUnknownQuantHeadline(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no vllm, no python3: nothing is inspected
	dir := t.TempDir()
	for _, c := range []struct {
		engine, model string
		want, not     string
	}{
		{"vllm", "org/model", "with a Hugging Face repo-id target, whose quant is not known here: give it with --quant", "config.json"},
		{"sglang", "org/model", "with a Hugging Face repo-id target, whose quant is not known here: give it with --quant", "config.json"},
		{"vllm", dir, "with a target whose config.json could not be read", "repo-id"},
	} {
		var stdout, stderr strings.Builder
		code := Main([]string{"resolve", "--engine", c.engine, "-m", c.model, "-md", "org/draft", "--draft-kind", "eagle3"}, Embedded{Policy: policyTOML}, &stdout, &stderr)
		head, _, _ := strings.Cut(stdout.String(), "\n")
		if code != 0 || !strings.Contains(head, c.want) || strings.Contains(head, c.not) {
			t.Errorf("%s -m %s: exit %d, headline %q, want %q and no %q; stderr %q", c.engine, c.model, code, head, c.want, c.not, stderr.String())
		}
	}
}
