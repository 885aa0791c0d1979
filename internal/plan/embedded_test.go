package plan

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/width"
)

// load is the settings of flags as typed (no profile, no environment but
// env), with the aliases' spellings.
func load(t *testing.T, flags, spelled, env map[string]string) config.Settings {
	t.Helper()
	s, _, _, err := config.Load(config.Input{Ctx: context.Background(), Flags: flags, Spelled: spelled,
		Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testDeps are a host with the engine binary on PATH, of the spelling sp
// (llama.cpp), and no checkpoints to read.
func testDeps(sp engine.Spelling) Deps {
	return Deps{
		LookPath: func(b string) (string, error) { return "/usr/bin/" + b, nil },
		DetectLlama: func(context.Context, string) (engine.Caps, error) {
			return engine.Caps{Spelling: sp, Version: "1 (abc)", Commit: "abc"}, nil
		},
		Self: "/usr/bin/speclaunch",
	}
}

// The decision "is there a drafter": a draft model, or, on llama.cpp, the
// target's own MTP layers (drafter kind mtp with no draft model). Every
// other engine and kind without a draft model runs without speculation,
// and the warning names the fix for that engine and kind.
func TestEmbeddedDrafterDecision(t *testing.T) {
	for _, tc := range []struct {
		name        string
		engine      key.Engine
		kind, draft string
		speculative bool
		embedded    bool
		argv        string // what the command holds (speculative) or must not (off)
		warn        string // a warning that must be said; "" = none about the drafter
	}{
		{"llama.cpp mtp, no draft model", key.LlamaCpp, "draft-mtp", "", true, true, "-m t.gguf --spec-type draft-mtp --spec-draft-n-max 3 --host", ""},
		{"llama.cpp mtp kind spelled mtp", key.LlamaCpp, "mtp", "", true, true, "-m t.gguf --spec-type draft-mtp --spec-draft-n-max 3 --host", ""},
		{"llama.cpp mtp with a draft model", key.LlamaCpp, "draft-mtp", "d.gguf", true, false, "-m t.gguf --spec-draft-model d.gguf --spec-type draft-mtp --spec-draft-n-max 3 --host", ""},
		{"llama.cpp dflash, no draft model", key.LlamaCpp, "draft-dflash", "", false, false, "--spec-type", "speculation is off; set --draft-model"},
		{"llama.cpp no kind, no draft model", key.LlamaCpp, "", "", false, false, "--spec-type", ""},
		{"llama.cpp draft model, no kind", key.LlamaCpp, "", "d.gguf", true, false, "--spec-draft-model d.gguf --spec-type draft-simple --spec-draft-n-max 3 --host", ""},
		{"mlxcel mtp, no draft model", key.MLXCEL, "mtp", "", false, false, "--draft-kind", "speculation is off; set --draft-model"},
		{"sim mtp, no draft model", key.Sim, "mtp", "", false, false, "--draft-kind", "speculation is off; set --draft-model"},
		{"vllm mtp, no draft model", key.VLLM, "mtp", "", false, false, "--speculative-config", "set --draft-model to the target's path"},
		{"sglang mtp, no draft model", key.SGLang, "mtp", "", false, false, "--speculative-algorithm", "set --draft-model to the target's path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flags := map[string]string{"engine": string(tc.engine), "model": "t.gguf", "capability": "9.0", "quant": "q4_0"}
			if tc.kind != "" {
				flags["draft-kind"] = tc.kind
			}
			if tc.draft != "" {
				flags["draft-model"] = tc.draft
			}
			s := load(t, flags, map[string]string{"draft-kind": "--spec-type"}, nil)
			if got := HasDrafter(s); got != tc.speculative {
				t.Errorf("HasDrafter = %v, want %v", got, tc.speculative)
			}
			p, err := Build(context.Background(), s, policy.Merge(), testDeps(engine.Spelling2026), Options{})
			if err != nil {
				t.Fatal(err)
			}
			on := p.Resolution.Source != width.Off
			argv := strings.Join(p.Launch.Argv, " ")
			if on != tc.speculative || p.Facts.Embedded != tc.embedded || strings.Contains(argv, tc.argv) != tc.speculative {
				t.Errorf("speculative %v, embedded %v, argv %q; want %v, %v, and %q held %v", on, p.Facts.Embedded, argv, tc.speculative, tc.embedded, tc.argv, tc.speculative)
			}
			said := slices.ContainsFunc(p.Warnings, func(w string) bool { return tc.warn != "" && strings.Contains(w, tc.warn) })
			drafterWarned := slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, "no draft model is") })
			if tc.warn != "" && !said || tc.warn == "" && drafterWarned {
				t.Errorf("warnings %q; want one saying %q", p.Warnings, tc.warn)
			}
			if tc.embedded && (p.Facts.DrafterFrom != "the target's own MTP layers (no draft model)" || p.Facts.Drafter != key.MTP) {
				t.Errorf("drafter %s from %q", p.Facts.Drafter, p.Facts.DrafterFrom)
			}
		})
	}
}

