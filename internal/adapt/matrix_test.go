package adapt

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/sim"
)

// The sim matrix: the loop at its production settings (2 s scrapes, 60 s
// window, 256-cycle epochs, 10 min re-exploration) against a sim engine in
// closed form and virtual time, per sim profile × concurrency × traffic.
// The engine is the sim's cost model (sim.CostModel: a round costs
// DraftMS + DraftTokenMS·(W−1) + the verify cost of n·W rows, times
// 1 + Noise·N(0,1)) decoding cycle by cycle: each sequence accepts draft
// token k with probability S(k)/S(k−1) of its request's class. Each
// /metrics scrape advances the virtual clock by 2 s of decoding; a switch
// takes matrixSwitch of virtual time, the old engine serving meanwhile
// (an overlap switch), and the new engine is probed before traffic
// (Loop.BeforeTraffic) as the runtime does. The oracle of a cell is a
// sweep of the same engine at each width 1..17 over the same traffic.

const (
	matrixStep     = 2 * time.Second  // virtual decoding per scrape (DefaultInterval)
	matrixSwitch   = 3 * time.Second  // virtual time of one switch
	matrixHorizon  = 30 * time.Minute // virtual length of one adaptive run
	matrixMeasure  = 10 * time.Minute // the measured window at its end
	matrixSweep    = 10 * time.Minute // virtual length of one oracle width
	matrixReqTok   = 128              // tokens a request
	matrixEvery    = 8                // requests of one class before the other (two classes)
	matrixClassB   = 0.75             // class B: each conditional acceptance times this
	matrixStartW   = 4                // llama.cpp's default width
	matrixBadStart = 16               // the engine default with no policy entry (the demo at capability 9.0)
)

// matrixProfile is one sim profile of the matrix.
type matrixProfile struct {
	name  string
	cost  sim.CostModel
	start int // starting width (matrixStartW unless a bad start is the point)
	// live scales what a classic step [0] and a speculative cycle [1]
	// cost under several clients over what the idle probe measures (0:
	// 1). On the H200 of 2026-12-03, under 4 independent clients, classic
	// steps cost about 7 % more than the probe's rows and speculative
	// cycles up to 35 % more (their prompts join the decode batches); the
	// matrix takes 12 % and 20 %, where a loop that prices classic by the
	// probe left the oracle width 2 for classic at 0.92 of it.
	live [2]float64
	// gap is each client's mean pause, in ms, between an answer and its
	// next request (0: none; each pause is gap times U(0.5, 1.5), ending at
	// the first round after it). Four
	// independent clients on the H200 kept about 3.5 requests processing,
	// not 4: the concurrency the loop reads jitters around a rounding edge.
	gap float64
	// drain is how long, in ms, the engine replaced by a switch decodes
	// beside the new one (its requests in flight), each of them paying
	// contention more a round meanwhile (0: none). On the H200 of
	// 2026-12-03d the old engine drained for 1-3 s after a switch under 4
	// clients, and the new one's requests ran up to 34 % slower then.
	drain, contention float64
	// pickup is how many rounds of the engine each request waits, in
	// flight for its client but outside the engine's own timings (its
	// queue for the next turn of the server loop, and the hand-back of the
	// answer; 0: none). On the H200 of 2026-12-03e, under 4 clients,
	// clients got 0.97-0.98 of llama-server's own rate at classic and
	// 0.85-0.93 at widths 2-8: a slot's next request arrived 5 ms after
	// its release at classic, 16 ms at width 4, 22-24 ms at width 8, and
	// drafted prompts took 20 ms, classic ones 6-12. Four rounds a request
	// of 128 tokens is about that.
	pickup float64
}

