package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/width"
)

// A schedule in the --speculative-config pass-through is refused in
// every spelling vLLM's parser takes, whether or not speclaunch resolved
// a schedule of its own: passed through beside one width, vLLM ran it
// while resolve headlined the width (draft width 4 beside [[1,4,7],…]).
// The error names where it came from and speclaunch's own schedule.
func TestVLLMScheduleInPassthroughRefused(t *testing.T) {
	const js = `{"num_speculative_tokens_per_batch_size": [[1, 4, 7], [5, 1048576, 0]]}`
	for _, c := range []struct {
		name  string
		args  []string
		sched string // "" for one width
	}{
		{"json, one width", []string{"--speculative-config", js}, ""},
		{"json, a schedule resolved", []string{"--speculative-config", js}, "1:6,2+:3"},
		{"json with =, underscores", []string{"--speculative_config=" + js}, ""},
		{"short alias", []string{"-sc", js}, ""},
		{"dotted", []string{"--speculative-config.num_speculative_tokens_per_batch_size", "[[1,4,7],[5,1048576,0]]"}, ""},
		{"dotted with =, underscores", []string{"--speculative_config.num_speculative_tokens_per_batch_size=[[1,0,3]]"}, "1:6,2+:3"},
		{"dotted short alias", []string{"-sc.num_speculative_tokens_per_batch_size", "[[1,0,3]]"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := res(4)
			if c.sched != "" {
				r = sched(t, c.sched, 1)
			}
			s := pySettings(key.VLLM, "/models/drafter", c.args...)
			_, err := vllmAdapter{}.Command(s, r, key.Eagle3, baseEnv, Caps{Spelling: SpellingVLLMConfig, Version: "0.24.1"})
			if !errors.Is(err, ErrPassthrough) {
				t.Fatalf("err = %v, want a pass-through refusal", err)
			}
			for _, want := range []string{s.ArgsFrom + ": ", `key "` + VLLMScheduleKey + `"`, "--draft-schedule", "draft.schedule", "MLXCEL_DRAFT_SCHEDULE"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
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

// An engine that runs one width for a schedule of several (SGLang, a vLLM
// older than 0.24) warns whenever it collapses one, the width at one
// request off included (it used to say nothing then, and never drafted),
// and says when that width is off; one that takes the schedule, or a flat
// schedule, gets no such warning.
func TestOneWidthScheduleWarns(t *testing.T) {
	old, cur := Caps{Spelling: SpellingVLLMConfig, Version: "0.20.1"}, Caps{Spelling: SpellingVLLMConfig, Version: "0.24.1"}
	legacy := Caps{Spelling: SpellingVLLMLegacy, Version: "0.7.3"}
	offNote := "is off at one request, so speculation is off at every load"
	for _, c := range []struct {
		name    string
		a       Adapter
		caps    Caps
		sched   string
		kind    key.Drafter
		want    string // "" for no one-width warning
		wantOff bool
	}{
		{"sglang, width at one", sglangAdapter{}, Caps{Version: "0.5.6"}, "1:6,2+:4", key.Eagle3, "SGLang takes no width schedule", false},
		{"sglang, off at one", sglangAdapter{}, Caps{Version: "0.5.6"}, "1:1,2+:4", key.Eagle3, "SGLang takes no width schedule", true},
		{"old vllm, width at one", vllmAdapter{}, old, "1:6,2+:4", key.Eagle3, "predates " + VLLMScheduleKey, false},
		{"old vllm, off at one", vllmAdapter{}, old, "1:1,2+:4", key.Eagle3, "predates " + VLLMScheduleKey, true},
		{"legacy vllm, off at one", vllmAdapter{}, legacy, "1:1,2+:4", key.Draft, "predates " + VLLMScheduleKey, true},
		{"sglang, flat", sglangAdapter{}, Caps{Version: "0.5.6"}, "1+:4", key.Eagle3, "", false},
		{"vllm 0.24, off at one", vllmAdapter{}, cur, "1:1,2+:4", key.Eagle3, "", false},
	} {
		r := sched(t, c.sched, 1)
		if RunsOneWidth(c.a.Engine(), c.caps) && c.want == "" && len(r.Schedule) > 1 && !r.Schedule.IsFlat() {
			t.Fatalf("%s: a case that collapses a schedule must want its warning", c.name)
		}
		if !RunsOneWidth(c.a.Engine(), c.caps) {
			r.Width, r.Source = r.Schedule.Max(), width.Override // as the plan hands it on
		}
		e := c.a.Engine()
		l, err := c.a.Command(pySettings(e, draftFor(c.kind)), r, c.kind, baseEnv, c.caps)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		warns := strings.Join(l.Warnings, "\n")
		if c.want == "" && strings.Contains(warns, "runs one width") || c.want != "" && !strings.Contains(warns, c.want) {
			t.Errorf("%s: warnings %q, want %q", c.name, warns, c.want)
		}
		if strings.Contains(warns, offNote) != c.wantOff {
			t.Errorf("%s: warnings %q, want the off note %v", c.name, warns, c.wantOff)
		}
	}
}
