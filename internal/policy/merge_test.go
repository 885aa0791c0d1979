package policy

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

var (
	cap121 = key.Capability{Major: 12, Minor: 1}
	cap90  = key.Capability{Major: 9, Minor: 0}
	gb10   = key.Key{Engine: key.MLXCEL, Drafter: key.DFlash, Capability: cap121, Quant: key.QuantAffine}
	h200   = key.Key{Engine: key.MLXCEL, Drafter: key.DFlash, Capability: cap90, Quant: key.QuantAffine}
)

func entry(id string, k key.Key, w int, origin string) Entry {
	return Entry{ID: id, Key: k, Width: w, Pin: "mlx 81ba1c6a", Record: "docs/r.md", Origin: origin}
}

func TestMerge(t *testing.T) {
	base := &File{
		Name: "policy.toml",
		Defaults: []Default{
			{Engine: key.MLXCEL, Drafter: key.DFlash, Width: 16, Origin: "policy.toml:5"},
			{Engine: key.MLXCEL, Drafter: key.MTP, Width: 4, Origin: "policy.toml:9"},
		},
		Entries: []Entry{
			entry("gb10-affine-dflash", gb10, 4, "policy.toml:40"),
			entry("h200-affine-dflash", h200, 6, "policy.toml:50"),
		},
	}
	nvfp4 := gb10
	nvfp4.Quant = key.QuantNVFP4

	cases := []struct {
		name         string
		layers       []*File
		wantLayers   []string
		wantDefaults map[key.Drafter]int
		wantEntries  []string // id:width@origin, in order
		wantReplaced []string
	}{
		{
			name:         "base only",
			layers:       []*File{base},
			wantLayers:   []string{"policy.toml"},
			wantDefaults: map[key.Drafter]int{key.DFlash: 16, key.MTP: 4},
			wantEntries:  []string{"gb10-affine-dflash:4@policy.toml:40", "h200-affine-dflash:6@policy.toml:50"},
		},
		{
			name: "later layer replaces a default and an entry by key, in place",
			layers: []*File{base, {Name: "user.toml",
				Defaults: []Default{{Engine: key.MLXCEL, Drafter: key.DFlash, Width: 8, Origin: "user.toml:2"}},
				Entries:  []Entry{entry("mine", gb10, 3, "user.toml:6")}}},
			wantLayers:   []string{"policy.toml", "user.toml"},
			wantDefaults: map[key.Drafter]int{key.DFlash: 8, key.MTP: 4},
			wantEntries:  []string{"mine:3@user.toml:6", "h200-affine-dflash:6@policy.toml:50"},
			wantReplaced: []string{"gb10-affine-dflash"},
		},
		{
			name: "same id with another key replaces the old entry",
			layers: []*File{base, {Name: "user.toml",
				Entries: []Entry{entry("gb10-affine-dflash", nvfp4, 5, "user.toml:3")}}},
			wantLayers:   []string{"policy.toml", "user.toml"},
			wantDefaults: map[key.Drafter]int{key.DFlash: 16, key.MTP: 4},
			wantEntries:  []string{"gb10-affine-dflash:5@user.toml:3", "h200-affine-dflash:6@policy.toml:50"},
			wantReplaced: []string{"gb10-affine-dflash"},
		},
		{
			name: "one entry matching two (one by key, one by id) replaces both",
			layers: []*File{base, {Name: "user.toml",
				Entries: []Entry{entry("h200-affine-dflash", gb10, 2, "user.toml:3")}}},
			wantLayers:   []string{"policy.toml", "user.toml"},
			wantDefaults: map[key.Drafter]int{key.DFlash: 16, key.MTP: 4},
			wantEntries:  []string{"h200-affine-dflash:2@user.toml:3"},
			wantReplaced: []string{"gb10-affine-dflash", "h200-affine-dflash"},
		},
		{
			name: "new key is added; nil layers skipped; three layers apply in order",
			layers: []*File{base, nil,
				{Name: "a.toml", Entries: []Entry{entry("gb10-nvfp4", nvfp4, 7, "a.toml:1")}},
				{Name: "profile.toml", Entries: []Entry{entry("gb10-nvfp4", nvfp4, 5, "profile.toml:9")}}},
			wantLayers:   []string{"policy.toml", "a.toml", "profile.toml"},
			wantDefaults: map[key.Drafter]int{key.DFlash: 16, key.MTP: 4},
			wantEntries:  []string{"gb10-affine-dflash:4@policy.toml:40", "h200-affine-dflash:6@policy.toml:50", "gb10-nvfp4:5@profile.toml:9"},
			wantReplaced: []string{"gb10-nvfp4"},
		},
		{
			name:         "no layers",
			wantDefaults: map[key.Drafter]int{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Merge(tc.layers...)
			if !reflect.DeepEqual(p.Layers, tc.wantLayers) {
				t.Errorf("layers = %v, want %v", p.Layers, tc.wantLayers)
			}
			got := map[key.Drafter]int{}
			for _, d := range p.Defaults {
				got[d.Drafter] = d.Width
			}
			if !reflect.DeepEqual(got, tc.wantDefaults) {
				t.Errorf("defaults = %v, want %v", got, tc.wantDefaults)
			}
			var ents, repl []string
			for _, e := range p.Entries {
				ents = append(ents, e.ID+":"+strconv.Itoa(e.Width)+"@"+e.Origin)
			}
			for _, e := range p.Replaced {
				repl = append(repl, e.ID)
			}
			if !reflect.DeepEqual(ents, tc.wantEntries) {
				t.Errorf("entries = %v, want %v", ents, tc.wantEntries)
			}
			if !reflect.DeepEqual(repl, tc.wantReplaced) {
				t.Errorf("replaced = %v, want %v", repl, tc.wantReplaced)
			}
		})
	}
	// Merge must not alias its inputs.
	if base.Entries[0].Width != 4 || len(base.Entries) != 2 {
		t.Errorf("Merge modified its input: %+v", base.Entries)
	}
}

