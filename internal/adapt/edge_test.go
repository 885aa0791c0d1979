package adapt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/testenv"
)

// An engine without token-array prompt timings (mlxcel-server answers
// /completion without timings.prompt_n) cannot be probed: with no curve
// given, Run returns at once saying why, and asks for no switch.
func TestRunNotProbeable(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"404": func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) },
		"no prompt timings": func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"content":"x","timings":{"predicted_n":1,"predicted_ms":3.1}}`)
		},
		"not json": func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>") },
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			switched := false
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var last Status
			err := Run(ctx, LoopDeps{
				Current: func() Target { return Target{BaseURL: srv.URL, Width: 4, Gen: 1} },
				Switch:  func(context.Context, int, string) error { switched = true; return nil },
				Publish: func(s Status) { last = s },
				Cfg:     testCfg(),
			})
			if !errors.Is(err, ErrNotAdapting) || !errors.Is(err, ErrNoProbe) || !strings.Contains(err.Error(), "could not be probed") {
				t.Errorf("err = %v", err)
			}
			if switched || last.State != StateNotAdapting || last.Note == "" {
				t.Errorf("switched %v, status %+v", switched, last)
			}
		})
	}
}

// A curve given in Config replaces the probe; an engine that drafts but
// shows no per-position counters stops the loop with the reason.
func TestRunGivenCurveNoPerPosition(t *testing.T) {
	var cycles atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			t.Errorf("unexpected %s %s (the curve was given)", r.Method, r.URL.Path)
			http.NotFound(w, r)
			return
		}
		n := cycles.Add(50)
		fmt.Fprintf(w, "llamacpp:spec_decode_num_drafts_total %d\nllamacpp:tokens_predicted_total %d\n", n, 3*n)
	}))
	defer srv.Close()
	curve := Curve{VerifyMS: map[int]float64{1: 3, 2: 3.1, 3: 3.2, 4: 3.3, 5: 3.4, 6: 3.5}}
	cfg := testCfg()
	cfg.Curve = &curve
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := Run(ctx, LoopDeps{
		Current: func() Target { return Target{BaseURL: srv.URL, Width: 6, Gen: 1} },
		Switch:  func(context.Context, int, string) error { t.Error("switch asked"); return nil },
		Cfg:     cfg,
	})
	if !errors.Is(err, ErrNotAdapting) || !strings.Contains(err.Error(), famPerPos) {
		t.Errorf("err = %v", err)
	}
}

// The probe checks prompt_n: an engine that re-evaluates the prefix every
// time is reported, not measured.
func TestProbeCacheMiss(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"timings":{"prompt_n":70,"prompt_ms":9.5}}`)
	}))
	defer srv.Close()
	_, err := Probe(context.Background(), nil, srv.URL, []int{1, 2}, 2)
	if err == nil || !strings.Contains(err.Error(), "prompt_n is 70, want 1") {
		t.Errorf("err = %v", err)
	}
}

// The probe is cancellable: a hung engine does not hold it past ctx.
func TestProbeCancel(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Probe(ctx, nil, srv.URL, []int{1}, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("probe held %v past its context", d)
	}
}

// The probe on the sim reads the sim's verify cost by rows.
func TestProbeSim(t *testing.T) {
	cost := h200Q8()
	cost.Noise = 0
	e := newSimEngine(t, cost, 4)
	c, err := Probe(context.Background(), nil, e.Current().BaseURL, []int{1, 2, 8, 9, 17}, 3)
	if err != nil {
		t.Fatal(err)
	}
	for rows, want := range map[int]float64{1: 3.20, 2: 3.33, 8: 5.09, 9: 5.97, 17: 6.86} {
		if !near(c.VerifyMS[rows], want, 0.01) {
			t.Errorf("%d rows: %.3f ms, want %.2f", rows, c.VerifyMS[rows], want)
		}
	}
}

