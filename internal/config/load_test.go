package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/problems"
	"github.com/speclaunch/speclaunch/profiles"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func prof(t *testing.T, text string) *profiles.Profile {
	t.Helper()
	p, err := profiles.Parse("p.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const widthProfile = `
[engine]
name = "llama.cpp"
[draft]
model = "d.gguf"
block_size = 6
`

func TestWidthLayering(t *testing.T) {
	cases := []struct {
		name    string
		flags   map[string]string
		env     map[string]string
		profile string
		width   int
		src     string
		note    string // substring of WidthNote
		notice  string // substring of a notice
	}{
		{name: "nothing", width: 0, src: "default"},
		{name: "profile only", profile: widthProfile, width: 6, src: "profile p.toml:6"},
		{name: "MLXCEL_ over profile", profile: widthProfile, env: map[string]string{"MLXCEL_DRAFT_BLOCK_SIZE": "5"}, width: 5, src: "env MLXCEL_DRAFT_BLOCK_SIZE"},
		{name: "LLAMA_ARG_ over MLXCEL_", env: map[string]string{"MLXCEL_DRAFT_BLOCK_SIZE": "5", "LLAMA_ARG_DRAFT_BLOCK_SIZE": "7"}, width: 7, src: "env LLAMA_ARG_DRAFT_BLOCK_SIZE", notice: "MLXCEL_DRAFT_BLOCK_SIZE=\"5\" is set but LLAMA_ARG_DRAFT_BLOCK_SIZE"},
		{name: "agreeing names: no notice", env: map[string]string{"MLXCEL_DRAFT_BLOCK_SIZE": "7", "LLAMA_ARG_DRAFT_BLOCK_SIZE": "7"}, width: 7, src: "env LLAMA_ARG_DRAFT_BLOCK_SIZE"},
		{name: "empty LLAMA_ARG_ counts as unset", env: map[string]string{"LLAMA_ARG_DRAFT_BLOCK_SIZE": "", "MLXCEL_DRAFT_BLOCK_SIZE": "5"}, width: 5, src: "env MLXCEL_DRAFT_BLOCK_SIZE"},
		{name: "flag over env", flags: map[string]string{"draft-block-size": "3"}, env: map[string]string{"LLAMA_ARG_DRAFT_BLOCK_SIZE": "7"}, width: 3, src: "flag --draft-block-size"},
		{name: "engine-unit flag converts", flags: map[string]string{"spec-draft-n-max": "3"}, width: 4, src: "flag --spec-draft-n-max", note: "spec-draft-n-max=3 draft tokens = width 4"},
		{name: "llama env converts", profile: widthProfile, env: map[string]string{"LLAMA_ARG_SPEC_DRAFT_N_MAX": "4"}, width: 5, src: "env LLAMA_ARG_SPEC_DRAFT_N_MAX", note: "width 5"},
		{name: "legacy LLAMA_ARG_DRAFT_MAX converts", profile: widthProfile, env: map[string]string{"LLAMA_ARG_DRAFT_MAX": "7"}, width: 8, src: "env LLAMA_ARG_DRAFT_MAX"},
		{name: "canonical n-max beats legacy", profile: widthProfile, env: map[string]string{"LLAMA_ARG_DRAFT_MAX": "7", "LLAMA_ARG_SPEC_DRAFT_N_MAX": "2"}, width: 3, src: "env LLAMA_ARG_SPEC_DRAFT_N_MAX", notice: `LLAMA_ARG_DRAFT_MAX="7" (draft tokens) is set but LLAMA_ARG_SPEC_DRAFT_N_MAX="2" already provides the width (3)`},
		{name: "block-size env beats n-max env", profile: widthProfile, env: map[string]string{"LLAMA_ARG_SPEC_DRAFT_N_MAX": "2", "MLXCEL_DRAFT_BLOCK_SIZE": "9"}, width: 9, src: "env MLXCEL_DRAFT_BLOCK_SIZE", notice: `LLAMA_ARG_SPEC_DRAFT_N_MAX="2" (draft tokens) is set but MLXCEL_DRAFT_BLOCK_SIZE="9" already provides the width (9)`},
		{name: "n-max env ignored for mlxcel", env: map[string]string{"LLAMA_ARG_SPEC_DRAFT_N_MAX": "2", "MLXCEL_ENGINE": "mlxcel"}, width: 0, src: "default", notice: "does not set the mlxcel width"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Flags: c.flags, Getenv: env(c.env)}
			if c.profile != "" {
				in.Profile = prof(t, c.profile)
			}
			s, _, notices, err := Load(in)
			if err != nil {
				t.Fatal(err)
			}
			if s.Width.Value != c.width || s.Width.Src.String() != c.src {
				t.Errorf("width %d from %s, want %d from %s", s.Width.Value, s.Width.Src, c.width, c.src)
			}
			if c.note != "" && !strings.Contains(s.WidthNote, c.note) {
				t.Errorf("note %q, want %q", s.WidthNote, c.note)
			}
			found := c.notice == ""
			for _, n := range notices {
				if c.notice != "" && strings.Contains(n.Msg, c.notice) {
					found = true
				}
			}
			if !found {
				t.Errorf("notices %v, want one containing %q", notices, c.notice)
			}
			if c.notice == "" && len(notices) > 0 {
				t.Errorf("unexpected notices %v", notices)
			}
		})
	}
}

func TestBadWidths(t *testing.T) {
	cases := []struct {
		name  string
		flags map[string]string
		env   map[string]string
		prof  string
		want  []string
	}{
		{"zero flag", map[string]string{"draft-block-size": "0"}, nil, "", []string{"flag --draft-block-size", "below 2", "remove the draft model"}},
		{"one env", nil, map[string]string{"MLXCEL_DRAFT_BLOCK_SIZE": "1"}, "", []string{"env MLXCEL_DRAFT_BLOCK_SIZE", "below 2"}},
		{"negative", map[string]string{"draft-block-size": "-3"}, nil, "", []string{"is negative: a width is the verify block"}},
		{"non-numeric env", nil, map[string]string{"LLAMA_ARG_DRAFT_BLOCK_SIZE": "four"}, "", []string{"env LLAMA_ARG_DRAFT_BLOCK_SIZE", "not a whole number"}},
		{"absurd", map[string]string{"draft-block-size": "1000"}, nil, "", []string{"above 256"}},
		{"profile width 1", nil, nil, "[draft]\nmodel = \"d\"\nblock_size = 1\n", []string{"profile p.toml:3", "below 2"}},
		{"n-max zero", map[string]string{"spec-draft-n-max": "0"}, nil, "", []string{"no drafting"}},
		{"n-max above the widest", map[string]string{"spec-draft-n-max": "256"}, nil, "", []string{"flag --spec-draft-n-max", "draft token count 256 is above 255"}},
		{"n-max env at the int limit", map[string]string{"engine": "llama.cpp"}, map[string]string{"LLAMA_ARG_SPEC_DRAFT_N_MAX": "9223372036854775807"}, "", []string{"env LLAMA_ARG_SPEC_DRAFT_N_MAX", "draft token count 9223372036854775807 is above 255"}},
		{"legacy draft max env above the int limit", map[string]string{"engine": "llama.cpp"}, map[string]string{"LLAMA_ARG_DRAFT_MAX": "9223372036854775808"}, "", []string{"env LLAMA_ARG_DRAFT_MAX", `draft token count "9223372036854775808" is far out of range; want N from 1 to 255`}},
		{"width env above the int limit", nil, map[string]string{"MLXCEL_DRAFT_BLOCK_SIZE": "1000000000000000000000"}, "", []string{"env MLXCEL_DRAFT_BLOCK_SIZE", `draft width "1000000000000000000000" is far out of range; want a width from 2 to 256`}},
		{"both width flags", map[string]string{"spec-draft-n-max": "3", "draft-block-size": "4"}, nil, "", []string{"not both"}},
		{"bad port", map[string]string{"port": "http"}, nil, "", []string{"flag --port", "1 to 65535"}},
		{"bad port env", nil, map[string]string{"LLAMA_ARG_PORT": "70000"}, "", []string{"env LLAMA_ARG_PORT"}},
		{"host with a space", map[string]string{"host": "a b"}, nil, "", []string{"flag --host: bad host", `"a b" is not an IP address or a host name`}},
		{"host env with a port", nil, map[string]string{"LLAMA_ARG_HOST": "0.0.0.0:8080"}, "", []string{"env LLAMA_ARG_HOST: bad host", "has a port"}},
		{"host in the profile", nil, nil, "[server]\nhost = \"http://x\"\n", []string{"profile p.toml:2: server.host: bad host", "is a URL"}},
		{"bad engine", map[string]string{"engine": "tgi"}, nil, "", []string{"flag --engine", "unknown engine"}},
		{"bad kind for engine", map[string]string{"draft-kind": "eagle3"}, nil, "", []string{"not supported by engine mlxcel"}},
		{"internal-mtp", map[string]string{"draft-kind": "internal-mtp"}, nil, "", []string{"not user-selectable"}},
		{"bad capability", nil, map[string]string{"MLXCEL_CUDA_CAPABILITY": "nine"}, "", []string{"env MLXCEL_CUDA_CAPABILITY", "malformed"}},
		{"bad quant", map[string]string{"quant": "q3_x"}, nil, "", []string{"unknown quantization"}},
		{"bad bool", nil, map[string]string{"MLXCEL_STRICT_WIDTH": "maybe"}, "", []string{"env MLXCEL_STRICT_WIDTH", "bad boolean"}},
		{"bad duration", map[string]string{"ready-timeout": "soon"}, nil, "", []string{"bad duration"}},
		{"bad restart", nil, nil, "[serve]\nrestart = \"always\"\n", []string{"profile p.toml:2", "no or on-failure"}},
		{"bad log format", map[string]string{"log-format": "xml"}, nil, "", []string{"bad log format"}},
		{"a kilobyte value is quoted in part", nil, map[string]string{"LLAMA_ARG_PORT": strings.Repeat("8", 5000)}, "", []string{"env LLAMA_ARG_PORT", `bad port "` + strings.Repeat("8", 64) + `"... (5000 bytes): want`}},
		{"margin NaN env", nil, map[string]string{"MLXCEL_ADAPT_MARGIN": "NaN"}, "", []string{"env MLXCEL_ADAPT_MARGIN", "bad adapt.margin"}},
		{"margin nan profile", nil, nil, "[adapt]\nmargin = nan\n", []string{"profile p.toml:2: bad adapt.margin"}}, // the key once (keyed)
		{"trials above the bound", nil, map[string]string{"MLXCEL_ADAPT_TRIALS": "9"}, "", []string{"env MLXCEL_ADAPT_TRIALS", "from 0 to 8"}},
		{"trials negative in the profile", nil, nil, "[adapt]\ntrials = -1\n", []string{"profile p.toml:2: bad value", "from 0 to 8"}},
		{"window in the profile names its key", nil, nil, "[adapt]\nwindow = \"banana\"\n", []string{`profile p.toml:2: adapt.window: bad duration "banana"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Flags: c.flags, Getenv: env(c.env)}
			if c.prof != "" {
				in.Profile = prof(t, c.prof)
			}
			_, _, _, err := Load(in)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if n := len(err.Error()); n > 400 {
				t.Errorf("error of %d bytes: %.120q...", n, err)
			}
		})
	}
}

