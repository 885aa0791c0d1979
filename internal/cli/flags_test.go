package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/llamaflags"
)

func testModel(t *testing.T) *kong.Node {
	t.Helper()
	var app App
	p, err := kong.New(&app, kong.Name("speclaunch"))
	if err != nil {
		t.Fatal(err)
	}
	return p.Model.Node
}

func TestPrepass(t *testing.T) {
	app := testModel(t)
	cases := []struct {
		name   string
		args   string
		kong   string
		engine string
		err    string
	}{
		{name: "llama flags pass through in order with their values",
			args:   "serve -m t -ngl 99 -c 8192 -fa on --jinja -np 4 -hf org/repo --profile p",
			kong:   "serve --model t --profile p",
			engine: "-ngl 99 -c 8192 -fa on --jinja -np 4 -hf org/repo"},
		{name: "then the arguments after --",
			args: "serve -ngl 99 -- --sim-warmup 1s -c 3", kong: "serve", engine: "-ngl 99 --sim-warmup 1s -c 3"},
		{name: "two values", args: "resolve --control-vector-layer-range 1 9 -m t", kong: "resolve --model t", engine: "--control-vector-layer-range 1 9"},
		{name: "= form", args: "bench --ctx-size=4096 --rounds=3", kong: "bench --rounds=3", engine: "--ctx-size=4096"},
		{name: "a negative value goes with its flag", args: "serve -ngl -1 --keep -1", kong: "serve", engine: "-ngl -1 --keep -1"},
		{name: "-md is the launcher's", args: "resolve -m t -md d", kong: "resolve --model t --draft-model d"},
		{name: "-m=", args: "resolve -m=t", kong: "resolve --model=t"},
		{name: "-h stays short", args: "serve -h", kong: "serve -h"},
		{name: "-md=", args: "resolve -md=d", kong: "resolve --draft-model=d"},
		{name: "long aliases stay with Kong", args: "resolve --model-draft d --spec-type draft-mtp --draft-max 3", kong: "resolve --model-draft d --spec-type draft-mtp --draft-max 3"},
		{name: "a negative number joins its launcher flag", args: "bench --rounds -1", kong: "bench --rounds=-1"},
		{name: "--usage is --help", args: "serve --usage", kong: "serve --help"},
		{name: "--version anywhere", args: "serve --version", kong: "serve --version"},
		{name: "other commands leave llama flags to Kong", args: "policy list -ngl 3", kong: "policy list -ngl 3"},
		{name: "an unknown long flag names the nearest", args: "serve --draft-blok-size 3", err: "unknown flag --draft-blok-size: neither a speclaunch flag nor one llama-server lists (did you mean --draft-block-size?)"},
		{name: "a mistyped llama-server flag names it with its spellings", args: "serve --ngl 99", err: "unknown flag --ngl: neither a speclaunch flag nor one llama-server lists (did you mean llama-server's -ngl, --gpu-layers, --n-gpu-layers?)"},
		{name: "a llama-server flag of one spelling", args: "serve --metric", err: "(did you mean llama-server's --metrics?)"},
		{name: "a flag with an invisible character after it", args: "resolve --api-key\u200b K", err: `flag "--api-key\u200b" has white space or an invisible character around it`},
		{name: "a launcher flag wins a tie", args: "serve --dryrun", err: "(did you mean --dry-run?)"},
		{name: "an unknown multi-letter short flag", args: "serve -ngx 3", err: "unknown flag -ngx"},
		{name: "a value is missing", args: "serve -m t -ngl", err: "llama-server flag -ngl takes 1 value(s) and got none"},
		{name: "a flag where a value goes", args: "serve -c --dry-run -m t", err: "llama-server flag -c needs a value, and --dry-run after it is a flag"},
		{name: "a llama flag where a value goes", args: "serve -m t -c --jinja", err: "llama-server flag -c needs a value, and --jinja after it is a flag"},
		{name: "a value is not --", args: "serve -ngl -- 3", err: "-ngl takes 1 value"},
		// --host and --port are serve's address: bench's and tune's engines
		// take loopback ports (--base-port). Routed to the engine, they were
		// refused with serve's fix, "set it with speclaunch --port".
		{name: "serve's port in tune", args: "tune --port 9000", err: "unknown flag --port: a flag of serve and resolve"},
		{name: "serve's host in bench", args: "bench --host=0.0.0.0", err: "unknown flag --host: a flag of serve and resolve"},
		{name: "serve's own port", args: "serve --port 9000", kong: "serve --port 9000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := prepass(app, strings.Fields(c.args))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k := strings.Join(got.kong, " "); k != c.kong {
				t.Errorf("kong args %q, want %q", k, c.kong)
			}
			if e := strings.Join(got.engine, " "); e != c.engine {
				t.Errorf("engine args %q, want %q", e, c.engine)
			}
		})
	}
}

