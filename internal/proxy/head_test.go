package proxy

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// HEAD of a path the launcher owns (/health, /metrics, the status page and
// speclaunch's metrics) is answered by the proxy with GET's status and no
// body, and never reaches the engine: a hung engine (here one that answers
// nothing) cannot hang it, and no answer carries the engine's headers.
// Before, HEAD /health and HEAD /metrics went through to the engine.
func TestHeadOfOwnPathsNeverReachesTheEngine(t *testing.T) {
	var mu sync.Mutex
	var reached []string
	hung := make(chan struct{})
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached = append(reached, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Server", "engine")
		select { // hung: answers nothing until the test ends
		case <-hung:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(hung) }) // before the engine's server closes
	p := New(Options{
		Status:  http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"status":"page"}`) }),
		Metrics: func() []byte { return []byte("speclaunch_up 1\n") },
	})
	u := front(t, p)
	c := &http.Client{Timeout: 5 * time.Second} // a bound to give up, not a judge of speed
	do := func(method, path string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(method, u+path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v (the engine is hung: the proxy must answer itself)", method, path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Server"), string(body)
	}
	if code, _, _ := do(http.MethodHead, "/health"); code != http.StatusServiceUnavailable {
		t.Errorf("HEAD /health before the first engine: %d, want 503 as GET answers (loading)", code)
	}
	p.Route(b)
	paths := []string{"/health", "/metrics", StatusPath, MetricsPath}
	for _, path := range paths {
		code, server, body := do(http.MethodHead, path)
		if code != http.StatusOK || server != "" || body != "" {
			t.Errorf("HEAD %s: %d, Server %q, body %q; want 200 from the proxy, no body", path, code, server, body)
		}
		if path == "/metrics" {
			continue // GET /metrics asks the engine for its series (bounded)
		}
		if get, _, _ := do(http.MethodGet, path); get != code {
			t.Errorf("GET %s: %d, HEAD %d: want the same status", path, get, code)
		}
	}
	p.SetAPIKeys([]string{"sk-test-key-0001"}, true)
	for _, path := range []string{"/metrics", StatusPath, MetricsPath} {
		if code, server, _ := do(http.MethodHead, path); code != http.StatusUnauthorized || server != "" {
			t.Errorf("HEAD %s without the engine's key: %d, Server %q; want the proxy's 401", path, code, server)
		}
	}
	p.Hold()
	if code, _, body := do(http.MethodHead, "/health"); code != http.StatusOK || body != "" {
		t.Errorf("HEAD /health while held: %d %q, want 200 (switching) with no body", code, body)
	}
	p.Refuse()
	if code, _, _ := do(http.MethodHead, "/health"); code != http.StatusServiceUnavailable {
		t.Errorf("HEAD /health while stopping: %d, want 503", code)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reached) != 0 {
		t.Errorf("the engine was asked %q; none of these paths may reach it", reached)
	}
}
