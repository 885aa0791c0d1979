package adaptsim

import (
	"fmt"
	"hash/fnv"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/speclaunch/speclaunch/internal/simcost"
)

// Settings of the matrix.
const (
	// ReqTokens is the tokens a request: adapteval's -max-tokens in every
	// committed H200 cell (docs/benchmark_results/adapteval/*-fixed.json).
	ReqTokens = 128
	// PhaseDur is one phase of the traffics that alternate.
	PhaseDur = 5 * time.Minute
	// ShortPhase is a phase of the hardware follow runs (followeval
	// -levels 1,4 -phase 40s -run 160s, docs/benchmark_results/
	// h100-follow-2026-12-06h.md), where four of six trials were cut
	// unjudged by the load's next change.
	ShortPhase = 40 * time.Second
	// simSwitchS is a sim profile's switch, as internal/adapt's earlier
	// matrix took it (matrixSwitch); replaySwitchS a replay cell's: the
	// switches of the 2026-12-03e run took 0.80-1.38 s
	// (docs/benchmark_results/h200-llamacpp-d32676d-summary-2026-12-03e.md).
	simSwitchS    = 3.0
	replaySwitchS = 1.38
	// llamaDefault and mlxcelDefault are the engines' default widths.
	llamaDefault  = 4
	mlxcelDefault = 16
	// slots: -np 4 in every committed H200 cell.
	slots = 4
)

// Profiles are the matrix's engines and pairs: the sim's cost presets
// (gb10 as mlxcel, demo-load as llama-server), the sim's acceptance
// shapes on the H200 Q8_0 cost, and a replay of every committed H200
// fixed-width cell in replayDir (docs/benchmark_results/adapteval).
func Profiles(replayDir string) ([]Profile, error) {
	ps := []Profile{
		{Name: "gb10", Model: simcost.Default(), Default: mlxcelDefault},
		{Name: "demo-load", Model: simcost.DemoLoad(), Default: llamaDefault, Llama: true},
	}
	for _, name := range simcost.ProfileNames() {
		m := simcost.H200Q8()
		m.Accept = simcost.Profiles[name]
		ps = append(ps, Profile{Name: "h200 " + name, Model: m, Default: llamaDefault, Llama: true})
	}
	for i := range ps {
		ps[i].SwitchS, ps[i].Slots, ps[i].ReqTokens = simSwitchS, slots, ReqTokens
	}
	cells, err := simcost.LoadReplayCells(replayDir)
	if err != nil {
		return nil, err
	}
	for _, c := range cells {
		ps = append(ps, ReplayProfile(c))
	}
	// A server's requests vary in length; the committed cells' one length
	// kept classic's clients in step (simcost.Batch.ClassicVaried).
	for i := range ps {
		ps[i].Model.VariedLengths = true
	}
	return ps, nil
}

// ReplayProfile is a committed cell as a profile: its fitted model
// (simcost.ReplayCell.Model), llama.cpp's default, its client count.
func ReplayProfile(c simcost.ReplayCell) Profile {
	name := strings.TrimPrefix(filepath.Base(c.Name), "h200-llamacpp-d32676d-")
	return Profile{Name: "replay " + name, Model: c.Model(), Default: llamaDefault, Llama: true, SwitchS: replaySwitchS, Slots: slots,
		ReqTokens: c.ReqTokens, Clients: c.Clients}
}

