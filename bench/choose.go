package bench

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/speclaunch/speclaunch/bench/bootstrap"
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
	// Ranked is every common width in rank order with the rules it fails
	// (none: it passes); the chosen width is the first that passes.
	Ranked []Candidate `json:",omitempty"`
	// Records are the records' .md paths, for the entry's records list.
	Records []string `json:",omitempty"`
	// Cost is each record's cost side: ms per draft+verify cycle by width,
	// and classic's, for the entry's cost table.
	Cost []CostRow `json:",omitempty"`
}

// Candidate is one width in the cross-pair ranking.
type Candidate struct {
	Width         int
	WorstFraction float64
	Fails         []string `json:",omitempty"`
}

// CostRow is one record's cost table.
type CostRow struct {
	Record    string    // the record's .md path
	ClassicMS float64   // classic's ms per token (its cycle)
	Widths    []int     // ascending
	MS        []float64 // ms per cycle at Widths[i]
}

// RecordPath is the repository path of a record's .md.
func RecordPath(r *record.Record) string {
	return path.Join("docs/benchmark_results", r.Name+".md")
}

// CostTable is a record's cost side: classic's ms per cycle and each
// measured width's (its representative arm's), widths ascending.
func CostTable(r *record.Record) CostRow {
	row := CostRow{Record: RecordPath(r)}
	var ws []int
	for i := range r.Arms {
		a := &r.Arms[i]
		if a.Kind == KindClassic {
			if a.Status == record.StatusOK {
				row.ClassicMS = a.Cost.MSPerCycle
			}
			continue
		}
		if w := effWidth(a); a.Status == record.StatusOK && !slices.Contains(ws, w) {
			ws = append(ws, w)
		}
	}
	slices.Sort(ws)
	for _, w := range ws {
		if a := r.Representative(w); a != nil && a.Cost.MSPerCycle > 0 {
			row.Widths = append(row.Widths, w)
			row.MS = append(row.MS, a.Cost.MSPerCycle)
		}
	}
	return row
}

