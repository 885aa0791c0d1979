package adaptsim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/control"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/simcost"
)

func init() {
	Controllers["control"] = Control(control.Config{})
}

// Control plugs internal/control's pure controller into the matrix: the
// adapter keeps its State, turns each call into Observations (a Sample
// every 250 ms step, a Scrape every interval), answers a probe at once
// with Env.Probe and returns its switches as Commands.
func Control(cfg control.Config) Factory {
	return func(p Profile) Controller {
		c := cfg
		c.Default = schedule.Flat(p.Default, "engine default")
		c.SwitchS = p.SwitchS
		if p.Llama && c.ClassicLoad == 0 {
			c.ClassicLive, c.ClassicLoad = control.LlamaClassicLive, control.LlamaClassicLoad // as serve sets them
		}
		if !p.Llama { // the sim engine: its own spread, as serve sets it
			c = c.WithSpread(p.Model.Spread.Single, p.Model.Spread.MultiSpec)
		}
		ctl := control.New(c)
		return &controlAdapter{c: ctl, s: ctl.Init(control.Pair{})}
	}
}

type controlAdapter struct {
	c   control.Controller
	s   control.State
	env Env
}

func (a *controlAdapter) Start(env Env, s Scrape) []Command {
	a.env = env
	// As serve does (internal/serve's BeforeTraffic): the first engine is
	// probed before it takes traffic, for the rows of BeforeRows; at no
	// virtual time and without serve's 10 s bound.
	v := map[int]float64{}
	for _, rows := range control.BeforeRows(env.Slots, a.c.Config().MaxWidth, s.Width) {
		for _, r := range rows {
			v[r] = env.Probe(r)
		}
	}
	cmds := a.step(control.Observation{Kind: control.Probed, Now: s.Now, Verify: v, Before: true})
	return append(cmds, a.scrape(s)...)
}

func (a *controlAdapter) Scrape(s Scrape) []Command { return a.scrape(s) }

func (a *controlAdapter) Switched(s Scrape, took time.Duration) []Command {
	cmds := a.step(control.Observation{Kind: control.Switched, Now: s.Now, Took: took})
	return append(cmds, a.scrape(s)...)
}

func (a *controlAdapter) Close() {}

// Sample is the load between scrapes: what the controller's follower
// (internal/follow's rule over the schedule in force) switches by.
func (a *controlAdapter) Sample(s Scrape) []Command {
	return a.step(control.Observation{Kind: control.Sample, Now: s.Now, Width: s.Width, InFlight: s.InFlight})
}

func (a *controlAdapter) scrape(s Scrape) []Command {
	secs, busy := s.Counters.Served, s.Counters.EngineSecs
	if secs <= 0 {
		secs, busy = s.Counters.EngineSecs, 0
	}
	return a.step(control.Observation{Kind: control.Scrape, Now: s.Now, Engine: s.Engine, Width: s.Width, Slots: s.Slots,
		InFlight: s.InFlight, Counters: control.Counters{Cycles: s.Counters.Cycles, AtLeast: append([]float64(nil), s.Counters.AtLeast...),
			Tokens: s.Counters.Tokens, Secs: secs, Busy: busy}})
}

func (a *controlAdapter) step(o control.Observation) []Command {
	var acts []control.Action
	a.s, acts = a.c.Step(a.s, o)
	var cmds []Command
	for len(acts) > 0 {
		act := acts[0]
		acts = acts[1:]
		switch act.Op {
		case control.SwitchTo:
			cmds = append(cmds, Command{Switch: act.Width, Reason: act.Reason})
		case control.Probe:
			v := map[int]float64{}
			for _, r := range act.Rows {
				v[r] = a.env.Probe(r)
			}
			var more []control.Action
			a.s, more = a.c.Step(a.s, control.Observation{Kind: control.Probed, Now: o.Now, Verify: v})
			acts = append(acts, more...)
		case control.Log, control.Warn:
			if a.env.Log != nil {
				a.env.Log(act.Msg)
			}
		}
	}
	return cmds
}

// TestControlCell runs one cell with the control controller (-v):
// ADAPTSIM_CELL="profile/traffic" logs the fraction of each of the
// matrix's seeds for it, "profile/traffic/seed" every line of that seed's
// run; the names as in the report.
func TestControlCell(t *testing.T) {
	want := os.Getenv("ADAPTSIM_CELL")
	if want == "" {
		t.Skip("set ADAPTSIM_CELL=profile/traffic[/seed]")
	}
	f := strings.SplitN(want, "/", 3)
	if len(f) < 2 {
		t.Fatalf("ADAPTSIM_CELL %q: want profile/traffic[/seed]", want)
	}
	var seeds []uint64
	if len(f) == 3 {
		seed, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			t.Fatalf("ADAPTSIM_CELL %q: its seed: %v", want, err)
		}
		seeds = []uint64{seed}
	} else {
		for i := range uint64(matrixSeeds) {
			seeds = append(seeds, CellSeed(f[0], f[1])+i)
		}
	}
	ps, err := Profiles(replayDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		for _, tr := range Traffics(p) {
			if p.Name != f[0] || tr.Name != f[1] {
				continue
			}
			for _, seed := range seeds {
				o := Options{}
				if len(seeds) == 1 {
					o.Log = func(s string) { t.Log(s) }
				}
				t.Logf("seed %d: frac %.3f", seed, Run(p, tr, Controllers["control"](p), seed, o).Frac())
			}
			return
		}
	}
	t.Fatalf("ADAPTSIM_CELL %q: no such profile and traffic in the matrix", want)
}

