package loadgen

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A stream counts as whole only with its final event: finish_reason and
// [DONE] on the OpenAI routes, "stop":true on /completion. One that ends
// cleanly without it is cut, not OK.
func TestStreamFinalEvent(t *testing.T) {
	for _, c := range []struct {
		name, path, body string
		ok, cut          int
	}{
		{"openai whole", "/v1/completions", "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n", 1, 0},
		{"openai no [DONE]", "/v1/completions", "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":\"length\"}]}\n\n", 0, 1},
		{"openai no finish_reason", "/v1/completions", "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":null}]}\n\ndata: [DONE]\n\n", 0, 1},
		{"completion whole", "/completion", "data: {\"content\":\"a\",\"stop\":false}\n\ndata: {\"content\":\"\",\"stop\":true}\n\n", 1, 0},
		{"completion cut", "/completion", "data: {\"content\":\"a\",\"stop\":false}\n\n", 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, c.body)
			}))
			defer srv.Close()
			res, err := Run(context.Background(), Options{URL: srv.URL, Path: c.path, Clients: 1, Requests: 1, Stream: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.OK != c.ok || res.Cut != c.cut || res.Bad() != c.cut {
				t.Errorf("ok %d cut %d bad %d, want ok %d cut %d: %s", res.OK, res.Cut, res.Bad(), c.ok, c.cut, res)
			}
		})
	}
}
