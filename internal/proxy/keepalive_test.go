package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/fakellama"
)

// Back-to-back streamed requests through the proxy to an engine that
// closes each connection shortly after its answer while advertising
// keep-alive (llama-server d32676d did) all succeed: the proxy does not
// send a request on a connection the engine is about to close.
func TestEngineClosingAfterEachStreamLosesNoRequest(t *testing.T) {
	u, stop, err := fakellama.ClosingServer([]string{`data: {"content":"a"}` + "\n\n", "data: [DONE]\n\n"})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	b, err := NewBackend(u, "closing")
	if err != nil {
		t.Fatal(err)
	}
	p := New(Options{})
	p.Route(b)
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
