package cli

import (
	"fmt"
	"github.com/speclaunch/speclaunch/internal/checkpoint"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A profile that names no model (a container gives it in LLAMA_ARG_MODEL)
// is checked for engine arguments and variables the launcher owns all the
// same: profile validate and resolve refuse it, naming its file:line, as
// serve would with any model. Before, validate said "ok" and resolve
// refused it only once a model was given.
func TestValidateChecksEngineArgsWithoutAModel(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, tc := range []struct {
		name, body string
		want       string // "" for ok
	}{
		{"llama.cpp --port", "[engine]\nname = \"llama.cpp\"\nargs = [\"--port\", \"9000\"]\n", ":3: engine argument \"--port\" sets the listen port"},
		{"sim --draft-block-size", "[engine]\nname = \"sim\"\nargs = [\"--draft-block-size=3\"]\n", ":3: engine argument \"--draft-block-size=3\" sets the draft width"},
		{"mlxcel --draft-block-size", "[engine]\nname = \"mlxcel\"\nargs = [\"--draft-block-size=3\"]\n", ":3: engine argument \"--draft-block-size=3\" sets the draft width"},
		{"llama.cpp LLAMA_ARG_PORT", "[engine]\nname = \"llama.cpp\"\n[engine.env]\nLLAMA_ARG_PORT = \"9000\"\n", ":4: engine.env sets LLAMA_ARG_PORT=9000, which the launcher owns"},
		{"vllm num_speculative_tokens", "[engine]\nname = \"vllm\"\nargs = [\"--speculative-config\", '{\"num_speculative_tokens\": 3}']\n", ":3: engine argument --speculative-config's key \"num_speculative_tokens\" sets the draft width"},
		{"sglang --port", "[engine]\nname = \"sglang\"\nargs = [\"--port\", \"1\"]\n", ":3: engine argument \"--port\""},
		{"llama.cpp --api-prefix", "[engine]\nname = \"llama.cpp\"\nargs = [\"-ngl\", \"99\", \"--api-prefix\", \"/v2\"]\n", ":3: engine argument \"--api-prefix\" sets a path prefix for every route of the engine"},
		{"llama.cpp --ssl-cert-file", "[engine]\nname = \"llama.cpp\"\nargs = [\"--ssl-cert-file=/c.pem\"]\n", ":3: engine argument \"--ssl-cert-file=/c.pem\" sets HTTPS for the engine"},
		{"llama.cpp LLAMA_ARG_SSL_KEY_FILE", "[engine]\nname = \"llama.cpp\"\n[engine.env]\nLLAMA_ARG_SSL_KEY_FILE = \"/k.pem\"\n", ":4: engine.env sets LLAMA_ARG_SSL_KEY_FILE (llama-server's --ssl-key-file), which sets HTTPS for the engine"},
		{"llama.cpp, its own flags", "[engine]\nname = \"llama.cpp\"\nargs = [\"--jinja\"]\n[engine.env]\nLLAMA_ARG_CTX_SIZE = \"8192\"\n", ""},
	} {
		prof := filepath.Join(t.TempDir(), "v.toml")
		writeFile(t, prof, tc.body)
		for _, cmd := range []string{"profile validate", "resolve"} {
			code, o, e := runCLI(t, append(strings.Fields(cmd), "--profile", prof)...)
			want := fmt.Sprintf("error: profile %s%s", prof, tc.want)
			switch {
			case tc.want == "" && code != 0:
				t.Errorf("%s, %s: exit %d, want 0:\n%s%s", tc.name, cmd, code, o, e)
			case tc.want != "" && (code != 2 || !strings.Contains(unwrap(e), want)):
				t.Errorf("%s, %s: exit %d, want 2 and %q:\n%s%s", tc.name, cmd, code, want, o, e)
			}
		}
	}
}

// An error or warning about one variable of engine.env, or one key of a
// profile's [[policy.entry]], names that key's own line: under an
// [engine.env] header, as a dotted key of [engine] or of the top. Before,
// it named the header (or engine.name's line, for a dotted key), and an
// entry's error said to fix "the policy file" although it is the
// profile's.
func TestProfileErrorsNameTheKeysLine(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, tc := range []struct {
		name, body string
		cmd        string
		code       int
		want       string // in stderr, unwrapped
		hint       string // "" for none checked
	}{
		{"under [engine.env]", "[engine]\nname = \"llama.cpp\"\n[engine.env]\n# a\n# b\nLLAMA_ARG_CTX_SIZE = \"8192\"\n# c\nLLAMA_ARG_DRAFT_MAX = \"5\"\n",
			"profile validate", 2, ":8: engine.env sets LLAMA_ARG_DRAFT_MAX=5, which the launcher owns", ""},
		{"a dotted key at the top", "engine.name = \"llama.cpp\"\n# x\n# y\n# z\nengine.env.LLAMA_ARG_PORT = \"5\"\n",
			"profile validate", 2, ":5: engine.env sets LLAMA_ARG_PORT=5", ""},
		{"a dotted key in [engine]", "[engine]\nname = \"llama.cpp\"\nenv.LLAMA_ARG_CTX_SIZE = \"1\"\n\nenv.LLAMA_ARG_PORT = \"5\"\n",
			"profile validate", 2, ":5: engine.env sets LLAMA_ARG_PORT=5", ""},
		{"a key's typo", "[engine]\nname = \"sim\"\n[model]\npath = \"demo-target\"\n[engine.env]\nLLAMA_ARG_CTX_SIZE = \"1\"\n\nLLAMA_API_KYE = \"sk-12345678\"\n",
			"serve --dry-run", 0, ":8: engine.env sets LLAMA_API_KYE, but sim reads no API key from it", ""},
		{"a profile's policy entry", "[engine]\nname = \"llama.cpp\"\n\n[[policy.entry]]\nid = \"x1\"\n# c\nengine = \"sim\"\ndrafter = \"dflash\"\ncapability = \"12.1\"\nquant = \"affine\"\nwidth = 4\n",
			"profile validate", 2, ":7: a measured entry cannot name engine \"sim\"", "hint: fix the profile, then check it with `speclaunch profile validate --profile "},
		{"a bucket of a profile's policy entry's schedule", "[engine]\nname = \"llama.cpp\"\n\n[[policy.entry]]\nid = \"x1\"\nengine = \"mlxcel\"\ndrafter = \"dflash\"\ncapability = \"12.1\"\nquant = \"affine\"\nschedule = [\n  [1, 1, 6],\n  [2, 0, 0],\n]\nrecord = \"docs/benchmark_results/x.md\"\n",
			"profile validate", 2, ":12: schedule: bucket 2 [2, 0, 0] has width 0", ""},
	} {
		prof := filepath.Join(t.TempDir(), "p.toml")
		writeFile(t, prof, tc.body)
		code, o, e := runCLI(t, append(strings.Fields(tc.cmd), "--profile", prof)...)
		if got := unwrap(o + e); code != tc.code || !strings.Contains(got, prof+tc.want) || !strings.Contains(got, tc.hint) {
			t.Errorf("%s: exit %d, want %d and %q (hint %q):\n%s%s", tc.name, code, tc.code, prof+tc.want, tc.hint, o, e)
		}
	}
}

// profile validate refuses what serve refuses on this host before it
// starts, the port aside: an engine binary or a model file that is not
// there (exit 2, naming where it was set); and it prints the warnings
// serve gives (a misspelt key variable, a flag llama-server does not
// list). Before, each of these said "ok", and the warnings went unsaid.
func TestValidateChecksThisHost(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	bin := filepath.Join(dir, "llama-server")
	writeFile(t, bin, "#!/bin/sh\nexit 0\n")
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	target, draft := filepath.Join(dir, "t.gguf"), filepath.Join(dir, "d.gguf")
	writeFile(t, target, string(checkpoint.HeaderOnlyGGUF())) // llama-server's model checks read the fixed header
	writeFile(t, draft, string(checkpoint.HeaderOnlyGGUF()))
	llama := fmt.Sprintf("[engine]\nname = \"llama.cpp\"\nbinary = %q\n", bin)
	for _, tc := range []struct {
		name, body string
		code       int
		want       string // in stderr, unwrapped; PROF is the profile's path
	}{
		{"all here", llama + fmt.Sprintf("[model]\npath = %q\n[draft]\nmodel = %q\n", target, draft), 0, ""},
		{"a missing target", llama + "[model]\npath = \"/nonexistent/t.gguf\"\n", 2, "target model /nonexistent/t.gguf (profile PROF:5): no such file: check the path"},
		{"a missing drafter", llama + fmt.Sprintf("[model]\npath = %q\n[draft]\nmodel = \"/nonexistent/d.gguf\"\n", target), 2, "draft model /nonexistent/d.gguf (profile PROF:7)"},
		{"a missing binary", "[engine]\nname = \"llama.cpp\"\nbinary = \"/nonexistent/llama-server\"\n", 2, "engine binary \"/nonexistent/llama-server\" not found (profile PROF:3): no executable file at that path"},
		// every problem in one run, not one at a time
		{"a missing binary and target", "[engine]\nname = \"llama.cpp\"\nbinary = \"/nonexistent/llama-server\"\n[model]\npath = \"/nonexistent/t.gguf\"\n", 2, "2 problems on this host: (1) engine binary \"/nonexistent/llama-server\" not found (profile PROF:3)"},
		{"a missing binary and target, the second", "[engine]\nname = \"llama.cpp\"\nbinary = \"/nonexistent/llama-server\"\n[model]\npath = \"/nonexistent/t.gguf\"\n", 2, "; (2) target model /nonexistent/t.gguf (profile PROF:5): no such file: check the path"},
		{"no target, the default binary unchecked", "[engine]\nname = \"llama.cpp\"\nargs = [\"--jinja\"]\n", 0, ""},
		{"a misspelt key variable", "[engine]\nname = \"sim\"\n[model]\npath = \"t\"\n[engine.env]\nLLAMA_API_KYE = \"sk-1234567890\"\n", 0,
			"warn: profile PROF:6: engine.env sets LLAMA_API_KYE, but sim reads no API key from it"},
		{"an unknown engine flag", llama + fmt.Sprintf("args = [\"--xyzzy\", \"--xyzzy\"]\n[model]\npath = %q\n", target), 0,
			"warn: engine argument --xyzzy (given 2 times) is not a flag llama-server lists"},
	} {
		prof := filepath.Join(t.TempDir(), "p.toml")
		writeFile(t, prof, tc.body)
		code, o, e := runCLI(t, "profile", "validate", "--profile", prof)
		want := strings.ReplaceAll(tc.want, "PROF", prof)
		ok := code == 0 && strings.Contains(o, prof+": ok")
		if code != tc.code || (tc.code == 0) != ok || !strings.Contains(unwrap(e), want) || strings.Contains(o+e, "1234567890") {
			t.Errorf("%s: exit %d, want %d and %q:\n%s%s", tc.name, code, tc.code, want, o, e)
		}
	}
}

// --offline checks a profile written for another machine: its missing
// binary and model files are not looked for, nor warned of (it said
// "cannot read target" after "model files ... not checked"), and it still
// fails on what is wrong in the file itself.
func TestValidateOffline(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{"another machine's files", "[engine]\nname = \"llama.cpp\"\nbinary = \"/nonexistent/llama-server\"\n[model]\npath = \"/nonexistent/t.gguf\"\n", 0},
		{"another machine's pair", "[engine]\nname = \"llama.cpp\"\n[model]\npath = \"/nonexistent/t.gguf\"\n[draft]\nmodel = \"/nonexistent/d\"\n", 0},
		{"a key the launcher owns", "[engine]\nname = \"llama.cpp\"\nargs = [\"--port\", \"9\"]\n[model]\npath = \"/nonexistent/t.gguf\"\n", 2},
		{"another machine's key file", "[engine]\nname = \"llama.cpp\"\nargs = [\"--api-key-file\", \"/run/secrets/api-key\"]\n[model]\npath = \"/nonexistent/t.gguf\"\n", 0},
		{"an empty key flag", "[engine]\nname = \"llama.cpp\"\nargs = [\"--api-key=\"]\n[model]\npath = \"/nonexistent/t.gguf\"\n", 2},
	} {
		prof := filepath.Join(t.TempDir(), "p.toml")
		writeFile(t, prof, tc.body)
		code, o, e := runCLI(t, "profile", "validate", "--offline", "--profile", prof)
		if code != tc.code || tc.code == 0 && !strings.Contains(o, prof+": ok (offline") || strings.Contains(e, "/nonexistent/t.gguf") || strings.Contains(e, "/nonexistent/d") {
			t.Errorf("%s: exit %d, want %d:\n%s%s", tc.name, code, tc.code, o, e)
		}
	}
}

