package sim

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// perPos reads S(k) = per-position count / cycles from /metrics.
func perPos(t *testing.T, r *running) []float64 {
	t.Helper()
	_, m := r.get(t, "/metrics")
	cyc := regexp.MustCompile(`(?m)^llamacpp:spec_decode_num_drafts_total (\d+)$`).FindStringSubmatch(string(m))
	if cyc == nil {
		t.Fatalf("no cycles:\n%s", m)
	}
	n, _ := strconv.ParseFloat(cyc[1], 64)
	var s []float64
	for _, l := range regexp.MustCompile(`per_pos_total\{position="\d+"\} (\d+)`).FindAllStringSubmatch(string(m), -1) {
		c, _ := strconv.ParseFloat(l[1], 64)
		s = append(s, c/n)
	}
	return s
}

// A prompt's profile marker sets S(k) by position, whatever the width:
// the counters over many requests come within a few points of the profile.
func TestProfileMarker(t *testing.T) {
	for _, name := range ProfileNames() {
		for _, w := range []int{4, 9} {
			t.Run(fmt.Sprintf("%s/%d", name, w), func(t *testing.T) {
				r := startSim(t, testConfig(dflash, w))
				for i := range 30 {
					r.post(t, "/completion", fmt.Sprintf(`{"prompt":"[sim-profile:%s] request %d","n_predict":200}`, name, i))
				}
				got := perPos(t, r)
				if len(got) != w-1 {
					t.Fatalf("%d positions", len(got))
				}
				for k, s := range got {
					if want := Profiles[name][k]; math.Abs(s-want) > 0.05 {
						t.Errorf("S(%d) = %.3f, want %.3f (%v)", k+1, s, want, got)
					}
				}
			})
		}
	}
	// No marker: the cost model's table (the GB10 default) as before.
	r := startSim(t, testConfig(dflash, 4))
	r.post(t, "/completion", `{"prompt":"[sim-profile:nosuch] x","n_predict":200}`)
	if s := perPos(t, r); math.Abs(s[0]-0.9) < 0.05 {
		t.Errorf("an unknown marker was used: %v", s)
	}
}

func TestProfileFlag(t *testing.T) {
	cfg, err := ParseArgs([]string{"-m", "m", "--sim-profile", "collapse"})
	if err != nil || len(cfg.Cost.Accept) != 16 || cfg.Cost.Accept[3] != 0.03 {
		t.Fatalf("%v %v", cfg.Cost.Accept, err)
	}
	if e := cfg.Cost.EmittedPerVerify(5); math.Abs(e-(1+0.95+0.9025+0.857375+0.03)) > 1e-9 {
		t.Errorf("emitted(5) = %v", e)
	}
	_, err = ParseArgs([]string{"-m", "m", "--sim-profile", "steep"})
	if err == nil || !strings.Contains(err.Error(), `--sim-profile: "steep" is not a profile (want one of collapse, flat, geometric)`) {
		t.Errorf("err = %v", err)
	}
}