// ownedLlamaFlags are the llama-server flags the launcher answers itself:
// help and version, and the settings it owns (target, drafter, kind, width,
// address). Adding one is a decision, so the list is spelled out.
var ownedLlamaFlags = []string{
	"-h", "--help", "--usage", "--version",
	"-m", "--model", "--host", "--port",
	"-md", "--model-draft", "--spec-draft-model", "--spec-type",
	"--spec-draft-n-max", "--draft", "--draft-n", "--draft-max",
}

// Every flag of llama-server's captured --help (both trees) is either the
// launcher's own or passed to the engine whole: the flag and exactly the
// values llama-server gives it, in order.
func TestEveryLlamaFlagIsOwnedOrPassedThrough(t *testing.T) {
	app := testModel(t)
	var lists [][]llamaflags.Flag
	for _, f := range []string{"new-help.txt", "old-help.txt"} {
		b, err := os.ReadFile("../fakellama/testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		lists = append(lists, llamaflags.Parse(string(b)))
	}
	flags, err := llamaflags.Merge(lists...)
	if err != nil {
		t.Fatal(err)
	}
	if len(flags) < 300 {
		t.Fatalf("only %d flags parsed from the captures", len(flags))
	}
	for _, name := range llamaflags.Names(flags) {
		f := flags[name]
		args := []string{"serve", name}
		for i := 0; i < f.Values; i++ {
			args = append(args, "7")
		}
		args = append(args, "--profile", "p")
		got, err := prepass(app, args)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if slices.Contains(ownedLlamaFlags, name) {
			if len(got.engine) != 0 || !slices.Contains(got.kong, "--profile") {
				t.Errorf("%s is the launcher's own but went to the engine: kong %q, engine %q", name, got.kong, got.engine)
			}
			continue
		}
		if want := args[1 : 2+f.Values]; !slices.Equal(got.engine, want) {
			t.Errorf("%s: engine args %q, want %q (kong %q)", name, got.engine, want, got.kong)
		}
		if !slices.Equal(got.kong, []string{"serve", "--profile", "p"}) {
			t.Errorf("%s: kong args %q, want serve --profile p", name, got.kong)
		}
	}
}

// A boolean flag takes the words its variable takes (on/off, enabled/
// disabled as well as true/false, 1/0, yes/no); anything else is exit 2
// naming the flag.
func TestBoolFlagsTakeTheVariablesWords(t *testing.T) {
	for _, c := range []struct {
		arg     string
		code    int
		proxied bool
	}{
		{"--proxy=on", 0, true},
		{"--proxy=off", 0, false},
		{"--proxy=disabled", 0, false},
		{"--proxy=yes", 0, true},
		{"--proxy=0", 0, false},
		{"--proxy", 0, true},
		{"--proxy=maybe", 2, false},
		{"--no-proxy", 0, false},
		{"--no-proxy=false", 0, true},
	} {
		code, o, e := runCLI(t, "serve", "--dry-run", "--profile", "../../profiles/demo.toml", c.arg)
		if code != c.code || c.code == 0 && strings.Contains(o, "(proxy off)") == c.proxied ||
			c.code == 2 && !strings.Contains(e, `--proxy: bad boolean "maybe"`) {
			t.Errorf("%s: exit %d (want %d), proxied %v (want %v):\n%s%s", c.arg, code, c.code, !strings.Contains(o, "(proxy off)"), c.proxied, o, e)
		}
	}
}

// Every boolean flag whose setting defaults to true takes --no-X, as
// --probe did alone (help: --[no-]probe), and X=false still: --no-proxy was
// "unknown flag --no-proxy (did you mean --no-probe?)", a flag doing
// something else, and --no-watch was refused.
func TestDefaultTrueFlagsNegate(t *testing.T) {
	app := testModel(t)
	defaultTrue := map[string]bool{}
	for _, r := range config.Rows {
		if r.Flag != "" && r.Default == "true" {
			defaultTrue[r.Flag] = true
		}
	}
	seen := 0
	for _, cmd := range []string{"serve", "resolve"} {
		for _, f := range childNamed(app, cmd).Flags {
			if f.IsBool() && defaultTrue[f.Name] {
				seen++
				if f.Tag.Negatable == "" {
					t.Errorf("%s --%s defaults to true but takes no --no-%s", cmd, f.Name, f.Name)
				}
			}
		}
	}
	if seen < 4 { // serve's probe, watch, proxy; resolve's proxy
		t.Errorf("%d default-true boolean flags found, want serve's --probe, --watch, --proxy and resolve's --proxy", seen)
	}
	_, help, _ := runCLI(t, "serve", "--help")
	for _, f := range []string{"--[no-]probe", "--[no-]watch", "--[no-]proxy"} {
		if !strings.Contains(help, f) {
			t.Errorf("serve --help lacks %s", f)
		}
	}
	for _, args := range [][]string{{"--no-watch"}, {"--watch=false"}, {"--no-probe"}, {"--no-proxy", "--no-watch", "--no-probe"}} {
		code, o, e := runCLI(t, append([]string{"serve", "--dry-run", "--profile", "../../profiles/demo.toml"}, args...)...)
		if code != 0 {
			t.Errorf("%v: exit %d\n%s%s", args, code, o, e)
		}
	}
	code, o, e := runCLI(t, "resolve", "--engine", "sim", "-m", "t", "-md", "d", "--quant", "affine", "--capability", "12.1", "--adapt", "--no-proxy")
	if code != 0 || !strings.Contains(o, "the proxy is off") {
		t.Errorf("resolve --adapt --no-proxy: exit %d\n%s%s", code, o, e)
	}
	// A profile's adapt.enabled = true is turned off for one run by
	// --no-adapt, as by --adapt=false (it was "unknown flag --no-adapt").
	dir := t.TempDir()
	prof := filepath.Join(dir, "a.toml")
	if err := os.WriteFile(prof, []byte("[engine]\nname = \"sim\"\n[model]\npath = \"t\"\n[draft]\nmodel = \"d\"\n[adapt]\nenabled = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, off := range []string{"--no-adapt", "--adapt=false"} {
		code, o, e := runCLI(t, "resolve", "--profile", prof, "--quant", "affine", "--capability", "12.1", off)
		if code != 0 || strings.Contains(o, "adaptive    on") || !strings.Contains(o, "adaptive    off (flag "+strings.TrimSuffix(off, "=false")+")") {
			t.Errorf("resolve %s over adapt.enabled = true: exit %d\n%s%s", off, code, o, e)
		}
	}
	// The nearest flag is named only where it is a typo of it: both
	// edits in one short word name another flag (--no-prune, --no-probe).
	if _, err := prepass(app, []string{"serve", "--no-prune"}); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("serve --no-prune: %v, want no flag named", err)
	}
}

// A flag given without its value says which flag and what it takes, for
// every flag (Kong said `expected string value but got "EOL" (<EOL>)`).
func TestMissingFlagValue(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--port"}, "--port needs a value: give --port=PORT"},
		{[]string{"serve", "--port", "--engine", "sim"}, "--port needs a value, and --engine after it is a flag: give --port=PORT"},
		{[]string{"bench", "--rounds"}, "--rounds needs a value: give --rounds=N"},
		{[]string{"tune", "--window"}, "--window needs a value: give --window=DUR"},
		{[]string{"policy", "list", "--policy"}, "--policy needs a value: give --policy=FILE"},
	} {
		var out bytes.Buffer
		code := MainContext(context.Background(), tc.args, policyTOML, &out, &out, nil)
		if code != 2 || !strings.Contains(out.String(), "error: "+tc.want) || strings.Contains(out.String(), "EOL") {
			t.Errorf("%v: exit %d, output:\n%s\nwant 2 and %q", tc.args, code, out.String(), tc.want)
		}
	}
}

