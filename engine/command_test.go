package engine

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/width"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func settings(_ key.Engine, draft string, args ...string) Spec {
	return Spec{Model: "/models/target.gguf", Draft: draft, DraftFrom: "flag --draft-model", Host: "127.0.0.1", Port: 8080,
		Args: args, ArgsFrom: "profile profiles/demo.toml:7"}
}

func res(w int) width.Resolution {
	return width.Resolution{Width: w, Source: width.Measured, Reason: "measured default for sm_121 with an affine-quantized target"}
}

var off = width.Resolution{Source: width.Off, Reason: "no draft model"}

var baseEnv = []string{"HOME=/home/op", "PATH=/usr/bin:/bin"}

type cmdCase struct {
	golden  string
	engine  key.Engine
	s       Spec
	r       width.Resolution
	kind    key.Drafter
	environ []string
	caps    Caps
}

func cmdCases() []cmdCase {
	withEnv := func(s Spec, env map[string]string) Spec {
		s.Env, s.EnvFrom = env, "profile profiles/demo.toml:9"
		return s
	}
	stale := append(slices.Clone(baseEnv), "LLAMA_ARG_DRAFT_MAX=4", "LLAMA_ARG_DRAFT_MIN=1", "LLAMA_ARG_SPEC_DRAFT_N_MAX=3", "LLAMA_ARG_DRAFT_BLOCK_SIZE=4", "MLXCEL_DRAFT_BLOCK_SIZE=4")
	new26 := Caps{Spelling: Spelling2026, Version: "9749 (d32676d)", Commit: "d32676d"}
	legacy := Caps{Spelling: SpellingLegacy, Version: "8306 (b1a190e)", Commit: "b1a190e"}
	self := Caps{Self: "/usr/local/bin/speclaunch"}
	cs := []cmdCase{
		{"mlxcel-dflash", key.MLXCEL, settings(key.MLXCEL, "/models/dflash"), res(4), key.DFlash, baseEnv, Caps{}},
		{"mlxcel-mtp", key.MLXCEL, settings(key.MLXCEL, "/models/mtp"), res(4), key.MTP, baseEnv, Caps{}},
		{"mlxcel-off", key.MLXCEL, settings(key.MLXCEL, ""), off, "", baseEnv, Caps{}},
		{"mlxcel-passthrough", key.MLXCEL, settings(key.MLXCEL, "/models/dflash", "--max-batch-size", "1", "--ignore-eos", "--metrics"), res(16), key.DFlash, baseEnv, Caps{}},
		{"mlxcel-env", key.MLXCEL, withEnv(settings(key.MLXCEL, "/models/dflash"), map[string]string{"MLXCEL_CUDA_CAPABILITY": "12.1"}),
			res(4), key.DFlash, append(slices.Clone(stale), "RUST_LOG=debug"), Caps{}},
		{"sim-dflash", key.Sim, settings(key.Sim, "/models/dflash"), res(4), key.DFlash, baseEnv, self},
		{"sim-off", key.Sim, settings(key.Sim, ""), off, "", baseEnv, self},
		{"llama-legacy-draft", key.LlamaCpp, settings(key.LlamaCpp, "/models/draft.gguf"), res(4), key.Draft, baseEnv, legacy},
		{"llama-legacy-off", key.LlamaCpp, settings(key.LlamaCpp, ""), off, "", baseEnv, legacy},
		{"llama-legacy-stale-env", key.LlamaCpp, settings(key.LlamaCpp, "/models/draft.gguf"), res(4), key.Draft, stale, legacy},
		{"llama-unknown-draft", key.LlamaCpp, settings(key.LlamaCpp, "/models/draft.gguf"), res(4), key.Draft, baseEnv, Caps{}},
		{"llama-2026-off", key.LlamaCpp, settings(key.LlamaCpp, ""), off, "", baseEnv, new26},
		{"llama-2026-stale-env", key.LlamaCpp, settings(key.LlamaCpp, "/models/draft.gguf"), res(4), key.Draft, stale, new26},
		{"llama-2026-passthrough", key.LlamaCpp, withEnv(settings(key.LlamaCpp, "/models/draft.gguf", "-ngl", "99", "-ngld", "99", "--metrics", "-c", "4096"), map[string]string{"CUDA_VISIBLE_DEVICES": "0"}), res(7), key.Draft, baseEnv, new26},
		// Issue 33: a key typed as a flag reaches the engine through its
		// environment, not its argv (ps); an engine with no such variable,
		// or several vLLM keys, keep the flag with a warning.
		{"llama-2026-apikey", key.LlamaCpp, settings(key.LlamaCpp, "/models/draft.gguf", "-ngl", "99", "--api-key", "flag-key-1,flag-key-2", "--api-key-file", "/run/keys", "-c", "4096"), res(4), key.Draft,
			append(slices.Clone(baseEnv), "LLAMA_API_KEY=env-key-0001"), new26},
		{"mlxcel-apikey", key.MLXCEL, settings(key.MLXCEL, "/models/dflash", "--api-key=flag-key-1", "--max-batch-size", "1"), res(4), key.DFlash, baseEnv, Caps{}},
		{"sim-apikey", key.Sim, settings(key.Sim, "/models/dflash", "--api-key", "flag-key-1"), res(4), key.DFlash, baseEnv, self},
		{"vllm-apikey", key.VLLM, settings(key.VLLM, "/models/draft", "--api-key", "flag-key-1", "--max-model-len", "4096"), res(4), key.Draft,
			append(slices.Clone(baseEnv), "VLLM_API_KEY=env-key-0001"), Caps{Spelling: SpellingVLLMConfig}},
		{"vllm-apikeys", key.VLLM, settings(key.VLLM, "/models/draft", "--api-key", "flag-key-1", "flag-key-2"), res(4), key.Draft, baseEnv, Caps{Spelling: SpellingVLLMConfig}},
		{"sglang-apikey", key.SGLang, settings(key.SGLang, "/models/draft", "--api-key", "flag-key-1"), res(4), key.Draft, baseEnv, Caps{}},
		{"llama-2026-apikey-novalue", key.LlamaCpp, settings(key.LlamaCpp, "", "--api-key"), off, "", baseEnv, new26},
		// Embedded MTP: no draft model, the target's own MTP layers draft.
		{"llama-2026-mtp-embedded", key.LlamaCpp, settings(key.LlamaCpp, ""), res(4), key.MTP, baseEnv, new26},
	}
	for _, k := range key.Selectable(key.LlamaCpp) {
		cs = append(cs, cmdCase{"llama-2026-" + string(k), key.LlamaCpp, settings(key.LlamaCpp, "/models/drafter"), res(4), k, baseEnv, new26})
	}
	return cs
}

