package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/bench"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/record"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/testenv"
	"github.com/speclaunch/speclaunch/profiles"
)

// tune on the sim writes a tuned layer keyed to the pair, its record
// beside it; resolve and policy explain on the same pair answer from it,
// and a re-run replaces the pair's entry. It judges what is written, never
// how fast (the sim's windows are real time: the end-to-end tier).
func TestTuneOnSim(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain; its tuned layer is its own (getenv below)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "target"), "target weights")
	writeFile(t, filepath.Join(dir, "drafter"), "drafter weights")
	prof := filepath.Join(dir, "p.toml")
	writeFile(t, prof, fmt.Sprintf(`[engine]
name = "sim"
args = ["--sim-warmup", "50ms", "--sim-seed", "7"%s]
[model]
path = "target"
quant = "affine"
[draft]
model = "drafter"
[gpu]
capability = "9.0"
[bench]
base_port = %d
max_tokens = 24
`, fastSim, freePortBlock(t, 8)))
	cfg := filepath.Join(dir, "config")
	getenv := func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return cfg
		}
		return os.Getenv(k)
	}
	command := func(args []string, stdout, stderr io.Writer) int {
		return runEnv(context.Background(), args, Embedded{Policy: policyTOML}, stdout, stderr, nil, getenv)
	}
	layer := filepath.Join(cfg, "speclaunch", TunedFile)
	tune := func() {
		t.Helper()
		stdout, log := &syncBuffer{}, &syncBuffer{}
		code := command([]string{"tune", "--profile", prof, "--levels", "1,2", "--widths", "4",
			"--engines", "2", "--window", "150ms", "--log-format", "text"}, stdout, log)
		if code != 0 {
			t.Fatalf("tune exit %d:\n%s%s", code, stdout, log)
		}
		// The result on stdout from its first line, the progress on stderr
		// (resultOut): the result was on stderr, and stdout empty; then
		// stdout began with a blank line.
		out := stdout.String()
		if !strings.HasPrefix(out, "tuned in ") || !strings.Contains(out, "written to "+layer) || !strings.Contains(log.String(), "left") || strings.Contains(out, "left") {
			t.Errorf("tune's result (stdout) does not start with its first line or names no layer, or its progress (stderr) shows no time left:\nstdout:\n%s\nstderr:\n%s", out, log)
		}
		if !strings.Contains(out, "`speclaunch policy explain --profile "+prof+"` says where it came from") {
			t.Errorf("tune's last line does not give the policy explain that shows the entry (on its profile):\n%s", out)
		}
	}
	tune()
	f, err := policy.ReadFile(context.Background(), layer)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Entries) != 1 || f.Entries[0].Pair.IsZero() || f.Entries[0].Pin != "sim" || f.Entries[0].Tuned == "" {
		t.Fatalf("tuned layer entries: %+v", f.Entries)
	}
	e := f.Entries[0]
	b, err := os.ReadFile(filepath.Join(filepath.Dir(layer), strings.TrimSuffix(e.Record, ".md")+".json"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := record.Decode(b)
	if err != nil || len(rec.Levels) != 2 || rec.Earned == nil || !rec.Simulated {
		t.Fatalf("record: %v, levels %d, simulated %v", err, len(rec.Levels), rec.Simulated)
	}
	if got := e.Sched().String(); got != rec.Earned.Text {
		t.Errorf("entry schedule %s, record earned %s", got, rec.Earned.Text)
	}

	var out bytes.Buffer
	if code := command([]string{"resolve", "--profile", prof, "--json"}, &out, &out); code != 0 {
		t.Fatalf("resolve exit %d: %s", code, out.String())
	}
	var res map[string]any
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if !strings.Contains(out.String(), "tuned on this pair") {
		t.Errorf("resolve does not answer from the tuned entry:\n%s", out.String())
	}
	if res["source"] != "simulated" {
		t.Errorf("resolve's source for an entry tuned on the sim: %v, want simulated:\n%s", res["source"], out.String())
	}
	// policy check on the layer, its record read beside it whatever
	// --root is: the embedded records as the binary has them.
	out.Reset()
	code := runEnv(context.Background(), []string{"policy", "check", "--policy", layer, "--root", filepath.Dir(layer)},
		Embedded{Policy: policyTOML, Records: os.DirFS("../..")}, &out, &out, nil, getenv)
	if code != 0 || !strings.Contains(out.String(), "ok   "+e.ID) {
		t.Errorf("policy check --policy %s --root %s: exit %d\n%s", layer, filepath.Dir(layer), code, out.String())
	}
	out.Reset()
	command([]string{"policy", "explain", "--profile", prof}, &out, &out)
	if !strings.Contains(out.String(), "tuned entry "+e.ID+" matches this pair") || !strings.Contains(out.String(), e.Record) {
		t.Errorf("policy explain:\n%s", out.String())
	}

	tune()
	f, err = policy.ReadFile(context.Background(), layer)
	if err != nil || len(f.Entries) != 1 {
		t.Fatalf("after a re-run: %v, %d entries", err, len(f.Entries))
	}
}

// A load sweep's flags are checked before anything starts: exit 2 naming
// the flag and the fix.
func TestLoadSweepFlagErrors(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.toml")
	base := "[engine]\nname = \"sim\"\n[model]\npath = \"t\"\nquant = \"affine\"\n[draft]\nmodel = \"d\"\n[gpu]\ncapability = \"12.1\"\n"
	writeFile(t, prof, base)
	// bench.concurrency in a profile takes a list as --concurrency does.
	sweep, bad := filepath.Join(dir, "sweep.toml"), filepath.Join(dir, "bad.toml")
	writeFile(t, sweep, base+"[bench]\nconcurrency = [1, 4]\n")
	writeFile(t, bad, base+"[bench]\nconcurrency = [4, 1]\n")
	// a record holds at most 64 notes of 4,096 bytes (record.Validate)
	longNote, manyNotes := filepath.Join(dir, "long.txt"), filepath.Join(dir, "many.txt")
	writeFile(t, longNote, "short\n\n"+strings.Repeat("word ", 900))
	writeFile(t, manyNotes, strings.Repeat("a note\n\n", 65))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "cfg"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--profile", bad}, `bad.toml:11: bench.concurrency: "4,1": level 1 comes after 4, not ascending: give whole numbers of concurrent clients, ascending, e.g. 1,2,4,8`},
		{[]string{"bench", "--profile", sweep, "--engines", "1"}, "flag --engines: 1 is outside 2 to 20 fresh engines per width\nspeclaunch: hint: give --engines 3 (the default), up to 20"},
		{[]string{"bench", "--concurrency", "4,1"}, `flag --concurrency: "4,1": level 1 comes after 4, not ascending`},
		{[]string{"bench", "--concurrency", "1,4", "--engines", "1"}, "flag --engines: 1 is outside 2 to 20 fresh engines per width\nspeclaunch: hint: give --engines 3 (the default), up to 20"},
		{[]string{"bench", "--engines", "3"}, "--engines and --window belong to a load sweep"},
		{[]string{"tune", "--levels", "0,2"}, `flag --levels: "0,2": level 0 is outside 1 to 256 clients`},
		{[]string{"tune", "--levels", "1,1"}, `flag --levels: "1,1": level 1 is listed twice`},
		{[]string{"tune", "--levels", "1,,4"}, `flag --levels: "1,,4" has an empty level (number 2)`},
		{[]string{"tune", "--levels", "1,abc"}, `flag --levels: "1,abc": level "abc" is not a whole number`},
		{[]string{"tune", "--levels", "1,99999999999999999999"}, `level 99999999999999999999 is outside 1 to 256 clients`},
		{[]string{"tune", "--engines", "1"}, "flag --engines: 1 is outside 2 to 20 fresh engines per width\nspeclaunch: hint: give --engines 3 (the default), up to 20"},
		{[]string{"tune", "--engines", "21"}, "flag --engines: 21 is outside 2 to 20"},
		{[]string{"tune", "--engines", "0"}, "flag --engines: 0 is outside 2 to 20 fresh engines per width\nspeclaunch: hint: give --engines 3 (the default), up to 20"}, // was taken as the default
		{[]string{"bench", "--concurrency", "1,4", "--engines", "0"}, "flag --engines: 0 is outside 2 to 20 fresh engines per width\nspeclaunch: hint: give --engines 3 (the default), up to 20"},
		{[]string{"tune", "--quant", "unknown"}, "tune needs the target's quantization"},
		// on the sim tune runs its two windows whatever their length
		{[]string{"tune", "--window", "9999h"}, `flag --window: "9999h" is above 10m0s, the longest window: a window of 5s already holds a few hundred tokens at one client, and this sweep would run 168 of them (7 arms × 4 levels × 3 engines × 2 windows per engine and level)`},
		{[]string{"tune", "--window", "11m", "--levels", "1,4"}, `(7 arms × 2 levels × 3 engines × 2 windows per engine and level)`},
		{[]string{"bench", "--concurrency", "1,4", "--window", "11m"}, `× 3 windows per engine and level`},
		// classic is an arm of its own in both: leaving the drafter out is no fix
		{[]string{"tune", "--widths", "1,4", "--levels", "1,4"}, "flag --widths: width 1 is below 2: classic decoding (width 1) is always measured as an arm of its own, so leave it out"},
		{[]string{"bench", "--widths", "1,4"}, "flag --widths: width 1 is below 2: classic decoding (width 1) is always measured as an arm of its own, so leave it out"},
		{[]string{"bench", "--concurrency", "1,4", "--widths", "0,4"}, "flag --widths: width 0 is below 2: classic decoding"},
		{[]string{"bench", "--concurrency", "1,4", "--window", "11m"}, `flag --window: "11m" is above 10m0s`},
		{[]string{"tune", "--window", "0s"}, `flag --window: "0s" is not a duration from 100ms to 10m0s, e.g. 5s`}, // refused after the layer is read, before records/ is made
		{[]string{"tune", "--window", "9999999999h"}, `flag --window: "9999999999h" is far out of range; give 10m0s or less`},
		{[]string{"tune", "--window", "1ns"}, `flag --window: "1ns" is below 100ms, the shortest window`},
		{[]string{"bench", "--title", strings.Repeat("t", 5000)}, "flag --title: the title is 5000 bytes long, above the 4096"},
		{[]string{"bench", "--notes-file", longNote}, "flag --notes-file: " + longNote + ": paragraph 2 is 4499 bytes long, above the 4096 a record's title or note may hold; split it with a blank line"},
		{[]string{"bench", "--notes-file", manyNotes}, "flag --notes-file: " + manyNotes + " holds 65 paragraphs, above the 64 notes a record may hold"},
	} {
		var out bytes.Buffer
		args := slices.Clone(tc.args)
		if !slices.Contains(args, "--profile") {
			args = append(args, "--profile", prof)
		}
		if tc.args[0] == "bench" {
			args = append(args, "--out", filepath.Join(dir, "rec"))
		}
		code := MainContext(context.Background(), args, policyTOML, &out, &out, nil)
		if got := strings.ReplaceAll(out.String(), "\n  ", " "); code != 2 || !strings.Contains(got, tc.want) || strings.Contains(got, "remove the draft model") { // unwrapped
			t.Errorf("%v: exit %d, output:\n%s\nwant %q", tc.args, code, out.String(), tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "cfg")); err == nil {
		t.Error("a refused tune wrote its layer's directory")
	}
}

// Every flag tune shares with bench's load sweep reaches the sweep, on
// every path: --json sent progress nowhere once --window was given or the
// engine was not the sim (the bench command tune builds lacked JSON).
func TestTuneLoadOptionsKeepBenchFlags(t *testing.T) {
	for _, tc := range []struct {
		eng    key.Engine
		window string
		json   bool
		want   time.Duration // the window the sweep runs
		n      int           // and how many per engine and level
	}{
		{key.Sim, "", true, tuneSimWindow, tuneSimWindows},
		{key.Sim, "150ms", true, 150 * time.Millisecond, tuneSimWindows}, // --window sets the length only
		{key.LlamaCpp, "", true, bench.DefaultLoadWindow, bench.DefaultWindows},
		{key.LlamaCpp, "150ms", true, 150 * time.Millisecond, bench.DefaultWindows},
		{key.Sim, "", false, tuneSimWindow, tuneSimWindows},
		{key.Sim, "150ms", false, 150 * time.Millisecond, tuneSimWindows},
		{key.LlamaCpp, "", false, bench.DefaultLoadWindow, bench.DefaultWindows},
		{key.LlamaCpp, "150ms", false, 150 * time.Millisecond, bench.DefaultWindows},
	} {
		var stdout, stderr bytes.Buffer
		e := &Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }, Ctx: context.Background()}
		c := &TuneCmd{Engines: 4, Window: tc.window, JSON: tc.json}
		arms := []bench.ArmSpec{{Label: "classic", Kind: bench.KindClassic}, {Label: "default = 4", Kind: bench.KindDefault, Width: 4}}
		lo, err := c.loadOptions(e, bench.Options{Arms: arms}, []int{1, 4}, tc.eng)
		if err != nil {
			t.Errorf("%s --window %q: %v", tc.eng, tc.window, err)
			continue
		}
		var wantOut io.Writer = &stderr
		if tc.json {
			wantOut = &stdout
		}
		if lo.JSONProgress != tc.json || lo.Progress != wantOut || lo.Engines != 4 || lo.Window != tc.want || lo.Windows != tc.n {
			t.Errorf("%s --window %q json %v: JSONProgress %v, progress to stdout %v, engines %d, window %v × %d; want %v, %v, 4, %v × %d",
				tc.eng, tc.window, tc.json, lo.JSONProgress, lo.Progress == io.Writer(&stdout), lo.Engines, lo.Window, lo.Windows, tc.json, tc.json, tc.want, tc.n)
		}
	}
}