// A [bench] table bench would refuse is a warning of profile validate, as
// of profile show, naming its file:line (benchWarning): serve does not read
// it, and validate checks what serve would refuse. Before, validate exited
// 2 on a profile serve accepted.
func TestValidateWarnsOfBenchOptions(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	const sim = "[engine]\nname = \"sim\"\n[model]\npath = \"demo-target\"\n[draft]\nmodel = \"demo-drafter\"\n"
	for _, tc := range []struct {
		name, body string
		code       int    // validate's
		want       string // the warning's message after "warn: ", PROF the profile's path; "" for none
	}{
		{"levels not ascending", sim + "[bench]\nconcurrency = [4, 1]\n", 0, `bench would refuse its options (serve does not read them): profile PROF:8: bench.concurrency: "4,1": level 1 comes after 4, not ascending`},
		{"a width below 2", sim + "[bench]\nwidths = [1, 2]\n", 0, "bench would refuse its options (serve does not read them): profile PROF:8: bench.widths: width 1 is below 2: classic decoding (width 1) is always measured as an arm of its own"},
		{"a prompt file not there", sim + "[bench]\nprompt_file = \"nope.txt\"\n", 0, "bench would refuse its options (serve does not read them): profile PROF:8: cannot use the prompt file"},
		{"a good table", sim + "[bench]\nconcurrency = [1, 4]\n", 0, ""},
		{"and what serve refuses", "[engine]\nname = \"sim\"\nargs = [\"--port\", \"1\"]\n[bench]\nconcurrency = [4, 1]\n", 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prof := filepath.Join(t.TempDir(), "p.toml")
			writeFile(t, prof, tc.body)
			want := strings.ReplaceAll(tc.want, "PROF", prof)
			code, o, e := runCLI(t, "profile", "validate", "--profile", prof)
			ok := code == 0 && strings.Contains(o, prof+": ok")
			switch {
			case code != tc.code || (tc.code == 0) != ok:
				t.Errorf("validate: exit %d, want %d:\n%s%s", code, tc.code, o, e)
			case want != "" && !strings.Contains(unwrap(e), "warn: "+want):
				t.Errorf("validate: no warning %q:\n%s%s", want, o, e)
			case want == "" && strings.Contains(e, "bench would refuse"):
				t.Errorf("validate: a warning of a good [bench] table:\n%s%s", o, e)
			}
			if tc.code != 0 {
				return
			}
			// profile show says it the same way, from the same rule.
			code, o, e = runCLI(t, "profile", "show", "--profile", prof)
			if code != 0 || want != "" && !strings.Contains(unwrap(o), "warn: "+want) {
				t.Errorf("show: exit %d, want 0 and %q:\n%s%s", code, want, o, e)
			}
		})
	}
}

