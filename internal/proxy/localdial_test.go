package proxy

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/testenv"
)

// failFirst fails its first n round trips with err and passes the rest
// to base.
type failFirst struct {
	n    atomic.Int32
	err  error
	base http.RoundTripper
}

func (f *failFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.n.Add(-1) >= 0 {
		return nil, f.err
	}
	return f.base.RoundTrip(req)
}

// dialErr is a failed dial as net/http's transport reports it.
func dialErr(call string, errno syscall.Errno) error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError(call, errno)}
}

// Load review of 088c135: one proxy→engine dial that failed for want of
// speclaunch's own descriptors (EMFILE) marked the serving engine dead for
// good, and every later request was held until the hold timeout. A dial
// that fails on speclaunch's side fails that one request (503, Retry-After)
// and leaves routing alone: the next request reaches the same engine.
func TestLocalDialFailureLeavesRouting(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.EADDRNOTAVAIL} {
		t.Run(errno.Error(), func(t *testing.T) {
			b := backend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
			tr := &failFirst{err: dialErr("socket", errno), base: http.DefaultTransport}
			tr.n.Store(1)
			// The hold timeout only bounds the test's run should a request
			// be held; no request may be.
			p := New(Options{Transport: tr, HoldTimeout: 50 * time.Millisecond})
			p.Route(b)
			for i, want := range []int{http.StatusServiceUnavailable, http.StatusOK} {
				w := httptest.NewRecorder()
				p.ServeHTTP(w, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"prompt":"x"}`)))
				body := w.Body.String()
				switch {
				case w.Code != want:
					t.Errorf("request %d: %d %q, want %d", i, w.Code, body, want)
				case want == http.StatusServiceUnavailable && (w.Header().Get("Retry-After") != "1" || !strings.Contains(body, errno.Error()) || !strings.Contains(body, "speclaunch's side")):
					t.Errorf("request %d: Retry-After %q, body %q: want 1 and the cause on speclaunch's side", i, w.Header().Get("Retry-After"), body)
				}
			}
			if st := p.Stats(); st.HeldTotal != 0 || st.RetriedTotal != 0 || st.RejectedTotal != 1 {
				t.Errorf("held %d, retried %d, rejected %d: want 0, 0, 1", st.HeldTotal, st.RetriedTotal, st.RejectedTotal)
			}
			if b.InFlight() != 0 {
				t.Errorf("%d requests left in flight", b.InFlight())
			}
		})
	}
}

// A dial that timed out (an engine too busy to accept, not gone) fails
// that one request and leaves routing alone too. A GET: no body to send
// again, so no wait to learn whether the engine is gone.
func TestDialTimeoutLeavesRouting(t *testing.T) {
	b := backend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	tr := &failFirst{err: timeout, base: http.DefaultTransport}
	tr.n.Store(1)
	p := New(Options{Transport: tr, HoldTimeout: 50 * time.Millisecond})
	p.Route(b)
	for i, want := range []int{http.StatusBadGateway, http.StatusOK} {
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest("GET", "/v1/models", nil))
		if w.Code != want {
			t.Errorf("request %d: %d %q, want %d", i, w.Code, w.Body.String(), want)
		}
	}
	if st := p.Stats(); st.HeldTotal != 0 || st.RetriedTotal != 0 {
		t.Errorf("held %d, retried %d: want neither", st.HeldTotal, st.RetriedTotal)
	}
}

// A refused dial from an engine that then answers its liveness check
// again (the runtime calls Answered): the mark is lifted and the held
// request goes to it, rather than every request waiting out the hold
// timeout while the engine serves and /health says ok. An engine marked
// gone stays gone.
func TestRefusalLiftsWhenTheEngineAnswers(t *testing.T) {
	b := backend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr := &failFirst{err: dialErr("connect", syscall.ECONNREFUSED), base: http.DefaultTransport}
	tr.n.Store(1)
	// The hold timeout bounds the test's run, should the request stay held.
	p := New(Options{Transport: tr, HoldTimeout: 10 * time.Second})
	p.Route(b)
	got := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"prompt":"x"}`)))
		got <- w
	}()
	testenv.WaitFor(t, "the refused request held", func() bool { return p.Stats().HeldNow == 1 })
	p.Answered(b)
	if w := <-got; w.Code != 200 || w.Body.String() != "ok" {
		t.Errorf("the held request: %d %q, want 200 from the engine that answered", w.Code, w.Body.String())
	}
	w := httptest.NewRecorder()
	p.ServeHTTP(w, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"prompt":"x"}`)))
	if w.Code != 200 || p.Stats().HeldTotal != 1 {
		t.Errorf("the next request: %d %q, held %d in all: want 200, 1", w.Code, w.Body.String(), p.Stats().HeldTotal)
	}
	b.Gone()
	p.Answered(b)
	if release, err := b.Track(); err == nil {
		release()
		t.Error("an engine marked gone took a request after Answered")
	}
}

// A refusal lifted between its mark and the retry's acquire (the liveness
// check answered in between) sends the request to the engine at once.
// Before, acquire skipped the engine the request left and queued it with
// nothing to release it: 503 at the hold timeout.
func TestRefusalLiftedBeforeTheRetry(t *testing.T) {
	b := backend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	tr := &failFirst{err: dialErr("connect", syscall.ECONNREFUSED), base: http.DefaultTransport}
	tr.n.Store(1)
	var p *Proxy
	lift := slog.New(handlerFunc(func(r slog.Record) {
		if strings.Contains(r.Message, "refused a connection") {
			p.Answered(b)
		}
	}))
	// The hold timeout bounds the test's run, should the request stay held.
	p = New(Options{Transport: tr, HoldTimeout: 10 * time.Second, Log: lift})
	p.Route(b)
	w := httptest.NewRecorder()
	p.ServeHTTP(w, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"prompt":"x"}`)))
	if w.Code != 200 || p.Stats().HeldTotal != 0 {
		t.Errorf("%d %q, held %d: want 200 from the engine, never held", w.Code, w.Body.String(), p.Stats().HeldTotal)
	}
}

// handlerFunc is a slog handler that calls f on every record.
type handlerFunc func(slog.Record)

func (f handlerFunc) Enabled(context.Context, slog.Level) bool      { return true }
func (f handlerFunc) Handle(_ context.Context, r slog.Record) error { f(r); return nil }
func (f handlerFunc) WithAttrs([]slog.Attr) slog.Handler            { return f }
func (f handlerFunc) WithGroup(string) slog.Handler                 { return f }
