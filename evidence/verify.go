package evidence

import (
	"fmt"
	"math"

	"github.com/speclaunch/speclaunch/record"
)

// Disagreements compares every figure the rule judges, as the record
// stores it, with the same figure recomputed from the raw runs, and names
// the arm and field of each that differs: per arm with runs, its stats and
// ms per cycle; per speculative arm, beats_classic; for classic with runs,
// the drift brackets. An arm without runs has only its stored figures and
// is judged on them (HasRuns, Arm.FromRuns).
func (e *Evidence) Disagreements() []string {
	var out []string
	for i := range e.Arms {
		a := &e.Arms[i]
		if a.FromRuns {
			out = append(out, statsDiff(fmt.Sprintf("arm %q", a.Label), "stats", a.Arm.Stats, a.Stats)...)
			if !same(a.Arm.Cost.MSPerCycle, a.Cost.MSPerCycle) {
				out = append(out, mismatch(fmt.Sprintf("arm %q", a.Label), "cost.ms_per_cycle", a.Arm.Cost.MSPerCycle, a.Cost.MSPerCycle))
			}
		}
		if a.Kind != record.KindClassic && e.classicOK() != nil && a.Arm.BeatsClassic != e.BeatsClassic(a) {
			out = append(out, fmt.Sprintf("arm %q: stored beats_classic %v disagrees with the margin applied to its figures (%v); regenerate the record's analysis with this speclaunch",
				a.Label, a.Arm.BeatsClassic, !a.Arm.BeatsClassic))
		}
	}
	if c := e.Classic; c != nil && c.FromRuns {
		d := Drift(c.Arm)
		out = append(out, statsDiff("classic", "drift.first", e.Rec.Drift.First, d.First)...)
		out = append(out, statsDiff("classic", "drift.last", e.Rec.Drift.Last, d.Last)...)
	}
	return out
}

// ComparisonDiff compares a stored bootstrap comparison of arm label with
// the one recomputed from the raw runs.
func ComparisonDiff(label, field string, stored, got *record.Comparison) []string {
	who := fmt.Sprintf("arm %q", label)
	switch {
	case got == nil:
		return nil
	case stored == nil:
		return []string{fmt.Sprintf("%s: the record stores no %s, but its raw runs give P(better) %.3f; regenerate the record's analysis", who, field, got.PBetter)}
	}
	var out []string
	for _, f := range []struct {
		name      string
		have, get float64
	}{
		{"ratio", stored.Ratio, got.Ratio}, {"lo", stored.Lo, got.Lo}, {"hi", stored.Hi, got.Hi},
		{"p_better", stored.PBetter, got.PBetter}, {"resamples", float64(stored.Resamples), float64(got.Resamples)},
	} {
		if !same(f.have, f.get) {
			out = append(out, mismatch(who, field+"."+f.name, f.have, f.get))
		}
	}
	return out
}

func statsDiff(who, field string, stored, got record.Stats) []string {
	var out []string
	for _, f := range []struct {
		name      string
		have, get float64
	}{
		{"n", float64(stored.N), float64(got.N)}, {"min", stored.Min, got.Min}, {"median", stored.Median, got.Median},
		{"max", stored.Max, got.Max}, {"mean", stored.Mean, got.Mean},
	} {
		if !same(f.have, f.get) {
			out = append(out, mismatch(who, field+"."+f.name, f.have, f.get))
		}
	}
	return out
}

func mismatch(who, field string, stored, got float64) string {
	return fmt.Sprintf("%s: stored %s %.4g disagrees with its raw runs (%.4g); the figure was edited or the runs were: regenerate the record with speclaunch bench", who, field, stored, got)
}

// same is equality up to float rounding: a record's figures are written
// from the same runs by the same arithmetic, so only the last bits of a
// JSON round trip may differ.
func same(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*max(1, math.Abs(a), math.Abs(b))
}