// profile validate checks a [bench] table as profile show does
// (loadBench) and writes nothing: where bench's record goes is bench's to
// check when it runs. It checked the default record's stem in the
// current directory, creating and deleting a file there, and in a
// directory that takes no file warned that bench would refuse its
// options, with no [bench] table at all. The directory's time would move
// with a file made and removed in it (a read-only mode does not stop
// root).
func TestValidateWritesNothingWhereItRuns(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	prof := filepath.Join(t.TempDir(), "p.toml")
	writeFile(t, prof, "[engine]\nname = \"sim\"\n[model]\npath = \"demo-target\"\nquant = \"affine\"\n[draft]\nmodel = \"demo-drafter\"\n")
	then := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, tc := range []struct {
		name string
		cwd  func(t *testing.T, dir string) // makes dir what validate runs in
	}{
		{"a read-only directory", func(t *testing.T, dir string) {
			if err := os.Chmod(dir, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o755) })
		}},
		{"a directory removed under it", func(t *testing.T, dir string) {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			if err := os.Chtimes(dir, then, then); err != nil {
				t.Fatal(err)
			}
			tc.cwd(t, dir)
			code, o, e := runCLI(t, "profile", "validate", "--profile", prof)
			if code != 0 || !strings.Contains(o, prof+": ok") || strings.Contains(e, "warn") {
				t.Errorf("exit %d, want 0, ok and no warning:\n%s%s", code, o, e)
			}
			if fi, err := os.Stat(dir); err == nil && !fi.ModTime().Equal(then) {
				t.Errorf("validate wrote in %s (modified %v)", dir, fi.ModTime())
			}
		})
	}
}

