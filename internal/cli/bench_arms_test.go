package cli

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/serve"
	"github.com/speclaunch/speclaunch/internal/width"
)

func TestWithSlots(t *testing.T) {
	none := func(string) string { return "" }
	for _, tc := range []struct {
		name   string
		args   []string
		env    string
		eng    key.Engine
		want   []string
		slots  int
		fromIn string
		err    string // the error, "" for none
		// profEnv is the profile's engine.env LLAMA_ARG_N_PARALLEL
		profEnv string
		// prof is the profile's engine.args (p.toml:3), which args,
		// typed on the command line, follow
		prof []string
		n    int // requests in flight, 4 unless given
	}{
		{name: "added", args: []string{"-ngl", "99"}, eng: key.LlamaCpp, want: []string{"-ngl", "99", "--parallel", "4"}, slots: 4, fromIn: "--parallel 4, added by bench"},
		{name: "operator -np", args: []string{"-np", "2"}, eng: key.LlamaCpp, want: []string{"-np", "2"}, slots: 2, fromIn: "the operator's -np 2"},
		{name: "operator --parallel=8", args: []string{"--parallel=8"}, eng: key.MLXCEL, want: []string{"--parallel=8"}, slots: 8, fromIn: "the operator's --parallel 8"},
		// the last one given, as the engine takes it: a profile's -np 1
		// and `-- -np 4` after it run 4 slots (the first was read)
		{name: "operator -np twice", args: []string{"-np", "1", "--no-webui", "-np", "4"}, eng: key.LlamaCpp, want: []string{"-np", "1", "--no-webui", "-np", "4"}, slots: 4, fromIn: "the operator's -np 4"},
		{name: "operator env", env: "6", eng: key.LlamaCpp, want: nil, slots: 6, fromIn: "LLAMA_ARG_N_PARALLEL=6"},
		// the sim honours --parallel (it read "the sim serves every
		// request at once and ignores it")
		{name: "sim", eng: key.Sim, want: []string{"--parallel", "4"}, slots: 4, fromIn: "--parallel 4, added by bench"},
		// only llama-server reads the variable: set for the sim it read 4
		// slots where the sim ran 1
		{name: "sim and the variable", env: "4", eng: key.Sim, want: []string{"--parallel", "4"}, slots: 4, fromIn: "--parallel 4, added by bench"},
		{name: "sim -np -1", args: []string{"-np", "-1"}, eng: key.Sim, want: []string{"-np", "-1"}, slots: 1, fromIn: "the operator's -np -1"},
		{name: "sim --sim-slots over -np", args: []string{"--sim-slots", "1", "-np", "4"}, eng: key.Sim, want: []string{"--sim-slots", "1", "-np", "4"}, slots: 1, fromIn: "the operator's --sim-slots 1"},
		{name: "profile engine.env over the shell", env: "4", profEnv: "1", eng: key.LlamaCpp, want: nil, slots: 1, fromIn: "LLAMA_ARG_N_PARALLEL=1"},
		{name: "profile engine.env not a number", profEnv: "x", eng: key.LlamaCpp, err: `profile p.toml:7: "x" is not a slot count`},
		// -np abc started engines that all failed, and bench exited 0
		{name: "-np abc", args: []string{"-np", "abc"}, eng: key.LlamaCpp, err: `-np "abc" is not a slot count`},
		{name: "--parallel=0", args: []string{"--parallel=0"}, eng: key.Sim, err: `--parallel "0" is not a slot count`},
		// -1 is llama-server's auto, 4 slots (it was refused)
		{name: "env auto", env: "-1", eng: key.LlamaCpp, want: nil, slots: 4, fromIn: "LLAMA_ARG_N_PARALLEL=-1"},
		{name: "operator -np -1", args: []string{"-np", "-1"}, eng: key.LlamaCpp, want: []string{"-np", "-1"}, slots: 4, fromIn: "the operator's -np -1"},
		// a variable that is no slot count is refused, naming it and the
		// fix: "abc" was taken as the operator's, and the record read
		// "engine slots: — (the operator's LLAMA_ARG_N_PARALLEL=abc)"
		{name: "env not a number", env: "abc", eng: key.LlamaCpp, err: `env LLAMA_ARG_N_PARALLEL: "abc" is not a slot count: want a whole number of 1 or more (or -1, llama-server's auto), e.g. LLAMA_ARG_N_PARALLEL=4 for 4 requests in flight, or unset it`},
		{name: "env zero", env: "0", eng: key.LlamaCpp, err: `env LLAMA_ARG_N_PARALLEL: "0" is not a slot count`},
		{name: "env below auto", env: "-2", eng: key.LlamaCpp, err: `env LLAMA_ARG_N_PARALLEL: "-2" is not a slot count`},
		{name: "env a fraction", env: "2.5", eng: key.LlamaCpp, err: `"2.5" is not a slot count`},
		// a -np among the profile's engine.args names the profile's line,
		// with arguments typed after them too
		{name: "profile -np abc, typed args after", prof: []string{"-np", "abc"}, args: []string{"--sim-warmup", "0s"}, eng: key.Sim, err: `profile p.toml:3: -np "abc" is not a slot count`},
		{name: "profile args alone", prof: []string{"--parallel=x"}, eng: key.LlamaCpp, err: `profile p.toml:3: --parallel "x" is not a slot count`},
		{name: "typed -np abc after the profile's", prof: []string{"-np", "2"}, args: []string{"-np", "abc"}, eng: key.LlamaCpp, err: `engine arguments on the command line: -np "abc" is not a slot count`},
		// a flag's value is not a flag: the last -np the engine takes is
		// the first one, --alias's value is "--parallel"
		{name: "-np as a value", args: []string{"-np", "2", "--alias", "--parallel"}, eng: key.LlamaCpp, want: []string{"-np", "2", "--alias", "--parallel"}, slots: 2, fromIn: "the operator's -np 2"},
		{name: "-np as a value inline", args: []string{"--parallel=3", "-a", "-np"}, eng: key.LlamaCpp, want: []string{"--parallel=3", "-a", "-np"}, slots: 3, fromIn: "the operator's --parallel 3"},
		// one request at a time: bench adds nothing, and still checks
		{name: "one in flight", args: []string{"-ngl", "99"}, eng: key.LlamaCpp, n: 1, want: []string{"-ngl", "99"}},
		{name: "one in flight, sim", eng: key.Sim, n: 1, want: nil},
		{name: "one in flight, -np abc", args: []string{"-np", "abc"}, eng: key.LlamaCpp, n: 1, err: `-np "abc" is not a slot count: want a whole number of 1 or more (or -1, llama-server's auto), e.g. -np 1 for 1 request in flight, or drop it and the engine keeps its own count`},
		{name: "one in flight, env abc", env: "abc", eng: key.LlamaCpp, n: 1, err: `env LLAMA_ARG_N_PARALLEL: "abc" is not a slot count: want a whole number of 1 or more (or -1, llama-server's auto), e.g. LLAMA_ARG_N_PARALLEL=1 for 1 request in flight, or unset it and the engine keeps its own count`},
		{name: "sim -np abc above its most", args: []string{"-np", "abc"}, eng: key.Sim, n: 128, err: `-np "abc" is not a slot count: want a whole number of 1 or more (or -1, llama-server's auto), e.g. -np 64 for 128 requests in flight, or drop it and the engine is started with --parallel 64`},
		// the sim decodes at most sim.MaxSlots requests at once, and refuses
		// a --sim-slots outside 1..64 at start
		{name: "sim -np above its most", args: []string{"-np", "100"}, eng: key.Sim, want: []string{"-np", "100"}, slots: 64, fromIn: "the operator's -np 100; the sim runs at most 64"},
		{name: "sim, bench adds its most", eng: key.Sim, n: 128, want: []string{"--parallel", "64"}, slots: 64, fromIn: "--parallel 64, added by bench"},
		{name: "llama.cpp -np 100", args: []string{"-np", "100"}, eng: key.LlamaCpp, want: []string{"-np", "100"}, slots: 100, fromIn: "the operator's -np 100"},
		{name: "sim --sim-slots 64", args: []string{"--sim-slots", "64"}, eng: key.Sim, want: []string{"--sim-slots", "64"}, slots: 64, fromIn: "the operator's --sim-slots 64"},
		{name: "sim --sim-slots -1", args: []string{"--sim-slots", "-1"}, eng: key.Sim, err: `--sim-slots "-1" is not a slot count the sim takes: want a whole number from 1 to 64, e.g. --sim-slots 4`},
		{name: "sim --sim-slots 100", args: []string{"--sim-slots=100"}, eng: key.Sim, n: 128, err: `--sim-slots "100" is not a slot count the sim takes: want a whole number from 1 to 64, e.g. --sim-slots 64 for 128 requests in flight`},
		// a flag the engine takes over the variable: the variable is not read
		{name: "env beside -np", args: []string{"-np", "2"}, env: "abc", eng: key.LlamaCpp, want: []string{"-np", "2"}, slots: 2, fromIn: "the operator's -np 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := none
			if tc.env != "" {
				getenv = func(k string) string {
					if k == "LLAMA_ARG_N_PARALLEL" {
						return tc.env
					}
					return ""
				}
			}
			s := config.Settings{Engine: config.Field[key.Engine]{Value: tc.eng}, EngineArgs: config.Field[[]string]{Value: tc.args}}
			if tc.prof != nil {
				s.EngineArgs = config.Field[[]string]{Value: append(slices.Clone(tc.prof), tc.args...), Src: config.Source{Origin: config.Profile, Name: "p.toml:3"}}
				if tc.args != nil {
					s.ProfileArgs = config.Field[[]string]{Value: tc.prof, Src: s.EngineArgs.Src}
					s.EngineArgs.Src = config.Source{Origin: config.Flag, Name: "engine arguments on the command line"}
				}
			}
			if tc.profEnv != "" {
				s.EngineEnv.Value = map[string]string{"LLAMA_ARG_N_PARALLEL": tc.profEnv}
				s.EngineEnvSrc = map[string]config.Source{"LLAMA_ARG_N_PARALLEL": {Origin: config.Profile, Name: "p.toml:7"}}
			}
			got, sz, err := withSlots(s, engineEnv(&s, getenv), cmp.Or(tc.n, 4))
			slots, from := sz.n, sz.from
			if tc.err != "" {
				var ce *config.Error
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err %v, want a config.Error with %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got.Value, tc.want) || slots != tc.slots || !strings.Contains(from, tc.fromIn) {
				t.Errorf("args %q slots %d from %q, %v", got.Value, slots, from, err)
			}
		})
	}
}

