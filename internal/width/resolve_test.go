package width

import (
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/policy"
)

func testPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	f, err := policy.Parse("test.toml", []byte(`schema = 1
[[default]]
engine = "mlxcel"
drafter = "dflash"
width = 16
[[default]]
engine = "mlxcel"
drafter = "mtp"
width = 4
[[default]]
engine = "sim"
drafter = "dflash"
width = 16
[[default]]
engine = "llama.cpp"
drafter = "draft"
width = 4
[[entry]]
id = "gb10-affine-dflash"
engine = "mlxcel"
drafter = "dflash"
capability = "12.1"
quant = "affine"
width = 4
pin = "mlx 81ba1c6a"
record = "docs/benchmark_results/x.md"
[[entry]]
id = "h200-q4_0-draft"
engine = "llama.cpp"
drafter = "draft"
capability = "9.0"
quant = "q4_0"
width = 5
pin = "llama.cpp d32676d"
record = "docs/benchmark_results/y.md"
`))
	if err != nil {
		t.Fatal(err)
	}
	return policy.Merge(f)
}

var (
	gb10 = key.Capability{Major: 12, Minor: 1}
	h200 = key.Capability{Major: 9, Minor: 0}
	v100 = key.Capability{Major: 7, Minor: 0}
)

func TestResolve(t *testing.T) {
	pol := testPolicy(t)
	cases := []struct {
		name       string
		in         Input
		width      int
		source     SourceKind
		reason     string // substring
		entry      string
		warnSubstr string
	}{
		{"no drafter: off", Input{Engine: key.MLXCEL}, 0, Off, "speculation is off", "", ""},
		{"no cuda: kind default", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Quant: key.QuantAffine}, 16, KindDefault, "per-kind default, no measurement for no CUDA device with an affine-quantized target", "", ""},
		{"pre-ampere: kind default", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Capability: v100, Quant: key.QuantAffine}, 16, KindDefault, "no measurement for sm_70", "", ""},
		{"sm_90 affine: kind default", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Capability: h200, Quant: key.QuantAffine}, 16, KindDefault, "per-kind default, no measurement for sm_90 with an affine-quantized target", "", ""},
		{"gb10 affine: measured", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Capability: gb10, Quant: key.QuantAffine}, 4, Measured, "measured default for sm_121 with an affine-quantized target", "gb10-affine-dflash", ""},
		{"gb10 nvfp4: kind default", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Capability: gb10, Quant: key.QuantNVFP4}, 16, KindDefault, "with an NVFP4 target", "", ""},
		{"gb10 other: kind default", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Capability: gb10, Quant: key.QuantOther}, 16, KindDefault, "neither affine nor NVFP4", "", ""},
		{"gb10 unknown: kind default, config unreadable", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Capability: gb10, Quant: key.QuantUnknown}, 16, KindDefault, "a target whose config.json could not be read", "", ""},
		{"gb10 empty quant = unknown", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Capability: gb10}, 16, KindDefault, "could not be read", "", ""},
		{"mtp on gb10 keeps its default", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.MTP, Capability: gb10, Quant: key.QuantAffine}, 4, KindDefault, "per-kind default", "", ""},
		{"override beats entry", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Capability: gb10, Quant: key.QuantAffine, Override: 8}, 8, Override, "operator override", "", ""},
		{"override beats checkpoint", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Override: 6, Declared: 8, DeclaredReason: "the DSpark drafter's runtime verify width"}, 6, Override, "operator override", "", ""},
		// 2 is the narrowest width, an operator's or a checkpoint's: it
		// must win as any other (a ">" for ">=" would drop it).
		{"override of 2 beats entry", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Capability: gb10, Quant: key.QuantAffine, Override: 2}, 2, Override, "operator override", "", ""},
		{"checkpoint width 2 beats entry", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Capability: gb10, Quant: key.QuantAffine, Declared: 2, DeclaredReason: "the drafter's declared width"}, 2, DrafterCheckpoint, "the drafter's declared width", "", ""},
		{"checkpoint beats entry", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Capability: gb10, Quant: key.QuantAffine, Declared: 8, DeclaredReason: "the DSpark drafter's runtime verify width"}, 8, DrafterCheckpoint, "the DSpark drafter's runtime verify width", "", ""},
		{"sim uses mlxcel's entries", Input{Engine: key.Sim, HasDrafter: true, Drafter: key.DFlash, Capability: gb10, Quant: key.QuantAffine}, 4, Measured, "sm_121", "gb10-affine-dflash", ""},
		{"sim default", Input{Engine: key.Sim, HasDrafter: true, Drafter: key.DFlash}, 16, KindDefault, "no CUDA device", "", ""},
		{"llama h200 q4_0", Input{Engine: key.LlamaCpp, HasDrafter: true, Drafter: key.Draft, Capability: h200, Quant: key.QuantQ4_0, EngineVersion: "9749 (d32676d)"}, 5, Measured, "measured default for sm_90 with a Q4_0 target", "h200-q4_0-draft", ""},
		{"llama without a commit cannot confirm the pin", Input{Engine: key.LlamaCpp, HasDrafter: true, Drafter: key.Draft, Capability: h200, Quant: key.QuantQ4_0, EngineVersion: "0 (unknown)"}, 5, Measured, "sm_90", "h200-q4_0-draft", "the pin cannot be confirmed"},
		{"llama pin mismatch warns", Input{Engine: key.LlamaCpp, HasDrafter: true, Drafter: key.Draft, Capability: h200, Quant: key.QuantQ4_0, EngineVersion: "9999 (abcdef0)"}, 5, Measured, "sm_90", "h200-q4_0-draft", "measured against"},
		{"llama q4_k unmeasured", Input{Engine: key.LlamaCpp, HasDrafter: true, Drafter: key.Draft, Capability: h200, Quant: key.QuantQ4_K}, 4, KindDefault, "no measurement for sm_90 with a Q4_K target", "", ""},
		{"llama dflash without a default row falls back", Input{Engine: key.LlamaCpp, HasDrafter: true, Drafter: key.DFlash, Capability: h200, Quant: key.QuantQ4_0}, 4, KindDefault, "per-kind default", "", ""},
		{"llama entry does not apply to mlxcel", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Capability: h200, Quant: key.QuantQ4_0}, 16, KindDefault, "per-kind default", "", ""},
		{"nil policy: engine fallback", Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.MTP}, 4, KindDefault, "per-kind default", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			if c.name != "nil policy: engine fallback" {
				in.Policy = pol
			}
			r := Resolve(in)
			if r.Width != c.width || r.Source != c.source {
				t.Fatalf("got width %d source %s (%s), want %d %s", r.Width, r.Source, r.Reason, c.width, c.source)
			}
			if !strings.Contains(r.Reason, c.reason) {
				t.Errorf("reason %q does not contain %q", r.Reason, c.reason)
			}
			switch {
			case c.entry == "" && r.Entry != nil:
				t.Errorf("unexpected entry %s", r.Entry.ID)
			case c.entry != "" && (r.Entry == nil || r.Entry.ID != c.entry):
				t.Errorf("entry = %v, want %s", r.Entry, c.entry)
			}
			if c.warnSubstr == "" && len(r.Warnings) > 0 {
				t.Errorf("unexpected warnings %v", r.Warnings)
			}
			if c.warnSubstr != "" && (len(r.Warnings) == 0 || !strings.Contains(r.Warnings[0], c.warnSubstr)) {
				t.Errorf("warnings %v, want one containing %q", r.Warnings, c.warnSubstr)
			}
			if r.Source != Off && r.Width < key.MinWidth {
				t.Errorf("width %d below minimum", r.Width)
			}
		})
	}
}

