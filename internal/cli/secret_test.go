package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/speclaunch/speclaunch/internal/checkpoint"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/fakellama"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/record"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

// The test binary is a fake llama-server when re-executed with
// FAKELLAMA_MAIN=1 (as engine/'s tests do), or under the name
// llama-server (fakeLlamaProfile's link to it): a test that starts it
// needs no variable set in the whole test process, and runs in parallel.
func init() {
	if os.Getenv("FAKELLAMA_MAIN") == "1" || filepath.Base(os.Args[0]) == "llama-server" {
		os.Exit(fakellama.Main(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
	}
}

const (
	testKey = "sk-test-secret-0123456789abcdef"
	hfToken = "hf_test_token_abcdefghijklmnop"
)

// keySetup is one way an operator gives llama-server its key.
type keySetup struct {
	name string
	env  map[string]string
	args []string // engine arguments, after --
}

func keySetups(t *testing.T) []keySetup {
	kf := filepath.Join(t.TempDir(), "keys.txt")
	writeFile(t, kf, "# the operators' key\n"+testKey+"\n")
	return []keySetup{
		{name: "flag", args: []string{"--api-key", testKey}}, // --hf-token is refused (engine.ownHFToken)
		{name: "flag=", args: []string{"--api-key=other-key-0000," + testKey}},
		{name: "env", env: map[string]string{"LLAMA_API_KEY": testKey}},
		{name: "key file", args: []string{"--api-key-file", kf}},
		{name: "env key file", env: map[string]string{"LLAMA_ARG_API_KEY_FILE": kf}},
	}
}

// fakeLlamaProfile is a llama.cpp profile whose engine is the fake
// llama-server (this test binary).
func fakeLlamaProfile(t *testing.T, port int) string {
	t.Helper()
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "llama-server")
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	// A whole GGUF header, which serve reads before a llama.cpp engine starts
	// (checkModelPath); the quantization is the profile's.
	writeFile(t, filepath.Join(dir, "t.gguf"), string(checkpoint.HeaderOnlyGGUF()))
	writeFile(t, filepath.Join(dir, "d.gguf"), string(checkpoint.HeaderOnlyGGUF()))
	p := filepath.Join(dir, "p.toml")
	writeFile(t, p, fmt.Sprintf(`[engine]
name = "llama.cpp"
binary = %q
[model]
path = %q
quant = "f16"
[draft]
model = %q
kind = "draft"
[server]
port = %d
[gpu]
capability = "9.0"
[serve]
stop_timeout = "5s"
`, bin, filepath.Join(dir, "t.gguf"), filepath.Join(dir, "d.gguf"), port))
	return p
}

// runCLI runs one speclaunch command to its end.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return withEnv(nil).cli(args...)
}

// envRun runs speclaunch with variables of its own besides the test
// process's: its settings read them (getenv) and its engines get them
// (deps.Environ), as from the environment it was started in.
type envRun struct {
	getenv func(string) string
	deps   *plan.Deps
}

// withEnv is an envRun that adds vars to the test process's environment.
func withEnv(vars map[string]string) envRun {
	if len(vars) == 0 {
		return envRun{getenv: os.Getenv}
	}
	d := plan.RealDeps()
	for k, v := range vars {
		d.Environ = append(d.Environ, k+"="+v)
	}
	return envRun{getenv: func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return os.Getenv(k)
	}, deps: &d}
}

// main runs one speclaunch command until it ends or ctx does.
func (r envRun) main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runEnv(ctx, args, Embedded{Policy: policyTOML}, stdout, stderr, r.deps, r.getenv)
}