// cond is P(accept draft token k | accepted k−1) at width w for the cost
// model: S(k)/S(k−1) of its acceptance profile, or, for a model given as
// mean tokens per cycle by width (the GB10 demo), the p with 1 + p + … +
// p^(w−1) = that mean (the sim draws each draft token with one p per
// width).
func cond(c sim.CostModel, w, k int) float64 {
	if len(c.Accept) > 0 {
		s := func(k int) float64 {
			if k < 1 {
				return 1
			}
			return c.Accept[min(k, len(c.Accept))-1]
		}
		if s(k-1) <= 0 {
			return 0
		}
		return math.Min(1, s(k)/s(k-1))
	}
	e := c.EmittedPerVerify(w)
	lo, hi := 0.0, 1.0
	for range 60 {
		p := (lo + hi) / 2
		t, x := 0.0, 1.0
		for range w {
			t += x
			x *= p
		}
		if t < e {
			lo = p
		} else {
			hi = p
		}
	}
	return (lo + hi) / 2
}

// vEngine is the sim engine in closed form: /metrics advances it by
// matrixStep, /completion answers the probe, /props gives the slots.
type vEngine struct {
	cost    sim.CostModel
	n       int // clients, each a sequence decoding (slots = n)
	classes int
	p       [2][18][17]float64 // class, width, k → conditional acceptance
	clock   *fakeClock
	loop    *Loop
	live    [2]float64 // matrixProfile.live

	mu     sync.Mutex
	rng    *rand.Rand
	ms     float64 // virtual ms decoded
	width  int
	gen    uint64
	cycles float64
	predS  float64
	pred   float64
	perPos []float64
	left   []int     // tokens left in each sequence's request
	idle   []float64 // ms each client pauses before its next request (gap)
	gap    float64
	// drain, contention: matrixProfile's; sharedTo: the virtual ms the
	// engine replaced drains to; hideShared: Current never reports it
	// (ADAPT_MATRIX_HIDE_SHARED, the loop as it was before Target.Shared)
	drain, contention, sharedTo float64
	hideShared                  bool
	// pickup: matrixProfile's; pick: the ms each sequence's request still
	// waits for the engine (in flight, not decoding); served: the seconds requests were in flight on this
	// engine, ended: how many ended (Target.Served); hideServed: Current
	// gives none (ADAPT_MATRIX_HIDE_SERVED, the loop before Target.Served).
	// llama-server adds a request's counts to /metrics when it ends, and
	// the proxy its served seconds; here every counter, served seconds
	// too, grows round by round, so that the two stay alike.
	pickup, served, lastRound float64
	ended                     int
	pick                      []float64
	hideServed                bool
	cls                       []int // each sequence's class
	reqs                      int   // requests started
	done                      int   // requests finished
	tokens                    float64
	marks                     []mark // one per scrape and switch
	sws                       []mark // at each switch
	srv                       *httptest.Server
}

type mark struct {
	ms, tokens float64
	done       int
	width      int
}

func newVEngine(cost sim.CostModel, n, classes, width int, seed uint64) *vEngine {
	e := &vEngine{cost: cost, n: n, classes: classes, width: width, gen: 1, clock: newFakeClock(), rng: rand.New(rand.NewPCG(seed, 7))}
	for w := 2; w <= 17; w++ {
		for k := 1; k < w; k++ {
			p := cond(cost, w, k)
			e.p[0][w][k], e.p[1][w][k] = p, p*matrixClassB
		}
	}
	for range n {
		e.next(len(e.left))
	}
	e.idle = make([]float64, n)
	e.pick = make([]float64, n)
	return e
}

// handOver starts sequence i's request: in flight from then, and decoding
// after the pickup rounds of the round it arrives in.
func (e *vEngine) handOver(i int, round float64) {
	e.pick[i] = e.pickup * round
}

// next starts sequence i's next request, its class by the rotation.
func (e *vEngine) next(i int) {
	c := (e.reqs / matrixEvery) % e.classes
	e.reqs++
	if i == len(e.left) {
		e.left, e.cls = append(e.left, matrixReqTok), append(e.cls, c)
		return
	}
	e.left[i], e.cls[i] = matrixReqTok, c
}

func (e *vEngine) noise() float64 { return math.Max(0.5, 1+e.cost.Noise*e.rng.NormFloat64()) }

