package control

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/sim"
)

const (
	vStep    = 2.0 // seconds between scrapes
	vPhase   = 5 * time.Minute
	vHorizon = 60 * time.Minute
)

var vStart = time.Unix(1_800_000_000, 0)

// cellOut is one run of one cell.
type cellOut struct {
	tokens, oracle, def float64
	defMean             float64 // the default on the mean engine
	switches            int
	settle              float64 // virtual s of the last switch asked
	end                 int     // width serving at the end
}

// runCell runs the controller on profile p under traffic ph for
// vHorizon of virtual time; log, when not nil, gets every log line.
func runCell(cfg Config, p vProfile, ph []phase, seed uint64, log func(string)) cellOut {
	cfg.Default = schedule.Flat(p.def, "default")
	ctl := New(cfg)
	s := ctl.Init(Pair{})
	rng := rand.New(rand.NewPCG(seed, 11))
	cur := &vEngine{gen: 1, width: p.def, z: rng.NormFloat64(), born: -1e9}
	z0 := cur.z
	var out cellOut
	var oldUntil, pendAt float64
	pendW := 0
	var queue []Action
	handle := func(t float64, acts []Action) {
		queue = append(queue, acts...)
		for len(queue) > 0 {
			a := queue[0]
			queue = queue[1:]
			switch a.Op {
			case SwitchTo:
				if pendW == 0 {
					pendW, pendAt = a.Width, t+p.switchS
					out.switches++
					out.settle = t
				}
				if log != nil {
					log(fmt.Sprintf("%6.0fs switch → %d: %s", t, a.Width, a.Reason))
				}
			case Probe:
				v := map[int]float64{}
				for _, r := range a.Rows {
					v[r] = p.cost.VerifyRowsMS(r) * cur.speed(p, 1)
				}
				var more []Action
				s, more = ctl.Step(s, Observation{Kind: Probed, Now: vStart.Add(sec(t)), Verify: v})
				queue = append(queue, more...)
			case Log:
				if log != nil {
					log(fmt.Sprintf("%6.0fs %s", t, a.Msg))
				}
			}
		}
	}
	horizon := vHorizon.Seconds()
	for t := 0.0; t < horizon; t += vStep {
		f := phaseAt(ph, t)
		if pendW != 0 && t >= pendAt {
			cur = &vEngine{gen: cur.gen + 1, width: pendW, z: rng.NormFloat64(), born: t}
			oldUntil, pendW = t+p.drainS, 0
			var acts []Action
			s, acts = ctl.Step(s, Observation{Kind: Switched, Now: vStart.Add(sec(t)), Took: sec(p.switchS)})
			handle(t, acts)
		}
		shared := pendW != 0 || t < oldUntil
		out.tokens += cur.serve(p, rng, t, vStep, f.n, f.class, shared)
		best := 0.0
		for w := 1; w <= DefaultMaxWidth; w++ {
			best = math.Max(best, p.rate(w, f.n, f.class))
		}
		out.oracle += vStep * best
		first := vEngine{z: z0}
		out.def += vStep * p.rate(p.def, f.n, f.class) / first.speed(p, f.n)
		out.defMean += vStep * p.rate(p.def, f.n, f.class)
		obs := Observation{Kind: Scrape, Now: vStart.Add(sec(t + vStep)), Engine: cur.gen, Width: cur.width, Shared: shared,
			InFlight: float64(f.n) * (1 - 0.15*rng.Float64()), Counters: cur.c}
		obs.Counters.AtLeast = slices.Clone(cur.c.AtLeast)
		var acts []Action
		s, acts = ctl.Step(s, obs)
		handle(t+vStep, acts)
	}
	out.end = cur.width
	return out
}

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func phaseAt(ph []phase, t float64) phase {
	var at float64
	for {
		for _, p := range ph {
			if at += p.dur.Seconds(); t < at {
				return p
			}
		}
	}
}

// h200Q8 is the sim cost model from the H200 figures (llama-server
// d32676d, Q8_0 target), as internal/adapt's matrix has it.
func h200Q8() sim.CostModel {
	c := sim.DefaultCostModel()
	c.ClassicMS = 3.28
	c.Verify = map[int]float64{1: 3.20, 2: 3.33, 3: 3.90, 4: 4.14, 5: 4.34, 6: 4.58, 7: 4.81, 8: 5.09, 9: 5.97, 17: 6.86}
	c.DraftMS, c.DraftTokenMS = 0.3, 0.47
	return c
}

// h200 fills the hardware effects of the H200 runs of 2026-12-03 (see
// vProfile's fields): out-of-step speculative cycles 1.6x the in-step
// sweep's and classic steps 1.07x (issue 30); fresh engines 3.4 % and
// 5.6 % apart (Config.Spread1, SpreadN); a 10 s switch; the old engine
// draining 2 s beside the new at +35 % a cycle (2026-12-03d); a new
// engine's first 4 s 30 % slower (its first requests, 11-49 %).
func h200(name string, c sim.CostModel, def int) vProfile {
	return vProfile{name: name, cost: c, def: def, batch: [2]float64{1.07, 1.6}, spread1: 0.034, spreadN: 0.056,
		switchS: 10, drainS: 2, contend: 0.35, warmS: 4, warmCost: 0.3}
}

func vProfiles(tb testing.TB) []vProfile {
	var ps []vProfile
	for _, name := range []string{"flat", "geometric", "collapse"} {
		c := h200Q8()
		c.Accept = sim.Profiles[name]
		ps = append(ps, h200(name, c, 4))
		in := h200(name+", in step", c, 4)
		in.batch = [2]float64{1, 1}
		ps = append(ps, in)
	}
	ps = append(ps, h200("demo (GB10)", sim.DefaultCostModel(), 4), h200("demo, start 16", sim.DefaultCostModel(), 16))
	big := h200Q8()
	big.Accept = sim.Profiles["geometric"]
	big.DraftMS, big.DraftTokenMS = 4, 0.15
	ps = append(ps, h200("large fixed drafting", big, 4))
	paths, _ := filepath.Glob("../../docs/benchmark_results/h200-*.json")
	for _, path := range paths {
		r, err := sim.LoadRecord(path)
		if err != nil {
			tb.Fatal(err)
		}
		if r.Simulated || r.Method.Concurrency > 1 {
			continue
		}
		cost, err := sim.ReplayCost(r, sim.DefaultCostModel())
		if err != nil || len(cost.Accept) == 0 {
			continue
		}
		p := h200("replay "+strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "h200-llamacpp-d32676d-"), ".json"), cost, 4)
		p.onlyOne = true
		ps = append(ps, p)
	}
	return ps
}

// traffic is one traffic of the matrix.
type traffic struct {
	name   string
	phases []phase
}

func traffics(p vProfile) []traffic {
	ts := []traffic{
		{"steady, 1 client", []phase{{vPhase, 1, 0}}},
		{"two classes alternating, 1 client", []phase{{vPhase, 1, 0}, {vPhase, 1, 1}}},
	}
	if !p.onlyOne {
		ts = append(ts,
			traffic{"steady, 4 clients", []phase{{vPhase, 4, 0}}},
			traffic{"two classes alternating, 4 clients", []phase{{vPhase, 4, 0}, {vPhase, 4, 1}}},
			traffic{"load alternating 1 and 4 clients", []phase{{vPhase, 1, 0}, {vPhase, 4, 0}}})
	}
	return ts
}
