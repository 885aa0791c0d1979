package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// An engine that dies in the middle of a streamed answer: the client's
// response is cut short as it would be talking to the engine directly (a
// read error), not ended cleanly as if the answer were complete.
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
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	_, err = io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("the stream ended cleanly after %q: the client cannot tell it was cut short", line)
	}
}