// advance decodes until the virtual clock reaches ms. Clients pausing
// between requests (gap) leave their rows out of the batch.
func (e *vEngine) advance(ms float64) {
	for e.ms < ms {
		w, n := e.width, e.processing()
		if n == 0 { // every client pausing or waiting: on to the first that changes
			d := math.Inf(1)
			for i := range e.idle {
				if e.idle[i] > 0 {
					d = math.Min(d, e.idle[i])
				} else if e.pick[i] > 0 {
					d = math.Min(d, e.pick[i])
				}
			}
			e.ms += d
			for i := range e.idle {
				if e.idle[i] <= 0 && e.pick[i] > 0 {
					e.served += d / 1000
				}
				switch {
				case e.idle[i] > 0:
					if e.idle[i] -= d; e.idle[i] <= 1e-9 {
						e.idle[i] = 0
						e.handOver(i, e.lastRound)
					}
				case e.pick[i] > 0:
					e.pick[i] = math.Max(0, e.pick[i]-d)
				}
			}
			continue
		}
		var round float64
		shared := 1.0
		if e.ms < e.sharedTo {
			shared += e.contention
		}
		if w < 2 {
			round = e.cost.VerifyRowsMS(n) * e.noise() * e.liveFactor(0, n)
		} else {
			round = (e.cost.DraftRoundMS(w) + e.cost.VerifyRowsMS(n*w)) * e.noise() * e.liveFactor(1, n)
			e.cycles += float64(n)
			for len(e.perPos) < w-1 {
				e.perPos = append(e.perPos, 0)
			}
		}
		round *= shared
		e.lastRound = round
		e.predS += float64(n) * round / 1000
		for i := range e.left {
			if e.idle[i] <= 0 { // in flight through this round
				e.served += round / 1000
			}
			if e.idle[i] > 0 { // paused through this round
				if e.idle[i] = math.Max(0, e.idle[i]-round); e.idle[i] == 0 {
					e.handOver(i, round)
				}
				continue
			}
			if e.pick[i] > 0 { // waiting for the engine through this round
				e.pick[i] = math.Max(0, e.pick[i]-round)
				continue
			}
			t := 1
			for k := 1; k < w && e.rng.Float64() < e.p[e.cls[i]][w][k]; k++ {
				e.perPos[k-1]++
				t++
			}
			t = min(t, e.left[i])
			e.pred += float64(t)
			e.tokens += float64(t)
			if e.left[i] -= t; e.left[i] <= 0 {
				e.done++
				e.ended++
				e.next(i)
				if e.gap > 0 {
					e.idle[i] = e.gap * (0.5 + e.rng.Float64())
				} else {
					e.handOver(i, round)
				}
			}
		}
		e.ms += round
	}
	e.clock.mu.Lock()
	e.clock.now = time.Unix(1_800_000_000, 0).Add(time.Duration(e.ms * float64(time.Millisecond)))
	e.clock.mu.Unlock()
}

// processing is how many clients have a request decoding in the engine.
func (e *vEngine) processing() int {
	n := 0
	for i, d := range e.idle {
		if d <= 0 && e.pick[i] <= 0 {
			n++
		}
	}
	return n
}

// liveFactor is live[i] with several sequences in the batch (n), else 1:
// one sequence's cycles cost what the idle probe measures.
func (e *vEngine) liveFactor(i, n int) float64 {
	if n < 2 || e.live[i] <= 0 {
		return 1
	}
	return e.live[i]
}

func (e *vEngine) mark() mark { return mark{e.ms, e.tokens, e.done, e.width} }

func (e *vEngine) serve(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch r.URL.Path {
	case "/metrics":
		e.advance(e.ms + float64(matrixStep/time.Millisecond))
		e.marks = append(e.marks, e.mark())
		writeMetrics(w, e.cycles, e.predS, e.pred, e.processing(), e.perPos)
	case "/completion":
		var req struct{ Prompt []int }
		json.NewDecoder(r.Body).Decode(&req)
		rows := max(1, len(req.Prompt)-probePrefixLen)
		fmt.Fprintf(w, `{"timings":{"prompt_n":%d,"prompt_ms":%g}}`, rows, e.cost.VerifyRowsMS(rows)*e.noise())
	case "/props":
		fmt.Fprintf(w, `{"total_slots":%d}`, e.n)
	default:
		http.NotFound(w, r)
	}
}