// A --window past the longest is refused with the count of windows the
// sweep would run, the one it does run with a window in bounds: it said
// "arms × levels × engines × 3 times" for every sweep, which a tune on the
// sim (2 windows per level without --window) seemed to contradict.
func TestLongWindowSaysTheSweepsCount(t *testing.T) {
	arms := []bench.ArmSpec{{Label: "classic", Kind: bench.KindClassic}, {Label: "default = 4", Kind: bench.KindDefault, Width: 4}, {Label: "width 8", Kind: bench.KindWidth, Width: 8}}
	for _, eng := range []key.Engine{key.Sim, key.LlamaCpp} {
		for _, engines := range []int{2, 5} {
			e := &Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }, Ctx: context.Background()}
			c := &TuneCmd{Engines: engines, Window: "200ms"}
			lo, err := c.loadOptions(e, bench.Options{Arms: arms}, []int{1, 2, 4}, eng)
			if err != nil {
				t.Fatal(err)
			}
			n := len(lo.Arms) * len(lo.Levels) * lo.Engines * lo.Windows
			c.Window = "11m"
			_, err = c.loadOptions(e, bench.Options{Arms: arms}, []int{1, 2, 4}, eng)
			want := fmt.Sprintf("this sweep would run %d of them (3 arms × 3 levels × %d engines × %d windows per engine and level)", n, engines, lo.Windows)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s --engines %d --window 11m: %v\nwant %q", eng, engines, err, want)
			}
		}
	}
}

