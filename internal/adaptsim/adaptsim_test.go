package adaptsim

import (
	"cmp"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/control"
	"github.com/speclaunch/speclaunch/internal/simcost"
)

// replayDir holds the committed H200 cells; ADAPTSIM_REPLAY_DIR moves
// it (scripts/replay-0312e.sh runs this package in an older checkout).
var replayDir = cmp.Or(os.Getenv("ADAPTSIM_REPLAY_DIR"), "../../docs/benchmark_results/adapteval")

func demoLoad() Profile {
	return Profile{Name: "demo-load", Model: simcost.DemoLoad(), Default: 4, SwitchS: 3, Slots: 4, ReqTokens: ReqTokens}
}

// The engine in closed form gives, on average over fresh engines, the
// rate simcost.Model.RateAt says, and the Fixed controller scores what
// the default scores.
func TestEngineMatchesRateAt(t *testing.T) {
	p := demoLoad()
	for _, n := range []int{1, 4} {
		for _, w := range []int{1, 3, 5, 8} {
			p.Default = w
			tr := Traffic{"steady", []Phase{{Dur: PhaseDur, Clients: n}}}
			var tok, def float64
			for seed := range uint64(24) {
				out := Run(p, tr, Fixed{}, seed, Options{Horizon: 2 * time.Minute})
				tok += out.Tokens
				def += out.Default
				if math.Abs(out.Tokens/out.DefaultFirst-1) > 0.02 {
					t.Errorf("n=%d w=%d seed %d: tokens %.0f, the default on the same engine %.0f", n, w, seed, out.Tokens, out.DefaultFirst)
				}
			}
			if r := tok / def; math.Abs(r-1) > 0.03 {
				t.Errorf("n=%d w=%d: fixed width over the model's RateAt = %.3f, want 1 ± 0.03", n, w, r)
			}
			m := p.Model
			a := newAccept(m, 1, 17)
			if got, want := rate(m, &a, w, n, ReqTokens), m.RateAt(w, n, ReqTokens); math.Abs(got/want-1) > 1e-9 {
				t.Errorf("n=%d w=%d: rate %.2f, RateAt %.2f", n, w, got, want)
			}
		}
	}
}

// A controller that serves each phase's oracle width scores about 1 of
// the oracle (less its switches), and the Fixed one the default's share.
func TestOracleAndFixed(t *testing.T) {
	p := demoLoad()
	// A server's traffic, as the matrix's: under one length a classic
	// engine a switch started runs slower than a fresh one (ClassicSwitched).
	p.Model.VariedLengths = true
	tr := Traffic{"load", []Phase{{Dur: PhaseDur, Clients: 1}, {Dur: PhaseDur, Clients: 4}}}
	ws := OracleWidths(p, tr, 17)
	if ws[0] == ws[1] {
		t.Fatalf("demo-load: oracle widths %v, want the best width to move with load", ws)
	}
	c := RunCell(p, tr, func(Profile) Controller { return &oracleCtl{tr: tr, ws: ws} }, 8, 1, Options{})
	if c.Frac < 0.97 || c.Frac > 1.03 {
		t.Errorf("oracle controller: %.3f of the oracle, want about 1", c.Frac)
	}
	f := RunCell(p, tr, func(Profile) Controller { return Fixed{} }, 8, 1, Options{})
	if math.Abs(f.Frac-f.DefaultFrac) > 0.03 || f.Switches != 0 {
		t.Errorf("fixed: %.3f of the oracle, the default %.3f, %v switches", f.Frac, f.DefaultFrac, f.Switches)
	}
}

// oracleCtl switches to the phase's oracle width at every scrape.
type oracleCtl struct {
	Fixed
	tr Traffic
	ws []int
}

func (o *oracleCtl) Scrape(s Scrape) []Command {
	ms := float64(s.Now.Sub(Start) / time.Millisecond)
	total := 0.0
	for _, p := range o.tr.Phases {
		total += float64(p.Dur / time.Millisecond)
	}
	t := math.Mod(ms, total)
	for i, p := range o.tr.Phases {
		if t -= float64(p.Dur / time.Millisecond); t < 0 {
			return []Command{{Switch: o.ws[i], Reason: "oracle"}}
		}
	}
	return nil
}