// A fake of ggml's CUDA graphs: a shape (the rows evaluated) runs without
// its captured graph, 2 ms slower, on its first two calls in a row. The
// probe must report the replayed cost, as a decoding loop at one width
// sees it; changing the row count on every request (the probe's first
// order) measured only the slow calls.
func TestProbeSkipsGraphWarmUp(t *testing.T) {
	var mu sync.Mutex
	last, streak := -1, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prompt, ok := completionPrompt(w, r)
		if !ok {
			return
		}
		n := len(prompt) - probePrefixLen
		mu.Lock()
		if n == last {
			streak++
		} else {
			last, streak = n, 1
		}
		ms := 1 + 0.1*float64(n)
		if streak < 3 {
			ms += 2
		}
		mu.Unlock()
		fmt.Fprintf(w, `{"timings":{"prompt_n":%d,"prompt_ms":%g}}`, n, ms)
	}))
	defer srv.Close()
	c, err := Probe(context.Background(), nil, srv.URL, []int{1, 2, 3, 8, 9}, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, rows := range []int{1, 2, 3, 8, 9} {
		if want := 1 + 0.1*float64(rows); !near(c.VerifyMS[rows], want, 1e-9) {
			t.Errorf("%d rows: %.3f ms, want %.3f (the graph's replayed cost)", rows, c.VerifyMS[rows], want)
		}
	}
}

