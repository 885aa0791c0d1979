package fakellama

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/speclaunch/speclaunch/internal/testenv"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func readCapture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The removed-flag messages the fake generates from the help text must be
// byte-identical to what the real NEW tree printed.
func TestRemovedMessagesMatchCaptures(t *testing.T) {
	byName, _ := parseHelp(string(readCapture(t, "new-help.txt")))
	o := byName["--draft-max"]
	if o == nil || !o.removed || o.env != "LLAMA_ARG_DRAFT_MAX" {
		t.Fatalf("--draft-max option parsed as %+v", o)
	}
	if got, want := removedArgError("--draft-max", o), string(readCapture(t, "new-flag-draft-max.txt")); got != want {
		t.Errorf("flag error:\n got %q\nwant %q", got, want)
	}
	if got, want := removedEnvError("LLAMA_ARG_DRAFT_MAX", o), string(readCapture(t, "new-env-draft-max.txt")); got != want {
		t.Errorf("env error:\n got %q\nwant %q", got, want)
	}
	if m := byName["--draft-min"]; m == nil || !m.removed || m.env != "LLAMA_ARG_DRAFT_MIN" {
		t.Errorf("--draft-min parsed as %+v", m)
	}
	for _, name := range []string{"-m", "-md", "--spec-draft-n-max", "--port", "--spec-type"} {
		if o := byName[name]; o == nil || o.nvals != 1 || o.removed {
			t.Errorf("%s parsed as %+v", name, o)
		}
	}
	if o := byName["--metrics"]; o == nil || o.nvals != 0 {
		t.Errorf("--metrics parsed as %+v", o)
	}
	old, _ := parseHelp(string(readCapture(t, "old-help.txt")))
	if o := old["--draft-max"]; o == nil || o.removed || o.env != "LLAMA_ARG_DRAFT_MAX" {
		t.Errorf("OLD --draft-max parsed as %+v", o)
	}
	if old["--spec-draft-n-max"] != nil || old["--spec-draft-model"] != nil {
		t.Error("OLD help should not list --spec-draft-n-max or --spec-draft-model")
	}
}

func TestOneShot(t *testing.T) {
	tests := []struct {
		name       string
		tree       string
		args       []string
		env        []string
		code       int
		stdoutFile string
		stderrFile string
		stderrHas  string
	}{
		{name: "new help", tree: "new", args: []string{"--help"}, stdoutFile: "new-help.txt"},
		{name: "old help", tree: "old", args: []string{"-h"}, stdoutFile: "old-help.txt"},
		{name: "new version", tree: "new", args: []string{"--version"}, stderrFile: "new-version.txt"},
		{name: "old version", tree: "old", args: []string{"--version"}, stderrFile: "old-version.txt"},
		{name: "new --draft-max", tree: "new", args: []string{"-m", "t.gguf", "-md", "d.gguf", "--draft-max", "4"}, code: 1, stderrFile: "new-flag-draft-max.txt"},
		{name: "new --draft", tree: "new", args: []string{"-m", "t.gguf", "--draft", "4"}, code: 1, stderrHas: `error while handling argument "--draft": the argument has been removed`},
		{name: "new --draft-min", tree: "new", args: []string{"-m", "t.gguf", "--draft-min", "1"}, code: 1, stderrHas: "use --spec-draft-n-min"},
		{name: "new env draft max", tree: "new", args: []string{"-m", "t.gguf"}, env: []string{"LLAMA_ARG_DRAFT_MAX=4"}, code: 1, stderrFile: "new-env-draft-max.txt"},
		{name: "new env draft max stops help too", tree: "new", args: []string{"--help"}, env: []string{"LLAMA_ARG_DRAFT_MAX=4"}, code: 1, stderrFile: "new-env-draft-max.txt"},
		{name: "api key file missing", tree: "new", args: []string{"-m", "t.gguf", "--api-key-file", "/nonexistent/keys"}, code: 1, stderrHas: "failed to open file '/nonexistent/keys'"},
		{name: "new env draft min", tree: "new", args: []string{"-m", "t.gguf"}, env: []string{"LLAMA_ARG_DRAFT_MIN=1"}, code: 1, stderrHas: `environment variable "LLAMA_ARG_DRAFT_MIN"`},
		{name: "old --spec-draft-n-max", tree: "old", args: []string{"-m", "t.gguf", "-md", "d.gguf", "--spec-draft-n-max", "3"}, code: 1, stderrFile: "old-flag-spec-draft-n-max.txt"},
		{name: "old --spec-type draft-simple", tree: "old", args: []string{"-m", "t.gguf", "--spec-type", "draft-simple"}, code: 1, stderrHas: "error: invalid argument: --spec-type"},
		{name: "old --spec-draft-model", tree: "old", args: []string{"-m", "t.gguf", "--spec-draft-model", "d.gguf"}, code: 1, stderrHas: "error: invalid argument: --spec-draft-model"},
		{name: "unknown flag", tree: "new", args: []string{"-m", "t.gguf", "--bogus"}, code: 1, stderrHas: "error: invalid argument: --bogus"},
		{name: "bad tree", tree: "mid", args: []string{"--help"}, code: 2, stderrHas: "FAKELLAMA_TREE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			env := append([]string{"FAKELLAMA_TREE=" + tt.tree}, tt.env...)
			code := Main(tt.args, env, &out, &errb)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tt.code, errb.String())
			}
			if tt.stdoutFile != "" && !bytes.Equal(out.Bytes(), readCapture(t, tt.stdoutFile)) {
				t.Errorf("stdout differs from %s", tt.stdoutFile)
			}
			if tt.stderrFile != "" && !bytes.Equal(errb.Bytes(), readCapture(t, tt.stderrFile)) {
				t.Errorf("stderr %q differs from %s", errb.String(), tt.stderrFile)
			}
			if tt.stderrHas != "" && !strings.Contains(errb.String(), tt.stderrHas) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.stderrHas)
			}
		})
	}
}

