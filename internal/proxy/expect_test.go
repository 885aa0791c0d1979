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

// A client's Expect: 100-continue is answered once, by speclaunch's own
// server as the proxy reads the body; passed on, the engine's 100
// reached the client too, a second one.
func TestExpectContinueAnsweredOnce(t *testing.T) {
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		if e := r.Header.Get("Expect"); e != "" {
			t.Errorf("the engine got Expect: %q", e)
		}
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "ok")
	})
	p := New(Options{})
	p.Route(b)
	addr := strings.TrimPrefix(front(t, p), "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n")
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("first line %q, %v: want a 100 Continue", line, err)
	}
	fmt.Fprint(c, "{}")
	rest, _ := io.ReadAll(br)
	if n := strings.Count(string(rest), "HTTP/1.1 100"); n != 0 {
		t.Errorf("%d more 100 Continue after the first:\n%s", n, rest)
	}
	if !strings.Contains(string(rest), "HTTP/1.1 200") {
		t.Errorf("no 200:\n%s", rest)
	}
}
