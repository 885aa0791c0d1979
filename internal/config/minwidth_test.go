package config

import (
	"testing"

	"github.com/speclaunch/speclaunch/profiles"
)

// TestWidthTwoFromEverySource: 2 is the narrowest width speculation runs
// at, and every operator source must take it (a "<=" for "<" in a bound
// check would refuse it). It goes through the public Load only, so it
// holds whatever Load's inside looks like.
func TestWidthTwoFromEverySource(t *testing.T) {
	const llama = "[engine]\nname = \"llama.cpp\"\n[draft]\nmodel = \"d.gguf\"\n"
	cases := []struct {
		name    string
		flags   map[string]string
		env     map[string]string
		profile string
		src     string
	}{
		{name: "flag", flags: map[string]string{"draft-block-size": "2"}, src: "flag --draft-block-size"},
		{name: "engine-unit flag, 1 draft token", flags: map[string]string{"spec-draft-n-max": "1"}, src: "flag --spec-draft-n-max"},
		{name: "LLAMA_ARG_ env", env: map[string]string{"LLAMA_ARG_DRAFT_BLOCK_SIZE": "2"}, src: "env LLAMA_ARG_DRAFT_BLOCK_SIZE"},
		{name: "MLXCEL_ env", env: map[string]string{"MLXCEL_DRAFT_BLOCK_SIZE": "2"}, src: "env MLXCEL_DRAFT_BLOCK_SIZE"},
		{name: "llama n-max env, 1 draft token", env: map[string]string{"LLAMA_ARG_SPEC_DRAFT_N_MAX": "1"}, profile: llama, src: "env LLAMA_ARG_SPEC_DRAFT_N_MAX"},
		{name: "profile", profile: llama + "block_size = 2\n", src: "profile p.toml:5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Flags: c.flags, Getenv: func(k string) string { return c.env[k] }}
			if c.profile != "" {
				p, err := profiles.Parse("p.toml", []byte(c.profile))
				if err != nil {
					t.Fatal(err)
				}
				in.Profile = p
			}
			s, _, _, err := Load(in)
			if err != nil {
				t.Fatalf("width 2 refused: %v", err)
			}
			if s.Width.Value != 2 || s.Width.Src.String() != c.src {
				t.Errorf("width %d from %s, want 2 from %s", s.Width.Value, s.Width.Src, c.src)
			}
		})
	}
}
