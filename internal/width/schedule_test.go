package width

import (
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

func schedulePolicy(t *testing.T) *policy.Policy {
	t.Helper()
	f, err := policy.Parse("s.toml", []byte(`schema = 1
[[entry]]
id = "h200-q4_0-draft"
engine = "llama.cpp"
drafter = "draft"
capability = "9.0"
quant = "q4_0"
schedule = [[1, 1, 6], [2, 3, 4], [4, 0, 1]]
pin = "llama.cpp d32676d"
record = "docs/benchmark_results/y.md"
`))
	if err != nil {
		t.Fatal(err)
	}
	return policy.Merge(f)
}

// The resolver answers a schedule with a source per bucket; Width is the
// bucket at the load asked about, and a width-1 bucket is speculation off
// there without losing where the schedule came from.
func TestResolveSchedule(t *testing.T) {
	pol := schedulePolicy(t)
	op, _ := schedule.Parse("1-2:5,3+:2", "flag")
	base := Input{Engine: key.LlamaCpp, HasDrafter: true, Drafter: key.Draft, Capability: h200, Quant: key.QuantQ4_0, Policy: pol}
	cases := []struct {
		name    string
		mod     func(*Input)
		load    int
		width   int
		source  SourceKind
		sched   string
		bucketS string
	}{
		{"entry at one request", nil, 1, 6, Measured, "1:6,2-3:4,4+:1", "measured"},
		{"entry at idle plans for one", nil, 0, 6, Measured, "1:6,2-3:4,4+:1", "measured"},
		{"entry at three", nil, 3, 4, Measured, "1:6,2-3:4,4+:1", "measured"},
		{"entry off at four", nil, 4, 0, Off, "1:6,2-3:4,4+:1", "measured"},
		{"operator schedule beats the entry", func(in *Input) { in.OverrideSchedule = op }, 3, 2, Override, "1-2:5,3+:2", "override"},
		{"operator width is one bucket", func(in *Input) { in.Override = 3 }, 8, 3, Override, "1+:3", "override"},
		{"checkpoint is one bucket", func(in *Input) { in.Declared = 7; in.DeclaredReason = "declared" }, 4, 7, DrafterCheckpoint, "1+:7", "drafter-checkpoint"},
		{"kind default is one bucket", func(in *Input) { in.Quant = key.QuantQ8_0 }, 4, 4, KindDefault, "1+:4", "kind-default"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := base
			in.Load = c.load
			if c.mod != nil {
				c.mod(&in)
			}
			r := Resolve(in)
			if r.Width != c.width || r.Source != c.source || r.Schedule.String() != c.sched || r.Schedule[0].Source != c.bucketS {
				t.Fatalf("got width %d source %s schedule %s (%s), want %d %s %s %s", r.Width, r.Source, r.Schedule, r.Reason, c.width, c.source, c.sched, c.bucketS)
			}
			if r.Source == Off && (r.OnSource != Measured || r.Entry == nil) {
				t.Errorf("off bucket lost its source: %+v", r)
			}
			// Moving back to a speculating load restores the source.
			if back := r.AtLoad(1); back.Source == Off || back.Width < key.MinWidth {
				t.Errorf("AtLoad(1) = %+v", back)
			}
		})
	}
	if r := Resolve(Input{Engine: key.MLXCEL, Load: 4}); r.Source != Off || r.Schedule != nil {
		t.Errorf("no drafter: %+v", r)
	}
}

// A tuned entry answers its pair with buckets sourced "tuned"; the
// resolution's source is measured, or simulated where tune ran on the sim
// (policy.Entry.Simulated): resolve showed "source measured" for an entry
// whose note said it was never a measurement.
func TestResolveTunedEntry(t *testing.T) {
	pair := func(pin string) policy.Pair {
		return policy.Pair{Target: strings.Repeat("a", 64), Draft: strings.Repeat("b", 64), Pin: pin}
	}
	for _, tc := range []struct {
		name   string
		engine key.Engine
		pin    string
		source SourceKind
		reason string
	}{
		{"tuned on llama.cpp", key.LlamaCpp, "llama.cpp d32676d", Measured, "tuned on this pair 2026-12-05"},
		{"tuned on the sim", key.Sim, policy.SimPin, Simulated, "tuned on this pair 2026-12-05 on the sim: simulated, never a measurement"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := KeyFor(tc.engine, key.DFlash, h200, key.QuantQ8_0)
			s, _ := schedule.FromTriples([][]int{{1, 3, 16}, {4, 0, 1}}, TunedBucket)
			e := policy.Entry{ID: "tuned-x", Key: k, Width: 16, Schedule: s, Pin: tc.pin, Record: "records/x.md", Tuned: "2026-12-05", Pair: pair(tc.pin)}
			r := Resolve(Input{Engine: tc.engine, HasDrafter: true, Drafter: key.DFlash, Capability: h200, Quant: key.QuantQ8_0,
				Policy: &policy.Policy{Entries: []policy.Entry{e}}, Pair: pair(tc.pin)})
			if r.Source != tc.source || r.Reason != tc.reason || r.Width != 16 || r.Schedule[0].Source != TunedBucket || !r.FromEntry() {
				t.Errorf("source %s (%s), width %d, bucket source %s, from an entry %v; want %s (%s), 16, %s, true",
					r.Source, r.Reason, r.Width, r.Schedule[0].Source, r.FromEntry(), tc.source, tc.reason, TunedBucket)
			}
		})
	}
}

// An off bucket's reason says its load with the count's own number: "at
// 1 concurrent requests" was the headline of a schedule off at one.
func TestAtLoadOffReasonCountsRequests(t *testing.T) {
	for _, c := range []struct {
		sched string
		load  int
		want  string
	}{
		{"1:1,2+:4", 1, "the schedule is off at 1 request in flight (operator schedule)"},
		{"1:4,2-3:1,4+:4", 2, "the schedule is off at 2-3 requests in flight (operator schedule)"},
		{"1:4,2+:1", 9, "the schedule is off at 2+ requests in flight (operator schedule)"},
	} {
		s, err := schedule.Parse(c.sched, "override")
		if err != nil {
			t.Fatal(err)
		}
		r := Resolution{Source: Override, Reason: "operator schedule", Schedule: s}.AtLoad(c.load)
		if r.Source != Off || r.Reason != c.want {
			t.Errorf("%s at %d: %s %q, want off %q", c.sched, c.load, r.Source, r.Reason, c.want)
		}
	}
}
