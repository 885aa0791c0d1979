package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/config"
	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/key"
	"github.com/speclaunch/speclaunch/plan"
	"github.com/speclaunch/speclaunch/width"
)

// serveFixture answers path with the engine package's fixture file (taken
// from vLLM's and SGLang's source; see engine/testdata/py/README.md).
func serveFixture(t *testing.T, path, file string) *httptest.Server {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "engine", "testdata", "py", file))
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

func pyRunning(e key.Engine, base string, want width.Resolution) *running {
	var s config.Settings
	s.Engine = config.Field[key.Engine]{Value: e}
	return &running{plan: &plan.Plan{Settings: s, Resolution: want, Launch: engine.Launch{BaseURL: base}}}
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
		{"vllm off and off", key.VLLM, "/metrics", "vllm-metrics-off.txt", offRes, false, ""},
		{"sglang width matches", key.SGLang, "/server_info", "sglang-server-info.json", w(4), true, ""},
		{"sglang width differs", key.SGLang, "/server_info", "sglang-server-info.json", w(6), false, "runs width 4, not the resolved 6"},
		{"sglang off but resolved", key.SGLang, "/server_info", "sglang-server-info-off.json", w(4), false, "not live"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := serveFixture(t, c.path, c.file)
			got := pyRunning(c.e, srv.URL, c.want).verify(context.Background(), true)
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
	r.plan.Adapter = a
	r.observe("(EngineCore pid=1) INFO 11-30 10:00:00 [core.py:77] Initializing a V1 LLM engine (v0.20.2) with config: model='m', speculative_config=SpeculativeConfig(method='eagle3', model='d', num_spec_tokens=3), tokenizer='m'")
	got := r.verify(context.Background(), true)
	if !got.Verified || !strings.Contains(got.Note, "startup line") {
		t.Fatalf("%+v", got)
	}
	r2 := pyRunning(key.SGLang, gone.URL, width.Resolution{Width: 4, Source: width.KindDefault})
	if got := r2.verify(context.Background(), true); got.Verified || !strings.Contains(got.Note, "could not verify") {
		t.Fatalf("no line, no endpoint: %+v", got)
	}
}

// Bad vLLM/SGLang input is exit 2 before anything starts, and the message
// names where the bad value came from and the launcher's own setting.
func TestPyBadInputExit2(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no vllm, no python3: nothing is inspected
	vllm := []string{"--engine", "vllm", "-m", "org/model", "-md", "org/draft", "--draft-kind", "eagle3", "--capability", "9.0"}
	sglang := []string{"--engine", "sglang", "-m", "org/model", "-md", "org/draft", "--draft-kind", "eagle3", "--capability", "9.0"}
	with := func(base []string, extra ...string) []string { return append(slices.Clone(base), extra...) }
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"vllm unknown kind", []string{"--engine", "vllm", "-m", "org/model", "-md", "org/draft", "--draft-kind", "dspark"}, []string{"flag --draft-kind", `"dspark" is not supported by engine vllm`, "accepted: draft, eagle, eagle3, mtp, ngram, dflash"}},
		{"sglang internal-mtp", []string{"--engine", "sglang", "-m", "org/model", "-md", "org/draft", "--draft-kind", "internal-mtp"}, []string{"flag --draft-kind", "not user-selectable"}},
		{"vllm width 1", with(vllm, "--draft-block-size", "1"), []string{"flag --draft-block-size", "below 2"}},
		{"sglang width 1", with(sglang, "--draft-block-size", "1"), []string{"flag --draft-block-size", "below 2"}},
		{"vllm owned json key", with(vllm, "--", "--speculative-config", `{"num_speculative_tokens":5}`), []string{"flag --", `"num_speculative_tokens"`, "--draft-block-size"}},
		{"vllm dotted owned key", with(vllm, "--", "--speculative-config.num_speculative_tokens", "5"), []string{"flag --", `"num_speculative_tokens"`, "--draft-block-size"}},
		{"vllm short alias owned key", with(vllm, "--", "-sc", `{"method":"ngram"}`), []string{"flag --", `"method"`, "--draft-kind"}},
		{"vllm legacy flag", with(vllm, "--", "--num-speculative-tokens", "5"), []string{"flag --", "--draft-block-size"}},
		{"sglang steps", with(sglang, "--", "--speculative-num-steps", "5"), []string{"flag --", "--draft-block-size"}},
		{"sglang adaptive", with(sglang, "--", "--speculative-adaptive"), []string{"flag --", "num_steps", "--draft-block-size"}},
		{"ngram sentinel with eagle3", []string{"--engine", "vllm", "-m", "org/model", "-md", "ngram", "--draft-kind", "eagle3"}, []string{"flag --draft-model", "--draft-kind ngram"}},
	}
	for _, c := range cases {
		for _, cmd := range [][]string{{"resolve"}, {"serve", "--dry-run"}} {
			t.Run(c.name+"/"+strings.Join(cmd, " "), func(t *testing.T) {
				var stdout, stderr strings.Builder
				code := Main(append(cmd, c.args...), policyTOML, &stdout, &stderr)
				if code != 2 {
					t.Fatalf("exit %d, want 2; stderr %q", code, stderr.String())
				}
				for _, w := range c.want {
					if !strings.Contains(stderr.String(), w) {
						t.Errorf("stderr %q lacks %q", stderr.String(), w)
					}
				}
			})
		}
	}
}
