package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/fakellama"
	"github.com/speclaunch/speclaunch/internal/sim"
)

// send sends one request and returns its status, content type and body.
func send(t *testing.T, method, url, body string) (int, string, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// Every path the issue names answers through the proxy as it does on the
// engine: the same status and content type, the same body where the engine
// answers the same twice, and a complete stream where it streams. The sim
// stands in for mlxcel (it has /v1/chat/completions); the fake llama-server
// for llama.cpp (it has /slots).
var createdRE = regexp.MustCompile(`"created":\d+`)

func TestPathsAsOnTheEngine(t *testing.T) {
	h, err := sim.NewHandler(sim.Config{Model: "/m/target", DraftModel: "/m/draft", BlockSize: 4, Seed: 1, Cost: sim.DefaultCostModel()}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(h)
	defer simSrv.Close()
	addr, stop, err := fakellama.Start([]string{"-m", "t.gguf", "-md", "d.gguf", "--metrics", "--host", "127.0.0.1", "--port", "0"}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	const (
		chat   = `{"model":"target","messages":[{"role":"user","content":"hi"}],"max_tokens":6`
		oai    = `{"model":"target","prompt":"def fib(n):","max_tokens":6`
		native = `{"prompt":"def fib(n):","n_predict":6`
	)
	for _, eng := range []struct{ name, url string }{{"sim", simSrv.URL}, {"fake llama-server", "http://" + addr}} {
		be, _ := NewBackend(eng.url, eng.name)
		p := New(Options{})
		p.Route(be)
		px := httptest.NewServer(p)
		for _, c := range []struct {
			method, path, body string
			same               bool // the engine answers byte for byte the same twice
		}{
			{"GET", "/health", "", true},
			{"GET", "/v1/models", "", true},
			{"GET", "/props", "", true},
			{"GET", "/slots", "", false},
			{"GET", "/metrics", "", false},
			{"GET", "/no/such/path", "", true},
			{"POST", "/v1/chat/completions", chat + `}`, false},
			{"POST", "/v1/chat/completions", chat + `,"stream":true}`, false},
			{"POST", "/v1/completions", oai + `}`, false},
			{"POST", "/v1/completions", oai + `,"stream":true}`, false},
			{"POST", "/completion", native + `}`, false},
			{"POST", "/completion", native + `,"stream":true}`, false},
		} {
			name := eng.name + " " + c.method + " " + c.path
			if strings.Contains(c.body, "stream") {
				name += " stream"
			}
			t.Run(name, func(t *testing.T) {
				dc, dt, db := send(t, c.method, eng.url+c.path, c.body)
				pc, pt, pb := send(t, c.method, px.URL+c.path, c.body)
				if dc != pc || dt != pt {
					t.Fatalf("direct %d %q, through the proxy %d %q", dc, dt, pc, pt)
				}
				// "created" is the engine's clock in seconds: two answers a
				// moment apart can straddle a second.
				if c.same && createdRE.ReplaceAllString(db, "") != createdRE.ReplaceAllString(pb, "") {
					t.Errorf("bodies differ:\ndirect %s\nproxy  %s", db, pb)
				}
				if dc == 200 && strings.HasPrefix(dt, "text/event-stream") {
					if end := func(s string) bool { return strings.Contains(s, "[DONE]") || strings.Contains(s, `"stop":true`) }; end(db) != end(pb) || !end(pb) {
						t.Errorf("stream through the proxy is not complete:\n%s", pb)
					}
					if bytes.Count([]byte(db), []byte("data: ")) != bytes.Count([]byte(pb), []byte("data: ")) {
						t.Errorf("%d events direct, %d through the proxy", strings.Count(db, "data: "), strings.Count(pb, "data: "))
					}
				}
			})
		}
		px.Close()
		if n := be.InFlight(); n != 0 {
			t.Errorf("%s: %d requests still counted in flight", eng.name, n)
		}
	}
}