// cli runs one speclaunch command to its end.
func (r envRun) cli(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = r.main(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func statusCode(t *testing.T, port int, hdr string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/speclaunch/status", port), nil)
	if hdr != "" {
		req.Header.Set("Authorization", hdr)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// With a key given to llama-server in any of its ways, speclaunch's own
// requests carry it (verification succeeds against a fake that enforces
// it), its status page asks for it, and the key shows nowhere: not in
// resolve's or --dry-run's output, not in the logs (text or JSON).
// A setup that gives the key in a variable gives it to speclaunch's run
// (withEnv), not to the test process: the setups run in parallel.
func TestSecretsServe(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	for _, s := range keySetups(t) {
		for _, format := range []string{"text", "json"} {
			t.Run(s.name+"/"+format, func(t *testing.T) {
				run := withEnv(s.env)
				port := freePort(t)
				prof := fakeLlamaProfile(t, port)
				withArgs := func(a ...string) []string {
					a = append(a, "--profile", prof, "--log-format", format)
					if len(s.args) > 0 {
						a = append(append(a, "--"), s.args...)
					}
					return a
				}
				var out strings.Builder
				for _, cmd := range [][]string{{"resolve"}, {"resolve", "--json"}, {"serve", "--dry-run"}, {"profile", "show"}} {
					code, o, e := run.cli(withArgs(cmd...)...)
					if code != 0 {
						t.Fatalf("%s: exit %d\n%s%s", cmd, code, o, e)
					}
					out.WriteString(o + e)
				}
				if strings.Contains(strings.Join(s.args, " "), testKey) && !strings.Contains(out.String(), "****cdef") {
					t.Errorf("the command line should show the key masked as llama-server does (****cdef):\n%s", out.String())
				}

				ctx, cancel := context.WithCancel(context.Background())
				log := &syncBuffer{}
				done := make(chan int, 1)
				go func() { done <- run.main(ctx, withArgs("serve", "--adapt"), log, log) }()
				defer func() {
					cancel()
					<-done
				}()
				log.waitFor(t, `width verified`, 1, 30*time.Second)
				if code, body := statusCode(t, port, ""); code != http.StatusUnauthorized || body != fakellama.UnauthorizedBody {
					t.Errorf("/speclaunch/status without the key: %d %s", code, body)
				}
				if code, body := statusCode(t, port, "Bearer "+testKey); code != http.StatusOK {
					t.Errorf("/speclaunch/status with the key: %d %s", code, body)
				}
				// /health asks no key; it says 503 "Loading model" until the
				// engine takes traffic (after the adaptive loop's probe).
				code := health(port)
				for deadline := time.Now().Add(20 * time.Second); code == http.StatusServiceUnavailable && time.Now().Before(deadline); code = health(port) {
					time.Sleep(50 * time.Millisecond)
				}
				if code != http.StatusOK {
					t.Errorf("/health is public, got %d", code)
				}
				// The adaptive loop's probe got past the key check: the fake
				// read /props for it and refused only its token prompts
				// (it serves string prompts alone), not with a 401.
				log.waitFor(t, `string prompts only`, 1, 20*time.Second)
				cancel()
				<-done
				done <- 0
				out.WriteString(log.String())
				if strings.Contains(out.String(), testKey) || strings.Contains(out.String(), hfToken) {
					t.Errorf("a secret is printed:\n%s", out.String())
				}
				if strings.Contains(log.String(), "unauthorized") {
					t.Errorf("the engine refused one of speclaunch's requests:\n%s", log.String())
				}
			})
		}
	}
}

// bench sends the key on every request (warm-ups, measured runs, scrapes,
// the probe): every arm is measured against a fake that enforces it, and
// neither its output nor the record it writes shows the key.
func TestSecretsBench(t *testing.T) {
	testenv.E2E(t)
	t.Parallel()                          // see TestMain
	for _, s := range keySetups(t)[1:3] { // a flag and an environment variable
		t.Run(s.name, func(t *testing.T) {
			run := withEnv(s.env)
			out := filepath.Join(t.TempDir(), "rec")
			args := []string{"bench", "--profile", fakeLlamaProfile(t, freePort(t)), "--widths", "2,3", "--rounds", "3", "--warmup", "1",
				"--max-tokens", "16", "--out", out, "--log-format", "json"}
			if len(s.args) > 0 {
				args = append(append(args, "--"), s.args...)
			}
			code, o, e := run.cli(args...)
			if code != 0 {
				t.Fatalf("bench: exit %d\n%s%s", code, o, e)
			}
			all := o + e
			for _, ext := range []string{".md", ".json", ".svg"} {
				b, err := os.ReadFile(out + ext)
				if err != nil {
					t.Fatal(err)
				}
				all += string(b)
			}
			if strings.Contains(all, testKey) {
				t.Errorf("the key is printed or recorded:\n%s", all)
			}
			var rec record.Record
			b, _ := os.ReadFile(out + ".json")
			if err := json.Unmarshal(b, &rec); err != nil {
				t.Fatal(err)
			}
			for _, a := range rec.Arms {
				if a.Status != record.StatusOK || len(a.Runs) == 0 {
					t.Errorf("arm %s: %s (%s)", a.Label, a.Status, a.StatusReason)
				}
			}
			if rec.ProbeCheck == nil || strings.Contains(rec.ProbeCheck.Error, "401") {
				t.Errorf("probe check %+v", rec.ProbeCheck)
			}
		})
	}
}

// A key file that cannot be read stops the launch before anything starts,
// naming the file and where it was given (llama-server would refuse it).
func TestSecretsKeyFileMissing(t *testing.T) {
	t.Setenv("FAKELLAMA_MAIN", "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	missing := filepath.Join(t.TempDir(), "nope.txt")
	code, o, e := runCLI(t, "serve", "--dry-run", "--profile", fakeLlamaProfile(t, freePort(t)), "--", "--api-key-file", missing)
	if want := "--api-key-file: api key file " + missing + ": no such file"; code != 2 || !strings.Contains(e, want) {
		t.Errorf("exit %d, want 2 and %q:\n%s%s", code, want, o, e)
	}
}

// A key flag given no key (`-- --api-key` at the end of the line, or an
// empty value) stops the launch: the sim would have served open while the
// operator believed a key was set.
func TestSecretsKeyFlagWithoutValue(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, args := range [][]string{{"--api-key"}, {"--api-key="}, {"--api-key", ""}} {
		code, o, e := runCLI(t, append([]string{"serve", "--dry-run", "--profile", "../../profiles/demo.toml", "--"}, args...)...)
		if want := "engine flag --api-key has no value"; code != 2 || !strings.Contains(e, want) {
			t.Errorf("%q: exit %d, want 2 and %q:\n%s%s", args, code, want, o, e)
		}
	}
}

// What a record keeps of the engines' command lines and output shows no
// known key; the numbers are left alone.
func TestRedactRecord(t *testing.T) {
	var r secret.Redactor
	r.Add(testKey)
	rec := &record.Record{Notes: []string{"started with " + testKey}, ProbeCheck: &record.ProbeCheck{Error: "HTTP 401 for " + testKey}}
	rec.Arms = []record.Arm{{Label: "width 4", Argv: []string{"llama-server", "--api-key", testKey, "--hf-token", hfToken},
		LastLog: []string{"engine said " + testKey}, StatusReason: "failed: " + testKey, Width: 4}}
	redactRecord(rec, &r)
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), testKey) || strings.Contains(string(b), hfToken) {
		t.Errorf("a secret is kept: %s", b)
	}
	if rec.Arms[0].Width != 4 || !strings.Contains(string(b), "****cdef") {
		t.Errorf("record changed beyond its secrets: %s", b)
	}
}

// The sim takes its key as llama-server does (the README's demo profile
// with `-- --api-key KEY`): the proxy's routes and the engine refuse
// requests without it, speclaunch's own requests carry it (the width is
// verified), and an unreadable key file stops the launch with exit 2.
// Before, the sim accepted --api-key and ignored it: every route answered
// without a key, and a missing key file started a server.
func TestSecretsServeSim(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	prof := filepath.Join(t.TempDir(), "sim.toml")
	port := freePort(t)
	writeFile(t, prof, simProfile(port, ""))
	ctx, cancel := context.WithCancel(context.Background())
	log := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- MainContext(ctx, []string{"serve", "--profile", prof, "--log-format", "json", "--", "--api-key", testKey}, policyTOML, log, log, nil)
	}()
	defer func() {
		cancel()
		<-done
	}()
	log.waitFor(t, `width verified`, 1, 30*time.Second)
	post := func(hdr string) int {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/v1/completions", port),
			strings.NewReader(`{"prompt":"def f():","max_tokens":4}`))
		if hdr != "" {
			req.Header.Set("Authorization", hdr)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(""); code != http.StatusUnauthorized {
		t.Errorf("a completion without the key: %d", code)
	}
	if code := post("Bearer " + testKey); code != http.StatusOK {
		t.Errorf("a completion with the key: %d", code)
	}
	if code, body := statusCode(t, port, ""); code != http.StatusUnauthorized || body != secret.UnauthorizedBody {
		t.Errorf("/speclaunch/status without the key: %d %s", code, body)
	}
	if code := health(port); code != http.StatusOK {
		t.Errorf("/health is public, got %d", code)
	}
	// Issue 33: the key typed as a flag is not on the engine's command
	// line (ps), and the engine, given it in LLAMA_API_KEY, requires it
	// (the 401 above).
	if _, body := statusCode(t, port, "Bearer "+testKey); runtime.GOOS == "linux" {
		var st struct {
			Engine struct{ PID int } `json:"engine"`
		}
		json.Unmarshal([]byte(body), &st)
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", st.Engine.PID))
		if err != nil || !bytes.Contains(cmdline, []byte("__sim")) || bytes.Contains(cmdline, []byte(testKey)) || bytes.Contains(cmdline, []byte("--api-key")) {
			t.Errorf("the engine's command line (pid %d, %v): %q", st.Engine.PID, err, cmdline)
		}
	}
	cancel()
	<-done
	done <- 0
	if strings.Contains(log.String(), testKey) {
		t.Errorf("the key is printed:\n%s", log.String())
	}

	for _, kf := range []string{filepath.Join(t.TempDir(), "nope.txt"), t.TempDir()} {
		code, o, e := runCLI(t, "serve", "--dry-run", "--profile", prof, "--", "--api-key-file", kf)
		if code != 2 || !strings.Contains(e, "--api-key-file: api key file "+kf) {
			t.Errorf("key file %s: exit %d, want 2 naming it:\n%s%s", kf, code, o, e)
		}
	}
}

// Issue 33: a key typed as an engine flag reaches the engine through its
// environment, and the dry run shows it there, masked, and not in the
// command; a note says that speclaunch's own command line still shows it.
func TestSecretsKeyFlagGoesToEnv(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	code, o, e := runCLI(t, "serve", "--dry-run", "--profile", "../../profiles/demo.toml", "--", "--api-key", testKey)
	cmd, env, _ := strings.Cut(o, "environment:")
	if code != 0 || strings.Contains(o+e, testKey) || strings.Contains(cmd, "--api-key") || !strings.Contains(env, "LLAMA_API_KEY='"+secret.Mask(testKey)+"'") ||
		!strings.Contains(env, "on speclaunch's own command line, which every user of this host sees in ps: set LLAMA_API_KEY") {
		t.Errorf("exit %d:\n%s%s", code, o, e)
	}
}

// A value given to a typo of a secret flag is a key all the same: the
// unknown-flag hint and the dry run's engine command mask it (issue 33).
func TestSecretsTypoedKeyFlag(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	const typed = "sk-typo-0123456789"
	for _, args := range [][]string{
		{"serve", "--engine", "sim", "--api-kye=" + typed},
		{"serve", "--engine", "sim", "--hf-tokne=" + typed},
		{"serve", "--dry-run", "--profile", "../../profiles/demo.toml", "--", "--api-kye", typed},
		{"resolve", "--json", "--profile", "../../profiles/demo.toml", "--", "--hf-tokne=" + typed},
	} {
		_, o, e := runCLI(t, args...)
		if strings.Contains(o+e, typed) {
			t.Errorf("%q prints the key:\n%s%s", args, o, e)
		}
		if !strings.Contains(o+e, secret.Mask(typed)) {
			t.Errorf("%q: no masked key in:\n%s%s", args, o, e)
		}
	}
}

// Engine arguments no engine lists whose names say secret (--auth,
// --bearer, -k) show their values masked in the dry run's command, as a
// variable ending in _AUTH does; before, they showed in full.
func TestSecretsNamedFlagsMasked(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	code, o, e := runCLI(t, "serve", "--dry-run", "--profile", "../../profiles/demo.toml", "--",
		"--auth", "SECRETKEY123456", "-k", "SECRETKEY1234567", "--bearer=SECRETKEY12345678")
	if want := "--auth '****3456' -k '****4567' '--bearer=****5678'"; code != 0 || strings.Contains(o+e, "SECRETKEY") || !strings.Contains(o, want) {
		t.Errorf("exit %d, want 0, %q and no key:\n%s%s", code, want, o, e)
	}
}

// A key flag misspelt among the engine arguments (--api-kye K) stops the
// launch with exit 2 before anything starts, naming where it was given
// (after --, or the profile's file:line), the flag meant and the value
// masked: before, a dry run passed with a warning and serve put the key on
// the engine's command line.
func TestSecretsMisspeltKeyFlag(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	code, o, e := runCLI(t, "serve", "--dry-run", "--profile", "../../profiles/demo.toml", "--", "--api-kye", "sk-live-123456")
	if want := "after --): engine argument is a misspelt key flag: --api-kye ****3456 is not a flag the engine (sim) knows; did you mean --api-key? Spell it --api-key: as given, the engine refuses to start"; code != 2 || !strings.Contains(unwrap(e), want) || strings.Contains(o+e, "123456") {
		t.Errorf("after --: exit %d, want 2 and %q, the key masked:\n%s%s", code, want, o, e)
	}
	prof := filepath.Join(t.TempDir(), "k.toml")
	os.WriteFile(prof, []byte("[engine]\nname = \"sim\"\nargs = [\"--api-kye\", \"sk-live-123456\"]\n[model]\npath = \"m\"\n"), 0o644)
	for _, typed := range [][]string{nil, {"--", "--jinja"}} {
		code, o, e = runCLI(t, append([]string{"serve", "--dry-run", "--profile", prof}, typed...)...)
		if want := "profile " + prof + ":3: engine argument is a misspelt key flag: --api-kye ****3456"; code != 2 || !strings.Contains(e, want) || strings.Contains(o+e, "123456") {
			t.Errorf("engine.args, typed %q: exit %d, want 2 and %q:\n%s%s", typed, code, want, o, e)
		}
	}
}

// A case variant of a key flag (--API-KEY K) is refused as its typos are,
// with exit 2, the flag to spell and the value never shown: after --,
// before, a warning let it through onto the engine's command line; typed
// before --, the hint said to put it after --.
func TestSecretsCaseVariantKeyFlag(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--", "--API-KEY", "SECRETKEY123456"}, "--API-KEY ****3456 is not a flag the engine (sim) knows; did you mean --api-key? Spell it --api-key: as given"},
		{[]string{"--", "--Api-Key=SECRETKEY123456"}, "did you mean --api-key? Spell it --api-key"},
		{[]string{"--API-KEY", "SECRETKEY123456"}, "hint: spell it --api-key; a misspelt key flag is refused after -- too"},
		{[]string{"--API-KEY=SECRETKEY123456"}, "hint: spell it --api-key=****3456;"},
		// The flag's name before its colon is prose whatever its case:
		// masking read "--API-KEY: neither" as a header, and printed
		// "unknown flag --API-KEY: ****ther a speclaunch flag".
		{[]string{"--API-KEY", "SECRETKEY123456"}, "error: unknown flag --API-KEY: neither a speclaunch flag nor one llama-server lists (did you mean llama-server's --api-key?)"},
		{[]string{"--Api-Key=SECRETKEY123456"}, "error: unknown flag --Api-Key: neither a speclaunch flag nor one llama-server lists"},
		{[]string{"-API-KEY", "SECRETKEY123456"}, "error: unknown flag -API-KEY: neither a speclaunch flag"},
	} {
		code, o, e := runCLI(t, append([]string{"serve", "--dry-run", "--profile", "../../profiles/demo.toml"}, tc.args...)...)
		if code != 2 || !strings.Contains(unwrap(e), tc.want) || strings.Contains(o+e, "SECRETKEY") {
			t.Errorf("%q: exit %d, want 2 and %q, the key not shown:\n%s%s", tc.args, code, tc.want, o, e)
		}
	}
}

// A key flag and its key in one engine argument ("--api-key K", a TOML
// list's one item where two were meant; " = " or a tab for the space) is
// refused with exit 2 by serve (before anything starts), its dry run,
// resolve and profile validate alike, naming where it was given (the
// profile's file:line, or after --) and the fix, the key never shown;
// profile show masks it. Before, the dry run's command, its unknown-flag
// warning, profile show and serve's log showed the key whole, validate
// passed, and the sim served with no key.
func TestSecretsJoinedKeyFlag(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	const leak = "LEAKCHECKKEY-0123456789"
	const fix = `give the flag and its value as two arguments (--api-key KEY; in a profile's engine.args, two list items: ["--api-key", "KEY"]) or as --api-key=KEY`
	dir := t.TempDir()
	for i, joined := range []string{"--api-key " + leak, "--api-key = " + leak, "--api-key\\t" + leak} {
		prof := filepath.Join(dir, fmt.Sprintf("j%d.toml", i))
		writeFile(t, prof, "[engine]\nname = \"sim\"\nargs = [\"--ctx-size\", \"64\",\n  \""+joined+"\"]\n[model]\npath = \"m\"\n")
		refused := "profile " + prof + `:3: engine argument is a key flag and its value in one: "--api-key ****6789": the engine reads no key from it`
		for _, tc := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"serve", "--dry-run", "--profile", prof}, 2, refused},
			{[]string{"serve", "--profile", prof, "--port", strconv.Itoa(freePort(t))}, 2, refused},
			{[]string{"serve", "--dry-run", "--profile", prof, "--", "--jinja"}, 2, refused},
			{[]string{"resolve", "--profile", prof}, 2, refused},
			{[]string{"profile", "validate", "--profile", prof}, 2, refused},
			{[]string{"profile", "show", "--profile", prof}, 0, "[--ctx-size 64 --api-key ****6789]"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			var o, e bytes.Buffer
			code := withEnv(nil).main(ctx, tc.args, &o, &e)
			cancel()
			out := unwrap(o.String() + e.String())
			if code != tc.code || !strings.Contains(out, tc.want) || tc.code == 2 && !strings.Contains(out, fix) || strings.Contains(out, leak) {
				t.Errorf("%q in engine.args, %q: exit %d, want %d, %q and the fix, the key not shown:\n%s", joined, tc.args, code, tc.code, tc.want, out)
			}
		}
	}
	demo := []string{"serve", "--dry-run", "--profile", "../../profiles/demo.toml"}
	for _, tc := range []struct {
		key  string
		args []string
		want string
	}{
		{leak, []string{"--", "--api-key " + leak}, `after --): engine argument is a key flag and its value in one: "--api-key ****6789"`},
		{leak, []string{"--", "--api-key\t" + leak}, `after --): engine argument is a key flag and its value in one: "--api-key ****6789"`},
		{leak, []string{"--api-key " + leak}, "unknown flag --api-key ****6789: neither a speclaunch flag nor one llama-server lists"},
		// Too short for the Redactor's net (MinRedact): masked by the rule.
		{"abc12", []string{"--api-key abc12"}, "unknown flag --api-key ****bc12:"},
		{"abc12", []string{"--", "--api-key abc12"}, `"--api-key ****bc12"`},
		// A zero-width space after the flag, the key the next argument.
		{leak, []string{"--", "--api-key\u200b", leak}, `after --): engine argument is a key flag with white space or an invisible character around it: "--api-key\u200b"`},
	} {
		code, o, e := runCLI(t, append(slices.Clone(demo), tc.args...)...)
		if out := unwrap(o + e); code != 2 || !strings.Contains(out, tc.want) || !strings.Contains(out, fix) && !strings.Contains(out, "write --api-key with nothing around it") || strings.Contains(out, tc.key) {
			t.Errorf("%q: exit %d, want 2, %q and the fix, the key not shown:\n%s", tc.args, code, tc.want, out)
		}
	}
}

