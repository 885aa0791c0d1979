package config

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/profiles"
)

var update = flag.Bool("update", false, "rewrite the generated tables of docs/environment-variables.md")

var scopeNames = map[Scope]string{ScopeLaunch: "launch", ScopeServe: "serve", ScopeBench: "bench"}

// The tables of docs/environment-variables.md are DocTable's, so a new row
// shows there (run with -update to rewrite them).
func TestDocTables(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "environment-variables.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for sc, name := range scopeNames {
		begin := fmt.Sprintf("<!-- generated from config.Rows (%s); `go test ./internal/config -run TestDocTables -update` rewrites it -->\n", name)
		end := fmt.Sprintf("<!-- end generated (%s) -->", name)
		i, j := strings.Index(doc, begin), strings.Index(doc, end)
		if i < 0 || j < i {
			t.Fatalf("%s: no generated %s table (markers %q ... %q)", path, name, begin, end)
		}
		i += len(begin)
		if want := DocTable(sc); doc[i:j] != want {
			if *update {
				doc = doc[:i] + want + doc[j:]
				continue
			}
			t.Errorf("%s: the %s table is not DocTable's; run go test ./internal/config -run TestDocTables -update\n got: %s\nwant: %s", path, name, doc[i:j], want)
		}
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Every row's profile key is one the profile decoder reads, and every key
// it reads that is a setting has a row: a key added to profiles.Profile
// without a row (or a row with a mistyped key) fails here.
func TestRowKeysAreProfileKeys(t *testing.T) {
	// Keys that are not settings: passed to the engine as they are, or
	// tables the policy parser reads.
	notRows := []string{"engine.env", "policy.entry"}
	var keys []string
	var walk func(prefix string, ty reflect.Type)
	walk = func(prefix string, ty reflect.Type) {
		for i := range ty.NumField() {
			f := ty.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "" || name == "-" {
				continue
			}
			if f.Type.Kind() == reflect.Struct {
				walk(prefix+name+".", f.Type)
				continue
			}
			keys = append(keys, prefix+name)
		}
	}
	walk("", reflect.TypeOf(profiles.Profile{}))
	var rowKeys []string
	for _, r := range Rows {
		if r.Key != "" {
			rowKeys = append(rowKeys, r.Key)
		}
	}
	for _, k := range keys {
		if !slices.Contains(rowKeys, k) && !slices.Contains(notRows, k) {
			t.Errorf("profile key %s has no row in config.Rows", k)
		}
	}
	for _, k := range rowKeys {
		if !slices.Contains(keys, k) {
			t.Errorf("row key %s is not a key of profiles.Profile", k)
		}
	}
}

// A duration row's profile key is one profiles tags kind:"duration", and
// no other is: a number written for it is said with the string to write
// ("30s"), one rule for every duration key.
func TestDurationRowsAreDurationKeys(t *testing.T) {
	n := 0
	for _, r := range Rows {
		if r.Key == "" {
			continue
		}
		if r.duration {
			n++
		}
		if got := profiles.DurationKey(r.Key); got != r.duration {
			t.Errorf("row %s: profiles.DurationKey(%q) = %v, the row reads a duration: %v", r.Name, r.Key, got, r.duration)
		}
	}
	if n < 7 {
		t.Errorf("%d duration rows with a profile key, want at least 7 (the timeouts and adapt.window)", n)
	}
}

// A duration key written as a number is refused with a string to write
// that the key's setting takes: "+Infs", "-5s", "99999999999s" and "0s"
// (for a key that takes no 0) were suggested, then refused. A key that
// reads 0 as off is one profiles tags zero:"off", and no other is.
func TestNumberForDurationSuggestsATakenValue(t *testing.T) {
	suggested := regexp.MustCompile(`such as ("[^"]*")`)
	for _, r := range Rows {
		if !r.duration || r.Key == "" || r.Scope == ScopeBench {
			continue
		}
		var s Settings
		load := func(v string) error {
			p, err := profiles.Parse("p.toml", []byte(r.Key+" = "+v+"\n"))
			if err != nil {
				return err
			}
			l := &layer{in: Input{Getenv: env(nil)}, prof: p}
			return r.layer(l, &s, true)
		}
		if off := load(`"0s"`) == nil; off != profiles.OffKey(r.Key) {
			t.Errorf("%s: takes 0: %v, profiles.OffKey: %v", r.Key, off, profiles.OffKey(r.Key))
		}
		for _, n := range []string{"30", "0.5", "0", "-0.0", "-5", "inf", "-inf", "nan", "1e-12", "9000000000", "99999999999", "1e300"} {
			err := load(n)
			m := suggested.FindStringSubmatch(fmt.Sprint(err))
			if m == nil {
				t.Errorf("%s = %s: %v, want a suggestion", r.Key, n, err)
				continue
			}
			if err := load(m[1]); err != nil {
				t.Errorf("%s = %s: suggests %s, which is refused: %v", r.Key, n, m[1], err)
			}
		}
	}
}

// Rows are unique by name, flag and variable, and each variable sits on a
// flag's --help: its own flag's, or the one it tunes (HelpOn); a retired
// row's on none.
func TestRowsUniqueAndOnAFlag(t *testing.T) {
	names, flags, envs := map[string]bool{}, map[string]bool{}, map[string]string{}
	for _, r := range Rows {
		if names[r.Name] {
			t.Errorf("row %s is listed twice", r.Name)
		}
		names[r.Name] = true
		if r.Flag != "" && flags[r.Flag] {
			t.Errorf("flag --%s sets two rows", r.Flag)
		}
		flags[r.Flag] = true
		for _, e := range r.Envs {
			if other, ok := envs[e]; ok {
				t.Errorf("%s sets both %s and %s", e, other, r.Name)
			}
			envs[e] = r.Name
		}
		if r.Doc == "" {
			t.Errorf("row %s has no doc line", r.Name)
		}
		on := r.Flag
		if on == "" {
			on = r.HelpOn
		}
		if len(r.Envs) == 0 {
			continue
		}
		if r.Retired {
			for _, f := range Rows {
				help, _ := HelpFor(f.Flag)
				for _, e := range r.Envs {
					if strings.Contains(help, "$"+e) {
						t.Errorf("retired row %s: --%s help %q names $%s", r.Name, f.Flag, help, e)
					}
				}
			}
			continue
		}
		help, ok := HelpFor(on)
		if !ok {
			t.Errorf("row %s: its variables are on no flag's --help (Flag or HelpOn)", r.Name)
		}
		for _, e := range r.Envs {
			if !strings.Contains(help, "$"+e) {
				t.Errorf("row %s: --%s help %q does not name $%s", r.Name, on, help, e)
			}
		}
	}
}

// Every row's profile key is documented in docs/profiles.md.
func TestRowKeysInProfilesDoc(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "profiles.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Rows {
		if r.Key != "" && !strings.Contains(string(doc), "`"+r.Key+"`") {
			t.Errorf("docs/profiles.md does not document `%s` (row %s)", r.Key, r.Name)
		}
	}
}

