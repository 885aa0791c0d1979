package cli

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/policy"
)

// A dry run behind the proxy prints the engine's command as serve will
// start it: the plan's one command with the loopback listen address
// (engine.Launch.ArgvAt), the public address nowhere in it; proxy off, the
// command as built.
func TestDryRunCommandListensWhereServeStartsIt(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, c := range []struct {
		proxy, want string
	}{
		{"--proxy=true", "--host 127.0.0.1 --port PORT"},
		{"--proxy=false", "--host 0.0.0.0 --port 18999"},
	} {
		code, o, e := runCLI(t, "serve", "--dry-run", "--profile", "../../profiles/demo.toml", "--host", "0.0.0.0", "--port", "18999", c.proxy)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", c.proxy, code, o, e)
		}
		_, cmd, _ := strings.Cut(o, "command:\n")
		cmd, _, _ = strings.Cut(cmd, "\n")
		if !strings.Contains(cmd, c.want) || strings.Count(cmd, "--port") != 1 {
			t.Errorf("%s: the command line is %q, want %q in it", c.proxy, cmd, c.want)
		}
		// resolve --json gives the same command as argv.
		code, o, e = runCLI(t, "resolve", "--json", "--profile", "../../profiles/demo.toml", "--host", "0.0.0.0", "--port", "18999", c.proxy)
		var res struct{ Argv []string }
		if err := json.Unmarshal([]byte(o), &res); code != 0 || err != nil {
			t.Fatalf("%s: resolve --json exit %d, %v\n%s%s", c.proxy, code, err, o, e)
		}
		if got := strings.Join(res.Argv, " "); !strings.Contains(got, c.want) {
			t.Errorf("%s: resolve --json argv %q, want %q in it", c.proxy, got, c.want)
		}
	}
}

// A dry run beside a server that holds the port still passes (exit 0)
// and says that serve would refuse the port; a free port gets no note;
// an address the host cannot bind fails it.
func TestDryRunNotesAPortInUse(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	for _, c := range []struct {
		port string
		note bool
	}{{held, true}, {strconv.Itoa(freePort(t)), false}} {
		code, o, e := runCLI(t, "serve", "--dry-run", "--profile", "../../profiles/demo.toml", "--host", "127.0.0.1", "--port", c.port)
		if code != 0 {
			t.Fatalf("port %s: exit %d\n%s%s", c.port, code, o, e)
		}
		if got := strings.Contains(o, "note: port "+c.port+" on 127.0.0.1 is in use now"); got != c.note {
			t.Errorf("port %s: note printed %v, want %v\n%s", c.port, got, c.note, o)
		}
	}
	// An address this host does not have fails the dry run, as it fails
	// serve (192.0.2.1: TEST-NET-1, never a local address).
	code, o, e := runCLI(t, "serve", "--dry-run", "--profile", "../../profiles/demo.toml", "--host", "192.0.2.1", "--port", held)
	if code != 2 || !strings.Contains(o, "would fail: host 192.0.2.1 cannot be listened on (port "+held+")") || !strings.Contains(o, "set --host") || strings.Contains(o, "note: port") {
		t.Errorf("an address this host lacks: exit %d\n%s%s", code, o, e)
	}
}

// llama-server's -hf habit: resolve warns and serve refuses, each with
// the fix (download the GGUF, pass -m).
func TestHFRepoWithoutATargetSaysTheFix(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	cfg := t.TempDir() // a tuned layer: with no target there is nothing to hash, and no warning of it
	t.Setenv("XDG_CONFIG_HOME", cfg)
	if err := writeLayer(filepath.Join(cfg, "speclaunch", TunedFile), []policy.Entry{tunedFixture(t, "a")}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd  []string
		code int
	}{{[]string{"resolve"}, 0}, {[]string{"serve", "--dry-run"}, 2}} {
		code, o, e := runCLI(t, append(c.cmd, "--engine", "llama.cpp", "-hf", "org/repo", "-md", "d.gguf")...)
		if code != c.code || !strings.Contains(o+e, "-hf is not enough") || !strings.Contains(o+e, "pass --model PATH") || strings.Contains(o+e, "hash the target") {
			t.Errorf("%v: exit %d (want %d), no fix in\n%s%s", c.cmd, code, c.code, o, e)
		}
	}
}

