package loadgen

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A stream counts as whole only with its final event: finish_reason and
// [DONE] on the OpenAI routes, "stop":true on /completion. One that ends
// cleanly without it is cut, not OK.
func TestStreamFinalEvent(t *testing.T) {
	for _, c := range []struct {
		name, path, body string
		ok, cut, failed  int
	}{
		{"openai whole", "/v1/completions", "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n", 1, 0, 0},
		{"openai no [DONE]", "/v1/completions", "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":\"length\"}]}\n\n", 0, 1, 0},
		{"openai no finish_reason", "/v1/completions", "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}\n\ndata: [DONE]\n\n", 0, 1, 0},
		{"completion whole", "/completion", "data: {\"content\":\"a\",\"stop\":false}\n\ndata: {\"content\":\"\",\"stop\":true}\n\n", 1, 0, 0},
		{"completion cut", "/completion", "data: {\"content\":\"a\",\"stop\":false}\n\n", 0, 1, 0},
		// A token whose text is the word error is a token, not an error
		// event: on the H200 a code pair wrote it in 18 of 1,280 answers
		// (docs/benchmark_results/h200-follow-2026-12-05.md).
		{"openai token error", "/v1/completions", "data: {\"choices\":[{\"text\":\"error\",\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n", 1, 0, 0},
		{"completion token error", "/completion", "data: {\"content\":\"error\",\"stop\":false}\n\ndata: {\"content\":\"\",\"stop\":true}\n\n", 1, 0, 0},
		{"chat token error", "/v1/chat/completions", "data: {\"choices\":[{\"delta\":{\"content\":\"error\"},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", 1, 0, 0},
		{"error member false", "/completion", "data: {\"content\":\"a\",\"stop\":false,\"error\":false}\n\ndata: {\"content\":\"\",\"stop\":true}\n\n", 1, 0, 0},
		{"error message", "/completion", "data: {\"content\":\"a\",\"stop\":false}\n\ndata: {\"error\":\"the engine failed\"}\n\n", 0, 0, 1},
		{"error event", "/v1/completions", "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}\n\ndata: {\"error\":{\"code\":502,\"message\":\"the engine failed\"}}\n\n", 0, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, c.body)
			}))
			defer srv.Close()
			res, err := Run(context.Background(), Options{URL: srv.URL, Path: c.path, Clients: 1, Requests: 1, Stream: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.OK != c.ok || res.Cut != c.cut || res.Failed != c.failed || res.Bad() != c.cut+c.failed {
				t.Errorf("ok %d cut %d failed %d, want ok %d cut %d failed %d: %s", res.OK, res.Cut, res.Failed, c.ok, c.cut, c.failed, res)
			}
		})
	}
}

// A non-streamed answer counts its tokens in each shape an engine gives:
// the OpenAI completions and chat routes, and llama-server's native
// /completion (engine/testdata/h200/completion.json, captured from
// llama-server on the H200), which was read as empty.
func TestAnswerTokens(t *testing.T) {
	native, err := os.ReadFile(filepath.Join("..", "..", "engine", "testdata", "h200", "completion.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, body string
		tokens     int
		bad        bool
	}{
		{"completions", `{"choices":[{"text":"a b","finish_reason":"length"}],"usage":{"completion_tokens":2}}`, 2, false},
		{"chat", `{"choices":[{"message":{"role":"assistant","content":"a b c"}}],"usage":{"completion_tokens":3}}`, 3, false},
		{"native /completion", string(native), 16, false},
		{"native, no count", `{"content":"a","stop":true}`, 1, false},
		{"completions, no count", `{"choices":[{"text":"a"}]}`, 1, false},
		{"empty completions", `{"choices":[{"text":""}],"usage":{"completion_tokens":0}}`, 0, false},
		{"empty native", `{"content":"","stop":true,"tokens_predicted":0}`, 0, false},
		{"not JSON", `<html>`, 0, true},
	} {
		got, err := answerTokens([]byte(c.body))
		if got != c.tokens || (err != nil) != c.bad {
			t.Errorf("%s: %d tokens, err %v; want %d, bad %v", c.name, got, err, c.tokens, c.bad)
		}
	}
}

func TestLengths(t *testing.T) {
	for _, tc := range []struct {
		max    int
		spread float64
		n      int
		want   []int
	}{
		{200, 0, 3, []int{200, 200, 200}},
		{200, 0.5, 1, []int{200}},
		{200, 0.5, 8, []int{100, 243, 157, 300, 214, 129, 271, 186}},
		{200, 0.5, 6, []int{100, 300, 260, 220, 180, 140}},
		{2, 0.9, 2, []int{1, 4}},
	} {
		got := Lengths(tc.max, tc.spread, tc.n)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Lengths(%d, %g, %d) = %v, want %v", tc.max, tc.spread, tc.n, got, tc.want)
		}
		seen := map[int]bool{}
		for _, v := range got {
			seen[v] = true
		}
		if tc.spread > 0 && tc.n > 1 && len(seen) != tc.n {
			t.Errorf("Lengths(%d, %g, %d) = %v: not every step once", tc.max, tc.spread, tc.n, got)
		}
	}
}

