package config

import (
	"strings"
	"testing"
)

// TestFlagOverEnv: an inherited llama-server variable whose flag the
// engine arguments give too loses to the flag in llama-server, where the
// docs said the environment beats the profile; an info line says which
// value the engine runs and how to have the variable win.
func TestFlagOverEnv(t *testing.T) {
	const llama = "[engine]\nname = \"llama.cpp\"\nargs = [\"-c\", \"2048\", \"-ngl\", \"33\"]\n"
	for _, c := range []struct {
		name    string
		profile string
		pass    []string
		env     map[string]string
		want    []string // each in one notice; none when empty
		hidden  string   // in no notice
	}{
		{name: "profile flag beats the variable", profile: llama, env: map[string]string{"LLAMA_ARG_CTX_SIZE": "4096"},
			want: []string{`LLAMA_ARG_CTX_SIZE="4096" differs from -c 2048 in the profile's engine.args (p.toml:3); the engine runs -c 2048, as llama-server takes its command line over its variables; to have the variable win, drop -c from the profile's engine.args`}},
		{name: "a variable that agrees says nothing", profile: llama, env: map[string]string{"LLAMA_ARG_N_GPU_LAYERS": "33"}},
		{name: "a variable of no flag given says nothing", profile: llama, env: map[string]string{"LLAMA_ARG_BATCH": "512"}},
		{name: "the typed flag is the last one", profile: llama, pass: []string{"--ctx-size=8192"}, env: map[string]string{"LLAMA_ARG_CTX_SIZE": "4096"},
			want: []string{`differs from --ctx-size 8192 typed on the command line; the engine runs --ctx-size 8192`, "drop --ctx-size from the command line"}},
		{name: "a switch", profile: llama, pass: []string{"-nocb"}, env: map[string]string{"LLAMA_ARG_CONT_BATCHING": "1"},
			want: []string{`LLAMA_ARG_CONT_BATCHING="1" is set beside -nocb typed on the command line; the engine runs -nocb`}},
		{name: "a value stepped over is no flag", profile: "[engine]\nname = \"llama.cpp\"\nargs = [\"--alias\", \"-c\"]\n", env: map[string]string{"LLAMA_ARG_CTX_SIZE": "4096"}},
		{name: "the old tree's name", profile: "[engine]\nname = \"llama.cpp\"\nargs = [\"-cd\", \"512\"]\n", env: map[string]string{"LLAMA_ARG_CTX_SIZE_DRAFT": "1024"},
			want: []string{`LLAMA_ARG_CTX_SIZE_DRAFT="1024" differs from -cd 512`}},
		{name: "secrets by shape are masked", profile: "[engine]\nname = \"llama.cpp\"\nargs = [\"--alias\", \"sk-PROFILESECRET7777\"]\n", env: map[string]string{"LLAMA_ARG_ALIAS": "sk-ENVSECRET8888"},
			want: []string{`LLAMA_ARG_ALIAS="****8888" differs from --alias ****7777`}, hidden: "SECRET"},
		{name: "set by engine.env, not inherited", profile: llama + "[engine.env]\nLLAMA_ARG_CTX_SIZE = \"4096\"\n", env: map[string]string{"LLAMA_ARG_CTX_SIZE": "1024"}},
		{name: "another engine", profile: "[engine]\nname = \"mlxcel\"\nargs = [\"-c\", \"2048\"]\n", env: map[string]string{"LLAMA_ARG_CTX_SIZE": "4096"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var names []string
			for k := range c.env {
				names = append(names, k)
			}
			_, _, notices, err := Load(Input{Profile: prof(t, c.profile), Passthrough: c.pass, Getenv: env(c.env), EnvNames: append(names, names...)})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range notices {
				if strings.Contains(n.Msg, "llama-server takes its command line") {
					got = append(got, n.Level+": "+n.Msg)
				}
				if c.hidden != "" && strings.Contains(n.Msg, c.hidden) {
					t.Errorf("a notice shows %q: %s", c.hidden, n.Msg)
				}
			}
			if len(c.want) == 0 && len(got) > 0 {
				t.Fatalf("notices %q, want none", got)
			}
			if len(c.want) > 0 && len(got) != 1 {
				t.Fatalf("notices %q, want one", got)
			}
			for _, w := range c.want {
				if !strings.HasPrefix(got[0], "info: ") || !strings.Contains(got[0], w) {
					t.Errorf("notice %q, want an info line holding %q", got[0], w)
				}
			}
		})
	}
}
