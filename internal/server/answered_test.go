package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/proxy"
	"github.com/speclaunch/speclaunch/internal/supervise"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

// refuseOnce refuses the first dial through it, as a gone socket does.
type refuseOnce struct{ done atomic.Bool }

func (r *refuseOnce) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.done.CompareAndSwap(false, true) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	return http.DefaultTransport.RoundTrip(req)
}

// A serving engine that refused one dial and answers its liveness check
// after it takes the held request: the check lifts the proxy's mark on it.
// Tier 2: a process, and the liveness check's own (short) real ticks.
func TestLivenessLiftsARefusal(t *testing.T) {
	testenv.E2E(t)
	t.Parallel()
	proc, err := supervise.Start(context.Background(), supervise.Spec{Argv: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Stop(time.Second)
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer engine.Close()
	b, err := proxy.NewBackend(engine.URL, "test")
	if err != nil {
		t.Fatal(err)
	}
	// The hold timeout bounds the test's run, should the request stay held.
	px := proxy.New(proxy.Options{Transport: &refuseOnce{}, HoldTimeout: 20 * time.Second})
	px.Route(b)
	rt := New(Options{Proxy: px})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := &live{inst: &Instance{ID: 1, Proc: proc, Backend: b, BaseURL: engine.URL}, ctx: ctx, cancel: cancel}
	got := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		px.ServeHTTP(w, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{}`)))
		got <- w
	}()
	testenv.WaitFor(t, "the refused request held", func() bool { return px.Stats().HeldNow > 0 })
	go rt.liveness(l, 3*time.Second)
	if w := <-got; w.Code != 200 || w.Body.String() != "ok" {
		t.Errorf("the held request: %d %q, want 200 from the engine once it answered /health", w.Code, w.Body.String())
	}
}
