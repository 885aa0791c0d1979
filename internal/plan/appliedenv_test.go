package plan

import (
	"slices"
	"testing"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/width"
)

// The variables the launch applies itself (engine.Spec.EnvApplied, an
// info line where the rest kept out of the engine's environment are
// warnings) are those the width and the drafter kind were read from,
// only where the launch speculates and, for the width, where the
// operator's width is the one run.
func TestAppliedEnv(t *testing.T) {
	env := func(n string) config.Source { return config.Source{Origin: config.Env, Name: n} }
	flag := config.Source{Origin: config.Flag, Name: "--draft-block-size"}
	over := width.Resolution{Width: 4, Source: width.Override}
	for _, tc := range []struct {
		name     string
		width    config.Source
		kind     config.Source
		schedule bool
		res      width.Resolution
		want     []string
	}{
		{"both from the environment", env("LLAMA_ARG_SPEC_DRAFT_N_MAX"), env("LLAMA_ARG_SPEC_TYPE"), false, over, []string{"LLAMA_ARG_SPEC_DRAFT_N_MAX", "LLAMA_ARG_SPEC_TYPE"}},
		{"the width from a flag", flag, env("LLAMA_ARG_SPEC_TYPE"), false, over, []string{"LLAMA_ARG_SPEC_TYPE"}},
		{"a schedule over the width", env("LLAMA_ARG_SPEC_DRAFT_N_MAX"), config.Source{}, true, over, nil},
		{"a measured width", env("LLAMA_ARG_SPEC_DRAFT_N_MAX"), config.Source{}, false, width.Resolution{Width: 4, Source: width.Measured}, nil},
		{"speculation off", env("LLAMA_ARG_SPEC_DRAFT_N_MAX"), env("LLAMA_ARG_SPEC_TYPE"), false, width.Resolution{Source: width.Off, OnSource: width.Override}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s config.Settings
			s.Width = config.Field[int]{Value: 4, Src: tc.width}
			s.DraftKind.Src = tc.kind
			if tc.schedule {
				s.Schedule = config.Field[schedule.Schedule]{Value: schedule.Schedule{{Lo: 1, Hi: 0, Width: 4}}, Src: flag}
			}
			if got := appliedEnv(s, tc.res); !slices.Equal(got, tc.want) {
				t.Errorf("applied %q, want %q", got, tc.want)
			}
		})
	}
}
