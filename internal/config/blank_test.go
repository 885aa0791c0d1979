package config

import (
	"errors"
	"strings"
	"testing"
)

// TestBlankPathRefused: a path of only whitespace, from any variable, flag
// or profile key that names a file, is refused naming its source (exit 2
// in the CLI), as every other setting refuses a blank value; before, the
// model variables ran the engine with `-m ' '`. An empty variable still
// counts as unset.
func TestBlankPathRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    Input
		src   string
		unset string
	}{
		{"LLAMA_ARG_MODEL", Input{Getenv: env(map[string]string{"LLAMA_ARG_MODEL": " "})}, "env LLAMA_ARG_MODEL", "unset the variable"},
		{"MLXCEL_MODEL", Input{Getenv: env(map[string]string{"MLXCEL_MODEL": "\t"})}, "env MLXCEL_MODEL", "unset the variable"},
		{"LLAMA_ARG_SPEC_DRAFT_MODEL", Input{Getenv: env(map[string]string{"LLAMA_ARG_SPEC_DRAFT_MODEL": " "})}, "env LLAMA_ARG_SPEC_DRAFT_MODEL", "unset the variable"},
		{"LLAMA_ARG_MODEL_DRAFT", Input{Getenv: env(map[string]string{"LLAMA_ARG_MODEL_DRAFT": "  "})}, "env LLAMA_ARG_MODEL_DRAFT", "unset the variable"},
		{"MLXCEL_DRAFT_MODEL", Input{Getenv: env(map[string]string{"MLXCEL_DRAFT_MODEL": " "})}, "env MLXCEL_DRAFT_MODEL", "unset the variable"},
		{"MLXCEL_ENGINE_BINARY", Input{Getenv: env(map[string]string{"MLXCEL_ENGINE_BINARY": " "})}, "env MLXCEL_ENGINE_BINARY", "unset the variable"},
		{"MLXCEL_PROFILE", Input{Getenv: env(map[string]string{"MLXCEL_PROFILE": " "})}, "env MLXCEL_PROFILE", "unset the variable"},
		{"MLXCEL_POLICY", Input{Getenv: env(map[string]string{"MLXCEL_POLICY": "a.toml: "})}, "env MLXCEL_POLICY", "remove the blank entry"},
		{"policy.files", Input{Profile: prof(t, "[policy]\nfiles = [\"a.toml\", \" \"]\n")}, "profile p.toml:2", "remove the blank entry"},
		{"--model", Input{Flags: map[string]string{"model": " "}}, "flag --model", "leave the flag out"},
		{"--policy", Input{Policies: []string{" "}}, "flag --policy", "leave the flag out"},
		{"draft.model", Input{Profile: prof(t, "[draft]\nmodel = \" \"\n")}, "profile p.toml:2", "remove the key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := Load(tc.in)
			var e *Error
			if !errors.As(err, &e) || e.Src.String() != tc.src || !strings.Contains(err.Error(), "is blank (only whitespace)") || !strings.Contains(err.Error(), tc.unset) {
				t.Fatalf("got %v; want a blank path refused from %s, saying %q", err, tc.src, tc.unset)
			}
		})
	}
	// Empty is unset, and a path with spaces inside is a path.
	s, _, _, err := Load(Input{Getenv: env(map[string]string{"LLAMA_ARG_MODEL": "", "MLXCEL_MODEL": " my model ", "MLXCEL_DRAFT_MODEL": ""})})
	if err != nil || s.Model.Value != " my model " || s.DraftModel.Set() {
		t.Fatalf("model %+v draft %+v: %v", s.Model, s.DraftModel, err)
	}
}