// A mistyped MLXCEL_* or LLAMA_ARG_* variable is warned of by name, and
// its value is printed nowhere (resolve, its JSON, the dry run), as
// docs/environment-variables.md says; before, the environment section
// listed it in full as inherited (LLAMA_ARG_PROT with no warning at all).
// A variable mlxcel or llama-server reads is listed as is.
func TestMistypedEnvValueNotPrinted(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	const mlxcelTypo = " is set, but neither speclaunch nor mlxcel-server reads it: did you mean "
	const llamaTypo = " is set, but neither speclaunch nor the llama-server versions it knows read it (a newer one may): did you mean "
	for _, tc := range []struct {
		name, value string
		typo        bool
		warn        string // after the name
	}{
		{"MLXCEL_HOTS", "hunter2password", true, mlxcelTypo + "MLXCEL_HOST?"},
		{"MLXCEL_PROT", "hunter3password", true, mlxcelTypo + "MLXCEL_PORT?"},
		{"MLXCEL_CACHE_DIR", "/var/cache/mlxcel-x", false, ""},
		{"LLAMA_ARG_PROT", "hunter4password", true, llamaTypo + "LLAMA_ARG_PORT?"},
		{"LLAMA_ARG_API_KEY_FIEL", "/run/secrets/hunter5", true, llamaTypo + "LLAMA_ARG_API_KEY_FILE?"},
		{"LLAMA_ARG_CTX_SIZE", "4096", false, ""},
	} {
		t.Setenv(tc.name, tc.value) // the settings' typo check reads the process's names
		for _, args := range [][]string{{"resolve"}, {"resolve", "--json"}, {"serve", "--dry-run"}} {
			code, o, e := runCLI(t, append(args, "--profile", "../../profiles/demo.toml")...)
			if code != 0 {
				t.Fatalf("%s, %q: exit %d:\n%s%s", tc.name, args, code, o, e)
			}
			if tc.typo && (strings.Contains(o+e, tc.value) || !strings.Contains(unwrap(o+e), tc.name+tc.warn)) {
				t.Errorf("%s, %q: the value printed, or no warning:\n%s%s", tc.name, args, o, e)
			}
			if !tc.typo && args[len(args)-1] != "--json" && !strings.Contains(o, tc.name+"="+tc.value+"  # inherited") {
				t.Errorf("%s, %q: not listed as inherited:\n%s%s", tc.name, args, o, e)
			}
		}
	}
}

// A LLAMA_ARG_PORT that does not parse stops a llama.cpp dry run (and
// serve) with exit 2 even where --port overrides it: the engine would
// inherit it, and llama-server parses it beside its --port flag and
// refuses to start. Under another engine, and for a name no engine reads
// (MLXCEL_PORT=tcp://… from a Kubernetes Service named mlxcel, beside
// deploy/kubernetes's LLAMA_ARG_PORT), it is an info line: HEAD refused
// those too, a crash loop on upgrade.
func TestDryRunRefusesABadShadowedPort(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, tc := range []struct {
		env  map[string]string
		args []string
		code int
		want string
	}{
		{map[string]string{"LLAMA_ARG_PORT": "abc"}, []string{"--engine", "llama.cpp", "--port", "19101"}, 2,
			`error: env LLAMA_ARG_PORT: bad port "abc": want a number from 1 to 65535; flag --port wins over it`},
		{map[string]string{"LLAMA_ARG_PORT": "abc"}, []string{"--port", "19101"}, 0,
			`info: LLAMA_ARG_PORT="abc" differs from flag --port="19101"; keeping flag --port`},
		{map[string]string{"LLAMA_ARG_PORT": "9000"}, []string{"--port", "19101"}, 0,
			`info: LLAMA_ARG_PORT="9000" differs from flag --port="19101"; keeping flag --port`},
		{map[string]string{"LLAMA_ARG_PORT": "8080", "MLXCEL_PORT": "tcp://10.96.0.10:8080"}, nil, 0,
			`info: MLXCEL_PORT="tcp://10.96.0.10:8080" differs from LLAMA_ARG_PORT="8080"; keeping LLAMA_ARG_PORT`},
	} {
		code, o, e := withEnv(tc.env).cli(append([]string{"serve", "--dry-run", "--profile", "../../profiles/demo.toml"}, tc.args...)...)
		if code != tc.code || !strings.Contains(unwrap(o+e), tc.want) {
			t.Errorf("%v %v: exit %d, want %d and %q:\n%s%s", tc.env, tc.args, code, tc.code, tc.want, o, e)
		}
	}
}

