package evidence

import (
	"fmt"
	"math"
	"strings"

	"github.com/speclaunch/speclaunch/internal/record"
)

// Disagreements compares every figure the rule judges, as the record
// stores it, with the same figure recomputed from the raw runs, and names
// the arm and the fields that differ: per arm with runs, its stats and ms
// per cycle; per speculative arm, beats_classic; for classic, the drift
// brackets (recomputed from its runs, or, without runs, at least inside
// classic's stored range, since they are part of it). An arm without runs
// has only its stored figures and is judged on them (Arm.FromRuns).
func (e *Evidence) Disagreements() []string {
	var out []string
	for i := range e.Arms {
		a := &e.Arms[i]
		who := fmt.Sprintf("arm %q", a.Label)
		if a.FromRuns {
			fs := statsFields("stats", a.Arm.Stats, a.Stats)
			if !same(a.Arm.Cost.MSPerCycle, a.Cost.MSPerCycle) {
				fs = append(fs, field("cost.ms_per_cycle", a.Arm.Cost.MSPerCycle, a.Cost.MSPerCycle))
			}
			out = appendDiff(out, e.writtenBy, who, "its raw runs", fs)
		}
		if a.Kind != record.KindClassic && e.classicOK() != nil && a.Arm.BeatsClassic != e.BeatsClassic(a) {
			out = append(out, fmt.Sprintf("%s: stored beats_classic %v disagrees with the margin applied to its figures (%v); regenerate the record's analysis with this speclaunch",
				who, a.Arm.BeatsClassic, !a.Arm.BeatsClassic))
		}
	}
	return append(out, e.bracketDiff()...)
}

// bracketDiff checks the stored drift brackets against classic.
func (e *Evidence) bracketDiff() []string {
	c, d := e.Classic, e.Rec.Drift
	if c == nil {
		return nil
	}
	if c.FromRuns {
		got := Drift(c.Arm)
		fs := append(statsFields("drift.first", d.First, got.First), statsFields("drift.last", d.Last, got.Last)...)
		return appendDiff(nil, e.writtenBy, "classic", "its raw runs", fs)
	}
	var fs []string
	for _, b := range []struct {
		name string
		s    record.Stats
	}{{"drift.first", d.First}, {"drift.last", d.Last}} {
		if b.s.N > 0 && (b.s.Min < c.Stats.Min || b.s.Max > c.Stats.Max) {
			fs = append(fs, fmt.Sprintf("%s %.2f–%.2f outside classic's stored range %.2f–%.2f", b.name, b.s.Min, b.s.Max, c.Stats.Min, c.Stats.Max))
		}
	}
	if n := d.First.N + d.Last.N; n > c.Stats.N {
		fs = append(fs, fmt.Sprintf("the brackets hold %d runs, classic's stats %d", n, c.Stats.N))
	}
	return appendDiff(nil, e.writtenBy, "classic", "classic's own stats (the brackets are part of its runs)", fs)
}

// ComparisonDiff compares a stored bootstrap comparison of arm label with
// the one recomputed from the raw runs (nothing when either is missing).
// Only a single-level record stores one (an arm's vs_default), so its fix
// is bench's.
func ComparisonDiff(label, name string, stored, got *record.Comparison) []string {
	if stored == nil || got == nil {
		return nil
	}
	var fs []string
	for _, f := range []struct {
		name      string
		have, get float64
	}{
		{"ratio", stored.Ratio, got.Ratio}, {"lo", stored.Lo, got.Lo}, {"hi", stored.Hi, got.Hi},
		{"p_better", stored.PBetter, got.PBetter}, {"resamples", float64(stored.Resamples), float64(got.Resamples)},
	} {
		if !same(f.have, f.get) {
			fs = append(fs, field(name+"."+f.name, f.have, f.get))
		}
	}
	return appendDiff(nil, "speclaunch bench", fmt.Sprintf("arm %q", label), "its raw runs", fs)
}

func statsFields(name string, stored, got record.Stats) []string {
	var fs []string
	for _, f := range []struct {
		name      string
		have, get float64
	}{
		{"n", float64(stored.N), float64(got.N)}, {"min", stored.Min, got.Min}, {"median", stored.Median, got.Median},
		{"max", stored.Max, got.Max}, {"mean", stored.Mean, got.Mean},
	} {
		if !same(f.have, f.get) {
			fs = append(fs, field(name+"."+f.name, f.have, f.get))
		}
	}
	return fs
}

func field(name string, stored, got float64) string {
	return fmt.Sprintf("%s %.4g (recomputed %.4g)", name, stored, got)
}

// appendDiff adds one finding for who when fields differ; cmd is the
// command that writes the record again (WrittenBy).
func appendDiff(out []string, cmd, who, source string, fields []string) []string {
	if len(fields) == 0 {
		return out
	}
	return append(out, fmt.Sprintf("%s: stored %s disagree(s) with %s; the figures or the runs were edited: regenerate the record with %s",
		who, strings.Join(fields, ", "), source, cmd))
}

// same is equality up to float rounding: a record's figures are written
// from the same runs by the same arithmetic, so only the last bits of a
// JSON round trip may differ.
func same(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*max(1, math.Abs(a), math.Abs(b))
}
