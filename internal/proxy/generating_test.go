package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/testenv"
)

// Only a POST to a route that decodes tokens generates; reads of the
// engine's state, tokenize and embedding calls, and a generation route
// asked with another method do not.
func TestGenerates(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{"POST", "/completion", true},
		{"POST", "/completions", true},
		{"POST", "/v1/completions", true},
		{"POST", "/chat/completions", true},
		{"POST", "/v1/chat/completions", true},
		{"POST", "/api/chat", true},
		{"POST", "/infill", true},
		{"POST", "/v1/messages", true},
		{"POST", "/v1/responses", true},
		{"GET", "/v1/chat/completions", false},
		{"HEAD", "/completion", false},
		{"OPTIONS", "/v1/completions", false},
		{"GET", "/v1/models", false},
		{"GET", "/models", false},
		{"GET", "/props", false},
		{"POST", "/props", false},
		{"GET", "/metrics", false},
		{"GET", "/health", false},
		{"GET", "/slots", false},
		{"POST", "/slots/0", false},
		{"POST", "/tokenize", false},
		{"POST", "/detokenize", false},
		{"POST", "/apply-template", false},
		{"POST", "/embedding", false},
		{"POST", "/v1/embeddings", false},
		{"POST", "/rerank", false},
		{"POST", "/v1/messages/count_tokens", false},
		{"POST", "/v1/chat/completions/", false},
		{"POST", "/V1/completions", false},
		{"POST", "", false},
	} {
		if got := generates(tc.method, tc.path); got != tc.want {
			t.Errorf("generates(%q, %q) = %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}

// The load is the clients' generation requests, in flight or held: polls
// of /v1/models, /props and /metrics and a tokenize call, in flight or
// held, move neither the proxy's count nor the engine's, while the
// backend's own count (what a drain waits for) holds them all.
func TestGeneratingCountsGenerationRequestsOnly(t *testing.T) {
	release := make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.Write([]byte("{}"))
	})
	p := New(Options{Metrics: func() []byte { return nil }})
	p.Route(b)
	u := front(t, p)
	// Before the servers close, which wait for their requests: a failed
	// check leaves some on the engine and some held.
	t.Cleanup(func() { free(); p.Close(Cause{}) })
	done := make(chan struct{}, 16)
	sent := 0
	send := func(method, path string) {
		sent++
		go func() {
			defer func() { done <- struct{}{} }()
			req, _ := http.NewRequest(method, u+path, strings.NewReader(`{"prompt":"a"}`))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	check := func(when string, proxy, engine int) {
		t.Helper()
		if got := p.Generating(); got != proxy {
			t.Errorf("%s: Proxy.Generating() = %d, want %d", when, got, proxy)
		}
		if got := b.Generating(); got != engine {
			t.Errorf("%s: Backend.Generating() = %d, want %d", when, got, engine)
		}
	}
	polls := [][2]string{{"GET", "/v1/models"}, {"GET", "/props"}, {"GET", "/metrics"}, {"POST", "/tokenize"}}
	for _, r := range polls {
		send(r[0], r[1])
	}
	testenv.WaitFor(t, "the polls in flight", func() bool { return b.InFlight() == len(polls) })
	check("polls in flight", 0, 0)

	send("POST", "/v1/chat/completions")
	send("POST", "/completion")
	testenv.WaitFor(t, "two generations in flight beside the polls", func() bool { return b.InFlight() == len(polls)+2 })
	check("two generations in flight", 2, 2)

	p.Hold()
	for _, r := range polls {
		send(r[0], r[1])
	}
	send("POST", "/v1/completions")
	// /metrics is not held: while none serves it answers speclaunch's
	// series alone.
	held := len(polls) - 1 + 1 // the polls but /metrics, and the generation
	testenv.WaitFor(t, "the held requests", func() bool { return p.Stats().HeldNow == held })
	check("polls and a generation held", 3, 2)

	free()
	p.Route(b)
	for range sent {
		<-done
	}
	testenv.WaitFor(t, "every request answered", func() bool { return b.InFlight() == 0 })
	check("all answered", 0, 0)
}

// A generation whose body streams through is load, and work on its
// engine, once its body is whole: six clients that each sent part of a
// large body and stalled read as load 6, and the follower turned
// speculation off for everyone.
func TestStreamedBodyCountsOnceWhole(t *testing.T) {
	whole, release := make(chan struct{}), make(chan struct{})
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		close(whole)
		<-release
		w.Write([]byte("{}"))
	})
	p := New(Options{})
	p.Route(b)
	c, err := net.Dial("tcp", strings.TrimPrefix(front(t, p), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	size := maxReplay + 1<<20
	head := []byte(`{"prompt":"`)
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", size, head)
	check := func(when string, want int) {
		t.Helper()
		if p.Generating() != want || b.Generating() != want {
			t.Errorf("%s: Proxy.Generating() %d, Backend.Generating() %d; want %d", when, p.Generating(), b.Generating(), want)
		}
	}
	testenv.WaitFor(t, "the request on its engine", func() bool { return b.InFlight() == 1 })
	check("its body stalled", 0)
	c.Write(bytes.Repeat([]byte("a"), size-len(head)))
	<-whole
	testenv.WaitFor(t, "the body counted", func() bool { return p.Generating() == 1 })
	check("its body whole", 1)
	close(release)
	c.SetReadDeadline(time.Now().Add(30 * time.Second)) // the test's own bound, never reached
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	testenv.WaitFor(t, "the request answered", func() bool { return b.InFlight() == 0 })
	check("answered", 0)
}
