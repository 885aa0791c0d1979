package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

func TestInferEngine(t *testing.T) {
	cases := []struct {
		name string
		h    EngineHints
		want key.Engine
		why  string
	}{
		{"nothing", EngineHints{}, key.MLXCEL, ""},
		{"gguf target", EngineHints{Target: "m.gguf", TargetKind: TargetGGUF}, key.LlamaCpp, "GGUF file (m.gguf)"},
		{"gguf beats mlxcel binary", EngineHints{TargetKind: TargetGGUF, Binary: "/opt/mlxcel-server"}, key.LlamaCpp, "GGUF"},
		{"mlx dir beats -ngl", EngineHints{TargetKind: TargetMLX, LlamaFlag: "-ngl"}, key.MLXCEL, "MLX checkpoint"},
		{"binary llama-server", EngineHints{Binary: "/usr/bin/llama-server"}, key.LlamaCpp, "engine binary is llama-server"},
		{"binary mlxcel beats PATH", EngineHints{Binary: "mlxcel-server", OnPath: []string{"llama-server"}}, key.MLXCEL, "engine binary"},
		{"-ngl", EngineHints{LlamaFlag: "-ngl"}, key.LlamaCpp, "-ngl is a llama-server flag"},
		{"spec-type", EngineHints{SpecType: "draft-simple"}, key.LlamaCpp, "--spec-type draft-simple"},
		{"LLAMA_ARG_", EngineHints{LlamaEnv: "LLAMA_ARG_N_GPU_LAYERS"}, key.LlamaCpp, "LLAMA_ARG_N_GPU_LAYERS is set"},
		{"llama-server alone on PATH", EngineHints{OnPath: []string{"llama-server"}}, key.LlamaCpp, "mlxcel-server is not"},
		{"both on PATH", EngineHints{OnPath: []string{"mlxcel-server", "llama-server"}}, key.MLXCEL, ""},
		{"newline in target", EngineHints{Target: "a\nb.gguf", TargetKind: TargetGGUF}, key.LlamaCpp, `"a\nb.gguf"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, why := InferEngine(c.h)
			if e != c.want || !strings.Contains(why, c.why) || (c.why == "" && why != "") {
				t.Errorf("= %s (%q), want %s (%q)", e, why, c.want, c.why)
			}
		})
	}
}

// TestLoadInfersEngine is the day-one command: `serve -m model.gguf -md
// draft.gguf -ngl 99` with nothing naming an engine means llama.cpp, and
// an operator's engine always wins.
func TestLoadInfersEngine(t *testing.T) {
	dir := t.TempDir()
	mlx := filepath.Join(dir, "mlx")
	os.Mkdir(mlx, 0o755)
	os.WriteFile(filepath.Join(mlx, "config.json"), []byte("{}"), 0o644)
	ggdir := filepath.Join(dir, "gg")
	os.Mkdir(ggdir, 0o755)
	os.WriteFile(filepath.Join(ggdir, "m-Q4_K_M.gguf"), []byte("GGUF"), 0o644)
	blob := filepath.Join(dir, "model.bin")
	os.WriteFile(blob, []byte("GGUF"), 0o644)
	onlyLlama := func(b string) (string, error) {
		if b == "llama-server" {
			return "/usr/bin/llama-server", nil
		}
		return "", errors.New("not found")
	}
	cases := []struct {
		name  string
		flags map[string]string
		env   map[string]string
		pass  []string
		look  func(string) (string, error)
		names []string
		want  key.Engine
	}{
		{name: "gguf flag", flags: map[string]string{"model": "model.gguf", "draft-model": "draft.gguf"}, pass: []string{"-ngl", "99"}, want: key.LlamaCpp},
		{name: "gguf in LLAMA_ARG_MODEL", env: map[string]string{"LLAMA_ARG_MODEL": "/m/Q.GGUF"}, want: key.LlamaCpp},
		{name: "a file that is not named .gguf", flags: map[string]string{"model": blob}, want: key.LlamaCpp},
		{name: "a directory of gguf", flags: map[string]string{"model": ggdir}, want: key.LlamaCpp},
		{name: "mlx directory", flags: map[string]string{"model": mlx}, pass: []string{"-ngl", "99"}, want: key.MLXCEL},
		{name: "-ngl=99", pass: []string{"-ngl=99"}, want: key.LlamaCpp},
		{name: "--n-gpu-layers", pass: []string{"--n-gpu-layers", "99"}, want: key.LlamaCpp},
		{name: "spec-type flag", flags: map[string]string{"draft-kind": "draft-simple"}, want: key.LlamaCpp},
		{name: "a llama.cpp variable", env: map[string]string{"LLAMA_ARG_N_GPU_LAYERS": "99"}, names: []string{"LLAMA_ARG_N_GPU_LAYERS"}, want: key.LlamaCpp},
		{name: "a variable mlxcel shares", env: map[string]string{"LLAMA_ARG_PORT": "9000", "LLAMA_ARG_MODEL": "mlx-community/x"}, want: key.MLXCEL},
		{name: "llama-server alone on PATH", look: onlyLlama, want: key.LlamaCpp},
		{name: "the operator says otherwise", flags: map[string]string{"engine": "mlxcel", "model": "model.gguf"}, want: key.MLXCEL},
		{name: "MLXCEL_ENGINE says otherwise", env: map[string]string{"MLXCEL_ENGINE": "sim"}, flags: map[string]string{"model": "model.gguf"}, want: key.Sim},
		{name: "nothing", want: key.MLXCEL},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _, _, err := Load(Input{Flags: c.flags, Getenv: env(c.env), Passthrough: c.pass, LookPath: c.look, EnvNames: c.names})
			if err != nil {
				t.Fatal(err)
			}
			if s.Engine.Value != c.want {
				t.Errorf("engine %s (%s), want %s", s.Engine.Value, s.Engine.Src.Name, c.want)
			}
		})
	}
}

// A misspelt MLXCEL_* variable is warned of with the name it is near; one
// mlxcel-server reads, one speclaunch reads, or one near neither is not.
// So is a misspelt LLAMA_ARG_* variable, against speclaunch's and the
// captured llama-server trees' (LLAMA_ARG_PROT was only "# inherited",
// and serve stayed on 8080); one a tree reads, a legacy one, or one near
// none (a newer llama-server's) is not.
func TestEnvTypos(t *testing.T) {
	for _, c := range []struct {
		name, want string
	}{
		{"MLXCEL_PROT", "did you mean MLXCEL_PORT?"},
		{"MLXCEL_DRAFT_BLOK_SIZE", "did you mean MLXCEL_DRAFT_BLOCK_SIZE?"},
		{"MLXCEL_PROFLE", "did you mean MLXCEL_PROFILE?"},
		{"MLXCEL_PORT", ""},
		{"MLXCEL_MTP_ALLOW_INEXACT", ""},
		{"MLXCEL_SOMETHING_NEW", ""},
		{"LLAMA_ARG_PROT", "neither speclaunch nor the llama-server versions it knows read it (a newer one may): did you mean LLAMA_ARG_PORT?"},
		{"LLAMA_ARG_CTX_SIZ", "did you mean LLAMA_ARG_CTX_SIZE?"},
		{"LLAMA_ARG_DRAFT_BLOK_SIZE", "did you mean LLAMA_ARG_DRAFT_BLOCK_SIZE?"}, // speclaunch's and mlxcel's, no llama-server's
		{"LLAMA_ARG_PORT", ""},
		{"LLAMA_ARG_CTX_SIZE", ""},
		{"LLAMA_ARG_DRAFT_MAX", ""}, // a legacy tree's
		{"LLAMA_ARG_SOMETHING_NEW", ""},
		{"LLAMA_API_KEY", ""},
	} {
		got := envTypos([]string{c.name})
		if c.want == "" && len(got) != 0 || c.want != "" && (len(got) != 1 || got[0].Level != "warn" || !strings.HasSuffix(got[0].Msg, c.want)) {
			t.Errorf("envTypos(%s) = %v, want %q", c.name, got, c.want)
		}
	}
}