// A token-array prompt after a cached prefix evaluates only the new tokens,
// at the verify cost of that many rows: the modeled cost, where the host's
// timers overshoot each sleep by a millisecond (the probe read rows 1-4 as
// 4.2 ms on the real clock, the model's 3.2-4.0).
func TestTokenArrayPromptCache(t *testing.T) {
	cfg := testConfig(dflash, 4)
	cfg.Cost.Noise = 0
	cfg.Clock = &fakeClock{now: time.Unix(1_800_000_000, 0), late: time.Millisecond}
	r := startSim(t, cfg)
	ids := func(prefix, fresh int, base int) string {
		var p []string
		for i := range prefix {
			p = append(p, strconv.Itoa(1000+i))
		}
		for i := range fresh {
			p = append(p, strconv.Itoa(base+i))
		}
		return "[" + strings.Join(p, ",") + "]"
	}
	type reply struct {
		TokensEvaluated int `json:"tokens_evaluated"`
		Timings         struct {
			CacheN   int     `json:"cache_n"`
			PromptN  int     `json:"prompt_n"`
			PromptMS float64 `json:"prompt_ms"`
		} `json:"timings"`
	}
	send := func(prompt string, cache bool) reply {
		_, b := r.post(t, "/completion", fmt.Sprintf(`{"prompt":%s,"n_predict":1,"cache_prompt":%v}`, prompt, cache))
		var out reply
		mustJSON(t, string(b), &out)
		return out
	}
	first := send(ids(64, 1, 9000), true)
	if first.Timings.PromptN != 65 || first.Timings.CacheN != 0 {
		t.Errorf("first: %+v", first)
	}
	for _, w := range []int{1, 3, 8, 16} {
		got := send(ids(64, w, 2000+10*w), true)
		if got.Timings.PromptN != w || got.Timings.CacheN != 64 || got.TokensEvaluated != 64+w {
			t.Errorf("W=%d: %+v", w, got)
		}
		if want := cfg.Cost.VerifyRowsMS(w); math.Abs(got.Timings.PromptMS-want) > 1e-6 {
			t.Errorf("W=%d: prompt_ms %v, want the verify cost %v", w, got.Timings.PromptMS, want)
		}
	}
	// Text traffic in between does not evict the prefix (host prompt cache).
	r.post(t, "/completion", `{"prompt":"hello world","n_predict":4}`)
	if got := send(ids(64, 2, 7000), true); got.Timings.PromptN != 2 {
		t.Errorf("after other traffic: %+v", got)
	}
	if got := send(ids(64, 2, 7100), false); got.Timings.PromptN != 66 {
		t.Errorf("cache_prompt false: %+v", got)
	}
	if got := send(ids(64, 2, 7100), true); got.Timings.PromptN != 1 {
		t.Errorf("fully cached prompt re-evaluates its last token: %+v", got)
	}
}

func TestChatCompletions(t *testing.T) {
	r := startSim(t, testConfig(dflash, 4))
	code, b := r.post(t, "/v1/chat/completions", `{"model":"x","messages":[{"role":"user","content":"hi"}],"max_tokens":8}`)
	var resp struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
		Simulated bool `json:"simulated"`
	}
	mustJSON(t, string(b), &resp)
	if code != 200 || resp.Object != "chat.completion" || len(resp.Choices) != 1 || resp.Choices[0].Message.Role != "assistant" ||
		resp.Choices[0].Message.Content != referenceText("user: hi\n", 8) || resp.Choices[0].FinishReason != "length" ||
		resp.Usage.CompletionTokens != 8 || !resp.Simulated {
		t.Errorf("%d %s", code, b)
	}

	code, b = r.post(t, "/v1/chat/completions", `{"model":"x","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":5,"stream":true}`)
	data := sseData(t, b)
	if code != 200 || len(data) != 1+5+1+1 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("%d %d events: %s", code, len(data), b)
	}
	var text strings.Builder
	for i, d := range data[:len(data)-1] {
		var ch struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Role    string  `json:"role"`
					Content *string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		mustJSON(t, d, &ch)
		c := ch.Choices[0]
		switch {
		case ch.Object != "chat.completion.chunk":
			t.Errorf("event %d object %q", i, ch.Object)
		case i == 0 && c.Delta.Role != "assistant":
			t.Errorf("first event %s", d)
		case i == len(data)-2 && (c.FinishReason == nil || *c.FinishReason != "length"):
			t.Errorf("last event %s", d)
		case i > 0 && i < len(data)-2 && c.Delta.Content != nil:
			text.WriteString(*c.Delta.Content)
		}
	}
	if text.String() != referenceText("user: hi\n", 5) {
		t.Errorf("streamed %q", text.String())
	}
	for _, body := range []string{`{"model":"x","messages":[]}`, `{"model":"x","messages":[{"role":"user","content":7}]}`, `{`} {
		if code, b := r.post(t, "/v1/chat/completions", body); code != 400 || !strings.Contains(string(b), "invalid_request_error") {
			t.Errorf("%s: %d %s", body, code, b)
		}
	}
}