// docs/profiles.md quotes a refused duration as the binary says it, a
// bare number's and a string's, with the same range: it quoted the range
// for "-5" in quotes, which said "must be above 0" and no bound.
func TestProfilesDocQuotesDurationErrors(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "profiles.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(doc)), " ")
	_, err = parseDuration("-5")
	if err == nil {
		t.Fatal(`"-5" parsed`)
	}
	for _, quote := range []string{
		"`such as \"5m\" or \"90s\", " + profiles.DurationRange(false) + "`", // the bare number's (profiles.numberForDuration)
		"`profile p.toml:3: server.drain_timeout: " + err.Error() + "`",      // the key named (keyed)
	} {
		if !strings.Contains(text, quote) {
			t.Errorf("docs/profiles.md does not quote %s", quote)
		}
	}
}

func TestHelpFor(t *testing.T) {
	for _, c := range []struct {
		flag string
		want string // "" = no row
	}{
		{"port", "(env: $LLAMA_ARG_PORT, $MLXCEL_PORT; default 8080)"},
		{"ready-timeout", "(env: $MLXCEL_READY_TIMEOUT; default 15m)"},
		{"hang-timeout", "(env: $MLXCEL_HANG_TIMEOUT; default 30s)"},
		{"model", "(env: $LLAMA_ARG_MODEL, $MLXCEL_MODEL)"},
		{"rounds", "(profile bench.rounds; default 5)"},
		{"request-timeout", "(default 2m)"},
		// not the retired $MLXCEL_ADAPT_EXPLORE_WIDTH and $MLXCEL_ADAPT_MARGIN
		{"adapt", "(env: $MLXCEL_ADAPT; default false; tuned by $MLXCEL_ADAPT_MAX_WIDTH, $MLXCEL_ADAPT_MIN_CYCLES, $MLXCEL_ADAPT_TRIALS, $MLXCEL_ADAPT_WINDOW)"},
		{"dry-run", ""},
		{"", ""},
	} {
		got, ok := HelpFor(c.flag)
		if ok != (c.want != "") || got != c.want {
			t.Errorf("HelpFor(%q) = %q, %v; want %q", c.flag, got, ok, c.want)
		}
	}
}