// Choose picks one width for a key from records of different model pairs.
// A policy entry is keyed on (engine, drafter, capability, quant), which
// fixes the cost side, but acceptance belongs to the pair (it moved the
// best H200 width from 6 to 4 between two pairs of one shape), so the
// entry takes the width that loses least in the worst pair: for each width
// measured OK in every record, its worst fraction of that record's best
// median; widths are ranked by it (ties: the smaller width). A width is
// eligible only if, in every record, it beats classic with disjoint ranges,
// is not the record's default, and beats the default arm with probability
// >= bootstrap.Level (and by median); and no record is simulated or
// incomplete. The first-ranked width that is eligible is chosen: when the
// top width fails, the rule falls back to the next one rather than earning
// nothing. The rule is stated in docs/policy.md.
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
		best    ranked
		def     *record.Arm
		problem string
	}
	views := make([]view, len(recs))
	var common []int
	for ri, r := range recs {
		var v view
		v.def = r.DefaultArm()
		var ws []int
		var rs []ranked
		for i := range r.Arms {
			a := &r.Arms[i]
			if a.Kind == KindClassic || a.Status != record.StatusOK || a.Stats.N < 2 {
				continue
			}
			w := effWidth(a)
			if slices.Contains(ws, w) {
				continue
			}
			ws = append(ws, w)
			rep := r.Representative(w)
			rs = append(rs, ranked{width: w, stats: rep.Stats, idx: armIndex(r, rep)})
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
		slices.Sort(ws)
		if ri == 0 {
			common = ws
		} else {
			common = slices.DeleteFunc(common, func(w int) bool { return !slices.Contains(ws, w) })
		}
		d.Records = append(d.Records, RecordPath(r))
		d.Cost = append(d.Cost, CostTable(r))
	}
	if len(common) == 0 {
		d.Why = "no width was measured OK in every record"
		return d
	}
	for _, w := range common {
		worst := -1.0
		for ri, v := range views {
			f := frac(recs[ri].Representative(w).Stats.Median, v.best.stats.Median)
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

	// fails lists every rule width w breaks, over every record.
	fails := func(w int) []string {
		var out []string
		for ri, r := range recs {
			v := views[ri]
			a := r.Representative(w)
			if !a.BeatsClassic {
				out = append(out, fmt.Sprintf("width %d does not beat classic with disjoint ranges in %s", w, recName(r)))
			}
			switch {
			case v.def == nil:
				out = append(out, recName(r)+" has no default arm to beat")
			case v.def.Status != record.StatusOK:
				out = append(out, recName(r)+"'s default arm is "+v.def.Status)
			case effWidth(v.def) == w:
				out = append(out, fmt.Sprintf("width %d is the default in %s: an entry would change nothing", w, recName(r)))
			default:
				if a.Stats.Median <= v.def.Stats.Median {
					out = append(out, fmt.Sprintf("width %d does not beat the default's median in %s", w, recName(r)))
				}
				c, ok := bootstrap.CompareArms(a, v.def, "default")
				switch {
				case !ok:
					out = append(out, fmt.Sprintf("width %d cannot be compared with the default in %s: the record keeps no raw runs for both", w, recName(r)))
				case c.PBetter < bootstrap.Level:
					out = append(out, fmt.Sprintf("width %d beats the default in %s with probability %.3f, below %.2f (ratio %.3f, 95%% interval %.3f-%.3f)",
						w, recName(r), c.PBetter, bootstrap.Level, c.Ratio, c.Lo, c.Hi))
				}
			}
			if v.problem != "" {
				out = append(out, recName(r)+" is "+v.problem)
			}
		}
		return out
	}
	chosen := -1
	for i, w := range order {
		c := Candidate{Width: w, WorstFraction: d.WorstFraction[w], Fails: fails(w)}
		d.Ranked = append(d.Ranked, c)
		if chosen < 0 && len(c.Fails) == 0 {
			chosen = i
		}
	}
	d.Width = order[0]
	if chosen >= 0 {
		d.Width = order[chosen]
	}
	// The runner-up: the best-ranked other width that passes too, else
	// the best-ranked other width (the one nearest to earning it).
	for _, pass := range []bool{true, false} {
		for _, c := range d.Ranked {
			if c.Width != d.Width && (!pass || len(c.Fails) == 0) {
				d.RunnerUp = c.Width
				break
			}
		}
		if d.RunnerUp != 0 {
			break
		}
	}

	for ri, r := range recs {
		v := views[ri]
		a := r.Representative(d.Width)
		line := fmt.Sprintf("%s: best width %d at %.1f tok/s; width %d at %.1f = %.2f of best, %s classic",
			recName(r), v.best.width, v.best.stats.Median, d.Width, a.Stats.Median, frac(a.Stats.Median, v.best.stats.Median), a.RangeVsClassic)
		switch {
		case v.def == nil:
			line += "; no default arm"
		case v.def.Status != record.StatusOK:
			line += "; default arm " + v.def.Status
		case effWidth(v.def) == d.Width:
			line += fmt.Sprintf("; the default is width %d already", d.Width)
		default:
			line += fmt.Sprintf("; default (width %d) %.1f", effWidth(v.def), v.def.Stats.Median)
			if c, ok := bootstrap.CompareArms(a, v.def, "default"); ok {
				line += fmt.Sprintf(", width %d/default %.3f (95%% interval %.3f-%.3f, P(better) %.3f)", d.Width, c.Ratio, c.Lo, c.Hi, c.PBetter)
			}
		}
		if v.best.width != d.Width {
			line += fmt.Sprintf("; this record's own best (width %d) differs from the cross-pair choice (width %d)", v.best.width, d.Width)
		}
		if v.problem != "" {
			line += "; record " + v.problem
		}
		d.PerRecord = append(d.PerRecord, line)
	}
	why := fmt.Sprintf("width %d keeps at least %.2f of each record's best median over %d record(s)", d.Width, d.WorstFraction[d.Width], len(recs))
	if d.RunnerUp > 0 {
		why += fmt.Sprintf("; runner-up width %d keeps %.2f", d.RunnerUp, d.WorstFraction[d.RunnerUp])
	}
	if chosen < 0 {
		d.Why = why + "; not eligible: " + strings.Join(d.Ranked[0].Fails, "; ")
		if len(d.Ranked) > 1 {
			d.Why += fmt.Sprintf("; no other width passes either (%d ranked)", len(d.Ranked))
		}
		return d
	}
	if chosen > 0 {
		var skipped []string
		for _, c := range d.Ranked[:chosen] {
			skipped = append(skipped, fmt.Sprintf("width %d (worst fraction %.2f) fails: %s", c.Width, c.WorstFraction, strings.Join(c.Fails, "; ")))
		}
		why += "; fell back past " + strings.Join(skipped, "; ")
	}
	d.Eligible = true
	d.Why = why + fmt.Sprintf("; it beats classic with disjoint ranges and the engine's default with probability >= %.2f in every record", bootstrap.Level)
	return d
}

// EntryFor renders the [[entry]] a cross-pair decision earns: the key and
// pin of the first record, every record it rests on, and their cost tables.
func EntryFor(recs []*record.Record, d Decision) string {
	var b strings.Builder
	r := recs[0]
	fmt.Fprintf(&b, "[[entry]]\n")
	fmt.Fprintf(&b, "id = %q\n", EntryID(r))
	fmt.Fprintf(&b, "engine = %q\n", r.Key.Engine)
	fmt.Fprintf(&b, "drafter = %q\n", r.Key.Drafter)
	fmt.Fprintf(&b, "capability = %q\n", r.Key.Capability)
	fmt.Fprintf(&b, "quant = %q\n", r.Key.Quant)
	fmt.Fprintf(&b, "width = %d\n", d.Width)
	if d.RunnerUp > 0 {
		fmt.Fprintf(&b, "runner_up = %d\n", d.RunnerUp)
	}
	fmt.Fprintf(&b, "pin = %q\n", r.Engine.Pin)
	fmt.Fprintf(&b, "records = [\n")
	for _, p := range d.Records {
		fmt.Fprintf(&b, "  %q,\n", p)
	}
	fmt.Fprintf(&b, "]\n")
	writeCost(&b, d.Cost)
	return b.String()
}

// writeCost renders cost rows as the entry's cost key, one inline table per
// record, figures to two decimals (policy check allows that rounding).
func writeCost(b *strings.Builder, rows []CostRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "cost = [\n")
	for _, row := range rows {
		ws := make([]string, len(row.Widths))
		ms := make([]string, len(row.MS))
		for i := range row.Widths {
			ws[i] = fmt.Sprint(row.Widths[i])
			ms[i] = ms2(row.MS[i])
		}
		fmt.Fprintf(b, "  { record = %q, classic_ms = %s, widths = [%s], ms_per_cycle = [%s] },\n",
			row.Record, ms2(row.ClassicMS), strings.Join(ws, ", "), strings.Join(ms, ", "))
	}
	fmt.Fprintf(b, "]\n")
}

// ms2 writes a TOML float with two decimals.
func ms2(x float64) string {
	return fmt.Sprintf("%.2f", math.Round(x*100)/100)
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
