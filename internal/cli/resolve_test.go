package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/width"
)

// resolve's schedule rows say each load with the count's own number, the
// widths lined up: "1      requests in flight" was the row of one request.
func TestWriteScheduleRowsCountRequests(t *testing.T) {
	for _, c := range []struct {
		sched string
		want  []string
	}{
		{"1:1,2+:4", []string{
			"schedule 1 request in flight:   width 1 (speculation off) (operator)",
			"         2+ requests in flight: width 4 (operator)"}},
		{"1:6,2-3:4,4+:1", []string{
			"schedule 1 request in flight:    width 6 (operator)",
			"         2-3 requests in flight: width 4 (operator)",
			"         4+ requests in flight:  width 1 (speculation off) (operator)"}},
	} {
		s, err := schedule.Parse(c.sched, "operator")
		if err != nil {
			t.Fatal(err)
		}
		p := &plan.Plan{Resolution: width.Resolution{Source: width.Measured, Schedule: s}}
		p.Settings.Engine.Value = key.VLLM
		var rows []string
		writeSchedule(func(k, v string) { rows = append(rows, fmt.Sprintf("%-8s %s", k, v)) }, p)
		if got := strings.Join(rows[:len(s)], "\n"); got != strings.Join(c.want, "\n") {
			t.Errorf("%s: rows\n%s\nwant\n%s", c.sched, got, strings.Join(c.want, "\n"))
		}
	}
}

// policy explain shows no engine command, so it does not warn that a key
// query (no target model) leaves none to show; resolve, which shows one
// when it can, still does. explain's notes ended with that warning.
func TestExplainDoesNotWarnOfNoCommand(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	keyQuery := []string{"--engine", "mlxcel", "--draft-kind", "dflash", "--capability", "12.1", "--quant", "affine"}
	for _, tc := range []struct {
		cmd  []string
		warn bool // "no engine command to show" said
	}{
		{[]string{"policy", "explain"}, false},
		{[]string{"policy", "explain", "--json"}, false},
		{[]string{"resolve"}, true},
	} {
		code, o, e := runCLI(t, append(tc.cmd, keyQuery...)...)
		if said := strings.Contains(o+e, "no engine command to show"); code != 0 || said != tc.warn {
			t.Errorf("%s: exit %d, the warning said %v, want 0 and %v:\n%s%s", strings.Join(tc.cmd, " "), code, said, tc.warn, o, e)
		}
	}
}

// policy explain's precedence names the schedule beside the width as an
// operator override: it named only the width's settings (a new-user pass).
func TestExplainPrecedenceNamesTheSchedule(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	code, o, e := runCLI(t, "policy", "explain", "--engine", "mlxcel", "--draft-kind", "dflash", "--capability", "12.1", "--quant", "affine")
	if code != 0 || !strings.Contains(o, "or a schedule (--draft-schedule, MLXCEL_DRAFT_SCHEDULE, profile draft.schedule)") {
		t.Errorf("exit %d:\n%s%s", code, o, e)
	}
}

// A key flag typed with another dash before -- is named with the fix,
// not sent after --, where it is refused too; the message's words stay
// (a recheck: "-—api-key: ****ther").
func TestDashedKeyFlagBeforeDoubleDash(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	code, o, e := runCLI(t, "resolve", "--profile", "../../profiles/demo.toml", "-\u2014api-key", "SEKRETkey1234567")
	if code != 2 || !strings.Contains(e, "neither a speclaunch flag") || !strings.Contains(e, "type --api-key with ASCII dashes") || strings.Contains(o+e, "SEKRETkey1234567") {
		t.Errorf("exit %d:\n%s%s", code, o, e)
	}
}

// A flag typed with another dash and no ASCII one ("—api-key K", a word
// processor's) is a stray argument named with its fix, not sent after --.
func TestOtherDashFlagAsArgument(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, a := range []string{"\u2014api-key", "\u2013\u2013api-key=SEKRETkey1234567", "\u2212\u2212port", "tune \u2014api-key"} {
		cmd := "resolve"
		if c, rest, ok := strings.Cut(a, " "); ok { // tune ran its sweep with the key dropped (a recheck)
			cmd, a = c, rest
		}
		code, o, e := runCLI(t, cmd, "--profile", "../../profiles/demo.toml", a, "SEKRETkey1234567")
		want := "type --api-key with ASCII dashes"
		if strings.Contains(a, "port") {
			want = "type --port with ASCII dashes"
		}
		if code != 2 || !strings.Contains(e, want) || strings.Contains(o+e, "SEKRETkey1234567") {
			t.Errorf("%q: exit %d:\n%s%s", a, code, o, e)
		}
	}
}

// resolve --json's facts.pair is in the snake_case of every other key:
// it was {"Target", "Draft", "Pin"}, Go's field names.
func TestResolveJSONPairKeys(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no tuned layer of the machine's
	pol := filepath.Join(t.TempDir(), "tuned.toml")
	// An entry keyed to a pair makes resolve hash the launch's pair.
	writeFile(t, pol, "schema = 1\n\n"+tunedEntryTOML("x", "9.0", "q8_0", "[[1, 3, 16], [4, 0, 1]]", "a"))
	code, o, e := runCLI(t, "resolve", "--json", "--profile", "../../profiles/demo-load.toml", "--policy", pol)
	var res struct {
		Facts struct {
			Pair map[string]string `json:"pair"`
		} `json:"facts"`
	}
	if err := json.Unmarshal([]byte(o), &res); code != 0 || err != nil {
		t.Fatalf("resolve --json: exit %d, %v\n%s%s", code, err, o, e)
	}
	p := res.Facts.Pair
	if len(p) != 3 || len(p["target"]) != 64 || len(p["draft"]) != 64 || p["pin"] != "sim" {
		t.Errorf("facts.pair = %v, want the keys target, draft and pin", p)
	}
}

