//go:build replay0312e

// The replay of 2026-12-03e drives internal/adapt's Loop, which serve no
// longer runs and main no longer has: scripts/replay-0312e.sh builds these
// tests, with -tags replay0312e, in a worktree of the loop's commit with
// the adapter of 5394f73 (loop.go) beside them.

package adaptsim

import (
	"os"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/adapt"
)

// replaySeeds is the runs per recorded cell: the outcome's SD over
// seeds is about 0.07, so the mean of 100 is within about 0.007.
const replaySeeds = 100

// BenchmarkReplay0312e runs the loop on the replay cells of the three
// adaptive runs of 2026-12-03e and reports each run's mean outcome
// against the recorded one. ADAPTSIM_REPLAY_OUT=file writes the table.
// This package's copy drives today's loop; scripts/replay-0312e.sh
// drives the loop of 5347cd0, the one that ran then.
func BenchmarkReplay0312e(b *testing.B) {
	var rs []ReplayResult
	for b.Loop() {
		var err error
		rs, err = Replay(replayDir, Recorded0312e, func(w time.Duration) Factory { return Loop(adapt.Config{Window: w}) }, replaySeeds)
		if err != nil {
			b.Fatal(err)
		}
	}
	within := 0
	for _, r := range rs {
		if r.Within(0.03) {
			within++
		}
	}
	b.ReportMetric(float64(within), "within-0.03")
	md := ReplayMarkdown(replayLoopName, rs)
	if out := os.Getenv("ADAPTSIM_REPLAY_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.Log("\n" + md)
}

// Today's loop runs in the harness: it probes, explores and decides on
// virtual time.
func TestLoopRuns(t *testing.T) {
	p := demoLoad()
	tr := Traffic{"steady, 1 client", []Phase{{Dur: PhaseDur, Clients: 1}}}
	var lines int
	out := Run(p, tr, Loop(adapt.Config{})(p), 1, Options{Horizon: 10 * time.Minute, Log: func(s string) { lines++; t.Log(s) }})
	if len(out.Switches) == 0 {
		t.Fatalf("the loop never switched in 10 virtual minutes")
	}
	t.Logf("frac %.3f, switches %v, end width %d", out.Frac(), out.Switches, out.EndWidth)
}
