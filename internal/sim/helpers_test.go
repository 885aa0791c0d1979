package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"github.com/speclaunch/speclaunch/internal/testenv"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock advances only when slept on, so timings are exact and tests fast.
// late is how far each sleep overshoots, as a host's timers do.
type fakeClock struct {
	mu   sync.Mutex
	now  time.Time
	late time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_800_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.now = c.now.Add(d + c.late)
	}
	return nil
}

// syncBuffer is a stderr the test can read while the server writes.
type syncBuffer = testenv.Buffer

// running is a sim started by startSim.
type running struct {
	base   string
	stderr *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

// testConfig is a quick sim: fake clock, no warm-up, loopback, free port.
func testConfig(draft string, width int) Config {
	cfg, err := ParseArgs([]string{"-m", "/models/qwen3.5-4b-4bit", "--host", "127.0.0.1", "--port", "0", "--sim-warmup", "0s"})
	if err != nil {
		panic(err)
	}
	if draft != "" {
		cfg.DraftModel, cfg.DraftKind, cfg.BlockSize = draft, "dflash", width
	}
	cfg.Clock = newFakeClock()
	return cfg
}

// startSim runs cfg and waits until it is ready (or fails the test).
func startSim(t *testing.T, cfg Config) *running {
	t.Helper()
	ready := make(chan string, 1)
	cfg.onReady = func(addr string) { ready <- addr }
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{stderr: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- Run(ctx, cfg, io.Discard, r.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run returned %v on clean shutdown", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	select {
	case addr := <-ready:
		r.base = "http://" + addr
	case err := <-r.done:
		t.Fatalf("Run ended before ready: %v\n%s", err, r.stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("sim not ready\n%s", r.stderr.String())
	}
	return r
}

func (r *running) post(t *testing.T, path, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(r.base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func (r *running) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(r.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// sseData splits an SSE body into its data payloads, as a bench client would.
func sseData(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("non-data SSE line %q", line)
		}
		out = append(out, data)
	}
	return out
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("bad JSON %q: %v", s, err)
	}
}

// freePort finds a port nobody listens on (testenv.Port).
func freePort(t *testing.T) int {
	t.Helper()
	return testenv.Port(t)
}

// benchTimings is the part of a final event a bench client reads.
type benchTimings struct {
	PromptN            int      `json:"prompt_n"`
	PredictedN         int      `json:"predicted_n"`
	PredictedMS        float64  `json:"predicted_ms"`
	PredictedPerSecond float64  `json:"predicted_per_second"`
	DraftN             *int     `json:"draft_n"`
	DraftNAccepted     *int     `json:"draft_n_accepted"`
	DraftRounds        *int     `json:"draft_rounds"`
	DraftKind          *string  `json:"draft_kind"`
	PromptMS           *float64 `json:"prompt_ms"`
}
