package follow

import (
	"math"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/adaptsim"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/simcost"
)

// followCtl is the follower as the calibrated sim matrix's controller
// (internal/adaptsim): the harness's engines are priced by its cost model
// with its noise, per-engine spread, batching cost and drain.
type followCtl struct {
	cfg Config
	st  State
	sw  time.Duration
}

func (c *followCtl) Start(_ adaptsim.Env, s adaptsim.Scrape) []adaptsim.Command {
	c.st = New(c.cfg, s.Width, c.sw)
	return nil
}

func (c *followCtl) Scrape(s adaptsim.Scrape) []adaptsim.Command {
	var d Decision
	c.st, d = Step(c.cfg, c.st, Observation{Now: s.Now, InFlight: int(math.Round(s.InFlight))})
	if !d.Switch {
		return nil
	}
	return []adaptsim.Command{{Switch: d.To.Width, Reason: d.Reason}}
}

func (c *followCtl) Switched(_ adaptsim.Scrape, took time.Duration) []adaptsim.Command {
	c.st = Done(c.st, true, took)
	return nil
}

func (c *followCtl) Close() {}

// BenchmarkFollowAdaptSim runs the load (one and four clients
// alternating every 2 minutes, 12 minutes) on the demo-load profile in
// the calibrated sim matrix's harness, five seeds, against the per-phase
// oracle and every fixed width 1-8 on the mean engine:
//
//	go test ./internal/follow -run X -bench AdaptSim -benchtime 1x
func BenchmarkFollowAdaptSim(b *testing.B) {
	m := simcost.DemoLoad()
	// SwitchS: the sim's switch as serve measured it on this machine
	// (docs/benchmark_results/follow-demo-load-2026-12-05.md: 1.1 s).
	p := adaptsim.Profile{Name: "demo-load", Model: m, SwitchS: 1.1, Slots: 4, ReqTokens: 200}
	tr := adaptsim.Traffic{Name: "1 and 4 clients, 2 min", Phases: []adaptsim.Phase{{Dur: 2 * time.Minute, Clients: 1}, {Dur: 2 * time.Minute, Clients: 4}}}
	o := adaptsim.Options{Horizon: 12 * time.Minute, Interval: Tick, MaxWidth: 8}
	sched, _ := schedule.Parse("1-3:5,4+:1", "tuned")
	measured := func(from, to schedule.Bucket) (float64, bool) {
		return m.RateAt(to.Width, to.Lo, p.ReqTokens)/m.RateAt(from.Width, to.Lo, p.ReqTokens) - 1, true
	}
	const seeds = 5
	fixed := map[int]float64{}
	for w := 1; w <= o.MaxWidth; w++ {
		q := p
		q.Default = w
		for seed := uint64(1); seed <= seeds; seed++ {
			fixed[w] += adaptsim.Run(q, tr, adaptsim.Fixed{}, seed, o).Mean
		}
	}
	best := 1
	for w, v := range fixed {
		if v > fixed[best] {
			best = w
		}
	}
	for _, c := range []struct {
		name string
		gain func(from, to schedule.Bucket) (float64, bool)
	}{{"prior-gain", nil}, {"measured-gain", measured}} {
		b.Run(c.name, func(b *testing.B) {
			var mean, oracle, switches float64
			for b.Loop() {
				mean, oracle, switches = 0, 0, 0
				for seed := uint64(1); seed <= seeds; seed++ {
					q := p
					q.Default = sched.At(1).Width
					out := adaptsim.Run(q, tr, &followCtl{cfg: Config{Schedule: sched, Gain: c.gain}, sw: 1100 * time.Millisecond}, seed, o)
					mean, oracle, switches = mean+out.Mean, oracle+out.Oracle, switches+float64(len(out.Switches))
				}
			}
			b.ReportMetric(mean/oracle, "of-oracle")
			b.ReportMetric(mean/fixed[best], "over-best-fixed")
			b.ReportMetric(switches/seeds/5, "switches/change")
			b.Logf("%s: %.3f of the per-phase oracle, %.3f x the best fixed width (%d; the oracle %.3f x it), %.1f switches per load change", sched, mean/oracle, mean/fixed[best], best, oracle/fixed[best], switches/seeds/5)
		})
	}
}