// tune's engines take the ports bench's would: from --base-port or the
// profile's bench.base_port when given, else drawn at random. tune had no
// --base-port and drew every port, bench.base_port unread, so an operator
// could not keep its engines inside a range.
func TestTuneTakesBenchsBasePort(t *testing.T) {
	base := 18600
	withBase := &profiles.Profile{}
	withBase.Bench.BasePort = &base
	for _, tc := range []struct {
		flag  int
		prof  *profiles.Profile
		drawn bool
	}{
		{0, nil, true},
		{0, &profiles.Profile{}, true},
		{18650, nil, false},
		{0, withBase, false},
	} {
		if got := (&TuneCmd{BasePort: tc.flag}).bench().drawsArmPorts(tc.prof); got != tc.drawn {
			t.Errorf("tune --base-port %d, profile bench.base_port set %v: ports drawn %v, want %v (bench's rule)", tc.flag, tc.prof == withBase, got, tc.drawn)
		}
	}
	// The flag's help is bench's, word for word.
	app := testModel(t)
	help := map[string]string{}
	for _, c := range app.Children {
		for _, f := range c.Flags {
			if f.Name == "base-port" {
				help[c.Name] = f.Help
			}
		}
	}
	if help["tune"] == "" || help["tune"] != help["bench"] {
		t.Errorf("tune --base-port's help %q, bench's %q", help["tune"], help["bench"])
	}
}