func (e *vEngine) Current() Target {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := Target{BaseURL: e.srv.URL, Width: e.width, Gen: e.gen, Pair: "matrix", Shared: !e.hideShared && e.ms < e.sharedTo}
	if !e.hideServed {
		t.Served = func(int) Served {
			e.mu.Lock()
			defer e.mu.Unlock()
			return Served{Secs: e.served, Ended: e.ended}
		}
	}
	return t
}

// Switch serves matrixSwitch more at the old width (the new engine
// starting beside it), then the new engine, probed before traffic, with
// the old one draining beside it for drain.
func (e *vEngine) Switch(ctx context.Context, w int, _ string) error {
	e.mu.Lock()
	e.advance(e.ms + float64(matrixSwitch/time.Millisecond))
	e.width, e.gen = w, e.gen+1
	e.sharedTo = e.ms + e.drain
	e.cycles, e.predS, e.pred, e.perPos, e.served, e.ended = 0, 0, 0, nil, 0, 0
	e.sws = append(e.sws, e.mark())
	e.mu.Unlock()
	if e.loop != nil {
		e.loop.BeforeTraffic(ctx, e.Current())
	}
	return nil
}

// matrixCell is one cell's outcome.
type matrixCell struct {
	profile           string
	n, classes, start int
	oracle            int
	oracleRate        float64
	startFrac         float64 // the starting width's sweep rate over the oracle's
	frac              float64 // the adaptive run's rate over its last matrixMeasure, over the oracle's
	width             int     // serving at the end
	settleS           float64 // virtual seconds to the last switch
	settleReq         int     // requests finished by then
	switches          []int
	predErr           PredictionError
}

// sweep is the oracle: each width's rate over matrixSweep of the traffic.
func sweep(p matrixProfile, n, classes int, seed uint64) map[int]float64 {
	rates := map[int]float64{}
	for w := 1; w <= DefaultMaxWidth; w++ {
		e := newVEngine(p.cost, n, classes, w, seed+uint64(w))
		e.live, e.gap, e.pickup = p.live, p.gap, p.pickup
		e.advance(float64(matrixSweep / time.Millisecond))
		rates[w] = 1000 * e.tokens / e.ms
	}
	return rates
}

func runCell(p matrixProfile, n, classes int, seed uint64, log *slog.Logger) matrixCell {
	rates := sweep(p, n, classes, seed)
	c := matrixCell{profile: p.name, n: n, classes: classes, start: p.start, oracle: 1}
	for w, r := range rates {
		if r > rates[c.oracle] || r == rates[c.oracle] && w < c.oracle {
			c.oracle = w
		}
	}
	c.oracleRate = rates[c.oracle]
	c.startFrac = rates[p.start] / c.oracleRate

	e := newVEngine(p.cost, n, classes, p.start, seed)
	e.live, e.gap, e.pickup = p.live, p.gap, p.pickup
	e.drain, e.contention, e.hideShared = p.drain, p.contention, os.Getenv("ADAPT_MATRIX_HIDE_SHARED") != ""
	e.hideServed = os.Getenv("ADAPT_MATRIX_HIDE_SERVED") != ""
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	defer e.srv.Close()
	var mu sync.Mutex
	var last Status
	l := New(LoopDeps{Current: e.Current, Switch: e.Switch, Log: log, Now: e.clock.Now,
		Cfg:     Config{Interval: 300 * time.Microsecond},
		Publish: func(s Status) { mu.Lock(); last = s; mu.Unlock() }})
	e.loop = l
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.BeforeTraffic(ctx, e.Current()) // the runtime, before the first request
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	horizon := float64(matrixHorizon / time.Millisecond)
	for {
		time.Sleep(2 * time.Millisecond)
		e.mu.Lock()
		at := e.ms
		e.mu.Unlock()
		if at >= horizon {
			break
		}
	}
	cancel()
	<-done
	e.mu.Lock()
	defer e.mu.Unlock()
	end := e.marks[len(e.marks)-1]
	from := end
	for _, m := range e.marks {
		if end.ms-m.ms <= float64(matrixMeasure/time.Millisecond) {
			from = m
			break
		}
	}
	c.frac = 1000 * (end.tokens - from.tokens) / (end.ms - from.ms) / c.oracleRate
	c.width = e.width
	for _, s := range e.sws {
		c.switches = append(c.switches, s.width)
	}
	if k := len(e.sws); k > 0 {
		c.settleS, c.settleReq = e.sws[k-1].ms/1000, e.sws[k-1].done
	}
	mu.Lock()
	c.predErr = last.Prediction
	mu.Unlock()
	return c
}