// MLXCEL_PORT=tcp://10.96.0.10:8080, what Kubernetes sets for a Service
// named mlxcel, is still bad input (exit 2), and its error says where it
// came from and the two fixes, each of which TestShadowedVariablesMustParse
// accepts; a port of any other form gets no such hint.
func TestPortServiceLinkHint(t *testing.T) {
	const hint = "; this looks like a Kubernetes service link (a Service named mlxcel makes Kubernetes set MLXCEL_PORT=tcp://IP:PORT in the pods beside it): set enableServiceLinks: false in the pod spec, or set the port with LLAMA_ARG_PORT or --port, which win over MLXCEL_PORT"
	for _, c := range []struct {
		name, value string
		env         string
		hint        bool
	}{
		{"a Service link", "tcp://10.96.0.10:8080", "MLXCEL_PORT", true},
		{"a Service link under llama.cpp's name", "tcp://10.96.0.11:80", "LLAMA_ARG_PORT", true},
		{"udp", "udp://10.96.0.10:53", "MLXCEL_PORT", true},
		{"a URL", "http://10.96.0.10:8080", "MLXCEL_PORT", false},
		{"a path after the port", "tcp://10.96.0.10:8080/x", "MLXCEL_PORT", false},
		{"a word", "http", "MLXCEL_PORT", false},
		{"out of range", "70000", "MLXCEL_PORT", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := Load(Input{Getenv: env(map[string]string{c.env: c.value})})
			want := "env " + c.env + ": bad port " + strconv.Quote(c.value) + ": want a number from 1 to 65535"
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error %v, want it to start %q", err, want)
			}
			if got := strings.Contains(err.Error(), hint); got != c.hint {
				t.Errorf("hint given %v, want %v: %v", got, c.hint, err)
			}
		})
	}
}

