package sim

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/loadgen"
	"github.com/speclaunch/speclaunch/internal/simcost"
)

// BenchmarkDemoLoadSweep sweeps the demo pairing (profiles/demo-load.toml,
// simcost.DemoLoad) through the HTTP sim on the real clock at one and four
// out-of-step clients (128-token requests, a fresh engine per width), and
// logs each width's tokens/s beside the cost model's RateAt. It takes
// about two minutes of wall time; DEMO_LOAD_WINDOW shortens or lengthens
// each width's window (default 5s).
//
//	go test ./internal/sim -run X -bench DemoLoadSweep -benchtime 1x
func BenchmarkDemoLoadSweep(b *testing.B) {
	window := 5 * time.Second
	if v := os.Getenv("DEMO_LOAD_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("DEMO_LOAD_WINDOW=%q: %v", v, err)
		}
		window = d
	}
	widths := []int{1, 2, 3, 4, 5, 6, 7, 8, 12, 16}
	for b.Loop() {
		var out strings.Builder
		for _, n := range []int{1, 4} {
			best, bestRate := 0, 0.0
			for _, w := range widths {
				r := demoLoadRate(b, w, n, window)
				if r > bestRate {
					best, bestRate = w, r
				}
				fmt.Fprintf(&out, "clients %d width %2d: %6.1f tok/s (model %6.1f)\n", n, w, r, simcost.DemoLoad().RateAt(w, n, 128))
			}
			fmt.Fprintf(&out, "clients %d: best width %d (%.1f tok/s)\n", n, best, bestRate)
			b.ReportMetric(float64(best), fmt.Sprintf("best-width-c%d", n))
		}
		b.Log("\n" + out.String())
	}
}

// demoLoadRate is the tokens/s n clients get from a fresh demo-load engine
// at width w over window, after a warm-up of a second.
func demoLoadRate(b *testing.B, w, n int, window time.Duration) float64 {
	cfg := Config{Model: "demo-target", Cost: simcost.DemoLoad(), Slots: 4, Seed: int64(w), EngineSeed: uint64(100*n + w)}
	if w >= 2 {
		cfg.DraftModel, cfg.BlockSize = "demo-drafter", w
	}
	h, err := NewHandler(cfg, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	live := &loadgen.Live{}
	stop := make(chan struct{})
	done := make(chan loadgen.Result, 1)
	go func() {
		res, err := loadgen.Run(context.Background(), loadgen.Options{URL: srv.URL, Clients: n, MaxTokens: 128, Stream: true, Stop: stop, Live: live, Duration: time.Hour,
			Prompts: []string{"def parse(line):", "The river ran", "func main() {", "Once upon a time"}, Params: map[string]any{"temperature": 0}})
		if err != nil {
			b.Error(err)
		}
		done <- res
	}()
	time.Sleep(time.Second)
	t0, k0 := time.Now(), live.Tokens.Load()
	time.Sleep(window)
	rate := float64(live.Tokens.Load()-k0) / time.Since(t0).Seconds()
	close(stop)
	if res := <-done; res.Bad() > 0 {
		b.Errorf("width %d, %d clients: %s", w, n, res)
	}
	return rate
}
