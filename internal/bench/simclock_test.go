package bench

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/record"
	"github.com/speclaunch/speclaunch/internal/sim"
)

// simClock is a virtual clock shared by the sim engines and the bench's
// client: it moves only when the sim sleeps, so a rate measured is the
// sim's cost model's whatever the load on the machine.
type simClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *simClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *simClock) Sleep(ctx context.Context, d time.Duration) error {
	if d > 0 {
		c.mu.Lock()
		c.t = c.t.Add(d)
		c.mu.Unlock()
	}
	return ctx.Err()
}

// simServer is the sim engine in-process, as a Server.
type simServer struct {
	ts    *httptest.Server
	width int
}

func (s *simServer) BaseURL() string     { return s.ts.URL }
func (s *simServer) ModelID() string     { return "" }
func (s *simServer) EngineWidth() int    { return s.width }
func (s *simServer) Declined() bool      { return false }
func (s *simServer) Diagnostics() []Diag { return nil }
func (s *simServer) Tail() []string      { return nil }
func (s *simServer) Stop() error         { s.ts.Close(); return nil }

// simStarter starts each arm as an in-process sim on clk with the sim's
// default (GB10) cost model, its noise included, each request drift
// (sim.Config.Drift) slower than the one before.
func simStarter(clk sim.Clock, drift float64) Starter {
	return func(ctx context.Context, arm ArmSpec, port int) (Server, error) {
		cfg := sim.Config{Model: "/models/target", Cost: sim.DefaultCostModel(), Clock: clk, Seed: 7, Drift: drift}
		if arm.Width >= 2 {
			cfg.DraftModel, cfg.BlockSize = "/models/drafter", arm.Width
		}
		h, err := sim.NewHandler(cfg, io.Discard)
		if err != nil {
			return nil, err
		}
		return &simServer{ts: httptest.NewServer(h), width: arm.Width}, nil
	}
}

// On the sim's GB10 cost model width 3 beats classic (~1.2x) and width 16
// loses (~0.72x): the bench ranks them so when it measures the sim on
// virtual time (the end-to-end tier runs bench on the live sim, and
// judges what the record keeps, not the speed).
func TestRunOnSimRanksByCostModel(t *testing.T) {
	clk := onSimClock(t)
	arms := []ArmSpec{
		{Label: "classic", Kind: KindClassic},
		{Label: "default = 16", Kind: KindDefault, Width: 16},
		{Label: "policy = 4", Kind: KindPolicy, Width: 4},
		{Label: "width 3", Kind: KindWidth, Width: 3},
	}
	o := Options{Arms: arms, Rounds: 3, Warmup: 1, MaxTokens: 60, RequestTimeout: 10 * time.Second, Schedule: ScheduleResident}
	rec := newRecord()
	if err := Run(context.Background(), o, simStarter(clk, 0), rec); err != nil {
		t.Fatal(err)
	}
	classic, w16, w4, w3 := &rec.Arms[0], &rec.Arms[1], &rec.Arms[2], &rec.Arms[3]
	for _, a := range rec.Arms {
		if a.Status != record.StatusOK {
			t.Fatalf("%s: %s (%s)", a.Label, a.Status, a.StatusReason)
		}
	}
	if !(w3.Stats.Median > classic.Stats.Median && classic.Stats.Median > w16.Stats.Median) {
		t.Errorf("medians: width 3 %.1f, classic %.1f, width 16 %.1f", w3.Stats.Median, classic.Stats.Median, w16.Stats.Median)
	}
	if !w3.BeatsClassic || !w4.BeatsClassic || w16.BeatsClassic {
		t.Errorf("beats classic: width 3 %v, width 4 %v, width 16 %v", w3.BeatsClassic, w4.BeatsClassic, w16.BeatsClassic)
	}
	if rec.Verdict.Best != 3 && rec.Verdict.Best != 4 {
		t.Errorf("best %d (want 3, or the policy's 4 within noise)", rec.Verdict.Best)
	}
	// The sim's cost model is what was measured: classic's rate is its
	// 58.2 tok/s (sim.TestDefaultCostModelOrdering) within the noise.
	if m := classic.Stats.Median; m < 55 || m > 61.5 {
		t.Errorf("classic median %.1f tok/s, want the cost model's 58.2 within its noise", m)
	}
}

// onSimClock is a virtual clock installed as the client's for the test.
func onSimClock(t *testing.T) *simClock {
	clk := &simClock{t: time.Unix(1_800_000_000, 0)}
	prev := now
	now = clk.Now
	t.Cleanup(func() { now = prev })
	return clk
}

// The sim's injected drift (--sim-drift 0.15: each request 15 % slower
// than the one before) is caught by the bench's drift check, judged on
// virtual time (on the live sim the harness's own noise under load hid it).
func TestRunOnSimDetectsInjectedDrift(t *testing.T) {
	for _, tc := range []struct {
		drift float64
		found bool
	}{{0, false}, {0.15, true}} {
		t.Run(fmt.Sprint("drift ", tc.drift), func(t *testing.T) {
			clk := onSimClock(t)
			arms := []ArmSpec{{Label: "classic", Kind: KindClassic}, {Label: "width 3", Kind: KindWidth, Width: 3}}
			o := Options{Arms: arms, Rounds: 3, Warmup: 1, MaxTokens: 24, RequestTimeout: 10 * time.Second, Schedule: ScheduleResident}
			rec := newRecord()
			if err := Run(context.Background(), o, simStarter(clk, tc.drift), rec); err != nil {
				t.Fatal(err)
			}
			if found := !rec.Drift.Overlap; found != tc.found {
				t.Errorf("drift found %v, want %v: %s", found, tc.found, rec.Drift.Verdict)
			}
		})
	}
}