// A variable that a flag or a higher name overrides must parse all the
// same where the engine parses it beside the flag: llama-server parses
// LLAMA_ARG_PORT=abc beside --port and refuses to start. Any other keeps
// the info line: MLXCEL_PORT=tcp://… (what a Kubernetes Service named
// mlxcel injects) beside deploy/kubernetes's LLAMA_ARG_PORT, a
// MLXCEL_LOG_LEVEL beside --log-level, LLAMA_ARG_PORT under an engine
// that reads it only without the flag (mlxcel) or not at all. Before,
// every such variable was refused (exit 2: a crash loop on upgrade).
func TestShadowedVariablesMustParse(t *testing.T) {
	const refused = "the engine inherits it, and llama-server parses its LLAMA_ARG_* variables beside a flag too"
	for _, tc := range []struct {
		name  string
		flags map[string]string
		env   map[string]string
		want  []string // the error's parts; nil: loads, keeping the winner
		info  string   // loaded: the info line said of the shadowed variable
		port  int
	}{
		{"llama.cpp: a bad port beside --port", map[string]string{"engine": "llama.cpp", "port": "19101"}, map[string]string{"LLAMA_ARG_PORT": "abc"},
			[]string{`env LLAMA_ARG_PORT: bad port "abc": want a number from 1 to 65535; flag --port wins over it, but ` + refused, "fix it or unset it"}, "", 0},
		{"llama.cpp: a bad host beside --host", map[string]string{"engine": "llama.cpp", "host": "0.0.0.0"}, map[string]string{"LLAMA_ARG_HOST": "a:b:c"},
			[]string{"env LLAMA_ARG_HOST: bad host", "flag --host wins over it, but " + refused}, "", 0},
		{"llama.cpp: a Service link below LLAMA_ARG_PORT", map[string]string{"engine": "llama.cpp"}, map[string]string{"LLAMA_ARG_PORT": "8080", "MLXCEL_PORT": "tcp://10.96.0.10:8080"},
			nil, `MLXCEL_PORT="tcp://10.96.0.10:8080" differs from LLAMA_ARG_PORT="8080"; keeping LLAMA_ARG_PORT`, 8080},
		{"mlxcel: a Service link below LLAMA_ARG_PORT", nil, map[string]string{"LLAMA_ARG_PORT": "8080", "MLXCEL_PORT": "tcp://10.96.0.10:8080"},
			nil, `MLXCEL_PORT="tcp://10.96.0.10:8080" differs from LLAMA_ARG_PORT="8080"; keeping LLAMA_ARG_PORT`, 8080},
		{"mlxcel: a bad port beside --port", map[string]string{"port": "19101"}, map[string]string{"LLAMA_ARG_PORT": "abc"},
			nil, `LLAMA_ARG_PORT="abc" differs from flag --port="19101"; keeping flag --port`, 19101},
		{"vllm: a bad port beside --port", map[string]string{"engine": "vllm", "port": "19101"}, map[string]string{"LLAMA_ARG_PORT": "abc"},
			nil, `LLAMA_ARG_PORT="abc" differs from flag --port="19101"`, 19101},
		{"sglang: a bad port beside --port", map[string]string{"engine": "sglang", "port": "19101"}, map[string]string{"LLAMA_ARG_PORT": "abc"},
			nil, `LLAMA_ARG_PORT="abc" differs from flag --port="19101"`, 19101},
		{"sim: a bad port beside --port", map[string]string{"engine": "sim", "port": "19101"}, map[string]string{"LLAMA_ARG_PORT": "abc"},
			nil, `LLAMA_ARG_PORT="abc" differs from flag --port="19101"`, 19101},
		{"llama.cpp: a bad log level beside --log-level", map[string]string{"engine": "llama.cpp", "log-level": "debug"}, map[string]string{"MLXCEL_LOG_LEVEL": "trace"},
			nil, `MLXCEL_LOG_LEVEL="trace" differs from flag --log-level="debug"`, 8080},
		{"llama.cpp: a bad log format beside --log-format", map[string]string{"engine": "llama.cpp", "log-format": "json"}, map[string]string{"MLXCEL_LOG_FORMAT": "xml"},
			nil, `MLXCEL_LOG_FORMAT="xml" differs from flag --log-format="json"`, 8080},
		{"llama.cpp: a good port beside --port", map[string]string{"engine": "llama.cpp", "port": "19101"}, map[string]string{"LLAMA_ARG_PORT": "9000"},
			nil, `LLAMA_ARG_PORT="9000" differs from flag --port="19101"`, 19101},
		{"llama.cpp: an empty one beside --port", map[string]string{"engine": "llama.cpp", "port": "19101"}, map[string]string{"LLAMA_ARG_PORT": ""}, nil, "", 19101},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, notes, err := Load(Input{Flags: tc.flags, Getenv: env(tc.env)})
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == nil && s.Port.Value != tc.port:
				t.Errorf("port %d, want %d", s.Port.Value, tc.port)
			case tc.want != nil && err == nil:
				t.Fatalf("loaded (port %d from %s), want %q", s.Port.Value, s.Port.Src, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tc.info != "" && !slices.ContainsFunc(notes, func(n Notice) bool { return n.Level == "info" && strings.Contains(n.Msg, tc.info) }) {
				t.Errorf("notices %q lack the info line %q", notes, tc.info)
			}
		})
	}
}

