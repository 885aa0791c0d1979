package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// engineModel is a fake engine's behaviour for one arm: a llama-server-like
// /completion stream whose speed follows a cost model (a fixed time per
// draft+verify cycle and a fixed number of tokens emitted per cycle).
type engineModel struct {
	cycle    time.Duration // time per cycle
	perCycle int           // tokens emitted per cycle (1 for classic)
	draftN   int           // draft tokens per cycle (W−1); 0 = no drafting
	// declined: the engine refused speculation (Server.Declined) and
	// decodes classically, reporting no draft fields.
	declined bool
	// noDraftFields: drafting is configured but nothing is reported.
	noDraftFields bool
	metrics       bool // serve llama.cpp's speculative counters on /metrics
	draftRounds   bool // report timings.draft_rounds (mlxcel's shape)
	diagnostics   bool // log mlxcel-style diagnostics lines
	engineWidth   int
	word          string // token text (identity tests); default "tok"
	// slow multiplies the cycle time for the engine's k-th request (k from 0
	// over every start of this arm); nil = 1.
	slow func(k int) float64
	// failAt makes the k-th request fail mid-stream with an error event.
	failAt func(k int) bool
	// onRequest runs at the start of each request (cancellation tests).
	onRequest func(k int)
}

// fakeEngine hands out fake servers and counts starts and stops.
type fakeEngine struct {
	t      testing.TB
	models map[string]engineModel // by arm label
	failOn map[string]bool        // labels whose start fails

	starts, stops atomic.Int32
	mu            sync.Mutex
	requests      map[string]int // per label, across starts
	live          map[*fakeServer]bool
	clock         *vclock
}

// newFakeEngine makes a fake engine on a virtual clock, installed as the
// client's clock for the test: a cycle advances time instead of sleeping,
// so the measured rates are the cost model's exactly, whatever the load on
// the machine running the tests. Requests are sequential, so the client
// reading the clock at the final event sees the request's whole duration.
func newFakeEngine(t testing.TB, models map[string]engineModel) *fakeEngine {
	e := &fakeEngine{t: t, models: models, failOn: map[string]bool{}, requests: map[string]int{}, live: map[*fakeServer]bool{},
		clock: &vclock{t: time.Unix(1_800_000_000, 0)}}
	prev := now
	now = e.clock.now
	t.Cleanup(func() { now = prev })
	return e
}

// vclock is a virtual clock that only moves when told to.
type vclock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *vclock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *vclock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (e *fakeEngine) starter() Starter {
	return func(ctx context.Context, arm ArmSpec, port int) (Server, error) {
		m, ok := e.models[arm.Label]
		if !ok {
			return nil, fmt.Errorf("no fake model for arm %q", arm.Label)
		}
		s := &fakeServer{e: e, label: arm.Label, m: m}
		if e.failOn[arm.Label] {
			s.tail = []string{"loading model", "error: out of memory"}
			return s, errors.New("engine exited with status 1")
		}
		s.ts = httptest.NewServer(http.HandlerFunc(s.serve))
		e.starts.Add(1)
		e.mu.Lock()
		e.live[s] = true
		e.mu.Unlock()
		return s, nil
	}
}

func (e *fakeEngine) next(label string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := e.requests[label]
	e.requests[label] = k + 1
	return k
}

type fakeServer struct {
	e     *fakeEngine
	label string
	m     engineModel
	ts    *httptest.Server
	tail  []string

	mu      sync.Mutex
	drafts  int
	perPos  []int
	diags   []Diag
	stopped bool
}

func (s *fakeServer) BaseURL() string {
	if s.ts == nil {
		return "http://127.0.0.1:1"
	}
	return s.ts.URL
}
func (s *fakeServer) ModelID() string  { return "" }
func (s *fakeServer) EngineWidth() int { return s.m.engineWidth }
func (s *fakeServer) Declined() bool   { return s.m.declined }
func (s *fakeServer) Tail() []string   { return s.tail }
func (s *fakeServer) Diagnostics() []Diag {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Diag(nil), s.diags...)
}

func (s *fakeServer) Stop() error {
	s.e.stops.Add(1)
	s.mu.Lock()
	twice := s.stopped
	s.stopped = true
	s.mu.Unlock()
	if twice {
		s.e.t.Errorf("%s stopped twice", s.label)
	}
	if s.ts != nil {
		s.ts.CloseClientConnections()
		s.ts.Close()
	}
	s.e.mu.Lock()
	delete(s.e.live, s)
	s.e.mu.Unlock()
	return nil
}

