package bench

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/record"
)

// pairRec builds an analysed-looking record: classic's range, a default
// arm, and width arms given as median (range ±4%), each with five measured
// runs spread over that range round by round, so that the bootstrap has raw
// runs to resample.
type armSpec struct {
	width   int
	median  float64
	status  string // "" = ok
	deflt   bool
	overlap bool // range reaches into classic's
}

func pairRec(name string, classic float64, arms ...armSpec) *record.Record {
	rec := &record.Record{Name: name, Complete: true,
		Key: record.Key{Engine: "llama.cpp", Drafter: "draft", Capability: "9.0", Quant: "q4_0"}}
	c := record.Stats{N: 10, Min: classic * 0.95, Median: classic, Max: classic * 1.03, Mean: classic}
	rec.Arms = append(rec.Arms, record.Arm{Label: "classic", Kind: KindClassic, Status: record.StatusOK, Stats: c})
	for _, a := range arms {
		s := record.Stats{N: 5, Min: a.median * 0.96, Median: a.median, Max: a.median * 1.04, Mean: a.median}
		if a.overlap {
			s.Min = c.Max - 1
		}
		arm := record.Arm{Label: fmt.Sprintf("width %d", a.width), Kind: KindWidth, Width: a.width, Status: record.StatusOK, Stats: s}
		for r, f := range []float64{0.96, 0.98, 1, 1.02, 1.04} {
			v := a.median * f
			if r == 0 {
				v = s.Min
			}
			arm.Runs = append(arm.Runs, record.Run{Round: r + 1, Phase: PhaseMeasured, TokPerS: v})
		}
		if a.deflt {
			arm.Kind, arm.Label = KindDefault, fmt.Sprintf("default = %d", a.width)
		}
		if a.status != "" {
			arm.Status = a.status
		}
		arm.RangeVsClassic = evidence.CompareRange(s, c)
		arm.BeatsClassic = arm.Status == record.StatusOK && evidence.BeatsClassic(s, c)
		rec.Arms = append(rec.Arms, arm)
	}
	return rec
}

