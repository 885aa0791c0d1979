package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/speclaunch/speclaunch/record"
)

// Decision is the cross-pair choice for one key.
type Decision struct {
	Width, RunnerUp int
	// WorstFraction is, per width measured OK in every record, the lowest
	// over records of median(width) / median(that record's best width).
	WorstFraction map[int]float64
	Eligible      bool
	Why           string
	PerRecord     []string
}

// Choose picks one width for a key from records of different model pairs.
// A policy entry is keyed on (engine, drafter, capability, quant), which
// fixes the cost side, but acceptance belongs to the pair (it moved the
// best H200 width from 6 to 4 between two pairs of one shape), so the
// entry takes the width that loses least in the worst pair: for each width
// measured OK in every record, its worst fraction of that record's best
// median; the highest worst fraction wins (ties: the smaller width). It is
// eligible for an entry only if, in every record, it beats classic with
// disjoint ranges and its median beats the record's default arm, and no
// record is simulated or incomplete. The rule is stated in docs/policy.md.
func Choose(recs []*record.Record) Decision {
	d := Decision{WorstFraction: map[int]float64{}}
	if len(recs) == 0 {
		d.Why = "no records"
		return d
	}
	k := recs[0].Key
	for _, r := range recs[1:] {
		if r.Key != k {
			d.Why = fmt.Sprintf("records measure different keys (%s: %s; %s: %s)", recName(recs[0]), keyText(k), recName(r), keyText(r.Key))
			return d
		}
	}
	type view struct {
		arms    map[int]*record.Arm
		best    ranked
		def     *record.Arm
		problem string
	}
	views := make([]view, len(recs))
	var common []int
	for ri, r := range recs {
		v := view{arms: map[int]*record.Arm{}}
		var rs []ranked
		for i := range r.Arms {
			a := &r.Arms[i]
			if a.Kind == KindDefault {
				v.def = a
			}
			if a.Kind == KindClassic || a.Status != record.StatusOK || a.Stats.N < 2 {
				continue
			}
			w := effWidth(a)
			// an explicit width arm stands for its width over the default arm
			if prev, ok := v.arms[w]; !ok || prev.Kind == KindDefault && a.Kind == KindWidth {
				v.arms[w] = a
			}
			rs = append(rs, ranked{width: w, stats: a.Stats, idx: i})
		}
		if len(rs) == 0 {
			d.Why = fmt.Sprintf("%s has no width measured OK", recName(r))
			return d
		}
		sortRanked(rs)
		v.best = rs[0]
		switch {
		case r.Simulated:
			v.problem = "simulated"
		case !r.Complete:
			v.problem = "incomplete"
		}
		views[ri] = v
		ws := make([]int, 0, len(v.arms))
		for w := range v.arms {
			ws = append(ws, w)
		}
		slices.Sort(ws)
		if ri == 0 {
			common = ws
		} else {
			common = slices.DeleteFunc(common, func(w int) bool { return !slices.Contains(ws, w) })
		}
	}
	if len(common) == 0 {
		d.Why = "no width was measured OK in every record"
		return d
	}
	for _, w := range common {
		worst := -1.0
		for _, v := range views {
			f := 0.0
			if v.best.stats.Median > 0 {
				f = v.arms[w].Stats.Median / v.best.stats.Median
			}
			if worst < 0 || f < worst {
				worst = f
			}
		}
		d.WorstFraction[w] = worst
	}
	order := slices.Clone(common)
	slices.SortStableFunc(order, func(a, b int) int {
		fa, fb := d.WorstFraction[a], d.WorstFraction[b]
		switch {
		case fa > fb:
			return -1
		case fa < fb:
			return 1
		}
		return a - b
	})
	d.Width = order[0]
	if len(order) > 1 {
		d.RunnerUp = order[1]
	}

	var fails []string
	for ri, r := range recs {
		v := views[ri]
		a := v.arms[d.Width]
		line := fmt.Sprintf("%s: best width %d at %.1f tok/s; width %d at %.1f = %.2f of best, %s classic",
			recName(r), v.best.width, v.best.stats.Median, d.Width, a.Stats.Median, frac(a.Stats.Median, v.best.stats.Median), a.RangeVsClassic)
		if !a.BeatsClassic {
			fails = append(fails, fmt.Sprintf("width %d does not beat classic with disjoint ranges in %s", d.Width, recName(r)))
		}
		switch {
		case v.def == nil:
			line += "; no default arm"
			fails = append(fails, recName(r)+" has no default arm to beat")
		case v.def.Status != record.StatusOK:
			line += "; default arm " + v.def.Status
			fails = append(fails, recName(r)+"'s default arm is "+v.def.Status)
		case effWidth(v.def) == d.Width:
			line += fmt.Sprintf("; the default is width %d already", d.Width)
			fails = append(fails, fmt.Sprintf("width %d is the default in %s: an entry would change nothing", d.Width, recName(r)))
		default:
			line += fmt.Sprintf("; default (width %d) %.1f, ratio %.2f", effWidth(v.def), v.def.Stats.Median, frac(a.Stats.Median, v.def.Stats.Median))
			if a.Stats.Median <= v.def.Stats.Median {
				fails = append(fails, fmt.Sprintf("width %d does not beat the default's median in %s", d.Width, recName(r)))
			}
		}
		if v.problem != "" {
			line += "; record " + v.problem
			fails = append(fails, recName(r)+" is "+v.problem)
		}
		d.PerRecord = append(d.PerRecord, line)
	}
	why := fmt.Sprintf("width %d keeps at least %.2f of each record's best median over %d record(s)", d.Width, d.WorstFraction[d.Width], len(recs))
	if d.RunnerUp > 0 {
		why += fmt.Sprintf("; runner-up width %d keeps %.2f", d.RunnerUp, d.WorstFraction[d.RunnerUp])
	}
	if len(fails) > 0 {
		d.Why = why + "; not eligible: " + strings.Join(fails, "; ")
		return d
	}
	d.Eligible = true
	d.Why = why + "; it beats classic with disjoint ranges and the default's median in every record"
	return d
}

func frac(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func recName(r *record.Record) string {
	if r.Name != "" {
		return r.Name
	}
	if r.Title != "" {
		return r.Title
	}
	return "an unnamed record"
}

func keyText(k record.Key) string {
	return fmt.Sprintf("engine=%s drafter=%s capability=%s quant=%s", k.Engine, k.Drafter, k.Capability, k.Quant)
}