type fake struct {
	base   string
	stop   func() int
	stderr *syncBuffer
}

type syncBuffer = testenv.Buffer

func startFake(t *testing.T, env []string, args ...string) *fake {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan int, 1)
	f := &fake{stderr: &syncBuffer{}}
	args = append(args, "--host", "127.0.0.1", "--port", "0")
	go func() {
		done <- run(ctx, args, env, io.Discard, f.stderr, func(a string) { addr <- a })
	}()
	select {
	case a := <-addr:
		f.base = "http://" + a
	case code := <-done:
		t.Fatalf("fake exited %d: %s", code, f.stderr.String())
	case <-time.After(5 * time.Second):
		t.Fatal("fake did not start")
	}
	var once sync.Once
	code := 0
	f.stop = func() int {
		once.Do(func() { cancel(); code = <-done })
		return code
	}
	t.Cleanup(func() { f.stop() })
	waitReady(t, f.base)
	return f
}

func waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("fake never became ready")
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func post(t *testing.T, url, body string) []byte {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return b
}

// keyPaths lists every object key path of a JSON document ("a.b", arrays as "[]").
func keyPaths(t *testing.T, b []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	var out []string
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, vv := range x {
				out = append(out, p+"."+k)
				walk(p+"."+k, vv)
			}
		case []any:
			for _, vv := range x {
				walk(p+"[]", vv)
			}
		}
	}
	walk("", v)
	slices.Sort(out)
	return slices.Compact(out)
}

// topKeys is the ordered key list of a JSON object.
func topKeys(t *testing.T, b []byte) []string {
	t.Helper()
	o := mustObject(b)
	return o.keys
}

const (
	streamReq  = `{"prompt": "hello world", "n_predict": 16, "temperature": 0, "stream": true}`
	plainReq   = `{"prompt": "hello world", "n_predict": 16, "temperature": 0, "stream": false}`
	oaiReq     = `{"model": "x", "prompt": "hello world", "max_tokens": 16, "temperature": 0, "stream": true}`
	wantOutput = "hous skyinsmallcnig rjb hellohouse niwater lighs"
)

func events(b []byte) [][]byte { return sseEvents(b) }

