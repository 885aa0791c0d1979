package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/testenv"
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
	p.Close(shutdown)
	close(release)
	resp := <-got
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !strings.Contains(string(body), "stopped the engine before it answered (the shutdown timeout passed)") {
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
	p.Close(shutdown)
	close(cut)
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"code":503`) || !strings.Contains(string(body), "speclaunch stopped the engine during this response") {
		t.Errorf("got %q: want a final error event saying speclaunch stopped the engine", body)
	}
}

// shutdown is the cause the runtime closes the proxy with when the
// shutdown timeout passes (internal/server/machine.go, stopAll).
var shutdown = Cause{What: "speclaunch stopped the engine", Why: "the shutdown timeout passed"}

// A request its engine left unanswered, or a stream it cut, when the
// proxy closes: the client is told the cause the proxy was closed with,
// an engine's exit as well as speclaunch's own stop, whichever of the
// engine's drop and the runtime's Gone and Cut comes first. Before, every
// one read "speclaunch stopped the engine ... (the shutdown timeout
// passed, or a second signal came)", also after a kill -9 with no restart
// policy, where no signal came; and a stream the kill broke before the
// runtime saw the exit read "the engine failed".
func TestCutSaysItsCause(t *testing.T) {
	exited := Cause{What: "the engine exited with code 137"}
	const (
		closeFirst = iota // the runtime's Gone and Cut, then the engine's drop
		goneFirst         // Gone, the drop, then Cut
		dropFirst         // the drop, then Gone and Cut (a kill: the socket closes before the runtime reaps the process)
	)
	for _, tc := range []struct {
		name   string
		stream bool
		cause  Cause
		order  int
		want   string
	}{
		{"queued, engine exited, gone first", false, exited, goneFirst, "the engine exited with code 137 before it answered; retry shortly"},
		{"queued, engine exited, closed first", false, exited, closeFirst, "the engine exited with code 137 before it answered; retry shortly"},
		{"queued, shutdown", false, shutdown, closeFirst, "speclaunch stopped the engine before it answered (the shutdown timeout passed); retry shortly"},
		{"stream, engine exited, closed first", true, exited, closeFirst, "the engine exited with code 137 during this response; the output is incomplete"},
		{"stream, engine exited, dropped first", true, exited, dropFirst, "the engine exited with code 137 during this response; the output is incomplete"},
		{"stream, shutdown", true, shutdown, closeFirst, "speclaunch stopped the engine during this response (the shutdown timeout passed); the output is incomplete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, arrived, stop := stalled(t)
			if tc.stream {
				a, cut := make(chan struct{}, 1), make(chan struct{})
				h := streamThenCut(t, cut)
				b = backend(t, func(w http.ResponseWriter, r *http.Request) { a <- struct{}{}; h(w, r) })
				arrived, stop = a, cut
			}
			var log testenv.Buffer
			p := New(Options{Log: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			p.Route(b)
			got := make(chan string, 1)
			go post(front(t, p), `{"prompt":"abc","stream":true}`, got)
			<-arrived
			// As the runtime does when the serving engine ends with no
			// engine to follow it: Hold, Gone (last), Refuse, Cut; at the
			// shutdown timeout, Refuse and Cut.
			gone := func() {
				if tc.cause != shutdown {
					p.Hold()
					b.GoneLast()
				}
				p.Refuse()
			}
			switch tc.order {
			case closeFirst:
				gone()
				p.Close(tc.cause)
				close(stop)
			case goneFirst:
				gone()
				close(stop)
				testenv.WaitFor(t, "the request held again", func() bool { return p.Stats().HeldNow == 1 })
				p.Close(tc.cause)
			case dropFirst:
				close(stop)
				testenv.WaitFor(t, "the broken stream waiting for its cause", func() bool { return strings.Contains(log.String(), "waiting to learn whether its engine exited") })
				gone()
				p.Close(tc.cause)
			}
			g := <-got
			if !strings.Contains(g, tc.want) || (!tc.stream && !strings.HasPrefix(g, "503 ")) {
				t.Errorf("got %q, want %q", g, tc.want)
			}
		})
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

// A request held for an engine that never comes (a crashed engine's
// restart back-off, cut by a signal) is told Close's cause, as the runtime
// gives it: before, Refuse and Close let it go as "speclaunch is stopping",
// which the docs do not say of that case.
func TestHeldRequestToldTheCause(t *testing.T) {
	backoff := Cause{What: "speclaunch stopped the engine", Why: "a SIGTERM came while the engine waited to start again"}
	for _, tc := range []struct {
		name  string
		cause Cause
		want  string
	}{
		{"the back-off cut by a signal", backoff, "speclaunch stopped the engine before it answered (a SIGTERM came while the engine waited to start again); retry shortly"},
		{"closed with no cause", Cause{}, "speclaunch is stopping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Options{})
			p.Route(backend(t, func(w http.ResponseWriter, r *http.Request) {}))
			p.Hold() // the engine crashed; its restart waits out the back-off
			got := make(chan string, 1)
			go post(front(t, p), `{"prompt":"abc"}`, got)
			testenv.WaitFor(t, "the request held", func() bool { return p.Stats().HeldNow == 1 })
			p.Refuse()
			p.Close(tc.cause)
			if body := <-got; !strings.Contains(body, tc.want) {
				t.Errorf("the held request read %q, want %q", body, tc.want)
			}
		})
	}
}
