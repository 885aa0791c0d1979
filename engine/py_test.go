package engine

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/width"
)

func pySettings(e key.Engine, draft string, args ...string) Spec {
	s := settings(e, draft, args...)
	s.Model = "meta-llama/Llama-3.1-8B-Instruct"
	return s
}

func draftFor(k key.Drafter) string {
	switch k {
	case key.Ngram:
		return NgramDraft
	case key.MTP:
		return "meta-llama/Llama-3.1-8B-Instruct" // the head lives in the target
	}
	return "/models/drafter"
}

// sched is the resolution of an operator schedule at load n, as the plan
// makes it (an engine that takes the schedule gets its widest width).
func sched(t testing.TB, text string, n int) width.Resolution {
	t.Helper()
	s, err := schedule.Parse(text, "override")
	if err != nil {
		t.Fatal(err)
	}
	return width.Resolution{Source: width.Override, Reason: "operator schedule", Schedule: s}.AtLoad(n)
}

func pyCmdCases(t testing.TB) []cmdCase {
	cfg := Caps{Spelling: SpellingVLLMConfig, Version: "0.11.0"}
	legacy := Caps{Spelling: SpellingVLLMLegacy, Version: "0.7.3"}
	sg := Caps{Version: "0.5.6"}
	tp2 := []string{"--tensor-parallel-size", "2", "--speculative-config", `{"draft_tensor_parallel_size": 1}`, "--max-model-len", "8192"}
	cs := []cmdCase{
		{"vllm-off", key.VLLM, pySettings(key.VLLM, ""), off, "", baseEnv, cfg},
		{"vllm-tp2-passthrough", key.VLLM, pySettings(key.VLLM, "/models/drafter", tp2...), res(5), key.Eagle3, baseEnv, cfg},
		{"vllm-unknown-eagle3", key.VLLM, pySettings(key.VLLM, "/models/drafter"), res(4), key.Eagle3, baseEnv, Caps{}},
		{"vllm-legacy-draft", key.VLLM, pySettings(key.VLLM, "/models/drafter"), res(6), key.Draft, baseEnv, legacy},
		{"vllm-legacy-ngram", key.VLLM, pySettings(key.VLLM, NgramDraft), res(4), key.Ngram, baseEnv, legacy},
		{"sglang-off", key.SGLang, pySettings(key.SGLang, ""), off, "", baseEnv, sg},
		{"sglang-tp2-passthrough", key.SGLang, pySettings(key.SGLang, "/models/drafter", "--tp", "2", "--mem-fraction-static", "0.8"), res(6), key.Eagle3, baseEnv, sg},
		// A schedule: vLLM 0.24 on takes it (K = width - 1, the widest
		// sizing num_speculative_tokens, the open bucket's end as 1<<20);
		// an older vLLM and SGLang run the width at one request and warn.
		{"vllm-schedule", key.VLLM, pySettings(key.VLLM, "/models/drafter"), sched(t, "1:6,2-3:4,4+:1", 1), key.Eagle3, baseEnv, Caps{Spelling: SpellingVLLMConfig, Version: "0.24.0"}},
		{"vllm-schedule-tp2-passthrough", key.VLLM, pySettings(key.VLLM, "/models/drafter", tp2...), sched(t, "1-2:5,3+:3", 1), key.Draft, baseEnv, Caps{Spelling: SpellingVLLMConfig, Version: "0.26.1"}},
		{"vllm-schedule-unknown", key.VLLM, pySettings(key.VLLM, "/models/drafter"), sched(t, "1:6,2-3:4,4+:1", 1), key.Eagle3, baseEnv, Caps{}},
		{"vllm-schedule-old", key.VLLM, pySettings(key.VLLM, "/models/drafter"), sched(t, "1:6,2-3:4,4+:1", 1), key.Eagle3, baseEnv, cfg},
		{"vllm-schedule-legacy", key.VLLM, pySettings(key.VLLM, "/models/drafter"), sched(t, "1:6,2-3:4,4+:1", 1), key.Draft, baseEnv, legacy},
		{"sglang-schedule", key.SGLang, pySettings(key.SGLang, "/models/drafter"), sched(t, "1:6,2-3:4,4+:1", 1), key.Eagle3, baseEnv, sg},
	}
	for _, k := range key.Selectable(key.VLLM) {
		cs = append(cs, cmdCase{"vllm-" + string(k), key.VLLM, pySettings(key.VLLM, draftFor(k)), res(4), k, baseEnv, cfg})
	}
	for _, k := range key.Selectable(key.SGLang) {
		cs = append(cs, cmdCase{"sglang-" + string(k), key.SGLang, pySettings(key.SGLang, draftFor(k)), res(4), k, baseEnv, sg})
	}
	return cs
}

