package instance

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/width"
)

// serveFixture answers path with the engine package's fixture file (taken
// from vLLM's and SGLang's source; see engine/testdata/py/README.md).
func serveFixture(t *testing.T, path, file string) *httptest.Server {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "engine", "testdata", "py", file))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func pyRunning(e key.Engine, base string, want width.Resolution) *Engine {
	var s config.Settings
	s.Engine = config.Field[key.Engine]{Value: e}
	return &Engine{Plan: &plan.Plan{Settings: s, Resolution: want, Launch: engine.Launch{BaseURL: base}}}
}

func TestVerifyDispatchesVLLMAndSGLang(t *testing.T) {
	w := func(n int) width.Resolution { return width.Resolution{Width: n, Source: width.KindDefault} }
	offRes := width.Resolution{Source: width.Off}
	cases := []struct {
		name     string
		e        key.Engine
		path     string
		file     string
		want     width.Resolution
		verified bool
		problem  string
	}{
		{"vllm width matches", key.VLLM, "/metrics", "vllm-metrics-eagle3.txt", w(4), true, ""},
		{"vllm width differs", key.VLLM, "/metrics", "vllm-metrics-fresh.txt", w(4), false, "runs width 6, not the resolved 4"},
		{"vllm no speculative config", key.VLLM, "/metrics", "vllm-metrics-off.txt", w(4), false, "not live"},
		{"vllm off and off", key.VLLM, "/metrics", "vllm-metrics-off.txt", offRes, true, ""}, // width 1: nothing to read
		{"sglang width matches", key.SGLang, "/server_info", "sglang-server-info.json", w(4), true, ""},
		{"sglang width differs", key.SGLang, "/server_info", "sglang-server-info.json", w(6), false, "runs width 4, not the resolved 6"},
		{"sglang off but resolved", key.SGLang, "/server_info", "sglang-server-info-off.json", w(4), false, "not live"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := serveFixture(t, c.path, c.file)
			got := pyRunning(c.e, srv.URL, c.want).Verify(context.Background(), true)
			if got.Verified != c.verified {
				t.Fatalf("verified %v, want %v: %+v", got.Verified, c.verified, got)
			}
			if (c.problem == "") != (got.Problem == "") || !strings.Contains(got.Problem, c.problem) {
				t.Fatalf("problem %q, want %q", got.Problem, c.problem)
			}
		})
	}
}

// When the endpoint cannot be read, the startup line decides.
func TestVerifyPyFallsBackToStartupLine(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	defer gone.Close()
	r := pyRunning(key.VLLM, gone.URL, width.Resolution{Width: 4, Source: width.KindDefault})
	a, _ := engine.For(key.VLLM)
	r.Plan.Adapter = a
	r.observe("(EngineCore pid=1) INFO 11-30 10:00:00 [core.py:77] Initializing a V1 LLM engine (v0.20.2) with config: model='m', speculative_config=SpeculativeConfig(method='eagle3', model='d', num_spec_tokens=3), tokenizer='m'")
	got := r.Verify(context.Background(), true)
	if !got.Verified || !strings.Contains(got.Note, "startup line") {
		t.Fatalf("%+v", got)
	}
	r2 := pyRunning(key.SGLang, gone.URL, width.Resolution{Width: 4, Source: width.KindDefault})
	if got := r2.Verify(context.Background(), true); got.Verified || !strings.Contains(got.Note, "could not verify") {
		t.Fatalf("no line, no endpoint: %+v", got)
	}
}
