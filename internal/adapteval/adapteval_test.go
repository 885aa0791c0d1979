package adapteval

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func st(engineWidth int, adapt string) status {
	s := status{Adapt: json.RawMessage(adapt)}
	if engineWidth > 0 {
		s.Engine = &struct {
			Width       int    `json:"width"`
			WidthSource string `json:"width_source"`
			URL         string `json:"url"`
		}{Width: engineWidth}
	}
	return s
}

func TestSettled(t *testing.T) {
	cases := []struct {
		name string
		s    status
		want bool
		note string
	}{
		{"no adapt", st(4, ``), false, "no adapt status"},
		{"null adapt", st(4, `null`), false, "no adapt status"},
		{"probing", st(4, `{"state":"probing","width":4}`), false, "adaptive loop probing"},
		{"exploring", st(4, `{"state":"exploring","width":4}`), false, "adaptive loop exploring"},
		{"no decision", st(17, `{"state":"watching","width":17}`), false, "no decision yet"},
		{"no engine", st(0, `{"state":"watching","width":4,"last_decision":{"running":4,"choice":4}}`), false, "no engine serving"},
		{"decision before the switch", st(4, `{"state":"watching","width":4,"last_decision":{"running":17,"choice":4,"switch":true}}`), false, "last decision was at width 17"},
		{"switch held", st(17, `{"state":"watching","width":17,"last_decision":{"running":17,"choice":4,"switch":true}}`), false, "decided to switch 17→4"},
		{"explore", st(4, `{"state":"watching","width":4,"last_decision":{"running":4,"choice":4,"explore":9}}`), false, "exploring wider (width 9)"},
		// H200, 2026-12-03e, production window: a drift asked for a wider
		// look every half minute, held for the re-check period each time,
		// and the run was called unsettled for 7 minutes at width 4.
		{"wider look held", st(4, `{"state":"watching","width":4,"last_decision":{"running":4,"choice":4,"reason":"best","explore":16,"explore_in_ns":300000000000,"candidates":[{"width":4}]}}`), true, "stays at width 4: best"},
		{"checking", st(3, `{"state":"watching","width":3,"checking":"width 3 against width 4","last_decision":{"running":3,"choice":3,"candidates":[{"width":3}]}}`), false, "checking width 3 against width 4"},
		{"stays", st(4, `{"state":"watching","width":4,"last_decision":{"running":4,"choice":4,"reason":"best","recheck":17,"candidates":[{"width":1},{"width":4}]}}`), true, "stays at width 4: best"},
		// H200, 2026-12-02: the loop stayed at its exploration width 8
		// under 4 sequences because the cost of 32 rows was missing.
		{"no cost", st(8, `{"state":"watching","width":8,"note":"not adapting at concurrency 4: the verify cost of 32 rows could not be probed (x); serving width 8",
			"last_decision":{"running":8,"choice":8,"no_cost":true,"reason":"no cost for the running width 8 at 4 sequences (the probed curve does not cover 32 rows)",
			"candidates":[{"width":1},{"width":2},{"width":3},{"width":4}]}}`), false, "cannot judge the running width 8: no cost for the running width 8 at 4 sequences (the probed curve does not cover 32 rows) (not adapting at concurrency 4"},
		// An older server without no_cost: the running width is not among the candidates.
		{"running width not judged", st(8, `{"state":"watching","width":8,"last_decision":{"running":8,"choice":8,"reason":"no cost for the running width 8 at 4 sequences",
			"candidates":[{"width":1},{"width":4}]}}`), false, "did not judge the running width 8: no cost"},
		{"too few cycles", st(4, `{"state":"watching","width":4,"last_decision":{"running":4,"choice":4,"reason":"too few cycles: 100 of the 256 needed"}}`), false, "did not judge the running width 4: too few cycles"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, note := settled(c.s)
			if got != c.want || !strings.Contains(note, c.note) {
				t.Errorf("settled = %v %q, want %v %q", got, note, c.want, c.note)
			}
		})
	}
}

