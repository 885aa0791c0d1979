package evidence

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/record"
)

// levelArm is an arm of one load level whose engine e (Round e+1) ran the
// windows perEngine[e].
func levelArm(kind string, width int, perEngine ...[]float64) record.Arm {
	a := record.Arm{Label: kind, Kind: kind, Width: width, Status: record.StatusOK}
	if kind != record.KindClassic {
		a.Label = "width " + string(rune('0'+width))
	}
	for e, ws := range perEngine {
		for _, x := range ws {
			a.Runs = append(a.Runs, record.Run{Round: e + 1, Phase: record.PhaseMeasured, TokPerS: x, Requests: 4})
		}
	}
	a.Stats = Describe(Rates(&a))
	return a
}

// engines3 is three engines of three windows each around the given rates.
func engines3(a, b, c float64) [][]float64 {
	return [][]float64{{a, a + 0.5, a - 0.5}, {b, b + 0.5, b - 0.5}, {c, c + 0.5, c - 0.5}}
}

func levelRecord(arms ...record.Arm) *record.Record {
	return &record.Record{Schema: record.Schema, Arms: arms}
}

// The rule per bucket: each case names the rule it exercises; removing that
// rule from Bucket makes its case fail.
func TestBucket(t *testing.T) {
	def := levelArm(record.KindDefault, 4, engines3(100, 101, 99)...)
	for _, tc := range []struct {
		name     string
		arms     []record.Arm
		width    int
		from     string
		whyParts []string
	}{
		{"a width sure over the default earns the bucket",
			[]record.Arm{levelArm(record.KindClassic, 0, engines3(80, 81, 79)...), def, levelArm(record.KindWidth, 6, engines3(120, 121, 119)...)},
			6, FromMeasured, []string{"width 6 beats the default (width 4)", "engines resampled"}},
		{"classic sure over the default earns width 1",
			[]record.Arm{levelArm(record.KindClassic, 0, engines3(130, 131, 129)...), def, levelArm(record.KindWidth, 6, engines3(90, 91, 89)...)},
			1, FromClassic, []string{"classic (width 1, speculation off) beats the default"}},
		{"a higher median that engines do not confirm leaves the default",
			[]record.Arm{levelArm(record.KindClassic, 0, engines3(80, 81, 79)...), def, levelArm(record.KindWidth, 6, engines3(140, 90, 104)...)},
			4, FromDefault, []string{"width 6 beats the default with probability", "its width stands"}},
		{"the next-ranked width is tried when the best is not sure",
			[]record.Arm{levelArm(record.KindClassic, 0, engines3(80, 81, 79)...), def,
				levelArm(record.KindWidth, 8, engines3(140, 90, 130)...), levelArm(record.KindWidth, 6, engines3(120, 121, 119)...)},
			6, FromMeasured, []string{"width 6 beats"}},
		{"one engine is below the floor: the spread is not measured",
			[]record.Arm{levelArm(record.KindClassic, 0, engines3(80, 81, 79)...), def, levelArm(record.KindWidth, 6, []float64{130, 131, 129})},
			4, FromDefault, []string{"width 6 ran on 1 engine(s), below the floor of 2"}},
		{"a default on one engine is below the floor",
			[]record.Arm{levelArm(record.KindClassic, 0, engines3(80, 81, 79)...), levelArm(record.KindDefault, 4, []float64{100, 101, 99}), levelArm(record.KindWidth, 6, engines3(130, 131, 129)...)},
			4, FromDefault, []string{"the default (width 4) ran on 1 engine(s)"}},
		{"a default that did not measure keeps its width",
			[]record.Arm{levelArm(record.KindClassic, 0, engines3(80, 81, 79)...), func() record.Arm { a := def; a.Status = record.StatusFailed; return a }(), levelArm(record.KindWidth, 6, engines3(130, 131, 129)...)},
			4, FromDefault, []string{"did not measure at this load"}},
		{"nothing above the default's median",
			[]record.Arm{levelArm(record.KindClassic, 0, engines3(80, 81, 79)...), def, levelArm(record.KindWidth, 6, engines3(95, 96, 94)...)},
			4, FromDefault, []string{"no width beats the default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Bucket(context.Background(), levelRecord(tc.arms...))
			if err != nil {
				t.Fatal(err)
			}
			if v.Width != tc.width || v.From != tc.from {
				t.Errorf("bucket = width %d (%s), want %d (%s); why: %s", v.Width, v.From, tc.width, tc.from, v.Why)
			}
			for _, p := range tc.whyParts {
				if !strings.Contains(v.Why, p) {
					t.Errorf("why %q lacks %q", v.Why, p)
				}
			}
		})
	}
}

func TestEarnSchedule(t *testing.T) {
	for _, tc := range []struct {
		levels, widths []int
		want           string
	}{
		{[]int{1, 4}, []int{6, 1}, "1-3:6,4+:1"},
		{[]int{1, 2, 4, 8}, []int{6, 4, 4, 1}, "1:6,2-7:4,8+:1"},
		{[]int{2, 4}, []int{5, 2}, "1-3:5,4+:2"},
		{[]int{1, 4}, []int{4, 4}, "1+:4"},
	} {
		s, err := EarnSchedule(tc.levels, tc.widths, FromMeasured)
		if err != nil || s.String() != tc.want {
			t.Errorf("EarnSchedule(%v, %v) = %s, %v; want %s", tc.levels, tc.widths, s, err, tc.want)
		}
	}
	if _, err := EarnSchedule([]int{1, 4}, []int{6}, FromMeasured); err == nil {
		t.Error("a width short: no error")
	}
}

