package adapt

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/sim"
)

// The probe before traffic reads the engine's slots from GET /props
// (total_slots, as llama-server and the sim answer it) and takes, besides
// rows 1..17, the rows 2..4 sequences verify together: 42 row counts, up
// to 4·17 = 68. More slots than upFrontMaxN take the same rows (larger n
// are probed under load); one slot, or no /props, only rows 1..17.
func TestUpFrontProbeRowsFromSlots(t *testing.T) {
	for _, c := range []struct {
		name  string
		slots int
		props bool
		rows  int // distinct row counts probed
		top   int // the widest
	}{
		{"4 slots", 4, true, 42, 68},
		{"8 slots", 8, true, 42, 68},
		{"1 slot", 1, true, 17, 17},
		{"no /props", 4, false, 17, 17},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := sim.NewHandler(sim.Config{Model: "/models/target.gguf", DraftModel: "/models/draft.gguf", BlockSize: 8,
				Cost: h200Q8(), Clock: newFakeClock(), Seed: 1, Slots: c.slots}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var completions int
			var mu sync.Mutex
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/props" && !c.props {
					http.NotFound(w, r)
					return
				}
				if r.URL.Path == "/completion" {
					mu.Lock()
					completions++
					mu.Unlock()
				}
				h.ServeHTTP(w, r)
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second) // bounds for -race on a loaded machine
			defer cancel()
			cur := func() Target { return Target{BaseURL: srv.URL, Width: 8, Gen: 1} }
			r := startLoop(ctx, LoopDeps{Current: cur, Switch: func(context.Context, int, string) error { return nil }, Cfg: testCfg(), Log: quietLog()})
			if !waitFor(60*time.Second, func() bool { return r.status().Curve != nil }) {
				t.Fatalf("no curve; status %+v", r.status())
			}
			cancel()
			if err := <-r.done; err != nil {
				t.Fatal(err)
			}
			rows := sortedKeys(r.status().Curve.VerifyMS)
			t.Logf("%d rows: %v", len(rows), rows)
			if len(rows) != c.rows || rows[len(rows)-1] != c.top {
				t.Errorf("probed %d rows up to %d, want %d up to %d: %v", len(rows), rows[len(rows)-1], c.rows, c.top, rows)
			}
			if c.top == 68 {
				for w := 1; w <= DefaultMaxWidth; w++ {
					for n := 1; n <= 4; n++ {
						if !slices.Contains(rows, n*w) {
							t.Errorf("%d rows (%d sequences at width %d) not probed", n*w, n, w)
						}
					}
				}
				if slices.Contains(rows, 5*17) || slices.Contains(rows, 19) {
					t.Errorf("rows past 4 sequences probed: %v", rows)
				}
			}
			// Each row count: 2 discarded and 3 kept (testCfg), plus the
			// prefix warm-up: one for rows 1..17, one for the rows of
			// concurrent decoding (a second probe) when there are any.
			mu.Lock()
			defer mu.Unlock()
			warm := 1
			if c.rows > DefaultMaxWidth {
				warm = 2
			}
			if want := c.rows*(probeGraphWarm+3) + warm; completions != want {
				t.Errorf("%d probe requests, want %d", completions, want)
			}
		})
	}
}

// With the engine's 4 slots read before traffic, the loop under 4
// sequences needs no probe under load: every probe request is sent before
// the first switch, and the loop lands within 3% of the best width for 4
// sequences together. The engine here, like the H200 of 2026-12-02, fails
// every probe of more than 17 rows once traffic runs (a live request takes
// the slot between the probe's prefix and its measured request).
func TestLoopConcurrencyProbedUpFront(t *testing.T) {
	m := newModelEngine(t, 4, 4, func(k int) float64 { return math.Pow(0.8, float64(k)) })
	m.slots = 4
	m.probeFail = func(rows int) bool { return rows > 17 && len(m.switched) > 0 } // m.mu held
	best := m.best()
	got, ok := m.settle(t, 5*time.Second, 20) // more epochs under load after the settle
	if !ok {
		t.Fatalf("no settle at 4 sequences; switches %v", switchedOf(m))
	}
	s := *got
	m.mu.Lock()
	defer m.mu.Unlock()
	t.Logf("oracle %d, adapted %d, switches %v; %s", best, s.Width, m.switched, s.Decision)
	if len(m.probes) != m.probesAt[0] {
		t.Errorf("%d probe requests after traffic started (%d before): %v", len(m.probes)-m.probesAt[0], m.probesAt[0], m.probes[m.probesAt[0]:])
	}
	if _, ok := s.Curve.VerifyMS[68]; !ok {
		t.Errorf("68 rows not in the curve: %v", sortedKeys(s.Curve.VerifyMS))
	}
	if frac := m.rate(s.Width) / m.rate(best); frac < 0.97 {
		t.Errorf("width %d at %.3f of the oracle %d", s.Width, frac, best)
	}
	if s.Note != "" {
		t.Errorf("note %q", s.Note)
	}
}

func switchedOf(m *modelEngine) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.switched)
}