// bench and tune say what they measured on stdout, their progress and
// logs on stderr; with --json stdout is the progress's JSON lines alone
// and the result goes to stderr. resultOut only picks the stream, however
// often it is asked: it wrote the blank line that sets the result apart
// from the progress itself, so a second call wrote a second one (the
// callers write it).
func TestResultOut(t *testing.T) {
	for _, tc := range []struct {
		json           bool
		stdout, stderr string
	}{
		{false, "verdict\nentry\n", "progress\n"},
		{true, `{"progress":1}` + "\n", "progress\nverdict\nentry\n"},
	} {
		var stdout, stderr bytes.Buffer
		e := &Env{Stdout: &stdout, Stderr: &stderr}
		fmt.Fprintln(&stderr, "progress")
		if tc.json {
			fmt.Fprintln(&stdout, `{"progress":1}`)
		}
		fmt.Fprintln(resultOut(e, tc.json), "verdict")
		fmt.Fprintln(resultOut(e, tc.json), "entry")
		if stdout.String() != tc.stdout || stderr.String() != tc.stderr {
			t.Errorf("json %v: stdout %q, stderr %q; want %q, %q", tc.json, stdout.String(), stderr.String(), tc.stdout, tc.stderr)
		}
	}
}

// What tune says at the end tells how serve reads the file it wrote: by
// itself from the user's tuned layer, with --policy for another file; and
// the exact policy explain that shows the entry, on the profile tune ran
// on (explain without it asks about no draft model: "speculation off").
func TestTunedNext(t *testing.T) {
	env := func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return "/cfg"
		}
		return ""
	}
	for _, tc := range []struct{ layer, profile, want string }{
		{"/cfg/speclaunch/tuned.toml", "profiles/demo-load.toml", "serve on this pair starts at it; `speclaunch policy explain --profile profiles/demo-load.toml` says where it came from"},
		{"/tmp/my tuned.toml", "my pair.toml", "serve and resolve read it when given --policy '/tmp/my tuned.toml' (or MLXCEL_POLICY); `speclaunch policy explain --profile 'my pair.toml' --policy '/tmp/my tuned.toml'` says where it came from"},
		{"/cfg/speclaunch/tuned.toml", "", "serve on this pair starts at it; `speclaunch policy explain` with the model flags tune was given says where it came from"},
	} {
		if got := tunedNext(tc.layer, tc.profile, env); got != tc.want {
			t.Errorf("%s on %q:\n%q, want\n%q", tc.layer, tc.profile, got, tc.want)
		}
	}
}

