package proxy

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// An engine that dies in the middle of a streamed answer: the client's
// stream ends with an error event after what it had, never with a clean
// end that looks complete.
func TestEngineDeathMidStreamIsNotACleanEnd(t *testing.T) {
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		fmt.Fprint(w, "data: {\"content\":\"a\"}\n\n")
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close() // no terminating chunk: the engine died
	})
	p := New(Options{})
	p.Route(b)
	resp, err := http.Post(front(t, p)+"/completion", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the stream was cut (%v) instead of ending with an error event; got %q", err, body)
	}
	var events []string
	for _, e := range strings.Split(string(body), "\n\n") {
		if strings.TrimSpace(e) != "" {
			events = append(events, strings.TrimSpace(e))
		}
	}
	last := strings.TrimSpace(events[len(events)-1])
	if len(events) != 2 || !strings.HasPrefix(events[0], `data: {"content":"a"}`) ||
		!strings.HasPrefix(last, `data: {"error":{"code":502,`) || !strings.Contains(last, "incomplete") {
		t.Errorf("want the token, then a final error event; got %q", body)
	}
}