func TestEngineSpread(t *testing.T) {
	sp := EngineSpread([]record.Arm{levelArm(record.KindDefault, 4, engines3(90, 100, 110)...), levelArm(record.KindWidth, 6, engines3(100, 100, 100)...)})
	if sp.Engines != 3 || !same(sp.MaxRel, 0.2) || !same(sp.MedianRel, 0.1) {
		t.Errorf("spread = %+v, want 3 engines, max 0.2, median 0.1", sp)
	}
	if !slices.Equal(sp.ByArm[0].Medians, []float64{90, 100, 110}) {
		t.Errorf("medians %v", sp.ByArm[0].Medians)
	}
}

// A load sweep's stored figures are recomputed from its runs: an edited
// bucket width or schedule is named.
func TestLevelDisagreements(t *testing.T) {
	mk := func() *record.Record {
		rec := &record.Record{Schema: record.Schema}
		for _, l := range []struct {
			n    int
			arms []record.Arm
		}{
			{1, []record.Arm{levelArm(record.KindClassic, 0, engines3(80, 81, 79)...), levelArm(record.KindDefault, 4, engines3(100, 101, 99)...), levelArm(record.KindWidth, 6, engines3(120, 121, 119)...)}},
			{4, []record.Arm{levelArm(record.KindClassic, 0, engines3(200, 201, 199)...), levelArm(record.KindDefault, 4, engines3(150, 151, 149)...), levelArm(record.KindWidth, 6, engines3(120, 121, 119)...)}},
		} {
			rec.Levels = append(rec.Levels, record.Level{Concurrency: l.n, Arms: l.arms})
		}
		sp, vs, earned, err := Earn(context.Background(), rec)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rec.Levels {
			rec.Levels[i].Spread, rec.Levels[i].Bucket = sp[i], vs[i]
			ev := Of(rec.AtLevel(i))
			for j := range ev.Arms {
				ev.Arms[j].Arm.BeatsClassic = ev.Arms[j].Kind != record.KindClassic && ev.BeatsClassic(&ev.Arms[j])
			}
		}
		rec.Earned = earned
		return rec
	}
	rec := mk()
	if rec.Earned.Text != "1-3:6,4+:1" {
		t.Fatalf("earned %s, want 1-3:6,4+:1", rec.Earned.Text)
	}
	if d, err := LevelDisagreements(context.Background(), rec); err != nil || len(d) != 0 {
		t.Fatalf("a fresh record disagrees: %v %v", d, err)
	}
	rec.Levels[1].Bucket.Width = 4
	rec.Earned.Triples[1][2] = 4
	d, _ := LevelDisagreements(context.Background(), rec)
	if len(d) != 2 || !strings.Contains(d[0], "level 4: stored bucket width 4") || !strings.Contains(d[1], "earned schedule") {
		t.Errorf("disagreements %q", d)
	}
	rec = mk()
	rec.Levels[0].Arms[2].Runs[0].TokPerS = 50
	if d, _ := LevelDisagreements(context.Background(), rec); len(d) == 0 || !strings.Contains(d[0], "level 1") {
		t.Errorf("an edited run: %q", d)
	}
}

// Two engines per width say something only when both agree: the record
// and the sweep's start say so; three or more, and one (refused before a
// sweep starts), say nothing.
func TestFewEngines(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{
		{1, ""},
		{2, "chance alone gives 1 time in 4"},
		{3, ""},
		{8, ""},
	} {
		got := FewEngines(tc.n)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("FewEngines(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// A sweep in which no engine measured earns no schedule (a recheck: every
// engine failed to start, and tune wrote the default's fallback as an
// entry and exited 0); one arm measured at any level is a sweep.
func TestEarnNothingMeasured(t *testing.T) {
	failed := func(kind string, w int) record.Arm {
		return record.Arm{Kind: kind, Width: w, Status: record.StatusFailed}
	}
	for _, tc := range []struct {
		name   string
		levels []record.Level
		earns  bool
	}{
		{"every arm failed", []record.Level{
			{Concurrency: 1, Arms: []record.Arm{failed(record.KindClassic, 0), failed(record.KindDefault, 4)}},
			{Concurrency: 4, Arms: []record.Arm{failed(record.KindClassic, 0), failed(record.KindDefault, 4)}}}, false},
		{"one arm measured at the last level", []record.Level{
			{Concurrency: 1, Arms: []record.Arm{failed(record.KindClassic, 0), failed(record.KindDefault, 4)}},
			{Concurrency: 4, Arms: []record.Arm{failed(record.KindClassic, 0), levelArm(record.KindDefault, 4, engines3(150, 151, 149)...)}}}, true},
	} {
		_, _, earned, err := Earn(context.Background(), &record.Record{Schema: record.Schema, Levels: tc.levels})
		if got := earned != nil; got != tc.earns || !tc.earns && !errors.Is(err, ErrNothingMeasured) {
			t.Errorf("%s: earned %v, err %v; want earned %v", tc.name, earned, err, tc.earns)
		}
	}
}