// tunedFixture is a tuned entry for a pair whose target hash is 64 × c.
func tunedFixture(t *testing.T, c string) policy.Entry {
	t.Helper()
	f, err := policy.Parse("fixture.toml", []byte("schema = 1\n"+tunedEntryTOML(c, "12.1", "affine", "[[1, 3, 6], [4, 0, 1]]", c)))
	if err != nil || len(f.Entries) != 1 {
		t.Fatalf("fixture: %v", err)
	}
	return f.Entries[0]
}

// Two tunes of two pairs writing one layer keep both entries: each write
// reads the layer again under its lock, so a tune that began before the
// other wrote does not put back the layer it saw at its start.
func TestTuneWriteKeepsAnotherTunesEntry(t *testing.T) {
	ctx := context.Background()
	layer := filepath.Join(t.TempDir(), "speclaunch", TunedFile)
	slow := &tuning{layer: layer} // prepared while the layer was empty
	if err := (&tuning{layer: layer}).write(ctx, tunedFixture(t, "a")); err != nil {
		t.Fatal(err)
	}
	if err := slow.write(ctx, tunedFixture(t, "c")); err != nil {
		t.Fatal(err)
	}
	f, err := policy.ReadFile(ctx, layer)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range f.Entries {
		ids = append(ids, e.ID)
	}
	if !slices.Equal(ids, []string{"tuned-a", "tuned-c"}) {
		t.Errorf("entries %v, want both tunes'", ids)
	}
}

// tune rewrites its layer whole, so a file holding what it would not keep
// (an operator's defaults or measured entries, named with --policy) is
// refused before anything is measured; a tuned layer is read.
func TestReadLayerRefusesAnOperatorsPolicyFile(t *testing.T) {
	dir := t.TempDir()
	tuned := filepath.Join(dir, "tuned.toml")
	if err := writeLayer(tuned, []policy.Entry{tunedFixture(t, "a")}); err != nil {
		t.Fatal(err)
	}
	def := filepath.Join(dir, "defaults.toml")
	writeFile(t, def, "# operator policy\nschema = 1\n[[default]]\nengine = \"mlxcel\"\ndrafter = \"dflash\"\nwidth = 6\n")
	measured := filepath.Join(dir, "measured.toml")
	writeFile(t, measured, "schema = 1\n[[entry]]\nid = \"my-a100-q8\"\nengine = \"llama.cpp\"\ndrafter = \"draft\"\ncapability = \"8.0\"\nquant = \"q8_0\"\nwidth = 5\npin = \"b1234\"\nrecord = \"rec.md\"\n")
	extra := filepath.Join(dir, "extra.toml") // a pair entry with a field the tuned form does not write
	writeFile(t, extra, strings.Replace(string(policy.RenderTuned([]policy.Entry{tunedFixture(t, "a")})), "pin = ", "runner_up = 3\npin = ", 1))
	empty, comments, noSchema := filepath.Join(dir, "empty.toml"), filepath.Join(dir, "comments.toml"), filepath.Join(dir, "noschema.toml")
	writeFile(t, empty, "")
	writeFile(t, comments, "\ufeff# truncated by hand\n\n   # all gone\n\t\n")
	writeFile(t, noSchema, "# a layer\n[[entry]]\nid = \"x\"\n")
	for _, c := range []struct {
		path, want string // want "" = read
	}{
		{tuned, ""},
		// An empty layer is no entries, as serve reads it: tune writes
		// over it; one with anything in it needs its schema.
		{empty, ""},
		{comments, ""},
		{noSchema, "missing schema"},
		{extra, "extra.toml is not a tuned layer: it holds the entry tuned-a (" + extra + ":"},
		{filepath.Join(dir, "missing.toml"), ""},
		{def, "defaults.toml is not a tuned layer: it holds a [[default]] table (" + def + ":3)"},
		{measured, "measured.toml is not a tuned layer: it holds the measured entry my-a100-q8 (" + measured + ":2)"},
	} {
		_, err := readLayer(context.Background(), c.path)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", filepath.Base(c.path), err, c.want)
		}
	}
}