func TestPyCommandGolden(t *testing.T) {
	for _, tc := range pyCmdCases(t) {
		t.Run(tc.golden, func(t *testing.T) {
			a, err := For(tc.engine)
			if err != nil {
				t.Fatal(err)
			}
			l, err := a.Command(tc.s, tc.r, tc.kind, slices.Clone(tc.environ), tc.caps)
			if err != nil {
				t.Fatal(err)
			}
			got := render(l)
			path := filepath.Join("testdata", tc.golden+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./engine -update)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs (run go test ./engine -update to accept):\n--- got\n%s--- want\n%s", path, got, want)
			}
		})
	}
}

// flagValue returns the value after flag in argv, or "".
func flagValue(argv []string, flag string) string {
	i := slices.Index(argv, flag)
	if i < 0 || i+1 >= len(argv) {
		return ""
	}
	return argv[i+1]
}

// Every width of every kind lands in the engine's own unit: vLLM
// num_speculative_tokens = W-1; SGLang num_draft_tokens = W and, for the
// EAGLE family, num_steps = W-1 with topk 1 (the relation SGLang itself
// enforces when topk == 1).
func TestPyWidthMapping(t *testing.T) {
	va, _ := For(key.VLLM)
	sa, _ := For(key.SGLang)
	for _, k := range key.Selectable(key.VLLM) {
		for w := key.MinWidth; w <= 40; w++ {
			l, err := va.Command(pySettings(key.VLLM, draftFor(k)), res(w), k, baseEnv, Caps{Spelling: SpellingVLLMConfig})
			if err != nil {
				t.Fatalf("vllm %s width %d: %v", k, w, err)
			}
			var sc map[string]any
			if err := json.Unmarshal([]byte(flagValue(l.Argv, "--speculative-config")), &sc); err != nil {
				t.Fatalf("vllm %s: --speculative-config is not JSON: %q", k, l.Argv)
			}
			if sc["num_speculative_tokens"] != float64(w-1) {
				t.Fatalf("vllm %s width %d: num_speculative_tokens %v", k, w, sc["num_speculative_tokens"])
			}
			m, _ := VLLMMethod(k)
			if sc["method"] != m {
				t.Fatalf("vllm %s: method %v", k, sc["method"])
			}
			if _, has := sc["model"]; has == (k == key.Ngram) {
				t.Fatalf("vllm %s: model key presence wrong: %v", k, sc)
			}
		}
	}
	for _, k := range key.Selectable(key.SGLang) {
		for w := key.MinWidth; w <= 40; w++ {
			l, err := sa.Command(pySettings(key.SGLang, draftFor(k)), res(w), k, baseEnv, Caps{})
			if err != nil {
				t.Fatalf("sglang %s width %d: %v", k, w, err)
			}
			if got := flagValue(l.Argv, "--speculative-num-draft-tokens"); got != strconv.Itoa(w) {
				t.Fatalf("sglang %s width %d: num_draft_tokens %q in %q", k, w, got, l.Argv)
			}
			algo := flagValue(l.Argv, "--speculative-algorithm")
			if algo == "NGRAM" || algo == "DFLASH" {
				if slices.Contains(l.Argv, "--speculative-num-steps") {
					t.Fatalf("sglang %s: steps set for %s", k, algo)
				}
				continue
			}
			steps, _ := strconv.Atoi(flagValue(l.Argv, "--speculative-num-steps"))
			if topk := flagValue(l.Argv, "--speculative-eagle-topk"); topk != "1" || steps+1 != w {
				t.Fatalf("sglang %s width %d: steps %d topk %s", k, w, steps, topk)
			}
		}
	}
}

