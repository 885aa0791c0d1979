package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/testenv"
	"github.com/speclaunch/speclaunch/internal/waitlog/waitlogtest"
)

// A client that stops reading an answer ends its request once one write
// has waited SendTimeout: the engine sees the request cancelled and its
// slot is free for others. Before, it streamed into full buffers for as
// long as the client held the connection.
func TestSendTimeoutEndsAStalledAnswer(t *testing.T) {
	cancelled := make(chan struct{})
	engine := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := []byte("data: " + strings.Repeat("x", 64<<10) + "\n\n")
		for {
			if _, err := w.Write(chunk); err != nil {
				break
			}
			w.(http.Flusher).Flush()
			if r.Context().Err() != nil {
				break
			}
		}
		<-r.Context().Done()
		close(cancelled)
	}
	c := rawClient(t, Options{SendTimeout: 100 * time.Millisecond}, engine)
	body := `{"prompt":"x","stream":true}`
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// The client reads nothing from here on.
	select {
	case <-cancelled:
	case <-time.After(20 * time.Second): // the test's own bound on a broken timeout, not a timing
		t.Fatal("the engine's request was never cancelled: a client that does not read holds its slot")
	}
}

// A client that half-closes after its request gets no answer rather than
// an empty 200: Go ends the request's context on the EOF, which the proxy
// reads as the client gone. The engine itself answers such a client with
// nothing, too.
func TestHalfClosedClientGetsNoEmpty200(t *testing.T) {
	engine := func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)   // read whole, so that Go watches the connection for its end
		<-r.Context().Done() // answers only once the request is over
	}
	c := rawClient(t, Options{}, engine)
	body := `{"prompt":"x","max_tokens":3}`
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // the test's own bound, never reached
	got, err := io.ReadAll(c)
	if len(got) > 0 || err != nil {
		t.Errorf("a half-closed client read %q (%v), want the connection closed with nothing", got, err)
	}
}

// The send timeout bounds one stalled write, never a stream's length: a
// stream longer than the timeout reaches a client that reads it whole.
// With the deadline armed once per request this stream was cut.
func TestSendTimeoutLeavesALongStream(t *testing.T) {
	const events = 6
	engine := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range events {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond) // the stream outlasts the 100 ms timeout
		}
	}
	c := rawClient(t, Options{SendTimeout: 100 * time.Millisecond}, engine)
	body := `{"prompt":"x","stream":true}`
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // the test's own bound, never reached
	got, _ := io.ReadAll(c)
	if n := strings.Count(string(got), "data: "); n != events {
		t.Errorf("%d of %d events reached the client:\n%s", n, events, got)
	}
}

// A request the send timeout ends is logged, with its path and how long
// its write waited, and no more than one line per burstEvery: the
// second client that stops reading is logged when the window ends. Before,
// the cut left no trace in the log; then the second of two cuts at once
// was held for a next line that never came.
func TestSendTimeoutIsLogged(t *testing.T) {
	var log testenv.Buffer
	engine := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := []byte("data: " + strings.Repeat("x", 64<<10) + "\n\n")
		for r.Context().Err() == nil {
			w.Write(chunk)
			w.(http.Flusher).Flush()
		}
	}
	p := New(Options{SendTimeout: 100 * time.Millisecond, Log: slog.New(slog.NewTextHandler(&log, nil))})
	clock := &waitlogtest.Clock{}
	p.stalls.clock = clock
	p.Route(backend(t, engine))
	addr := strings.TrimPrefix(front(t, p), "http://")
	stall := func() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		body := `{"prompt":"x","stream":true}`
		fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		// The client reads nothing from here on.
	}
	stall()
	testenv.WaitFor(t, "the cut logged", func() bool { return strings.Contains(log.String(), "stopped reading") })
	line := log.String()
	if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "path=/v1/completions") || !strings.Contains(line, "waited=") {
		t.Errorf("the line should say the path and how long the write waited, at warn:\n%s", line)
	}
	stall()
	testenv.WaitFor(t, "the second cut counted", func() bool {
		p.stalls.mu.Lock()
		defer p.stalls.mu.Unlock()
		return p.stalls.unsaid == 1
	})
	if n := strings.Count(log.String(), "stopped reading"); n != 1 {
		t.Errorf("%d lines for two cuts within %s, want 1:\n%s", n, burstEvery, log.String())
	}
	clock.Advance(burstEvery) // the window ends with no further cut
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "stopped reading") || !strings.Contains(lines[1], "path=/v1/completions") ||
		!strings.Contains(lines[1], "more_since_last_line=0") {
		t.Errorf("the second cut should be logged when the window ends, alone:\n%s", log.String())
	}
}