func TestCurveCache(t *testing.T) {
	dir := t.TempDir()
	key := CacheKey{Engine: "llama.cpp 0 (d32676d)", GPU: "NVIDIA H200", Capability: "9.0",
		Models: []ModelFile{{Path: "/m/t.gguf", Size: 3905910048, ModTime: 1}}}
	c := Curve{VerifyMS: map[int]float64{1: 3.2, 2: 3.33}, Source: "probe"}
	if err := SaveCurve(dir, key, c, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	got, ok := LoadCurve(dir, key, log)
	if !ok || got.VerifyMS[2] != 3.33 || got.Source != "cache" {
		t.Fatalf("got %+v %v", got, ok)
	}
	other := key
	other.Models = []ModelFile{{Path: "/m/t.gguf", Size: 3905910048, ModTime: 2}}
	if _, ok := LoadCurve(dir, other, log); ok {
		t.Error("a curve for another model file was used")
	}
	// Another content under the same path, size and time (a copy with
	// its times kept), or another slot count: another curve.
	for name, k := range map[string]CacheKey{
		"content": func() CacheKey {
			k := key
			k.Models = []ModelFile{{Path: "/m/t.gguf", Size: 3905910048, ModTime: 1, SHA256: "ab12"}}
			return k
		}(),
		"slots": func() CacheKey { k := key; k.Slots = 4; return k }(),
	} {
		if _, ok := LoadCurve(dir, k, log); ok {
			t.Errorf("a curve for another %s was used", name)
		}
	}
	if logs.Len() != 0 {
		t.Errorf("a plain miss warned: %s", logs.String())
	}

	path := cachePath(dir, key)
	for name, setup := range map[string]func(){
		"corrupt":   func() { os.WriteFile(path, []byte("{not json"), 0o644) },
		"oversized": func() { os.WriteFile(path, bytes.Repeat([]byte(" "), maxCacheBytes+1), 0o644) },
		"directory": func() { os.Remove(path); os.Mkdir(path, 0o755) },
		"symlink": func() {
			os.RemoveAll(path)
			target := filepath.Join(dir, "elsewhere.json")
			os.WriteFile(target, []byte("{}"), 0o644)
			os.Symlink(target, path)
		},
		"bad entry": func() {
			os.RemoveAll(path)
			os.WriteFile(path, []byte(`{"key":`+mustJSONString(key)+`,"curve":{"verify_ms":{"2":-1}}}`), 0o644)
		},
		// a file copied from another host under this key's name
		"another key inside": func() {
			os.RemoveAll(path)
			os.WriteFile(path, []byte(`{"key":`+mustJSONString(other)+`,"curve":{"verify_ms":{"1":3.2,"2":3.3}}}`), 0o644)
		},
	} {
		logs.Reset()
		setup()
		if _, ok := LoadCurve(dir, key, log); ok {
			t.Errorf("%s: used", name)
		}
		if !strings.Contains(logs.String(), "ignoring the cached verify-cost curve") {
			t.Errorf("%s: no warning: %q", name, logs.String())
		}
	}
	// A bad file is replaced by the next save.
	os.RemoveAll(path)
	os.WriteFile(path, []byte("junk"), 0o644)
	if err := SaveCurve(dir, key, c, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	if _, ok := LoadCurve(dir, key, log); !ok {
		t.Error("not readable after a save over a corrupt file")
	}
}

// A second Run with the same key loads the probed curve from the cache
// instead of probing again.
func TestRunUsesCache(t *testing.T) {
	cost := h200Q8()
	dir := t.TempDir()
	key := CacheKey{Engine: "sim", GPU: "none", Models: []ModelFile{{Path: "/m/t.gguf", Size: 1, ModTime: 1}}}
	for i, wantSource := range []string{"probe", "cache", "probe"} {
		if i == 2 {
			key.Models = nil // a key naming no model file is never cached
		}
		e := newSimEngine(t, cost, 8)
		var probes atomic.Int64
		client := &http.Client{Transport: countingTransport{&probes}}
		ctx, cancel := context.WithCancel(context.Background())
		var last atomic.Value
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, LoopDeps{Current: e.Current, Switch: e.Switch, HTTP: client, CacheDir: dir, CacheKey: key, Cfg: testCfg(),
				Publish: func(s Status) { last.Store(s) }})
		}()
		waitFor(5*time.Second, func() bool {
			s, _ := last.Load().(Status)
			return s.State == StateWatching
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		s := last.Load().(Status)
		if s.Curve == nil || s.Curve.Source != wantSource {
			t.Errorf("run %d: curve %+v, want from %s", i, s.Curve, wantSource)
		}
		if (wantSource == "cache") != (probes.Load() == 0) {
			t.Errorf("run %d: %d probe requests with a cached curve", i, probes.Load())
		}
	}
}

type countingTransport struct{ n *atomic.Int64 }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/completion" {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func mustJSONString(v any) string {
	b, err := jsonMarshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

var jsonMarshal = func(v any) ([]byte, error) { return json.Marshal(v) }

// A probe cut short by its bound (live traffic held the engine's slot)
// resumes where it stopped instead of giving up adapting. An engine that
// answers no probe request at all (hung, restarting under a reload) does
// not turn the loop off: it backs off, says so in the status, and tries
// again; once the engine answers, the curve completes. The bound is the
// wall clock's (a stalled request waits it out): the end-to-end tier.
func TestProbeResumesUnderLoad(t *testing.T) {
	testenv.E2E(t)
	cases := []struct {
		name    string
		stall   func(n int64) bool // whether the n-th /completion hangs
		curve   bool               // a curve is expected
		retried bool               // the status says it backs off, and the log
		minSent int64              // /completion requests at least
	}{
		// Every 20th request waits longer than the bound: each attempt
		// makes progress, the curve completes.
		{name: "busy spells", stall: func(n int64) bool { return n%20 == 0 }, curve: true, minSent: 17*3 + 2},
		// Requests 11 to 20 hang (a reload restarting the engine): the
		// attempt that takes no sample fails, the loop backs off and
		// tries again, and the curve completes.
		{name: "hung, then back", stall: func(n int64) bool { return n > 10 && n <= 20 }, curve: true, retried: true, minSent: 17*3 + 2},
		// The engine never answers again: still retrying, never off.
		{name: "hung", stall: func(n int64) bool { return n > 10 }, retried: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var sent atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/completion":
				case "/metrics":
					fmt.Fprint(w, "llamacpp:spec_decode_num_drafts_total 0\n")
					return
				default:
					http.NotFound(w, r)
					return
				}
				var req struct{ Prompt []int }
				json.NewDecoder(r.Body).Decode(&req)
				if c.stall(sent.Add(1)) {
					<-r.Context().Done()
					return
				}
				rows := len(req.Prompt) - probePrefixLen
				fmt.Fprintf(w, `{"timings":{"prompt_n":%d,"prompt_ms":%g}}`, rows, 2+0.1*float64(rows))
			}))
			defer srv.Close()
			cfg := testCfg()
			// A request answered at once takes well under the bound even
			// under -race on a loaded machine (100 ms did not).
			cfg.ProbeTimeout = time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var logs bytes.Buffer
			var mu sync.Mutex
			var last Status
			retrying := false
			done := make(chan error, 1)
			go func() {
				done <- Run(ctx, LoopDeps{
					Current: func() Target { return Target{BaseURL: srv.URL, Width: 17, Gen: 1} },
					Switch:  func(context.Context, int, string) error { return nil },
					Log:     slog.New(slog.NewTextHandler(&syncWriter{w: &logs, mu: &mu}, nil)),
					Publish: func(s Status) {
						mu.Lock()
						defer mu.Unlock()
						last = s
						retrying = retrying || s.State == StateProbing && strings.Contains(s.Note, "verify-cost probe failed") && strings.Contains(s.Note, "retrying in")
					},
					Cfg: cfg,
				})
			}()
			waitFor(90*time.Second, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return last.State == StateWatching || last.State == StateNotAdapting || !c.curve && retrying && sent.Load() > 12
			})
			cancel()
			err := <-done
			mu.Lock()
			defer mu.Unlock()
			if err != nil || last.State == StateNotAdapting {
				t.Fatalf("err %v, status %+v: a probe that may pass turned the loop off", err, last)
			}
			if retrying != c.retried || c.retried && !strings.Contains(logs.String(), "the verify-cost probe failed; retrying later") {
				t.Errorf("backing off %v, want %v; log:\n%s", retrying, c.retried, logs.String())
			}
			if !c.curve {
				return
			}
			if last.State != StateStopped || last.Curve == nil || len(last.Curve.VerifyMS) != DefaultMaxWidth {
				t.Fatalf("err %v, status %+v", err, last)
			}
			if !strings.Contains(logs.String(), "resuming where it stopped") && !c.retried || sent.Load() < c.minSent {
				t.Errorf("%d requests; log:\n%s", sent.Load(), logs.String())
			}
			if got := last.Curve.VerifyMS[17]; !near(got, 3.7, 1e-9) {
				t.Errorf("17 rows: %v ms, want 3.7", got)
			}
		})
	}
}

type syncWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// llamaRefusal is llama-server d32676d's answer when the one generated
// token is not valid UTF-8 on its own.
const llamaRefusal = `{"error":{"code":500,"message":"The model produced output that does not match the expected Content-only format","type":"server_error"}}`

// A greedy model whose next token after some prompts is a byte token: the
// engine answers 500 for those prompts, always the same ones (the warm-up's
// among them). The probe changes the tokens, not the rows, and finishes
// with every sample; an engine that refuses every prompt fails it, bounded.
func TestProbeOutputRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse func(prompt []int) bool
		want   string // "" = the probe finishes
	}{
		{"the warm-up and every third prompt", func(p []int) bool {
			last := p[len(p)-1]
			return last == probeFreshBase+probeFreshSpan || p[probePrefixLen]%3 == 0
		}, ""},
		{"every prompt", func([]int) bool { return true }, "could not render"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var slot slotCache
			refused, calls := 0, 0
			srv := probeServer(t, func(prompt []int, call int) (int, string) {
				calls = call
				n := slot.eval(prompt) // evaluated and cached before the token is rendered
				if tc.refuse(prompt) {
					refused++
					return http.StatusInternalServerError, llamaRefusal
				}
				return http.StatusOK, fmt.Sprintf(`{"timings":{"prompt_n":%d,"prompt_ms":%g}}`, n, 1+0.1*float64(n))
			})
			c, err := Probe(context.Background(), nil, srv.URL, []int{1, 2, 8}, 3)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Content-only") {
					t.Fatalf("err = %v, want %q with the engine's message", err, tc.want)
				}
				if calls > probeRetries+1 {
					t.Errorf("%d requests to an engine that refuses them all", calls)
				}
				return
			}
			if err != nil {
				t.Fatalf("probe: %v (%d refused)", err, refused)
			}
			if refused < 3 {
				t.Fatalf("only %d requests refused: the test does not exercise the retry", refused)
			}
			for _, rows := range []int{1, 2, 8} {
				if want := 1 + 0.1*float64(rows); !near(c.VerifyMS[rows], want, 1e-9) {
					t.Errorf("%d rows: %.3f ms, want %.3f", rows, c.VerifyMS[rows], want)
				}
			}
		})
	}
}

