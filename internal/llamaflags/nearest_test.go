package llamaflags

import (
	"slices"
	"testing"
)

func TestNearestAndSpellings(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		spellings  []string
	}{
		{"--ngl", "-ngl", []string{"-ngl", "--gpu-layers", "--n-gpu-layers"}},
		{"--n-gpu-layer", "--n-gpu-layers", []string{"-ngl", "--gpu-layers", "--n-gpu-layers"}},
		{"--metric", "--metrics", []string{"--metrics"}},
		{"--zzzzzzzz", "", nil},
	} {
		got := Nearest(tc.name, All())
		if got != tc.want {
			t.Errorf("Nearest(%q) = %q, want %q", tc.name, got, tc.want)
		}
		if s := Spellings(got); !slices.Equal(s, tc.spellings) {
			t.Errorf("Spellings(%q) = %q, want %q", got, s, tc.spellings)
		}
	}
}
