package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// closingEngine answers each request on a connection with a streamed
// response that advertises keep-alive, then closes the connection a moment
// later without reading further: what llama-server d32676d did on the H200
// after every streamed answer (docs/benchmark_results/README.md). A client
// that reuses the connection has its next request lost.
func closingEngine(t *testing.T) *Backend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nKeep-Alive: timeout=5, max=100\r\nTransfer-Encoding: chunked\r\n\r\n")
				for _, ev := range []string{`data: {"content":"a"}` + "\n\n", "data: [DONE]\n\n"} {
					fmt.Fprintf(c, "%x\r\n%s\r\n", len(ev), ev)
				}
				fmt.Fprint(c, "0\r\n\r\n")
				time.Sleep(20 * time.Millisecond) // closes after the client could send again
			}()
		}
	}()
	b, err := NewBackend("http://"+l.Addr().String(), "closing")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Back-to-back streamed requests through the proxy to an engine that
// closes each connection after its answer all succeed: the proxy does not
// send a request on a connection the engine is about to close.
func TestEngineClosingAfterEachStreamLosesNoRequest(t *testing.T) {
	p := New(Options{})
	p.Route(closingEngine(t))
	url := front(t, p) + "/completion"
	client := &http.Client{Timeout: 10 * time.Second}
	failed := 0
	for i := range 40 {
		resp, err := client.Post(url, "application/json", strings.NewReader(`{"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), "[DONE]") {
			failed++
			t.Logf("request %d: %d %v %q", i, resp.StatusCode, err, body)
		}
	}
	if failed > 0 {
		t.Errorf("%d of 40 streamed requests failed", failed)
	}
}
