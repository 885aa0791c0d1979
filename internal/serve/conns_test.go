package serve

import (
	"bufio"
	"log/slog"
	"net"
	"net/http"
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
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("past the cap: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
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