// Phase 1 ends on the second decision in a row that settles at one
// width: here one settles (a wider look held), the next names a trial, as
// on the sim's collapse profile in CI, and only two calm ones after it end
// the phase. A server without a decision count settles on one.
func TestCalm(t *testing.T) {
	held := func(n int) status {
		return st(4, fmt.Sprintf(`{"state":"watching","width":4,"decisions":%d,"last_decision":{"running":4,"choice":4,"reason":"best","explore":17,"explore_in_ns":300000000000,"candidates":[{"width":4}]}}`, n))
	}
	trial := st(4, `{"state":"watching","width":4,"decisions":8,"last_decision":{"running":4,"choice":3,"switch":true,"reason":"trial width 3","candidates":[{"width":3},{"width":4}]}}`)
	at3 := st(3, `{"state":"watching","width":3,"decisions":9,"last_decision":{"running":3,"choice":3,"reason":"best","candidates":[{"width":3}]}}`)
	var c calm
	for i, step := range []struct {
		s    status
		want bool
		note string
	}{
		{held(7), false, "stays at width 4: best; waiting for the next decision"},
		{held(7), false, "waiting for the next decision"}, // the same decision read again
		{trial, false, "decided to switch 4→3"},
		{held(9), false, "waiting for the next decision"},
		{at3, false, "stays at width 3: best; waiting"}, // another width: counted afresh
		{held(10), false, "waiting"},
		{held(11), true, "stays at width 4: best"},
		{st(4, `{"state":"watching","width":4,"last_decision":{"running":4,"choice":4,"reason":"best","candidates":[{"width":4}]}}`), true, "stays at width 4: best"},
	} {
		if got, note := c.next(step.s); got != step.want || !strings.Contains(note, step.note) {
			t.Errorf("status %d: settled %v %q, want %v %q", i, got, note, step.want, step.note)
		}
	}
}

func TestReadPrompts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("second"), 0o644)
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("first"), 0o644)
	os.WriteFile(filepath.Join(dir, ".hidden"), []byte("x"), 0o644)
	ps, err := ReadPrompts(ctx, dir)
	if err != nil || len(ps) != 2 || ps[0].Name != "a.txt" || ps[1].Text != "second" {
		t.Fatalf("ReadPrompts = %+v, %v", ps, err)
	}
	bad := map[string]func(d string){
		"holds no prompt files": func(d string) {},
		"is empty":              func(d string) { os.WriteFile(filepath.Join(d, "e"), []byte(" \n"), 0o644) },
		"not UTF-8":             func(d string) { os.WriteFile(filepath.Join(d, "u"), []byte{0xff, 0xfe}, 0o644) },
		"larger":                func(d string) { os.WriteFile(filepath.Join(d, "big"), make([]byte, MaxPromptBytes+1), 0o644) },
		"directory":             func(d string) { os.Mkdir(filepath.Join(d, "sub"), 0o755) },
		"FIFO":                  func(d string) { syscall.Mkfifo(filepath.Join(d, "fifo"), 0o644) },
	}
	for want, mk := range bad {
		d := t.TempDir()
		mk(d)
		if _, err := ReadPrompts(ctx, d); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v", want, err)
		}
	}
	if _, err := ReadPrompts(ctx, filepath.Join(dir, "a.txt")); err == nil || !strings.Contains(err.Error(), "prompt directory") {
		t.Errorf("a file as the directory: %v", err)
	}
}

// fakeServe is /speclaunch/status and a streaming /v1/completions whose
// adaptive loop switches 4→17 (explore) after 4 requests and 17→6 after
// 10, then stays.
type fakeServe struct {
	url      string
	mu       sync.Mutex
	done     atomic.Int64
	width    int
	switches []map[string]any
	bodies   []map[string]any
	probing  atomic.Int64 // polls left in "probing"
	polls    int          // one decision a poll
	// noCost: after the exploration to 8 every decision says it has no
	// cost for the running width (the H200 run of 2026-12-02)
	noCost bool
}

