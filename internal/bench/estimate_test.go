package bench

import (
	"os"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/record"
)

// A load sweep's estimate comes within 10 % of the wall time of sweeps that
// ran: the committed tune records (their plan from method.load, their wall
// from method.wall_s) and the new-operator campaign's two tunes of
// profiles/demo-load.toml on the sim. Leaving out each engine's start and
// stop (engineCost), it said "about 10s" for a tune that took 16 s and
// "about 2m6s" for one that took 2m29s. The estimate is a pure function of
// the plan; nothing here is timed.
func TestEstimateMatchesSweepsThatRan(t *testing.T) {
	type sweep struct {
		name          string
		arms, engines int
		levels        []int
		warm, window  time.Duration
		windows       int
		wall          time.Duration
	}
	sweeps := []sweep{
		// tune --levels 1,4 --widths 8 --engines 2 --window 200ms
		{"campaign, --window 200ms", 3, 2, []int{1, 4}, 200 * time.Millisecond, 200 * time.Millisecond, 3, 16 * time.Second},
		// tune --levels 1,4: tune's sim windows (tuneSimWindow in internal/cli/tune.go)
		{"campaign, sim defaults", 7, 3, []int{1, 4}, time.Second, time.Second, 2, 2*time.Minute + 29*time.Second},
	}
	for _, path := range []string{
		"../../docs/benchmark_results/tuned-mlxcel-5cea7275-180583d4-20261205-083609.json",
		"../../docs/benchmark_results/tuned-llama.cpp-e622b8f9-86de037f-20261205-135033.json",
	} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := record.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		l := rec.Method.Load
		sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
		sweeps = append(sweeps, sweep{path, len(rec.Levels[0].Arms), l.Engines, l.Levels, sec(l.WarmS), sec(l.WindowS), l.Windows, sec(rec.Method.WallS)})
	}
	for _, s := range sweeps {
		o := LoadOptions{Arms: make([]ArmSpec, s.arms), Levels: s.levels, Engines: s.engines, Warm: s.warm, Window: s.window, Windows: s.windows}
		got := o.Estimate()
		if off := float64(got-s.wall) / float64(s.wall); off < -0.10 || off > 0.10 {
			t.Errorf("%s: estimate %v, took %v (%+.0f %%)", s.name, got.Round(100*time.Millisecond), s.wall.Round(100*time.Millisecond), 100*off)
		}
	}
}
