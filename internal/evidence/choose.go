package evidence

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/speclaunch/speclaunch/internal/record"
)

// Decision is the choice of one width for a key over records of several
// model pairs (one record is the single-pair case).
//
// Its JSON (`policy propose --json`) is snake_case, as every --json output.
type Decision struct {
	Width    int `json:"width"`
	RunnerUp int `json:"runner_up"`
	// WorstFraction is, per width measured OK in every record, the lowest
	// over records of median(width) / median(that record's best width).
	WorstFraction map[int]float64 `json:"worst_fraction"`
	Eligible      bool            `json:"eligible"`
	Why           string          `json:"why"`
	PerRecord     []string        `json:"per_record"`
	// Ranked is every common width in rank order with the rules it fails
	// (none: it passes); the chosen width is the first that passes.
	Ranked []Candidate `json:"ranked,omitempty"`
}

// Candidate is one width in the cross-pair ranking.
type Candidate struct {
	Width         int      `json:"width"`
	WorstFraction float64  `json:"worst_fraction"`
	Fails         []string `json:"fails,omitempty"`
}

// Choose picks one width for a key from records of different model pairs.
// A policy entry is keyed on (engine, drafter, capability, quant), which
// fixes the cost side, but acceptance belongs to the pair (it moved the
// best H200 width from 6 to 4 between two pairs of one shape), so the
// entry takes the width that loses least in the worst pair: widths
// measured in every record are ranked by their worst fraction of each
// record's best median (ties: the smaller width), and the first that passes
// Judge in every record is chosen. When the top width fails, the rule falls
// back to the next one rather than earning nothing. The runner-up is the
// best-ranked other width that passes, else the best-ranked other width.
// docs/policy.md states the rule. An error is the context's.
func Choose(ctx context.Context, evs []*Evidence) (Decision, error) {
	d := Decision{WorstFraction: map[int]float64{}}
	order, why := rankCommon(evs, d.WorstFraction)
	if why != "" {
		d.Why = why
		return d, nil
	}
	judged := map[int][]Judgement{}
	chosen := -1
	for i, w := range order {
		c := Candidate{Width: w, WorstFraction: d.WorstFraction[w]}
		for _, e := range evs {
			j, err := e.Judge(ctx, w)
			if err != nil {
				return d, err
			}
			judged[w] = append(judged[w], j)
			for _, m := range j.Messages() {
				c.Fails = append(c.Fails, e.Name()+": "+m)
			}
		}
		d.Ranked = append(d.Ranked, c)
		if chosen < 0 && len(c.Fails) == 0 {
			chosen = i
		}
	}
	d.Width = order[max(chosen, 0)]
	d.RunnerUp = runnerUp(d.Ranked, d.Width)
	for i, e := range evs {
		d.PerRecord = append(d.PerRecord, perRecord(e, judged[d.Width][i]))
	}
	d.Why, d.Eligible = explain(d, len(evs), chosen)
	return d, nil
}

// rankCommon fills worst with every common width's worst fraction and
// returns those widths in rank order; why says why there are none.
func rankCommon(evs []*Evidence, worst map[int]float64) ([]int, string) {
	if len(evs) == 0 {
		return nil, "no records"
	}
	k := evs[0].Rec.Key
	for _, e := range evs[1:] {
		if e.Rec.Key != k {
			return nil, fmt.Sprintf("records measure different keys (%s: %s; %s: %s)", evs[0].Name(), keyText(k), e.Name(), keyText(e.Rec.Key))
		}
	}
	var common []int
	for i, e := range evs {
		ranked := e.Ranked()
		if len(ranked) == 0 {
			return nil, noWidth(e)
		}
		best := ranked[0].Stats.Median
		var ws []int
		for _, a := range ranked {
			w, f := a.RanWidth(), frac(a.Stats.Median, best)
			ws = append(ws, w)
			if i == 0 || slices.Contains(common, w) {
				if old, seen := worst[w]; !seen || f < old {
					worst[w] = f
				}
			}
		}
		if i == 0 {
			common = ws
		} else {
			common = slices.DeleteFunc(common, func(w int) bool { return !slices.Contains(ws, w) })
		}
	}
	if len(common) == 0 {
		return nil, "no width was measured OK in every record"
	}
	for w := range worst {
		if !slices.Contains(common, w) {
			delete(worst, w)
		}
	}
	slices.SortStableFunc(common, func(a, b int) int {
		fa, fb := worst[a], worst[b]
		switch {
		case fa > fb:
			return -1
		case fa < fb:
			return 1
		}
		return a - b
	})
	return common, ""
}