// A key pasted where a key file belongs (--api-key-file K,
// LLAMA_ARG_API_KEY_FILE=K, the profile's engine.args or engine.env) is
// refused with exit 2 and the fix, the value never shown, and the
// profile's file:line where the profile gave it: before, "api key file K:
// no such file" printed it in full, for any K with a "/" (half the keys
// `openssl rand -base64 32` prints) or a short dot-extension
// (hunter2.pass). profile show masks it too.
func TestSecretsKeyGivenAsKeyFile(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	const fix = ": no such file (the value is not shown, since it may be a key: give a key with --api-key or LLAMA_API_KEY, a file's path with --api-key-file or LLAMA_ARG_API_KEY_FILE)"
	demo := []string{"--profile", "../../profiles/demo.toml"}
	dir := t.TempDir()
	for _, val := range []string{"SECRETKEY123456", "q1w2E3r4T5y6/U7i8O9p0+ABCDEFGHijklmnopQR=", "hunter2.pass"} {
		prof, envProf := filepath.Join(dir, "k.toml"), filepath.Join(dir, "e.toml")
		writeFile(t, prof, "[engine]\nname = \"sim\"\nargs = [\"--ctx-size\", \"128\",\n  \"--api-key-file\", \""+val+"\"]\n[model]\npath = \"m\"\n")
		writeFile(t, envProf, "[engine]\nname = \"sim\"\n[engine.env]\nLLAMA_ARG_API_KEY_FILE = \""+val+"\"\n[model]\npath = \"m\"\n")
		masked := "[--ctx-size 128 --api-key-file " + secret.Mask(val) + "]"
		for _, tc := range []struct {
			run  envRun
			args []string
			code int
			want string
		}{
			{withEnv(nil), append([]string{"serve", "--dry-run", "--api-key-file", val}, demo...), 2, "speclaunch: error: --api-key-file" + fix},
			{withEnv(nil), append(append([]string{"resolve"}, demo...), "--", "--api-key-file="+val), 2, "speclaunch: error: --api-key-file" + fix},
			{withEnv(map[string]string{"LLAMA_ARG_API_KEY_FILE": val}), append([]string{"serve", "--dry-run"}, demo...), 2, "speclaunch: error: LLAMA_ARG_API_KEY_FILE" + fix},
			{withEnv(nil), []string{"serve", "--dry-run", "--profile", prof}, 2, "speclaunch: error: profile " + prof + ":3: --api-key-file" + fix},
			{withEnv(nil), []string{"serve", "--dry-run", "--profile", prof, "--", "--ctx-size", "64"}, 2, "speclaunch: error: profile " + prof + ":3: --api-key-file" + fix},
			{withEnv(nil), []string{"serve", "--dry-run", "--profile", envProf}, 2, "speclaunch: error: profile " + envProf + ":4: engine.env: LLAMA_ARG_API_KEY_FILE" + fix},
			{withEnv(nil), append([]string{"profile", "show", "--api-key-file", val}, demo...), 0, "[--api-key-file " + secret.Mask(val) + "]"},
			{withEnv(nil), []string{"profile", "show", "--profile", prof}, 0, masked},
		} {
			code, o, e := tc.run.cli(tc.args...)
			if code != tc.code || !strings.Contains(unwrap(o+e), tc.want) || strings.Contains(o+e, val) {
				t.Errorf("%q: exit %d, want %d and %q, the value not shown:\n%s%s", tc.args, code, tc.code, tc.want, o, e)
			}
		}
	}
	// A path whose directory exists is shown, as it is clearly one.
	missing := filepath.Join(dir, "nope.txt")
	code, o, e := runCLI(t, append([]string{"serve", "--dry-run", "--api-key-file", missing}, demo...)...)
	if want := "--api-key-file: api key file " + missing + ": no such file"; code != 2 || !strings.Contains(unwrap(e), want) {
		t.Errorf("a path: exit %d, want 2 and %q:\n%s%s", code, want, o, e)
	}
}