func TestPyRefusals(t *testing.T) {
	cfg := Caps{Spelling: SpellingVLLMConfig}
	legacy := Caps{Spelling: SpellingVLLMLegacy, Version: "0.7.3"}
	cases := []struct {
		name string
		e    key.Engine
		s    Spec
		kind key.Drafter
		caps Caps
		want []string
	}{
		{"vllm owned json key", key.VLLM, pySettings(key.VLLM, "/d", "--speculative-config", `{"num_speculative_tokens": 7}`), key.Eagle3, cfg, []string{"profiles/demo.toml:7", `key "num_speculative_tokens"`, "--draft-block-size"}},
		{"vllm owned json method", key.VLLM, pySettings(key.VLLM, "/d", `--speculative_config={"method":"ngram"}`), key.Eagle3, cfg, []string{`key "method"`, "--draft-kind"}},
		{"vllm bad json", key.VLLM, pySettings(key.VLLM, "/d", "--speculative-config", "draft_tensor_parallel_size=1"), key.Eagle3, cfg, []string{"not a JSON object"}},
		{"vllm json no value", key.VLLM, pySettings(key.VLLM, "/d", "--speculative-config"), key.Eagle3, cfg, []string{"has no value"}},
		{"vllm json twice", key.VLLM, pySettings(key.VLLM, "/d", "--speculative-config", `{"a":1}`, "--speculative-config", `{"b":1}`), key.Eagle3, cfg, []string{"twice"}},
		{"vllm legacy width flag", key.VLLM, pySettings(key.VLLM, "/d", "--num-speculative-tokens", "3"), key.Draft, cfg, []string{"--num-speculative-tokens", "the draft width"}},
		{"vllm underscore spelling", key.VLLM, pySettings(key.VLLM, "/d", "--speculative_model=/x"), key.Draft, cfg, []string{"the draft model"}},
		{"vllm port", key.VLLM, pySettings(key.VLLM, "/d", "--port", "9"), key.Draft, cfg, []string{"--port", "server.port"}},
		{"vllm model flag", key.VLLM, pySettings(key.VLLM, "/d", "--model=x"), key.Draft, cfg, []string{"the target model"}},
		{"vllm legacy eagle3", key.VLLM, pySettings(key.VLLM, "/d"), key.Eagle3, legacy, []string{"0.7.3", "upgrade vLLM", "draft or ngram"}},
		{"vllm legacy json", key.VLLM, pySettings(key.VLLM, "/d", "--speculative-config", `{"a":1}`), key.Draft, legacy, []string{"0.8.0"}},
		{"vllm ngram with model", key.VLLM, pySettings(key.VLLM, "/models/d"), key.Ngram, cfg, []string{"ngram", `draft.model = "ngram"`}},
		{"vllm ngram sentinel other kind", key.VLLM, pySettings(key.VLLM, "ngram"), key.Eagle3, cfg, []string{"n-gram", "--draft-kind ngram"}},
		{"vllm dspark", key.VLLM, pySettings(key.VLLM, "/d"), key.DSpark, cfg, []string{`"dspark" is not supported by engine vllm`}},
		{"sglang steps", key.SGLang, pySettings(key.SGLang, "/d", "--speculative-num-steps", "5"), key.Eagle3, Caps{}, []string{"the draft width"}},
		{"sglang topk", key.SGLang, pySettings(key.SGLang, "/d", "--speculative-eagle-topk=4"), key.Eagle3, Caps{}, []string{"topk 1"}},
		{"sglang algo underscore", key.SGLang, pySettings(key.SGLang, "/d", "--speculative_algorithm", "EAGLE"), key.Eagle3, Caps{}, []string{"the drafter kind"}},
		{"sglang model path", key.SGLang, pySettings(key.SGLang, "/d", "--model-path", "x"), key.Eagle3, Caps{}, []string{"the target model"}},
		{"sglang dflash block", key.SGLang, pySettings(key.SGLang, "/d", "--speculative-dflash-block-size", "8"), key.DFlash, Caps{}, []string{"the draft width"}},
		{"sglang ngram with model", key.SGLang, pySettings(key.SGLang, "/d"), key.Ngram, Caps{}, []string{`draft.model = "ngram"`}},
		{"sglang internal-mtp", key.SGLang, pySettings(key.SGLang, "/d"), key.InternalMTP, Caps{}, []string{"not user-selectable"}},
		{"vllm short alias owned key", key.VLLM, pySettings(key.VLLM, "/d", "-sc", `{"method":"ngram"}`), key.Eagle3, cfg, []string{`key "method"`, "--draft-kind"}},
		{"vllm short alias twice", key.VLLM, pySettings(key.VLLM, "/d", "-sc", `{"a":1}`, "--speculative-config", `{"b":1}`), key.Eagle3, cfg, []string{"twice"}},
		{"vllm dotted width", key.VLLM, pySettings(key.VLLM, "/d", "--speculative-config.num_speculative_tokens", "5"), key.Eagle3, cfg, []string{`key "num_speculative_tokens"`, "--draft-block-size"}},
		{"vllm dotted method", key.VLLM, pySettings(key.VLLM, "/d", "--speculative_config.method=ngram"), key.Eagle3, cfg, []string{`key "method"`}},
		{"vllm dotted model alias", key.VLLM, pySettings(key.VLLM, "/d", "-sc.model", "/x"), key.Eagle3, cfg, []string{`key "model"`, "--draft-model"}},
		{"vllm dotted no value", key.VLLM, pySettings(key.VLLM, "/d", "--speculative-config.prompt_lookup_max"), key.Ngram, cfg, []string{"has no value"}},
		{"vllm dotted empty key", key.VLLM, pySettings(key.VLLM, "/d", "--speculative-config..x", "1"), key.Eagle3, cfg, []string{"empty key"}},
		{"vllm dotted and json", key.VLLM, pySettings(key.VLLM, "/d", "--speculative-config", `{"quantization":"fp8"}`, "--speculative-config.quantization", "awq"), key.Eagle3, cfg, []string{`"quantization" is given both`}},
		{"vllm dotted twice", key.VLLM, pySettings(key.VLLM, "/d", "--speculative-config.quantization", "fp8", "--speculative-config.quantization", "awq"), key.Eagle3, cfg, []string{"set twice"}},
		{"vllm spec-tokens shorthand", key.VLLM, pySettings(key.VLLM, "/d", "--spec-tokens", "5"), key.Eagle3, cfg, []string{"the draft width"}},
		{"vllm spec-method shorthand", key.VLLM, pySettings(key.VLLM, "/d", "--spec_method=eagle"), key.Eagle3, cfg, []string{"the drafter kind"}},
		{"vllm spec-model shorthand", key.VLLM, pySettings(key.VLLM, "/d", "--spec-model", "/x"), key.Eagle3, cfg, []string{"the draft model"}},
		{"sglang adaptive", key.SGLang, pySettings(key.SGLang, "/d", "--speculative-adaptive"), key.Eagle3, Caps{}, []string{"num_steps", "--draft-block-size"}},
		{"sglang adaptive underscore", key.SGLang, pySettings(key.SGLang, "/d", "--speculative_adaptive"), key.Eagle3, Caps{}, []string{"adaptive"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, _ := For(c.e)
			_, err := a.Command(c.s, res(4), c.kind, baseEnv, c.caps)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// Every spelling vLLM's parser takes for --speculative-config merges into
// the launcher's one JSON object: a second --speculative-config (-sc, or the
// one vLLM builds from dotted keys) would replace the launcher's.
func TestVLLMSpecConfigSpellings(t *testing.T) {
	cfg := Caps{Spelling: SpellingVLLMConfig}
	const own = `"method":"eagle3","model":"/d","num_speculative_tokens":3`
	cases := []struct {
		name string
		args []string
		want string // the --speculative-config JSON
		rest []string
	}{
		{"long", []string{"--speculative-config", `{"draft_tensor_parallel_size": 1}`}, `{"draft_tensor_parallel_size":1,` + own + `}`, nil},
		{"short alias", []string{"-sc", `{"draft_tensor_parallel_size": 1}`, "--tp", "2"}, `{"draft_tensor_parallel_size":1,` + own + `}`, []string{"--tp", "2"}},
		{"short alias with =", []string{`-sc={"quantization":"fp8"}`}, `{` + own + `,"quantization":"fp8"}`, nil},
		{"dotted int", []string{"--speculative-config.draft_tensor_parallel_size", "1"}, `{"draft_tensor_parallel_size":1,` + own + `}`, nil},
		{"dotted string with =", []string{"--speculative_config.quantization=fp8"}, `{` + own + `,"quantization":"fp8"}`, nil},
		{"dotted nested", []string{"--speculative-config.draft_load_config.load_format", "dummy"}, `{"draft_load_config":{"load_format":"dummy"},` + own + `}`, nil},
		{"dotted list append", []string{"--speculative-config.tags+", "a,b", "--speculative-config.tags+=c"}, `{` + own + `,"tags":["a","b","c"]}`, nil},
		{"json and dotted merge", []string{"--speculative-config", `{"quantization":"fp8"}`, "-sc.draft_tensor_parallel_size", "1"}, `{"draft_tensor_parallel_size":1,` + own + `,"quantization":"fp8"}`, nil},
		{"other dotted flag passes", []string{"--compilation-config.level", "3"}, `{` + own + `}`, []string{"--compilation-config.level", "3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, _ := For(key.VLLM)
			l, err := a.Command(pySettings(key.VLLM, "/d", c.args...), res(4), key.Eagle3, baseEnv, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if n := slices.Index(l.Argv, "--speculative-config"); n < 0 || l.Argv[n+1] != c.want {
				t.Fatalf("argv %q, want --speculative-config %s", l.Argv, c.want)
			}
			var specFlags int
			for _, arg := range l.Argv {
				if strings.HasPrefix(arg, "--speculative") || strings.HasPrefix(arg, "-sc") {
					specFlags++
				}
			}
			if specFlags != 1 {
				t.Fatalf("argv %q has %d speculative-config flags, want 1", l.Argv, specFlags)
			}
			port := slices.Index(l.Argv, "--port")
			if got := l.Argv[port+2:]; !slices.Equal(got, c.rest) && len(got)+len(c.rest) > 0 {
				t.Fatalf("pass-through %q, want %q", got, c.rest)
			}
		})
	}
}

func TestPyObserveLines(t *testing.T) {
	type want struct {
		spec  bool
		kind  string
		width int
		err   bool
	}
	check := func(t *testing.T, e key.Engine, file string, wants []want) {
		a, _ := For(e)
		b, err := os.ReadFile(filepath.Join("testdata", "py", file))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != len(wants) {
			t.Fatalf("%s: %d lines, %d wants", file, len(lines), len(wants))
		}
		for i, l := range lines {
			o, ok := a.ObserveLine(l)
			if !ok {
				t.Fatalf("%s line %d not observed: %s", file, i+1, l)
			}
			w := wants[i]
			if o.Speculative != w.spec || o.Kind != w.kind || o.Width != w.width || (o.Error != "") != w.err {
				t.Errorf("%s line %d: got %+v, want %+v", file, i+1, o, w)
			}
		}
	}
	check(t, key.VLLM, "vllm-startup.txt", []want{
		{true, "mtp", 4, false},
		{false, "off", 0, false},
		{true, "ngram", 6, false},
		{false, "", 0, true},
	})
	check(t, key.SGLang, "sglang-startup.txt", []want{
		{true, "EAGLE3", 4, false},
		{true, "NEXTN", 4, false},
		{false, "off", 0, false},
		{true, "EAGLE", 8, false},
		{false, "", 0, true},
	})
	for _, e := range []key.Engine{key.VLLM, key.SGLang} {
		a, _ := For(e)
		for _, l := range []string{"", "INFO: Started server process [1]", "speculative_config=SpeculativeConfig(", "server_args=ServerArgs(model_path='x')"} {
			if o, ok := a.ObserveLine(l); ok {
				t.Errorf("%s: %q observed as %+v", e, l, o)
			}
		}
	}
}

func readPy(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "py", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseVLLMMetrics(t *testing.T) {
	v, err := ParseVLLMMetrics(readPy(t, "vllm-metrics-eagle3.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !v.Present || v.NumSpecTokens != 3 || v.Engines != 2 {
		t.Fatalf("got %+v", v)
	}
	if !slices.Equal(v.AcceptedByPos, []float64{48, 35, 22}) || v.Drafts != 60 || v.Accepted != 105 || v.DraftTokens != 180 {
		t.Fatalf("counters %+v", v)
	}
	if got := v.MeanAcceptanceLength(); got != 2.75 {
		t.Fatalf("mean acceptance length %v", got)
	}
	v, err = ParseVLLMMetrics(readPy(t, "vllm-metrics-fresh.txt"))
	if err != nil || v.NumSpecTokens != 5 || v.MeanAcceptanceLength() != 0 {
		t.Fatalf("fresh: %+v %v", v, err)
	}
	v, err = ParseVLLMMetrics(readPy(t, "vllm-metrics-off.txt"))
	if err != nil || v.Present {
		t.Fatalf("off: %+v %v", v, err)
	}
	pp := `vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="%s",model_name="m",position="%d"} 0.0` + "\n"
	line := func(e string, p int) string {
		return strings.Replace(strings.Replace(pp, "%s", e, 1), "%d", strconv.Itoa(p), 1)
	}
	bad := map[string]string{
		"engines disagree": line("0", 0) + line("0", 1) + line("1", 0),
		"gap":              line("0", 0) + line("0", 2),
		"bad position":     `vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="x"} 1` + "\n",
		"bad value":        `vllm:spec_decode_num_drafts_total{engine="0"} many` + "\n",
	}
	for name, text := range bad {
		if _, err := ParseVLLMMetrics(text); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestVerifyVLLM(t *testing.T) {
	for _, c := range []struct {
		file  string
		spec  bool
		width int
	}{{"vllm-metrics-eagle3.txt", true, 4}, {"vllm-metrics-fresh.txt", true, 6}, {"vllm-metrics-off.txt", false, 0}} {
		body := readPy(t, c.file)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/metrics" || r.Method != http.MethodGet {
				http.NotFound(w, r)
				return
			}
			w.Write([]byte(body))
		}))
		o, err := VerifyVLLM(context.Background(), srv.URL+"/", srv.Client())
		srv.Close()
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if o.Speculative != c.spec || o.Width != c.width {
			t.Errorf("%s: got %+v", c.file, o)
		}
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	if _, err := VerifyVLLM(context.Background(), srv.URL, srv.Client()); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("404: %v", err)
	}
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("vllm:spec_decode_num_drafts_total{engine=\"0\"} 3\n"))
	}))
	defer srv2.Close()
	if _, err := VerifyVLLM(context.Background(), srv2.URL, srv2.Client()); !errors.Is(err, ErrNotLive) {
		t.Fatalf("counters without positions: %v", err)
	}
}

func TestVerifySGLang(t *testing.T) {
	for _, c := range []struct {
		file, path string
		spec       bool
		width      int
		kind       string
	}{
		{"sglang-server-info.json", "/server_info", true, 4, "EAGLE3"},
		{"sglang-server-info.json", "/get_server_info", true, 4, "EAGLE3"}, // older trees
		{"sglang-server-info-off.json", "/server_info", false, 0, ""},
	} {
		body := readPy(t, c.file)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != c.path {
				http.NotFound(w, r)
				return
			}
			w.Write([]byte(body))
		}))
		o, err := VerifySGLang(context.Background(), srv.URL, srv.Client())
		srv.Close()
		if err != nil {
			t.Fatalf("%s %s: %v", c.file, c.path, err)
		}
		if o.Speculative != c.spec || o.Width != c.width || o.Kind != c.kind {
			t.Errorf("%s %s: got %+v", c.file, c.path, o)
		}
		if c.spec && !strings.Contains(o.Line, "average accept length 2.61") {
			t.Errorf("line %q lacks the accept length", o.Line)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"hello": 1}`)) }))
	defer srv.Close()
	if _, err := VerifySGLang(context.Background(), srv.URL, srv.Client()); err == nil || !strings.Contains(err.Error(), "is this SGLang") {
		t.Fatalf("not sglang: %v", err)
	}
	if _, err := ParseSGLangServerInfo([]byte(`{"version":"0.5.6","speculative_algorithm":"EAGLE","speculative_num_draft_tokens":null}`)); err == nil {
		t.Fatal("algorithm without num_draft_tokens accepted")
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	defer gone.Close()
	if _, err := VerifySGLang(context.Background(), gone.URL, gone.Client()); err == nil || !strings.Contains(err.Error(), "get_server_info: HTTP 404") {
		t.Fatalf("404: %v", err)
	}
}

func TestParsePyVersion(t *testing.T) {
	cases := []struct {
		out, version string
		sp           Spelling
	}{
		{"0.11.0\n", "0.11.0", SpellingVLLMConfig},
		{"INFO 05-21 [__init__.py:216] Automatically detected platform cuda.\n0.8.5.post1\n", "0.8.5.post1", SpellingVLLMConfig},
		{"0.19.2rc1.dev8+g4b7f5ea1a", "0.19.2rc1.dev8+g4b7f5ea1a", SpellingVLLMConfig},
		{"0.7.3", "0.7.3", SpellingVLLMLegacy},
		{"1.0.0", "1.0.0", SpellingVLLMConfig},
		{"usage: vllm [-h]", "", SpellingUnknown},
		{"", "", SpellingUnknown},
	}
	for _, c := range cases {
		v, _, _, _ := ParsePyVersion(c.out)
		if v != c.version || VLLMSpellingFor(c.out) != c.sp {
			t.Errorf("%q: version %q spelling %q, want %q %q", c.out, v, VLLMSpellingFor(c.out), c.version, c.sp)
		}
	}
}

func TestFetchesModel(t *testing.T) {
	for _, c := range []struct {
		e    key.Engine
		ref  string
		want bool
	}{
		{key.VLLM, "meta-llama/Llama-3.1-8B-Instruct", true},
		{key.SGLang, "ngram", true},
		{key.VLLM, "/models/target", false},
		{key.VLLM, "./models/target", false},
		{key.VLLM, "a/b/c", false},
		{key.LlamaCpp, "meta-llama/Llama-3.1-8B-Instruct", false},
		{key.SGLang, "target", false},
	} {
		if got := FetchesModel(c.e, c.ref); got != c.want {
			t.Errorf("%s %q: %v", c.e, c.ref, got)
		}
	}
}

// DetectEngine reads versions from stand-in binaries: a `vllm` that prints
// its version after an INFO line, and a python that answers the
// importlib.metadata query.
func TestDetectEngine(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v := write("vllm", `[ "$1" = --version ] || exit 3; echo "INFO detected platform cuda."; echo 0.7.3`)
	c, err := DetectEngine(context.Background(), key.VLLM, v)
	if err != nil || c.Version != "0.7.3" || c.Spelling != SpellingVLLMLegacy {
		t.Fatalf("vllm: %+v %v", c, err)
	}
	py := write("python3", `[ "$1" = -c ] && case "$2" in *"m.version('sglang')"*) echo 0.5.6.post2; exit 0;; esac; exit 1`)
	c, err = DetectEngine(context.Background(), key.SGLang, py)
	if err != nil || c.Version != "0.5.6.post2" {
		t.Fatalf("sglang: %+v %v", c, err)
	}
	noSG := write("python-bare", `echo "ModuleNotFoundError: No module named 'sglang'" >&2; exit 1`)
	if _, err := DetectEngine(context.Background(), key.SGLang, noSG); err == nil || !strings.Contains(err.Error(), "engine.binary") {
		t.Fatalf("no sglang: %v", err)
	}
	if _, err := DetectEngine(context.Background(), key.VLLM, filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing binary accepted")
	}
}