// A pair tuned on a second GPU, or with its target in a second format, is
// a second entry of the layer; a re-run at the same key replaces its own.
// Before, the id named the pair alone and a tune on a second host sharing
// the home directory dropped the first host's schedule.
func TestTunedIDKeepsEachGPUsSchedule(t *testing.T) {
	pair := policy.Pair{Target: strings.Repeat("a", 64), Draft: strings.Repeat("b", 64)}
	entry := func(cap key.Capability, q key.Quant) policy.Entry {
		k := key.Key{Engine: key.LlamaCpp, Drafter: key.Draft, Capability: cap, Quant: q}
		return policy.Entry{ID: tunedID(k, pair), Key: k, Pair: pair, Width: 4, Pin: "d32676d", Record: "records/r.md", Tuned: "2026-12-06"}
	}
	h100, h200, gb10 := key.Capability{Major: 9}, key.Capability{Major: 9}, key.Capability{Major: 12, Minor: 1}
	layer := []policy.Entry{entry(h100, key.QuantQ4_K)}
	for _, c := range []struct {
		e    policy.Entry
		want int
	}{
		{entry(h200, key.QuantQ4_K), 1}, // a re-run at the same key
		{entry(gb10, key.QuantQ4_K), 2}, // another GPU
		{entry(h100, key.QuantQ8_0), 2}, // another format of the target
	} {
		if got := policy.WithTuned(layer, c.e); len(got) != c.want {
			t.Errorf("%s into a layer of %s: %d entries, want %d", c.e.ID, layer[0].ID, len(got), c.want)
		}
	}
	if id := entry(gb10, key.QuantQ4_K).ID; id != "tuned-llama.cpp-aaaaaaaa-bbbbbbbb-sm121-q4_k" {
		t.Errorf("id %q", id)
	}
	if _, err := policy.Parse("t.toml", policy.RenderTuned([]policy.Entry{entry(gb10, key.QuantQ4_K)})); err != nil {
		t.Errorf("the entry does not parse back: %v", err)
	}
}

// bench and tune measure with the operator's width or schedule set aside,
// and say so: a schedule left in force (MLXCEL_DRAFT_SCHEDULE=1+:3) ran
// tune's width-8 arm at width 3, and tune saved that as the pair's tuned
// schedule.
func TestMeasuringSetsTheOperatorWidthAside(t *testing.T) {
	sched, err := schedule.Parse("1+:3", "override")
	if err != nil {
		t.Fatal(err)
	}
	env := config.Source{Origin: config.Env, Name: "MLXCEL_DRAFT_SCHEDULE"}
	for _, tc := range []struct {
		name string
		s    config.Settings
		want string
	}{
		{"schedule", config.Settings{Schedule: config.Field[schedule.Schedule]{Value: sched, Src: env}}, "the width schedule 1+:3 (env MLXCEL_DRAFT_SCHEDULE) is set aside"},
		{"width", config.Settings{Width: config.Field[int]{Value: 5, Src: config.Source{Origin: config.Flag, Name: "--draft-block-size"}}}, "the width 5 (flag --draft-block-size) is set aside"},
		{"width in draft tokens", config.Settings{Width: config.Field[int]{Value: 4, Src: config.Source{Origin: config.Flag, Name: "--spec-draft-n-max"}}, WidthNote: "--spec-draft-n-max 3 draft tokens = width 4"},
			"the width 4 (flag --spec-draft-n-max: --spec-draft-n-max 3 draft tokens = width 4) is set aside"},
		{"neither", config.Settings{}, ""},
	} {
		m, note := measuring(tc.s)
		if m.Schedule.Value != nil || m.Width.Value != 0 || !strings.HasPrefix(note, tc.want) || (tc.want == "") != (note == "") {
			t.Errorf("%s: schedule %v, width %d, note %q; want none, 0, %q…", tc.name, m.Schedule.Value, m.Width.Value, note, tc.want)
		}
	}
}