// A key flag given no key names where it was given: speclaunch's own
// flag as typed (before, the error blamed "the engine arguments: after --,
// or the profile's engine.args"), after --, or the profile's file:line.
func TestSecretsEmptyKeyNamesItsSource(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	prof := filepath.Join(t.TempDir(), "k.toml")
	os.WriteFile(prof, []byte("[engine]\nname = \"sim\"\nargs = [\"--api-key\", \"\"]\n[model]\npath = \"m\"\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--profile", "../../profiles/demo.toml", "--api-key", ""}, "error: flag --api-key has no value"},
		{[]string{"--profile", "../../profiles/demo.toml", "--api-key="}, "error: flag --api-key has no value"},
		{[]string{"--profile", "../../profiles/demo.toml", "--api-key-file", ""}, "error: flag --api-key-file has no value"},
		{[]string{"--profile", "../../profiles/demo.toml", "--", "--api-key", ""}, "error: engine arguments on the command line (llama-server flags as typed, and after --): engine flag --api-key has no value"},
		{[]string{"--profile", prof}, "error: profile " + prof + ":3: engine flag --api-key has no value"},
		{[]string{"--profile", prof, "--", "--jinja"}, "error: profile " + prof + ":3: engine flag --api-key has no value"},
	} {
		code, o, e := runCLI(t, append([]string{"serve", "--dry-run"}, tc.args...)...)
		if code != 2 || !strings.Contains(e, tc.want) || !strings.Contains(e, "--api-key VALUE") && !strings.Contains(e, "--api-key-file VALUE") || strings.Contains(e, "or the profile's engine.args") {
			t.Errorf("%q: exit %d, want 2 and %q with the fix:\n%s%s", tc.args, code, tc.want, o, e)
		}
	}
}

