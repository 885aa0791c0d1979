package proxy

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// slowTail wraps the inbound body. It stands in for net/http's transport
// writeLoop being descheduled between sending the body's last byte to the
// engine and its one extra read of the inbound body (transfer.go, nextra).
// A read made while the request is routed waits until the front server has
// flushed the answer's headers; a read that returns the body's end before
// the request is routed (the body was read in full up front) means no
// upstream read can follow: ok closes.
type slowTail struct {
	io.ReadCloser
	b       *Backend
	flushed <-chan struct{}
	ok      chan struct{}
	eof     bool
	closed  bool
}

func (s *slowTail) Read(p []byte) (int, error) {
	routed := s.b.InFlight() > 0
	gated := routed && s.eof
	if gated {
		<-s.flushed // a read after the body's end, once routed: only net/http's transport makes it
	}
	n, err := s.ReadCloser.Read(p)
	if err == io.EOF {
		s.eof = true
		if (!routed || gated) && !s.closed {
			s.closed = true
			close(s.ok)
		}
	}
	return n, err
}

func (f *flushSpy) Unwrap() http.ResponseWriter { return f.ResponseWriter }

type flushSpy struct {
	http.ResponseWriter
	once    bool
	flushed chan struct{}
}

func (f *flushSpy) Flush() {
	f.ResponseWriter.(http.Flusher).Flush() // writes the headers: net/http's server discards and closes the unread inbound body here
	if !f.once {
		f.once = true
		close(f.flushed)
	}
}

// The stream cut of overlap switches, with net/http's own server and
// transport: once the front server flushed the answer's headers with the
// inbound body not read to its end, it read and closed the body itself;
// the transport's last read of it then failed and closed the engine
// connection mid-stream. slowTail holds that last read until the headers
// are out, which is the window the race needed; the proxy reads the body
// before it goes upstream, so no such read comes.
func TestLateBodyReadCutsStream(t *testing.T) {
	tails := make(chan *slowTail, 1)
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		tail := <-tails
		io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"content\":\"a\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done(): // the proxy closed the engine connection: the cut
			return
		case <-tail.ok:
		}
		io.WriteString(w, "data: {\"content\":\"b\"}\n\ndata: [DONE]\n\n")
	})
	p := New(Options{})
	p.Route(b)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs := &flushSpy{ResponseWriter: w, flushed: make(chan struct{})}
		tail := &slowTail{ReadCloser: r.Body, b: b, flushed: fs.flushed, ok: make(chan struct{})}
		tails <- tail
		r.Body = tail
		p.ServeHTTP(fs, r)
	}))
	defer s.Close()
	resp, err := http.Post(s.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	all, err := io.ReadAll(bufio.NewReader(resp.Body))
	if err != nil || !strings.Contains(string(all), "[DONE]") || strings.Contains(string(all), `"error"`) {
		t.Fatalf("stream cut: err %v, got %q", err, all)
	}
}
