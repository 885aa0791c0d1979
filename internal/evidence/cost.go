package evidence

import (
	"slices"
	"strings"

	"github.com/speclaunch/speclaunch/internal/record"
)

// How a cost per cycle was derived, as the record says (the prefixes).
const (
	CostClassic = "predicted_ms / predicted_n"
	CostCycles  = "predicted_ms / cycles"
)

// RunCycles is a run's draft+verify cycle count, where it came from, and
// its ms per cycle (0 when the run does not tell). Sources, best first: a
// count already on the run (the harness's /metrics delta), the engine's
// draft_rounds, its diagnostics rounds, and drafted / (W−1), an estimate:
// even with llama.cpp's p-min 0 the last cycles draft fewer than W−1
// tokens when the token budget runs out (seen on a real H200: 6 estimated
// against 7 real cycles at width 6), so records prefer the /metrics count.
// A classic run's cycle is one token.
func RunCycles(r *record.Run, kind string, w int) (cycles int, from string, ms float64) {
	if kind == record.KindClassic {
		if r.CompletionTokens > 0 && r.PredictedMS > 0 {
			ms = r.PredictedMS / float64(r.CompletionTokens)
		}
		return r.CompletionTokens, "tokens", ms
	}
	cycles, from = r.Cycles, r.CyclesFrom
	if cycles == 0 {
		switch {
		case r.DraftRounds > 0:
			cycles, from = r.DraftRounds, "draft_rounds"
		case r.DiagRounds > 0:
			cycles, from = r.DiagRounds, "diagnostics"
		case r.DraftN > 0 && w > 1:
			cycles, from = (r.DraftN+(w-1)/2)/(w-1), "drafted/(W-1)"
		}
	}
	switch {
	case r.DiagRounds > 0 && r.DiagSyncMS > 0:
		ms = r.DiagSyncMS / float64(r.DiagRounds)
	case cycles > 0 && r.PredictedMS > 0:
		ms = r.PredictedMS / float64(cycles)
	}
	return cycles, from, ms
}

// ArmCost is the arm's cost side from its measured runs: the median ms per
// cycle (RunCycles) and how it was derived.
func ArmCost(a *record.Arm) record.Cost {
	w := a.RanWidth()
	c := record.Cost{VerifyRows: max(w, 1)}
	var xs []float64
	from := map[string]bool{}
	diag := false
	for j := range a.Runs {
		r := &a.Runs[j]
		if !r.Measured() {
			continue
		}
		_, f, ms := RunCycles(r, a.Kind, w)
		if ms <= 0 {
			continue
		}
		xs = append(xs, ms)
		if a.Kind != record.KindClassic && r.DiagRounds > 0 && r.DiagSyncMS > 0 {
			diag = true
		} else {
			from[f] = true
		}
	}
	if len(xs) == 0 {
		return c
	}
	c.MSPerCycle = Median(xs)
	switch {
	case a.Kind == record.KindClassic:
		c.Method = CostClassic + " (one token per cycle)"
	case diag:
		c.Method = "target_argmax_sync_ms / rounds (engine diagnostics)"
	default:
		keys := make([]string, 0, len(from))
		for k := range from {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		c.Method = CostCycles + " (cycles from " + strings.Join(keys, ", ") + ")"
	}
	return c
}