// bench and tune say once, before anything starts, where the engine's
// slots are fewer than a level's requests in flight, naming where the
// slots came from and the count that fits; a sweep of a one-slot profile
// said nothing.
func TestSizeSlotsWarns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		eng    key.Engine // llama.cpp unless given
		args   []string
		env    string
		levels []int
		warn   []string // "" for no warning
		not    []string // what the warning must not say
	}{
		{name: "one slot under a sweep", args: []string{"-np", "1"}, levels: []int{1, 2, 4, 8}, warn: []string{"the engine has 1 slot (the operator's -np 1) for up to 8 requests in flight: at 2, 4, 8 in flight the excess requests queue", "give it 8 slots: `-- -np 8` after the flags", "give neither -np nor LLAMA_ARG_N_PARALLEL"}},
		{name: "one level", args: []string{"--parallel=2"}, levels: []int{4}, warn: []string{"the engine has 2 slots (the operator's --parallel 2) for up to 4 requests", "at 4 in flight"}},
		{name: "the variable", env: "2", levels: []int{1, 4}, warn: []string{"(the operator's LLAMA_ARG_N_PARALLEL=2)", "give it 4 slots: LLAMA_ARG_N_PARALLEL=4 where it is set"}},
		// the advice follows the engine and what set the count: -np
		// changes nothing under the sim's --sim-slots, and neither the
		// sim nor mlxcel reads the variable
		{name: "sim --sim-slots", eng: key.Sim, args: []string{"--sim-slots", "1", "-np", "8"}, levels: []int{1, 4}, warn: []string{"the engine has 1 slot (the operator's --sim-slots 1)", "give it 4 slots: `-- --sim-slots 4` after the flags, which wins over a profile's and over -np"}, not: []string{"`-- -np", "LLAMA_ARG_N_PARALLEL"}},
		{name: "sim -np", eng: key.Sim, args: []string{"-np", "2"}, levels: []int{1, 4}, warn: []string{"give it 4 slots: `-- -np 4` after the flags", "or drop -np and the engine is started with --parallel 4"}, not: []string{"LLAMA_ARG_N_PARALLEL", "--sim-slots"}},
		{name: "mlxcel -np", eng: key.MLXCEL, args: []string{"--parallel=2"}, levels: []int{1, 4}, warn: []string{"the engine has 2 slots", "give it 4 slots: `-- -np 4` after the flags", "or drop --parallel and the engine is started with --parallel 4"}, not: []string{"LLAMA_ARG_N_PARALLEL"}},
		{name: "sim --sim-slots below its most", eng: key.Sim, args: []string{"--sim-slots", "8"}, levels: []int{1, 128}, warn: []string{"the sim decodes at most 64 requests at once", "give it 64 slots: `-- --sim-slots 64`"}},
		{name: "slots for the top level", args: []string{"-np", "8"}, levels: []int{1, 2, 4, 8}},
		{name: "added by bench", levels: []int{1, 2, 4, 8}},
		// the sim runs at most 64 slots: bench's --parallel 64 queues 128
		{name: "sim above its most", eng: key.Sim, levels: []int{1, 128}, warn: []string{"the engine has 64 slots (--parallel 64, added by bench) for up to 128 requests in flight: at 128 in flight", "the sim decodes at most 64 requests at once, so above 64 in flight they queue whatever its slots"}, not: []string{"give it"}},
		{name: "sim at its most", eng: key.Sim, levels: []int{1, 64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := newLogger(&buf, nil, "json", "info", func(string) string { return "" })
			s := config.Settings{Engine: config.Field[key.Engine]{Value: cmp.Or(tc.eng, key.LlamaCpp)}, EngineArgs: config.Field[[]string]{Value: tc.args}}
			getenv := func(k string) string {
				if k == "LLAMA_ARG_N_PARALLEL" {
					return tc.env
				}
				return ""
			}
			if _, _, err := sizeSlots(log, &s, getenv, tc.levels); err != nil {
				t.Fatal(err)
			}
			var line struct{ Level, Msg string }
			if buf.Len() > 0 {
				if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line.Level != "WARN" {
					t.Fatalf("not one warning line (%v):\n%s", err, buf.String())
				}
			}
			out := line.Msg
			if len(tc.warn) == 0 && out != "" {
				t.Errorf("warned where the slots fit: %s", out)
			}
			for _, w := range tc.warn {
				if !strings.Contains(out, w) {
					t.Errorf("warning lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(out, w) {
					t.Errorf("warning says %q:\n%s", w, out)
				}
			}
			if n := strings.Count(buf.String(), "the engine has"); len(tc.warn) > 0 && n != 1 {
				t.Errorf("%d warnings, want one:\n%s", n, buf.String())
			}
		})
	}
}

