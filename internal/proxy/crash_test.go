package proxy

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// An engine that dies in the middle of a streamed answer: the client's
// stream ends with an error event after what it had, never with a clean
// end that looks complete.
func TestEngineDeathMidStreamIsNotACleanEnd(t *testing.T) {
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		fmt.Fprint(w, "data: {\"content\":\"a\"}\n\n")
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close() // no terminating chunk: the engine died
	})
	p := New(Options{})
	p.Route(b)
	resp, err := http.Post(front(t, p)+"/completion", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the stream was cut (%v) instead of ending with an error event; got %q", err, body)
	}
	var events []string
	for _, e := range strings.Split(string(body), "\n\n") {
		if strings.TrimSpace(e) != "" {
			events = append(events, strings.TrimSpace(e))
		}
	}
	last := strings.TrimSpace(events[len(events)-1])
	if len(events) != 2 || !strings.HasPrefix(events[0], `data: {"content":"a"}`) ||
		!strings.HasPrefix(last, `data: {"error":{"code":502,`) || !strings.Contains(last, "incomplete") {
		t.Errorf("want the token, then a final error event; got %q", body)
	}
}

// An engine stopped before it answered, once speclaunch has stopped (the
// shutdown timeout passed, or a second signal): the client gets a 503
// with the reason at once, not a wait for the engine to be marked gone
// that outlasted the listener's grace and ended in an empty reply.
func TestEngineStoppedAtShutdownIsAnswered(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close() // stopped: no response byte
	})
	p := New(Options{})
	p.Route(b)
	got := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Post(front(t, p)+"/completion", "application/json", strings.NewReader(`{"prompt":"x"}`))
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	<-arrived
	p.Close()
	close(release)
	resp := <-got
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !strings.Contains(string(body), "stopped the engine before it answered") {
		t.Errorf("got %d %q, want 503 saying the engine was stopped before it answered", resp.StatusCode, body)
	}
}

// A stream under way when speclaunch cuts the requests (the shutdown
// timeout, a second signal) ends with an error event that says so, not
// one that blames the engine.
func TestStreamCutAtShutdownSaysSo(t *testing.T) {
	cut := make(chan struct{})
	b := backend(t, streamThenCut(t, cut))
	p := New(Options{})
	p.Route(b)
	resp, err := http.Post(front(t, p)+"/completion", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p.Close()
	close(cut)
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"code":503`) || !strings.Contains(string(body), "speclaunch stopped the engine during this response") {
		t.Errorf("got %q: want a final error event saying speclaunch stopped the engine", body)
	}
}

// streamThenCut is an engine that sends one event of a stream, then, once
// cut is closed, drops the connection as an engine stopped mid-answer.
func streamThenCut(t *testing.T, cut <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		fmt.Fprint(w, "data: {\"content\":\"a\"}\n\n")
		w.(http.Flusher).Flush()
		<-cut
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	}
}