func TestLookup(t *testing.T) {
	p := Merge(&File{Name: "policy.toml", Entries: []Entry{entry("gb10-affine-dflash", gb10, 4, "policy.toml:40")}})
	mtp := gb10
	mtp.Drafter = key.MTP
	llama := gb10
	llama.Engine = key.LlamaCpp
	noGPU := gb10
	noGPU.Capability = key.None
	unknownQ := gb10
	unknownQ.Quant = key.QuantUnknown
	emptyQ := gb10
	emptyQ.Quant = ""
	other := gb10
	other.Quant = key.QuantOther
	cases := []struct {
		name string
		k    key.Key
		want int // 0 = nil
	}{
		{"exact", gb10, 4},
		{"other capability", h200, 0},
		{"other drafter", mtp, 0},
		{"other engine", llama, 0},
		{"no CUDA device", noGPU, 0},
		{"unknown quant", unknownQ, 0},
		{"empty quant", emptyQ, 0},
		{"other quant", other, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := p.Lookup(tc.k)
			switch {
			case tc.want == 0 && e != nil:
				t.Errorf("got %+v, want nil", e)
			case tc.want != 0 && (e == nil || e.Width != tc.want):
				t.Errorf("got %+v, want width %d", e, tc.want)
			}
		})
	}
	// The returned entry is a copy: editing it leaves the policy alone.
	p.Lookup(gb10).Width = 99
	if p.Lookup(gb10).Width != 4 {
		t.Error("Lookup returned an alias into the policy")
	}
	if (*Policy)(nil).Lookup(gb10) != nil {
		t.Error("nil policy matched")
	}
}

func TestDefaultWidth(t *testing.T) {
	p := Merge(&File{Name: "policy.toml", Defaults: []Default{{Engine: key.MLXCEL, Drafter: key.DFlash, Width: 16, Note: "mirror", Origin: "policy.toml:5"}}})
	w, d, ok := p.DefaultWidth(key.MLXCEL, key.DFlash)
	if !ok || w != 16 || d == nil || d.Origin != "policy.toml:5" {
		t.Errorf("got %d %+v %v", w, d, ok)
	}
	if w, d, ok := p.DefaultWidth(key.MLXCEL, key.MTP); ok || w != 0 || d != nil {
		t.Errorf("mtp: got %d %+v %v", w, d, ok)
	}
	if _, _, ok := p.DefaultWidth(key.LlamaCpp, key.DFlash); ok {
		t.Error("llama.cpp dflash matched mlxcel's default")
	}
	if _, _, ok := (*Policy)(nil).DefaultWidth(key.MLXCEL, key.DFlash); ok {
		t.Error("nil policy has a default")
	}
}

