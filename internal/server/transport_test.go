package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/proxy"
)

// The launcher's own requests (a probe, a scrape, a verification) count
// in flight on their engine like a client's: a drain waits for them, and
// once the engine is being stopped a new one is refused (it asks the
// engine that serves now) instead of failing half-way on a dead engine.
func TestLauncherRequestsAreCounted(t *testing.T) {
	release := make(chan struct{})
	reached := make(chan struct{}, 2)
	eng := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- struct{}{}
		<-release
		io.WriteString(w, `{"ok":true}`)
	}))
	defer eng.Close()
	b, err := proxy.NewBackend(eng.URL, "engine 1")
	if err != nil {
		t.Fatal(err)
	}
	rt := New(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt.engines[1] = &live{inst: &Instance{ID: 1, Backend: b}, ctx: ctx, cancel: cancel}
	client := &http.Client{Transport: rt.Transport(nil)}

	probe := make(chan error, 1)
	go func() {
		resp, err := client.Post(eng.URL+"/completion", "application/json", nil)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		probe <- err
	}()
	<-reached
	if n := b.InFlight(); n != 1 {
		t.Fatalf("in flight %d during the launcher's request, want 1", n)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	left := b.Drain(dctx)
	dcancel()
	if left != 1 {
		t.Fatalf("a drain would stop the engine under the launcher's request (left %d)", left)
	}
	drained := make(chan int, 1)
	go func() { drained <- b.Drain(context.Background()) }()
	close(release)
	if err := <-probe; err != nil {
		t.Fatalf("the launcher's request failed: %v", err)
	}
	if left := <-drained; left != 0 {
		t.Fatalf("drain ended with %d in flight", left)
	}

	b.Closing()
	_, err = client.Get(eng.URL + "/metrics")
	if !errors.Is(err, proxy.ErrEngineReplaced) {
		t.Fatalf("a request on an engine being stopped: %v, want ErrEngineReplaced", err)
	}
	select {
	case <-reached:
		t.Fatal("the refused request reached the engine")
	default:
	}
}

// Beside counts the engines that share the serving one's GPU: the one it
// replaced until that one's process ends, one starting beside it, and all
// of them while none serves.
func TestBeside(t *testing.T) {
	for _, tc := range []struct {
		name    string
		engines []EngineID
		serving EngineID
		want    int
	}{
		{"one engine, serving", []EngineID{1}, 1, 0},
		{"the old one draining", []EngineID{1, 2}, 2, 1},
		{"a new one starting", []EngineID{2, 3}, 2, 1},
		{"none serving: a drain switch's new one starting", []EngineID{3}, 0, 1},
		{"none at all", nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := New(Options{})
			for _, id := range tc.engines {
				rt.engines[id] = &live{}
			}
			rt.serving = tc.serving
			if got := rt.Beside(); got != tc.want {
				t.Errorf("Beside() = %d, want %d", got, tc.want)
			}
		})
	}
}