// A secret under a name that does not say so is masked by its shape in
// the engine's environment: resolve (and --json) and the dry run used to
// print these four in full.
func TestSecretsEnvByValue(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	prof := filepath.Join(t.TempDir(), "envsec.toml")
	writeFile(t, prof, `[engine]
name = "sim"
[engine.env]
HDR = "Bearer tok-SECRET-5555"
DB_URL = "postgres://u:pw-SECRET-77@h/db"
GITHUB_PAT = "ghp_SECRET2222"
FOO = "sk-SECRET7777"
LEVEL = "info"
[model]
path = "demo-target"
[draft]
model = "demo-drafter"
`)
	for _, args := range [][]string{{"resolve"}, {"resolve", "--json"}, {"serve", "--dry-run"}} {
		code, o, e := runCLI(t, append(args, "--profile", prof)...)
		if code != 0 || strings.Contains(o+e, "SECRET") {
			t.Errorf("%q: exit %d, a secret printed:\n%s%s", args, code, o, e)
		}
		if args[len(args)-1] == "--json" {
			continue
		}
		_, env, _ := strings.Cut(o, "environment:")
		for _, want := range []string{"HDR='Bearer ****5555'", "DB_URL='postgres://u:****T-77@h/db'", "GITHUB_PAT='****2222'", "FOO='****7777'", "LEVEL=info"} {
			if !strings.Contains(env, want) {
				t.Errorf("%q: no %s in the environment:\n%s", args, want, env)
			}
		}
	}
}

