package engine

import (
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

// A schedule given twice (resolved, and in the --speculative-config
// pass-through) is refused, naming where the second came from.
func TestVLLMScheduleGivenTwice(t *testing.T) {
	s := pySettings(key.VLLM, "/models/drafter", "--speculative-config", `{"num_speculative_tokens_per_batch_size": [[1, 0, 3]]}`)
	_, err := vllmAdapter{}.Command(s, sched(t, "1:6,2+:3", 1), key.Eagle3, baseEnv, Caps{Spelling: SpellingVLLMConfig, Version: "0.24.1"})
	if err == nil || !strings.Contains(err.Error(), "give the schedule once") || !strings.HasPrefix(err.Error(), s.ArgsFrom) {
		t.Fatalf("err = %v", err)
	}
	// A flat schedule is one width: no per-batch field, the pass-through's kept.
	l, err := vllmAdapter{}.Command(s, res(4), key.Eagle3, baseEnv, Caps{Spelling: SpellingVLLMConfig, Version: "0.24.1"})
	if err != nil || !strings.Contains(strings.Join(l.Argv, " "), `"num_speculative_tokens":3,"num_speculative_tokens_per_batch_size":[[1,0,3]]`) {
		t.Fatalf("flat: %v %q", err, l.Argv)
	}
}

// vLLM's version decides: 0.24 on takes the schedule, older runs one width.
func TestTakesSchedule(t *testing.T) {
	for v, want := range map[string]bool{"0.24.0": true, "0.26.1rc1": true, "1.0.0": true, "0.23.9": false, "0.11.0": false, "": true} {
		if got, _ := TakesSchedule(key.VLLM, Caps{Version: v}); got != want {
			t.Errorf("vLLM %q: %v, want %v", v, got, want)
		}
	}
	for _, e := range []key.Engine{key.SGLang, key.LlamaCpp, key.MLXCEL, key.Sim} {
		if got, _ := TakesSchedule(e, Caps{Version: "9.9.9"}); got {
			t.Errorf("%s takes a schedule", e)
		}
	}
}