// A stray argument's example names the command typed (tune's said serve).
func TestStrayArgumentExampleNamesTheCommand(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, cmd := range [][]string{{"resolve"}, {"tune"}, {"profile", "show"}} {
		args := append(append([]string(nil), cmd...), "--profile", "../../profiles/demo.toml", "stray")
		code, _, e := runCLI(t, args...)
		if want := "e.g. speclaunch " + strings.Join(cmd, " ") + " --profile P -- --ctx-size 8192"; code != 2 || !strings.Contains(e, want) {
			t.Errorf("%v: exit %d, want %q in:\n%s", cmd, code, want, e)
		}
	}
}

// A schedule off at one request prints the rows of any schedule: where it
// came from, each bucket, the drafter and the key (they were left out, as
// for a launch with no drafter).
func TestResolveScheduleOffAtOneRequestShowsItsRows(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	code, o, e := runCLI(t, "resolve", "--profile", "../../profiles/demo-load.toml", "--draft-schedule", "1:1,2+:6")
	for _, want := range []string{"source      override from flag --draft-schedule", "width 1 (speculation off) (override", "2+ requests in flight: width 6", "  drafter     dflash", "  key         engine="} {
		if code != 0 || !strings.Contains(o, want) {
			t.Errorf("exit %d, no %q:\n%s%s", code, want, o, e)
		}
	}
}

// resolve says what serve does with a schedule: with --no-proxy serve does
// not follow it, and resolve said it would (a new-operator pass).
func TestResolveSaysWhetherServeFollows(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, tc := range []struct {
		flag, want string
	}{
		{"--proxy", "serve starts at the width for one request in flight and follows the schedule"},
		{"--no-proxy", "serve does not follow it: the proxy is off (--no-proxy)"},
	} {
		code, o, e := runCLI(t, "resolve", "--profile", "../../profiles/demo-load.toml", "--draft-schedule", "1:5,2+:1", tc.flag)
		_, j, _ := runCLI(t, "resolve", "--profile", "../../profiles/demo-load.toml", "--draft-schedule", "1:5,2+:1", tc.flag, "--json")
		if code != 0 || !strings.Contains(o, tc.want) || !strings.Contains(j, `"follow": "`+tc.want) {
			t.Errorf("%s: exit %d, no %q:\n%s%s\n%s", tc.flag, code, tc.want, o, e, j)
		}
	}
}

// llama.cpp's mtp kind with no draft model drafts from the target's own
// MTP layers: resolve's headline, drafter row, command and JSON say so
// alike. It answered for a "hypothetical" drafter with a command without
// speculation.
func TestResolveEmbeddedMTP(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	args := []string{"resolve", "--engine", "llama.cpp", "-m", "t.gguf", "--spec-type", "draft-mtp", "--capability", "9.0", "--quant", "q4_0", "--adapt"}
	code, o, e := runCLI(t, args...)
	for _, want := range []string{
		"draft width 4 (",
		"\n  drafter     mtp (flag --spec-type), the target's own MTP layers (no draft model)\n",
		"llama-server -m t.gguf --spec-type draft-mtp --spec-draft-n-max 3 --host",
	} {
		if code != 0 || !strings.Contains(o, want) {
			t.Errorf("exit %d, lacks %q:\n%s%s", code, want, o, e)
		}
	}
	if strings.Contains(o, "hypothetical") || strings.Contains(o, "no draft model: speculation is off") {
		t.Errorf("a hypothetical drafter or no speculation said:\n%s", o)
	}
	code, o, e = runCLI(t, append(args, "--json")...)
	var res struct {
		Speculative bool     `json:"speculative"`
		Argv        []string `json:"argv"`
		Facts       struct {
			Drafter      string `json:"drafter"`
			Embedded     bool   `json:"drafter_embedded"`
			From         string `json:"drafter_from"`
			Hypothetical bool   `json:"hypothetical"`
		} `json:"facts"`
	}
	if err := json.Unmarshal([]byte(o), &res); code != 0 || err != nil {
		t.Fatalf("exit %d, %v:\n%s%s", code, err, o, e)
	}
	f := res.Facts
	if !res.Speculative || !f.Embedded || f.Hypothetical || f.Drafter != "mtp" || f.From != "the target's own MTP layers (no draft model)" ||
		!strings.Contains(strings.Join(res.Argv, " "), "--spec-type draft-mtp --spec-draft-n-max 3") {
		t.Errorf("json: %+v", res)
	}
}

// A path with control characters is said escaped on resolve's rows: one
// line each, no escape sequence reaching the terminal (a newline split the
// target row, an ESC coloured or cleared the screen).
func TestResolveRowsEscapeControls(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	odd := filepath.Join(t.TempDir(), "a\nb\x1b[31m.txt")
	if err := os.WriteFile(odd, []byte("stand-in"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, o, e := runCLI(t, "resolve", "--engine", "sim", "-m", odd, "-md", "d", "--capability", "9.0", "--quant", "q8_0")
	head, _, _ := strings.Cut(o, "command:")
	if code != 0 || strings.Contains(head, "\x1b") || !strings.Contains(head, `a\nb\x1b[31m.txt, quant q8_0`) {
		t.Errorf("exit %d:\n%q\n%s", code, o, e)
	}
}
