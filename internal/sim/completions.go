package sim

import (
	"fmt"
	"net/http"
)

// v1Completions serves POST /v1/completions in the OpenAI text_completion
// shape, with llama-server's extras on the last chunk: usage (always, as
// llama-server does, whether or not stream_options.include_usage is set) and
// timings.
func (s *server) v1Completions(w http.ResponseWriter, r *http.Request) {
	req, prompt, n, derr := parseRequest(r)
	if derr != nil {
		writeDecodeError(w, derr)
		return
	}
	p, release, err := s.acquire(r)
	if err != nil {
		abort()
	}
	defer release()
	p.prompt = s.promptCache(req)
	id := fmt.Sprintf("cmpl-sim-%d", p.reqNum)
	created := s.clk.Now().Unix()
	chunk := func(text string, finish *string) v1Chunk {
		return v1Chunk{
			Choices: []v1Choice{{Text: text, FinishReason: finish}},
			Created: created, Model: s.model, SystemFingerprint: "speclaunch-sim",
			Object: "text_completion", ID: id,
		}
	}

	var rc *http.ResponseController
	emit := func([]token) error { return nil }
	if req.Stream {
		rc = startSSE(w)
		emit = func(b []token) error {
			for _, t := range b {
				if err := sse(w, chunk(t.Text, nil)); err != nil {
					return err
				}
			}
			return rc.Flush()
		}
	}
	res, err := decode(r.Context(), s.clk, p, prompt, n, emit)
	if err != nil {
		abort() // client gone or server stopping
	}
	s.finish(res)

	length := "length"
	final := chunk("", &length)
	if !req.Stream {
		final.Choices[0].Text = res.Text
	}
	final.Usage = &usage{CompletionTokens: res.PredictedN, PromptTokens: res.PromptN, TotalTokens: res.PromptN + res.PredictedN}
	t := newTimings(res, s.kind)
	final.Timings = &t
	final.Simulated = true
	if !req.Stream {
		writeJSON(w, http.StatusOK, final)
		return
	}
	if sse(w, final) == nil {
		fmt.Fprint(w, "data: [DONE]\n\n")
		rc.Flush()
	}
}

// nativeCompletion serves POST /completion in llama-server's native shape:
// one event per token, then a "stop":true event carrying timings; the native
// stream has no [DONE].
func (s *server) nativeCompletion(w http.ResponseWriter, r *http.Request) {
	req, prompt, n, derr := parseRequest(r)
	if derr != nil {
		writeDecodeError(w, derr)
		return
	}
	p, release, err := s.acquire(r)
	if err != nil {
		abort()
	}
	defer release()
	p.prompt = s.promptCache(req)

	var rc *http.ResponseController
	predicted := 0
	promptN := countPromptTokens(prompt)
	if p.prompt != nil {
		promptN = p.prompt.New + p.prompt.Cached
	}
	emit := func([]token) error { return nil }
	if req.Stream {
		rc = startSSE(w)
		emit = func(b []token) error {
			for _, t := range b {
				predicted++
				ev := nativeEvent{Content: t.Text, Tokens: []int{t.ID}, IDSlot: -1, TokensPredicted: predicted, TokensEvaluated: promptN}
				if err := sse(w, ev); err != nil {
					return err
				}
			}
			return rc.Flush()
		}
	}
	res, err := decode(r.Context(), s.clk, p, prompt, n, emit)
	if err != nil {
		abort()
	}
	s.finish(res)

	t := newTimings(res, s.kind)
	final := nativeEvent{
		Tokens: []int{}, Stop: true, IDSlot: 0, Model: s.model,
		TokensPredicted: res.PredictedN, TokensEvaluated: res.PromptN + res.CacheN,
		Prompt: &prompt, StopType: "limit", Timings: &t, Simulated: true,
	}
	if !req.Stream {
		final.Content = res.Text
		writeJSON(w, http.StatusOK, final)
		return
	}
	if sse(w, final) == nil {
		rc.Flush()
	}
}