// A key in the environment or on the command line is masked in the error
// that stops a command before its plan exists (a bad value elsewhere, or
// the key itself pasted into the wrong flag or variable), in text and in
// JSON; before, those errors printed it in full.
func TestSecretsInStartupErrors(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	const k = "sk-proj-Ab3dE5fG7hJ9kL1mN3pQ5rS7"
	kf := filepath.Join(t.TempDir(), "kf")
	writeFile(t, kf, "myverysecretkey123\n")
	demo := "../../profiles/demo.toml"
	prof := filepath.Join(t.TempDir(), "p.toml")
	writeFile(t, prof, "[engine]\nname = \"sim\"\n[server]\nhost = \"sk-SECRETVALUE1234567890:80\"\n[model]\npath = \"demo-target\"\n")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		key  string
	}{
		{"env key in a bad port", map[string]string{"LLAMA_API_KEY": k, "MLXCEL_PORT": k}, []string{"resolve", "--profile", demo}, k},
		{"flag key in a bad width", nil, []string{"resolve", "--profile", demo, "--api-key", k, "--draft-block-size", k}, k},
		{"key in a bad host", nil, []string{"resolve", "--profile", demo, "--host", k + ":1"}, k},
		{"key file's key in a bad kind", map[string]string{"LLAMA_ARG_API_KEY_FILE": kf}, []string{"resolve", "--profile", demo, "--draft-kind", "myverysecretkey123"}, "myverysecretkey123"},
		{"flag key file's key", nil, []string{"resolve", "--profile", demo, "--api-key-file", kf, "--draft-kind", "myverysecretkey123"}, "myverysecretkey123"},
		{"key by its shape in a profile", nil, []string{"resolve", "--profile", prof}, "sk-SECRETVALUE1234567890"},
		{"bearer in JSON", map[string]string{"MLXCEL_LOG_FORMAT": "json", "MLXCEL_PORT": "Bearer abcdefghijklmnop1234"}, []string{"serve", "--profile", demo}, "abcdefghijklmnop1234"},
	} {
		code, o, e := withEnv(tc.env).cli(tc.args...)
		if code != 2 || strings.Contains(o+e, tc.key) || !strings.Contains(e, secret.Mask(tc.key)) {
			t.Errorf("%s: exit %d, want 2 and the key masked:\n%s%s", tc.name, code, o, e)
		}
	}
}

