package adapt

import (
	"context"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/record"
	"github.com/speclaunch/speclaunch/internal/sim"
)

// adaptRun is one adaptation on the sim, with the loop's production
// settings in simulated time (Window 60 s, re-exploration every 10 min,
// 256 cycles an epoch) and the engine starting at llama.cpp's default
// width 4.
type adaptRun struct {
	width     int           // where it settled
	switches  []int         // widths switched to, in order
	requests  int64         // requests served before the last switch
	simToLast time.Duration // simulated time from start to the last switch
	probeSim  float64       // simulated seconds the probe took (traffic shares the slot)
	probeEng  float64       // seconds of engine time the probe's requests cost
	probeWall time.Duration
}

func adaptOnSim(tb testing.TB, cost sim.CostModel, prompt string) adaptRun {
	e := newSimEngine(tb, cost, 4)
	start := e.clock.Now()
	cfg := Config{Interval: time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var last Status
	var failed atomic.Int64
	var probeWall time.Duration
	wallStart := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, LoopDeps{Current: e.Current, Switch: e.Switch, Log: quietLog(), Cfg: cfg, Now: e.clock.Now,
			Publish: func(s Status) {
				mu.Lock()
				defer mu.Unlock()
				if s.State != StateProbing && last.State == StateProbing {
					probeWall = time.Since(wallStart)
				}
				last = s
			}})
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); e.traffic(ctx, func() string { return prompt }, &failed) }()
	ok := waitFor(50*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return settled(last) && !last.Decision.Switch || last.State == StateNotAdapting
	})
	cancel()
	wg.Wait()
	if err := <-done; err != nil {
		tb.Fatal(err)
	}
	if !ok {
		tb.Fatalf("no settle; switches %v", e.Switches())
	}
	if failed.Load() > 0 {
		tb.Errorf("%d requests failed", failed.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	r := adaptRun{width: last.Width, switches: e.Switches(), probeSim: last.ProbeTime, probeWall: probeWall}
	if last.Curve != nil {
		for _, ms := range last.Curve.VerifyMS { // each row count, DefaultProbeReps times
			r.probeEng += ms * DefaultProbeReps / 1000
		}
	}
	if n := len(e.switchAt); n > 0 {
		r.simToLast = e.switchAt[n-1].Sub(start)
		r.requests = e.tokensAt[n-1] / 200
	}
	return r
}

// BenchmarkAdaptProfiles: per acceptance profile on the H200 Q8_0 sim
// model, the adapted width's throughput over the oracle width's (the sim
// model's best over 1..17), and how long adaptation took.
func BenchmarkAdaptProfiles(b *testing.B) {
	for _, profile := range []string{"flat", "geometric", "collapse"} {
		b.Run(profile, func(b *testing.B) {
			cost := h200Q8()
			prompt := "[sim-profile:" + profile + "] def f(x):"
			best, rate := oracle(cost, prompt, DefaultMaxWidth)
			var r adaptRun
			for b.Loop() {
				r = adaptOnSim(b, cost, prompt)
			}
			b.Logf("%s: oracle %d, adapted %d, switches %v after %d requests, %.1f simulated s; probe %.1f simulated s, %.2f engine s",
				profile, best, r.width, r.switches, r.requests, r.simToLast.Seconds(), r.probeSim, r.probeEng)
			b.ReportMetric(rate(r.width)/rate(best), "frac-of-oracle")
			b.ReportMetric(float64(r.width), "width")
			b.ReportMetric(float64(best), "oracle-width")
			b.ReportMetric(float64(len(r.switches)), "switches")
			b.ReportMetric(float64(r.requests), "requests-to-switch")
			b.ReportMetric(r.simToLast.Seconds(), "sim-s-to-switch")
			b.ReportMetric(r.probeSim, "probe-sim-s")
			b.ReportMetric(r.probeEng, "probe-engine-s")
			b.ReportMetric(float64(r.probeWall.Microseconds())/1000, "probe-wall-ms")
		})
	}
}

// BenchmarkAdaptRecords replays every committed real-engine record with
// acceptance by position through the sim (sim.ReplayCost) and adapts on
// it. The fraction is what the record measured at the adapted width (its
// median tok/s, linear between swept widths) over the record's best
// measured median: what the choice would have given on that hardware.
func BenchmarkAdaptRecords(b *testing.B) {
	paths, _ := filepath.Glob("../../docs/benchmark_results/*.json")
	type rec struct {
		name string
		cost sim.CostModel
		med  map[int]float64
		best int
	}
	var recs []rec
	for _, p := range paths {
		r, err := sim.LoadRecord(p)
		if err != nil {
			b.Fatal(err)
		}
		base := sim.DefaultCostModel()
		cost, err := sim.ReplayCost(r, base)
		if err != nil || r.Simulated {
			b.Logf("skip %s: %v", filepath.Base(p), err)
			continue
		}
		if r.Method.Concurrency > 1 {
			// The replay decodes one sequence; a record measured with
			// several requests in flight has cycle costs of n·W rows.
			b.Logf("skip %s: measured at concurrency %d; the replay is one sequence", filepath.Base(p), r.Method.Concurrency)
			continue
		}
		// Widths from the width and classic arms; the default and policy
		// arms fill the widths no width arm measured (newer records
		// measure each width once, under its first name).
		med := map[int]float64{}
		for _, pass := range [][]string{{"width", "classic"}, {"default", "policy"}} {
			for _, a := range r.Arms {
				w := max(1, a.Width)
				if _, seen := med[w]; a.Status == record.StatusOK && slices.Contains(pass, a.Kind) && !seen {
					med[w] = a.Stats.Median
				}
			}
		}
		best := 1
		for w, m := range med {
			if m > med[best] || (m == med[best] && w < best) {
				best = w
			}
		}
		recs = append(recs, rec{filepath.Base(p), cost, med, best})
	}
	var fracs, model, def4 []float64
	for b.Loop() {
		fracs, model, def4 = fracs[:0], model[:0], def4[:0]
		for _, r := range recs {
			got := adaptOnSim(b, r.cost, "def f(x):")
			f := interpMedian(r.med, got.width) / r.med[r.best]
			mBest, mRate := oracle(r.cost, "def f(x):", DefaultMaxWidth)
			fracs = append(fracs, f)
			model = append(model, mRate(got.width)/mRate(mBest))
			def4 = append(def4, r.med[4]/r.med[r.best])
			b.Logf("%s: record best %d, model best %d, adapted %d (switches %v): %.3f of the record's best (width 4: %.3f), %.3f of the model's",
				r.name, r.best, mBest, got.width, got.switches, f, r.med[4]/r.med[r.best], model[len(model)-1])
		}
	}
	for _, s := range [][]float64{fracs, model, def4} {
		sort.Float64s(s)
	}
	b.ReportMetric(float64(len(fracs)), "records")
	b.ReportMetric(fracs[0], "worst-frac")
	b.ReportMetric(medianOf(fracs), "median-frac")
	b.ReportMetric(model[0], "model-worst-frac")
	b.ReportMetric(def4[0], "width4-worst-frac")
	b.ReportMetric(medianOf(def4), "width4-median-frac")
}

func interpMedian(med map[int]float64, w int) float64 {
	if m, ok := med[w]; ok {
		return m
	}
	keys := sortedKeys(med)
	i, _ := slices.BinarySearch(keys, w)
	if i == 0 || i == len(keys) {
		return 0
	}
	lo, hi := keys[i-1], keys[i]
	return med[lo] + float64(w-lo)/float64(hi-lo)*(med[hi]-med[lo])
}

func medianOf(s []float64) float64 { return median(s) }