// Traffics are the matrix's traffics for p: steady (one class), two
// classes alternating every PhaseDur, at one and at four clients (a
// replay at its own count only), and the load alternating one and four
// clients, every PhaseDur and every ShortPhase.
func Traffics(p Profile) []Traffic {
	var ts []Traffic
	for _, n := range []int{1, 4} {
		if p.Clients != 0 && n != p.Clients {
			continue
		}
		ts = append(ts,
			Traffic{fmt.Sprintf("steady, %d client%s", n, plural(n)), []Phase{{Dur: PhaseDur, Clients: n}}},
			Traffic{fmt.Sprintf("two classes, %d client%s", n, plural(n)), []Phase{{Dur: PhaseDur, Clients: n}, {Dur: PhaseDur, Clients: n, Class: 1}}},
			Traffic{fmt.Sprintf("mixed classes, %d client%s", n, plural(n)), []Phase{{Dur: PhaseDur, Clients: n, Mixed: true}}})
	}
	short := []Phase{{Dur: ShortPhase, Clients: 1}, {Dur: ShortPhase, Clients: 4}, {Dur: ShortPhase, Clients: 1}, {Dur: ShortPhase, Clients: 4}}
	return append(ts, Traffic{"load 1 and 4 clients", []Phase{{Dur: PhaseDur, Clients: 1}, {Dur: PhaseDur, Clients: 4}}},
		Traffic{"load 1 and 4 clients, 40 s phases", short})
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Cell is one profile under one traffic, over its seeds.
type Cell struct {
	Profile, Traffic string
	Oracle           []int // the oracle width of each phase
	Default          int
	// Frac is the controller's tokens over the per-phase oracle's,
	// DefaultFrac the default's; VsDefault the controller's tokens over
	// the default's, − 1, and EndVsDefault the same over the last third
	// of the runs. All on the mean engine (Outcome.Mean): a controller is
	// not judged by its engines' luck.
	Frac, DefaultFrac, VsDefault, EndVsDefault float64
	// Gain is the oracle over the default − 1; Noise the gain the noise
	// model needs (NoiseOf): the cell is judged when Gain > Noise.
	Gain, Noise float64
	Switches    float64 // mean per run
	SettleS     float64 // mean virtual seconds to the last switch
	EndWidths   []int   // each run's width at the end
}

// Judged says whether the goal of 0.97 of the oracle applies to c.
func (c Cell) Judged() bool { return c.Gain > c.Noise }

// Below says whether c ended below the default by more than 1 %.
func (c Cell) Below() bool { return c.EndVsDefault < -0.01 }

// NoiseOf is the gain over the default a width must show before it is
// worth a switch in cell p, tr: the one-sided 95 % bound of the
// difference of two fresh engines (1.64·√2·σ, σ the model's
// between-engine spread at the traffic's load, simcost.H200Spread), plus
// a switch repaid over a 10 minute payback window.
func NoiseOf(p Profile, tr Traffic) float64 {
	sigma := p.Model.Spread.Single
	for _, ph := range tr.Phases {
		if ph.Clients > 1 {
			sigma = math.Max(sigma, p.Model.Spread.MultiSpec)
		}
	}
	return 1.64*math.Sqrt2*sigma + p.SwitchS/600
}

// RunCell runs f on p under tr once per seed.
func RunCell(p Profile, tr Traffic, f Factory, seeds int, seed0 uint64, o Options) Cell {
	c := Cell{Profile: p.Name, Traffic: tr.Name, Oracle: OracleWidths(p, tr, o.withDefaults().MaxWidth), Default: p.Default, Noise: NoiseOf(p, tr)}
	var sum Outcome
	var sw, settle float64
	for i := range seeds {
		out := Run(p, tr, f(p), seed0+uint64(i), o)
		sum.Mean += out.Mean
		sum.Oracle += out.Oracle
		sum.Default += out.Default
		sum.EndMean += out.EndMean
		sum.EndDefault += out.EndDefault
		sw += float64(len(out.Switches))
		settle += out.SettleS
		c.EndWidths = append(c.EndWidths, out.EndWidth)
	}
	c.Frac, c.DefaultFrac = sum.Mean/sum.Oracle, sum.Default/sum.Oracle
	c.VsDefault, c.EndVsDefault = sum.Mean/sum.Default-1, sum.EndMean/sum.EndDefault-1
	c.Gain = sum.Oracle/sum.Default - 1
	c.Switches, c.SettleS = sw/float64(seeds), settle/float64(seeds)
	return c
}

// CellSeed is the first seed of a cell: its names' hash, so that a cell
// added to the matrix moves no other cell's seeds. With seeds taken from
// the cell's place, adding the 40 s traffic moved demo-load / two
// classes, 4 clients from +0.7 % to −2.0 % at its end: four seeds' luck,
// not the controller.
func CellSeed(profile, traffic string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(profile + "\x00" + traffic))
	return h.Sum64()
}