// The unreadable-target and unmeasured-device reasons must differ, as
// upstream's test does: an operator has to tell them apart.
func TestReasonsAreDistinct(t *testing.T) {
	pol := testPolicy(t)
	a := Resolve(Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Capability: gb10, Quant: key.QuantUnknown, Policy: pol})
	b := Resolve(Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Capability: h200, Quant: key.QuantAffine, Policy: pol})
	if a.Width != b.Width || a.Reason == b.Reason {
		t.Fatalf("want same width, different reasons: %q vs %q", a.Describe(), b.Describe())
	}
	if !strings.HasPrefix(a.Describe(), "16 (") {
		t.Errorf("Describe() = %q", a.Describe())
	}
}

// Sweep every capability and quant: a measured default never disables
// speculation.
func TestNeverBelowTwo(t *testing.T) {
	pol := testPolicy(t)
	for _, e := range key.Engines {
		for _, d := range key.Drafters {
			for maj := 0; maj <= 13; maj++ {
				for min := 0; min <= 9; min++ {
					for _, q := range key.Quants {
						r := Resolve(Input{Engine: e, HasDrafter: true, Drafter: d, Capability: key.Capability{Major: maj, Minor: min}, Quant: q, Policy: pol})
						if r.Width < 2 {
							t.Fatalf("%s %s %d.%d %s resolved to %d", e, d, maj, min, q, r.Width)
						}
					}
				}
			}
		}
	}
}