func render(l Launch) string {
	var b strings.Builder
	b.WriteString("argv:\n")
	for _, a := range l.Argv {
		fmt.Fprintf(&b, "  %s\n", a)
	}
	b.WriteString("env set:\n")
	keys := make([]string, 0, len(l.EnvSet))
	for k := range l.EnvSet {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s=%s\n", k, l.EnvSet[k])
	}
	b.WriteString("env removed:\n")
	for _, k := range l.EnvRemoved {
		fmt.Fprintf(&b, "  %s\n", k)
	}
	b.WriteString("env:\n")
	for _, e := range l.Env {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	b.WriteString("warnings:\n")
	for _, w := range l.Warnings {
		fmt.Fprintf(&b, "  %s\n", w)
	}
	if len(l.Notes) > 0 {
		b.WriteString("notes:\n")
		for _, n := range l.Notes {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	fmt.Fprintf(&b, "base_url: %s\n", l.BaseURL)
	return b.String()
}

func TestCommandGolden(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range cmdCases() {
		t.Run(tc.golden, func(t *testing.T) {
			if seen[tc.golden] {
				t.Fatalf("duplicate golden %s", tc.golden)
			}
			seen[tc.golden] = true
			a, err := For(tc.engine)
			if err != nil {
				t.Fatal(err)
			}
			env := slices.Clone(tc.environ)
			l, err := a.Command(tc.s, tc.r, tc.kind, env, tc.caps)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(env, tc.environ) {
				t.Error("Command modified its environ argument")
			}
			got := render(l)
			path := filepath.Join("testdata", tc.golden+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./engine -update)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs (run go test ./engine -update to accept):\n--- got\n%s--- want\n%s", path, got, want)
			}
		})
	}
}

// In 2026 trees a draft model without --spec-type loads and drafts nothing:
// no argv for spelling 2026 (or unknown, which assumes 2026) may carry one.
func TestNoDraftModelWithoutSpecType(t *testing.T) {
	a, _ := For(key.LlamaCpp)
	for _, sp := range []Spelling{Spelling2026, SpellingUnknown} {
		for _, k := range key.Drafters {
			for w := key.MinWidth; w <= 33; w++ {
				for _, args := range [][]string{nil, {"-ngl", "99"}, {"--metrics"}} {
					l, err := a.Command(settings(key.LlamaCpp, "/m/d.gguf", args...), res(w), k, baseEnv, Caps{Spelling: sp})
					if err != nil {
						continue // kinds llama.cpp cannot take
					}
					hasDraft := slices.ContainsFunc(l.Argv, func(s string) bool {
						return s == "--spec-draft-model" || s == "-md" || s == "--model-draft"
					})
					i := slices.Index(l.Argv, "--spec-type")
					if hasDraft && (i < 0 || !strings.HasPrefix(l.Argv[i+1], "draft-")) {
						t.Fatalf("spelling %q kind %s width %d: draft model without --spec-type draft-*: %q", sp, k, w, l.Argv)
					}
					if !hasDraft {
						t.Fatalf("spelling %q kind %s: no draft model in %q", sp, k, l.Argv)
					}
					j := slices.Index(l.Argv, "--spec-draft-n-max")
					if j < 0 || l.Argv[j+1] != fmt.Sprint(w-1) {
						t.Fatalf("width %d: want --spec-draft-n-max %d in %q", w, w-1, l.Argv)
					}
					if slices.Contains(l.Argv, "--draft-max") {
						t.Fatalf("2026 argv has --draft-max: %q", l.Argv)
					}
					if n := countOf(l.Argv, "--metrics"); n != 1 {
						t.Fatalf("--metrics %d times in %q", n, l.Argv)
					}
				}
			}
		}
	}
}

func countOf(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

func TestWidthUnit(t *testing.T) {
	for w := key.MinWidth; w <= 32; w++ {
		for _, e := range []key.Engine{key.MLXCEL, key.Sim} {
			a, _ := For(e)
			l, err := a.Command(settings(e, "/m/d"), res(w), key.DFlash, nil, Caps{Self: "/bin/speclaunch"})
			if err != nil {
				t.Fatal(err)
			}
			i := slices.Index(l.Argv, "--draft-block-size")
			if i < 0 || l.Argv[i+1] != fmt.Sprint(w) {
				t.Fatalf("%s width %d: %q", e, w, l.Argv)
			}
		}
		a, _ := For(key.LlamaCpp)
		l, err := a.Command(settings(key.LlamaCpp, "/m/d"), res(w), key.Draft, nil, Caps{Spelling: SpellingLegacy})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.Index(l.Argv, "--draft-max")
		if i < 0 || l.Argv[i+1] != fmt.Sprint(w-1) {
			t.Fatalf("legacy width %d: %q", w, l.Argv)
		}
	}
}

func TestCommandErrors(t *testing.T) {
	new26 := Caps{Spelling: Spelling2026}
	legacy := Caps{Spelling: SpellingLegacy}
	badPort := settings(key.MLXCEL, "/m/d")
	badPort.Port = 0
	noModel := settings(key.LlamaCpp, "/m/d")
	noModel.Model = ""
	envConflict := settings(key.LlamaCpp, "/m/d")
	envConflict.Env, envConflict.EnvFrom = map[string]string{"LLAMA_ARG_DRAFT_MAX": "4"}, "profile p.toml:3"
	portConflict := settings(key.MLXCEL, "/m/d")
	portConflict.Env, portConflict.EnvFrom = map[string]string{"LLAMA_ARG_PORT": "9"}, "profile p.toml:4"
	// Each variable's own line, where the profile gives it: not the
	// [engine.env] header's.
	keyLine := settings(key.LlamaCpp, "/m/d")
	keyLine.Env, keyLine.EnvFrom = map[string]string{"LLAMA_ARG_CTX_SIZE": "8192", "LLAMA_ARG_DRAFT_MAX": "4"}, "profile p.toml:3"
	keyLine.EnvKeyFrom = func(k string) string {
		return map[string]string{"LLAMA_ARG_CTX_SIZE": "profile p.toml:4", "LLAMA_ARG_DRAFT_MAX": "profile p.toml:8"}[k]
	}
	tests := []struct {
		name   string
		engine key.Engine
		s      Spec
		r      width.Resolution
		kind   key.Drafter
		caps   Caps
		want   []string
		is     error
	}{
		{"mlxcel kind draft", key.MLXCEL, settings(key.MLXCEL, "/m/d"), res(4), key.Draft, Caps{}, []string{"accepted: dflash, mtp"}, nil},
		{"mlxcel internal-mtp", key.MLXCEL, settings(key.MLXCEL, "/m/d"), res(4), key.InternalMTP, Caps{}, []string{"not user-selectable"}, nil},
		{"sim kind eagle3", key.Sim, settings(key.Sim, "/m/d"), res(4), key.Eagle3, Caps{Self: "/x"}, []string{"accepted: dflash, mtp"}, nil},
		{"sim without self", key.Sim, settings(key.Sim, "/m/d"), res(4), key.DFlash, Caps{}, []string{"os.Executable"}, nil},
		{"legacy mtp", key.LlamaCpp, settings(key.LlamaCpp, "/m/d"), res(4), key.MTP, legacy, []string{"predates --spec-type draft-", "upgrade llama.cpp or use drafter kind draft"}, nil},
		{"legacy dflash", key.LlamaCpp, settings(key.LlamaCpp, "/m/d"), res(4), key.DFlash, legacy, []string{"predates"}, nil},
		{"legacy embedded mtp", key.LlamaCpp, settings(key.LlamaCpp, ""), res(4), key.MTP, legacy, []string{"the target's own MTP layers", "needs llama.cpp's 2026 tree", "-md FILE"}, nil},
		{"2026 dflash without draft model", key.LlamaCpp, settings(key.LlamaCpp, ""), res(4), key.DFlash, new26, []string{"no draft model is set"}, nil},
		{"vllm mtp without draft model", key.VLLM, settings(key.VLLM, ""), res(4), key.MTP, Caps{Spelling: SpellingVLLMConfig}, []string{"no draft model is set"}, nil},
		{"2026 internal-mtp", key.LlamaCpp, settings(key.LlamaCpp, "/m/d"), res(4), key.InternalMTP, new26, []string{"internal-mtp"}, nil},
		{"width 1", key.LlamaCpp, settings(key.LlamaCpp, "/m/d"), res(1), key.Draft, new26, []string{"below 2"}, nil},
		{"width without draft model", key.MLXCEL, settings(key.MLXCEL, ""), res(4), key.DFlash, Caps{}, []string{"no draft model is set", "--draft-model"}, nil},
		{"bad port", key.MLXCEL, badPort, res(4), key.DFlash, Caps{}, []string{"port 0"}, nil},
		{"no model", key.LlamaCpp, noModel, res(4), key.Draft, new26, []string{"--model"}, nil},
		{"passthrough width", key.LlamaCpp, settings(key.LlamaCpp, "/m/d", "--spec-draft-n-max", "5"), res(4), key.Draft, new26, []string{"profiles/demo.toml:7", "--draft-block-size"}, ErrPassthrough},
		{"passthrough mlxcel width", key.MLXCEL, settings(key.MLXCEL, "/m/d", "--draft-block-size=8"), res(4), key.DFlash, Caps{}, []string{"draft.block_size"}, ErrPassthrough},
		{"engine.env width", key.LlamaCpp, envConflict, res(4), key.Draft, new26, []string{"p.toml:3", "LLAMA_ARG_DRAFT_MAX", "draft.block_size"}, nil},
		{"engine.env port", key.MLXCEL, portConflict, res(4), key.DFlash, Caps{}, []string{"p.toml:4", "LLAMA_ARG_PORT", "server.port"}, nil},
		{"engine.env width, its own line", key.LlamaCpp, keyLine, res(4), key.Draft, new26, []string{"profile p.toml:8: engine.env sets LLAMA_ARG_DRAFT_MAX=4"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := For(tt.engine)
			_, err := a.Command(tt.s, tt.r, tt.kind, baseEnv, tt.caps)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if err.Error() != strings.ToLower(err.Error()[:1])+err.Error()[1:] {
				t.Errorf("error does not start lowercase: %q", err)
			}
		})
	}
}

func TestFor(t *testing.T) {
	for _, e := range key.Engines {
		a, err := For(e)
		if err != nil || a.Engine() != e {
			t.Fatalf("For(%s) = %v, %v", e, a, err)
		}
	}
	if _, err := For("tgi"); err == nil {
		t.Fatal("For(tgi) should fail: no adapter")
	}
	want := map[key.Engine]string{key.MLXCEL: "mlxcel-server", key.LlamaCpp: "llama-server", key.Sim: "", key.VLLM: "vllm", key.SGLang: "python3"}
	for e, b := range want {
		a, _ := For(e)
		if a.DefaultBinary() != b {
			t.Errorf("%s DefaultBinary %q", e, a.DefaultBinary())
		}
	}
}

func TestCheckPassthrough(t *testing.T) {
	tests := []struct {
		e    key.Engine
		args []string
		want string // "" = ok
	}{
		{key.MLXCEL, []string{"--max-batch-size", "1", "--ignore-eos"}, ""},
		// curl's credentials pasted: refused, the key masked
		{key.LlamaCpp, []string{"-H", "X-Api-Key: abcdef123456SECRET"}, `engine argument "X-Api-Key: ****CRET": it is an HTTP client's credential`},
		{key.LlamaCpp, []string{"-HAuthorization:", "Bearer", "abcdef123456SECRET"}, `engine argument "-HAuthorization:": it is an HTTP client's credential`},
		{key.VLLM, []string{"-u", "user:abcdef123456SECRET"}, "send the header from the client"},
		{key.LlamaCpp, []string{"-H", "Content-Type: application/json"}, ""},
		{key.MLXCEL, []string{"--draft-block-size", "4"}, "--draft-block-size"},
		{key.MLXCEL, []string{"--draft-block-size=4"}, "draft width"},
		{key.Sim, []string{"--draft-block-size=4"}, "draft width"},
		{key.MLXCEL, []string{"-md", "x"}, "--draft-model"},
		{key.MLXCEL, []string{"--draft-kind=mtp"}, "--draft-kind"},
		{key.MLXCEL, []string{"--port", "9"}, "--port"},
		{key.LlamaCpp, []string{"-ngl", "99", "-c", "4096", "--spec-draft-n-min", "0", "--metrics"}, ""},
		{key.LlamaCpp, []string{"--spec-draft-n-max", "3"}, "--draft-block-size"},
		{key.LlamaCpp, []string{"--spec-draft-n-max=3"}, "draft width"},
		{key.LlamaCpp, []string{"--draft-max", "3"}, "draft width"},
		{key.LlamaCpp, []string{"--draft", "3"}, "draft width"},
		{key.LlamaCpp, []string{"--draft-n=3"}, "draft width"},
		{key.LlamaCpp, []string{"--draft-min", "1"}, ""}, // renamed by the Command (renameDraftMin)
		{key.LlamaCpp, []string{"-md", "d.gguf"}, "--draft-model"},
		{key.LlamaCpp, []string{"--model-draft=d.gguf"}, "--draft-model"},
		{key.LlamaCpp, []string{"--spec-draft-model", "d.gguf"}, "--draft-model"},
		{key.LlamaCpp, []string{"--spec-type", "draft-mtp"}, "--draft-kind"},
		{key.LlamaCpp, []string{"-m", "x.gguf"}, "--model"},
		{key.LlamaCpp, []string{"--model=x.gguf"}, "--model"},
		{key.LlamaCpp, []string{"--host", "0.0.0.0"}, "--host"},
		{key.LlamaCpp, []string{"-hf", "x/y"}, "--model"},
		// A token after --hf-token would show in ps, and -hf is refused.
		{key.LlamaCpp, []string{"--hf-token", "hf_SECRET123456"}, "a Hugging Face token"},
		{key.LlamaCpp, []string{"-hft=hf_SECRET123456"}, `"-hft=****3456"`},
		{key.LlamaCpp, []string{"--alias", "-m"}, "--model"}, // conservative: a value that looks like a flag is rejected too
		// A prefix or TLS moves the engine off speclaunch's plain GET
		// /health at the root: serve waited out its ready timeout.
		{key.LlamaCpp, []string{"--api-prefix", "/v2"}, "path-rewriting proxy in front of speclaunch's port"},
		{key.LlamaCpp, []string{"-ngl", "99", "--api-prefix=/v2"}, `"--api-prefix=/v2" sets a path prefix for every route of the engine, /health included`},
		{key.LlamaCpp, []string{"--ssl-key-file", "k.pem"}, "TLS-terminating proxy in front of speclaunch's port"},
		{key.LlamaCpp, []string{"--ssl-cert-file=c.pem"}, `"--ssl-cert-file=c.pem" sets HTTPS for the engine`},
	}
	for _, tt := range tests {
		err := CheckPassthrough(tt.e, tt.args)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s %q: %v", tt.e, tt.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrPassthrough) {
			t.Errorf("%s %q: error %v, want one mentioning %q", tt.e, tt.args, err, tt.want)
		}
	}
}

func TestRustLogHidingTheWidthLineWarns(t *testing.T) {
	a, _ := For(key.MLXCEL)
	for _, tc := range []struct {
		rustLog string
		warn    bool
	}{{"", false}, {"warn", true}, {"mlxcel=info,warn", false}, {"error", true}, {"debug", false}} {
		env := append([]string{}, baseEnv...)
		if tc.rustLog != "" {
			env = append(env, "RUST_LOG="+tc.rustLog)
		}
		l, err := a.Command(settings(key.MLXCEL, "/m/d"), res(4), key.DFlash, env, Caps{})
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(strings.Join(l.Warnings, "\n"), "hides mlxcel's INFO speculative= line")
		if got != tc.warn {
			t.Errorf("RUST_LOG=%q: warning %v, want %v (%v)", tc.rustLog, got, tc.warn, l.Warnings)
		}
	}
}

// A set-but-empty variable the launcher keeps out of the child was read as
// unset (config.Load), so its warning must not claim it was read.
func TestEmptyEnvRemovedWarning(t *testing.T) {
	cases := []struct {
		name, v, want, notWant string
	}{
		{"empty", "", "LLAMA_ARG_SPEC_TYPE is set but empty: the launcher treats it as unset", "read it as the drafter kind"},
		{"blank", "  ", "LLAMA_ARG_SPEC_TYPE is set but empty", "read it as the drafter kind"},
		{"set", "draft-simple", "LLAMA_ARG_SPEC_TYPE=draft-simple is kept out of llama-server's environment: the launcher read it, but the drafter kind comes from another setting", "set but empty"}, // not applied here: no EnvApplied
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := For(key.LlamaCpp)
			if err != nil {
				t.Fatal(err)
			}
			env := append(slices.Clone(baseEnv), "LLAMA_ARG_SPEC_TYPE="+c.v)
			l, err := a.Command(settings(key.LlamaCpp, "/models/draft.gguf"), res(4), key.Draft, env, Caps{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(l.EnvRemoved, "LLAMA_ARG_SPEC_TYPE") {
				t.Errorf("not kept out: %v", l.EnvRemoved)
			}
			w := strings.Join(l.Warnings, "\n")
			if !strings.Contains(w, c.want) || strings.Contains(w, c.notWant) {
				t.Errorf("warnings %q: want %q and not %q", w, c.want, c.notWant)
			}
		})
	}
}

// At width 1 every adapter starts the engine with no drafter, the draft
// model set or not: instance's verification reports width 1 verified with
// nothing to read on that ground. A schedule's bucket off at the load, an
// adaptive switch to classic and no draft model at all are the ways to it.
func TestWidthOneStartsNoDrafter(t *testing.T) {
	ress := map[string]width.Resolution{
		"schedule bucket 4+:1": sched(t, "1:5,2-3:4,4+:1", 4),
		"adaptive classic":     width.AdaptedTo(1, "classic is faster", key.Key{}),
		"no draft model":       off,
	}
	caps := map[key.Engine][]Caps{
		key.LlamaCpp: {{Spelling: Spelling2026}, {Spelling: SpellingLegacy}, {}},
		key.VLLM:     {{Spelling: SpellingVLLMConfig, Version: "0.24.0"}, {Spelling: SpellingVLLMLegacy, Version: "0.7.3"}, {}},
		key.SGLang:   {{Version: "0.5.6"}},
		key.MLXCEL:   {{}},
		key.Sim:      {{Self: "/usr/local/bin/speclaunch"}},
	}
	for _, e := range key.Engines {
		a, err := For(e)
		if err != nil {
			t.Fatal(err)
		}
		for name, r := range ress {
			if r.Source != width.Off {
				t.Fatalf("%s: source %q, want off", name, r.Source)
			}
			for _, c := range caps[e] {
				l, err := a.Command(pySettings(e, "/models/drafter"), r, key.Eagle3, baseEnv, c)
				if err != nil {
					t.Fatalf("%s %s %+v: %v", e, name, c, err)
				}
				for _, arg := range l.Argv {
					flag := strings.HasPrefix(arg, "-") && (strings.Contains(arg, "draft") || strings.Contains(arg, "spec"))
					if flag || strings.Contains(arg, "/models/drafter") {
						t.Errorf("%s %s %+v: %q in %q", e, name, c, arg, l.Argv)
					}
				}
			}
		}
	}
}

// llama-server reads --api-prefix and --ssl-key-file/--ssl-cert-file from
// LLAMA_ARG_API_PREFIX and LLAMA_ARG_SSL_KEY_FILE/_CERT_FILE too: set in
// the operator's environment or the profile's engine.env, either is
// refused, naming the variable, its flag, where it was set and the fix.
// Before, they reached the engine, and serve waited out its ready timeout
// on a /health that had moved under the prefix or to HTTPS. Set but empty
// is unset, and harmless to the engine.
func TestServedOffVariablesRefused(t *testing.T) {
	a, err := For(key.LlamaCpp)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		environ []string
		env     map[string]string // engine.env
		want    string            // "" = accepted
	}{
		{"the prefix in the environment", []string{"LLAMA_ARG_API_PREFIX=/v2"}, nil,
			"env LLAMA_ARG_API_PREFIX (llama-server's --api-prefix) sets a path prefix for every route of the engine, /health included, where speclaunch asks at the root"},
		{"a key file in the environment", []string{"LLAMA_ARG_SSL_KEY_FILE=/k.pem"}, nil,
			"env LLAMA_ARG_SSL_KEY_FILE (llama-server's --ssl-key-file) sets HTTPS for the engine, where speclaunch speaks plain HTTP to it (its readiness check, width probe and /metrics scrape would never succeed: serve would wait out its ready timeout): unset it; speclaunch's proxy serves plain HTTP; for HTTPS, put a TLS-terminating proxy in front of speclaunch's port"},
		{"a cert file in engine.env", nil, map[string]string{"LLAMA_ARG_SSL_CERT_FILE": "/c.pem"},
			"profile profiles/demo.toml:9: engine.env sets LLAMA_ARG_SSL_CERT_FILE (llama-server's --ssl-cert-file), which sets HTTPS for the engine"},
		{"the prefix in engine.env", nil, map[string]string{"LLAMA_ARG_API_PREFIX": "/v2"},
			"profile profiles/demo.toml:9: engine.env sets LLAMA_ARG_API_PREFIX (llama-server's --api-prefix), which sets a path prefix"},
		{"set but empty", []string{"LLAMA_ARG_API_PREFIX=", "LLAMA_ARG_SSL_KEY_FILE="}, nil, ""},
		// engine.env's value is the engine's, over the operator's.
		{"the environment's, cleared by engine.env", []string{"LLAMA_ARG_API_PREFIX=/v2"}, map[string]string{"LLAMA_ARG_API_PREFIX": ""}, ""},
		{"another variable", []string{"LLAMA_ARG_CTX_SIZE=8192"}, map[string]string{"LLAMA_ARG_N_PARALLEL": "2"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := settings(key.LlamaCpp, "/models/draft.gguf")
			s.Env, s.EnvFrom = tc.env, "profile profiles/demo.toml:9"
			for _, caps := range []Caps{{Spelling: Spelling2026}, {Spelling: SpellingLegacy}, {}} {
				_, err := a.Command(s, res(4), key.Draft, append(slices.Clone(baseEnv), tc.environ...), caps)
				switch {
				case tc.want == "" && err != nil:
					t.Errorf("%+v: refused: %v", caps, err)
				case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
					t.Errorf("%+v: got %v, want %q", caps, err, tc.want)
				}
			}
		})
	}
}

// The minimum draft follows the tree the binary's --help showed: a legacy
// llama-server takes --draft-min N (and LLAMA_ARG_DRAFT_MIN) as its own,
// so it reaches the engine; a 2026 tree refuses to start on either, so
// both are passed on under the 2026 names (--spec-draft-n-min N,
// LLAMA_ARG_SPEC_DRAFT_N_MIN=N), said once in a note, as for a tree not
// inspected, whose command is the 2026 one. An operator's
// LLAMA_ARG_SPEC_DRAFT_N_MIN stands over the old variable, which is
// warned of. Before, a legacy tree was refused --draft-min and told to
// pass --spec-draft-n-min, which it refuses at start ("error: invalid
// argument"); then a 2026 tree was refused --draft-min where --draft-max
// was translated.
func TestDraftMinFollowsTheTree(t *testing.T) {
	a, err := For(key.LlamaCpp)
	if err != nil {
		t.Fatal(err)
	}
	legacy, new26, unknown := Caps{Spelling: SpellingLegacy}, Caps{Spelling: Spelling2026}, Caps{}
	const renamed = "llama.cpp 2026 renamed --draft-min to --spec-draft-n-min and refuses to start on the old name: passing it as --spec-draft-n-min"
	const envRenamed = "LLAMA_ARG_DRAFT_MIN=2 is kept out of llama-server's environment: llama.cpp 2026 renamed it LLAMA_ARG_SPEC_DRAFT_N_MIN (--spec-draft-n-min) and refuses to start while it is set (\"the argument has been removed\")"
	for _, tc := range []struct {
		name    string
		caps    Caps
		args    []string
		environ []string
		env     map[string]string // engine.env
		want    string            // the error, "" for none
		argv    string            // in the command, for none
		kept    bool              // LLAMA_ARG_DRAFT_MIN reaches the engine
		newEnv  string            // LLAMA_ARG_SPEC_DRAFT_N_MIN's value in the engine's environment, "" for none
		note    string            // the one note, "" for none
		warn    string            // in a warning, "" for none checked
	}{
		{name: "legacy --draft-min", caps: legacy, args: []string{"--draft-min", "2"}, argv: "--draft-max 3 --host 127.0.0.1 --port 8080 --metrics --draft-min 2"},
		{name: "legacy --draft-n-min=", caps: legacy, args: []string{"--draft-n-min=2"}, argv: "--metrics --draft-n-min=2"},
		{name: "legacy LLAMA_ARG_DRAFT_MIN", caps: legacy, environ: []string{"LLAMA_ARG_DRAFT_MIN=2"}, kept: true},
		{name: "legacy engine.env LLAMA_ARG_DRAFT_MIN", caps: legacy, env: map[string]string{"LLAMA_ARG_DRAFT_MIN": "2"}, kept: true},
		{name: "2026 --draft-min", caps: new26, args: []string{"--draft-min", "2"}, argv: "--metrics --spec-draft-n-min 2", note: renamed},
		{name: "2026 twice, one note", caps: new26, args: []string{"--draft-min=2", "-ngl", "99", "--draft-min", "1"}, argv: "--metrics --spec-draft-n-min=2 -ngl 99 --spec-draft-n-min 1", note: renamed},
		{name: "unknown --draft-n-min", caps: unknown, args: []string{"--draft-n-min", "2"}, argv: "--metrics --spec-draft-n-min 2",
			note: "llama.cpp 2026 renamed --draft-n-min to --spec-draft-n-min"},
		{name: "a value that looks like it", caps: new26, args: []string{"-r", "--draft-min"}, argv: "--metrics -r --draft-min"},
		{name: "2026 --spec-draft-n-min", caps: new26, args: []string{"--spec-draft-n-min", "2"}, argv: "--metrics --spec-draft-n-min 2"},
		{name: "2026 LLAMA_ARG_DRAFT_MIN", caps: new26, environ: []string{"LLAMA_ARG_DRAFT_MIN=2"}, newEnv: "2",
			note: envRenamed + "; passing it as LLAMA_ARG_SPEC_DRAFT_N_MIN=2"},
		{name: "unknown LLAMA_ARG_DRAFT_MIN", caps: unknown, environ: []string{"LLAMA_ARG_DRAFT_MIN=2"}, newEnv: "2",
			note: envRenamed + "; passing it as LLAMA_ARG_SPEC_DRAFT_N_MIN=2"},
		{name: "2026 variable and flag: the flag alone", caps: new26, environ: []string{"LLAMA_ARG_DRAFT_MIN=2"}, args: []string{"--draft-min", "3"},
			argv: "--metrics --spec-draft-n-min 3", note: renamed, warn: envRenamed},
		{name: "2026 variable and the new flag", caps: new26, environ: []string{"LLAMA_ARG_DRAFT_MIN=2"}, args: []string{"--spec-draft-n-min", "3"},
			argv: "--metrics --spec-draft-n-min 3", warn: envRenamed},
		{name: "2026 engine.env's new variable, empty on purpose, stands", caps: new26, environ: []string{"LLAMA_ARG_DRAFT_MIN=2"},
			env: map[string]string{"LLAMA_ARG_SPEC_DRAFT_N_MIN": ""}, warn: envRenamed},
		{name: "2026 both variables: the new one stands", caps: new26, environ: []string{"LLAMA_ARG_DRAFT_MIN=2", "LLAMA_ARG_SPEC_DRAFT_N_MIN=1"}, newEnv: "1", warn: envRenamed},
		{name: "2026 engine.env LLAMA_ARG_DRAFT_MIN", caps: new26, env: map[string]string{"LLAMA_ARG_DRAFT_MIN": "2"},
			want: "engine.env sets LLAMA_ARG_DRAFT_MIN=2, which the launcher owns for llama-server: set the minimum draft with LLAMA_ARG_SPEC_DRAFT_N_MIN (--spec-draft-n-min) on a 2026 tree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := settings(key.LlamaCpp, "/models/draft.gguf", tc.args...)
			s.Env, s.EnvFrom = tc.env, "profile profiles/demo.toml:9"
			l, err := a.Command(s, res(4), key.Draft, append(slices.Clone(baseEnv), tc.environ...), tc.caps)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(l.Argv, " "), tc.argv) {
				t.Errorf("argv %q, want %q in it", l.Argv, tc.argv)
			}
			kept, removed := slices.Contains(l.Env, "LLAMA_ARG_DRAFT_MIN=2"), slices.Contains(l.EnvRemoved, "LLAMA_ARG_DRAFT_MIN")
			if kept != tc.kept || removed != (tc.environ != nil && !tc.kept) {
				t.Errorf("LLAMA_ARG_DRAFT_MIN kept %v, removed %v (%v), want kept %v", kept, removed, l.EnvRemoved, tc.kept)
			}
			if got := envValue(l.Env, "LLAMA_ARG_SPEC_DRAFT_N_MIN"); got != tc.newEnv {
				t.Errorf("LLAMA_ARG_SPEC_DRAFT_N_MIN=%q in the engine's environment, want %q", got, tc.newEnv)
			}
			if (tc.note == "") != (len(l.Notes) == 0) || len(l.Notes) > 1 || tc.note != "" && !strings.Contains(l.Notes[0], tc.note) {
				t.Errorf("notes %q, want one holding %q", l.Notes, tc.note)
			}
			if tc.warn != "" && !slices.ContainsFunc(l.Warnings, func(w string) bool { return strings.Contains(w, tc.warn) }) {
				t.Errorf("warnings %q, want one holding %q", l.Warnings, tc.warn)
			}
		})
	}
}

