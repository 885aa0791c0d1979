package adapt

import (
	"slices"
	"testing"
)

// Changed names each part of the key that differs, in the words the log
// uses; nothing for the same curve's key at other paths.
func TestKeyChanged(t *testing.T) {
	base := CacheKey{Engine: "llama.cpp 1 (d32676d)", GPU: "NVIDIA H100", Capability: "9.0", Slots: 4,
		Models: []ModelFile{{Path: "/m/t", Size: 10, SHA256: "aa"}, {Path: "/m/d", Size: 5, SHA256: "bb"}}}
	for _, tc := range []struct {
		name string
		edit func(*CacheKey)
		want []string
	}{
		{"same", func(*CacheKey) {}, nil},
		{"moved", func(k *CacheKey) {
			k.Models = []ModelFile{{Path: "/x/t", Size: 10, SHA256: "aa"}, {Path: "/x/d", Size: 5, SHA256: "bb"}}
		}, nil},
		{"engine", func(k *CacheKey) { k.Engine = "llama.cpp 2 (e1)" }, []string{"the engine (llama.cpp 1 (d32676d), now llama.cpp 2 (e1))"}},
		{"gpu", func(k *CacheKey) { k.GPU, k.Capability = "NVIDIA H200", "9.0" }, []string{"the GPU (NVIDIA H100 9.0, now NVIDIA H200 9.0)"}},
		{"slots", func(k *CacheKey) { k.Slots = 1 }, []string{"the engine's slots (4, now 1)"}},
		{"no GPU name", func(k *CacheKey) { k.GPU = "" }, []string{"the GPU (NVIDIA H100 9.0, now 9.0)"}},
		{"drafter", func(k *CacheKey) { k.Models = []ModelFile{base.Models[0], {Path: "/m/d", Size: 5, SHA256: "cc"}} }, []string{"the content of /m/d"}},
		{"one model less", func(k *CacheKey) { k.Models = base.Models[:1] }, []string{"the model files (2, now 1)"}},
	} {
		k := base
		tc.edit(&k)
		if got := k.Changed(base); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// A state saved before the key held the slots (0) is not said to have
	// been learnt under none.
	old := base
	old.Slots = 0
	if got, want := base.Changed(old), []string{"the engine's slots (not recorded when it was saved, now 4)"}; !slices.Equal(got, want) {
		t.Errorf("saved before slots were keyed: %q, want %q", got, want)
	}
}
