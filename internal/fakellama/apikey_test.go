package fakellama

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fake enforces an API key as llama-server d32676d does
// (tools/server/server-http.cpp, middleware_validate_api_key): every route
// but the public four needs the key, in Authorization (with or without
// "Bearer ") or X-Api-Key; otherwise 401 with llama-server's body.
func TestAPIKey(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "keys.txt")
	if err := os.WriteFile(keyFile, []byte("# ops\nfile-key-0001\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	setups := []struct {
		name string
		env  []string
		args []string
		key  string // one key it accepts
		log  string // what it logs about its keys
	}{
		{"flag", nil, []string{"--api-key", "flag-key-0001"}, "flag-key-0001", "api_keys: ****0001"},
		{"flag list", nil, []string{"--api-key", "list-key-0001,list-key-0002"}, "list-key-0002", "api_keys: 2 keys loaded"},
		{"env", []string{"LLAMA_API_KEY=env-key-0001"}, nil, "env-key-0001", "api_keys: ****0001"},
		{"key file", nil, []string{"--api-key-file", keyFile}, "file-key-0001", "api_keys: ****0001"},
		{"env key file", []string{"LLAMA_ARG_API_KEY_FILE=" + keyFile}, nil, "file-key-0001", "api_keys: ****0001"},
	}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			f := startFake(t, append(s.env, "LLAMA_ARG_ENDPOINT_METRICS=1"), append([]string{"-m", "t.gguf"}, s.args...)...)
			waitReady(t, f.base)
			for _, c := range []struct {
				method, path string
				hdr          map[string]string
				want         int
			}{
				{"GET", "/health", nil, 200},
				{"GET", "/v1/health", nil, 200},
				{"GET", "/models", nil, 200},
				{"GET", "/v1/models", nil, 200},
				{"OPTIONS", "/completion", nil, 200},
				{"GET", "/props", nil, 401},
				{"GET", "/slots", nil, 401},
				{"GET", "/metrics", nil, 401},
				{"POST", "/completion", nil, 401},
				{"POST", "/completion", map[string]string{"Authorization": "Bearer wrong"}, 401},
				{"POST", "/completion", map[string]string{"Authorization": "Basic " + s.key}, 401},
				{"POST", "/completion", map[string]string{"Authorization": "Bearer " + s.key}, 200},
				{"POST", "/completion", map[string]string{"Authorization": s.key}, 200},
				{"POST", "/completion", map[string]string{"X-Api-Key": s.key}, 200},
				{"GET", "/metrics", map[string]string{"Authorization": "Bearer " + s.key}, 200},
			} {
				req, _ := http.NewRequest(c.method, f.base+c.path, strings.NewReader(plainReq))
				for k, v := range c.hdr {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != c.want {
					t.Errorf("%s %s %v: HTTP %d, want %d", c.method, c.path, c.hdr, resp.StatusCode, c.want)
				}
				if c.want == 401 && string(b) != UnauthorizedBody {
					t.Errorf("%s %s: 401 body %s, want %s", c.method, c.path, b, UnauthorizedBody)
				}
			}
			f.stop()
			if log := f.stderr.String(); !strings.Contains(log, s.log) || !strings.Contains(log, "unauthorized: Invalid API Key") || strings.Contains(log, s.key) {
				t.Errorf("log should say %q and log refusals, never the key:\n%s", s.log, log)
			}
		})
	}
}
