package bench

import (
	"errors"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/record"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want record.Stats
		err  bool
	}{
		{nil, record.Stats{}, true},
		{[]float64{5}, record.Stats{N: 1, Min: 5, Median: 5, Max: 5, Mean: 5}, true},
		{[]float64{3, 1}, record.Stats{N: 2, Min: 1, Median: 2, Max: 3, Mean: 2}, false},
		{[]float64{9, 1, 5}, record.Stats{N: 3, Min: 1, Median: 5, Max: 9, Mean: 5}, false},
		{[]float64{4, 1, 3, 8}, record.Stats{N: 4, Min: 1, Median: 3.5, Max: 8, Mean: 4}, false},
	} {
		got, err := Summarize(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("Summarize(%v) = %+v, %v; want %+v, err %v", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && !errors.Is(err, ErrTooFewSamples) {
			t.Errorf("error %v is not ErrTooFewSamples", err)
		}
	}
}

func st(min, med, max float64) record.Stats {
	return record.Stats{N: 3, Min: min, Median: med, Max: max, Mean: med}
}

func TestCompareRange(t *testing.T) {
	classic := st(100, 105, 110)
	for _, tc := range []struct {
		arm   record.Stats
		want  string
		beats bool
	}{
		{st(111, 120, 130), RangeFaster, true},
		{st(110, 120, 130), RangeOverlaps, false}, // touching is not disjoint
		{st(90, 120, 130), RangeOverlaps, false},
		{st(101, 104, 109), RangeOverlaps, false},
		{st(80, 90, 99.9), RangeSlower, false},
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

func TestPairedDelta(t *testing.T) {
	if d, ok := PairedDelta(110, []float64{100, 100}); !ok || d < 0.0999 || d > 0.1001 {
		t.Errorf("got %v %v", d, ok)
	}
	if d, ok := PairedDelta(90, []float64{95, 105}); !ok || d > -0.0999 || d < -0.1001 {
		t.Errorf("got %v %v", d, ok)
	}
	if _, ok := PairedDelta(90, nil); ok {
		t.Error("a round without classic paired")
	}
}

func TestRankingTies(t *testing.T) {
	rs := []ranked{
		{width: 6, stats: st(90, 100, 110)},
		{width: 5, stats: st(95, 100, 105)}, // same median, higher min: first
		{width: 3, stats: st(90, 100, 120)}, // same median and min as 6, smaller width
		{width: 4, stats: st(80, 101, 102)},
	}
	sortRanked(rs)
	var got []int
	for _, r := range rs {
		got = append(got, r.width)
	}
	if want := []int{4, 5, 3, 6}; !equalInts(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDrift(t *testing.T) {
	mk := func(first, last []float64) *record.Arm {
		a := &record.Arm{Kind: KindClassic}
		for i, x := range first {
			a.Runs = append(a.Runs, record.Run{Round: i + 1, Phase: PhaseMeasured, Bracket: BracketFirst, TokPerS: x})
		}
		for i, x := range last {
			a.Runs = append(a.Runs, record.Run{Round: i + 1, Phase: PhaseMeasured, Bracket: BracketLast, TokPerS: x})
		}
		return a
	}
	d := drift(mk([]float64{100, 102, 101}, []float64{101, 99, 100}))
	if !d.Overlap || d.Verdict != "classic brackets overlap: no drift detected" {
		t.Errorf("%+v", d)
	}
	d = drift(mk([]float64{100, 102, 101}, []float64{90, 91, 92}))
	if d.Overlap || d.Verdict != "the run drifted (classic first 100.0–102.0 vs last 90.0–92.0): treat every middle arm as suspect" {
		t.Errorf("%+v", d)
	}
	d = drift(mk([]float64{100}, []float64{90, 91}))
	if d.Overlap || !strings.Contains(d.Verdict, "not checked") {
		t.Errorf("%+v", d)
	}
}

func TestEntryID(t *testing.T) {
	for _, tc := range []struct{ gpu, capab, quant, drafter, want string }{
		{"NVIDIA H200", "9.0", "q4_0", "draft", "h200-q4_0-draft"},
		{"NVIDIA GB10", "12.1", "affine", "dflash", "gb10-affine-dflash"},
		{"NVIDIA GeForce RTX 4090", "8.9", "q8_0", "draft", "rtx4090-q8_0-draft"},
		{"NVIDIA A100-SXM4-80GB", "8.0", "f16", "draft", "a100-f16-draft"},
		{"", "12.1", "affine", "dflash", "sm121-affine-dflash"},
	} {
		rec := &record.Record{Host: record.Host{GPU: tc.gpu}, Key: record.Key{Capability: tc.capab, Quant: tc.quant, Drafter: tc.drafter}}
		if got := EntryID(rec); got != tc.want {
			t.Errorf("EntryID(%q) = %q, want %q", tc.gpu, got, tc.want)
		}
	}
}
