package sim

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

const dflash = "/models/qwen3.5-4b-dflash"

// TestV1CompletionsModelOptional: as on llama-server, a request without
// "model" is served by the loaded model, named in the reply.
func TestV1CompletionsModelOptional(t *testing.T) {
	r := startSim(t, testConfig(dflash, 4))
	for _, route := range []string{"/v1/completions", "/v1/chat/completions"} {
		body := `{"prompt":"hello world","max_tokens":4}`
		if strings.Contains(route, "chat") {
			body = `{"messages":[{"role":"user","content":"hello world"}],"max_tokens":4}`
		}
		code, got := r.post(t, route, body)
		if code != 200 {
			t.Fatalf("%s: status %d, want 200: %s", route, code, got)
		}
		var reply struct {
			Model string `json:"model"`
		}
		mustJSON(t, string(got), &reply)
		if reply.Model != "qwen3.5-4b-4bit" {
			t.Errorf("%s: model %q, want the loaded one", route, reply.Model)
		}
	}
	if code, _ := r.post(t, "/v1/completions", `{"model":"x","prompt":`); code != 400 {
		t.Errorf("bad JSON: status %d, want 400", code)
	}
	if code, _ := r.post(t, "/v1/completions", `{"model":"x"}`); code != 400 {
		t.Errorf("no prompt: status %d, want 400", code)
	}
}

