package plan

import (
	"testing"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/key"
)

// A sim model written without a directory is a stand-in name (no file to
// check); one written with a directory is a path, checked as every
// engine's is. Config makes a profile's value relative to the profile, so
// a name there is one beside it.
func TestSimName(t *testing.T) {
	flag := config.Source{Origin: config.Flag, Name: "--model"}
	env := config.Source{Origin: config.Env, Name: "LLAMA_ARG_MODEL"}
	prof := config.Source{Origin: config.Profile, Name: "profiles/p.toml:7"}
	for _, tc := range []struct {
		name    string
		engine  key.Engine
		profile string
		value   string
		src     config.Source
		want    bool
	}{
		{"a flag's bare name", key.Sim, "", "demo-target", flag, true},
		{"a variable's bare name", key.Sim, "", "t", env, true},
		{"a flag's relative path", key.Sim, "", "demo-load/nope.txt", flag, false},
		{"a flag's ./name", key.Sim, "", "./target", flag, false},
		{"a flag's absolute path", key.Sim, "", "/models/x", flag, false},
		{"a profile's name (made relative to it)", key.Sim, "profiles/p.toml", "profiles/demo-target", prof, true},
		{"a profile's path under a directory", key.Sim, "profiles/p.toml", "profiles/demo-load/nope.txt", prof, false},
		{"a profile's absolute path elsewhere", key.Sim, "profiles/p.toml", "/models/x", prof, false},
		{"a profile given as a bare file name", key.Sim, "p.toml", "demo-target", prof, true},
		{"not the sim", key.MLXCEL, "", "demo-target", flag, false},
		{"llama.cpp in a profile", key.LlamaCpp, "profiles/p.toml", "profiles/t.gguf", prof, false},
		{"no model", key.Sim, "", "", flag, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s config.Settings
			s.Engine.Value, s.ProfilePath = tc.engine, tc.profile
			if got := SimName(s, config.Field[string]{Value: tc.value, Src: tc.src}); got != tc.want {
				t.Errorf("SimName(%s %q from %s) = %v, want %v", tc.engine, tc.value, tc.src, got, tc.want)
			}
		})
	}
}
