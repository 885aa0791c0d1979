package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
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