// resolve --json lists the engine's inherited variables (env_inherited)
// as the text does, masked the same way: a secret as ****3456, a
// mistyped name's value as ****; env_set was {} while the text listed
// them.
func TestResolveJSONListsInheritedEnv(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	llama := filepath.Join(dir, "p.toml")
	if err := os.WriteFile(llama, []byte("[model]\npath = \""+filepath.ToSlash(filepath.Join(dir, "t.gguf"))+"\"\n[engine]\nname = \"llama.cpp\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		profile, name, value, want string
	}{
		{llama, "LLAMA_ARG_CTX_SIZE", "4096", "4096"},
		{llama, "LLAMA_API_KEY", "abcdef123456", "****3456"},
		{"../../profiles/demo.toml", "MLXCEL_PROT", "hunter3password", "****"},
		{"../../profiles/demo.toml", "MLXCEL_CACHE_DIR", "/var/cache/it's", "/var/cache/it's"},
		// The sim reads llama-server's key variable too; it was not listed
		// (a new-user pass).
		{"../../profiles/demo.toml", "LLAMA_API_KEY", "abcdef123456", "****3456"},
	} {
		run := withEnv(map[string]string{tc.name: tc.value})
		code, o, e := run.cli("resolve", "--json", "--profile", tc.profile)
		var res struct {
			EnvInherited map[string]string `json:"env_inherited"`
		}
		if err := json.Unmarshal([]byte(o), &res); code != 0 || err != nil {
			t.Fatalf("%s: exit %d, %v\n%s%s", tc.name, code, err, o, e)
		}
		if got, ok := res.EnvInherited[tc.name]; !ok || got != tc.want {
			t.Errorf("%s: env_inherited %q, want %s=%q", tc.name, res.EnvInherited, tc.name, tc.want)
		}
		// The text lists each of them with the same value.
		_, text, _ := run.cli("resolve", "--profile", tc.profile)
		for k, v := range res.EnvInherited {
			if !strings.Contains(text, "  "+k+"="+plan.ShellQuote(v)+"  # inherited\n") && !strings.Contains(text, "  "+k+"="+v+"  # inherited; a mistyped name") {
				t.Errorf("%s: the text does not list %s=%s as --json does:\n%s", tc.name, k, v, text)
			}
		}
	}
}

// An inherited value too long for a line, or one with a newline, is
// quoted in resolve's environment section as the notes quote it (cut,
// its length said): MLXCEL_PROFILE of 100,000 bytes printed a
// 100,030-character line beside a notes line that cut it.
func TestEnvironmentLinesAreCut(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	long := strings.Repeat("a/", 50000)
	for _, tc := range []struct {
		name, value, want string
	}{
		{"MLXCEL_PROFILE", long, `MLXCEL_PROFILE="` + long[:64] + `"... (100000 bytes)  # inherited`},
		{"MLXCEL_CACHE_DIR", "x\nMLXCEL_FORGED=1", `MLXCEL_CACHE_DIR="x\nMLXCEL_FORGED=1"  # inherited`},
		{"MLXCEL_CACHE_DIR", "/var/cache/it's", `MLXCEL_CACHE_DIR='/var/cache/it'\''s'  # inherited`},
		{"MLXCEL_CACHE_DIR", strings.Repeat("b", 64), `MLXCEL_CACHE_DIR=` + strings.Repeat("b", 64) + `  # inherited`},
	} {
		code, o, e := withEnv(map[string]string{tc.name: tc.value}).cli("resolve", "--profile", "../../profiles/demo.toml")
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", tc.name, code, o, e)
		}
		if !strings.Contains(o, "\n  "+tc.want+"\n") {
			t.Errorf("%s: no line %q in\n%.2000s", tc.name, tc.want, o)
		}
		for _, l := range strings.Split(o, "\n") {
			if len(l) > 400 || strings.HasPrefix(l, "MLXCEL_FORGED") {
				t.Errorf("%s: a line of %d bytes: %.200s", tc.name, len(l), l)
			}
		}
	}
}

// A dry run says each notice once, in its notes, as resolve does: the
// warning of a key typed on speclaunch's own command line (and every
// other notice) was logged on stderr and printed in the notes as well.
func TestDryRunSaysANoticeOnce(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"a typed key", []string{"--api-key", "sk-typed-0123456789"}, nil, "is on speclaunch's own command line, which every user of this host sees in ps"},
		{"a mistyped variable", nil, map[string]string{"MLXCEL_HOTS": "h"}, "MLXCEL_HOTS is set, but neither speclaunch nor mlxcel-server reads it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v) // the settings' typo check reads the process's names
			}
			// A plan that cannot be built prints no notes: the notice is
			// said before the error (it was lost).
			for _, cmd := range [][]string{{"serve", "--dry-run"}, {"resolve"}} {
				code, o, e := runCLI(t, append(append(slices.Clone(cmd), "--profile", "../../profiles/demo.toml"), append(tc.args, "--", "--draft-block-size", "3")...)...)
				if n := strings.Count(unwrap(o+e), tc.want); code != 2 || n != 1 {
					t.Errorf("%q, a failed build: exit %d, said %d times, want once:\n%s%s", cmd, code, n, o, e)
				}
			}
			for _, cmd := range [][]string{{"serve", "--dry-run"}, {"resolve"}} {
				args := append(append(slices.Clone(cmd), "--profile", "../../profiles/demo.toml"), tc.args...)
				code, o, e := runCLI(t, args...)
				if n := strings.Count(unwrap(o+e), tc.want); code != 0 || n != 1 || !strings.Contains(unwrap(o), tc.want) {
					t.Errorf("%q: exit %d, said %d times, want once in the notes:\n%s%s", cmd, code, n, o, e)
				}
			}
		})
	}
}
