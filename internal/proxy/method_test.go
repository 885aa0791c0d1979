package proxy

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// The paths speclaunch answers itself with a page (the status page and
// its own metrics) answer GET and HEAD; any other method gets 405 with
// Allow: GET, HEAD, as the engine's own GET routes (/health) answer, and
// neither the page nor the engine is asked. Before, DELETE, POST, PUT,
// PATCH, OPTIONS and TRACE got 200 and the whole page.
func TestOwnPagesAnswerGETAndHEADOnly(t *testing.T) {
	var reached, pages atomic.Int32
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		io.WriteString(w, "engine")
	})
	p := New(Options{
		Status: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pages.Add(1)
			io.WriteString(w, `{"status":"page"}`)
		}),
		Metrics: func() []byte { return []byte("speclaunch_up 1\n") },
	})
	p.Route(b)
	u := front(t, p)
	for _, path := range []string{StatusPath, MetricsPath} {
		for _, method := range []string{http.MethodDelete, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodOptions, http.MethodTrace} {
			req, _ := http.NewRequest(method, u+path, strings.NewReader(`{}`))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d, Allow %q; want 405, Allow \"GET, HEAD\"", method, path, resp.StatusCode, resp.Header.Get("Allow"))
			}
			if strings.Contains(string(body), "page") || strings.Contains(string(body), "speclaunch_up") {
				t.Errorf("%s %s answered the page: %q", method, path, body)
			}
		}
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			req, _ := http.NewRequest(method, u+path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s %s: %d, want 200", method, path, resp.StatusCode)
			}
		}
	}
	if n := pages.Load(); n != 2 { // the GET and the HEAD of the status page
		t.Errorf("the status page was asked %d times, want 2", n)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the engine was asked %d times; none of these paths may reach it", n)
	}
}
