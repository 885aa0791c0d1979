package serve

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// Past the cap a new connection reads 503 and is closed; a closed one
// gives its slot back, once however often it is closed.
func TestCappedListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl := newSlots(2)
	ln := &cappedListener{Listener: l, s: sl}
	defer ln.Close()
	accepted := make(chan net.Conn)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	first := <-accepted
	dial()
	<-accepted
	shed := dial()
	shed.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound on a broken cap, not a timing
	resp, err := http.ReadResponse(bufio.NewReader(shed), nil)
	if err != nil {
		t.Fatalf("a connection past the cap: %v, want a 503", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !json.Valid(body) || !strings.Contains(string(body), `"type":"unavailable_error"`) {
		t.Errorf("past the cap: %d, Retry-After %q, %s; want 503, a Retry-After and the engines' error body", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	first.Close()
	first.Close()
	dial()
	if c := <-accepted; c == nil {
		t.Fatal("no slot given back by a closed connection")
	}
	if len(sl.ch) != 2 {
		t.Errorf("%d slots held, want 2 (a double close gave back two)", len(sl.ch))
	}
}

// The cap leaves descriptors for engines and files under a low limit.
func TestCapFor(t *testing.T) {
	for _, c := range []struct{ nofile, want int }{
		{1 << 20, maxConns},
		{20000, maxConns},
		{4096, (4096 - connFDReserve) / 2},
		{1024, (1024 - connFDReserve) / 2},
		{256, minConns},
	} {
		if got := capFor(c.nofile); got != c.want {
			t.Errorf("capFor(%d) = %d, want %d", c.nofile, got, c.want)
		}
	}
}

// A header block past maxHeaderBytes is refused (431), so that a
// connection holds at most that much of one: 1,000 connections each
// trickling a 1 MB header took RSS to 1.9 GB with Go's default of 1 MiB.
func TestHeaderCap(t *testing.T) {
	srv, err := serveHTTP("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), newSlots(4), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.shutdown(time.Second)
	for _, c := range []struct {
		size int
		want int
	}{{8 << 10, http.StatusOK}, {64 << 10, http.StatusRequestHeaderFieldsTooLarge}} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+srv.ln.Addr().String()+"/", nil)
		req.Header.Set("X-Big", strings.Repeat("a", c.size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%d-byte header: %v", c.size, err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%d-byte header: %d, want %d", c.size, resp.StatusCode, c.want)
		}
	}
}

// At the cap a new connection takes the slot of one that waits for a
// request (connected and silent here); only a cap full of requests in
// progress sheds. Before, two silent connections held a cap of two, and
// /health read 503.
func TestCapReclaimsWaitingConnections(t *testing.T) {
	inHandler, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			inHandler <- struct{}{}
			<-release
		}
	})
	srv, err := serveHTTP("127.0.0.1:0", h, newSlots(2), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.shutdown(time.Second)
	defer close(release)
	addr := srv.ln.Addr().String()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second)) // a bound on a broken cap, not a timing
		t.Cleanup(func() { c.Close() })
		return c
	}
	closed := func(c net.Conn) bool {
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}
	// http.Server marks each accepted connection new before it accepts
	// the next, so the two wait in this order.
	silent1, silent2 := dial(), dial()
	for i, silent := range []net.Conn{silent1, silent2} {
		c := dial()
		c.Write([]byte("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"))
		select {
		case <-inHandler:
		case <-time.After(10 * time.Second): // a bound on a broken cap, not a timing
			t.Fatalf("request %d at a full cap never reached the handler", i+1)
		}
		if !closed(silent) {
			t.Fatalf("request %d at a full cap: silent connection %d still open, want it closed for the request", i+1, i+1)
		}
	}
	probe := dial()
	probe.Write([]byte("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"))
	resp, err := http.ReadResponse(bufio.NewReader(probe), nil)
	if err != nil {
		t.Fatalf("at a cap of requests in progress: %v, want a 503", err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("at a cap of requests in progress: %d, want 503", resp.StatusCode)
	}
}

// The waiting list is in the order connections began to wait: one kept
// alive after a reply waits from then, behind one accepted before it.
func TestWaitingOrder(t *testing.T) {
	sl := newSlots(3)
	conn := func() *slotConn {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		sl.ch <- struct{}{}
		return &slotConn{Conn: a, s: sl}
	}
	a, b, c := conn(), conn(), conn()
	sl.connState(a, http.StateNew)
	sl.connState(b, http.StateNew)
	sl.connState(c, http.StateNew)
	sl.connState(a, http.StateActive)
	sl.connState(a, http.StateIdle) // a's reply is out: it waits behind b and c
	sl.connState(c, http.StateActive)
	var got []string
	for sl.reclaim() {
		for name, x := range map[string]*slotConn{"a": a, "b": b, "c": c} {
			if x.closed && !slices.Contains(got, name) {
				got = append(got, name)
			}
		}
	}
	if want := []string{"b", "a"}; !slices.Equal(got, want) || len(sl.ch) != 1 {
		t.Errorf("reclaimed %v with %d slots left held, want b then a, and c (busy) holding 1", got, len(sl.ch))
	}
	sl.connState(b, http.StateIdle) // a closed connection never waits again
	if sl.reclaim() {
		t.Error("a closed connection was reclaimed again")
	}
}
