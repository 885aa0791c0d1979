package control

import (
	"slices"
	"time"

	"github.com/speclaunch/speclaunch/internal/defaults"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// Kind is what an observation reports.
type Kind int

// Observations.
const (
	Tick     Kind = iota // the clock only
	Scrape               // the serving engine's counters and its generation requests in flight
	Probed               // a probe's result: Verify, or Err
	Switched             // a switch's outcome: Width serving now and Took, or Err
	// Sample is the server's load (the proxy's count of clients'
	// generation requests in flight) and the serving Width, every
	// follow.Tick: what serve follows the schedule in force by
	// (internal/follow), the one place a switch is asked for.
	Sample
)

// Observation is one thing the shell saw.
type Observation struct {
	Kind Kind
	Now  time.Time
	// Scrape: the serving engine (Engine changes whenever another engine
	// process serves), its width, its clients' generation requests in
	// flight (the proxy's count), and the engine's counters. Sample: Width
	// and InFlight.
	Engine   uint64
	Width    int
	InFlight float64
	Counters Counters
	// Slots (Scrape) is the engine's total_slots, 0 when it does not say:
	// more requests in flight than slots wait in its queue (decoding).
	Slots int
	// Probing (Scrape): the shell probed this engine at some time since
	// the last scrape, so the counters' change is not the width's rate.
	Probing bool
	// Probed: the verify cost by rows. Before: the shell probed a new
	// engine before traffic on its own, which answers no Probe action.
	Verify map[int]float64
	Before bool
	// Cut: a switch of the serving engine cut the probe, which is then
	// no probe tried: its bucket's is asked for again at once.
	Cut bool
	// Sample: why no switch can start now ("" when one can:
	// follow.Observation.Busy).
	Busy string
	// Switched: how long the switch took.
	Took time.Duration
	// Probed, Switched: why it failed ("" when it did not).
	Err string
}

// Counters are one engine's cumulative counters, as scraped.
type Counters struct {
	Cycles  float64   // draft+verify cycles, summed over requests
	AtLeast []float64 // [k-1]: cycles accepting at least k draft tokens
	Tokens  float64   // tokens generated
	Secs    float64   // seconds requests were served, summed over requests
	// Busy is the engine's own seconds generating, summed over requests
	// (llama-server's tokens_predicted_seconds: no wait before decoding);
	// 0 where unknown. Secs − Busy is the requests' wait (waitPerToken).
	Busy float64
}

// BeforeLoads are the requests in flight whose rows (each times every
// width) serve probes on the first engine of a pair before it takes
// traffic: rows between them are read, not probed again (verifyAt), so up
// to four in flight nothing is probed under load.
var BeforeLoads = []int{1, 2, 4}

// BeforeLoadsFor is BeforeLoads for an engine of slots (0: unknown): a
// load above the slots decodes only slots sequences together (decoding),
// so the loads are capped there, and more slots than BeforeLoads reaches
// are probed too: a load that fills them leaves no slot free, and no
// probe runs under it (probeFor). One slot probes one load: on the sim's
// GB10 cost the probe of all three ran out its 10 s bound while requests
// waited.
func BeforeLoadsFor(slots int) []int {
	if slots <= 0 {
		return slices.Clone(BeforeLoads)
	}
	var ns []int
	for _, n := range append(slices.Clone(BeforeLoads), slots) {
		if n = min(n, slots); !slices.Contains(ns, n) {
			ns = append(ns, n)
		}
	}
	return ns
}

// BeforeRows are the rows the probe before traffic measures, in groups
// probed in turn: for each load of BeforeLoadsFor(slots), every width up
// to maxWidth times the load (without the rows of the loads before it),
// then the serving width's rows at every load where it is wider. A
// default of 16 over adapt.max_width 8 had row 16 only from the load of
// two; without it its runs price no drafting cost, and on a one-slot
// engine (one load) no width could be tried. Its group comes last, so a
// probe cut by its bound keeps the rows it had before (a review).
func BeforeRows(slots, maxWidth, serving int) [][]int {
	seen := map[int]bool{}
	var out [][]int
	var wide []int
	for _, n := range BeforeLoadsFor(slots) {
		var rows []int
		for w := 1; w <= maxWidth; w++ {
			if !seen[n*w] {
				seen[n*w] = true
				rows = append(rows, n*w)
			}
		}
		out = append(out, rows)
		if serving > maxWidth {
			wide = append(wide, n*serving)
		}
	}
	var last []int
	for _, r := range wide {
		if !seen[r] {
			seen[r] = true
			last = append(last, r)
		}
	}
	if len(last) > 0 {
		out = append(out, last)
	}
	return out
}

// Op is what an action asks of the shell.
type Op int

// Actions.
const (
	SwitchTo Op = iota + 1 // serve Width for Bucket at Load (Reason says why); answer with Switched
	Probe                  // probe the verify cost of Rows; answer with Probed
	Save                   // write State.Pair (Saved)
	Log                    // log Msg
	Warn                   // log Msg at warn: the operator should act
)

// Action is one thing the shell is asked to do.
type Action struct {
	Op     Op
	Width  int
	Reason string
	Rows   []int
	Msg    string
	// SwitchTo: the bucket of the schedule in force whose width it serves
	// ("2-4"), and the load that caused it (mean requests in flight).
	Bucket string
	Load   float64
}

// Config is the controller's settings. Zero fields take the defaults;
// Default must be set.
type Config struct {
	// Default is the safe answer: the policy's or the engine's schedule
	// (a flat one for a single width).
	Default schedule.Schedule
	// Buckets are the load buckets learnt ([lo, hi], hi 0 = open);
	// default BucketsFor(Default): fixedEdges split at every edge of
	// Default, so that each bucket lies inside one of Default's.
	Buckets [][2]int
	// MaxWidth caps every width tried (17).
	MaxWidth int
	// MinCycles is the cycles (tokens at width 1) of its own an engine's
	// run takes before a decision (256, defaults.AdaptMinCycles).
	MinCycles float64
	// Spread1 and SpreadN are the relative standard deviation of one
	// fresh engine's rate around its width's mean, at one request in
	// flight and at several. Pooled over the repeats in the committed
	// adapteval fixed-width files (docs/benchmark_results/adapteval/
	// *-fixed.json, log rates): 0.034 at one client (5 degrees of
	// freedom), 0.056 at four (20).
	Spread1, SpreadN float64
	// ClassicLive and ClassicLoad scale classic's predicted time a token
	// over the probe's rows, which run in step: ClassicLive with more
	// than one request in flight, ClassicLoad with four or more and
	// linearly less down to none at one, as the sim charges them
	// (simcost.Model's cycle of n classic sequences). 0 or 1: none.
	// serve sets LlamaClassicLive and LlamaClassicLoad for llama-server.
	ClassicLive, ClassicLoad float64
	// Z is the standard errors of every lower bound (1.64: one-sided 95 %).
	Z float64
	// Payback is the time over which a switch's gain must repay its
	// switch time (10 min).
	Payback time.Duration
	// SwitchS is the switch time taken before one is measured: on the
	// H200 a 20 GB target's switch took 9.5-10.3 s
	// (docs/benchmark_results/h200-llamacpp-d32676d-summary-2026-12-03.md).
	SwitchS float64
	// WarmUp is how long a new engine serves alone before its counters
	// count: its first requests run slower (on an H200 under 4 clients
	// the first request of each slot ran 11-49 % slower a token; on an
	// H100 a classic engine after a switch ran 23 % slower over its first
	// 2 s, the old engine's drain, and its clients fell into step (its
	// steady pace, on one request length) within 6.1 s: docs/benchmark_results/h100-switch-2026-12-06e.md;
	// with 128-token requests they mostly did not within 18 s, 1.05 times
	// slower a token: docs/benchmark_results/h100-outofstep-2026-12-06f.md,
	// and a server's requests of varied length never run in step).
	WarmUp time.Duration
	// RetryAfter is how long a width tried stays untried again (30 min).
	RetryAfter time.Duration
	// DriftZ is the z at which a run's tokens per cycle, unlike its
	// width's earlier runs, says the traffic changed (4).
	DriftZ float64
	// LoadWindow is the in-flight samples the load bucket is read over
	// (8: 16 s at 2 s scrapes).
	LoadWindow int
	// Hold is how long no switch follows a failed one (60 s).
	Hold time.Duration
	// MaxPerHour caps the switches of any hour, trials included
	// (follow.DefaultMaxPerHour when 0).
	MaxPerHour int
	// Off names rules turned off, for the ablation (internal/adaptsim's
	// BenchmarkControlAblation): "spread", "payback", "warmup", "drift",
	// "trials", "extrapolation" (positions not observed), "regimes"
	// (Pair.Regimes), "check" (the default checked under width 1),
	// "bucket acceptance" (the drift test against the bucket's own
	// acceptance), "probe apart" (no run from a scrape the probe shared),
	// "retrial" (a second engine of a width one engine ran ahead inside the
	// noise), "classic load" (ClassicLive and ClassicLoad), "far ahead" (the running width
	// kept where the model puts an unmeasured default far below it),
	// "ahead elsewhere" (a width kept where the default is unmeasured and
	// it ran ahead of it at another load beyond loadReversal), "stray
	// trial" (a trial's width left within a window once the load leaves
	// its bucket), "way back" (a judged trial's way back taken within a
	// window), "unmeasured here" (a width with no measure where the load
	// sits left within a window for that bucket's width, loadReversal),
	// "wait" (the requests' wait outside the engine's time priced in
	// cycles, waitPerToken);
	// serve turns "trials" off for adapt.trials = 0. Nil otherwise.
	Off map[string]bool
}

// LlamaClassicLive and LlamaClassicLoad are llama-server's ClassicLive
// and ClassicLoad, over the probe's rows:
//   - one-length requests: classic's eval ms a token under four slots ran
//     1.054 times the probe's four rows (1.00-1.08 over five classic runs
//     on the H200, docs/benchmark_results/adapteval/h200-llamacpp-d32676d-{q8_0,q4_k_m}-pair7243L36-code-c4-2026-12-03e-engine-timings.jsonl);
//   - requests of varied length ran classic at 1.24 times the time a
//     token of one-length requests (four servers, two in step, two not;
//     on an H100, docs/benchmark_results/h100-outofstep-2026-12-06f.md).
//
// The sim charges both (simcost.H200Batch's ClassicLive and
// ClassicVaried); with the second alone the controller priced classic
// 5 % faster than the sim runs it and, on the matrix (eight seeds),
// switched 169.4 times a run against 144.8 (docs/benchmark_results/sim-matrix-classic-2026-12-07.md).
// Without either it predicted classic ahead at four clients and measured
// it behind (−9.1 % against +41.8 %, docs/benchmark_results/h100-follow-2026-12-06b.md);
// with the 1.24 alone it still did on a slower H100 (−5.4 % against
// +39.4 %, docs/benchmark_results/h100-follow-2026-12-07d.md); with both,
// on another H100, it measured +4.5 % against +19.3 %, its step as priced
// (docs/benchmark_results/h100-follow-2026-12-07e.md). Measured at
// four in flight; the 1.24 is interpolated below four, an assumption.
const (
	LlamaClassicLive = 1.054
	LlamaClassicLoad = 1.24
)

// Defaults.
const (
	DefaultMaxWidth   = defaults.AdaptMaxWidth
	DefaultMinCycles  = defaults.AdaptMinCycles
	DefaultSpread1    = 0.034
	DefaultSpreadN    = 0.056
	DefaultZ          = 1.64
	DefaultPayback    = 10 * time.Minute
	DefaultSwitchS    = 10.0
	DefaultWarmUp     = 5 * time.Second
	DefaultRetryAfter = 30 * time.Minute
	DefaultDriftZ     = 4.0
	DefaultLoadWindow = 8
	DefaultHold       = defaults.AdaptWindow
)

func (c Config) withDefaults() Config {
	if len(c.Default) == 0 {
		c.Default = schedule.Flat(4, "default")
	}
	if len(c.Buckets) == 0 {
		c.Buckets = BucketsFor(c.Default)
	}
	setF := func(p *float64, d float64) {
		if *p <= 0 {
			*p = d
		}
	}
	setD := func(p *time.Duration, d time.Duration) {
		if *p <= 0 {
			*p = d
		}
	}
	if c.MaxWidth < 2 {
		c.MaxWidth = DefaultMaxWidth
	}
	if c.LoadWindow < 1 {
		c.LoadWindow = DefaultLoadWindow
	}
	setF(&c.MinCycles, DefaultMinCycles)
	setF(&c.Spread1, DefaultSpread1)
	setF(&c.SpreadN, DefaultSpreadN)
	setF(&c.Z, DefaultZ)
	setF(&c.SwitchS, DefaultSwitchS)
	setF(&c.DriftZ, DefaultDriftZ)
	setD(&c.Payback, DefaultPayback)
	setD(&c.WarmUp, DefaultWarmUp)
	setD(&c.RetryAfter, DefaultRetryAfter)
	setD(&c.Hold, DefaultHold)
	return c
}

// WithSpread is c for an engine whose between-engine spread is known
// (the sim's: its cost model's), single at one request in flight and
// multi at several, in place of the H200's measured Spread1/SpreadN; an
// engine whose fresh engines do not differ gets none ("spread" off),
// which a zero would not say (zero takes the default).
func (c Config) WithSpread(single, multi float64) Config {
	// noSpread stands for none beside a spread: a zero would take the
	// default.
	const noSpread = 1e-9
	if single > 0 || multi > 0 {
		c.Spread1, c.SpreadN = max(single, noSpread), max(multi, noSpread)
		return c
	}
	c.Spread1, c.SpreadN = 0, 0
	off := map[string]bool{"spread": true}
	for k, v := range c.Off {
		off[k] = v
	}
	c.Off = off
	return c
}

// fixedEdges are the low edges of the load buckets learnt under a flat
// default (1, 2-4, 5-8, 9+): four independent clients keep 3.2-3.6
// requests in flight (the H200 of 2026-12-03c), inside one bucket.
var fixedEdges = []int{1, 2, 5, 9}

// BucketsFor is the load buckets learnt under the starting schedule def:
// the fixed ones split at every edge of def, so that each lies inside one
// of def's buckets and the learnt schedule starts equal to def at every
// load (a tuned `1-3:6,4+:1` gives 1, 2-3, 4, 5-8, 9+, not a 2-4 bucket
// at width 6 where def runs 1 at 4). def's edges come first; a fixed edge
// is added while there are fewer than schedule.MaxBuckets.
func BucketsFor(def schedule.Schedule) [][2]int {
	edges := []int{1}
	add := func(e int) {
		if e > 1 && len(edges) < schedule.MaxBuckets && !slices.Contains(edges, e) {
			edges = append(edges, e)
		}
	}
	for _, b := range def {
		add(b.Lo)
	}
	for _, e := range fixedEdges {
		add(e)
	}
	slices.Sort(edges)
	out := make([][2]int, len(edges))
	for i, e := range edges {
		out[i] = [2]int{e, 0}
		if i+1 < len(edges) {
			out[i][1] = edges[i+1] - 1
		}
	}
	return out
}
