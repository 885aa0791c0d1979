package engine

import (
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

func TestHFRepoHint(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" for no hint, else the flag the hint names
	}{
		{nil, ""},
		{[]string{"-ngl", "99"}, ""},
		{[]string{"-hf", "org/repo"}, "-hf"},
		{[]string{"-hfr=org/repo"}, "-hfr"},
		{[]string{"-ngl", "99", "--hf-repo", "org/repo"}, "--hf-repo"},
		{[]string{"-hfd", "org/draft"}, ""},   // the drafter's repo names no target
		{[]string{"--hf-file", "x.gguf"}, ""}, // a file in a repo names no repo
	} {
		got := HFRepoHint(key.LlamaCpp, c.args)
		if c.want == "" && got != "" || c.want != "" && (!strings.HasPrefix(got, " ("+c.want+" is not enough") || !strings.Contains(got, "--model PATH")) {
			t.Errorf("HFRepoHint(%q) = %q, want the hint for %q", c.args, got, c.want)
		}
	}
}

// vLLM and SGLang take a repo id as the target: the hint says so.
func TestHFRepoHintFetchingEngines(t *testing.T) {
	for _, e := range []key.Engine{key.VLLM, key.SGLang} {
		if got := HFRepoHint(e, []string{"-hf", "org/repo"}); !strings.Contains(got, "-m ORG/REPO") || strings.Contains(got, "GGUF") {
			t.Errorf("%s: %q", e, got)
		}
	}
}

// mlxcel's target is a checkpoint directory, not a GGUF.
func TestHFRepoHintMLXCEL(t *testing.T) {
	if got := HFRepoHint(key.MLXCEL, []string{"-hf", "org/repo"}); !strings.Contains(got, "-m DIR") || strings.Contains(got, "GGUF") {
		t.Errorf("%q", got)
	}
}