// The serve runtime's two timeouts: defaults, a flag over the env over the
// profile, and the bounds (shutdown above 0; hang 0 = off, never negative;
// either at most the longest time.Duration, said as out of range).
func TestServeRuntimeTimeouts(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.toml")
	if err := os.WriteFile(prof, []byte("[server]\nshutdown_timeout = \"45s\"\nhang_timeout = \"0\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		flags, envs map[string]string
		profile     bool
		shutdown    time.Duration
		hang        time.Duration
		src         string // the hang timeout's source
		err         string
	}{
		{name: "defaults", shutdown: 25 * time.Second, hang: 30 * time.Second, src: "default"},
		{name: "hang off", envs: map[string]string{"MLXCEL_HANG_TIMEOUT": "Off"}, shutdown: 25 * time.Second, hang: 0, src: "env MLXCEL_HANG_TIMEOUT"},
		{name: "profile", profile: true, shutdown: 45 * time.Second, hang: 0, src: "profile " + prof + ":3"},
		{name: "env over profile", profile: true, envs: map[string]string{"MLXCEL_HANG_TIMEOUT": "90"}, shutdown: 45 * time.Second, hang: 90 * time.Second, src: "env MLXCEL_HANG_TIMEOUT"},
		{name: "flag over env", flags: map[string]string{"hang-timeout": "2m", "shutdown-timeout": "1s"}, envs: map[string]string{"MLXCEL_HANG_TIMEOUT": "90"}, shutdown: time.Second, hang: 2 * time.Minute, src: "flag --hang-timeout"},
		{name: "shutdown 0", envs: map[string]string{"MLXCEL_SHUTDOWN_TIMEOUT": "0"}, err: `env MLXCEL_SHUTDOWN_TIMEOUT: bad duration "0": want above 0 and at most 2562047h (about 292 years), e.g. 30s`},
		// a negative string says the range, as a negative number in a
		// profile does (it said "must be above 0" and no bound)
		{name: "drain negative seconds", envs: map[string]string{"MLXCEL_DRAIN_TIMEOUT": "-5"}, err: `env MLXCEL_DRAIN_TIMEOUT: bad duration "-5": want above 0 and at most 2562047h (about 292 years), e.g. 30s, 10m or a number of seconds`},
		{name: "hang negative", flags: map[string]string{"hang-timeout": "-1s"}, err: `flag --hang-timeout: bad duration "-1s": want from 0 (off) up to 2562047h (about 292 years), e.g. 30s`},
		{name: "hang words", envs: map[string]string{"MLXCEL_HANG_TIMEOUT": "soon"}, err: `env MLXCEL_HANG_TIMEOUT: bad duration "soon"`},
		{name: "hold seconds past int64", envs: map[string]string{"MLXCEL_HOLD_TIMEOUT": "9223372036854775807"}, err: `env MLXCEL_HOLD_TIMEOUT: bad duration "9223372036854775807": far out of range; want above 0 and at most 2562047h (about 292 years)`},
		{name: "drain seconds past a duration", envs: map[string]string{"MLXCEL_DRAIN_TIMEOUT": "99999999999"}, err: `env MLXCEL_DRAIN_TIMEOUT: bad duration "99999999999": far out of range`},
		{name: "shutdown hours past a duration", flags: map[string]string{"shutdown-timeout": "9999999h"}, err: `flag --shutdown-timeout: bad duration "9999999h": far out of range`},
		{name: "shutdown infinite", envs: map[string]string{"MLXCEL_SHUTDOWN_TIMEOUT": "inf"}, err: `env MLXCEL_SHUTDOWN_TIMEOUT: bad duration "inf": far out of range`},
		{name: "shutdown not a number", envs: map[string]string{"MLXCEL_SHUTDOWN_TIMEOUT": "NaN"}, err: `env MLXCEL_SHUTDOWN_TIMEOUT: bad duration "NaN": want e.g. 30s`},
		{name: "hang past a duration", envs: map[string]string{"MLXCEL_HANG_TIMEOUT": "1e300"}, err: `env MLXCEL_HANG_TIMEOUT: bad duration "1e300": far out of range; want from 0 (off) up to 2562047h (about 292 years)`},
		{name: "shutdown at the longest", envs: map[string]string{"MLXCEL_SHUTDOWN_TIMEOUT": "2562047h", "MLXCEL_HANG_TIMEOUT": "off"}, shutdown: 2562047 * time.Hour, hang: 0, src: "env MLXCEL_HANG_TIMEOUT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			flags := c.flags
			if c.profile {
				flags = map[string]string{"profile": prof}
				for k, v := range c.flags {
					flags[k] = v
				}
			}
			s, _, _, err := Load(Input{Flags: flags, Getenv: env(c.envs)})
			if !wantErr(t, err, c.err) {
				return
			}
			if s.ShutdownTimeout.Value != c.shutdown || s.HangTimeout.Value != c.hang || s.HangTimeout.Src.String() != c.src {
				t.Errorf("shutdown %v, hang %v from %s; want %v, %v from %s", s.ShutdownTimeout.Value, s.HangTimeout.Value, s.HangTimeout.Src, c.shutdown, c.hang, c.src)
			}
		})
	}
}