// Matrix runs f on every profile under each of its traffics, seeds runs
// a cell, on workers goroutines; a cell's seeds depend on its names only.
func Matrix(ps []Profile, f Factory, seeds, workers int, o Options) []Cell {
	type job struct {
		i  int
		p  Profile
		tr Traffic
	}
	var jobs []job
	for _, p := range ps {
		for _, tr := range Traffics(p) {
			jobs = append(jobs, job{len(jobs), p, tr})
		}
	}
	cells := make([]Cell, len(jobs))
	ch := make(chan job)
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Go(func() {
			for j := range ch {
				cells[j.i] = RunCell(j.p, j.tr, f, seeds, CellSeed(j.p.Name, j.tr.Name)+o.SeedOffset, o)
			}
		})
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	return cells
}

// Summary is what a matrix comes to.
type Summary struct {
	Cells, Judged, JudgedUnder97, BelowDefault int
	Worst, Median, WorstVsDefault              float64
	WorstCell, WorstVsCell                     string
	Switches                                   float64
}

// Summarize sums cells up.
func Summarize(cells []Cell) Summary {
	s := Summary{Cells: len(cells), Worst: math.Inf(1), WorstVsDefault: math.Inf(1)}
	var fr []float64
	for _, c := range cells {
		fr = append(fr, c.Frac)
		if c.Frac < s.Worst {
			s.Worst, s.WorstCell = c.Frac, c.Profile+" / "+c.Traffic
		}
		if c.EndVsDefault < s.WorstVsDefault {
			s.WorstVsDefault, s.WorstVsCell = c.EndVsDefault, c.Profile+" / "+c.Traffic
		}
		if c.Judged() {
			s.Judged++
			if c.Frac < 0.97 {
				s.JudgedUnder97++
			}
		}
		if c.Below() {
			s.BelowDefault++
		}
		s.Switches += c.Switches
	}
	if len(fr) > 0 {
		sort.Float64s(fr)
		s.Median = fr[len(fr)/2]
	}
	return s
}

func (s Summary) String() string {
	return fmt.Sprintf("%d cells: worst %.3f of the oracle (%s), median %.3f; %d judged (the oracle beats the default beyond the noise), %d of them under 0.97; "+
		"%d ended below the default by more than 1 %% (worst %+.1f %%, %s); %.1f switches a run summed over cells",
		s.Cells, s.Worst, s.WorstCell, s.Median, s.Judged, s.JudgedUnder97, s.BelowDefault, 100*s.WorstVsDefault, s.WorstVsCell, s.Switches)
}

// Markdown is the cell table.
func Markdown(cells []Cell) string {
	var b strings.Builder
	b.WriteString("| profile | traffic | oracle widths | default | oracle over default | noise | judged | default frac | frac | vs default | end vs default | switches | last switch s | end widths |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range cells {
		j, below := "", ""
		if c.Judged() {
			j = "yes"
		}
		if c.Below() {
			below = " **below**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %+.1f%% | %.1f%% | %s | %.3f | %.3f | %+.1f%% | %+.1f%%%s | %.1f | %.0f | %s |\n",
			c.Profile, c.Traffic, ints(c.Oracle), c.Default, 100*c.Gain, 100*c.Noise, j, c.DefaultFrac, c.Frac, 100*c.VsDefault,
			100*c.EndVsDefault, below, c.Switches, c.SettleS, counted(c.EndWidths))
	}
	return b.String()
}

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, " ")
}

// counted is xs sorted, each value once with its count when above 1:
// "1×3 4".
func counted(xs []int) string {
	var parts []string
	s := slices.Sorted(slices.Values(xs))
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] == s[i] {
			j++
		}
		if j-i > 1 {
			parts = append(parts, fmt.Sprintf("%d×%d", s[i], j-i))
		} else {
			parts = append(parts, fmt.Sprint(s[i]))
		}
		i = j
	}
	return strings.Join(parts, " ")
}