func TestChoose(t *testing.T) {
	// Two pairs of one key: the first peaks at 7, the second at 5 (the
	// acceptance side moved the best width, as on the H200).
	pairA := func() *record.Record {
		return pairRec("pair-a", 397, armSpec{width: 4, median: 545, deflt: true}, armSpec{width: 4, median: 548},
			armSpec{width: 5, median: 660}, armSpec{width: 6, median: 632}, armSpec{width: 7, median: 676}, armSpec{width: 8, median: 651})
	}
	pairB := func() *record.Record {
		return pairRec("pair-b", 402, armSpec{width: 4, median: 522, deflt: true}, armSpec{width: 4, median: 520},
			armSpec{width: 5, median: 674}, armSpec{width: 6, median: 648}, armSpec{width: 7, median: 621}, armSpec{width: 8, median: 573})
	}
	for _, tc := range []struct {
		name       string
		recs       []*record.Record
		width, ru  int
		eligible   bool
		why        string // substring
		worst      map[int]float64
		perRecords int
	}{
		{name: "two pairs", recs: []*record.Record{pairA(), pairB()}, width: 5, ru: 6, eligible: true,
			why:   "width 5 keeps at least 0.98",
			worst: map[int]float64{4: 520.0 / 674, 5: 660.0 / 676, 6: 632.0 / 676, 7: 621.0 / 674, 8: 573.0 / 674}, perRecords: 2},
		{name: "one record: its best", recs: []*record.Record{pairA()}, width: 7, ru: 5, eligible: true, why: "width 7 keeps at least 1.00", perRecords: 1},
		{name: "simulated record", recs: []*record.Record{pairA(), func() *record.Record { r := pairB(); r.Simulated = true; return r }()},
			width: 5, ru: 6, why: "pair-b: the record is simulated", perRecords: 2},
		{name: "incomplete record", recs: []*record.Record{func() *record.Record { r := pairA(); r.Complete = false; return r }(), pairB()},
			width: 5, ru: 6, why: "pair-a: the record is incomplete", perRecords: 2},
		{name: "overlaps classic in one record",
			recs: []*record.Record{pairA(), pairRec("pair-c", 402, armSpec{width: 4, median: 420, deflt: true},
				armSpec{width: 5, median: 431, overlap: true}, armSpec{width: 7, median: 400, overlap: true})},
			width: 5, ru: 7, why: `pair-c: width 5 (arm "width 5") does not beat classic with disjoint ranges`, perRecords: 2},
		{name: "chosen width is the default",
			recs: []*record.Record{pairRec("d1", 100, armSpec{width: 4, median: 150, deflt: true}, armSpec{width: 6, median: 140}),
				pairRec("d2", 100, armSpec{width: 4, median: 160, deflt: true}, armSpec{width: 6, median: 130})},
			width: 4, ru: 6, why: "d1: width 4 is the default arm's width: an entry would change nothing", perRecords: 2},
		{name: "does not beat the default",
			recs: []*record.Record{pairRec("e1", 100, armSpec{width: 3, median: 150, deflt: true}, armSpec{width: 4, median: 149}, armSpec{width: 6, median: 140}),
				pairRec("e2", 100, armSpec{width: 3, median: 150, deflt: true}, armSpec{width: 4, median: 160}, armSpec{width: 6, median: 130})},
			width: 4, ru: 3, why: "e1: width 4 does not beat the default's median", perRecords: 2},
		{name: "no default arm", recs: []*record.Record{pairRec("f1", 100, armSpec{width: 4, median: 150})},
			width: 4, why: "f1: the record has no default arm that measured", perRecords: 1},
		{name: "not a measurement leaves the common set",
			recs: []*record.Record{pairA(), pairRec("g", 402, armSpec{width: 4, median: 522, deflt: true},
				armSpec{width: 5, median: 900, status: record.StatusNotMeasurement}, armSpec{width: 6, median: 648}, armSpec{width: 7, median: 621})},
			width: 7, ru: 6, eligible: true, why: "width 7 keeps at least 0.96", perRecords: 2},
		{name: "tie goes to the smaller width",
			recs:  []*record.Record{pairRec("t", 100, armSpec{width: 3, median: 120, deflt: true}, armSpec{width: 5, median: 150}, armSpec{width: 6, median: 150})},
			width: 5, ru: 6, eligible: true, perRecords: 1},
		{name: "different keys", recs: []*record.Record{pairA(), func() *record.Record { r := pairB(); r.Key.Quant = "q8_0"; return r }()},
			why: "records measure different keys"},
		{name: "no common width", recs: []*record.Record{pairRec("h1", 100, armSpec{width: 3, median: 150}), pairRec("h2", 100, armSpec{width: 5, median: 150})},
			why: "no width was measured OK in every record"},
		{name: "nothing measured", recs: []*record.Record{pairRec("i", 100, armSpec{width: 3, median: 150, status: record.StatusFailed})},
			why: "i has no width measured OK"},
		{name: "nothing measured, interrupted", recs: []*record.Record{func() *record.Record {
			r := pairRec("j", 100, armSpec{width: 3, median: 150, status: record.StatusFailed})
			r.Complete = false
			return r
		}()}, why: "j has no width measured OK: the record is incomplete (the bench was interrupted)"},
		{name: "nothing measured, simulated and interrupted", recs: []*record.Record{pairA(), func() *record.Record {
			r := pairRec("k", 100, armSpec{width: 3, median: 150, status: record.StatusFailed})
			r.Complete, r.Simulated = false, true
			return r
		}()}, why: "k has no width measured OK: the record is simulated: a record from the sim engine never backs an entry; measure on a real engine and GPU; the record is incomplete (the bench was interrupted)"},
		{name: "no records", why: "no records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mustChoose(t, tc.recs)
			if d.Width != tc.width || d.RunnerUp != tc.ru || d.Eligible != tc.eligible {
				t.Errorf("width %d runner-up %d eligible %v; want %d %d %v (why: %s)", d.Width, d.RunnerUp, d.Eligible, tc.width, tc.ru, tc.eligible, d.Why)
			}
			if !strings.Contains(d.Why, tc.why) {
				t.Errorf("why %q lacks %q", d.Why, tc.why)
			}
			for w, f := range tc.worst {
				if math.Abs(d.WorstFraction[w]-f) > 1e-9 {
					t.Errorf("worst fraction of width %d = %.4f, want %.4f", w, d.WorstFraction[w], f)
				}
			}
			if len(d.PerRecord) != tc.perRecords {
				t.Errorf("per-record lines %q", d.PerRecord)
			}
		})
	}
}

