package adapt

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The H200 of 2026-12-02: 4 sequences, a curve of rows 1..17 only, and
// the rows of concurrent decoding cannot be probed (the under-load probe
// fails for good, or the curve was given in the config). The loop explores
// at 8, cannot price 32 rows, and goes back to its home width 4 at once,
// not staying at 8; it says so in the status note and logs it at warn
// once. When the load drops to one sequence, it decides again.
func TestLoopNoCostGoesHome(t *testing.T) {
	for _, c := range []struct {
		name, why string
		config    bool
	}{
		{"probe fails", "probe 20 rows (sample 1): the probe's prefix was not reused", false},
		{"config curve", "the curve was given in the config", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newModelEngine(t, 4, 4, func(k int) float64 { return math.Pow(0.8, float64(k)) })
			m.probeFail = func(rows int) bool { return rows > 17 }
			cfg := testCfg()
			cfg.Window, cfg.ReexploreEvery = time.Hour, 10*time.Hour // the return home is not held by the window
			if c.config {
				cfg.Curve = oneSequenceCurve()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var mu sync.Mutex
			var logs bytes.Buffer
			r := startLoop(ctx, LoopDeps{Current: m.Current, Switch: m.Switch, Cfg: cfg, Now: newFakeClock().Now,
				Log: slog.New(slog.NewTextHandler(&syncWriter{w: &logs, mu: &mu}, nil))})
			note := "not adapting at concurrency 4: the verify cost of 32 rows could not be probed (" + c.why
			if !waitFor(5*time.Second, func() bool {
				s := r.status()
				return strings.Contains(s.Note, note) && s.Width == 4 && s.Decision != nil && s.Decision.Running == 4 && !s.Decision.NoCost
			}) {
				t.Fatalf("no return home with the note; switches %v; last %+v", switchedOf(m), r.status())
			}
			r.waitDecisions(t, 20) // many more epochs at 4 sequences
			s := r.status()
			sw := switchedOf(m)
			t.Logf("switches %v; note %q; %s", sw, s.Note, s.Decision)
			if len(sw) < 2 || sw[0] != 8 || sw[1] != 4 || slices.Contains(sw[2:], 8) {
				t.Errorf("switches %v, want 8 then back to 4, never 8 again", sw)
			}
			if !strings.HasSuffix(s.Note, fmt.Sprintf("; serving width %d", s.Width)) || s.Width > 4 {
				t.Errorf("width %d, note %q", s.Width, s.Note)
			}
			mu.Lock()
			if n := strings.Count(logs.String(), "level=WARN msg=\"adapt: not adapting at concurrency 4"); n != 1 {
				t.Errorf("the note logged at warn %d times, want once", n)
			}
			if !strings.Contains(logs.String(), "back from exploration width 8 to width 4: no cost for the running width 8 at 4 sequences") {
				t.Errorf("no switch reason for the return home in the log")
			}
			mu.Unlock()
			// One sequence: the curve covers it; decisions resume and the note goes.
			m.setN(1)
			if !waitFor(5*time.Second, func() bool {
				s := r.status()
				return s.Note == "" && s.Concurrency == 1 && s.Decision != nil && s.Decision.N == 1 && !s.Decision.NoCost
			}) {
				t.Errorf("one sequence: no decision, or the note stayed; last %+v", r.status())
			}
			cancel()
			if err := <-r.done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Not exploring (the engine started at the exploration width, so it was
// chosen, not observed), the loop cannot judge width 8 at 4 sequences and
// keeps it, saying so in the note, logged at warn once however many
// epochs pass; every decision carries NoCost, so nobody takes it as
// settled.
func TestLoopNoCostStaysAndSaysSo(t *testing.T) {
	m := newModelEngine(t, 4, 8, func(k int) float64 { return math.Pow(0.8, float64(k)) })
	cfg := testCfg()
	cfg.Curve = oneSequenceCurve()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var logs bytes.Buffer
	r := startLoop(ctx, LoopDeps{Current: m.Current, Switch: m.Switch, Cfg: cfg,
		Log: slog.New(slog.NewTextHandler(&syncWriter{w: &logs, mu: &mu}, nil))})
	if !waitFor(5*time.Second, func() bool { d := r.status().Decision; return d != nil && d.NoCost }) {
		t.Fatalf("no NoCost decision; last %+v", r.status())
	}
	r.waitDecisions(t, 20) // many more epochs
	s := r.status()
	if want := "not adapting at concurrency 4: the verify cost of 32 rows could not be probed (the curve was given in the config; the loop does not probe it); serving width 8"; s.Note != want {
		t.Errorf("note %q, want %q", s.Note, want)
	}
	if settled(s) || s.Decision.Switch || len(switchedOf(m)) != 0 {
		t.Errorf("switches %v; decision %+v", switchedOf(m), s.Decision)
	}
	// Read the log under the lock, and release it before waiting for the
	// loop: it logs under the same lock, so holding it across <-r.done
	// deadlocks the test (CI once hung here for 10 minutes).
	mu.Lock()
	text := logs.String()
	mu.Unlock()
	decisions := strings.Count(text, "no cost for the running width 8")
	if n := strings.Count(text, "level=WARN msg=\"adapt: not adapting at concurrency 4"); n != 1 || decisions < 5 {
		t.Errorf("the note logged at warn %d times over %d decisions, want once", n, decisions)
	}
	cancel()
	if err := <-r.done; err != nil {
		t.Fatal(err)
	}
}

// oneSequenceCurve is the model engine's verify cost for rows 1..17 only:
// no rows of concurrent decoding.
func oneSequenceCurve() *Curve {
	c := Curve{VerifyMS: map[int]float64{}}
	for w := 1; w <= DefaultMaxWidth; w++ {
		c.VerifyMS[w] = verify(w)
	}
	return &c
}
