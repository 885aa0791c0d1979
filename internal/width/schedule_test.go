package width

import (
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