// --sim-record makes a committed record the model: each width's cost per
// cycle and the widest arm's acceptance by position.
func TestSimRecord(t *testing.T) {
	const rec = "../../docs/benchmark_results/h200-llamacpp-d32676d-q8_0-pair1234-2026-11-30.json"
	cfg, err := ParseArgs([]string{"-m", "m", "--sim-record", rec})
	if err != nil {
		t.Fatal(err)
	}
	r, err := LoadRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	var widest []float64
	for _, a := range r.Arms {
		switch {
		case a.Kind == "classic" && cfg.Cost.ClassicMS != a.Cost.MSPerCycle:
			t.Errorf("classic %v, want %v", cfg.Cost.ClassicMS, a.Cost.MSPerCycle)
		case a.Kind == "width" && cfg.Cost.RoundMS(a.Width) != a.Cost.MSPerCycle:
			t.Errorf("width %d: round %v ms, want %v", a.Width, cfg.Cost.RoundMS(a.Width), a.Cost.MSPerCycle)
		}
		if len(a.Acceptance.ByPosition) > len(widest) {
			widest = a.Acceptance.ByPosition
		}
	}
	if len(cfg.Cost.Accept) != len(widest) || len(widest) != 16 {
		t.Fatalf("accept %v", cfg.Cost.Accept)
	}
	for i, s := range cfg.Cost.Accept {
		if s > widest[i]+1e-12 || (i > 0 && s > cfg.Cost.Accept[i-1]) {
			t.Errorf("S(%d) = %v from %v", i+1, s, widest[i])
		}
	}
	for _, c := range []struct{ args, want string }{
		{"--sim-record ../../docs/benchmark_results/draft-block-width-default-gb10-2026-09-20.json", "no acceptance.by_position"},
		{"--sim-record /nonexistent.json", "--sim-record: open /nonexistent.json"},
		{"--sim-record doc.go", "not a bench record"},
	} {
		_, err := ParseArgs(append([]string{"-m", "m"}, strings.Fields(c.args)...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want ~%q", c.args, err, c.want)
		}
	}
}

// With --sim-slots 2 two requests decode together and each round verifies
// both sequences' rows: 8 rows at width 4, twice the 4-row cost here. On
// the real clock, since the fake one adds concurrent waits up.
func TestSlotsRowsAddUp(t *testing.T) {
	perRound := func(slots int) []float64 {
		cfg := testConfig(dflash, 4)
		cfg.Clock = SystemClock
		cfg.Slots = slots
		cfg.Cost.Noise, cfg.Cost.DraftMS, cfg.Cost.DraftTokenMS = 0, 0, 0
		cfg.Cost.Verify = map[int]float64{2: 10, 4: 20, 8: 40}
		r := startSim(t, cfg)
		out := make(chan float64, 2)
		for i := range 2 {
			go func() {
				_, b := r.post(t, "/completion", fmt.Sprintf(`{"prompt":"request %d","n_predict":24}`, i))
				var resp struct{ Timings benchTimings }
				mustJSON(t, string(b), &resp)
				out <- resp.Timings.PredictedMS / float64(*resp.Timings.DraftRounds)
			}()
		}
		return []float64{<-out, <-out}
	}
	one, two := perRound(1), perRound(2)
	for _, ms := range one {
		if ms < 19 || ms > 28 {
			t.Errorf("one slot: %.1f ms per round, want about 20", ms)
		}
	}
	if first := min(two[0], two[1]); first < 30 { // the first to finish ran with both active
		t.Errorf("two slots: %.1f and %.1f ms per round, want one near 40", two[0], two[1])
	}
	if _, err := ParseArgs([]string{"-m", "m", "--sim-slots", "0"}); err == nil || !strings.Contains(err.Error(), "--sim-slots: 0 is out of range 1-64") {
		t.Errorf("err = %v", err)
	}
}