// controlVariants are the ablation's: each rule of internal/control
// turned off (Config.Off), each constant moved.
var controlVariants = []struct {
	name string
	set  func(*control.Config)
}{
	{"baseline", func(*control.Config) {}},
	{"baseline (other seeds)", func(*control.Config) {}},
	{"no spread", func(c *control.Config) { c.Off = map[string]bool{"spread": true} }},
	{"no payback", func(c *control.Config) { c.Off = map[string]bool{"payback": true} }},
	{"no warm-up", func(c *control.Config) { c.Off = map[string]bool{"warmup": true} }},
	{"no drift test", func(c *control.Config) { c.Off = map[string]bool{"drift": true} }},
	{"no trials", func(c *control.Config) { c.Off = map[string]bool{"trials": true} }},
	{"no extrapolation", func(c *control.Config) { c.Off = map[string]bool{"extrapolation": true} }},
	{"no regimes", func(c *control.Config) { c.Off = map[string]bool{"regimes": true} }},
	{"no bucket acceptance", func(c *control.Config) { c.Off = map[string]bool{"bucket acceptance": true} }},
	{"no bucket acceptance (other seeds)", func(c *control.Config) { c.Off = map[string]bool{"bucket acceptance": true} }},
	{"no check under classic", func(c *control.Config) { c.Off = map[string]bool{"check": true} }},
	{"no retrial", func(c *control.Config) { c.Off = map[string]bool{"retrial": true} }},
	{"no classic load", func(c *control.Config) { c.Off = map[string]bool{"classic load": true} }},
	{"no far ahead", func(c *control.Config) { c.Off = map[string]bool{"far ahead": true} }},
	{"no ahead elsewhere", func(c *control.Config) { c.Off = map[string]bool{"ahead elsewhere": true} }},
	{"no wait", func(c *control.Config) { c.Off = map[string]bool{"wait": true} }},
	{"no stray trial", func(c *control.Config) { c.Off = map[string]bool{"stray trial": true} }},
	{"no way back", func(c *control.Config) { c.Off = map[string]bool{"way back": true} }},
	{"no unmeasured here", func(c *control.Config) { c.Off = map[string]bool{"unmeasured here": true} }},
	{"follow cap 6 an hour", func(c *control.Config) { c.MaxPerHour = 6 }},
	{"follow cap 24 an hour", func(c *control.Config) { c.MaxPerHour = 24 }},
	{"Z 1.0", func(c *control.Config) { c.Z = 1.0 }},
	{"Z 2.33", func(c *control.Config) { c.Z = 2.33 }},
	{"min cycles 128", func(c *control.Config) { c.MinCycles = 128 }},
	{"min cycles 1024", func(c *control.Config) { c.MinCycles = 1024 }},
	{"payback 3 min", func(c *control.Config) { c.Payback = 3 * time.Minute }},
	{"payback 30 min", func(c *control.Config) { c.Payback = 30 * time.Minute }},
	{"retry after 10 min", func(c *control.Config) { c.RetryAfter = 10 * time.Minute }},
	{"drift z 8", func(c *control.Config) { c.DriftZ = 8 }},
	{"load window 16", func(c *control.Config) { c.LoadWindow = 16 }},
	{"spread halved", func(c *control.Config) { c.Spread1, c.SpreadN = 0.017, 0.028 }},
	{"spread doubled", func(c *control.Config) { c.Spread1, c.SpreadN = 0.068, 0.112 }},
	{"warm-up 15 s", func(c *control.Config) { c.WarmUp = 15 * time.Second }},
}

// BenchmarkControlAblation runs the matrix with each variant of the
// control controller (CONTROL_VARIANTS, comma-separated names: a subset)
// and prints one tab-separated line per variant: name, worst, median,
// judged cells under 0.97, cells below the default, worst end vs the
// default, switches (and with CONTROL_CELLS set, one line per cell).
func BenchmarkControlAblation(b *testing.B) {
	pick := map[string]bool{}
	for _, n := range strings.Split(os.Getenv("CONTROL_VARIANTS"), ",") {
		if n != "" {
			pick[n] = true
		}
	}
	ps, err := Profiles(replayDir)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		for _, v := range controlVariants {
			if len(pick) > 0 && !pick[v.name] {
				continue
			}
			var cfg control.Config
			v.set(&cfg)
			off := uint64(0)
			if strings.Contains(v.name, "other seeds") {
				off = 500
			}
			cells := Matrix(ps, Control(cfg), matrixSeeds, 2, Options{SeedOffset: off})
			if os.Getenv("CONTROL_CELLS") != "" {
				for _, c := range cells {
					fmt.Printf("CELL\t%s\t%s\t%s\t%.4f\t%+.4f\t%v\n", v.name, c.Profile, c.Traffic, c.Frac, c.EndVsDefault, c.Judged())
				}
			}
			s := Summarize(cells)
			fmt.Printf("ABLATION\t%s\t%.4f\t%.4f\t%d\t%d\t%+.4f\t%.0f\n", v.name, s.Worst, s.Median, s.JudgedUnder97, s.BelowDefault, s.WorstVsDefault, s.Switches)
		}
	}
}

