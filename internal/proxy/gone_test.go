package proxy

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/testenv"
)

// stalled is an engine that takes a request and answers nothing until
// stop, then drops the connection: a request queued in an engine that is
// stopped, or dies, before it began to answer.
func stalled(t *testing.T) (b *Backend, arrived <-chan struct{}, stop chan<- struct{}) {
	a, s := make(chan struct{}, 8), make(chan struct{})
	b = backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		a <- struct{}{}
		<-s
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close() // no response byte
	})
	return b, a, s
}

func echo(t *testing.T) *Backend {
	return backend(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})
}

func post(u, body string, got chan<- string) {
	resp, err := http.Post(u+"/completion", "application/json", strings.NewReader(body))
	if err != nil {
		got <- err.Error()
		return
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	got <- fmt.Sprint(resp.StatusCode, " ", string(b))
}

// A request an engine took but had not begun to answer when it was marked
// gone (speclaunch stopped it at its drain timeout, or it died while it
// drained) is sent again, body intact, to the engine that serves: the one
// already routed (overlap), or the one released to the requests held
// (drain). Before, nothing marked a stopped engine gone: the request
// waited goneGrace and got 502 "the engine failed this request".
func TestGoneEngineSendsUnansweredRequestsOn(t *testing.T) {
	for _, mode := range []string{"overlap", "drain"} {
		t.Run(mode, func(t *testing.T) {
			old, arrived, stop := stalled(t)
			p := New(Options{})
			p.Route(old)
			got := make(chan string, 1)
			go post(front(t, p), `{"prompt":"abc"}`, got)
			<-arrived
			next := echo(t)
			if mode == "overlap" {
				p.Route(next)
			} else {
				p.Hold()
			}
			old.Gone() // as the runtime does before it stops the engine
			close(stop)
			if mode == "drain" {
				testenv.WaitFor(t, "the request held again", func() bool { return p.Stats().HeldNow == 1 })
				p.Route(next)
			}
			if g := <-got; g != `200 {"prompt":"abc"}` {
				t.Errorf("got %q, want the next engine's answer", g)
			}
			if p.Stats().RetriedTotal != 1 {
				t.Errorf("stats %+v", p.Stats())
			}
		})
	}
}

// A stream that speclaunch cuts by stopping its engine (the drain timeout
// passed) ends with an error event that says so, not one that blames the
// engine, and the proxy logs no engine failure for it. Before, it read
// "the engine failed during this response", with a warning.
func TestStreamCutByStopSaysWhy(t *testing.T) {
	cut := make(chan struct{})
	b := backend(t, streamThenCut(t, cut))
	var log bytes.Buffer
	p := New(Options{Log: slog.New(slog.NewTextHandler(&log, nil))})
	p.Route(b)
	resp, err := http.Post(front(t, p)+"/completion", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b.StopsWith("its drain timeout passed")
	b.Gone()
	close(cut)
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"code":503`) || !strings.Contains(string(body), "speclaunch stopped the engine during this response (its drain timeout passed)") {
		t.Errorf("got %q: want a final error event saying speclaunch stopped the engine, and why", body)
	}
	if strings.Contains(log.String(), "level=WARN") {
		t.Errorf("logged as an engine failure: %s", log.String())
	}
}

// A request whose body streamed through (it cannot be sent again) on an
// engine speclaunch stopped before it answered: 503 saying so, not 502
// "the engine failed this request".
func TestUnsentStoppedSaysWhy(t *testing.T) {
	old, arrived, stop := stalled(t)
	p := New(Options{BodyBudget: 1}) // every body streams through
	p.Route(old)
	got := make(chan string, 1)
	go post(front(t, p), `{"prompt":"abc"}`, got)
	<-arrived
	p.Route(echo(t))
	old.StopsWith("its drain timeout passed")
	old.Gone()
	close(stop)
	if g := <-got; !strings.HasPrefix(g, "503 ") || !strings.Contains(g, "speclaunch stopped the engine before it answered (its drain timeout passed)") {
		t.Errorf("got %q", g)
	}
}

// A request its engine left unanswered when no engine follows it (the
// runtime marks it GoneLast: no restart policy, so speclaunch stops) is
// logged as answered 503, which it is once the proxy closes. Before, a
// kill -9 with no restart policy logged "sending the request to the next
// engine" though none came.
func TestGoneLastSaysTheRequestGets503(t *testing.T) {
	old, arrived, stop := stalled(t)
	var log testenv.Buffer
	p := New(Options{Log: slog.New(slog.NewTextHandler(&log, nil))})
	p.Route(old)
	got := make(chan string, 1)
	go post(front(t, p), `{"prompt":"abc"}`, got)
	<-arrived
	p.Hold() // as the runtime does: Hold, Gone, Refuse, Cut
	old.GoneLast()
	close(stop)
	testenv.WaitFor(t, "the request held again", func() bool { return p.Stats().HeldNow == 1 })
	p.Refuse()
	p.Close(Cause{})
	if g := <-got; !strings.HasPrefix(g, "503 ") {
		t.Errorf("got %q, want 503", g)
	}
	if l := log.String(); !strings.Contains(l, "the engine ended before answering and no engine follows it (speclaunch stops); the request gets 503") || strings.Contains(l, "next engine") {
		t.Errorf("logged %s; want the request said to get 503, not sent to the next engine", l)
	}
	// Answered 503, it was not sent again: retried_total counts only what
	// reached a next engine.
	if st := p.Stats(); st.RetriedTotal != 0 {
		t.Errorf("retried %d, want 0", st.RetriedTotal)
	}
}
