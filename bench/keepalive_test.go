package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// Back-to-back measured requests to an engine that closes each connection
// shortly after its streamed answer, while advertising keep-alive (what
// llama-server d32676d did, docs/engines.md), all succeed: the bench client
// never sends a request on a connection the engine is about to close.
func TestClientEngineClosingAfterEachStream(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
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
				for _, ev := range []string{
					`data: {"content":"a","stop":false}` + "\n\n",
					`data: {"content":"","stop":true,"tokens_predicted":1,"timings":{"predicted_n":1,"predicted_ms":1}}` + "\n\n",
				} {
					fmt.Fprintf(c, "%x\r\n%s\r\n", len(ev), ev)
				}
				fmt.Fprint(c, "0\r\n\r\n")
				time.Sleep(20 * time.Millisecond) // closes after the client could send again
			}()
		}
	}()
	c := newClient(10 * time.Second)
	failed := 0
	for i := range 40 {
		if res := c.complete(context.Background(), "http://"+l.Addr().String(), []byte(`{"stream":true}`)); res.err != nil {
			failed++
			t.Logf("request %d: %v", i, res.err)
		}
	}
	if failed > 0 {
		t.Errorf("%d of 40 requests failed", failed)
	}
}
