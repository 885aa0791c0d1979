package policycheck

import (
	"context"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/record"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// sweepArm is an arm of one level whose three engines ran the windows
// around the given rates.
func sweepArm(kind string, w int, rates ...float64) record.Arm {
	a := record.Arm{Label: kind, Kind: kind, Width: w, Status: record.StatusOK}
	if kind == record.KindWidth {
		a.Label = "width"
	}
	for e, x := range rates {
		for _, d := range []float64{0, 0.5, -0.5} {
			a.Runs = append(a.Runs, record.Run{Round: e + 1, Phase: record.PhaseMeasured, TokPerS: x + d, WallS: 200 / (x + d), CompletionTokens: 200})
		}
	}
	a.Stats = evidence.Describe(evidence.Rates(&a))
	return a
}

// sweepRecord earns 1-3:6,4+:1: width 6 sure over the default (4) at one
// client, classic sure over it at four. Its stored figures are the rule's.
func sweepRecord(t *testing.T) record.Record {
	rec := goodRecord()
	rec.Arms, rec.Drift = nil, record.Drift{}
	rec.Method.Bootstrap = evidence.Method()
	rec.Levels = []record.Level{
		{Concurrency: 1, Arms: []record.Arm{sweepArm("classic", 0, 80, 81, 79), sweepArm("default", 4, 100, 101, 99), sweepArm("width", 6, 120, 121, 119)}},
		{Concurrency: 4, Arms: []record.Arm{sweepArm("classic", 0, 200, 201, 199), sweepArm("default", 4, 150, 151, 149), sweepArm("width", 6, 120, 121, 119)}},
	}
	sp, vs, earned, err := evidence.Earn(context.Background(), &rec)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rec.Levels {
		rec.Levels[i].Spread, rec.Levels[i].Bucket = sp[i], vs[i]
		ev := evidence.Of(rec.AtLevel(i))
		for j := range ev.Arms {
			ev.Arms[j].Arm.BeatsClassic = ev.Arms[j].Kind != record.KindClassic && ev.BeatsClassic(&ev.Arms[j])
		}
	}
	rec.Earned = earned
	return rec
}

// A schedule entry is checked bucket by bucket against its load sweep: the
// record's schedule passes; another schedule, a simulated record, or an
// edited bucket fails.
func TestCheckScheduleEntry(t *testing.T) {
	withSched := func(text string) policy.Entry {
		e := goodEntry()
		e.RunnerUp = 0
		e.Schedule, _ = schedule.Parse(text, "measured")
		e.Width = e.Schedule.At(1).Width
		return e
	}
	for _, tc := range []struct {
		name  string
		entry policy.Entry
		edit  func(*record.Record)
		want  string // "" = ok
	}{
		{"the earned schedule", withSched("1-3:6,4+:1"), nil, ""},
		{"another schedule", withSched("1-3:6,4+:4"), nil, "is not the one the record's levels earn (1-3:6,4+:1)"},
		{"a simulated record", withSched("1-3:6,4+:1"), func(r *record.Record) { r.Simulated = true }, "the record is simulated"},
		{"an edited bucket", withSched("1-3:6,4+:1"), func(r *record.Record) { r.Levels[1].Bucket.Width = 4 }, "level 4: stored bucket width 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := sweepRecord(t)
			if tc.edit != nil {
				tc.edit(&rec)
			}
			vs := check(t, &policy.Policy{Entries: []policy.Entry{tc.entry}}, repoWith(rec).read)
			got := strings.Join(vs[0].Problems, "\n")
			if (tc.want == "") != vs[0].OK || !strings.Contains(got, tc.want) {
				t.Errorf("ok %v, problems:\n%s\nwant %q", vs[0].OK, got, tc.want)
			}
		})
	}
}