// noWidth says that a record has no width measured OK, and what else
// keeps it from backing an entry (RecordFails: simulated, incomplete),
// since no width is judged to say it.
func noWidth(e *Evidence) string {
	msg := e.Name() + " has no width measured OK"
	if fails := e.RecordFails(); len(fails) > 0 {
		msg += ": " + strings.Join(fails, "; ")
	}
	return msg
}

// runnerUp is the best-ranked width other than w that passes, else the
// best-ranked other width (the one nearest to earning it); 0 when none.
func runnerUp(ranked []Candidate, w int) int {
	for _, c := range ranked {
		if c.Width != w && len(c.Fails) == 0 {
			return c.Width
		}
	}
	for _, c := range ranked {
		if c.Width != w {
			return c.Width
		}
	}
	return 0
}

// perRecord is one record's line: its best width, the chosen width's
// figures there, and how it compares with the default.
func perRecord(e *Evidence, j Judgement) string {
	best := e.Ranked()[0]
	a := j.Arm
	line := fmt.Sprintf("%s: best width %d at %.1f tok/s; width %d at %.1f = %.2f of best",
		e.Name(), best.RanWidth(), best.Stats.Median, j.Width, a.Stats.Median, frac(a.Stats.Median, best.Stats.Median))
	if c := e.classicOK(); c != nil {
		line += ", " + CompareRange(a.Stats, c.Stats) + " classic"
	}
	def := e.Default
	switch {
	case def == nil:
		line += "; no default arm"
	case def.Status != record.StatusOK:
		line += "; default arm " + def.Status
	case def.RanWidth() == j.Width:
		line += fmt.Sprintf("; the default is width %d already", j.Width)
	default:
		line += fmt.Sprintf("; default (width %d) %.1f", def.RanWidth(), def.Stats.Median)
		if c := j.VsDefault; c != nil {
			line += fmt.Sprintf(", width %d/default %.3f (95%% interval %.3f-%.3f, P(better) %.3f)", j.Width, c.Ratio, c.Lo, c.Hi, c.PBetter)
		}
	}
	if best.RanWidth() != j.Width {
		line += fmt.Sprintf("; this record's own best (width %d) differs from the cross-pair choice (width %d)", best.RanWidth(), j.Width)
	}
	for _, f := range e.RecordFails() {
		line += "; " + f
	}
	return line
}

// explain is the decision's Why, and whether it earns an entry.
func explain(d Decision, records, chosen int) (string, bool) {
	why := fmt.Sprintf("width %d keeps at least %.2f of each record's best median over %d record(s)", d.Width, d.WorstFraction[d.Width], records)
	if d.RunnerUp > 0 {
		why += fmt.Sprintf("; runner-up width %d keeps %.2f", d.RunnerUp, d.WorstFraction[d.RunnerUp])
	}
	if chosen < 0 {
		why += "; not eligible: " + strings.Join(d.Ranked[0].Fails, "; ")
		if len(d.Ranked) > 1 {
			why += fmt.Sprintf("; no other width passes either (%d ranked)", len(d.Ranked))
		}
		return why, false
	}
	if chosen > 0 {
		var skipped []string
		for _, c := range d.Ranked[:chosen] {
			skipped = append(skipped, fmt.Sprintf("width %d (worst fraction %.2f) fails: %s", c.Width, c.WorstFraction, strings.Join(c.Fails, "; ")))
		}
		why += "; fell back past " + strings.Join(skipped, "; ")
	}
	return why + fmt.Sprintf("; it beats classic with disjoint ranges and the engine's default with probability >= %.2f in every record", Level), true
}

func frac(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func keyText(k record.Key) string {
	return fmt.Sprintf("engine=%s drafter=%s capability=%s quant=%s", k.Engine, k.Drafter, k.Capability, k.Quant)
}

// Range comparisons of an arm against classic.
const (
	RangeFaster   = "disjoint, faster"
	RangeOverlaps = "overlaps"
	RangeSlower   = "disjoint, slower"
)

// CompareRange places arm's [min, max] against classic's. Only disjoint
// ranges separate: n is small and medians of neighbouring widths swap
// between runs: on the H200 llama.cpp sweeps the run-1 medians of Q4_0
// widths 3 and 5 came out 9-17% below their run-2 and run-3 medians, while
// speculative arms spread about -20/+15% around their median.
func CompareRange(arm, classic record.Stats) string {
	switch {
	case arm.Min > classic.Max:
		return RangeFaster
	case arm.Max < classic.Min:
		return RangeSlower
	}
	return RangeOverlaps
}