// tuneLockSetup is a sim pair's profile in a temporary dir and a getenv
// whose XDG_CONFIG_HOME is cfg, for the tests of tune's run lock.
func tuneLockSetup(t *testing.T) (dir, prof, cfg string, getenv func(string) string) {
	t.Helper()
	dir = t.TempDir()
	writeFile(t, filepath.Join(dir, "target"), "target weights")
	writeFile(t, filepath.Join(dir, "drafter"), "drafter weights")
	prof = filepath.Join(dir, "p.toml")
	writeFile(t, prof, "[engine]\nname = \"sim\"\n[model]\npath = \"target\"\nquant = \"affine\"\n[draft]\nmodel = \"drafter\"\n[gpu]\ncapability = \"9.0\"\n")
	cfg = filepath.Join(dir, "config")
	getenv = func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return cfg
		}
		return os.Getenv(k)
	}
	return dir, prof, cfg, getenv
}

// A second tune while one runs on the same layer is refused before it
// starts an engine: two tunes at once each measured under the other's
// load, and the later write won.
func TestTuneRefusedWhileAnotherRuns(t *testing.T) {
	dir, prof, cfg, getenv := tuneLockSetup(t)
	layer := filepath.Join(cfg, "speclaunch", TunedFile)
	release, ok, err := safefile.Hold(safefile.RunLock(layer))
	if err != nil || !ok {
		t.Fatalf("hold: %v %v", ok, err)
	}
	defer release()
	// Whatever file it writes: one with --policy ran beside it.
	for _, extra := range [][]string{nil, {"--policy", filepath.Join(dir, "other.toml")}} {
		var stdout, stderr bytes.Buffer
		code := runEnv(context.Background(), append([]string{"tune", "--profile", prof, "--levels", "1,2"}, extra...), Embedded{Policy: policyTOML}, &stdout, &stderr, nil, getenv)
		if code != 2 || !strings.Contains(stderr.String(), "another speclaunch tune is running (its lock "+safefile.RunLock(layer)) || !strings.Contains(stderr.String(), "wait for it to end") {
			t.Errorf("%v: exit %d:\n%s%s", extra, code, stdout.String(), stderr.String())
		}
		// Refused, it leaves nothing behind: records/ is made under the lock.
		for _, d := range []string{filepath.Join(cfg, "speclaunch", "records"), filepath.Join(dir, "records")} {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Errorf("%v: %s made by a refused tune (%v)", extra, d, err)
			}
		}
	}
}

