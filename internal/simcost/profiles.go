package simcost

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// maxProfilePositions is how many draft positions a named profile defines:
// enough for width 17, the widest width llama.cpp runs are swept to.
const maxProfilePositions = 16

// Profiles are acceptance shapes by draft position: S(k), the share of
// cycles accepting at least k draft tokens, for k = 1..16. They belong to
// the pair and the prompt, not the width, so a request's profile (chosen by
// a marker in its prompt) changes S the way a change of traffic does.
//
//   - flat: high and flat, as a pair whose greedy text loops (S = 0.9 at
//     every position).
//   - geometric: each draft token accepted with probability 0.75 given the
//     ones before it (S(k) = 0.75^k).
//   - collapse: a good head and a collapsing tail (S(k) = 0.95^k for k ≤ 3,
//     then 0.03).
var Profiles = map[string][]float64{
	"flat":      fill(func(int) float64 { return 0.9 }),
	"geometric": fill(func(k int) float64 { return pow(0.75, k) }),
	"collapse": fill(func(k int) float64 {
		if k <= 3 {
			return pow(0.95, k)
		}
		return 0.03
	}),
}

// ProfileNames lists the profiles, sorted, for flag errors and docs.
func ProfileNames() []string { return slices.Sorted(maps.Keys(Profiles)) }

func fill(f func(k int) float64) []float64 {
	s := make([]float64, maxProfilePositions)
	for k := 1; k <= maxProfilePositions; k++ {
		s[k-1] = f(k)
	}
	return s
}

func pow(b float64, k int) float64 {
	r := 1.0
	for range k {
		r *= b
	}
	return r
}

// profileMarker selects a profile from inside a prompt: "[sim-profile:NAME]"
// anywhere in the prompt text (or in a chat message). Unknown names are
// ignored, so user text can never make a request fail.
var profileMarker = regexp.MustCompile(`\[sim-profile:([a-z]+)\]`)

// PromptProfile returns the acceptance profile a prompt asks for, or nil.
func PromptProfile(prompt string) []float64 {
	if !strings.Contains(prompt, "[sim-profile:") {
		return nil
	}
	for _, m := range profileMarker.FindAllStringSubmatch(prompt, -1) {
		if s, ok := Profiles[m[1]]; ok {
			return s
		}
	}
	return nil
}

// LookupProfile resolves a --sim-profile value.
func LookupProfile(name string) ([]float64, error) {
	s, ok := Profiles[name]
	if !ok {
		return nil, fmt.Errorf("--sim-profile: %q is not a profile (want one of %s)", name, strings.Join(ProfileNames(), ", "))
	}
	return slices.Clone(s), nil
}

// ValidProfile checks S: values in [0, 1], never rising with k (a token is
// accepted only if all before it were).
func ValidProfile(s []float64) error {
	prev := 1.0
	for i, v := range s {
		if !(v >= 0 && v <= 1) {
			return fmt.Errorf("acceptance S(%d) = %v is not in 0-1", i+1, v)
		}
		if v > prev+1e-9 {
			return fmt.Errorf("acceptance S(%d) = %v rises above S(%d) = %v", i+1, v, i, prev)
		}
		prev = v
	}
	return nil
}
