package serve

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/follow"
	"github.com/speclaunch/speclaunch/internal/proxy"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

// The load the follower reads counts only clients' generation requests:
// polls of /v1/models, /props, /slots and /metrics and tokenize calls, in
// flight on the engine and held by the proxy, leave an idle server's width
// where it is (a load campaign saw 6 threads polling /v1/models move
// 1:5,2-3:4,4+:1 to width 1 with no completion at all); generations held
// beside them are its load.
func TestLoadCountsGenerationRequestsOnly(t *testing.T) {
	release := make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	eng := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.Write([]byte("{}"))
	}))
	t.Cleanup(eng.Close)
	b, err := proxy.NewBackend(eng.URL, "engine")
	if err != nil {
		t.Fatal(err)
	}
	px := proxy.New(proxy.Options{Metrics: func() []byte { return nil }})
	px.Route(b)
	front := httptest.NewServer(px)
	t.Cleanup(front.Close)
	// Before the servers close, which wait for their requests: a failed
	// check leaves some on the engine and some held.
	t.Cleanup(func() { free(); px.Close(proxy.Cause{}) })
	sv := &launcher{px: px}

	done := make(chan struct{}, 32)
	sent := 0
	send := func(method, path string) {
		sent++
		go func() {
			defer func() { done <- struct{}{} }()
			req, _ := http.NewRequest(method, front.URL+path, strings.NewReader(`{"content":"a"}`))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	polls := [][2]string{{"GET", "/v1/models"}, {"GET", "/v1/models"}, {"GET", "/props"}, {"GET", "/slots"}, {"GET", "/metrics"}, {"POST", "/tokenize"}}
	for _, r := range polls {
		send(r[0], r[1])
	}
	testenv.WaitFor(t, "the polls in flight", func() bool { return b.InFlight() == len(polls) })
	px.Hold()
	for _, r := range polls[:4] { // a held /metrics answers speclaunch's series at once
		send(r[0], r[1])
	}
	testenv.WaitFor(t, "the polls held", func() bool { return px.Stats().HeldNow == 4 })

	sched, err := schedule.Parse("1:5,2-3:4,4+:1", "test")
	if err != nil {
		t.Fatal(err)
	}
	cfg := follow.Config{Schedule: sched}
	st, now := follow.New(cfg, 5, 1100*time.Millisecond), time.Unix(1_800_000_000, 0)
	var d follow.Decision
	for end := now.Add(2 * time.Minute); now.Before(end); now = now.Add(follow.Tick) {
		if st, d = follow.Step(cfg, st, follow.Observation{Now: now, InFlight: sv.Load()}); d.Switch {
			t.Fatalf("the follower switched with no generation in flight: %s", d.Reason)
		}
	}
	if d.Load != 0 || d.To.Width != 5 {
		t.Errorf("the follower read load %.1f (bucket %s, width %d) from polls alone, want 0 (width 5)", d.Load, d.To.Range(), d.To.Width)
	}

	send("POST", "/v1/chat/completions")
	send("POST", "/completion")
	testenv.WaitFor(t, "the generations held", func() bool { return px.Stats().HeldNow == 6 })
	if n := sv.Load(); n != 2 {
		t.Errorf("Load() = %d with two generations held beside %d polls, want 2", n, len(polls)+4)
	}
	free()
	px.Route(b)
	for range sent {
		<-done
	}
	// A client has its answer a moment before the proxy's handler returns
	// and counts the request out (a CI run read 1 here): the load must come
	// back to 0, and WaitFor fails it if it never does.
	testenv.WaitFor(t, "the load back to 0 once every request was answered", func() bool { return sv.Load() == 0 })
}