// A directory where tune's run lock goes is bad input (exit 2) that names
// the path and the fix; before, it was exit 1 and the open's bare error.
func TestTuneLockPathTaken(t *testing.T) {
	_, prof, cfg, getenv := tuneLockSetup(t)
	lock := safefile.RunLock(filepath.Join(cfg, "speclaunch", TunedFile))
	if err := os.MkdirAll(lock, 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := runEnv(context.Background(), []string{"tune", "--profile", prof, "--levels", "1,2"}, Embedded{Policy: policyTOML}, &stdout, &stderr, nil, getenv)
	if code != 2 || !strings.Contains(stderr.String(), lock+": is a directory") || !strings.Contains(stderr.String(), "remove it") {
		t.Errorf("exit %d:\n%s%s", code, stdout.String(), stderr.String())
	}
}

// tunedEntryTOML is a tuned [[entry]] of the sim's stand-in engine, as
// tune writes one: id "tuned-"+id, keyed on capability and quant, its
// schedule in triples, its target hash 64 × target.
func tunedEntryTOML(id, capability, quant, schedule, target string) string {
	return `[[entry]]
id = "tuned-` + id + `"
engine = "mlxcel"
drafter = "dflash"
capability = "` + capability + `"
quant = "` + quant + `"
schedule = ` + schedule + `
pin = "sim"
record = "records/tune.md"
tuned = "2026-12-05"
target_sha256 = "` + strings.Repeat(target, 64) + `"
draft_sha256 = "` + strings.Repeat("b", 64) + `"
`
}

// tune --policy names a file in a directory that exists: a missing one
// (a typo) or a file in its place is refused with exit 2, naming the flag
// and the fix, before anything is read or measured, and no tree is built
// (it made typo-dir/sub/records/, and records/ at / for /nonexist.toml's
// like). The user's own tuned layer's directory is speclaunch's: made
// when missing, never refused.
func TestTuneRefusesAMissingPolicyDir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "afile"), "")
	prof := filepath.Join(dir, "p.toml")
	writeFile(t, prof, "[engine]\nname = \"sim\"\n[model]\npath = \"t\"\nquant = \"affine\"\n[draft]\nmodel = \"d\"\n[gpu]\ncapability = \"12.1\"\n")
	own := filepath.Join(dir, "cfg", "speclaunch", TunedFile) // not made yet
	for _, tc := range []struct {
		name, layer string
		want        []string // "" = not refused
		absent      string   // a path the refusal must not have made
	}{
		{"a missing directory", filepath.Join(dir, "typo-dir", "sub", "tuned.toml"),
			[]string{"flag --policy: " + filepath.Join(dir, "typo-dir", "sub", "tuned.toml") + ": directory " + filepath.Join(dir, "typo-dir", "sub") + " does not exist",
				"hint: create the directory first (mkdir -p " + filepath.Join(dir, "typo-dir", "sub") + "), or name a file in an existing directory"},
			filepath.Join(dir, "typo-dir")},
		{"a file in place of the directory", filepath.Join(dir, "afile", "tuned.toml"),
			[]string{"flag --policy: " + filepath.Join(dir, "afile", "tuned.toml") + ": " + filepath.Join(dir, "afile") + " is not a directory"}, ""},
		{"an existing directory", filepath.Join(dir, "tuned.toml"), nil, ""},
		{"the user's own layer, named", own, nil, ""},
		{"the user's own layer, named relative to here", relTo(t, own), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "XDG_CONFIG_HOME" {
					return filepath.Join(dir, "cfg")
				}
				return os.Getenv(k)
			}
			err := layerDir(tc.layer, getenv)
			if tc.want == nil {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			// Already stopped: refused before anything starts, it says
			// so; were it checked later, tune ends at once (exit 130)
			// where it would run a whole sweep.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var out bytes.Buffer
			code := runEnv(ctx, []string{"tune", "--profile", prof, "--levels", "1", "--policy", tc.layer}, Embedded{Policy: policyTOML}, &out, &out, nil, getenv)
			for _, w := range tc.want {
				if code != 2 || !strings.Contains(out.String(), w) {
					t.Errorf("exit %d, output:\n%s\nwant %q", code, out.String(), w)
				}
			}
			if tc.absent != "" {
				if _, err := os.Stat(tc.absent); err == nil {
					t.Errorf("%s was made", tc.absent)
				}
			}
		})
	}
}

// A layer tune left as it was is said to be unchanged only where it
// exists: an interrupted tune said "/tmp/typo2/tuned.toml is unchanged"
// of a file it never created.
func TestLeftAsItWas(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, TunedFile)
	writeFile(t, existing, "schema = 1\n")
	for _, tc := range []struct{ layer, want string }{
		{existing, existing + " is unchanged"},
		{filepath.Join(dir, "new.toml"), filepath.Join(dir, "new.toml") + " was not created"},
	} {
		if got := leftAsItWas(tc.layer); got != tc.want {
			t.Errorf("leftAsItWas(%s) = %q, want %q", tc.layer, got, tc.want)
		}
	}
}

// tune's result repeats, beside the schedule it wrote, the levels whose
// clients outnumbered the engine's slots: the warning before the run had
// scrolled away, and the schedule earned on one slot went into the layer
// serve follows with nothing said.
func TestTuneResultSaysQueuedLevels(t *testing.T) {
	for _, tc := range []struct {
		slots int
		want  string
	}{
		{1, "; at 2, 4 in flight the excess requests queued for the engine's slots (the operator's -np 1): tune again with as many slots as clients"},
		{4, ""},
		{0, ""}, // unknown
	} {
		tn := tuning{lo: bench.LoadOptions{Levels: []int{1, 2, 4}, Slots: tc.slots, SlotsFrom: "the operator's -np 1"}}
		if got := tn.queued(); got != tc.want {
			t.Errorf("%d slots: %q, want %q", tc.slots, got, tc.want)
		}
	}
}
