package control

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/schedule"
)

func mustParse(t *testing.T, text string) schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse(text, "tuned")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wide is a schedule of schedule.MaxBuckets one-load buckets from 3 on.
func wide() string {
	parts := []string{"1-2:6"}
	for n := 3; n < 2+schedule.MaxBuckets-1; n++ {
		parts = append(parts, fmt.Sprintf("%d:%d", n, 2+n%5))
	}
	return strings.Join(parts, ",") + fmt.Sprintf(",%d+:1", 2+schedule.MaxBuckets-1)
}

// TestBucketsFor: before anything is learnt, the learnt schedule is the
// starting one at every load, and the fixed buckets remain where the
// starting schedule has no edge.
func TestBucketsFor(t *testing.T) {
	cases := []struct {
		name, def string
		want      string // the learnt schedule's ranges
	}{
		{"flat: the fixed buckets", "1+:4", "1 2-4 5-8 9+"},
		{"tuned 1-3:6,4+:1: split at 4", "1-3:6,4+:1", "1 2-3 4 5-8 9+"},
		{"the follow demo 1:6,2-3:4,4+:1", "1:6,2-3:4,4+:1", "1 2-3 4 5-8 9+"},
		{"edges past the fixed ones", "1-11:6,12-31:2,32+:1", "1 2-4 5-8 9-11 12-31 32+"},
		{"64 buckets: its own edges, no more", wide(), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			def := mustParse(t, tc.def)
			c := New(Config{Default: def})
			s := c.Init(Pair{})
			var got []string
			for _, b := range s.Pair.Schedule {
				got = append(got, b.Range())
			}
			if tc.want != "" && strings.Join(got, " ") != tc.want {
				t.Errorf("buckets %v, want %s", got, tc.want)
			}
			if len(got) > schedule.MaxBuckets {
				t.Errorf("%d buckets, above %d", len(got), schedule.MaxBuckets)
			}
			if err := s.Pair.Schedule.Validate(); err != nil {
				t.Errorf("the learnt schedule %s: %v", s.Pair.Schedule, err)
			}
			for n := 1; n <= 200; n++ {
				if g, w := s.Pair.Schedule.At(n).Width, def.At(n).Width; g != w {
					t.Fatalf("at %d requests in flight the learnt schedule %s runs width %d, the starting %s runs %d", n, s.Pair.Schedule, g, def, w)
				}
			}
		})
	}
}

// TestFit: a state saved under the fixed buckets, read under a tuned
// starting schedule whose edge splits 2-4: kept where the ranges agree,
// 2-4's measurements given to the bucket holding their mean load, the
// rest learnt again, said in one note; never a panic on odd ranges.
func TestFit(t *testing.T) {
	flat := New(Config{Default: schedule.Flat(4, "engine default")})
	saved := func(n float64) Pair {
		p := flat.Init(Pair{}).Pair
		for i := range p.Buckets {
			p.Buckets[i].N, p.Buckets[i].NSamples = float64(p.Buckets[i].Lo), 10
			p.Buckets[i].Runs[4] = []Run{{Engine: uint64(i + 1), Tokens: 100, Secs: 1}}
		}
		p.Buckets[1].N = n
		p.Schedule[0].Width, p.Schedule[0].Source = 8, "measured"
		p.Schedule[2].Width, p.Schedule[2].Source = 2, "measured"
		p.Regimes = []Regime{{At: t0, Runs: []map[int][]Run{{}, {6: {{Engine: 9}}}, {}, {}}}}
		return p
	}
	c := New(Config{Default: mustParse(t, "1-3:6,4+:1")})
	cases := []struct {
		name     string
		in       Pair
		widths   string // the schedule's widths by bucket
		runsAt   int    // the bucket given 2-4's runs, -1 none
		note     []string
		regimeAt int
	}{
		{"mean load 3.2: 2-4's runs for 2-3", saved(3.2), "8 6 1 2 1", 1, []string{"(1, 2-4, 5-8, 9+)", "(1, 2-3, 4, 5-8, 9+", "kept: 1, 5-8, 9+", "measurements taken: 2-4's for 2-3 (its mean load 3.2)", "learnt again: 4"}, 1},
		{"mean load 3.8: 2-4's runs for 4", saved(3.8), "8 6 1 2 1", 2, []string{"2-4's for 4", "learnt again: 2-3"}, 2},
		{"nothing saved: no note", Pair{}, "6 6 1 1 1", -1, nil, -1},
		{"odd saved ranges: learnt again", Pair{Buckets: []Bucket{{Lo: 7, Hi: 2, N: 5, NSamples: 1}, {Lo: -3, Hi: -1, N: 2, NSamples: 1}}}, "6 6 1 1 1", -1, []string{"learnt again: 1, 2-3, 4, 5-8, 9+"}, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, note := c.Fit(tc.in)
			var ws []string
			for _, b := range p.Schedule {
				ws = append(ws, fmt.Sprint(b.Width))
			}
			if strings.Join(ws, " ") != tc.widths {
				t.Errorf("schedule %s, want widths %s", p.Schedule, tc.widths)
			}
			for i, b := range p.Buckets {
				if has := len(b.Runs[4]) > 0 && b.Runs[4][0].Engine == 2; has != (i == tc.runsAt) {
					t.Errorf("bucket %s holds 2-4's runs: %v", fmt.Sprint(b.Lo, "-", b.Hi), has)
				}
			}
			for _, w := range tc.note {
				if !strings.Contains(note, w) {
					t.Errorf("note %q lacks %q", note, w)
				}
			}
			if tc.note == nil && note != "" {
				t.Errorf("note %q, want none", note)
			}
			if tc.regimeAt >= 0 && (len(p.Regimes) != 1 || len(p.Regimes[0].Runs[tc.regimeAt][6]) != 1) {
				t.Errorf("regimes %+v: width 6's kept run not at bucket %d", p.Regimes, tc.regimeAt)
			}
			if again, note2 := c.Fit(p); note2 != "" || !reflect.DeepEqual(again, p) {
				t.Errorf("a fitted pair fitted again: %q", note2)
			}
			s := c.Init(tc.in) // and the controller runs on it
			s, _ = c.Step(s, Observation{Kind: Sample, Now: t0.Add(time.Second), Width: 6, InFlight: 4})
			_ = s.Status(t0)
		})
	}
}

// TestFitNewDefault: the same buckets under another default: what was
// decided stays, what was never decided takes the new default, no note.
func TestFitNewDefault(t *testing.T) {
	p := New(Config{Default: schedule.Flat(4, "engine default")}).Init(Pair{}).Pair
	p.Schedule[0].Width, p.Schedule[0].Source = 8, "measured"
	got, note := New(Config{Default: schedule.Flat(6, "engine default")}).Fit(p)
	if got.Schedule.String() != "1:8,2-4:6,5-8:6,9+:6" || note != "" {
		t.Errorf("schedule %s, note %q; want 1:8,2-4:6,5-8:6,9+:6 and none", got.Schedule, note)
	}
}