func TestExplain(t *testing.T) {
	base := &File{Name: "policy.toml",
		Defaults: []Default{{Engine: key.MLXCEL, Drafter: key.DFlash, Width: 16, Note: "mlxcel's flat default", Origin: "policy.toml:5"}},
		Entries:  []Entry{entry("gb10-affine-dflash", gb10, 4, "policy.toml:40")}}
	base.Entries[0].RunnerUp = 3
	p := Merge(base)
	noGPU := gb10
	noGPU.Capability = key.None
	unknownQ := gb10
	unknownQ.Quant = key.QuantUnknown
	farAway := key.Key{Engine: key.LlamaCpp, Drafter: key.Draft, Capability: cap90, Quant: key.QuantQ4_K}
	replaced := Merge(base, &File{Name: "user.toml", Entries: []Entry{entry("mine", gb10, 3, "user.toml:2")}})
	tuned := entry("tuned-far", farAway, 6, "tuned.toml:3")
	tuned.Pair = Pair{Target: "t", Draft: "d", Pin: SimPin}
	tunedToo := Merge(base, &File{Name: "tuned.toml", Entries: []Entry{tuned}})

	cases := []struct {
		name string
		p    *Policy
		k    key.Key
		want []string // substrings, each in some line, in order
		not  []string
	}{
		{"match", p, gb10, []string{
			"key: engine=mlxcel drafter=dflash capability=12.1 quant=affine",
			"layers, lowest first: policy.toml",
			"entry gb10-affine-dflash matches (policy.toml:40): width 4, pin mlx 81ba1c6a, record docs/r.md",
			"runner-up width 3",
		}, []string{"default for"}},
		{"capability differs", p, h200, []string{
			"no measured entry for this key",
			"entry gb10-affine-dflash differs in capability: 12.1 vs 9.0",
			"default for engine mlxcel drafter dflash: width 16 (policy.toml:5): mlxcel's flat default",
		}, nil},
		{"no GPU", p, noGPU, []string{
			"no CUDA device was found",
			"entry gb10-affine-dflash differs in capability: 12.1 vs none",
			"width 16",
		}, []string{"no measured entry for this key"}},
		{"unreadable target", p, unknownQ, []string{
			"quantization is unknown",
			"differs in quant: affine vs unknown",
		}, nil},
		{"nothing near, no default", p, farAway, []string{
			"no measured entry is within one field of this key (1 measured entry in all)",
			"no default for engine llama.cpp drafter draft",
		}, []string{"differs in"}},
		{"replaced by a later layer", replaced, gb10, []string{
			"layers, lowest first: policy.toml, user.toml",
			"entry mine matches (user.toml:2): width 3",
			"it replaced entry gb10-affine-dflash (policy.toml:40), width 4",
		}, nil},
		{"nil policy", nil, gb10, []string{"no measured entry is within one field", "no default"}, nil},
		{"a tuned entry of this key is no measured one", tunedToo, farAway, []string{
			"no measured entry for this key",
			"no measured entry is within one field of this key (1 measured entry in all)",
		}, []string{"differs in"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lines := tc.p.Explain(tc.k)
			all := strings.Join(lines, "\n")
			at := 0
			for _, w := range tc.want {
				i := strings.Index(all[at:], w)
				if i < 0 {
					t.Errorf("missing (in order) %q in:\n%s", w, all)
					continue
				}
				at += i + len(w)
			}
			for _, n := range tc.not {
				if strings.Contains(all, n) {
					t.Errorf("unexpected %q in:\n%s", n, all)
				}
			}
		})
	}
}

// TestShippedPyDefaults pins the shipped vLLM and SGLang defaults to the
// engines' own (policy.toml's comments and docs/engines.md, "Policy
// defaults", say where each comes from), and checks that no measured entry
// exists for them: none can be earned without a real engine.
func TestShippedPyDefaults(t *testing.T) {
	p := Merge(shipped(t))
	want := map[key.Engine]map[key.Drafter]int{
		key.VLLM:   {key.Draft: 4, key.Eagle: 4, key.Eagle3: 4, key.MTP: 2, key.Ngram: 4, key.DFlash: 16},
		key.SGLang: {key.Draft: 4, key.Eagle: 4, key.Eagle3: 4, key.MTP: 4, key.Ngram: 12, key.DFlash: 16},
	}
	for e, kinds := range want {
		for _, d := range key.Selectable(e) {
			w, def, ok := p.DefaultWidth(e, d)
			if !ok {
				t.Errorf("%s %s: no default", e, d)
				continue
			}
			if w != kinds[d] {
				t.Errorf("%s %s: default width %d, want %d", e, d, w, kinds[d])
			}
			if def.Note == "" {
				t.Errorf("%s %s: default has no note saying where it comes from", e, d)
			}
		}
		for _, en := range p.Entries {
			if en.Key.Engine == e {
				t.Errorf("measured entry %q for %s: none can be earned here", en.ID, e)
			}
		}
	}
}

// A launch's pair is hashed (and a model it cannot read warned of) only
// when a tuned entry has its key: a schedule tuned on another GPU or
// engine would not apply anyway. Before, any tuned entry did, and every
// resolve of a remote model id warned once a tune had run.
func TestHasPairs(t *testing.T) {
	tuned := entry("tuned-x", gb10, 4, "tuned.toml:3")
	tuned.Pair = Pair{Target: strings.Repeat("a", 64), Draft: strings.Repeat("b", 64), Pin: "sim"}
	p := Merge(&File{Name: "tuned.toml", Entries: []Entry{tuned, entry("h200-measured", h200, 3, "policy.toml:1")}})
	llama := gb10
	llama.Engine = key.LlamaCpp
	for _, c := range []struct {
		name string
		k    key.Key
		want bool
	}{
		{"the tuned entry's key", gb10, true},
		{"another GPU, a measured entry only", h200, false},
		{"another engine", llama, false},
	} {
		if got := p.HasPairs(c.k); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