// Only llama-server parses a variable beside the flag the launcher gives
// it, and only its LLAMA_ARG_* ones.
func TestParsedBeside(t *testing.T) {
	for _, tc := range []struct {
		engine key.Engine
		name   string
		want   bool
	}{
		{key.LlamaCpp, "LLAMA_ARG_PORT", true},
		{key.LlamaCpp, "LLAMA_ARG_HOST", true},
		{key.LlamaCpp, "MLXCEL_PORT", false},
		{key.LlamaCpp, "MLXCEL_LOG_LEVEL", false},
		{key.MLXCEL, "LLAMA_ARG_PORT", false},
		{key.MLXCEL, "MLXCEL_PORT", false},
		{key.VLLM, "LLAMA_ARG_PORT", false},
		{key.SGLang, "LLAMA_ARG_PORT", false},
		{key.Sim, "LLAMA_ARG_PORT", false},
	} {
		if got := parsedBeside(tc.engine, tc.name); got != tc.want {
			t.Errorf("parsedBeside(%s, %s) = %v, want %v", tc.engine, tc.name, got, tc.want)
		}
	}
}

func TestSettingsLayering(t *testing.T) {
	p := prof(t, `
[engine]
name = "llama.cpp"
args = ["-ngl", "99"]
[model]
path = "/m/target.gguf"
[draft]
model = "/m/draft.gguf"
[server]
host = "0.0.0.0"
port = 9000
`)
	s, _, notices, err := Load(Input{
		Flags:       map[string]string{"port": "9100"},
		Getenv:      env(map[string]string{"LLAMA_ARG_MODEL": "/env/t.gguf", "MLXCEL_MODEL": "/other.gguf", "LLAMA_ARG_MODEL_DRAFT": "/legacy.gguf", "LLAMA_ARG_SPEC_DRAFT_MODEL": "/canon.gguf", "MLXCEL_HOST": ""}),
		Profile:     p,
		Passthrough: []string{"--ctx-size", "4096"},
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(name, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	check("engine", string(s.Engine.Value), "llama.cpp")
	check("engine src", s.Engine.Src.String(), "profile p.toml:3")
	check("model", s.Model.Value, "/env/t.gguf")
	check("model src", s.Model.Src.String(), "env LLAMA_ARG_MODEL")
	check("draft", s.DraftModel.Value, "/canon.gguf")
	check("host", s.Host.Value, "0.0.0.0")
	check("host src", s.Host.Src.String(), "profile p.toml:10")
	if s.Port.Value != 9100 || s.Port.Src.String() != "flag --port" {
		t.Errorf("port %d from %s", s.Port.Value, s.Port.Src)
	}
	if strings.Join(s.EngineArgs.Value, " ") != "-ngl 99 --ctx-size 4096" {
		t.Errorf("engine args %v", s.EngineArgs.Value)
	}
	var sawModel, sawDraft bool
	for _, n := range notices {
		sawModel = sawModel || strings.Contains(n.Msg, "MLXCEL_MODEL")
		sawDraft = sawDraft || strings.Contains(n.Msg, "LLAMA_ARG_MODEL_DRAFT")
	}
	if !sawModel || !sawDraft {
		t.Errorf("want disagreement notices, got %v", notices)
	}
	if s.Width.Set() {
		t.Errorf("width should be unset")
	}
	if s.ReadyTimeout.Value != DefaultReadyTimeout || s.Restart.Value != RestartNo || !s.Probe.Value {
		t.Errorf("serve defaults wrong: %+v", s)
	}
}

func TestProfileRelativePaths(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.toml")
	os.WriteFile(path, []byte("[model]\npath = \"t.gguf\"\n[draft]\nmodel = \"/abs/d.gguf\"\n"), 0o644)
	s, p, _, err := Load(Input{Flags: map[string]string{"profile": path}, Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if p == nil || s.Model.Value != filepath.Join(dir, "t.gguf") || s.DraftModel.Value != "/abs/d.gguf" {
		t.Errorf("model %q draft %q", s.Model.Value, s.DraftModel.Value)
	}
	if s.Engine.Value != key.LlamaCpp || s.Engine.Set() {
		t.Errorf("engine for a GGUF target: %s from %s", s.Engine.Value, s.Engine.Src)
	}
}

func TestProfileByNameAndEnv(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "speclaunch", "profiles"), 0o755)
	os.WriteFile(filepath.Join(dir, "speclaunch", "profiles", "mine.toml"), []byte("[engine]\nname = \"sim\"\n"), 0o644)
	s, _, _, err := Load(Input{Getenv: env(map[string]string{"MLXCEL_PROFILE": "mine", "XDG_CONFIG_HOME": dir})})
	if err != nil {
		t.Fatal(err)
	}
	if s.Engine.Value != key.Sim {
		t.Errorf("engine %s", s.Engine.Value)
	}
	_, _, _, err = Load(Input{Getenv: env(map[string]string{"MLXCEL_PROFILE": "nope", "XDG_CONFIG_HOME": dir})})
	if err == nil || !strings.Contains(err.Error(), "found: mine") || !strings.Contains(err.Error(), "env MLXCEL_PROFILE") {
		t.Errorf("unknown profile error: %v", err)
	}
}

func TestPolicyFilesOrder(t *testing.T) {
	p := prof(t, "[policy]\nfiles = [\"a.toml\"]\n")
	s, _, _, err := Load(Input{Profile: p, Policies: []string{"c.toml"}, Getenv: env(map[string]string{"MLXCEL_POLICY": "b1.toml:b2.toml"})})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range s.Policies {
		got = append(got, filepath.Base(f.Value))
	}
	if strings.Join(got, ",") != "a.toml,b1.toml,b2.toml,c.toml" {
		t.Errorf("order %v", got)
	}
}

// LLAMA_ARG_SPEC_TYPE, llama-server's name for the speculative type, is a
// drafter kind below LLAMA_ARG_DRAFT_KIND and above MLXCEL_DRAFT_KIND; the
// types that name no drafter the launcher can size are refused.
func TestSpecTypeEnv(t *testing.T) {
	llama := `
[engine]
name = "llama.cpp"
[draft]
kind = "draft"
`
	cases := []struct {
		name    string
		profile string
		flags   map[string]string
		env     map[string]string
		kind    key.Drafter
		src     string
		err     string
		notice  string
	}{
		{name: "draft-simple is the plain draft model", profile: llama, env: map[string]string{"LLAMA_ARG_SPEC_TYPE": "draft-simple"}, kind: key.Draft, src: "env LLAMA_ARG_SPEC_TYPE"},
		{name: "draft-dflash over the profile", profile: llama, env: map[string]string{"LLAMA_ARG_SPEC_TYPE": "draft-dflash"}, kind: key.DFlash, src: "env LLAMA_ARG_SPEC_TYPE"},
		{name: "mlxcel takes draft-mtp", env: map[string]string{"LLAMA_ARG_SPEC_TYPE": "Draft-MTP"}, kind: key.MTP, src: "env LLAMA_ARG_SPEC_TYPE"},
		{name: "LLAMA_ARG_DRAFT_KIND wins", env: map[string]string{"LLAMA_ARG_DRAFT_KIND": "mtp", "LLAMA_ARG_SPEC_TYPE": "draft-dflash"}, kind: key.MTP, src: "env LLAMA_ARG_DRAFT_KIND", notice: `LLAMA_ARG_SPEC_TYPE="draft-dflash" differs`},
		{name: "over MLXCEL_DRAFT_KIND", env: map[string]string{"MLXCEL_DRAFT_KIND": "mtp", "LLAMA_ARG_SPEC_TYPE": "draft-dflash"}, kind: key.DFlash, src: "env LLAMA_ARG_SPEC_TYPE", notice: `MLXCEL_DRAFT_KIND="mtp" differs`},
		{name: "same kind in two spellings: no notice", env: map[string]string{"MLXCEL_DRAFT_KIND": "dflash", "LLAMA_ARG_SPEC_TYPE": "draft-dflash"}, kind: key.DFlash, src: "env LLAMA_ARG_SPEC_TYPE"},
		{name: "the flag wins", flags: map[string]string{"draft-kind": "mtp"}, env: map[string]string{"LLAMA_ARG_SPEC_TYPE": "draft-dflash"}, kind: key.MTP, src: "flag --draft-kind", notice: `LLAMA_ARG_SPEC_TYPE="draft-dflash" differs from flag --draft-kind`},
		{name: "none is refused", env: map[string]string{"LLAMA_ARG_SPEC_TYPE": "none"}, err: "env LLAMA_ARG_SPEC_TYPE: bad drafter kind: \"none\" would turn speculation off"},
		{name: "ngram is refused", profile: llama, env: map[string]string{"LLAMA_ARG_SPEC_TYPE": "ngram-mod"}, err: "n-gram speculation"},
		{name: "a list is refused", profile: llama, env: map[string]string{"LLAMA_ARG_SPEC_TYPE": "draft-simple,ngram-mod"}, err: "lists several speculative types"},
		{name: "a kind the engine lacks", env: map[string]string{"LLAMA_ARG_SPEC_TYPE": "draft-eagle3", "MLXCEL_ENGINE": "mlxcel"}, err: `drafter kind "eagle3" is not supported by engine mlxcel`},
		{name: "unknown", profile: llama, env: map[string]string{"LLAMA_ARG_SPEC_TYPE": "draft-bogus"}, err: `unknown drafter kind "draft-bogus"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Flags: c.flags, Getenv: env(c.env)}
			if c.profile != "" {
				in.Profile = prof(t, c.profile)
			}
			s, _, notices, err := Load(in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			k, err := ParseKind(s.DraftKind.Value)
			if err != nil || k != c.kind || s.DraftKind.Src.String() != c.src {
				t.Errorf("kind %q (%v) from %s, want %s from %s", s.DraftKind.Value, err, s.DraftKind.Src, c.kind, c.src)
			}
			var msgs []string
			for _, n := range notices {
				msgs = append(msgs, n.Msg)
			}
			all := strings.Join(msgs, "\n")
			if c.notice == "" && len(msgs) > 0 {
				t.Errorf("unexpected notices %q", all)
			}
			if c.notice != "" && !strings.Contains(all, c.notice) {
				t.Errorf("notices %q, want %q", all, c.notice)
			}
		})
	}
}

// TestChoiceSettings: each setting that takes one of a few words has its
// default, accepts its words in any case with their source, and refuses
// anything else naming the source and every word it takes.
func TestChoiceSettings(t *testing.T) {
	get := map[string]func(Settings) Field[string]{
		"log-format": func(s Settings) Field[string] { return s.LogFormat },
		"log-level":  func(s Settings) Field[string] { return s.LogLevel },
		"restart":    func(s Settings) Field[string] { return s.Restart },
	}
	for _, tc := range []struct {
		name, def, good, goodWant, bad, badMsg string
	}{
		{"log-format", "auto", "JSON", "json", "xml", `flag --log-format: bad log format "xml": want auto, text, color or json`},
		{"log-level", "info", "Warn", "warn", "trace", `flag --log-level: bad log level "trace": want debug, info, warn or error`},
		{"restart", RestartNo, "On-Failure", RestartOnFailure, "always", `flag --restart: bad restart policy "always": want no or on-failure`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _, err := Load(Input{})
			if err != nil || get[tc.name](s) != (Field[string]{Value: tc.def}) {
				t.Fatalf("default: %+v, %v; want %q", get[tc.name](s), err, tc.def)
			}
			s, _, _, err = Load(Input{Flags: map[string]string{tc.name: tc.good}})
			if f := get[tc.name](s); err != nil || f.Value != tc.goodWant || f.Src.String() != "flag --"+tc.name {
				t.Fatalf("%q: %+v, %v; want %q from the flag", tc.good, f, err, tc.goodWant)
			}
			_, _, _, err = Load(Input{Flags: map[string]string{tc.name: tc.bad}})
			if err == nil || err.Error() != tc.badMsg {
				t.Fatalf("%q: %v; want %q", tc.bad, err, tc.badMsg)
			}
		})
	}
}

// TestProxySettings: server.proxy, server.switch and the switch's bounds
// layer flag > env > profile > default like every other setting, and a bad
// value names its source.
func TestProxySettings(t *testing.T) {
	const profile = "[server]\nproxy = false\nswitch = \"drain\"\ndrain_timeout = \"10s\"\nhold_timeout = \"30s\"\nqueue_size = 8\n"
	get := func(s Settings, name string) (string, string) {
		switch name {
		case "proxy":
			return strconv.FormatBool(s.Proxy.Value), s.Proxy.Src.String()
		case "switch":
			return string(s.Switch.Value), s.Switch.Src.String()
		case "drain-timeout":
			return s.DrainTimeout.Value.String(), s.DrainTimeout.Src.String()
		case "hold-timeout":
			return s.HoldTimeout.Value.String(), s.HoldTimeout.Src.String()
		}
		return strconv.Itoa(s.QueueSize.Value), s.QueueSize.Src.String()
	}
	for _, c := range []struct {
		name, env                  string
		def, profVal, profLine     string
		envVal, flagVal, bad, want string
	}{
		{"proxy", "MLXCEL_PROXY", "true", "false", "profile p.toml:2", "false", "true", "maybe", "flag --proxy"},
		{"switch", "MLXCEL_SWITCH", "auto", "drain", "profile p.toml:3", "overlap", "auto", "sideways", "flag --switch"},
		{"drain-timeout", "MLXCEL_DRAIN_TIMEOUT", "2m0s", "10s", "profile p.toml:4", "5s", "1m0s", "soon", "flag --drain-timeout"},
		{"hold-timeout", "MLXCEL_HOLD_TIMEOUT", "2m0s", "30s", "profile p.toml:5", "5s", "1m0s", "soon", "flag --hold-timeout"},
		{"queue-size", "MLXCEL_QUEUE_SIZE", "1024", "8", "profile p.toml:6", "16", "2", "0", "flag --queue-size"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _, _, err := Load(Input{})
			if v, _ := get(s, c.name); err != nil || v != c.def {
				t.Errorf("default %s, %v; want %s", v, err, c.def)
			}
			s, _, _, err = Load(Input{Profile: prof(t, profile)})
			if v, src := get(s, c.name); err != nil || v != c.profVal || src != c.profLine {
				t.Errorf("profile: %s from %s, %v; want %s from %s", v, src, err, c.profVal, c.profLine)
			}
			e := env(map[string]string{c.env: c.envVal})
			s, _, _, err = Load(Input{Profile: prof(t, profile), Getenv: e})
			if v, src := get(s, c.name); err != nil || v != c.envVal || src != "env "+c.env {
				t.Errorf("env over profile: %s from %s, %v", v, src, err)
			}
			s, _, _, err = Load(Input{Profile: prof(t, profile), Getenv: e, Flags: map[string]string{c.name: c.flagVal}})
			if v, src := get(s, c.name); err != nil || v != c.flagVal || src != c.want {
				t.Errorf("flag over env: %s from %s, %v", v, src, err)
			}
			_, _, _, err = Load(Input{Getenv: env(map[string]string{c.env: c.bad})})
			if err == nil || !strings.Contains(err.Error(), "env "+c.env) {
				t.Errorf("bad %s=%q: %v; want an error naming the variable", c.env, c.bad, err)
			}
		})
	}
}

// Unset adapt.* settings carry the loop's defaults (so the effective
// settings show them), and an exploration width is checked against the
// default max_width too.
func TestAdaptDefaults(t *testing.T) {
	s, _, _, err := Load(Input{Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if s.AdaptMaxWidth.Value != 17 || s.AdaptMinCycles.Value != 256 || s.AdaptMargin.Value != 0.03 || s.AdaptWindow.Value.String() != "1m0s" || s.AdaptExplore.Value != 0 || s.AdaptTrials.Value != 2 {
		t.Errorf("defaults: max %d, min cycles %d, margin %v, window %v, explore %d, trials %d", s.AdaptMaxWidth.Value, s.AdaptMinCycles.Value, s.AdaptMargin.Value, s.AdaptWindow.Value, s.AdaptExplore.Value, s.AdaptTrials.Value)
	}
	for _, c := range []struct {
		env  map[string]string
		want string // "" = accepted
	}{
		{map[string]string{"MLXCEL_ADAPT_EXPLORE_WIDTH": "17"}, ""},
		{map[string]string{"MLXCEL_ADAPT_EXPLORE_WIDTH": "18"}, "env MLXCEL_ADAPT_EXPLORE_WIDTH: exploration width 18 is wider than adapt.max_width 17"},
		{map[string]string{"MLXCEL_ADAPT_EXPLORE_WIDTH": "18", "MLXCEL_ADAPT_MAX_WIDTH": "18"}, ""},
	} {
		_, _, _, err := Load(Input{Getenv: env(c.env)})
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want %q", c.env, err, c.want)
		}
	}
}

// Every variable Load reads is documented (five MLXCEL_ADAPT_* variables
// were once missing from the page).
func TestEveryEnvVarDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "environment-variables.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name, envs := range Envs {
		for _, e := range envs {
			if !strings.Contains(string(doc), "`"+e+"`") {
				t.Errorf("docs/environment-variables.md does not document `%s` (setting %s)", e, name)
			}
		}
	}
}

// TestEngineArgsSource: engine arguments from the command line are named as
// such, typed llama-server flags included, not as the "--" separator alone,
// and as the resolved engine's own: a vLLM argument's error was headed
// "llama-server flags as typed".
func TestEngineArgsSource(t *testing.T) {
	for _, c := range []struct {
		engine string // "" to infer it
		want   string
	}{
		{"", "engine arguments on the command line (llama-server flags as typed, and after --)"},
		{"llama.cpp", "engine arguments on the command line (llama-server flags as typed, and after --)"},
		{"sim", "engine arguments on the command line (llama-server flags as typed, and after --)"},
		// The parenthesis names llama-server only where the engine is one
		// that takes its flags: vLLM's said "llama-server flags as typed".
		{"vllm", "engine arguments for vLLM on the command line (after --, and any engine flag typed before it)"},
		{"sglang", "engine arguments for SGLang on the command line (after --, and any engine flag typed before it)"},
	} {
		flags := map[string]string{}
		if c.engine != "" {
			flags["engine"] = c.engine
		}
		s, _, _, err := Load(Input{Flags: flags, Passthrough: []string{"-ngl", "99"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.EngineArgs.Src.String(); got != c.want {
			t.Errorf("engine %q: source %q, want %q", c.engine, got, c.want)
		}
	}
}

// A switch's variable that says the flag's value in another spelling
// (MLXCEL_ADAPT=0 beside --no-adapt, which sets "false") is no difference
// to tell: the info line said `MLXCEL_ADAPT="0" differs from flag
// --adapt="false"`. A value that differs is still said.
func TestShadowedSwitchSameValue(t *testing.T) {
	for _, tc := range []struct {
		env  string
		says bool
	}{{"0", false}, {"false", false}, {"1", true}, {"true", true}} {
		_, _, notes, err := Load(Input{Flags: map[string]string{"adapt": "false"}, Getenv: env(map[string]string{"MLXCEL_ADAPT": tc.env})})
		if err != nil {
			t.Fatalf("MLXCEL_ADAPT=%s: %v", tc.env, err)
		}
		said := slices.ContainsFunc(notes, func(n Notice) bool { return strings.Contains(n.Msg, "MLXCEL_ADAPT=") })
		if said != tc.says {
			t.Errorf("MLXCEL_ADAPT=%s beside --adapt=false: said %v, want %v (%q)", tc.env, said, tc.says, notes)
		}
	}
}

// Load says every bad value in one error, numbered, each found by
// errors.As; a check against a bad value is not run (its error would be
// one the bad value caused), and a bad engine ends the list.
func TestLoadSaysEveryBadValue(t *testing.T) {
	cases := []struct {
		name, profile string
		want          []string // the problems, in order
	}{
		{"three bad values", "[draft]\nblock_size = -3\n[server]\nport = 99999\n[serve]\nstop_timeout = \"banana\"\n",
			[]string{"(1) profile p.toml:2: draft.block_size: draft width -3 is negative", "(2) profile p.toml:4: server.port: bad port", "(3) profile p.toml:6: serve.stop_timeout: bad duration"}},
		{"one bad value is said alone", "[server]\nport = 99999\n", []string{"profile p.toml:2: server.port: bad port \"99999\""}},
		{"a bad engine stops it", "[engine]\nname = \"simx\"\n[server]\nport = 99999\n", []string{"profile p.toml:2: engine.name: bad engine"}},
		{"a good schedule beside a bad width adds no error", "[draft]\nblock_size = 1\nschedule = \"1+:5\"\n", []string{"profile p.toml:2: draft.block_size: draft width 1 is below 2"}},
		{"a bad schedule beside a bad width is said", "[draft]\nblock_size = 1\nschedule = \"1:5\"\n", []string{"(1) profile p.toml:2: draft.block_size: draft width 1 is below 2", "(2) profile p.toml:3: bad draft.schedule"}},
		// The default 17 stands for the bad max width: 20 would be over it.
		{"an exploration width is not checked against a bad max width", "[adapt]\nmax_width = 1\nexplore_width = 20\n", []string{"profile p.toml:2: adapt.max_width: bad value \"1\""}},
		{"a bad exploration width beside a bad max width is said", "[adapt]\nmax_width = 1\nexplore_width = 300\n", []string{"(1) profile p.toml:2: adapt.max_width: bad value \"1\"", "(2) profile p.toml:3: adapt.explore_width: bad value \"300\""}},
		{"a check's error names its key", "[adapt]\nmax_width = 4\nexplore_width = 9\n", []string{"profile p.toml:3: adapt.explore_width: exploration width 9 is wider than adapt.max_width 4"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := Load(Input{Profile: prof(t, c.profile), Getenv: env(nil)})
			errs := []error{err}
			if l, ok := err.(problems.List); ok {
				errs = l.Errs
			}
			for _, e := range errs {
				var ce *Error
				if e == nil || !errors.As(e, &ce) || !errors.As(err, &ce) {
					t.Fatalf("err = %v, want config errors, each found by errors.As", err)
				}
			}
			msg := err.Error()
			if len(c.want) > 1 && !strings.HasPrefix(msg, fmt.Sprintf("%d problems in the settings: ", len(c.want))) {
				t.Errorf("err = %q, want %d problems", msg, len(c.want))
			}
			if n := strings.Count(msg, "; ("); len(c.want) > 1 && n != len(c.want)-1 || len(c.want) == 1 && strings.Contains(msg, "problems") {
				t.Errorf("err = %q, want %d problems", msg, len(c.want))
			}
			at := 0
			for _, w := range c.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("err = %q, want %q after byte %d", msg, w, at)
				}
				at += i + len(w)
			}
		})
	}
}

// Every name a row reads is a row above it: a misspelt one, or one below,
// would leave its check run against a bad value.
func TestRowReadsNameRowsAbove(t *testing.T) {
	above := map[string]bool{}
	for _, r := range Rows {
		for _, n := range r.reads {
			if !above[n] {
				t.Errorf("row %s reads %q, which is no row above it", r.Name, n)
			}
		}
		above[r.Name] = true
	}
}

// adapt.explore_width takes the 0 it shows as its default ("0 (unset)"),
// as well as a width; 1 is neither.
func TestExploreWidthTakesItsDefault(t *testing.T) {
	for v, want := range map[string]string{"0": "", "5": "", "1": `want a whole number from 2 to 256, or 0 (unset)`} {
		s, _, _, err := Load(Input{Profile: prof(t, "[adapt]\nexplore_width = "+v+"\n"), Getenv: env(nil)})
		if want == "" && (err != nil || strconv.Itoa(s.AdaptExplore.Value) != v) || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("explore_width = %s: %v (value %d), want %q", v, err, s.AdaptExplore.Value, want)
		}
	}
}
