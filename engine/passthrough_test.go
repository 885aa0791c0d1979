package engine

import (
	"strings"
	"testing"
)

// TestUnknownLlamaFlags: a pass-through flag llama-server does not list is
// named with the nearest it does; values (negative numbers included) and
// known flags in either form are not.
func TestUnknownLlamaFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // the warnings, each as the substring it must hold
	}{
		{"known flags and values", []string{"-ngl", "99", "--keep", "-1", "-c=8192", "--jinja", "--no-warmup"}, nil},
		{"a value that looks like a flag", []string{"--override-kv", "-x", "--jinja"}, nil},
		{"a mistyped flag", []string{"--ngl", "99"}, []string{"engine argument --ngl is not a flag llama-server lists in its --help; llama-server refuses to start on an unknown flag (did you mean -ngl, --gpu-layers, --n-gpu-layers?)"}},
		{"with =", []string{"--ctx-siz=8192"}, []string{"--ctx-siz is not a flag llama-server lists in its --help; llama-server refuses to start on an unknown flag (did you mean -c, --ctx-size?)"}},
		{"nothing near", []string{"--zzzzzzzzzz"}, []string{"--zzzzzzzzzz is not a flag llama-server lists in its --help; llama-server refuses to start on an unknown flag"}},
		{"two", []string{"--jinj", "-ngl", "1", "--metric"}, []string{"--jinj is not", "--metric is not a flag llama-server lists in its --help; llama-server refuses to start on an unknown flag (did you mean --metrics?)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := unknownLlamaFlags(tc.args)
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) || strings.HasSuffix(w, "unknown flag") && !strings.HasSuffix(got[i], w) {
					t.Errorf("warning %q, want %q", got[i], w)
				}
			}
		})
	}
}
