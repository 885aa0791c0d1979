package engine

import (
	"strings"
	"testing"
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
		got := HFRepoHint(c.args)
		if c.want == "" && got != "" || c.want != "" && (!strings.HasPrefix(got, " ("+c.want+" is not enough") || !strings.Contains(got, "--model PATH")) {
			t.Errorf("HFRepoHint(%q) = %q, want the hint for %q", c.args, got, c.want)
		}
	}
}
