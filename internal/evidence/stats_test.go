package evidence

import (
	"slices"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/record"
)

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want record.Stats
	}{
		{nil, record.Stats{}},
		{[]float64{5}, record.Stats{N: 1, Min: 5, Median: 5, Max: 5, Mean: 5}},
		{[]float64{3, 1}, record.Stats{N: 2, Min: 1, Median: 2, Max: 3, Mean: 2}},
		{[]float64{9, 1, 5}, record.Stats{N: 3, Min: 1, Median: 5, Max: 9, Mean: 5}},
		{[]float64{4, 1, 3, 8}, record.Stats{N: 4, Min: 1, Median: 3.5, Max: 8, Mean: 4}},
	} {
		if got := Describe(tc.in); got != tc.want {
			t.Errorf("Describe(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
		if got, want := Median(tc.in), tc.want.Median; got != want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, want)
		}
	}
}

func st3(min, med, max float64) record.Stats {
	return record.Stats{N: 3, Min: min, Median: med, Max: max, Mean: med}
}

func TestCompareRange(t *testing.T) {
	classic := st3(100, 105, 110)
	for _, tc := range []struct {
		arm   record.Stats
		want  string
		beats bool
	}{
		{st3(111, 120, 130), RangeFaster, true},
		{st3(110, 120, 130), RangeOverlaps, false}, // touching is not disjoint
		{st3(90, 120, 130), RangeOverlaps, false},
		{st3(101, 104, 109), RangeOverlaps, false},
		{st3(80, 90, 99.9), RangeSlower, false},
		{record.Stats{N: 1, Min: 200, Median: 200, Max: 200}, RangeFaster, false}, // n = 1 never beats
	} {
		if got := CompareRange(tc.arm, classic); got != tc.want {
			t.Errorf("CompareRange(%+v) = %q, want %q", tc.arm, got, tc.want)
		}
		if got := BeatsClassic(tc.arm, classic); got != tc.beats {
			t.Errorf("BeatsClassic(%+v) = %v, want %v", tc.arm, got, tc.beats)
		}
	}
}

func TestDrift(t *testing.T) {
	mk := func(first, last []float64) *record.Arm {
		a := &record.Arm{Kind: record.KindClassic}
		for i, x := range first {
			a.Runs = append(a.Runs, record.Run{Round: i + 1, Phase: record.PhaseMeasured, Bracket: record.BracketFirst, TokPerS: x})
		}
		for i, x := range last {
			a.Runs = append(a.Runs, record.Run{Round: i + 1, Phase: record.PhaseMeasured, Bracket: record.BracketLast, TokPerS: x})
		}
		return a
	}
	d := Drift(mk([]float64{100, 102, 101}, []float64{101, 99, 100}))
	if !d.Overlap || d.Verdict != "classic brackets overlap: no drift detected" {
		t.Errorf("%+v", d)
	}
	d = Drift(mk([]float64{100, 102, 101}, []float64{90, 91, 92}))
	if d.Overlap || d.Verdict != "the run drifted (classic first 100.0–102.0 vs last 90.0–92.0): treat every middle arm as suspect" {
		t.Errorf("%+v", d)
	}
	d = Drift(mk([]float64{100}, []float64{90, 91}))
	if d.Overlap || !strings.Contains(d.Verdict, "not checked") {
		t.Errorf("%+v", d)
	}
}

// Classic's ranges a hair apart (a noiseless sim gives point ranges) are
// no drift; the ~3% seen on real hardware is.
func TestDriftOverlapTolerance(t *testing.T) {
	pt := func(v float64) record.Stats { return record.Stats{N: 2, Min: v, Median: v, Max: v} }
	for _, c := range []struct {
		a, b record.Stats
		want bool
	}{
		{pt(59.5), pt(59.4), true},  // 0.17% apart
		{pt(100), pt(100.6), false}, // 0.6% apart
		{pt(300), pt(309), false},   // 3%
		{record.Stats{N: 3, Min: 98, Median: 100, Max: 102}, record.Stats{N: 3, Min: 101, Median: 103, Max: 105}, true},
	} {
		if got := DriftOverlap(c.a, c.b); got != c.want {
			t.Errorf("%+v vs %+v: overlap %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// Widths rank by median, ties to the smaller width (docs/policy.md); only
// measured arms with a range (n >= 2) rank.
func TestRanked(t *testing.T) {
	rec := &record.Record{Arms: []record.Arm{
		{Kind: record.KindClassic, Status: record.StatusOK, Stats: st3(50, 55, 60)},
		{Kind: record.KindWidth, Width: 6, Status: record.StatusOK, Stats: st3(90, 100, 110)},
		{Kind: record.KindWidth, Width: 5, Status: record.StatusOK, Stats: st3(95, 100, 105)},
		{Kind: record.KindWidth, Width: 3, Status: record.StatusOK, Stats: st3(90, 100, 120)},
		{Kind: record.KindWidth, Width: 4, Status: record.StatusOK, Stats: st3(80, 101, 102)},
		{Kind: record.KindWidth, Width: 7, Status: record.StatusNotMeasurement, Stats: st3(200, 200, 200)},
		{Kind: record.KindWidth, Width: 8, Status: record.StatusOK, Stats: record.Stats{N: 1, Min: 300, Median: 300, Max: 300}},
	}}
	var got []int
	for _, a := range Of(rec).Ranked() {
		got = append(got, a.RanWidth())
	}
	if want := []int{4, 3, 5, 6}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}