// `profile show` prints a duration as it is: ready-timeout was rounded to
// the second, so 0.4 showed as 0s (which reads as off) and 1.5 as 2s.
func TestShowDurationsExact(t *testing.T) {
	for _, c := range []struct {
		env, value, want string
	}{
		{"MLXCEL_READY_TIMEOUT", "0.4", "400ms"},
		{"MLXCEL_READY_TIMEOUT", "1.5", "1.5s"},
		{"MLXCEL_READY_TIMEOUT", "90.25", "1m30.25s"},
		{"MLXCEL_READY_TIMEOUT", "", "15m0s"}, // the default
		{"MLXCEL_STOP_TIMEOUT", "0.4", "400ms"},
		{"MLXCEL_HANG_TIMEOUT", "0.4", "400ms"},
		{"MLXCEL_HANG_TIMEOUT", "1.5", "1.5s"},
		{"MLXCEL_DRAIN_TIMEOUT", "0.001", "1ms"},
		{"MLXCEL_HOLD_TIMEOUT", "2.5s", "2.5s"},
		{"MLXCEL_SHUTDOWN_TIMEOUT", "0.25", "250ms"},
		{"MLXCEL_ADAPT_WINDOW", "0.4", "400ms"},
	} {
		envs := map[string]string{}
		if c.value != "" {
			envs[c.env] = c.value
		}
		s, _, _, err := Load(Input{Getenv: env(envs)})
		if err != nil {
			t.Fatalf("%s=%s: %v", c.env, c.value, err)
		}
		found := false
		for _, r := range Rows {
			if !slices.Contains(r.Envs, c.env) {
				continue
			}
			found = true
			if v, _, ok := r.Show(&s); !ok || fmt.Sprint(v) != c.want {
				t.Errorf("%s=%s: profile show says %v, want %s", c.env, c.value, v, c.want)
			}
		}
		if !found {
			t.Errorf("no row reads %s", c.env)
		}
	}
}

// bench.base_port unset is no base port: each arm draws a port at random.
// The help, the docs and `profile show` said "default 18790", a port no
// arm got; a base port given is shown as given.
func TestBasePortDefaultIsRandom(t *testing.T) {
	var row Row
	for _, r := range Rows {
		if r.Key == "bench.base_port" {
			row = r
		}
	}
	if !strings.Contains(row.Default, "random in 20000-31999") || strings.Contains(row.Default, "18790") {
		t.Errorf("default %q, want the random range and no 18790", row.Default)
	}
	for _, c := range []struct {
		name, profile string
		flags         map[string]string
		want, src     string
	}{
		{"unset", "", nil, "none: a free loopback port per arm, drawn at random in 20000-31999", "default"},
		{"flag", "", map[string]string{"base-port": "18800"}, "18800", "flag --base-port"},
		{"flag at 18790", "", map[string]string{"base-port": "18790"}, "18790", "flag --base-port"},
		{"profile", "[bench]\nbase_port = 19000\n", nil, "19000", "profile p.toml:2"},
	} {
		p, err := profiles.Parse("p.toml", []byte(c.profile))
		if err != nil {
			t.Fatal(err)
		}
		var s Settings
		if err := LoadBench(&s, p, c.flags); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if v, src, _ := row.Show(&s); fmt.Sprint(v) != c.want || src != c.src {
			t.Errorf("%s: profile show says %v (%s), want %s (%s)", c.name, v, src, c.want, c.src)
		}
	}
}

