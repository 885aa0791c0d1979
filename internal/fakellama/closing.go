package fakellama

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// ClosingServer answers every request on a connection with one streamed
// response of events (each a complete "data: ...\n\n" SSE event) that
// advertises keep-alive, then closes the connection a moment later without
// reading further: what llama-server d32676d did after each streamed
// answer (docs/engines.md). A client that reuses the connection loses its
// next request. It returns the server's base URL and a stop function.
func ClosingServer(events []string) (baseURL string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
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
				for _, ev := range events {
					fmt.Fprintf(c, "%x\r\n%s\r\n", len(ev), ev)
				}
				fmt.Fprint(c, "0\r\n\r\n")
				time.Sleep(20 * time.Millisecond) // closes after the client could send again
			}()
		}
	}()
	return "http://" + l.Addr().String(), func() { l.Close() }, nil
}