// completionPrompt reads a probe request's token prompt; anything else is
// answered 404 and ok is false.
func completionPrompt(w http.ResponseWriter, r *http.Request) (prompt []int, ok bool) {
	var req struct {
		Prompt []int `json:"prompt"`
	}
	if r.URL.Path != "/completion" || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.NotFound(w, r)
		return nil, false
	}
	return req.Prompt, true
}

// A prefix evicted by live traffic, then re-warm-ups the engine refuses
// (500 on their generated token): they still ran another shape, so the
// next requests of the row count are graph warm-up again and discarded.
// This engine runs a shape's first two requests in a row at 100 ms.
func TestProbeRewarmRefusedRestartsGraphWarmUp(t *testing.T) {
	var slot slotCache
	lastN, streak := -1, 0
	evicted := false
	srv := probeServer(t, func(prompt []int, call int) (int, string) {
		if call == 4 { // live traffic took the slot before the first sample
			slot, evicted = slotCache{}, true
		}
		n := slot.eval(prompt)
		if n == lastN {
			streak++
		} else {
			lastN, streak = n, 1
		}
		if evicted && len(prompt) == probePrefixLen+1 { // every re-warm-up refused
			return http.StatusInternalServerError, llamaRefusal
		}
		ms := 1 + 0.1*float64(n)
		if streak < 3 {
			ms = 100
		}
		return http.StatusOK, fmt.Sprintf(`{"timings":{"prompt_n":%d,"prompt_ms":%g}}`, n, ms)
	})
	c, err := Probe(context.Background(), nil, srv.URL, []int{2}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !evicted {
		t.Fatal("the prefix was never evicted: the test does not exercise the re-warm")
	}
	if !near(c.VerifyMS[2], 1.2, 1e-9) {
		t.Errorf("2 rows: %.3f ms, want 1.2 (a graph warm-up request kept)", c.VerifyMS[2])
	}
}

// slotCache is one llama-server slot's prompt cache: eval returns the
// tokens a prompt evaluates beyond the prefix it shares with the last
// one (timings.prompt_n), and caches it.
type slotCache struct{ cached []int }

func (c *slotCache) eval(prompt []int) int {
	reused := 0
	for reused < len(c.cached) && reused < len(prompt) && c.cached[reused] == prompt[reused] {
		reused++
	}
	c.cached = prompt
	return len(prompt) - reused
}

// probeServer answers the probe's requests, one at a time, with
// answer(prompt, call), call counting from 1.
func probeServer(t *testing.T, answer func(prompt []int, call int) (code int, body string)) *httptest.Server {
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prompt, ok := completionPrompt(w, r)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		calls++
		code, body := answer(prompt, calls)
		w.WriteHeader(code)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}