// matrixProfiles: the sim's named profiles on the H200 Q8_0 model, the
// demo pairing (GB10), one with a large fixed drafting cost, a bad start,
// and a replay of every committed one-sequence H200 record.
func matrixProfiles(tb testing.TB) []matrixProfile {
	var ps []matrixProfile
	for _, name := range []string{"flat", "geometric", "collapse"} {
		c := h200Q8()
		c.Accept = sim.Profiles[name]
		ps = append(ps, matrixProfile{name: name, cost: c, start: matrixStartW})
	}
	ps = append(ps, matrixProfile{name: "demo (GB10)", cost: sim.DefaultCostModel(), start: matrixStartW})
	ps = append(ps, matrixProfile{name: "demo, start 16", cost: sim.DefaultCostModel(), start: matrixBadStart})
	big := h200Q8()
	big.Accept = sim.Profiles["geometric"]
	big.DraftMS, big.DraftTokenMS = 4, 0.15 // drafting mostly fixed: 4 ms a cycle
	ps = append(ps, matrixProfile{name: "large fixed drafting", cost: big, start: matrixStartW})
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
		if err != nil {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "h200-llamacpp-d32676d-"), ".json")
		ps = append(ps, matrixProfile{name: "replay " + name, cost: cost, start: matrixStartW})
	}
	// The H200 concurrency-4 cells of 2026-12-03: live cycles cost more
	// than the idle probe says, speculative ones most. Last, so that the
	// cells before keep their seeds.
	for _, name := range []string{"geometric", "flat"} {
		c := h200Q8()
		c.Accept = sim.Profiles[name]
		ps = append(ps, matrixProfile{name: name + ", live above the probe", cost: c, start: matrixStartW, live: [2]float64{1.12, 1.2}})
	}
	// The same with the clients out of step (2026-12-03c): a pause of
	// about 60 ms between an answer and the next request keeps about 3.2
	// to 3.6 of 4 requests processing, as four independent clients did there.
	for _, name := range []string{"geometric", "flat"} {
		c := h200Q8()
		c.Accept = sim.Profiles[name]
		ps = append(ps, matrixProfile{name: name + ", live above the probe, clients pausing", cost: c, start: matrixStartW, live: [2]float64{1.12, 1.2}, gap: 60})
	}
	// The same with the engine replaced by a switch draining beside the
	// new one for 2 s at +35 % a round (2026-12-03d).
	for _, name := range []string{"geometric", "flat"} {
		c := h200Q8()
		c.Accept = sim.Profiles[name]
		ps = append(ps, matrixProfile{name: name + ", live above the probe, clients pausing, the old engine draining beside", cost: c, start: matrixStartW,
			live: [2]float64{1.12, 1.2}, gap: 60, drain: 2000, contention: 0.35})
	}
	// The same with each request waiting four rounds of the engine outside
	// its timings (2026-12-03e): clients wait longer a token than the
	// engine's timings say, the more so the wider the width.
	for _, name := range []string{"geometric", "flat"} {
		c := h200Q8()
		c.Accept = sim.Profiles[name]
		ps = append(ps, matrixProfile{name: name + ", live above the probe, clients pausing, the old engine draining beside, requests waiting for the engine", cost: c, start: matrixStartW,
			live: [2]float64{1.12, 1.2}, gap: 60, drain: 2000, contention: 0.35, pickup: 4})
	}
	return ps
}