// On a llama-server that predates --spec-type, embedded MTP is refused
// with the fix; the same settings on a 2026 tree launch it.
func TestEmbeddedDrafterLegacyTree(t *testing.T) {
	s := load(t, map[string]string{"engine": "llama.cpp", "model": "t.gguf", "draft-kind": "draft-mtp", "capability": "9.0", "quant": "q4_0"}, nil, nil)
	_, err := Build(context.Background(), s, policy.Merge(), testDeps(engine.SpellingLegacy), Options{})
	if err == nil || !strings.Contains(err.Error(), "needs llama.cpp's 2026 tree") || !strings.Contains(err.Error(), "-md FILE") {
		t.Errorf("err %v, want the 2026 tree named with the fix", err)
	}
}

// A width given with no drafter is not used: said once, with where it
// was set and the fix (resolve's hypothetical plan and serve's alike).
func TestWidthWithoutDrafterWarns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags map[string]string
		env   map[string]string
		want  string
	}{
		{"--spec-draft-n-max", map[string]string{"spec-draft-n-max": "4"}, nil, "draft width 5 is set (flag --spec-draft-n-max: "},
		{"--draft-block-size", map[string]string{"draft-block-size": "4"}, nil, "draft width 4 is set (flag --draft-block-size)"},
		{"LLAMA_ARG_SPEC_DRAFT_N_MAX", nil, map[string]string{"LLAMA_ARG_SPEC_DRAFT_N_MAX": "4"}, "draft width 5 is set (env LLAMA_ARG_SPEC_DRAFT_N_MAX: "},
	} {
		for _, o := range []Options{{}, {Hypothetical: true}} {
			flags := map[string]string{"engine": "llama.cpp", "model": "t.gguf", "capability": "9.0", "quant": "q4_0"}
			for k, v := range tc.flags {
				flags[k] = v
			}
			s := load(t, flags, nil, tc.env)
			p, err := Build(context.Background(), s, policy.Merge(), testDeps(engine.Spelling2026), o)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, w := range p.Warnings {
				if strings.Contains(w, tc.want) && strings.HasSuffix(w, "but no drafter is: speculation is off and it is not used; give a draft model with -md FILE (draft.model in the profile), or --spec-type draft-mtp (draft.kind = \"mtp\") for a target with MTP layers") {
					n++
				}
			}
			if n != 1 || p.Resolution.Source != width.Off {
				t.Errorf("%s (hypothetical %v): %d warnings saying %q, source %s:\n%s", tc.name, o.Hypothetical, n, tc.want, p.Resolution.Source, strings.Join(p.Warnings, "\n"))
			}
		}
	}
	// With embedded MTP the width is used: no warning.
	s := load(t, map[string]string{"engine": "llama.cpp", "model": "t.gguf", "draft-kind": "mtp", "draft-block-size": "4", "capability": "9.0", "quant": "q4_0"}, nil, nil)
	p, err := Build(context.Background(), s, policy.Merge(), testDeps(engine.Spelling2026), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Resolution.Width != 4 || slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, "no drafter is") }) {
		t.Errorf("width %d, warnings %q", p.Resolution.Width, p.Warnings)
	}
}

// A kind that differs from a GGUF drafter's names its GGUF metadata,
// where it was read; a checkpoint directory's, its config.json.
func TestKindDiffersNamesWhatWasRead(t *testing.T) {
	for draft, want := range map[string]string{
		"d.gguf": "differs from the drafter's GGUF metadata (general.architecture in d.gguf gives kind draft); keeping mtp",
		"d-dir":  "differs from the drafter's config.json (draft); keeping mtp",
	} {
		s := load(t, map[string]string{"engine": "llama.cpp", "model": "t.gguf", "draft-model": draft, "draft-kind": "draft-mtp", "capability": "9.0", "quant": "q4_0"}, nil, nil)
		d := testDeps(engine.Spelling2026)
		d.DrafterKind = func(context.Context, string) (key.Drafter, bool) { return key.Draft, true }
		p, err := Build(context.Background(), s, policy.Merge(), d, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, want) }) {
			t.Errorf("%s: warnings %q lack %q", draft, p.Warnings, want)
		}
	}
}

// The pair of an embedded drafter is the target's with a drafter hash of
// its own: never a file's, so never the pair of a separate draft model
// (the target given as its own draft model included).
func TestEmbeddedPair(t *testing.T) {
	dir := t.TempDir()
	target := dir + "/t.gguf"
	if err := os.WriteFile(target, []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	emb, err := PairOf(key.LlamaCpp, target, "", engine.Caps{Commit: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	self, err := PairOf(key.LlamaCpp, target, target, engine.Caps{Commit: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	if emb.Target != self.Target || emb.Draft == self.Draft || emb.Draft != EmbeddedSum(emb.Target) || len(emb.Draft) != 64 {
		t.Errorf("embedded %+v, target as its own draft %+v", emb, self)
	}
}