// Embedded is the one rule for a drafter that is the target's own layers:
// llama.cpp's MTP and nothing else. vLLM's and SGLang's MTP name the
// target as their draft model; mlxcel's MTP drafter is a checkpoint.
func TestEmbedded(t *testing.T) {
	for _, e := range key.Engines {
		for _, k := range key.Drafters {
			want := e == key.LlamaCpp && k == key.MTP
			if got := Embedded(e, k); got != want {
				t.Errorf("Embedded(%s, %s) = %v, want %v", e, k, got, want)
			}
		}
	}
}

// A variable the launcher read as its own setting and applies itself (the
// width's, the kind's: Spec.EnvApplied) is kept out of the engine's
// environment with an info line, not a warning: a container that exports
// LLAMA_ARG_SPEC_DRAFT_N_MAX and LLAMA_ARG_SPEC_TYPE got two warnings at
// every start. One that lost to another setting, or whose value
// speculation off drops (not applied), is still warned of.
func TestAppliedEnvIsANote(t *testing.T) {
	environ := append(slices.Clone(baseEnv), "LLAMA_ARG_SPEC_DRAFT_N_MAX=3", "LLAMA_ARG_SPEC_TYPE=draft-simple", "LLAMA_ARG_DRAFT_BLOCK_SIZE=5")
	const nmax, kind, block = "LLAMA_ARG_SPEC_DRAFT_N_MAX=3 is kept", "LLAMA_ARG_SPEC_TYPE=draft-simple is kept", "LLAMA_ARG_DRAFT_BLOCK_SIZE=5 is kept"
	for _, tc := range []struct {
		name        string
		e           key.Engine
		applied     []string
		notes, warn []string
	}{
		{"both applied", key.LlamaCpp, []string{"LLAMA_ARG_SPEC_DRAFT_N_MAX", "LLAMA_ARG_SPEC_TYPE"}, []string{nmax, kind}, []string{block}},
		{"the width from another", key.LlamaCpp, []string{"LLAMA_ARG_DRAFT_BLOCK_SIZE", "LLAMA_ARG_SPEC_TYPE"}, []string{block, kind}, []string{nmax}},
		{"none applied", key.LlamaCpp, nil, nil, []string{nmax, block, kind}},
		{"mlxcel", key.MLXCEL, []string{"LLAMA_ARG_DRAFT_BLOCK_SIZE"}, []string{block}, []string{kind}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := For(tc.e)
			if err != nil {
				t.Fatal(err)
			}
			s := settings(tc.e, "/models/draft.gguf")
			s.EnvApplied = tc.applied
			k := key.Draft
			if tc.e == key.MLXCEL {
				k = key.DFlash
			}
			l, err := a.Command(s, res(4), k, environ, Caps{Spelling: Spelling2026})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				got  []string
				want []string
				what string
			}{{l.Notes, tc.notes, "notes"}, {l.Warnings, tc.warn, "warnings"}} {
				var ours []string
				for _, g := range c.got {
					if strings.Contains(g, " is kept out of ") {
						ours = append(ours, g)
					}
				}
				if len(ours) != len(c.want) {
					t.Errorf("%s %q, want %d: %q", c.what, ours, len(c.want), c.want)
					continue
				}
				for i, w := range c.want {
					if !strings.HasPrefix(ours[i], w) {
						t.Errorf("%s[%d] %q, want %q", c.what, i, ours[i], w)
					}
				}
			}
		})
	}
}
