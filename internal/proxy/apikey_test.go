package proxy

import (
	"io"
	"net/http"
	"testing"

	"github.com/speclaunch/speclaunch/internal/secret"
)

// With the engine's keys set, the proxy's own status page asks for one as
// llama-server asks on its routes; /health stays public; every other
// request goes to the engine with its Authorization header untouched (the
// engine checks it).
func TestStatusNeedsTheEnginesKey(t *testing.T) {
	b := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path+" auth="+r.Header.Get("Authorization"))
	})
	p := New(Options{Status: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "status") }),
		APIKeys: []string{"sk-old-key-0001"}})
	p.Route(b)
	url := front(t, p)
	do := func(path, auth string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, c := range []struct {
		name, path, auth string
		keys             []string // SetAPIKeys before the request; nil = keep
		code             int
		body             string // "" = not checked
	}{
		{"status without a key", StatusPath, "", nil, 401, secret.UnauthorizedBody},
		{"status with a wrong key", StatusPath, "Bearer nope", nil, 401, secret.UnauthorizedBody},
		{"status with the key", StatusPath, "Bearer sk-old-key-0001", nil, 200, "status"},
		{"health is public", "/health", "", nil, 200, ""}, // answered by the proxy or the engine
		{"engine routes pass through", "/slots", "Bearer x", nil, 200, "/slots auth=Bearer x"},
		{"a new engine's key replaces the old", StatusPath, "Bearer sk-old-key-0001", []string{"sk-new-key-0002"}, 401, secret.UnauthorizedBody},
		{"the new key is asked", StatusPath, "Bearer sk-new-key-0002", nil, 200, "status"},
		{"no key: open", StatusPath, "", []string{}, 200, "status"},
	} {
		if c.keys != nil {
			p.SetAPIKeys(c.keys, true)
		}
		if code, body := do(c.path, c.auth); code != c.code || (c.body != "" && body != c.body) {
			t.Errorf("%s: %d %q, want %d %q", c.name, code, body, c.code, c.body)
		}
	}
}