// A variable whose name says it holds the engine's API key but which the
// engine reads no key from is warned of when the profile's engine.env
// sets it (naming the profile's file:line), as it is from the environment
// speclaunch was started in; before, engine.env's went unwarned and the
// engine served open.
func TestSecretsUnreadKeyVarInEngineEnv(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	const k = "sk-SECRETVALUE1234567890"
	for _, tc := range []struct {
		name, env string
		proc      map[string]string
		want      string // "" for no warning
	}{
		{"typo in engine.env", "LLAMA_API_KYE", nil, ":11: engine.env sets LLAMA_API_KYE, but sim reads no API key from it: the engine serves with no API key; give the key with --api-key"},
		{"llama arg name in engine.env", "LLAMA_ARG_API_KEY", nil, ":11: engine.env sets LLAMA_ARG_API_KEY, but sim reads no API key"},
		{"mlxcel name in engine.env", "MLXCEL_API_KEY", nil, ":11: engine.env sets MLXCEL_API_KEY, but sim reads no API key"},
		{"typo in the environment", "LEVEL", map[string]string{"LLAMA_API_KYE": k}, "LLAMA_API_KYE is set, but sim reads no API key from it"},
		{"the key the engine reads", "LLAMA_API_KEY", nil, ""},
		{"a typo beside the key read", "LLAMA_API_KYE", map[string]string{"LLAMA_API_KEY": k}, ""},
	} {
		prof := filepath.Join(t.TempDir(), "p.toml")
		writeFile(t, prof, fmt.Sprintf("[engine]\nname = \"sim\"\n[model]\npath = \"demo-target\"\n[draft]\nmodel = \"demo-drafter\"\n[gpu]\ncapability = \"12.1\"\n\n[engine.env]\n%s = %q\n", tc.env, k))
		for _, args := range [][]string{{"resolve"}, {"serve", "--dry-run"}} {
			code, o, e := withEnv(tc.proc).cli(append(args, "--profile", prof)...)
			got := unwrap(o + e)
			if code != 0 || strings.Contains(o+e, k) {
				t.Errorf("%s, %q: exit %d, want 0 and the key masked:\n%s%s", tc.name, args, code, o, e)
			}
			if tc.want == "" && strings.Contains(got, "reads no API key") || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("%s, %q: want warning %q:\n%s%s", tc.name, args, tc.want, o, e)
			}
		}
		// Reachable from other hosts, the server is not started open
		// where a variable says a key was meant (a final user pass).
		code, o, e := withEnv(tc.proc).cli("serve", "--dry-run", "--host", "0.0.0.0", "--profile", prof)
		refused := strings.Contains(unwrap(o+e), "with host 0.0.0.0 (flag --host) the server would be reachable from other hosts with no key")
		if want := tc.want != ""; refused != want || want && code != 2 || !want && code != 0 || strings.Contains(o+e, k) {
			t.Errorf("%s, --host 0.0.0.0: exit %d, refused %v, want refused %v and the key masked:\n%s%s", tc.name, code, refused, want, o, e)
		}
	}
}