// BenchmarkHardwareEffects runs the control controller on demo-load and
// the sim's H200 shapes with what an H100 cell showed and the matrix
// lacks (docs/benchmark_results/h100-follow-2026-12-05.md): classic's
// step at several sequences 1.33x the probe of its rows (the matrix's
// H200 calibration: 1.054), and the acceptance 13 % higher at four
// clients than at one (Profile.LoadAccept); each alone and both, under
// the load alternating and steady four clients. It prints one line a
// cell: profile, effects, traffic, frac of the oracle, vs the default,
// end vs the default, switches. EFFECTS_OFF names a rule of the
// controller to turn off (Config.Off), for its ablation here.
//
//	go test ./internal/adaptsim -run X -bench HardwareEffects -benchtime 1x
func BenchmarkHardwareEffects(b *testing.B) {
	ps, err := Profiles(replayDir)
	if err != nil {
		b.Fatal(err)
	}
	effects := []struct {
		name         string
		live, accept float64
	}{{"none", 0, 0}, {"classic 1.33x", 1.33, 0}, {"acceptance +13% at 4", 0, 0.13}, {"both", 1.33, 0.13}}
	for b.Loop() {
		i := 0
		for _, p := range ps {
			if p.Name != "demo-load" && !strings.HasPrefix(p.Name, "h200 ") {
				continue
			}
			for _, e := range effects {
				q := p
				if e.live > 0 {
					q.Model.Batch.ClassicLive = e.live
				}
				q.LoadAccept = e.accept
				cfg := control.Config{}
				if os.Getenv("EFFECTS_OFF") != "" {
					cfg.Off = map[string]bool{os.Getenv("EFFECTS_OFF"): true}
				}
				for _, tr := range Traffics(q) {
					if tr.Name != "load 1 and 4 clients" && tr.Name != "steady, 4 clients" {
						continue
					}
					i++
					c := RunCell(q, tr, Control(cfg), matrixSeeds, uint64(i)*1000+1, Options{})
					fmt.Printf("EFFECT\t%s\t%s\t%s\t%.3f\t%+.1f%%\t%+.1f%%\t%.1f\n", p.Name, e.name, tr.Name, c.Frac, 100*c.VsDefault, 100*c.EndVsDefault, c.Switches)
				}
			}
		}
	}
}

// The controller's belief about classic under load and the sim's truth
// are the same two measurements (control.LlamaClassicLive and
// LlamaClassicLoad); control's TestClassicPricedAsTheSim prices them
// alike at every count in flight.
func TestClassicLoadIsTheSims(t *testing.T) {
	b := simcost.H200Batch
	if control.LlamaClassicLive != b.ClassicLive || control.LlamaClassicLoad != b.ClassicVaried {
		t.Errorf("control.LlamaClassicLive, LlamaClassicLoad %v, %v; simcost.H200Batch.ClassicLive, ClassicVaried %v, %v: the same measurements",
			control.LlamaClassicLive, control.LlamaClassicLoad, b.ClassicLive, b.ClassicVaried)
	}
}

// On the sim's GB10 (mlxcel's flat 16 half the rate of width 3), a drift
// of the traffic left the default unmeasured and the controller went back
// to 16 to measure it, at every change; the model puts 16 far below width
// 3, so width 3 stays (control's farAhead).
func TestFarAheadKeepsTheRunningWidth(t *testing.T) {
	ps, err := Profiles(replayDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []bool{false, true} {
		cfg := control.Config{}
		if off {
			cfg.Off = map[string]bool{"far ahead": true}
		}
		var lines []string
		tr := Traffic{"two classes, 1 client", []Phase{{Dur: PhaseDur, Clients: 1}, {Dur: PhaseDur, Clients: 1, Class: 1}}}
		Run(ps[0], tr, Control(cfg)(ps[0]), 3, Options{Horizon: 12 * time.Minute, Log: func(s string) { lines = append(lines, s) }})
		back, kept := 0, 0
		for _, l := range lines {
			if strings.Contains(l, "→ 16") {
				back++
			}
			if strings.Contains(l, "in the default's place: default width 16 is not measured at this load yet, and width") {
				kept++
			}
		}
		if !off && (back > 0 || kept == 0) {
			t.Errorf("switched back to the default 16 %d times, kept the running width %d times:\n%s", back, kept, strings.Join(lines, "\n"))
		}
		if off && back == 0 {
			t.Errorf("with the rule off no switch went back to 16: the test does not reach the drift")
		}
	}
}