// A launcher flag given by an alias is named as typed wherever its source
// shows: `--spec-type none` was refused as "flag --draft-kind: bad drafter
// kind", naming a flag the operator never typed. The long name typed
// after an alias is the one whose value stands, and is named.
func TestAliasNamedAsTyped(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	launch := []string{"serve", "--dry-run", "--engine", "llama.cpp", "-m", "x.gguf", "--capability", "9.0", "--quant", "q4_0"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"--spec-type none", []string{"-md", "d.gguf", "--spec-type", "none"}, `error: flag --spec-type: bad drafter kind: "none" would turn speculation off`},
		{"--spec-type=", []string{"-md", "d.gguf", "--spec-type=ngram-mod"}, `error: flag --spec-type: bad drafter kind: "ngram-mod" is n-gram speculation`},
		{"--draft-kind none", []string{"-md", "d.gguf", "--draft-kind", "none"}, `error: flag --draft-kind: bad drafter kind: "none"`},
		{"the long name last", []string{"-md", "d.gguf", "--spec-type", "draft", "--draft-kind", "none"}, `error: flag --draft-kind: bad drafter kind: "none"`},
		{"the alias last", []string{"-md", "d.gguf", "--draft-kind", "draft", "--spec-type", "none"}, `error: flag --spec-type: bad drafter kind: "none"`},
		{"--draft-max 0", []string{"-md", "d.gguf", "--draft-max", "0"}, "error: flag --draft-max: draft token count 0 means no drafting"},
		{"--spec-draft-n-max 0", []string{"-md", "d.gguf", "--spec-draft-n-max", "0"}, "error: flag --spec-draft-n-max: draft token count 0 means no drafting"},
		{"--spec-draft-n-max -3", []string{"-md", "d.gguf", "--spec-draft-n-max", "-3"}, "error: flag --spec-draft-n-max: draft token count -3 is negative; want N from 1 to"},
		// An engine argument the launcher refuses reads as a sentence
		// naming it, after where it was typed: it read "flag engine
		// arguments (…): engine argument conflicts with the launcher: …".
		{"a refused engine argument", []string{"-md", "d.gguf", "--", "--draft-max", "3"},
			`error: engine arguments on the command line (llama-server flags as typed, and after --): engine argument "--draft-max" sets the draft width: speclaunch takes it as its own flag typed before -- (draft tokens N, width N+1): move it before --, or set the width with speclaunch --draft-block-size W`},
	} {
		code, o, e := runCLI(t, append(slices.Clone(launch), tc.args...)...)
		if code != 2 || !strings.Contains(unwrap(e), tc.want) {
			t.Errorf("%s: exit %d, want 2 and %q:\n%s%s", tc.name, code, tc.want, o, e)
		}
	}
	// profile show says where each setting came from, as typed.
	code, o, e := runCLI(t, "profile", "show", "--engine", "llama.cpp", "-m", "x.gguf", "--model-draft", "d.gguf", "--spec-type", "draft-simple")
	if code != 0 || !regexp.MustCompile(`draft-kind +draft-simple +flag --spec-type\n`).MatchString(o) || !regexp.MustCompile(`draft-model +d.gguf +flag --model-draft\n`).MatchString(o) {
		t.Errorf("profile show: exit %d, want the sources as typed:\n%s%s", code, o, e)
	}
}