// Bench's rows: flag over profile over default, and every bad value names
// the flag or the profile's file and line.
func TestLoadBench(t *testing.T) {
	parse := func(text string) *profiles.Profile {
		p, err := profiles.Parse("d/p.toml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name    string
		profile string
		flags   map[string]string
		check   func(b Bench) bool
		err     string
	}{
		{name: "defaults", check: func(b Bench) bool {
			return slices.Equal(b.Widths.Value, []int{2, 3, 4, 6, 8, 16}) && b.Rounds.Value == 5 && b.Warmup.Value == 3 && b.Schedule.Value == "restart" && b.RequestTimeout.Value == 2*time.Minute && !b.Rounds.Set()
		}},
		{name: "flag over profile", profile: "[bench]\nrounds = 7\nwidths = [2, 4]\n", flags: map[string]string{"rounds": "9"}, check: func(b Bench) bool {
			return b.Rounds.Value == 9 && b.Rounds.Src.String() == "flag --rounds" && slices.Equal(b.Widths.Value, []int{2, 4}) && b.Widths.Src.String() == "profile d/p.toml:3"
		}},
		{name: "prompt file relative to the profile", profile: "[bench]\nprompt_file = \"q.txt\"\n", check: func(b Bench) bool { return b.PromptFile.Value == filepath.Join("d", "q.txt") }},
		{name: "rounds below the floor", profile: "[bench]\nrounds = 2\n", err: "profile d/p.toml:2: bench.rounds: 2 rounds is below 3"},
		{name: "width twice", flags: map[string]string{"widths": "2,4,2"}, err: "flag --widths: width 2 is listed twice"},
		{name: "width not a number", flags: map[string]string{"widths": "2,x"}, err: `flag --widths: "x" is not a whole number`},
		{name: "width 1", profile: "[bench]\nwidths = [1, 4]\n", err: "profile d/p.toml:2: bench.widths: width 1 is below 2: classic decoding (width 1) is always measured as an arm of its own, so leave it out"},
		{name: "base port without room", flags: map[string]string{"base-port": "65530"}, err: "flag --base-port: base port 65530: want a port with room for one per arm"},
		{name: "schedule", profile: "[bench]\nschedule = \"Resident\"\n", err: `profile d/p.toml:2: bench.schedule: schedule "Resident": want restart or resident`},
		{name: "temperature", flags: map[string]string{"temperature": "6"}, err: "flag --temperature: temperature 6: want 0"},
		{name: "concurrency", profile: "[bench]\nconcurrency = 0\n", err: "profile d/p.toml:2: bench.concurrency: concurrency 0: want 1"},
		{name: "concurrency one level", profile: "[bench]\nconcurrency = 4\n", check: func(b Bench) bool {
			return slices.Equal(b.Concurrency.Value, []int{4}) && b.Concurrency.Src.String() == "profile d/p.toml:2"
		}},
		{name: "concurrency by default", check: func(b Bench) bool { return slices.Equal(b.Concurrency.Value, []int{1}) && !b.Concurrency.Set() }},
		{name: "concurrency a list of levels", profile: "[bench]\nconcurrency = [1, 2, 4, 8]\n", check: func(b Bench) bool {
			return slices.Equal(b.Concurrency.Value, []int{1, 2, 4, 8}) && b.Concurrency.Src.String() == "profile d/p.toml:2"
		}},
		{name: "concurrency levels as text", profile: "[bench]\nconcurrency = \"1,4\"\n", check: func(b Bench) bool { return slices.Equal(b.Concurrency.Value, []int{1, 4}) }},
		{name: "the flag's levels over the profile's", profile: "[bench]\nconcurrency = [1, 2]\n", flags: map[string]string{"concurrency": "2,8"}, check: func(b Bench) bool {
			return slices.Equal(b.Concurrency.Value, []int{2, 8}) && b.Concurrency.Src.String() == "flag --concurrency"
		}},
		{name: "concurrency levels descending", profile: "[bench]\n\nconcurrency = [4, 1]\n", err: `profile d/p.toml:3: bench.concurrency: "4,1": level 1 comes after 4, not ascending: give whole numbers of concurrent clients, ascending, e.g. 1,2,4,8`},
		{name: "concurrency level not a number", profile: "[bench]\nconcurrency = [1, \"x\"]\n", err: `profile d/p.toml:2: bench.concurrency: "1,\"x\"": level "x" is a string, not a whole number: write it without quotes`},
		{name: "concurrency level quoted", profile: "[bench]\nconcurrency = [1, \"4\"]\n", err: `level "4" is a string, not a whole number`},
		{name: "concurrency level a float", profile: "[bench]\nconcurrency = [1, 4.0]\n", err: `level "4.0" is not a whole number`},
		{name: "concurrency a float", profile: "[bench]\nconcurrency = 4.0\n", err: `profile d/p.toml:2: bench.concurrency: bad concurrency "4.0"`},
		{name: "concurrency empty list", profile: "[bench]\nconcurrency = []\n", err: `profile d/p.toml:2: bench.concurrency: bad concurrency "[]"`},
		{name: "concurrency a fraction", profile: "[bench]\nconcurrency = 1.5\n", err: "profile d/p.toml:2: "},
		{name: "concurrency level above 256", flags: map[string]string{"concurrency": "1,512"}, err: `flag --concurrency: "1,512": level 512 is outside 1 to 256 clients`},
		{name: "concurrency too many levels", profile: "[bench]\nconcurrency = [" + strings.Repeat("1,", 64) + "1]\n", err: "profile d/p.toml:2: bench.concurrency: 65 levels, above the 64 a sweep may measure"},
		{name: "set and file", profile: "[bench]\nprompt_file = \"a.txt\"\n", flags: map[string]string{"prompts": "code"}, err: "flag --prompts: a prompt set and a prompt file (profile d/p.toml:2) were both given"},
		{name: "empty --out keeps the profile's", profile: "[bench]\nout = \"r/x\"\n", flags: map[string]string{"out": "", "request-timeout": ""}, check: func(b Bench) bool {
			return b.Out.Value == "r/x" && b.RequestTimeout.Value == 2*time.Minute
		}},
		{name: "empty --prompts is no set", profile: "[bench]\nprompts = \"code\"\n", flags: map[string]string{"prompts": ""}, check: func(b Bench) bool {
			return b.Prompts.Value == "" && b.Prompts.Src.String() == "flag --prompts"
		}},
		{name: "request timeout", flags: map[string]string{"request-timeout": "0s"}, err: `flag --request-timeout: "0s": want a duration above 0 and at most 2562047h (about 292 years), e.g. 120s`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var p *profiles.Profile
			if c.profile != "" {
				p = parse(c.profile)
			}
			var s Settings
			err := LoadBench(&s, p, c.flags)
			if !wantErr(t, err, c.err) {
				return
			}
			if !c.check(s.Bench) {
				t.Errorf("got %+v", s.Bench)
			}
		})
	}
}

// wantErr fails t unless err holds want ("" = no error); it reports
// whether the case goes on to check the value (no error was wanted).
func wantErr(t *testing.T, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err %v, want %q", err, want)
		}
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// The policy row with no file named is a default, which the startup line
// counts among the defaults; with a file it is "layered".
func TestPolicyRowSource(t *testing.T) {
	var row Row
	for _, r := range Rows {
		if r.Key == "policy.files" {
			row = r
		}
	}
	for _, c := range []struct {
		pols []Field[string]
		want string
	}{
		{nil, "default"},
		{[]Field[string]{{"p.toml", Source{Flag, "--policy"}}}, "layered"},
	} {
		s := Settings{Policies: c.pols}
		if _, src, _ := row.Show(&s); src != c.want {
			t.Errorf("%d files: source %q, want %q", len(c.pols), src, c.want)
		}
	}
}
