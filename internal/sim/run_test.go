package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// Like mlxcel: nothing listens during warm-up (connection refused), then
// /health is 200.
func TestHealthRefusedUntilWarm(t *testing.T) {
	port := freePort(t)
	cfg := testConfig(dflash, 4)
	cfg.Clock = nil // real time: the warm-up must really hold the port back
	cfg.Warmup = 300 * time.Millisecond
	cfg.Port = port
	url := fmt.Sprintf("http://127.0.0.1:%d/health", port)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, io.Discard, io.Discard) }()
	_, err := http.Get(url)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("during warm-up: got %v, want connection refused", err)
	}
	waitStatus(t, url, 200, `{"status":"ok"}`)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// With --sim-health-503 it binds at once and answers llama-server's 503.
func TestHealth503DuringWarmup(t *testing.T) {
	port := freePort(t)
	cfg := testConfig(dflash, 4)
	cfg.Clock = nil
	cfg.Warmup = 2 * time.Second
	cfg.Port = port
	cfg.Health503 = true
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, io.Discard, io.Discard) }()
	waitStatus(t, base+"/health", 503, `{"error":{"message":"Loading model","type":"unavailable_error","code":503}}`)
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model":"x","prompt":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("completion during warm-up: %d, want 503", resp.StatusCode)
	}
	waitStatus(t, base+"/health", 200, `{"status":"ok"}`)
	cancel() // also: a cancel during warm-up must return nil; covered by TestShutdownDuringWarmup
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// waitStatus polls url until it answers status with body (generous bound).
func waitStatus(t *testing.T, url string, status int, body string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == status && string(b) == body {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		} else {
			last = err.Error()
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never answered %d %s; last: %s", url, status, body, last)
}

// A cancel during the warm-up ends Run with nil. The real clock runs in a
// synctest bubble: synctest.Wait returns once Run is parked in its
// warm-up (nothing listens before it ends), and the bound on Run's return
// is the bubble's time, which passes only while every goroutine waits.
func TestShutdownDuringWarmup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig("", 0)
		cfg.Clock = nil
		cfg.Warmup = time.Hour
		var stderr syncBuffer
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg, io.Discard, &stderr) }()
		synctest.Wait()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Run ignored cancel during warm-up")
		}
		if !strings.Contains(stderr.String(), "Shutting down during warm-up") {
			t.Errorf("Run did not stop in its warm-up:\n%s", stderr.String())
		}
	})
}

// Real pacing with small costs: the stream takes about the modelled time,
// and a client's n / wall agrees with the engine's predicted_per_second.
// The real clock (SystemClock, nil in the config: its timers) paces it,
// in a synctest bubble whose time passes only while every goroutine
// waits: what is judged is the time the sim waits, not this machine's
// speed. The request goes to the handler directly (no listener: a
// goroutine in a socket read would hold the bubble's time).
func TestRealPacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig("", 0)
		cfg.Clock = nil
		cfg.Cost.ClassicMS = 4
		cfg.Cost.Noise = 0
		h, err := NewHandler(cfg, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(`{"model":"x","prompt":"hello world","max_tokens":51,"stream":true}`)))
		wall := time.Since(start)
		if rec.Code != 200 {
			t.Fatalf("status %d", rec.Code)
		}
		data := sseData(t, rec.Body.Bytes())
		var final struct{ Timings benchTimings }
		mustJSON(t, data[len(data)-2], &final)
		modelled := 50 * 4 * time.Millisecond
		if wall < modelled*9/10 || wall > modelled*5 {
			t.Errorf("stream took %v, modelled %v", wall, modelled)
		}
		if ms := final.Timings.PredictedMS; ms < 180 || ms > 1000 {
			t.Errorf("predicted_ms %.1f, modelled 200", ms)
		}
		client := 51 / wall.Seconds()
		if engine := final.Timings.PredictedPerSecond; client > engine*1.01 || client < engine*0.5 {
			t.Errorf("client %.1f tok/s vs engine %.1f tok/s", client, engine)
		}
	})
}

func TestFailStart(t *testing.T) {
	cfg := testConfig(dflash, 4)
	cfg.FailStart = true
	cfg.ExitCode = 3
	var stderr syncBuffer
	err := Run(context.Background(), cfg, io.Discard, &stderr)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 {
		t.Fatalf("got %v, want *ExitError code 3", err)
	}
	if !strings.Contains(stderr.String(), "Speculative decoding dispatch resolution failed: simulated start failure") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

func TestCrashAfter(t *testing.T) {
	cfg := testConfig("", 0)
	cfg.Clock = nil
	cfg.CrashAfter = 50 * time.Millisecond
	cfg.ExitCode = 7
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), cfg, io.Discard, io.Discard) }()
	select {
	case err := <-done:
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != 7 {
			t.Fatalf("got %v, want *ExitError code 7", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no crash")
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	err := Run(context.Background(), Config{Model: "m", DraftModel: "d", BlockSize: 1, Cost: DefaultCostModel()}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--draft-block-size") {
		t.Errorf("got %v", err)
	}
}

func TestPortInUse(t *testing.T) {
	r := startSim(t, testConfig("", 0))
	cfg := testConfig("", 0)
	fmt.Sscanf(r.base, "http://127.0.0.1:%d", &cfg.Port)
	err := Run(context.Background(), cfg, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "listen on") {
		t.Errorf("got %v, want a listen error", err)
	}
}

// Cancelling Run mid-stream returns nil promptly, and the requests it cut
// are cut as a stopped llama-server cuts them: the stream in flight breaks
// off (an error, not a clean end without its final event) and the request
// queued behind it gets no answer (not an empty 200).
func TestShutdownMidStream(t *testing.T) {
	cfg := testConfig(dflash, 4)
	cfg.Clock = nil
	ready := make(chan string, 1)
	cfg.onReady = func(a string) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, io.Discard, io.Discard) }()
	addr := <-ready
	resp, err := http.Post("http://"+addr+"/completion", "application/json",
		strings.NewReader(`{"prompt":"x","n_predict":60000,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	// One slot: this request waits behind the stream.
	queued := make(chan error, 1)
	go func() {
		r, err := http.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":8}`))
		if err == nil {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			err = fmt.Errorf("answered %s: %q", r.Status, b)
		}
		queued <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(scrape(t, addr), "llamacpp:requests_deferred 1\n") {
		if time.Now().After(deadline) {
			t.Fatal("the second request never waited for the slot")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop mid-stream")
	}
	if _, err := io.ReadAll(resp.Body); err == nil || strings.Contains(err.Error(), "answered") {
		t.Errorf("the cut stream ended cleanly (err %v): a client takes it for complete", err)
	}
	if err := <-queued; err != nil && strings.Contains(err.Error(), "answered") {
		t.Errorf("the queued request: %v", err)
	}
}

// scrape is the sim's /metrics page.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	r, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return string(b)
}
