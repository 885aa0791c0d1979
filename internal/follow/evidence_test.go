package follow

import (
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/simcost"
)

// The virtual-time version of issue 29's evidence: the demo-load sim
// pairing (profiles/demo-load.toml, simcost.DemoLoad) under traffic that
// alternates one and four clients every 2 minutes for 12 minutes, served
// by an engine that follows a schedule through this rule, against the
// per-phase oracle and every fixed width. Rates are the cost model's
// steady rates (simcost.Model.RateAt, 200-token requests); a switch runs
// the old engine until the new one is up (overlap) and the new one then
// shares the GPU as the model's Drain says. Run:
//
//	go test ./internal/follow -run X -bench DemoLoad -benchtime 1x
func BenchmarkDemoLoadAlternating(b *testing.B) {
	for _, c := range []struct {
		name     string
		sched    string
		measured bool // the follower knows the model's gains (as a tune record's per-level arms give them)
	}{
		{"two-buckets-prior-gain", "1-3:5,4+:1", false},
		{"two-buckets-measured-gain", "1-3:5,4+:1", true},
		{"best-per-level", "1:5,2:4,3:5,4+:1", true},
	} {
		b.Run(c.name, func(b *testing.B) {
			var e evidence
			for b.Loop() {
				e = demoLoadRun(b, c.sched, c.measured)
			}
			b.ReportMetric(e.ofOracle, "of-oracle")
			b.ReportMetric(e.overFixed, "over-best-fixed")
			b.ReportMetric(float64(e.switches)/float64(e.changes), "switches/change")
			b.ReportMetric(e.ceiling, "oracle-over-best-fixed")
			b.Logf("%s: %.3f of the per-phase oracle, %.3f x the best fixed width (%d; the oracle is %.3f x it), %d switches over %d load changes; first switch after each change %v", c.sched, e.ofOracle, e.overFixed, e.bestFixed, e.ceiling, e.switches, e.changes, e.lags)
		})
	}
}

type evidence struct {
	ofOracle, overFixed float64
	ceiling             float64 // the per-phase oracle over the best fixed width
	bestFixed           int
	switches, changes   int
	lags                []time.Duration
}

const (
	demoTokens   = 200              // tokens per request, as profiles/demo-load.toml's bench
	demoPhase    = 2 * time.Minute  // the phases
	demoRun      = 12 * time.Minute // the run
	demoSwitch   = time.Second      // a sim engine's start beside the serving one (the wall-time run measures it)
	demoMaxWidth = 16
)

func demoClients(at time.Duration) int {
	if at/demoPhase%2 == 0 {
		return 1
	}
	return 4
}

func demoLoadRun(tb testing.TB, text string, measured bool) evidence {
	m := simcost.DemoLoad()
	sched, err := schedule.Parse(text, "tuned")
	if err != nil {
		tb.Fatal(err)
	}
	cfg := Config{Schedule: sched}
	if measured {
		cfg.Gain = func(from, to schedule.Bucket) (float64, bool) {
			return m.RateAt(to.Width, to.Lo, demoTokens)/m.RateAt(from.Width, to.Lo, demoTokens) - 1, true
		}
	}
	st := New(cfg, sched.At(1).Width, demoSwitch)
	dt := Tick.Seconds()
	var follow, oracle float64
	fixed := make([]float64, demoMaxWidth+1)
	e := evidence{changes: int(demoRun/demoPhase) - 1}
	running, pending, doneAt, upAt := st.Width, 0, time.Duration(-1), time.Duration(-1)
	for at := time.Duration(0); at < demoRun; at += Tick {
		n := demoClients(at)
		if at == doneAt {
			st, running, upAt, doneAt = Done(st, true, demoSwitch), pending, at, -1
		}
		var d Decision
		st, d = Step(cfg, st, Observation{Now: t0.Add(at), InFlight: n})
		if d.Switch {
			e.switches++
			pending, doneAt = d.To.Width, at+demoSwitch
			if len(e.lags) < e.switches && at >= demoPhase {
				e.lags = append(e.lags, at%demoPhase)
			}
		}
		rate := m.RateAt(running, n, demoTokens)
		if upAt >= 0 {
			rate /= m.SharedFactor(float64((at - upAt).Milliseconds()))
		}
		follow += rate * dt
		_, best := m.BestAt(n, demoTokens, demoMaxWidth)
		oracle += best * dt
		for w := 1; w <= demoMaxWidth; w++ {
			fixed[w] += m.RateAt(w, n, demoTokens) * dt
		}
	}
	for w := 1; w <= demoMaxWidth; w++ {
		if fixed[w] > fixed[e.bestFixed] {
			e.bestFixed = w
		}
	}
	e.ofOracle, e.overFixed, e.ceiling = follow/oracle, follow/fixed[e.bestFixed], oracle/fixed[e.bestFixed]
	return e
}

// The harness itself: the oracle is at least every fixed width, and a
// follower that never switches scores as its width does.
func TestDemoLoadHarness(t *testing.T) {
	e := demoLoadRun(t, "1+:5", false)
	if e.switches != 0 || e.ofOracle > 1 || e.bestFixed == 0 || e.overFixed > 1 {
		t.Fatalf("%+v", e)
	}
}