func (f *fakeServe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.URL.Path {
	case "/speclaunch/status":
		n := f.done.Load()
		sw := func(from, to int, reason string) {
			if f.width == from {
				f.width = to
				f.switches = append(f.switches, map[string]any{"at": time.Now(), "kind": "adapt", "reason": reason, "from_width": from, "to_width": to, "ok": true, "took_ms": 5})
			}
		}
		state := "watching"
		if f.probing.Add(-1) >= 0 {
			state = "probing"
		} else if n >= 4 {
			sw(4, 17, "explore wider: x")
		}
		if n >= 10 && !f.noCost {
			sw(17, 6, "width 6 is predicted best")
		}
		dec := map[string]any{"running": f.width, "choice": f.width, "switch": false, "reason": "best",
			"candidates": []map[string]any{{"width": 1}, {"width": f.width}}}
		if f.width != 6 {
			dec["explore"] = 17
		}
		note := ""
		if f.noCost && f.width == 17 {
			dec = map[string]any{"running": 17, "choice": 17, "switch": false, "no_cost": true,
				"reason":     "no cost for the running width 17 at 4 sequences (the probed curve does not cover 68 rows)",
				"candidates": []map[string]any{{"width": 1}, {"width": 2}, {"width": 3}, {"width": 4}}}
			note = "not adapting at concurrency 4: the verify cost of 68 rows could not be probed (x); serving width 17"
		}
		f.polls++
		json.NewEncoder(w).Encode(map[string]any{
			"engine":   map[string]any{"width": f.width, "width_source": "adaptive", "url": f.url},
			"switches": append([]map[string]any{{"at": time.Now(), "kind": "start", "ok": true}}, f.switches...),
			"adapt":    map[string]any{"state": state, "width": f.width, "last_decision": dec, "note": note, "decisions": f.polls},
		})
	case "/v1/completions":
		var b map[string]any
		json.NewDecoder(r.Body).Decode(&b)
		f.bodies = append(f.bodies, b)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for range 5 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"x\"}]}\n\n")
		}
		// The final event, as an engine ends a stream: loadgen counts a
		// stream without one as cut (Result.Cut), and Run as empty.
		fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}],\"timings\":{\"predicted_n\":5,\"predicted_per_second\":250}}\n\ndata: [DONE]\n\n")
		time.Sleep(5 * time.Millisecond)
		f.done.Add(1)
		f.mu.Lock()
	default:
		http.NotFound(w, r)
	}
}