// An engine's counters move only when a request ends on it, as
// llama-server's /metrics do; its wait before decoding is in the
// proxy's served seconds, not the engine's own.
func TestCountersAtRequestEnd(t *testing.T) {
	m := simcost.DemoLoad()
	a := newAccept(m, 1, 17)
	e := &engine{width: 4}
	g := leg{m: m, a: &a, reqTokens: ReqTokens, k: 4, cyc: m.CycleMS(4, 4)}
	cl := client{eng: e}
	rng := rand.New(rand.NewPCG(1, 2))
	cl.next(g, 4, rng)
	wait := cl.wait
	if wait <= 0 {
		t.Fatalf("a request under 4 sequences waits %v rounds, want the model's pickup", wait)
	}
	tokens, used, ended := cl.run(g, 10*g.cyc, rng)
	if ended || used != 10*g.cyc || tokens <= 0 || e.c.Tokens != 0 || e.c.Ended != 0 {
		t.Fatalf("mid-request: tokens %v used %v ended %v, engine counters %+v; want tokens, all the time used, nothing credited", tokens, used, ended, e.c)
	}
	var sum float64
	for !ended {
		var tok float64
		tok, _, ended = cl.run(g, 50*g.cyc, rng)
		sum += tok
	}
	if e.c.Ended != 1 || math.Abs(e.c.Tokens-ReqTokens) > 1e-6 || e.c.Cycles <= 0 {
		t.Fatalf("after the request: %+v, want one request of %d tokens credited", e.c, ReqTokens)
	}
	if !(e.c.Served > e.c.EngineSecs) || math.Abs(e.c.Served-e.c.EngineSecs-wait*g.cyc/1000) > 1e-9 {
		t.Errorf("served %v s, engine %v s: want the wait of %v rounds between them", e.c.Served, e.c.EngineSecs, wait)
	}
}

// A switch takes the profile's switch time with the old engine serving,
// the scrapes say Shared while it starts and while the old one drains,
// and the new engine serves under a new generation.
func TestSwitchSharedAndDrain(t *testing.T) {
	p := demoLoad()
	var seen []Scrape
	c := &recordCtl{switchAt: 10 * time.Second, to: 6, seen: &seen}
	out := Run(p, Traffic{"steady", []Phase{{Dur: PhaseDur, Clients: 4}}}, c, 1, Options{Horizon: 30 * time.Second})
	if len(out.Switches) != 1 || out.EndWidth != 6 {
		t.Fatalf("switches %v, end width %d; want one switch to 6", out.Switches, out.EndWidth)
	}
	for _, s := range seen {
		at := s.Now.Sub(Start)
		switch {
		case at <= 10*time.Second && (s.Shared || s.Width != 4 || s.Engine != 1):
			t.Errorf("%v before the switch: %+v", at, s)
		case at > 10*time.Second && at < 13*time.Second && (!s.Shared || s.Width != 4):
			t.Errorf("%v while the new engine starts: shared %v width %d, want shared at width 4", at, s.Shared, s.Width)
		case at >= 13*time.Second && at < 15*time.Second && (!s.Shared || s.Width != 6 || s.Engine != 2):
			t.Errorf("%v while the old engine drains: %+v, want shared, width 6, engine 2", at, s)
		case at >= 18*time.Second && s.Shared:
			t.Errorf("%v: still shared", at)
		}
	}
	if c.took != 3*time.Second {
		t.Errorf("the switch took %v, want the profile's 3 s", c.took)
	}
}

// recordCtl asks for one switch and records every scrape.
type recordCtl struct {
	Fixed
	switchAt time.Duration
	to       int
	took     time.Duration
	seen     *[]Scrape
	asked    bool
}

func (r *recordCtl) Scrape(s Scrape) []Command {
	*r.seen = append(*r.seen, s)
	if !r.asked && s.Now.Sub(Start) >= r.switchAt {
		r.asked = true
		return []Command{{Switch: r.to, Reason: "test"}}
	}
	return nil
}

func (r *recordCtl) Switched(s Scrape, took time.Duration) []Command {
	r.took = took
	return nil
}

