package adaptsim

import (
	"cmp"
	"math"
	"os"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/adapt"
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
			tr := Traffic{"steady", []Phase{{PhaseDur, n, 0}}}
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
			a := newAccept(m, 0, 17)
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
	tr := Traffic{"load", []Phase{{PhaseDur, 1, 0}, {PhaseDur, 4, 0}}}
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

// Today's loop runs in the harness: it probes, explores and decides on
// virtual time.
func TestLoopRuns(t *testing.T) {
	p := demoLoad()
	tr := Traffic{"steady, 1 client", []Phase{{PhaseDur, 1, 0}}}
	var lines int
	out := Run(p, tr, Loop(adapt.Config{})(p), 1, Options{Horizon: 10 * time.Minute, Log: func(s string) { lines++; t.Log(s) }})
	if len(out.Switches) == 0 {
		t.Fatalf("the loop never switched in 10 virtual minutes")
	}
	t.Logf("frac %.3f, switches %v, end width %d", out.Frac(), out.Switches, out.EndWidth)
}
