package sim

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/secret"
)

// With keys, the sim checks them as llama-server does: the public paths
// answer without one, every other path answers 401 with llama-server's
// body unless the request carries one of the keys (Authorization, with or
// without "Bearer ", or X-Api-Key). Without keys, everything is open.
func TestAPIKey(t *testing.T) {
	cfg := testConfig(dflash, 4)
	cfg.Clock = nil
	cfg.APIKeys = []string{"sk-one", "sk-two"}
	r := startSim(t, cfg)
	open := startSim(t, testConfig(dflash, 4))
	for _, c := range []struct {
		name, base, method, path, hdr, val string
		want                               int
	}{
		{"health is public", r.base, "GET", "/health", "", "", 200},
		{"models are public", r.base, "GET", "/v1/models", "", "", 200},
		{"completion without a key", r.base, "POST", "/v1/completions", "", "", 401},
		{"metrics without a key", r.base, "GET", "/metrics", "", "", 401},
		{"props without a key", r.base, "GET", "/props", "", "", 401},
		{"a wrong key", r.base, "POST", "/completion", "Authorization", "Bearer sk-three", 401},
		{"the first key", r.base, "POST", "/v1/completions", "Authorization", "Bearer sk-one", 200},
		{"the second key, bare", r.base, "POST", "/completion", "Authorization", "sk-two", 200},
		{"X-Api-Key", r.base, "GET", "/metrics", "X-Api-Key", "sk-one", 200},
		{"no keys: open", open.base, "POST", "/v1/completions", "", "", 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			var body io.Reader
			if c.method == "POST" {
				body = strings.NewReader(`{"prompt":"x","max_tokens":4,"n_predict":4}`)
			}
			req, _ := http.NewRequest(c.method, c.base+c.path, body)
			if c.hdr != "" {
				req.Header.Set(c.hdr, c.val)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want || c.want == 401 && string(b) != secret.UnauthorizedBody {
				t.Errorf("%d %s, want %d", resp.StatusCode, b, c.want)
			}
		})
	}
}