func TestServerMatchesCaptures(t *testing.T) {
	cases := []struct {
		run        string // capture prefix
		tree       string
		args       []string
		draftN     int  // 0 = absent
		positions  int  // NEW per-pos labels after requests
		slotNMax   int  // OLD slot params n_max; 0 = absent
		slotSpec   bool // /slots "speculative"
		streamToks int  // content events in the native stream
	}{
		{"new-spec", "new", []string{"-m", "target.gguf", "-md", "draft.gguf", "--spec-type", "draft-simple", "--spec-draft-n-max", "3", "-c", "1024", "--metrics"}, 11, 3, 0, true, 16},
		{"new-md-only", "new", []string{"-m", "target.gguf", "-md", "draft.gguf", "-c", "1024", "--metrics"}, 0, 0, 0, false, 16},
		{"new-plain", "new", []string{"-m", "target.gguf", "-c", "1024", "--metrics"}, 0, 0, 0, false, 16},
		{"old-spec", "old", []string{"-m", "target.gguf", "-md", "draft.gguf", "--draft-max", "3", "-c", "1024", "--metrics"}, 10, 0, 3, true, 13},
		{"old-spec-env", "old", []string{"-m", "target.gguf", "-md", "draft.gguf", "-c", "1024", "--metrics"}, 10, 0, 3, true, 13},
		{"old-plain", "old", []string{"-m", "target.gguf", "-c", "1024", "--metrics"}, 0, 0, 16, false, 16},
	}
	for _, tc := range cases {
		t.Run(tc.run, func(t *testing.T) {
			env := []string{"FAKELLAMA_TREE=" + tc.tree}
			if tc.run == "old-spec-env" {
				env = append(env, "LLAMA_ARG_DRAFT_MAX=3")
			}
			f := startFake(t, env, tc.args...)

			// Before any request: same shapes as the captures.
			for _, ep := range []struct{ path, file string }{
				{"/props", tc.run + "-props.json"},
				{"/slots", tc.run + "-slots.json"},
				{"/v1/models", tc.run + "-v1-models.json"},
			} {
				code, b := get(t, f.base+ep.path)
				if code != 200 {
					t.Fatalf("%s: %d", ep.path, code)
				}
				if g, w := keyPaths(t, b), keyPaths(t, readCapture(t, ep.file)); !slices.Equal(g, w) {
					t.Errorf("%s key set differs from %s:\n got %v\nwant %v", ep.path, ep.file, g, w)
				}
			}
			_, m0 := get(t, f.base+"/metrics")
			if g, w := metricNames(string(m0)), metricNames(string(readCapture(t, tc.run+"-metrics.txt"))); !slices.Equal(g, w) {
				t.Errorf("/metrics names %v, capture %v", g, w)
			}

			// Requests in the harness's order.
			sb := post(t, f.base+"/completion", streamReq)
			cb := post(t, f.base+"/completion", plainReq)
			ob := post(t, f.base+"/v1/completions", oaiReq)

			if g, w := keyPaths(t, cb), keyPaths(t, readCapture(t, tc.run+"-completion.json")); !slices.Equal(g, w) {
				t.Errorf("/completion key set differs:\n got %v\nwant %v", g, w)
			}
			if g, w := topKeys(t, cb), topKeys(t, readCapture(t, tc.run+"-completion.json")); !slices.Equal(g, w) {
				t.Errorf("/completion key order %v, capture %v", g, w)
			}
			var resp struct {
				Content string `json:"content"`
				Timings struct {
					DraftN *int `json:"draft_n"`
				} `json:"timings"`
			}
			if err := json.Unmarshal(cb, &resp); err != nil {
				t.Fatal(err)
			}
			if resp.Content != wantOutput {
				t.Errorf("content %q", resp.Content)
			}
			if tc.draftN == 0 && resp.Timings.DraftN != nil {
				t.Errorf("draft_n present: %d", *resp.Timings.DraftN)
			}
			if tc.draftN != 0 && (resp.Timings.DraftN == nil || *resp.Timings.DraftN != tc.draftN) {
				t.Errorf("draft_n %v, want %d", resp.Timings.DraftN, tc.draftN)
			}

			// Native stream: content events, then one stop event with timings.
			sev, cev := events(sb), events(readCapture(t, tc.run+"-completion-stream.txt"))
			if len(sev) != len(cev) || len(sev)-1 != tc.streamToks {
				t.Errorf("stream has %d events, capture %d, want %d content events", len(sev), len(cev), tc.streamToks)
			}
			if g, w := keyPaths(t, sev[len(sev)-1]), keyPaths(t, cev[len(cev)-1]); !slices.Equal(g, w) {
				t.Errorf("stream stop event keys differ:\n got %v\nwant %v", g, w)
			}
			if g, w := topKeys(t, sev[0]), topKeys(t, cev[0]); !slices.Equal(g, w) {
				t.Errorf("stream token event keys %v, capture %v", g, w)
			}

			// OpenAI stream: chunks, a final chunk with usage+timings, [DONE].
			oev, ocap := events(ob), events(readCapture(t, tc.run+"-v1-completions-stream.txt"))
			if len(oev) != len(ocap) || string(oev[len(oev)-1]) != "[DONE]" {
				t.Errorf("/v1/completions stream: %d events (capture %d), last %q", len(oev), len(ocap), oev[len(oev)-1])
			}
			if g, w := keyPaths(t, oev[len(oev)-2]), keyPaths(t, ocap[len(ocap)-2]); !slices.Equal(g, w) {
				t.Errorf("final chunk keys differ:\n got %v\nwant %v", g, w)
			}
			if g, w := topKeys(t, oev[len(oev)-2]), topKeys(t, ocap[len(ocap)-2]); !slices.Equal(g, w) {
				t.Errorf("final chunk key order %v, capture %v", g, w)
			}

			// After: /slots and /metrics.
			_, sa := get(t, f.base+"/slots")
			if g, w := keyPaths(t, sa), keyPaths(t, readCapture(t, tc.run+"-slots-after.json")); !slices.Equal(g, w) {
				t.Errorf("/slots after key set differs:\n got %v\nwant %v", g, w)
			}
			var slots []struct {
				Speculative bool           `json:"speculative"`
				Params      map[string]any `json:"params"`
			}
			if err := json.Unmarshal(sa, &slots); err != nil {
				t.Fatal(err)
			}
			for _, s := range slots {
				if s.Speculative != tc.slotSpec {
					t.Errorf("slot speculative %v, want %v", s.Speculative, tc.slotSpec)
				}
				if s.Params == nil {
					continue
				}
				v, ok := s.Params["speculative.n_max"]
				if tc.slotNMax == 0 && ok {
					t.Errorf("slot params have speculative.n_max %v", v)
				}
				if tc.slotNMax != 0 && v != float64(tc.slotNMax) {
					t.Errorf("slot params speculative.n_max %v, want %d", v, tc.slotNMax)
				}
			}
			_, ma := get(t, f.base+"/metrics")
			if g, w := string(ma), string(readCapture(t, tc.run+"-metrics-after.txt")); !slices.Equal(metricNames(g), metricNames(w)) {
				t.Errorf("/metrics after names %v, capture %v", metricNames(g), metricNames(w))
			}
			if n := strings.Count(string(ma), `spec_decode_num_accepted_tokens_per_pos_total{position=`); n != tc.positions {
				t.Errorf("%d per-position labels, want %d", n, tc.positions)
			}
			if tc.run == "new-spec" && !strings.Contains(string(ma), "llamacpp:spec_decode_num_draft_tokens_total 33\n") {
				t.Errorf("draft token counter:\n%s", ma)
			}

			if code := f.stop(); code != 0 {
				t.Errorf("exit %d after SIGTERM", code)
			}
			log := f.stderr.String()
			for _, want := range []string{"listening on http://127.0.0.1:", "cleaning up before exit"} {
				if !strings.Contains(log, want) {
					t.Errorf("stderr lacks %q:\n%s", want, log)
				}
			}
			if strings.Contains(log, "loading draft model 'draft.gguf'") != slices.Contains(tc.args, "-md") {
				t.Errorf("stderr draft-model line mismatch:\n%s", log)
			}
			if tc.draftN > 0 && !strings.Contains(log, "draft acceptance") {
				t.Errorf("stderr lacks the acceptance line:\n%s", log)
			}
		})
	}
}