// A key no HTTP client can send (white space at either end, a control
// character within) stops the launch with exit 2 naming where it was
// given: the flag (speclaunch's own, after --, or the profile's
// engine.args file:line), the variable (or the profile's engine.env), the
// key file and its line; never the key. Before, none of them was named,
// and a newline within a key was taken: every request got 401.
func TestSecretsUnsendableKeyNamesItsSource(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	const k = "spacedkey1234567"
	dir := t.TempDir()
	sk, crlf := filepath.Join(dir, "sk.txt"), filepath.Join(dir, "crlf.txt")
	writeFile(t, sk, " "+k+"\n")
	writeFile(t, crlf, "# the operators' key\r\n"+k+"\r\n")
	args := filepath.Join(dir, "args.toml")
	writeFile(t, args, "[engine]\nname = \"sim\"\nargs = [\"--api-key\", \""+k+" \"]\n[model]\npath = \"demo-target\"\n")
	env := filepath.Join(dir, "env.toml")
	writeFile(t, env, "[engine]\nname = \"sim\"\n[model]\npath = \"demo-target\"\n[engine.env]\nLLAMA_API_KEY = \""+k+"\\t\"\n")
	// A control character within the key, from each source.
	const nl = "NLKEY-123456\nsecond"
	ctl := filepath.Join(dir, "ctl.txt")
	writeFile(t, ctl, "# a pasted escape\n"+k+"\x1b\x1b\n")
	ctlArgs := filepath.Join(dir, "ctlargs.toml")
	writeFile(t, ctlArgs, "[engine]\nname = \"sim\"\nargs = [\"--api-key\", \"NLKEY-123456\\nsecond\"]\n[model]\npath = \"demo-target\"\n")
	ctlEnv := filepath.Join(dir, "ctlenv.toml")
	writeFile(t, ctlEnv, "[engine]\nname = \"sim\"\n[model]\npath = \"demo-target\"\n[engine.env]\nLLAMA_API_KEY = \"NLKEY-123456\\u007fsecond\"\n")
	demo := []string{"--profile", "../../profiles/demo.toml"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"speclaunch's --api-key-file", nil, append(demo, "--api-key-file", sk), "--api-key-file: key file " + sk + ":1: an API key begins with a space"},
		{"a CRLF key file", nil, append(demo, "--api-key-file="+crlf), "--api-key-file: key file " + crlf + ":2: an API key ends with a carriage return (a key file saved with CRLF line ends?)"},
		{"LLAMA_ARG_API_KEY_FILE", map[string]string{"LLAMA_ARG_API_KEY_FILE": sk}, demo, "LLAMA_ARG_API_KEY_FILE: key file " + sk + ":1: an API key begins"},
		{"LLAMA_API_KEY", map[string]string{"LLAMA_API_KEY": k + " "}, demo, "error: env LLAMA_API_KEY: an API key ends with a space"},
		{"LLAMA_API_KEY with its newline", map[string]string{"LLAMA_API_KEY": k + "\n"}, demo, "error: env LLAMA_API_KEY: an API key ends with a newline"},
		{"after --", nil, append(demo, "--", "--api-key", k+" "), "after --): engine flag --api-key gives an API key that ends with a space"},
		{"speclaunch's --api-key", nil, append(demo, "--api-key", " "+k), "after --): engine flag --api-key gives an API key that begins with a space"},
		{"engine.args", nil, []string{"--profile", args}, "error: profile " + args + ":3: engine flag --api-key gives an API key that ends with a space"},
		{"engine.env", nil, []string{"--profile", env}, "error: profile " + env + ":6: engine.env: env LLAMA_API_KEY: an API key ends with a tab"},
		{"LLAMA_API_KEY with a newline within", map[string]string{"LLAMA_API_KEY": nl}, demo, "error: env LLAMA_API_KEY: an API key holds a control character (a newline) at byte 13, which no HTTP client can send"},
		{"speclaunch's --api-key with a newline within", nil, append(demo, "--api-key", nl), "after --): engine flag --api-key gives an API key that holds a control character (a newline) at byte 13"},
		{"after -- with a newline within", nil, append(demo, "--", "--api-key="+nl), "after --): engine flag --api-key gives an API key that holds a control character (a newline) at byte 13"},
		{"a key file with an escape within", nil, append(demo, "--api-key-file", ctl), "--api-key-file: key file " + ctl + ":2: an API key holds a control character (an escape) at byte 17"},
		{"LLAMA_ARG_API_KEY_FILE with an escape within", map[string]string{"LLAMA_ARG_API_KEY_FILE": ctl}, demo, "LLAMA_ARG_API_KEY_FILE: key file " + ctl + ":2: an API key holds a control character (an escape)"},
		{"engine.args with a newline within", nil, []string{"--profile", ctlArgs}, "error: profile " + ctlArgs + ":3: engine flag --api-key gives an API key that holds a control character (a newline) at byte 13"},
		{"engine.env with a DEL within", nil, []string{"--profile", ctlEnv}, "error: profile " + ctlEnv + ":6: engine.env: env LLAMA_API_KEY: an API key holds a control character (a DEL) at byte 13"},
	} {
		for _, cmd := range [][]string{{"serve", "--dry-run"}, {"resolve"}} {
			code, o, e := withEnv(tc.env).cli(append(cmd, tc.args...)...)
			if code != 2 || !strings.Contains(unwrap(e), tc.want) || strings.Contains(o+e, k) || strings.Contains(o+e, "second") || strings.Contains(o+e, "NLKEY") {
				t.Errorf("%s, %q: exit %d, want 2 and %q, the key not printed:\n%s%s", tc.name, cmd, code, tc.want, o, e)
			}
		}
	}
}
