package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A body over the replay cap streams through; one that does not arrive
// whole within the body timeout is answered 408 and its connection closed,
// as a kept body is (it was an empty 200: the engine answered what reached
// it).
func TestSlowStreamedBodyTimesOut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		engine http.HandlerFunc
	}{
		{"the engine answers what it read", func(w http.ResponseWriter, r *http.Request) { io.ReadAll(r.Body) }},
		{"the engine answers an error", func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body)
			http.Error(w, "bad json", http.StatusBadRequest)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rawClient(t, Options{BodyTimeout: 50 * time.Millisecond}, tc.engine)
			fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{\"prompt\":\"", maxReplay+1)
			c.SetReadDeadline(time.Now().Add(10 * time.Second)) // the test's own bound, never reached
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusRequestTimeout || !resp.Close || !strings.Contains(string(body), "did not arrive within 50ms") {
				t.Errorf("status %d close=%v: %s", resp.StatusCode, resp.Close, body)
			}
		})
	}
}