// A curve cached before the rows of concurrent decoding were probed up
// front (rows 1..17) still loads. When the engine says it has 4 slots,
// the rows it lacks are probed before traffic (only those); when it does
// not say, the loop starts from the cached curve and the under-load probe
// fills the rows 4 sequences need.
func TestCachedCurveWithoutConcurrentRows(t *testing.T) {
	for _, slots := range []int{4, 0} {
		t.Run(fmt.Sprintf("slots %d", slots), func(t *testing.T) {
			dir := t.TempDir()
			key := CacheKey{Engine: "llama.cpp 0 (test)", GPU: "test", Models: []ModelFile{{Path: "/m.gguf", Size: 1}}, Slots: slots}
			old := Curve{VerifyMS: map[int]float64{}, Source: "probe"}
			for w := 1; w <= DefaultMaxWidth; w++ {
				old.VerifyMS[w] = verify(w)
			}
			if err := SaveCurve(dir, key, old, time.Now()); err != nil {
				t.Fatal(err)
			}
			m := newModelEngine(t, 4, 4, func(k int) float64 { return math.Pow(0.8, float64(k)) })
			m.slots = slots
			cfg := testCfg()
			cfg.ReexploreEvery = time.Hour
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second) // bounds for -race on a loaded machine
			defer cancel()
			var mu sync.Mutex
			var first *Status
			var last Status
			var before []int // the probe's requests when the curve was first published
			done := make(chan error, 1)
			go func() {
				done <- Run(ctx, LoopDeps{Current: m.Current, Switch: m.Switch, Cfg: cfg, Log: quietLog(), CacheDir: dir, CacheKey: key,
					Publish: func(s Status) {
						mu.Lock()
						defer mu.Unlock()
						if first == nil && s.Curve != nil {
							first = &s
							m.mu.Lock()
							before = slices.Clone(m.probes)
							m.mu.Unlock()
						}
						last = s
					}})
			}()
			has68 := func() bool {
				mu.Lock()
				defer mu.Unlock()
				return last.Curve != nil && last.Curve.VerifyMS[68] > 0
			}
			ok := waitFor(60*time.Second, has68)
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if !ok {
				t.Fatalf("68 rows never in the curve; last %+v", last)
			}
			mu.Lock()
			defer mu.Unlock()
			t.Logf("first curve from %s with %d rows; %d probe requests before traffic", first.Curve.Source, len(first.Curve.VerifyMS), len(before))
			for _, r := range before {
				if r >= 2 && r <= DefaultMaxWidth {
					t.Errorf("row %d probed again, though cached", r)
				}
			}
			_, up := first.Curve.VerifyMS[68]
			switch {
			case slots == 4 && (!up || len(before) == 0 || first.Curve.Source != "probe"):
				t.Errorf("4 slots: the cached curve's missing rows were not probed before traffic (source %s, %d requests)", first.Curve.Source, len(before))
			case slots == 0 && (up || len(before) != 0 || first.Curve.Source != "cache"):
				t.Errorf("no /props: want the cached curve as it was (source %s, 68 rows %v, %d requests)", first.Curve.Source, up, len(before))
			}
			// The curve with the new rows was cached again.
			if c, ok := LoadCurve(dir, key, nil); !ok || c.VerifyMS[68] == 0 {
				t.Errorf("cache not updated: %v", c.VerifyMS)
			}
		})
	}
}

// A curve cached by an engine of 4 slots is not the curve of one with 1
// slot of the same files (on the H200 of 2026-12-03 an -np 1 engine
// started from an -np 4 engine's cached curve): the loop probes rows
// 1..17 again before traffic and caches them under the new key, leaving
// the 4-slot file as it was.
func TestCachedCurveIsPerSlots(t *testing.T) {
	dir := t.TempDir()
	key := CacheKey{Engine: "llama.cpp 0 (test)", GPU: "test", Models: []ModelFile{{Path: "/m.gguf", Size: 1, SHA256: "aa"}}}
	four := key
	four.Slots = 4
	cached := Curve{VerifyMS: map[int]float64{}, Source: "probe"}
	for _, r := range upFrontRows(DefaultMaxWidth, 4) {
		cached.VerifyMS[r] = 2 * verify(r) // not the engine's: a reuse would show
	}
	if err := SaveCurve(dir, four, cached, time.Now()); err != nil {
		t.Fatal(err)
	}
	m := newModelEngine(t, 1, 4, func(k int) float64 { return math.Pow(0.8, float64(k)) })
	m.slots = 1
	l := New(LoopDeps{Current: m.Current, Switch: m.Switch, Cfg: testCfg(), Log: quietLog(), CacheDir: dir, CacheKey: key})
	if err := l.BeforeTraffic(context.Background(), m.Current()); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	probed := len(m.probes)
	m.mu.Unlock()
	if probed == 0 {
		t.Fatal("no probe before traffic: the 4-slot engine's cached curve was taken for a 1-slot engine")
	}
	one := key
	one.Slots = 1
	c, ok := LoadCurve(dir, one, nil)
	if !ok || !near(c.VerifyMS[4], verify(4), 1e-6) {
		t.Errorf("1-slot curve cached %v: %v", ok, c.VerifyMS)
	}
	if c, ok := LoadCurve(dir, four, nil); !ok || c.VerifyMS[4] != cached.VerifyMS[4] {
		t.Errorf("the 4-slot file changed: %v %v", ok, c.VerifyMS)
	}
}