// A negatable flag given as its negation is named so: serve's effective
// settings read adapt="false (flag --adapt)" for --no-adapt. The one typed
// last stands.
func TestNegationNamedAsTyped(t *testing.T) {
	app := testModel(t)
	for _, tc := range []struct{ args, want string }{
		{"serve --no-adapt", "--no-adapt"},
		{"serve --no-watch --no-adapt", "--no-adapt"},
		{"serve --no-adapt --adapt", ""},
		{"resolve --no-proxy", ""},
	} {
		p, err := prepass(app, strings.Fields(tc.args))
		if err != nil || p.spelled["adapt"] != tc.want {
			t.Errorf("%s: adapt spelled %q (%v), want %q", tc.args, p.spelled["adapt"], err, tc.want)
		}
	}
}

// A flag that differs from a known one only in case is to be spelt right:
// after --, llama-server (case-sensitive) would refuse it, which the
// hint to put it there led to.
func TestCaseOnlyFlagHint(t *testing.T) {
	app := testModel(t)
	for _, args := range []string{"serve --PORT 9000", "serve -NGL 99", "resolve --CTX-SIZE 8192"} {
		_, err := prepass(app, strings.Fields(args))
		var e *exitError
		if !errors.As(err, &e) || !strings.HasPrefix(e.Hint, "spell it ") || !strings.Contains(e.Hint, "case-sensitive") {
			t.Errorf("%s: %v, want a hint to spell it right", args, err)
		}
	}
}

// curl's credential flags typed before -- are told what to do instead,
// not to put them after --, where they are refused.
func TestCurlCredentialFlagHint(t *testing.T) {
	app := testModel(t)
	for _, args := range []string{"serve --user me:SEKRETzz9876", "serve -uuser:SEKRETzz9876", "resolve --cookie=sid=SEKRETzz9876", "serve -HX-Api-Key:SEKRETzz9876"} {
		_, err := prepass(app, strings.Fields(args))
		var e *exitError
		if !errors.As(err, &e) || !strings.Contains(e.Hint, "HTTP client's credential") || strings.Contains(e.Error()+e.Hint, "SEKRETzz9876") {
			t.Errorf("%s: %v, want the credential hint and the key masked", args, err)
		}
	}
}
