package simcost

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The H200 figures of llama-server d32676d (one H200, -np 4, 36-layer
// pairs). Each constant names the committed measurement it comes from.

// h200Q8Verify is the probe's verify cost by rows of the Q8_0 target, ms
// (the "verify-cost curve ready" line of
// docs/benchmark_results/adapteval/h200-llamacpp-d32676d-q8_0-pair7243L36-code-c4-2026-12-03e-decisions.jsonl).
var h200Q8Verify = map[int]float64{
	1: 3.23, 2: 3.27, 3: 3.78, 4: 4.02, 5: 4.23, 6: 4.49, 7: 4.70, 8: 5.04, 9: 5.91, 10: 6.12,
	11: 6.16, 12: 6.18, 13: 6.20, 14: 6.27, 15: 6.28, 16: 6.32, 17: 6.77, 18: 6.79, 20: 6.87,
	21: 6.92, 22: 6.88, 24: 6.90, 26: 7.25, 27: 7.29, 28: 7.31, 30: 7.35, 32: 7.38, 33: 7.62,
	34: 7.69, 36: 7.74, 39: 7.83, 40: 7.83, 42: 8.12, 44: 8.20, 45: 8.21, 48: 8.24, 51: 8.86,
	52: 8.94, 56: 8.93, 60: 9.02, 64: 9.22, 68: 9.93,
}

const (
	// h200Q8ClassicMS is one classic token with one client:
	// 1000 / 303.7 tok/s, width 1 of
	// docs/benchmark_results/adapteval/h200-llamacpp-d32676d-q8_0-pair5023L36-prose-c1-2026-12-03c-fixed.json.
	h200Q8ClassicMS = 3.29
	// h200DraftMS and h200DraftTokenMS: drafting of one sequence, a
	// fixed part and a part per drafted token, fitted to the H200 Q8_0
	// bench records of 2026-11-30 against the probe (the old sim
	// matrix's h200Q8, in package adapt's simharness_test.go until the
	// loop was removed in 7fc7f6c: within 0.3 ms of the measured cycle
	// at widths 2-9).
	h200DraftMS      = 0.3
	h200DraftTokenMS = 0.47
)

// H200Batch is the batching cost of four clients out of step on
// llama-server d32676d, from the 2026-12-03e engine timings
// (docs/benchmark_results/adapteval/h200-llamacpp-d32676d-{q8_0,q4_k_m}-pair7243L36-code-c4-2026-12-03e-engine-timings.jsonl,
// summarised in the -engine-vs-client.json beside them):
//
//   - SeqMS, SeqTokenMS: a cycle at width W under 4 slots is llama-server's
//     eval ms a token times the tokens a cycle (1 + S(1) + … + S(W−1), S
//     from the loop's decisions in the same cell); less the probe's verify
//     of 4·W rows and one sequence's drafting, what is left grows by about
//     0.40 ms plus 0.23 ms a drafted token for each of the 3 further
//     sequences (least squares over widths 2-8: Q8_0 0.24 + 0.28/token,
//     Q4_K_M 0.57 + 0.19/token; their mean).
//   - ClassicLive: classic's eval ms a token under 4 slots over the
//     probe's 4 rows, 1.00-1.08 over the five classic runs; mean 1.054.
//   - PickupClassic, PickupSpec: clients got 0.96-0.98 of the engine's
//     rate at classic and 0.85-0.93 at widths 2-8; with 128-token
//     requests that is a wait of 2.1-5.3 rounds a request at classic
//     (mean 3.6) and 4.0-8.1 at a speculative width (mean 5.8).
//   - ClassicVaried: four clients of requests that vary in length
//     (adapteval -length-spread 0.5) got 762.6 tok/s at classic over five
//     fresh servers (757-767), against 944.5 (917-971, four: two in step,
//     two not) with every request 128 tokens, the traffic of the cells
//     above: 1.24 times the time a token. Width 4 lost nothing (993.0
//     against 998.7); the other widths were measured with varied lengths
//     only. Measured on an H100, not an H200, with pair 7243L36's recipe
//     (docs/benchmark_results/h100-outofstep-2026-12-06f.md).
//   - ClassicSwitched, SwitchedMS: under one-length requests the classic
//     engines a switch started ran 1.044-1.057 (mean 1.053) times the
//     fresh classic servers' eval ms a token over their 20 s lives
//     (1.018-1.032 against the two fresh servers out of step); none began
//     four requests together in its first 18 s, two did in their last
//     second. Past the 20 s measured, the sim charges nothing.
var H200Batch = Batch{SeqMS: 0.40, SeqTokenMS: 0.23, ClassicLive: 1.054, PickupClassic: 3.6, PickupSpec: 5.8,
	ClassicVaried: 1.24, ClassicSwitched: 1.053, SwitchedMS: 20000}

// H200Spread is the between-engine spread: the pooled standard deviation
// of log tokens/s between windows of one width on fresh servers, over
// every width with repeats in docs/benchmark_results/adapteval/*-fixed.json (2026-12-03 to 12-03e):
// 0.034 with one client (5 degrees of freedom), 0.027 at classic with four
// (7) and 0.066 at a speculative width with four (13), where one width's
// windows differed by up to 20 % (width 6 of
// docs/benchmark_results/adapteval/h200-llamacpp-d32676d-q4_k_m-pair5023L36-code-c4-2026-12-03c-fixed.json).
var H200Spread = Spread{Single: 0.034, MultiClassic: 0.027, MultiSpec: 0.066}

// H200Drain is the GPU shared while the old engine drains after a switch
// under 4 clients: it drained for 1-3 s and the new engine's requests ran
// up to 34 % slower meanwhile
// (docs/benchmark_results/h200-llamacpp-d32676d-summary-2026-12-03d.md).
var H200Drain = Drain{MS: 2000, Contention: 0.35}

// H200ColdPrefillMS is the first request of each slot on a fresh
// llama-server evaluating its whole prompt (code prompts of 84-162
// tokens): 37-56 ms above the later requests' prompt time on the Q8_0
// target and 43-65 ms on Q4_K_M, means 45 and 55, over every fixed run of
// docs/benchmark_results/adapteval/h200-llamacpp-d32676d-{q8_0,q4_k_m}-pair7243L36-code-c4-2026-12-03e-engine-timings.jsonl
// (first request per slot against the median of the later ones).
const H200ColdPrefillMS = 50

// H200Q8 is the H200 Q8_0 target's cost with everything the hardware
// showed under load: the probe's verify curve, one-client classic, the
// drafting fit, and H200Batch, H200Spread and H200Drain. Its acceptance
// is left to the caller.
func H200Q8() Model {
	return Model{
		ClassicMS:     h200Q8ClassicMS,
		Verify:        maps.Clone(h200Q8Verify),
		Emitted:       map[int]float64{},
		DraftMS:       h200DraftMS,
		DraftTokenMS:  h200DraftTokenMS,
		PromptTokenMS: 0.01,
		Noise:         0.01,
		Batch:         H200Batch,
		Spread:        H200Spread,
		Drain:         H200Drain,
		ColdPrefillMS: H200ColdPrefillMS,
	}
}

// demoLoadAccept is the acceptance by draft position of pair 2718L36 on
// prose prompts with a Q8_0 target, as the loop measured it on the H200
// (docs/benchmark_results/adapteval/h200-llamacpp-d32676d-q8_0-pair2718L36-prose-c1-2026-12-03-decisions.jsonl,
// positions 1-7), its tail past 7 continued at the last value.
var demoLoadAccept = []float64{0.72, 0.59, 0.483, 0.429, 0.358, 0.31, 0.276}

// DemoLoad is the sim pairing whose best width moves with load
// (profiles/demo-load.toml): the H200 Q8_0 cost under load with a pair
// whose acceptance makes width 5 best with one client and classic best
// with four, the shape of the committed H200 cells. At their 128-token
// requests its four-client widths 3-6 sit as far below classic as the
// median committed cell's (shape_test.go,
// docs/benchmark_results/demo-load-shape-2026-12-05.md).
func DemoLoad() Model {
	m := H200Q8()
	m.Accept = fill(func(k int) float64 { return demoLoadAccept[min(k, len(demoLoadAccept))-1] })
	return m
}

// Presets are the named cost models of --sim-cost.
var Presets = map[string]func() Model{
	"gb10":      Default,
	"demo-load": DemoLoad,
}

// LookupPreset resolves a --sim-cost value.
func LookupPreset(name string) (Model, error) {
	f, ok := Presets[name]
	if !ok {
		return Model{}, fmt.Errorf("--sim-cost: %q is not a cost model (want one of %s)", name, strings.Join(slices.Sorted(maps.Keys(Presets)), ", "))
	}
	return f(), nil
}