// llama-server's --api-prefix, --ssl-key-file and --ssl-cert-file move
// /health under a prefix or to HTTPS, where speclaunch's readiness check,
// width probe and /metrics scrape never reach it: typed, after --, or as
// the variables llama-server reads them from, each is refused with exit 2
// and the fix (a proxy in front of speclaunch's port) by the dry run and
// profile validate alike. Before, they passed, and serve waited out its
// ready timeout.
func TestPrefixAndTLSRefused(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	prof := filepath.Join(t.TempDir(), "p.toml")
	writeFile(t, prof, "[engine]\nname = \"llama.cpp\"\n")
	launch := []string{"--profile", prof, "-m", "x.gguf", "-md", "d.gguf", "--capability", "9.0", "--quant", "q4_0"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"--api-prefix typed", nil, []string{"--api-prefix", "/v2"}, `error: engine arguments on the command line (llama-server flags as typed, and after --): engine argument "--api-prefix" sets a path prefix for every route of the engine, /health included`},
		{"--ssl-key-file after --", nil, []string{"--", "--ssl-key-file", "/k.pem"}, `"--ssl-key-file" sets HTTPS for the engine`},
		{"--ssl-cert-file= typed", nil, []string{"--ssl-cert-file=/c.pem"}, "put a TLS-terminating proxy in front of speclaunch's port"},
		{"LLAMA_ARG_API_PREFIX", map[string]string{"LLAMA_ARG_API_PREFIX": "/v2"}, nil, "env LLAMA_ARG_API_PREFIX (llama-server's --api-prefix) sets a path prefix"},
		{"LLAMA_ARG_SSL_CERT_FILE", map[string]string{"LLAMA_ARG_SSL_CERT_FILE": "/c.pem"}, nil, "env LLAMA_ARG_SSL_CERT_FILE (llama-server's --ssl-cert-file) sets HTTPS"},
	} {
		for _, cmd := range []string{"serve --dry-run", "profile validate"} {
			args := append(append(strings.Fields(cmd), launch...), tc.args...)
			code, o, e := withEnv(tc.env).cli(args...)
			if code != 2 || !strings.Contains(unwrap(e), tc.want) {
				t.Errorf("%s, %s: exit %d, want 2 and %q:\n%s%s", tc.name, cmd, code, tc.want, o, e)
			}
		}
	}
}