// The default arm is the engine's own default, the policy arm appears only
// when the policy's width differs, and no width is measured twice.
func TestBenchArms(t *testing.T) {
	pol := &policy.Policy{Defaults: []policy.Default{{Engine: key.LlamaCpp, Drafter: key.Draft, Width: 4}}}
	k := key.Key{Engine: key.LlamaCpp, Drafter: key.Draft, Capability: key.Capability{Major: 9}, Quant: key.QuantQ8_0}
	measured := width.Resolution{Key: k, Width: 6, Source: width.Measured, Entry: &policy.Entry{ID: "h200-q8_0-draft"}}
	arms, skipped := benchArms(measured, pol, key.LlamaCpp, []int{2, 4, 6, 8})
	var got []string
	for _, a := range arms {
		got = append(got, a.Kind+":"+strconv.Itoa(a.Width))
	}
	if want := []string{"classic:0", "default:4", "policy:6", "width:2", "width:8"}; !slices.Equal(got, want) {
		t.Errorf("arms %q, want %q", got, want)
	}
	if len(skipped) != 2 || !strings.Contains(skipped[0], "width 4 is measured once, as the default arm") || !strings.Contains(arms[2].Label, "entry h200-q8_0-draft") {
		t.Errorf("skipped %q, policy label %q", skipped, arms[2].Label)
	}
	// A pair tuned on the sim (source simulated) is an entry too: the
	// default arm is the engine's own default, not the tuned width.
	simulated := measured
	simulated.Source = width.Simulated
	if arms, _ := benchArms(simulated, pol, key.LlamaCpp, nil); len(arms) != 3 || arms[1].Width != 4 || arms[2].Kind != "policy" || arms[2].Width != 6 {
		t.Errorf("a tuned entry of the sim: %+v", arms)
	}
	kindDefault := width.Resolution{Key: k, Width: 4, Source: width.KindDefault, Reason: "per-kind default"}
	arms, _ = benchArms(kindDefault, pol, key.LlamaCpp, []int{4, 6})
	if len(arms) != 3 || arms[1].Kind != "default" || arms[1].Width != 4 || arms[2].Width != 6 {
		t.Errorf("no policy entry: %+v", arms)
	}
}