// metricNames lists the sample names (labels dropped) in order of first use.
func metricNames(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, _, _ := strings.Cut(l, " ")
		name, _, _ = strings.Cut(name, "{")
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

func TestLoadingPhase(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := make(chan string, 1)
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-m", "big.gguf", "--host", "127.0.0.1", "--port", "0", "--metrics"},
			[]string{"FAKELLAMA_LOAD_MS=400"}, io.Discard, io.Discard, func(a string) { addr <- a })
	}()
	base := "http://" + <-addr
	for _, p := range []string{"/health", "/props", "/slots", "/v1/models", "/metrics"} {
		code, b := get(t, base+p)
		if code != 503 || string(b) != LoadingBody {
			t.Errorf("%s while loading: %d %s", p, code, b)
		}
	}
	seq := string(readCapture(t, "new-slowload-health-sequence.txt"))
	if !strings.Contains(seq, LoadingBody) {
		t.Fatal("LoadingBody is not the captured 503 body")
	}
	waitReady(t, base)
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
}

func TestPacing(t *testing.T) {
	f := startFake(t, []string{"FAKELLAMA_TOKENS_PER_S=200"}, "-m", "t.gguf")
	start := time.Now()
	post(t, f.base+"/completion", `{"prompt":"a","n_predict":20,"stream":false}`)
	if el := time.Since(start); el < 80*time.Millisecond {
		t.Errorf("20 tokens at 200/s took %s", el)
	}
}

func TestEnvConfiguresServer(t *testing.T) {
	// LLAMA_ARG_SPEC_TYPE and LLAMA_ARG_SPEC_DRAFT_N_MAX work like their flags.
	f := startFake(t, []string{"LLAMA_ARG_SPEC_TYPE=draft-simple", "LLAMA_ARG_SPEC_DRAFT_N_MAX=5", "LLAMA_ARG_SPEC_DRAFT_MODEL=d.gguf", "LLAMA_ARG_ENDPOINT_METRICS=1"}, "-m", "t.gguf")
	post(t, f.base+"/completion", plainReq)
	_, m := get(t, f.base+"/metrics")
	if n := strings.Count(string(m), "per_pos_total{position="); n != 5 {
		t.Errorf("%d positions, want 5:\n%s", n, m)
	}
}