// A streamed /v1/completions read as the bench reads it: text from the
// chunks, and usage and timings from the finish chunk before [DONE].
func TestV1CompletionsStream(t *testing.T) {
	r := startSim(t, testConfig(dflash, 4))
	code, body := r.post(t, "/v1/completions",
		`{"model":"x","prompt":"def retry(fn):","max_tokens":50,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	data := sseData(t, body)
	if data[len(data)-1] != "[DONE]" {
		t.Fatalf("last event %q, want [DONE]", data[len(data)-1])
	}
	var text strings.Builder
	var final struct {
		Choices []struct {
			Text         string  `json:"text"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Object string `json:"object"`
		Model  string `json:"model"`
		Usage  *struct {
			CompletionTokens int `json:"completion_tokens"`
			PromptTokens     int `json:"prompt_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
		Timings *benchTimings `json:"timings"`
	}
	for i, d := range data[:len(data)-1] {
		final.Usage, final.Timings = nil, nil
		mustJSON(t, d, &final)
		if final.Object != "text_completion" || final.Model != "qwen3.5-4b-4bit" {
			t.Fatalf("chunk %d: %s", i, d)
		}
		text.WriteString(final.Choices[0].Text)
		last := i == len(data)-2
		if (final.Choices[0].FinishReason != nil) != last || (final.Usage != nil) != last {
			t.Fatalf("chunk %d: finish_reason/usage only on the last chunk: %s", i, d)
		}
	}
	if len(data) != 50+2 {
		t.Errorf("%d events, want one per token plus finish and [DONE]", len(data))
	}
	if *final.Choices[0].FinishReason != "length" {
		t.Errorf("finish_reason %q", *final.Choices[0].FinishReason)
	}
	u := final.Usage
	if u.CompletionTokens != 50 || u.PromptTokens != 3 || u.TotalTokens != 53 {
		t.Errorf("usage %+v", *u)
	}
	checkDraftTimings(t, final.Timings, 4, 50)
	if got := referenceText("def retry(fn):", 50); text.String() != got {
		t.Errorf("streamed text %q, want %q", text.String(), got)
	}
}

// checkDraftTimings checks the draft fields' arithmetic for n tokens at w.
func checkDraftTimings(t *testing.T, tm *benchTimings, w, n int) {
	t.Helper()
	if tm == nil || tm.DraftN == nil || tm.DraftNAccepted == nil || tm.DraftRounds == nil {
		t.Fatalf("timings without draft fields: %+v", tm)
	}
	rounds := *tm.DraftRounds
	if tm.PredictedN != n || rounds < (n-1+w-1)/w || *tm.DraftN != rounds*(w-1) || *tm.DraftNAccepted != n-1-rounds {
		t.Errorf("timings %+v: rounds=%d draft_n=%d accepted=%d", *tm, rounds, *tm.DraftN, *tm.DraftNAccepted)
	}
	if tm.PredictedMS <= 0 || tm.PredictedPerSecond <= 0 {
		t.Errorf("no decode time: %+v", *tm)
	}
	if want := float64(tm.PredictedN) / tm.PredictedMS * 1000; abs(tm.PredictedPerSecond-want) > 1e-6*want {
		t.Errorf("predicted_per_second %v, want n/ms = %v", tm.PredictedPerSecond, want)
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// referenceText is the text the sim must produce for prompt, whatever the width.
func referenceText(prompt string, n int) string {
	ts := newTokenStream(prompt)
	var b strings.Builder
	for range n {
		b.WriteString(ts.next().Text)
	}
	return b.String()
}

func TestV1CompletionsNonStream(t *testing.T) {
	r := startSim(t, testConfig(dflash, 3))
	code, body := r.post(t, "/v1/completions", `{"model":"x","prompt":["hello","world"],"max_tokens":20}`)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	var resp struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
		Timings   *benchTimings `json:"timings"`
		Simulated bool          `json:"simulated"`
	}
	mustJSON(t, string(body), &resp)
	if resp.Choices[0].FinishReason != "length" || resp.Usage.CompletionTokens != 20 || !resp.Simulated {
		t.Errorf("response %s", body)
	}
	if resp.Choices[0].Text != referenceText("hello world", 20) {
		t.Errorf("text %q", resp.Choices[0].Text)
	}
	checkDraftTimings(t, resp.Timings, 3, 20)
}

// The native stream: one event per token, then "stop":true with timings, and
// no [DONE] (internal/fakellama/testdata/new-spec-completion-stream.txt).
func TestNativeCompletion(t *testing.T) {
	r := startSim(t, testConfig(dflash, 16))
	code, body := r.post(t, "/completion", `{"prompt":"hello world","n_predict":16,"temperature":0,"stream":true}`)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	data := sseData(t, body)
	if len(data) != 17 {
		t.Fatalf("%d events, want 16 tokens + stop", len(data))
	}
	var text strings.Builder
	for i, d := range data[:16] {
		var ev struct {
			Content         string `json:"content"`
			Tokens          []int  `json:"tokens"`
			Stop            bool   `json:"stop"`
			TokensPredicted int    `json:"tokens_predicted"`
		}
		mustJSON(t, d, &ev)
		if ev.Stop || len(ev.Tokens) != 1 || ev.TokensPredicted != i+1 {
			t.Errorf("event %d: %s", i, d)
		}
		text.WriteString(ev.Content)
	}
	var final struct {
		Stop            bool          `json:"stop"`
		TokensPredicted int           `json:"tokens_predicted"`
		StopType        string        `json:"stop_type"`
		Timings         *benchTimings `json:"timings"`
	}
	mustJSON(t, data[16], &final)
	if !final.Stop || final.TokensPredicted != 16 || final.StopType != "limit" {
		t.Errorf("final %s", data[16])
	}
	checkDraftTimings(t, final.Timings, 16, 16)
	if *final.Timings.DraftKind != "dflash" {
		t.Errorf("draft_kind %q", *final.Timings.DraftKind)
	}

	code, body = r.post(t, "/completion", `{"prompt":"hello world","n_predict":16}`)
	var whole struct {
		Content string        `json:"content"`
		Stop    bool          `json:"stop"`
		Timings *benchTimings `json:"timings"`
	}
	mustJSON(t, string(body), &whole)
	if code != 200 || !whole.Stop || whole.Content != text.String() {
		t.Errorf("non-stream %d %s, want content %q", code, body, text.String())
	}
	checkDraftTimings(t, whole.Timings, 16, 16)

	logs := r.stderr.String()
	for _, re := range []string{
		`(?m)^DFlash diagnostics block_size=16 rounds=\d+ proposed_tokens=\d+ accepted_tokens=\d+ acceptance_rate=[0-9.]+ emitted_per_verify=[0-9.]+ .*draft_ms=[0-9.]+ verify_ms=[0-9.]+ target_argmax_sync_ms=[0-9.]+ decode_ms=[0-9.]+ simulated=true$`,
		`(?m)^Speculative burst completed prompt_tokens=3 generated_tokens=16 burst_ms=\d+ simulated=true$`,
	} {
		if !regexp.MustCompile(re).MatchString(logs) {
			t.Errorf("stderr lacks %s:\n%s", re, logs)
		}
	}
}

// Greedy text is the same at every width, classic included, and across runs.
func TestTextIdenticalAcrossWidths(t *testing.T) {
	var texts []string
	for _, w := range []int{2, 16, 0} {
		draft := dflash
		if w == 0 {
			draft = ""
		}
		r := startSim(t, testConfig(draft, w))
		_, body := r.post(t, "/v1/completions", `{"model":"x","prompt":"for attempt in range(3):","max_tokens":64}`)
		var resp struct {
			Choices []struct{ Text string } `json:"choices"`
		}
		mustJSON(t, string(body), &resp)
		texts = append(texts, resp.Choices[0].Text)
	}
	if texts[0] == "" || texts[0] != texts[1] || texts[0] != texts[2] {
		t.Errorf("texts differ across widths:\n%q\n%q\n%q", texts[0], texts[1], texts[2])
	}
	if other := referenceText("another prompt", 64); other == texts[0] {
		t.Error("different prompts gave the same text")
	}
}

func TestStartupLines(t *testing.T) {
	cases := []struct {
		name string
		cfg  func() Config
		want []string
	}{
		{"override", func() Config { return testConfig(dflash, 4) }, []string{
			"Starting BatchScheduler (max_batch_size=1, max_queue_depth=32, prefill_chunk_size=512, max_batch_prefill=4, decode_storage=auto, speculative=dflash (drafter=/models/qwen3.5-4b-dflash, block_size=4, block_size_from=operator override, explicit_kind=true)) [speclaunch sim: simulated engine, not a measurement]",
			"MTP exactness probe passed: verify block is byte-identical to the single-token chain block_size=4 [speclaunch sim: simulated engine, not a measurement]",
		}},
		{"kind default", func() Config { c := testConfig(dflash, 0); c.DraftKind = ""; return c }, []string{
			"speculative=dflash (drafter=/models/qwen3.5-4b-dflash, block_size=16, block_size_from=per-kind default (sim), explicit_kind=false))",
		}},
		{"mtp", func() Config { c := testConfig(dflash, 0); c.DraftKind = "mtp"; return c }, []string{
			"speculative=mtp (drafter=/models/qwen3.5-4b-dflash, block_size=4, block_size_from=per-kind default (sim), explicit_kind=true))",
		}},
		{"no drafter", func() Config { return testConfig("", 0) }, []string{
			"decode_storage=auto, speculative=off) [speclaunch sim",
		}},
		{"four slots", func() Config { c := testConfig(dflash, 4); c.Slots = 4; return c }, []string{
			"Starting BatchScheduler (max_batch_size=4, max_queue_depth=32,",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := startSim(t, c.cfg())
			logs := r.stderr.String()
			for _, w := range c.want {
				if !strings.Contains(logs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, logs)
				}
			}
			if !strings.Contains(logs, "Server listening on "+r.base+" ") {
				t.Errorf("no listening line with the real address:\n%s", logs)
			}
		})
	}
}

// A declined probe: the decline line, classic decode, no draft fields, no
// spec counters.
func TestDecline(t *testing.T) {
	cfg := testConfig(dflash, 4)
	cfg.Decline = true
	r := startSim(t, cfg)
	logs := r.stderr.String()
	if !strings.Contains(logs, "MTP declined: simulated decline. Falling back to classic decode. block_size=4\n") ||
		!strings.Contains(logs, "speculative=off (declined)") {
		t.Errorf("no decline lines:\n%s", logs)
	}
	_, body := r.post(t, "/completion", `{"prompt":"hello world","n_predict":8}`)
	if strings.Contains(string(body), "draft_n") {
		t.Errorf("declined server reported draft fields: %s", body)
	}
	_, body = r.post(t, "/v1/completions", `{"model":"x","prompt":"hello world","max_tokens":8,"stream":true}`)
	if strings.Contains(string(body), "draft_") {
		t.Errorf("declined server reported draft fields: %s", body)
	}
	if strings.Contains(r.stderr.String(), "DFlash diagnostics") {
		t.Error("declined server logged DFlash diagnostics")
	}
	_, m := r.get(t, "/metrics")
	if strings.Contains(string(m), "per_pos") || !strings.Contains(string(m), "llamacpp:spec_decode_num_drafts_total 0\n") {
		t.Errorf("metrics:\n%s", m)
	}
}

func TestMetricsPositionLabels(t *testing.T) {
	for _, w := range []int{2, 4, 16} {
		r := startSim(t, testConfig(dflash, w))
		r.post(t, "/completion", `{"prompt":"hello world","n_predict":40}`)
		_, m := r.get(t, "/metrics")
		labels := regexp.MustCompile(`llamacpp:spec_decode_num_accepted_tokens_per_pos_total\{position="(\d+)"\} (\d+)`).FindAllStringSubmatch(string(m), -1)
		if len(labels) != w-1 {
			t.Errorf("w=%d: %d position labels, want %d:\n%s", w, len(labels), w-1, m)
		}
		sum := 0
		for i, l := range labels {
			if l[1] != fmt.Sprint(i) {
				t.Errorf("w=%d: label %d is position %s", w, i, l[1])
			}
			var c int
			fmt.Sscan(l[2], &c)
			sum += c
		}
		drafts := regexp.MustCompile(`(?m)^llamacpp:spec_decode_num_drafts_total (\d+)$`).FindStringSubmatch(string(m))
		accepted := regexp.MustCompile(`(?m)^llamacpp:spec_decode_num_accepted_tokens_total (\d+)$`).FindStringSubmatch(string(m))
		if drafts == nil || drafts[1] == "0" || accepted == nil || accepted[1] != fmt.Sprint(sum) {
			t.Errorf("w=%d: counters disagree with per-position sum %d:\n%s", w, sum, m)
		}
		if !strings.Contains(string(m), "speclaunch_sim_simulated 1\n") {
			t.Error("metrics do not say they are simulated")
		}
	}
}

func TestModelsAndProps(t *testing.T) {
	r := startSim(t, testConfig(dflash, 4))
	code, body := r.get(t, "/v1/models")
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID        string `json:"id"`
			OwnedBy   string `json:"owned_by"`
			Simulated bool   `json:"simulated"`
		} `json:"data"`
	}
	mustJSON(t, string(body), &models)
	if code != 200 || models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != "qwen3.5-4b-4bit" ||
		models.Data[0].OwnedBy != "speclaunch-sim" || !models.Data[0].Simulated {
		t.Errorf("/v1/models %d %s", code, body)
	}
	code, body = r.get(t, "/props")
	var props struct {
		Speculative struct {
			NMax      int    `json:"n_max"`
			BlockSize int    `json:"block_size"`
			Draft     string `json:"draft_model"`
		} `json:"speculative"`
		Simulated bool `json:"simulated"`
	}
	mustJSON(t, string(body), &props)
	if code != 200 || props.Speculative.NMax != 3 || props.Speculative.BlockSize != 4 ||
		props.Speculative.Draft != "qwen3.5-4b-dflash" || !props.Simulated {
		t.Errorf("/props %d %s", code, body)
	}
	if code, body := r.get(t, "/health"); code != 200 || string(body) != `{"status":"ok"}` {
		t.Errorf("/health %d %s", code, body)
	}
}

// Same seed, same timings sequence (fake clock, so exact); another seed
// gives other timings but the same text.
func TestNoiseIsSeeded(t *testing.T) {
	run := func(seed int64) (ms []float64, texts []string) {
		cfg := testConfig(dflash, 4)
		cfg.Seed = seed
		r := startSim(t, cfg)
		for range 3 {
			_, body := r.post(t, "/completion", `{"prompt":"hello world","n_predict":64}`)
			var resp struct {
				Content string       `json:"content"`
				Timings benchTimings `json:"timings"`
			}
			mustJSON(t, string(body), &resp)
			ms = append(ms, resp.Timings.PredictedMS)
			texts = append(texts, resp.Content)
		}
		return ms, texts
	}
	a, ta := run(1)
	b, _ := run(1)
	c, tc := run(2)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("same seed, different timings: %v vs %v", a, b)
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Errorf("different seeds, same timings: %v", a)
	}
	if a[0] == a[1] && a[1] == a[2] {
		t.Errorf("noise does not vary by request: %v", a)
	}
	if fmt.Sprint(ta) != fmt.Sprint(tc) {
		t.Error("seed changed the text")
	}
}

// Drift slows request k by 1 + Drift·k.
func TestDrift(t *testing.T) {
	cfg := testConfig("", 0)
	cfg.Cost.Noise = 0
	cfg.Drift = 0.5
	r := startSim(t, cfg)
	var ms []float64
	for range 3 {
		_, body := r.post(t, "/completion", `{"prompt":"hello world","n_predict":11}`)
		var resp struct{ Timings benchTimings }
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, resp.Timings.PredictedMS)
	}
	base := 10 * cfg.Cost.ClassicMS
	for k, got := range ms {
		if want := base * (1 + 0.5*float64(k)); abs(got-want) > 0.01 {
			t.Errorf("request %d: predicted_ms %.3f, want %.3f", k, got, want)
		}
	}
}