func BenchmarkResolve(b *testing.B) {
	f, _ := policy.Parse("b.toml", []byte("schema = 1\n[[entry]]\nid = \"x\"\nengine = \"mlxcel\"\ndrafter = \"dflash\"\ncapability = \"12.1\"\nquant = \"affine\"\nwidth = 4\npin = \"mlx 81ba1c6a\"\nrecord = \"r.md\"\n"))
	pol := policy.Merge(f)
	in := Input{Engine: key.MLXCEL, HasDrafter: true, Drafter: key.DFlash, Capability: gb10, Quant: key.QuantAffine, Policy: pol, EngineVersion: "mlx 81ba1c6a"}
	for b.Loop() {
		if r := Resolve(in); r.Width != 4 {
			b.Fatal(r.Width)
		}
	}
}

// An unknown quantization is said as what left it unknown: a GGUF header
// or a config.json that could not be read, or a Hugging Face repo id,
// whose quant is never read here ("config.json could not be read" beside
// a target line that said repo id).
func TestUnknownQuantReason(t *testing.T) {
	for _, c := range []struct {
		engine  key.Engine
		drafter key.Drafter
		quant   key.Quant
		repo    bool
		want    string
	}{
		{key.LlamaCpp, key.Draft, key.QuantUnknown, false, "with a target whose GGUF header could not be read"},
		{key.VLLM, key.Eagle3, key.QuantUnknown, false, "with a target whose config.json could not be read"},
		{key.VLLM, key.Eagle3, key.QuantUnknown, true, "with a Hugging Face repo-id target, whose quant is not known here: give it with --quant or model.quant"},
		{key.SGLang, key.Eagle3, "", true, "with a Hugging Face repo-id target, whose quant is not known here: give it with --quant or model.quant"},
		{key.VLLM, key.Eagle3, key.QuantBF16, true, "with an unquantized BF16 target"},
	} {
		r := Resolve(Input{Engine: c.engine, HasDrafter: true, Drafter: c.drafter, Capability: h200, Quant: c.quant, RepoTarget: c.repo, Policy: testPolicy(t)})
		if !strings.HasSuffix(r.Reason, c.want) {
			t.Errorf("%s, quant %q, repo %v: reason %q, want it to end %q", c.engine, c.quant, c.repo, r.Reason, c.want)
		}
	}
}

// An adaptive switch to classic is off at every load and still says the
// loop chose it; a switch to a width is that width, sourced adaptive.
func TestAdaptedTo(t *testing.T) {
	cases := []struct {
		w         int
		wantWidth int
		wantSrc   SourceKind
	}{
		{1, 0, Off},
		{6, 6, Adaptive},
	}
	for _, c := range cases {
		r := AdaptedTo(c.w, "why", key.Key{})
		if r.Width != c.wantWidth || r.Source != c.wantSrc || !r.IsAdaptive() || r.Reason != "why" {
			t.Errorf("AdaptedTo(%d) = width %d %s adaptive=%v %q", c.w, r.Width, r.Source, r.IsAdaptive(), r.Reason)
		}
	}
	if (Resolution{Source: Off}).IsAdaptive() {
		t.Error("a resolution with no drafter reads as adaptive")
	}
}
