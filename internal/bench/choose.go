package bench

import (
	"context"
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/record"
)

// Decision is the cross-pair choice for one key (evidence.Choose) with
// what the entry it earns carries.
type Decision struct {
	evidence.Decision
	// Records are the records' .md paths, for the entry's records list.
	Records []string `json:"records,omitempty"`
	// Cost is each record's cost side: ms per draft+verify cycle by width,
	// and classic's, for the entry's cost table.
	Cost []CostRow `json:"cost,omitempty"`
}

// CostRow is one record's cost table.
//
// Its JSON keys are the policy entry's (docs/policy.md, `cost`).
type CostRow struct {
	Record    string    `json:"record"`       // the record's .md path
	ClassicMS float64   `json:"classic_ms"`   // classic's ms per token (its cycle)
	Widths    []int     `json:"widths"`       // ascending
	MS        []float64 `json:"ms_per_cycle"` // ms per cycle at Widths[i]
}

// RecordPath is the repository path of a record's .md.
func RecordPath(r *record.Record) string {
	return path.Join("docs/benchmark_results", r.Name+".md")
}

// CostTable is a record's cost side: classic's ms per cycle and each
// measured width's (its representative arm's), widths ascending.
func CostTable(r *record.Record) CostRow {
	row := CostRow{Record: RecordPath(r)}
	if c := r.ClassicArm(); c != nil && c.Status == record.StatusOK {
		row.ClassicMS = c.Cost.MSPerCycle
	}
	reps := r.Representatives()
	ws := slices.Sorted(maps.Keys(reps))
	for _, w := range ws {
		if a := reps[w]; a.Cost.MSPerCycle > 0 {
			row.Widths = append(row.Widths, w)
			row.MS = append(row.MS, a.Cost.MSPerCycle)
		}
	}
	return row
}

// Choose applies the cross-pair rule (evidence.Choose, stated in
// docs/policy.md) to records of one key and adds the records and cost
// tables an entry lists. An error is the context's: a signal stops it.
func Choose(ctx context.Context, recs []*record.Record) (Decision, error) {
	evs := make([]*evidence.Evidence, len(recs))
	for i, r := range recs {
		evs[i] = evidence.Of(r)
	}
	d, err := evidence.Choose(ctx, evs)
	if err != nil {
		return Decision{}, err
	}
	out := Decision{Decision: d}
	if d.Width == 0 {
		return out, nil
	}
	for _, r := range recs {
		out.Records = append(out.Records, RecordPath(r))
		out.Cost = append(out.Cost, CostTable(r))
	}
	return out, nil
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