// The report's small rules: end widths counted, a replay within its
// tolerance, a cell judged and below the default.
func TestReportRules(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{{[]int{4, 1, 4, 1, 1}, "1×3 4×2"}, {[]int{5}, "5"}, {nil, ""}} {
		if got := counted(tc.in); got != tc.want {
			t.Errorf("counted(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
	r := ReplayResult{Recorded: Recorded{Frac: 0.906}, Frac: 0.936}
	if !r.Within(0.0301) || r.Within(0.029) {
		t.Errorf("0.936 against 0.906: Within(0.0301) %v, Within(0.029) %v", r.Within(0.0301), r.Within(0.029))
	}
	c := Cell{Gain: 0.10, Noise: 0.08, EndVsDefault: -0.011}
	if !c.Judged() || !c.Below() {
		t.Errorf("%+v: judged %v below %v, want both", c, c.Judged(), c.Below())
	}
	c = Cell{Gain: 0.05, Noise: 0.08, EndVsDefault: -0.009}
	if c.Judged() || c.Below() {
		t.Errorf("%+v: judged %v below %v, want neither", c, c.Judged(), c.Below())
	}
	s := Summarize([]Cell{{Profile: "a", Frac: 0.9, EndVsDefault: -0.02}, {Profile: "b", Frac: 0.99, Gain: 0.2, Noise: 0.1}})
	if s.Worst != 0.9 || s.WorstCell != "a / " || s.BelowDefault != 1 || s.Judged != 1 || s.JudgedUnder97 != 0 {
		t.Errorf("summary %+v", s)
	}
}

// Under a mixed phase each request draws its class: a fixed width gets,
// over fresh engines, the harmonic mean of the classes' rates (the
// oracle's accounting), and the classes spread a request's tokens a
// cycle at width 4 as the H100's prompts did (mixedScale).
func TestMixedPhase(t *testing.T) {
	p := demoLoad()
	acc := newAccepts(p, 17)[1]
	var m, m2 float64
	for cls := 2; cls < classes; cls++ {
		x := acc[cls].tpc[4]
		m, m2 = m+x, m2+x*x
	}
	n := float64(classes - 2)
	if cv := math.Sqrt(m2/n-sq(m/n)) / (m / n); cv < 0.2 || cv > 0.3 {
		t.Errorf("mixed classes' tokens a cycle at width 4: coefficient of variation %.3f, want 0.2-0.3 (the H100's 0.25)", cv)
	}
	for _, clients := range []int{1, 4} {
		for _, w := range []int{1, 4, 8} {
			p.Default = w
			tr := Traffic{"mixed", []Phase{{Dur: PhaseDur, Clients: clients, Mixed: true}}}
			var tok, def float64
			for seed := range uint64(24) {
				out := Run(p, tr, Fixed{}, seed, Options{Horizon: 2 * time.Minute})
				tok, def = tok+out.Tokens, def+out.Default
			}
			if r := tok / def; math.Abs(r-1) > 0.03 {
				t.Errorf("%d clients, width %d: a fixed width over the mixed phase's rate = %.3f, want 1 ± 0.03", clients, w, r)
			}
		}
	}
}

func sq(x float64) float64 { return x * x }

// Profile.LoadAccept scales each conditional acceptance with the
// sequences decoding, 1 + LoadAccept·(n−1)/3 up to four, at most 1; a
// count outside 1-4 reads the nearest.
func TestAcceptsByLoad(t *testing.T) {
	p := demoLoad()
	p.LoadAccept = 0.13
	acc := newAccepts(p, 17)
	for k := 1; k < 4; k++ {
		one, four := acc.at(0, 1).cond[4][k], acc.at(0, 4).cond[4][k]
		if want := math.Min(1, 1.13*one); math.Abs(four-want) > 1e-12 {
			t.Errorf("position %d: %.4f at four sequences, want %.4f (1.13 × %.4f, at most 1)", k, four, want, one)
		}
	}
	if acc.at(0, 0) != acc.at(0, 1) || acc.at(0, 9) != acc.at(0, 4) {
		t.Error("a count outside 1-4 does not read the nearest")
	}
}

// Under one-length requests a classic engine a switch started runs
// ClassicSwitched slower than the first engine; a speculative one, or
// any under varied lengths (ClassicVaried prices those), does not.
func TestSwitchedClassic(t *testing.T) {
	m := simcost.DemoLoad()
	m.Noise = 0
	varied := m
	varied.VariedLengths = true
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name  string
		m     simcost.Model
		width int
		want  float64 // the switched engine's round over the first's
	}{
		{"classic, one length", m, 1, m.Batch.ClassicSwitched},
		{"width 4, one length", m, 4, 1},
		{"classic, varied lengths", varied, 1, 1},
	} {
		first := &engine{gen: 1, width: tc.width}
		next := &engine{gen: 2, width: tc.width, takeover: 0}
		a := first.cycleMS(tc.m, 4, math.Inf(-1), 1000, 250, rng)
		b := next.cycleMS(tc.m, 4, math.Inf(-1), 1000, 250, rng)
		if math.Abs(b/a-tc.want) > 1e-9 {
			t.Errorf("%s: switched over first %v, want %v", tc.name, b/a, tc.want)
		}
		// Past the span measured (SwitchedMS), as the first.
		later := next.cycleMS(tc.m, 4, math.Inf(-1), 1e6, 250, rng)
		if math.Abs(later/a-1) > 1e-9 {
			t.Errorf("%s: switched over first at 1000 s %v, want 1", tc.name, later/a)
		}
	}
}

// A cell's runs depend on its names only: a profile added before it
// moves none of its seeds, so none of its figures.
func TestMatrixCellSeedsByName(t *testing.T) {
	ps, err := Profiles(replayDir)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Horizon: 3 * time.Minute}
	alone := Matrix(ps[1:2], Control(control.Config{}), 2, 1, o)
	after := Matrix(ps[:2], Control(control.Config{}), 2, 1, o)
	got := after[len(after)-len(alone):]
	for i := range alone {
		if alone[i].Frac != got[i].Frac || alone[i].Switches != got[i].Switches {
			t.Errorf("%s / %s: frac %.6f switches %.1f alone, %.6f %.1f after another profile", alone[i].Profile, alone[i].Traffic,
				alone[i].Frac, alone[i].Switches, got[i].Frac, got[i].Switches)
		}
	}
}
