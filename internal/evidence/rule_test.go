package evidence

import (
	"context"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/record"
)

func st(n int, min, max float64) record.Stats {
	return record.Stats{N: n, Min: min, Median: (min + max) / 2, Max: max, Mean: (min + max) / 2}
}

// The margin's boundary: the arm's min must be strictly above classic's
// max, with at least MinRuns runs on each side.
func TestBeatsClassicBoundary(t *testing.T) {
	classic := st(6, 57.98, 58.71)
	for _, tc := range []struct {
		name    string
		arm     record.Stats
		classic record.Stats
		want    bool
		why     string
	}{
		{"clear", st(3, 68.04, 68.29), classic, true, ""},
		{"min equal to classic's max", st(3, 58.71, 60), classic, false, "its min 58.71 is not above classic's max 58.71"},
		{"min a hair above", st(3, 58.710001, 60), classic, true, ""},
		{"min a hair below", st(3, 58.709999, 60), classic, false, "is not above"},
		{"n at the floor", st(MinRuns, 60, 61), classic, true, ""},
		{"n below the floor", st(MinRuns-1, 60, 61), classic, false, "n = 2; the floor is 3 runs"},
		{"classic below the floor", st(3, 60, 61), st(MinRuns-1, 57, 58), false, "classic has n = 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := BeatsClassic(tc.arm, tc.classic); got != tc.want {
				t.Errorf("BeatsClassic = %v, want %v", got, tc.want)
			}
			if got := classicShortfall(tc.arm, tc.classic); (got == "") != tc.want || !strings.Contains(got, tc.why) {
				t.Errorf("shortfall %q, want %q", got, tc.why)
			}
		})
	}
}

// The margin over the default: P(better) >= Level passes, a hair below
// does not.
func TestSureOverDefaultBoundary(t *testing.T) {
	for _, tc := range []struct {
		p    float64
		want bool
	}{{1, true}, {Level, true}, {3800.0 / 4000, true}, {3799.0 / 4000, false}, {0.93775, false}, {0, false}} {
		if got := SureOverDefault(&record.Comparison{PBetter: tc.p}); got != tc.want {
			t.Errorf("P %.5f: %v, want %v", tc.p, got, tc.want)
		}
	}
}

// judgeRecord: classic 100-103 over 6 runs, the default at width 4 and
// widths 5 and 6, each with five rounds of raw runs.
func judgeRecord(w5, w6, def []float64) *record.Record {
	rec := &record.Record{Name: "r", Complete: true, Method: record.Method{Bootstrap: Method()},
		Key: record.Key{Engine: "llama.cpp", Drafter: "draft", Capability: "9.0", Quant: "q8_0"}}
	arm := func(label, kind string, w int, xs []float64) record.Arm {
		a := record.Arm{Label: label, Kind: kind, Width: w, Status: record.StatusOK}
		for i, x := range xs {
			a.Runs = append(a.Runs, record.Run{Round: i + 1, Phase: record.PhaseMeasured, TokPerS: x})
		}
		a.Stats = Describe(Rates(&a))
		return a
	}
	rec.Arms = []record.Arm{
		arm("classic", record.KindClassic, 0, []float64{100, 101, 102, 103, 101, 100}),
		arm("default = 4", record.KindDefault, 4, def),
		arm("width 5", record.KindWidth, 5, w5),
		arm("width 6", record.KindWidth, 6, w6),
	}
	return rec
}

func TestJudge(t *testing.T) {
	def := []float64{120, 121, 122, 121, 120}
	sure := []float64{130, 131, 132, 131, 130}
	for _, tc := range []struct {
		name  string
		rec   *record.Record
		w     int
		rules []string // the rules that fail, in order
		msg   string
	}{
		{"passes", judgeRecord(sure, sure, def), 5, nil, ""},
		{"not measured", judgeRecord(sure, sure, def), 7, []string{RuleMeasured}, "width 7 has no measured arm in the record (measured widths: 4, 5, 6)"},
		{"overlaps classic", judgeRecord([]float64{103, 131, 132, 131, 130}, sure, def), 5, []string{RuleClassic, RuleDefault}, "its min 103.00 is not above classic's max 103.00"},
		{"is the default", judgeRecord(sure, sure, def), 4, []string{RuleDefault}, "width 4 is the default arm's width"},
		{"below the default's median", judgeRecord([]float64{110, 111, 112, 111, 110}, sure, def), 5, []string{RuleDefault, RuleDefault}, "width 5 does not beat the default's median (111.00 against 121.00 for width 4)"},
		{"not sure over the default", judgeRecord([]float64{125, 118, 126, 119, 123}, sure, def), 5, []string{RuleDefault}, "width 5 beats the default (width 4) with probability"},
		{"simulated", func() *record.Record { r := judgeRecord(sure, sure, def); r.Simulated = true; return r }(), 5, []string{RuleRecord}, "the record is simulated"},
		{"no raw runs", func() *record.Record {
			r := judgeRecord(sure, sure, def)
			for i := range r.Arms {
				r.Arms[i].Runs = nil
			}
			return r
		}(), 5, []string{RuleDefault}, "cannot be compared with the default (width 4) by the bootstrap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := Of(tc.rec).Judge(context.Background(), tc.w)
			if err != nil {
				t.Fatal(err)
			}
			var rules []string
			for _, f := range j.Fails {
				rules = append(rules, f.Rule)
			}
			if strings.Join(rules, ",") != strings.Join(tc.rules, ",") || !strings.Contains(strings.Join(j.Messages(), "\n"), tc.msg) {
				t.Errorf("fails %q, want rules %q and %q", j.Messages(), tc.rules, tc.msg)
			}
		})
	}
}

// Stored figures that disagree with the raw runs are named by arm and
// field; figures that agree say nothing.
func TestDisagreements(t *testing.T) {
	rec := judgeRecord([]float64{130, 131, 132, 131, 130}, []float64{125, 126, 127, 126, 125}, []float64{120, 121, 122, 121, 120})
	ev := Of(rec)
	for i := range rec.Arms {
		rec.Arms[i].BeatsClassic = rec.Arms[i].Kind != record.KindClassic && ev.BeatsClassic(&ev.Arms[i])
	}
	rec.Drift = Drift(rec.ClassicArm())
	if d := Of(rec).Disagreements(); len(d) != 0 {
		t.Fatalf("a consistent record: %q", d)
	}
	rec.Arms[2].Runs[0].TokPerS = 90 // a run edited under its stats
	d := Of(rec).Disagreements()
	if len(d) != 2 || !strings.Contains(d[0], `arm "width 5": stored stats.min 130 (recomputed 90), stats.mean 130.8 (recomputed 122.8)`) ||
		!strings.Contains(d[1], `arm "width 5": stored beats_classic true disagrees`) {
		t.Errorf("disagreements %q", d)
	}
}