// An arm whose port another process holds takes a free one when the base
// port is the default; a base port the operator gave is used as is.
func TestBenchArmPort(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port
	free := freePort(t)
	cases := []struct {
		name    string
		anyPort bool
		port    int
		moved   bool
	}{
		{"default base, port taken", true, taken, true},
		{"default base, port free: still the kernel's pick (another bench may pick it too)", true, free, true},
		{"operator's base, port taken", false, taken, false},
		{"operator's base, port free", false, free, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := (&starter{anyPort: c.anyPort}).armPort(c.port)
			if moved := got != c.port; moved != c.moved {
				t.Fatalf("armPort(%d) = %d, moved %v, want moved %v", c.port, got, moved, c.moved)
			}
			if c.moved && serve.PortFree("127.0.0.1", got) != nil {
				t.Errorf("moved to %d, which is not free", got)
			}
		})
	}
}

// An arm that moves to a free port keeps the command its plan built, with
// the port filled in: the plan is not built again (its --help run again).
func TestBenchAtPort(t *testing.T) {
	a, err := engine.For(key.Sim)
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.Command(engine.Spec{Model: "t", Host: "127.0.0.1", Port: 18789}, width.Resolution{Source: width.Off}, "", nil, engine.Caps{Self: "/bin/speclaunch"})
	if err != nil {
		t.Fatal(err)
	}
	p := &plan.Plan{Launch: l}
	p.Settings.Port.Value = 18789
	np, err := atPort(p, 41234)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(np.Launch.Argv, " "); got != "/bin/speclaunch __sim -m t --host 127.0.0.1 --port 41234" || np.Launch.BaseURL != "http://127.0.0.1:41234" || np.Settings.Port.Value != 41234 {
		t.Errorf("moved arm: %q at %s, settings port %d", got, np.Launch.BaseURL, np.Settings.Port.Value)
	}
	if p.Settings.Port.Value != 18789 || !strings.Contains(strings.Join(p.Launch.Argv, " "), "--port 18789") {
		t.Error("the arm's own plan changed")
	}
}