// Each prompt's body carries its own length.
func TestBodiesSpread(t *testing.T) {
	bodies, err := requestBodies(Options{Prompts: []string{"a", "b"}, MaxTokens: 100, Spread: 0.5, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{`"max_tokens":50`, `"max_tokens":150`} {
		if !strings.Contains(string(bodies[i]), want) {
			t.Errorf("body %d = %s, want %s", i, bodies[i], want)
		}
	}
}

// A client pauses after a refusal as the server asks (Retry-After on 503
// or 429, bounded), and after a request that got no answer; a stopping
// speclaunch answered one client 58,814 times in 11 s.
func TestPause(t *testing.T) {
	for _, c := range []struct {
		name string
		out  outcome
		want time.Duration
	}{
		{"answered", outcome{status: 200}, 0},
		{"no answer", outcome{err: "connection refused"}, failBackoff},
		{"503 retry after 1", outcome{status: 503, err: "status 503", retryAfter: time.Second}, time.Second},
		{"429 retry after 1", outcome{status: 429, err: "status 429", retryAfter: time.Second}, time.Second},
		{"503 without retry after", outcome{status: 503, err: "status 503"}, failBackoff},
		{"503 asking an hour", outcome{status: 503, err: "status 503", retryAfter: time.Hour}, maxRetryAfter},
		{"500: the next request at once", outcome{status: 500, err: "status 500"}, 0},
	} {
		if got := pause(c.out); got != c.want {
			t.Errorf("%s: pause %v, want %v", c.name, got, c.want)
		}
	}
}

// The Retry-After a refusal carries is read (seconds), a date or garbage
// is not.
func TestRetryAfterRead(t *testing.T) {
	for _, c := range []struct {
		header string
		want   time.Duration
	}{{"1", time.Second}, {"30", 30 * time.Second}, {"", 0}, {"soon", 0}, {"Wed, 21 Oct 2015 07:28:00 GMT", 0}, {"-4", 0}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c.header != "" {
				w.Header().Set("Retry-After", c.header)
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		out := one(context.Background(), Options{URL: srv.URL, Path: "/v1/completions", Client: srv.Client(), Timeout: 10 * time.Second}, []byte("{}"))
		srv.Close()
		if out.status != 503 || out.retryAfter != c.want {
			t.Errorf("Retry-After %q: status %d, retry after %v, want 503 and %v", c.header, out.status, out.retryAfter, c.want)
		}
	}
}

// A client's pause after a refusal ends at Stop, and within the load's
// deadline: it waited out a Retry-After past both, lengthening a phase.
func TestPauseEndsWithTheLoad(t *testing.T) {
	stop := make(chan struct{})
	var sent atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sent.Add(1) == 1 {
			close(stop)
		}
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	o := Options{URL: srv.URL, Path: "/v1/completions", Client: srv.Client(), Timeout: 10 * time.Second, Stop: stop}
	res := Result{ByStatus: map[int]int{}, Errors: map[string]int{}}
	r := &run{o: o, bodies: [][]byte{[]byte("{}")}, res: res, after: func(time.Duration) <-chan time.Time { return nil }} // the pause never ends by itself
	done := make(chan struct{})
	go func() { r.client(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute): // a guard against a hang, not a measure
		t.Fatal("the client's pause did not end at Stop")
	}
	if n := sent.Load(); n != 1 {
		t.Errorf("%d requests sent, want 1 (none after Stop)", n)
	}

	var asked time.Duration
	o.Stop, o.Requests = nil, 1
	r = &run{o: o, bodies: [][]byte{[]byte("{}")}, res: res, deadline: time.Now().Add(time.Second), after: func(d time.Duration) <-chan time.Time {
		asked = d
		return time.After(0)
	}}
	r.client(context.Background())
	if asked <= 0 || asked > time.Second {
		t.Errorf("paused %v with the load ending within 1s, want at most 1s (not the 5s Retry-After)", asked)
	}
}