func (s *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/metrics":
		if !s.m.metrics {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		fmt.Fprintf(w, "# TYPE %s counter\n%s %d\n", metricDrafts, metricDrafts, s.drafts)
		for i, v := range s.perPos {
			fmt.Fprintf(w, "%s{position=\"%d\"} %d\n", metricPerPos, i, v)
		}
		s.mu.Unlock()
		return
	case "/completion":
	default:
		http.NotFound(w, r)
		return
	}
	var req completionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	k := s.e.next(s.label)
	if s.m.onRequest != nil {
		s.m.onRequest(k)
	}
	m := s.m
	per, draft := m.perCycle, m.draftN
	if m.declined {
		per, draft = 1, 0
	}
	cycle := m.cycle
	if m.slow != nil {
		cycle = time.Duration(float64(cycle) * m.slow(k))
	}
	word := m.word
	if word == "" {
		word = "tok"
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	start := s.e.clock.now()
	n, cycles := 0, 0
	for n < req.NPredict {
		if r.Context().Err() != nil {
			return
		}
		s.e.clock.advance(cycle)
		cycles++
		for j := 0; j < per && n < req.NPredict; j++ {
			fmt.Fprintf(w, "data: {\"index\":0,\"content\":\" %s%d\",\"tokens\":[%d],\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":%d,\"tokens_evaluated\":3}\n\n", word, n, n, n+1)
			n++
		}
		fl.Flush()
		if m.failAt != nil && m.failAt(k) && n >= req.NPredict/2 {
			fmt.Fprint(w, "data: {\"error\":{\"code\":500,\"message\":\"The model produced output that does not match the expected Content-only format\",\"type\":\"server_error\"}}\n\n")
			fl.Flush()
			return
		}
	}
	ms := float64(s.e.clock.now().Sub(start)) / float64(time.Millisecond)
	tm := map[string]any{"predicted_n": n, "predicted_ms": ms, "predicted_per_second": float64(n) / ms * 1000}
	acc := per - 1
	if draft > 0 && !m.noDraftFields {
		tm["draft_n"] = draft * cycles
		tm["draft_n_accepted"] = acc * cycles
		if m.draftRounds {
			tm["draft_rounds"] = cycles
		}
	}
	if draft > 0 {
		s.mu.Lock()
		s.drafts += cycles
		for len(s.perPos) < draft {
			s.perPos = append(s.perPos, 0)
		}
		for p := 0; p < acc; p++ {
			s.perPos[p] += cycles
		}
		if m.diagnostics {
			s.diags = append(s.diags, Diag{Rounds: cycles, Proposed: draft * cycles, Accepted: acc * cycles, SyncMS: ms * 0.8, DecodeMS: ms})
		}
		s.mu.Unlock()
	}
	final := map[string]any{"index": 0, "content": "", "tokens": []int{}, "stop": true, "tokens_predicted": n, "timings": tm,
		"generation_settings": map[string]any{"stop": []string{}, "n_predict": req.NPredict}}
	b, _ := json.Marshal(final)
	fmt.Fprintf(w, "data: %s\n\n", b)
	fl.Flush()
}

// specArms is the standard sweep: classic, default = 4, widths 2, 4, 6.
func specArms(extra ...ArmSpec) []ArmSpec {
	arms := []ArmSpec{
		{Label: "classic", Kind: KindClassic},
		{Label: "default = 3", Kind: KindDefault, Width: 3, WidthSource: "engine default"},
		{Label: "width 2", Kind: KindWidth, Width: 2, WidthSource: "flag"},
		{Label: "width 4", Kind: KindWidth, Width: 4, WidthSource: "flag"},
		{Label: "width 6", Kind: KindWidth, Width: 6, WidthSource: "flag"},
	}
	return append(arms, extra...)
}

// costModels: 24 tokens per request. Classic 2 ms/token (48 ms); the
// default, width 3, emits 3 per 2.7 ms cycle (21.6 ms); width 2
// emits 2 per 2.4 ms cycle (28.8 ms); width 4 emits 4 per 3 ms (18 ms,
// fastest); width 6 emits 4 per 4 ms (acceptance saturated: 24 ms).
func costModels() map[string]engineModel {
	return map[string]engineModel{
		"classic":     {cycle: 2 * time.Millisecond, perCycle: 1},
		"default = 3": {cycle: 2700 * time.Microsecond, perCycle: 3, draftN: 2, metrics: true},
		"width 2":     {cycle: 2400 * time.Microsecond, perCycle: 2, draftN: 1, metrics: true},
		"width 4":     {cycle: 3 * time.Millisecond, perCycle: 4, draftN: 3, metrics: true},
		"width 6":     {cycle: 4 * time.Millisecond, perCycle: 4, draftN: 5, metrics: true},
	}
}

func testOptions(arms []ArmSpec) Options {
	return Options{Arms: arms, Rounds: 3, Warmup: 1, MaxTokens: 24, RequestTimeout: 10 * time.Second}
}

func armByLabel(t testing.TB, arms []ArmSpec, label string) int {
	for i, a := range arms {
		if a.Label == label {
			return i
		}
	}
	t.Fatalf("no arm %q", label)
	return -1
}

// liveServers is how many started servers were never stopped.
func (e *fakeEngine) liveServers() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.live)
}