// Arms started at once on the default base port each get their own port,
// though the kernel may hand a closed probe's port out again.
func TestArmPortsDistinct(t *testing.T) {
	picks := []int{40001, 40001, 40001, 40002}
	st := &starter{anyPort: true, pick: func() (int, error) {
		p := picks[0]
		picks = picks[1:]
		return p, nil
	}}
	if a, b := st.armPort(18790), st.armPort(18791); a != 40001 || b != 40002 {
		t.Errorf("ports %d and %d, want 40001 and 40002 (a port handed out once is not given again)", a, b)
	}
}

// An arm's port is drawn below the ephemeral range, which outgoing
// connections take from, and is free when drawn.
func TestArmPortPick(t *testing.T) {
	for range 20 {
		p, err := armPortPick()
		if err != nil || p < armPortLo || p >= armPortHi {
			t.Fatalf("armPortPick() = %d, %v; want a port in %d-%d", p, err, armPortLo, armPortHi-1)
		}
	}
}

// A picked port found taken at the arm's check is picked again, up to
// armPortTries ports; a port the operator gave is checked once.
func TestArmPortCheckedPicksAgain(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().(*net.TCPAddr).Port
	check := func(p int) error { return serve.PortFree("127.0.0.1", p) }
	for _, tc := range []struct {
		name    string
		anyPort bool
		picks   []int
		want    int
		fails   bool
	}{
		{"taken, then free", true, []int{taken, 0}, 0, false},
		{"taken every time", true, nil, taken, true},
		{"the operator's port, taken", false, nil, taken, true},
		{"taken at the check for an instant, free at a second look", true, []int{-1, 0}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			picks := slices.Clone(tc.picks)
			blip := map[int]bool{}
			check := func(p int) error {
				if blip[p] {
					return fmt.Errorf("port %d on 127.0.0.1 is not available (%w)", p, syscall.EADDRINUSE)
				}
				return check(p)
			}
			st := &starter{anyPort: tc.anyPort, pick: func() (int, error) {
				if len(picks) == 0 {
					return taken, nil
				}
				p := picks[0]
				picks = picks[1:]
				if p == 0 {
					return freePort(t), nil
				}
				if p < 0 { // a free port another process's probe holds at the check only
					p = freePort(t)
					blip[p] = true
				}
				return p, nil
			}}
			if !tc.anyPort {
				st.pick = nil
			}
			got, err := st.armPortChecked(taken, check)
			if (err != nil) != tc.fails || tc.want != 0 && got != tc.want || tc.want == 0 && (got == taken || blip[got]) {
				t.Errorf("port %d, err %v; want port %d (0: any but the taken %d), failing %v", got, err, tc.want, taken, tc.fails)
			}
		})
	}
}
