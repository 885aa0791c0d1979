package bench

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/record"
)

// EarnsNoEntry begins the Why of a record that cannot back an entry.
const EarnsNoEntry = "the record earns no entry: "

// ScheduleProposal is what a load sweep's record earns, recomputed from
// its raw runs: each level's bucket, the schedule, and the entry block
// when the record may back one ("" and Why otherwise).
type ScheduleProposal struct {
	Buckets []record.LevelVerdict `json:"buckets"`
	Levels  []int                 `json:"levels"`
	Earned  *record.Earned        `json:"earned"`
	Entry   string                `json:"entry"` // "" when none is earned
	Why     string                `json:"why"`
}

// ProposeSchedule applies the rule per bucket to a load sweep's record and
// renders the schedule entry it earns; the entry is parsed by the policy
// loader before it is returned, so what is printed is what loads. No entry
// is earned by a record that cannot back one (simulated, incomplete), or
// by a schedule that is the engine's default at every level (it would
// change nothing). An error is the context's, or a record that is no load
// sweep.
func ProposeSchedule(ctx context.Context, rec *record.Record) (ScheduleProposal, error) {
	var p ScheduleProposal
	if len(rec.Levels) == 0 {
		return p, errors.New("the record measured one load: propose a width with it, or sweep loads with bench --concurrency 1,2,4,8")
	}
	_, buckets, earned, err := evidence.Earn(ctx, rec)
	if err != nil {
		return p, err
	}
	p.Buckets, p.Earned = buckets, earned
	for _, l := range rec.Levels {
		p.Levels = append(p.Levels, l.Concurrency)
	}
	if fails := evidence.Of(rec).RecordFails(); len(fails) > 0 {
		p.Why = EarnsNoEntry + strings.Join(fails, "; ")
		return p, nil
	}
	allDefault := true
	for _, b := range buckets {
		allDefault = allDefault && b.From == evidence.FromDefault
	}
	if allDefault {
		p.Why = "no level beat the engine's default: an entry would change nothing"
		return p, nil
	}
	p.Entry = ScheduleEntryBlock(rec, earned.Triples)
	if _, err := policy.Parse("the proposed entry", []byte("schema = 1\n\n"+p.Entry)); err != nil {
		return ScheduleProposal{}, fmt.Errorf("the proposed entry does not load (a bug): %w", err)
	}
	p.Why = "the record earns the schedule " + earned.Text + " (" + earned.Describe + ")"
	return p, nil
}

// ScheduleEntryBlock renders a schedule entry for rec.
func ScheduleEntryBlock(rec *record.Record, triples [][]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[[entry]]\n")
	fmt.Fprintf(&b, "id = %q\n", EntryID(rec)+"-load")
	fmt.Fprintf(&b, "engine = %q\n", rec.Key.Engine)
	fmt.Fprintf(&b, "drafter = %q\n", rec.Key.Drafter)
	fmt.Fprintf(&b, "capability = %q\n", rec.Key.Capability)
	fmt.Fprintf(&b, "quant = %q\n", rec.Key.Quant)
	fmt.Fprintf(&b, "schedule = %s\n", triplesText(triples))
	fmt.Fprintf(&b, "pin = %q\n", rec.Engine.Pin)
	fmt.Fprintf(&b, "record = %q\n", path.Join("docs/benchmark_results", rec.Name+".md"))
	return b.String()
}