// When the top-ranked width fails a rule, the rule falls back to the next
// one that passes instead of earning nothing. Here width 7 keeps the most
// of each pair's best but does not beat the default in pair-x.
func TestChooseFallsBack(t *testing.T) {
	x := pairRec("pair-x", 400, armSpec{width: 4, median: 650, deflt: true}, armSpec{width: 5, median: 700}, armSpec{width: 7, median: 640})
	y := pairRec("pair-y", 400, armSpec{width: 4, median: 600, deflt: true}, armSpec{width: 5, median: 650}, armSpec{width: 7, median: 800})
	d := mustChoose(t, []*record.Record{x, y})
	if !d.Eligible || d.Width != 5 || d.RunnerUp != 7 {
		t.Fatalf("width %d runner-up %d eligible %v: %s", d.Width, d.RunnerUp, d.Eligible, d.Why)
	}
	if len(d.Ranked) < 2 || d.Ranked[0].Width != 7 || len(d.Ranked[0].Fails) == 0 || len(d.Ranked[1].Fails) != 0 {
		t.Errorf("ranked %+v", d.Ranked)
	}
	if !strings.Contains(d.Why, "fell back past width 7") || !strings.Contains(d.Why, "pair-x: width 7 does not beat the default's median") {
		t.Errorf("why %s", d.Why)
	}
	if !strings.Contains(d.PerRecord[1], "this record's own best (width 7) differs from the cross-pair choice (width 5)") {
		t.Errorf("per record %q", d.PerRecord)
	}
}

// A width whose median beats the default's but not surely enough: the
// bootstrap rule (probability >= 0.95) refuses it.
func TestChooseNeedsProbabilityOverDefault(t *testing.T) {
	rec := pairRec("noisy", 100, armSpec{width: 4, median: 150, deflt: true}, armSpec{width: 6, median: 151})
	for i, v := range []float64{152, 139, 158, 146, 151} {
		rec.Arms[2].Runs[i].TokPerS = v
	}
	for i, v := range []float64{150, 140, 160, 145, 155} {
		rec.Arms[1].Runs[i].TokPerS = v
	}
	d := mustChoose(t, []*record.Record{rec})
	if d.Eligible || !strings.Contains(d.Why, "noisy: width 6 beats the default (width 4) with probability") {
		t.Errorf("eligible %v: %s", d.Eligible, d.Why)
	}
}

func TestEntryForListsRecordsAndCost(t *testing.T) {
	x := pairRec("pair-x", 400, armSpec{width: 4, median: 650, deflt: true}, armSpec{width: 5, median: 700})
	y := pairRec("pair-y", 400, armSpec{width: 4, median: 600, deflt: true}, armSpec{width: 5, median: 650})
	for _, r := range []*record.Record{x, y} {
		r.Engine.Pin = "llama.cpp d32676d"
		for i := range r.Arms {
			r.Arms[i].Cost.MSPerCycle = 3 + float64(r.Arms[i].Width)/3
		}
	}
	d := mustChoose(t, []*record.Record{x, y})
	got := EntryFor([]*record.Record{x, y}, d)
	for _, want := range []string{
		"width = 5\n", `pin = "llama.cpp d32676d"`,
		"records = [\n  \"docs/benchmark_results/pair-x.md\",\n  \"docs/benchmark_results/pair-y.md\",\n]\n",
		`{ record = "docs/benchmark_results/pair-y.md", classic_ms = 3.00, widths = [4, 5], ms_per_cycle = [4.33, 4.67] }`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("entry lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\nrecord = ") {
		t.Errorf("a cross-pair entry names one record:\n%s", got)
	}
}

func mustChoose(t *testing.T, recs []*record.Record) Decision {
	t.Helper()
	d, err := Choose(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
