package adapt

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// runLoop runs Run against e with traffic from prompt until settle says
// the loop is done or the timeout passes; it returns the last status.
func runLoop(t testing.TB, e *simEngine, cfg Config, prompt func() string, settle func(Status) bool) (Status, int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	var last Status
	var failed atomic.Int64
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, LoopDeps{Current: e.Current, Switch: e.Switch, Log: quietLog(), Cfg: cfg,
			Publish: func(s Status) { mu.Lock(); last = s; mu.Unlock() }})
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); e.traffic(ctx, prompt, &failed) }()
	ok := waitFor(15*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return settle(last) || last.State == StateNotAdapting
	})
	cancel()
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !ok {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the loop did not settle; switches %v; last status %+v", e.Switches(), last)
	}
	mu.Lock()
	defer mu.Unlock()
	return last, failed.Load()
}

// settled: a decision at the width now serving that says stay, after at
// least one epoch there.
func settled(s Status) bool {
	return s.Decision != nil && !s.Decision.Switch && s.Decision.Running == s.Width && s.Width >= 1 && s.Decision.Explore == 0 && len(s.Decision.Candidates) > 0
}

func TestLoopConvergesPerProfile(t *testing.T) {
	for _, profile := range []string{"flat", "geometric", "collapse"} {
		t.Run(profile, func(t *testing.T) {
			cost := h200Q8()
			e := newSimEngine(t, cost, 4)
			prompt := "[sim-profile:" + profile + "] def f(x):"
			best, rate := oracle(cost, prompt, DefaultMaxWidth)
			st, failed := runLoop(t, e, testCfg(), func() string { return prompt }, settled)
			if failed > 0 {
				t.Errorf("%d requests failed", failed)
			}
			frac := rate(st.Width) / rate(best)
			t.Logf("%s: oracle %d, adapted %d (%.3f of the oracle), switches %v; %s", profile, best, st.Width, frac, e.Switches(), st.Decision)
			if frac < 0.97 {
				t.Errorf("adapted to width %d at %.3f of the oracle width %d", st.Width, frac, best)
			}
		})
	}
}