func TestRunAgainstFake(t *testing.T) {
	f := &fakeServe{width: 4}
	f.probing.Store(2)
	srv := httptest.NewServer(f)
	defer srv.Close()
	f.url = srv.URL // the fake engine is the fake proxy
	ps := []Prompt{{Name: "a", Text: "A"}, {Name: "b", Text: "B"}}
	res, err := Run(context.Background(), Options{URL: srv.URL, Prompts: ps, Clients: 2, MaxTokens: 5, Temperature: 0.7, Seed: 10,
		Requests: 20, Poll: 10 * time.Millisecond, SettleTimeout: 10 * time.Second, Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Summary())
	if !res.OK() || res.Width != 6 || len(res.Switches) != 2 {
		t.Fatalf("%s", res.Summary())
	}
	if s := res.Switches[0]; !s.Explore || s.From != 4 || s.To != 17 {
		t.Errorf("first switch %+v", s)
	}
	// The fake switches once it has finished 10 requests; with 2 clients the
	// client has seen at least 8 of them end.
	if s := res.Switches[1]; s.Explore || s.To != 6 || s.RequestsBefore < 10-2 || s.AtS <= 0 || s.AtS > res.SettleS {
		t.Errorf("deciding switch %+v (settled at %.3fs)", s, res.SettleS)
	}
	m := res.Measure
	if m.Requests < 20 || m.Tokens < 5*19 || m.TokPerSec <= 0 || m.EngineSamples == 0 || m.EngineMeanPerSec != 250 || m.SwitchesDuring != 0 || m.Width != 6 {
		t.Errorf("measure %+v", m)
	}
	if d := res.Direct; d == nil || d.Requests < 20 || d.TokPerSec <= 0 || d.EngineMeanPerSec != 250 || res.ProxyCost == nil || res.DirectLoad.OK == 0 {
		t.Errorf("direct %+v, proxy cost %v", d, res.ProxyCost)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[string]bool{}
	for _, b := range f.bodies {
		if b["temperature"] != 0.7 || b["stream"] != true || b["max_tokens"] != 5.0 {
			t.Fatalf("body %v", b)
		}
		// each prompt always carries its own seed
		seen[fmt.Sprint(b["prompt"], " ", b["seed"])] = true
	}
	if len(seen) != 2 || !seen["A 10"] || !seen["B 11"] {
		t.Errorf("prompt/seed pairs %v", seen)
	}
}

// Greedy is sent as temperature 0 (llama-server would sample at 0.8) and
// without a seed.
func TestRunGreedyAndNotAdapting(t *testing.T) {
	f := &fakeServe{width: 6}
	srv := httptest.NewServer(f)
	defer srv.Close()
	res, err := Run(context.Background(), Options{URL: srv.URL, Prompts: []Prompt{{Text: "A"}}, Requests: 3, Poll: 10 * time.Millisecond})
	if err != nil || !res.OK() || res.Seed != nil {
		t.Fatalf("%v %s", err, res.Summary())
	}
	if b := f.bodies[0]; b["temperature"] != 0.0 || b["seed"] != nil {
		t.Errorf("greedy body %v", b)
	}

	for _, c := range []struct{ adapt, want string }{
		{`null`, "no adaptive loop"},
		{`{"state":"not adapting","note":"no per-position counters"}`, "not adapting: no per-position counters"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"engine":{"width":4},"adapt":%s}`, c.adapt)
		}))
		_, err := Run(context.Background(), Options{URL: srv.URL, Prompts: []Prompt{{Text: "A"}}, Requests: 1})
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("adapt %s: err %v, want %q", c.adapt, err, c.want)
		}
	}
}

// A re-exploration during phase 3 retires the engine the direct load is
// sent to: the window closes at the change, its refused requests are not
// counted as failures of serving, no proxy cost is claimed, and the load
// does not flood the retired port (on an H200 it sent 182,477 requests in
// 15 s, all refused but 14).
func TestDirectEngineReplaced(t *testing.T) {
	f := &fakeServe{width: 6}
	proxy := httptest.NewServer(f)
	defer proxy.Close()
	eng2 := httptest.NewServer(f)
	defer eng2.Close()
	var direct atomic.Int64
	var eng *httptest.Server
	eng = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if direct.Add(1) == 3 {
			go func() {
				f.mu.Lock()
				f.url = eng2.URL
				f.mu.Unlock()
				eng.CloseClientConnections()
				eng.Listener.Close()
			}()
		}
		f.ServeHTTP(w, r)
	}))
	defer eng.Close()
	f.url = eng.URL
	res, err := Run(context.Background(), Options{URL: proxy.URL, Prompts: []Prompt{{Text: "A"}}, Clients: 2, MaxTokens: 5,
		Requests: 6, Poll: 10 * time.Millisecond, SettleTimeout: 5 * time.Second, Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Summary())
	if res.Failed != 0 || !res.OK() {
		t.Errorf("failed %d: the retired engine's refusals counted against serving", res.Failed)
	}
	if res.ProxyCost != nil || !strings.Contains(res.DirectNote, "replaced the engine") || res.Direct == nil || res.Direct.SwitchesDuring != 1 {
		t.Errorf("proxy cost %v, note %q, direct %+v", res.ProxyCost, res.DirectNote, res.Direct)
	}
	if res.DirectLoad == nil || res.DirectLoad.Sent > 200 {
		t.Errorf("direct load %+v: flooded the retired port", res.DirectLoad)
	}
}

// A run whose loop stays at its exploration width because the cost of the
// rows it verifies at the live concurrency is missing (every decision
// says no_cost) never settles, and the note says why.
func TestRunNoCostDoesNotSettle(t *testing.T) {
	f := &fakeServe{width: 4, noCost: true}
	srv := httptest.NewServer(f)
	defer srv.Close()
	f.url = srv.URL
	res, err := Run(context.Background(), Options{URL: srv.URL, Prompts: []Prompt{{Text: "A"}}, Clients: 2, MaxTokens: 5,
		Requests: 2, Poll: 5 * time.Millisecond, SettleTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Summary())
	if res.Settled || res.OK() || res.Width != 17 {
		t.Fatalf("settled %v at width %d: %s", res.Settled, res.Width, res.Summary())
	}
	for _, want := range []string{"timed out", "cannot judge the running width 17", "could not be probed"} {
		if !strings.Contains(res.SettleNote, want) {
			t.Errorf("settle note %q lacks %q", res.SettleNote, want)
		}
	}
}

// A fixed-width server (serve without --adapt: no adapt status) is
// measured after a warm-up under the same load, and the result says so;
// a server that adapts is refused with the way out; a width that changes
// under the measurement is no measurement of one width.
func TestRunFixed(t *testing.T) {
	// The status reads of a run: Run's first, the warm-up's last, then
	// the measuring window's. flipAt > 0: from that read on the server
	// serves width 5 (a reload under the measurement).
	var reads, flipAt atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/speclaunch/status":
			width := 3
			if n := reads.Add(1); flipAt.Load() > 0 && n >= flipAt.Load() {
				width = 5
			}
			fmt.Fprintf(w, `{"engine":{"width":%d,"width_source":"flag","url":"http://x"},"switches":[],"adapt":null}`, width)
		case "/v1/completions":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"x\"}]}\n\ndata: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}],\"timings\":{\"predicted_n\":1,\"predicted_per_second\":100}}\n\ndata: [DONE]\n\n")
		}
	}))
	defer srv.Close()
	o := Options{URL: srv.URL, Prompts: []Prompt{{Text: "A"}}, Clients: 2, Requests: 20, Poll: 10 * time.Millisecond, Fixed: 50 * time.Millisecond}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || !res.Fixed || res.Width != 3 || res.Measure.Width != 3 || res.Measure.Requests < 20 || res.SettleRequests == 0 ||
		!strings.HasPrefix(res.Summary(), "fixed width 3 (flag), warmed up") {
		t.Fatalf("%s; %+v", res.Summary(), res.Measure)
	}
	// The width changes during the measurement.
	reads.Store(0)
	flipAt.Store(3)
	o.Requests, o.Measure = 0, 300*time.Millisecond
	res, err = Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() || !strings.Contains(res.SettleNote, "the width changed during the measurement: 3, then 5") {
		t.Errorf("a width that changed: %s", res.Summary())
	}
	// A server that adapts is not a fixed width.
	f := &fakeServe{width: 4}
	adapting := httptest.NewServer(f)
	defer adapting.Close()
	o.URL = adapting.URL
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "start it without --adapt") {
		t.Errorf("adapting server: %v", err)
	}
}

func TestIsExplore(t *testing.T) {
	for _, c := range []struct {
		reason string
		want   bool
	}{
		{"the load has sat at 2-4 requests in flight for 11s (mean 4.0): width 4 (trial: width 4 predicted +57.3% over width 16, above the 18.1% a trial needs to pass the noise and repay the switch) for width 16 repays a 3s switch", true},
		{"the load has sat at 2-4 requests in flight for 10m33s (mean 4.0): width 16 (trial: check: width 1 shows no change of traffic) for width 1 repays a 3s switch", true},
		{"the load has sat at 2-4 requests in flight for 5m53s (mean 4.0): width 4 (width 4 measured +66.8% over default width 16) for width 16 repays a 3s switch", false},
		{"explore: trial of width 3", true},
		{"re-explore wider: width 8", true},
		{"reload: p.toml (write)", false},
	} {
		if got := isExplore(c.reason); got != c.want {
			t.Errorf("isExplore(%q) = %v, want %v", c.reason, got, c.want)
		}
	}
}