// BenchmarkAdaptMatrix runs the sim matrix and reports the worst and
// median fraction of the oracle. With ADAPT_MATRIX_OUT set it writes the
// table there as markdown (docs/benchmark_results/sim-adapt-matrix-*.md):
//
//	ADAPT_MATRIX_OUT=$PWD/docs/benchmark_results/sim-adapt-matrix-2026-12-03.md \
//	  go test ./internal/adapt -run X -bench AdaptMatrix -benchtime 1x
func BenchmarkAdaptMatrix(b *testing.B) {
	profiles := matrixProfiles(b)
	var cells []matrixCell
	for b.Loop() {
		cells = runMatrix(profiles)
	}
	fracs := make([]float64, len(cells))
	below := 0
	for i, c := range cells {
		fracs[i] = c.frac
		if c.frac < c.startFrac-DefaultNoiseFloor {
			below++
		}
	}
	sort.Float64s(fracs)
	b.ReportMetric(float64(len(cells)), "cells")
	b.ReportMetric(fracs[0], "worst-frac")
	b.ReportMetric(median(fracs), "median-frac")
	b.ReportMetric(float64(below), "cells-below-start")
	if out := os.Getenv("ADAPT_MATRIX_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(matrixMarkdown(cells)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.Log("\n" + matrixMarkdown(cells))
}

// matrixJob is one cell to run; its index in the matrix gives its seed,
// so a cell run alone (TestMatrixCell) runs as it does in the matrix.
type matrixJob struct {
	i          int
	p          matrixProfile
	n, classes int
}

func (j matrixJob) seed() uint64 { return uint64(j.i)*1000 + 1 }

func matrixJobs(profiles []matrixProfile) []matrixJob {
	var jobs []matrixJob
	for _, p := range profiles {
		for _, n := range []int{1, 4} {
			for _, classes := range []int{1, 2} {
				jobs = append(jobs, matrixJob{len(jobs), p, n, classes})
			}
		}
	}
	return jobs
}

// runMatrix runs every cell, four at a time (each mostly waits on its
// loop's ticker).
func runMatrix(profiles []matrixProfile) []matrixCell {
	jobs := matrixJobs(profiles)
	cells := make([]matrixCell, len(jobs))
	ch := make(chan matrixJob)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				cells[j.i] = runCell(j.p, j.n, j.classes, j.seed(), quietLog())
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	return cells
}

func matrixMarkdown(cells []matrixCell) string {
	var b strings.Builder
	b.WriteString("# Adaptive width on the sim matrix\n\n")
	b.WriteString("Generated by `ADAPT_MATRIX_OUT=… go test ./adapt -run X -bench AdaptMatrix -benchtime 1x`\n")
	b.WriteString("(adapt/matrix_test.go). A simulation: no number here is a measurement of hardware.\n\n")
	fmt.Fprintf(&b, "The loop runs at its production settings (2 s scrapes, 60 s window, 256-cycle epochs, 2 trials, 3%% margin) for %s of virtual time\n", matrixHorizon)
	fmt.Fprintf(&b, "against the sim's cost model decoding cycle by cycle (%d-token requests, closed loop, 1 or 4 clients = slots);\n", matrixReqTok)
	fmt.Fprintf(&b, "a switch takes %s, the old engine serving meanwhile, and each new engine is probed before traffic.\n", matrixSwitch)
	fmt.Fprintf(&b, "Traffic: one class, or two alternating every %d requests, the second accepting each draft token with %.2f of the first's probability.\n", matrixEvery, matrixClassB)
	b.WriteString("In the profiles marked *clients pausing* each client waits a moment (60 ms on average) between an answer and its next request,\n")
	b.WriteString("so about 3.2-3.6 of 4 requests are processing (the faster the requests, the fewer), as under four independent clients on the H200;\n")
	b.WriteString("elsewhere every client sends again at once.\n")
	b.WriteString("In the profiles marked *the old engine draining beside* the engine a switch replaced decodes beside the new one for 2 s,\n")
	b.WriteString("every round 35 % slower meanwhile, as on the H200 of 2026-12-03d, and the loop is told (Target.Shared)")
	if os.Getenv("ADAPT_MATRIX_HIDE_SHARED") != "" {
		b.WriteString(": **not in this run** (ADAPT_MATRIX_HIDE_SHARED, the loop measuring through the drain as before)")
	}
	b.WriteString(".\n")
	b.WriteString("In the profiles marked *requests waiting for the engine* each request waits four rounds of the engine, in flight but outside its timings,\n")
	b.WriteString("as the H200 of 2026-12-03e showed at a turn of llama-server's loop. Everywhere the loop measures a width by the time requests were in flight\n")
	b.WriteString("on its engine (Target.Served), each engine's cycles counted after as many requests as it has slots ended on it")
	if os.Getenv("ADAPT_MATRIX_HIDE_SERVED") != "" {
		b.WriteString(": **not in this run** (ADAPT_MATRIX_HIDE_SERVED, the engine's own seconds and no warm-up, as before)")
	}
	b.WriteString(".\n")
	fmt.Fprintf(&b, "The oracle is a sweep of the same engine and traffic at each width 1-17 (%s each). *frac* is the adaptive run's tokens/s over its last %s\n", matrixSweep, matrixMeasure)
	b.WriteString("over the oracle's; *start* is the starting width's sweep rate over the oracle's; *settle* is the virtual time and requests to the last switch.\n\n")
	b.WriteString("| profile | clients | classes | oracle | oracle tok/s | start | frac | end width | settle s | settle requests | switches | prediction error (n, mean) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	worst := 0
	below := 0
	fracs := make([]float64, len(cells))
	for i, c := range cells {
		sw := make([]string, len(c.switches))
		for j, w := range c.switches {
			sw[j] = fmt.Sprint(w)
		}
		flag := ""
		if c.frac < c.startFrac-DefaultNoiseFloor {
			flag = " (below start)"
			below++
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f | %d: %.3f | %.3f%s | %d | %.0f | %d | %d: %s | %d, %.1f%% |\n",
			c.profile, c.n, c.classes, c.oracle, c.oracleRate, c.start, c.startFrac, c.frac, flag, c.width, c.settleS, c.settleReq,
			len(c.switches), strings.Join(sw, " "), c.predErr.N, 100*c.predErr.MeanAbs)
		if c.frac < cells[worst].frac {
			worst = i
		}
		fracs[i] = c.frac
	}
	atLeast := 0
	for _, f := range fracs {
		if f >= 0.97 {
			atLeast++
		}
	}
	w := cells[worst]
	fmt.Fprintf(&b, "\n%d cells: %d at or above 0.97 of the oracle, median %.3f; worst %.3f (%s, %d clients, %d classes: oracle %d, ended at %d);\n",
		len(cells), atLeast, median(slices.Clone(fracs)), w.frac, w.profile, w.n, w.classes, w.oracle, w.width)
	fmt.Fprintf(&b, "%d cells below the starting width's rate by more than the 1%% noise floor. Failed requests are not modelled here\n", below)
	b.WriteString("(the engine is closed-form); the HTTP sim tests (adapt/loop_test.go, cli/adapt_serve_test.go) count them.\n")
	return b.String()
}

// TestMatrixCell runs matrix cells alone, with their matrix seeds, and
// logs every decision of the loop: ADAPT_MATRIX_CELL=profile/clients/classes
// (e.g. "flat/1/2"; the profile as in the table, a field left empty
// matches all), with -v.
func TestMatrixCell(t *testing.T) {
	want := os.Getenv("ADAPT_MATRIX_CELL")
	if want == "" {
		t.Skip("set ADAPT_MATRIX_CELL=profile/clients/classes")
	}
	f := append(strings.Split(want, "/"), "", "")
	for _, j := range matrixJobs(matrixProfiles(t)) {
		if f[0] != "" && j.p.name != f[0] || f[1] != "" && f[1] != fmt.Sprint(j.n) || f[2] != "" && f[2] != fmt.Sprint(j.classes) {
			continue
		}
		log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
		c := runCell(j.p, j.n, j.classes, j.seed(), log)
		t.Logf("%s n=%d classes=%d: oracle %d (%.1f), start frac %.3f, frac %.3f, width %d, switches %v, settle %.0fs, pred %+v",
			c.profile, j.n, j.classes, c.oracle, c.oracleRate, c.startFrac, c.frac, c.width, c.switches, c.settleS, c.predErr)
	}
}
