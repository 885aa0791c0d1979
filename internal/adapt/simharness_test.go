package adapt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/sim"
)

// fakeClock advances only when the sim sleeps, so a simulated engine runs
// as fast as the CPU allows and its timings are the cost model's.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_800_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if d > 0 {
		c.mu.Lock()
		c.now = c.now.Add(d)
		c.mu.Unlock()
	}
	return ctx.Err()
}

// h200Q8 is a sim cost model from the H200 figures (llama-server d32676d,
// Q8_0 target): the probed verify ms by rows, classic 3.28 ms, and a
// drafting cost of 0.3 ms plus 0.47 ms per drafted token, which puts the
// modelled cycle within about 0.3 ms of the measured one at widths 2-9.
func h200Q8() sim.CostModel {
	c := sim.DefaultCostModel()
	c.ClassicMS = 3.28
	c.Verify = map[int]float64{1: 3.20, 2: 3.33, 3: 3.90, 4: 4.14, 5: 4.34, 6: 4.58, 7: 4.81, 8: 5.09, 9: 5.97, 17: 6.86}
	c.DraftMS, c.DraftTokenMS = 0.3, 0.47
	c.Noise = 0.01
	return c
}

// simEngine runs in-process sim engines and switches between them the way
// serve's switcher does: start the new one, then retire the old one.
type simEngine struct {
	t     testing.TB
	clock *fakeClock
	cost  sim.CostModel

	mu       sync.Mutex
	srv      *httptest.Server
	width    int
	gen      uint64
	switches []int
	switchAt []time.Time // simulated time of each switch
	tokensAt []int64     // tokens served when each switch was made
	tokens   atomic.Int64
	requests atomic.Int64
}

func newSimEngine(t testing.TB, cost sim.CostModel, width int) *simEngine {
	e := &simEngine{t: t, clock: newFakeClock(), cost: cost}
	e.start(width)
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.srv.Close()
	})
	return e
}

func (e *simEngine) start(width int) {
	cfg := sim.Config{Model: "/models/target.gguf", Cost: e.cost, Clock: e.clock, Seed: 1}
	if width >= 2 {
		cfg.DraftModel, cfg.BlockSize = "/models/draft.gguf", width
	}
	h, err := sim.NewHandler(cfg, io.Discard)
	if err != nil {
		e.t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	e.mu.Lock()
	old := e.srv
	e.srv, e.width = srv, width
	e.gen++
	e.mu.Unlock()
	if old != nil { // requests already sent, or about to be, finish on the old engine
		e.t.Cleanup(old.Close) // closed 200 ms after the switch, a request slow to leave under load failed
	}
}

func (e *simEngine) Current() Target {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Target{BaseURL: e.srv.URL, Width: e.width, Gen: e.gen}
}

func (e *simEngine) Switch(_ context.Context, width int, _ string) error {
	e.mu.Lock()
	e.switches = append(e.switches, width)
	e.switchAt = append(e.switchAt, e.clock.Now())
	e.tokensAt = append(e.tokensAt, e.tokens.Load())
	e.mu.Unlock()
	e.start(width)
	return nil
}

func (e *simEngine) Switches() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]int(nil), e.switches...)
}

// traffic sends greedy 200-token requests with prompt() until ctx ends,
// counting failed ones.
func (e *simEngine) traffic(ctx context.Context, prompt func() string, failed *atomic.Int64) {
	client := &http.Client{Timeout: 10 * time.Second}
	for i := 0; ctx.Err() == nil; i++ {
		body, _ := json.Marshal(map[string]any{"prompt": fmt.Sprintf("%s request %d", prompt(), i), "n_predict": 200, "temperature": 0})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.Current().BaseURL+"/completion", bytes.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				failed.Add(1)
			}
			continue
		}
		var out struct {
			TokensPredicted int `json:"tokens_predicted"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			if ctx.Err() == nil {
				failed.Add(1)
			}
			continue
		}
		e.tokens.Add(int64(out.TokensPredicted))
		e.requests.Add(1)
	}
}

// oracle is the width the sim's own model says is best for prompt, over
// 1..maxWidth, and each width's modelled rate.
func oracle(c sim.CostModel, prompt string, maxWidth int) (best int, rate func(int) float64) {
	rate = func(w int) float64 {
		if w < 2 {
			return 1000 / c.ClassicMS
		}
		return c.ExpectedRateFor(prompt, w)
	}
	best = 1
	for w := 2; w <= maxWidth; w++ {
		if rate(w) > rate(best) {
			best = w
		}
	}
	return best, rate
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testCfg is a fast loop: short scrapes and windows, so a test runs in
// well under a second of wall time.
func testCfg() Config {
	return Config{Interval: 2 * time.Millisecond, Window: 20 * time.Millisecond, ReexploreEvery: 50 * time.Millisecond, ProbeReps: 3}
}

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return cond()
}
